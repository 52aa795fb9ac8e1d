"""Semi-joins on the person: keep the rows of people who do (or do not) have rows of
another table of the same population matching a condition.

Accepted as top-level WHERE conjuncts, in these spellings:

    <person id> [NOT] IN (SELECT <person id> FROM <table> [WHERE <row-level condition>])
    [NOT] EXISTS (SELECT ... FROM <table> s WHERE s.<person id> = <outer person id>
                  [AND <row-level condition on s>])

Why this is private: whether a row is kept depends only on its own person's rows in the
other table, so removing a person removes all of their rows on both sides and changes
nobody else's; the per-person bounds of the outer query hold as before. The subquery is
a hash semi-join: it never multiplies a person's rows. Every form is normalised to
``col IN (SELECT s.unit FROM table AS s WHERE (cond) AND s.unit IS NOT NULL)`` (under a
NOT for the negative forms), so that ``NOT IN`` means what it says whatever NULLs the
table holds, and so that equal queries share a cache key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from proxy.catalog import Catalog, TableInfo
from proxy.errors import position_of, unsupported


def _conjuncts(where: exp.Expr) -> list[exp.Expr]:
    return [c.unnest() for c in (where.flatten() if isinstance(where, exp.And) else [where])]


def semi_join_of(node: exp.Expr) -> tuple[exp.In, bool] | None:
    """(the IN node, negated) if ``node`` is a normalised semi-join conjunct."""
    negated = False
    if isinstance(node, exp.Not):
        node, negated = node.this.unnest(), True
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return node, negated
    return None


def semi_joins(select: exp.Select) -> Iterator[tuple[exp.In, bool]]:
    where = select.args.get("where")
    if where is None:
        return
    for conj in _conjuncts(where.this):
        found = semi_join_of(conj)
        if found is not None:
            yield found


def _inner(query: exp.Expr) -> exp.Select | None:
    while isinstance(query, exp.Subquery):
        query = query.this
    return query if isinstance(query, exp.Select) else None


# What a semi-join's subquery may hold: anything else (QUALIFY, a sample, a window, a
# CTE, a join, GROUP BY, LIMIT, ...) can make whether one person's rows are kept depend
# on other people's rows, and is refused. An allow-list, not a list of what is refused:
# QUALIFY and USING SAMPLE slipped past such a list (a probe, 2026-12-02).
_SELECT_PARTS = frozenset({"expressions", "from_", "where"})
_TABLE_PARTS = frozenset({"this", "db", "alias"})
_WRAPPER_PARTS = frozenset({"this"})


def _only(node: exp.Expr, parts: frozenset[str]) -> bool:
    """Whether ``node`` sets no argument outside ``parts``."""
    return all(key in parts for key, value in node.args.items() if value not in (None, [], False))


def _plain_subquery(query: exp.Expr) -> bool:
    """Whether ``query`` is ``(SELECT <items> FROM <table> [AS a] [WHERE ...])``, within
    any number of parentheses that carry nothing of their own."""
    while isinstance(query, exp.Subquery):
        if not _only(query, _WRAPPER_PARTS):
            return False
        query = query.this
    if not isinstance(query, exp.Select) or not _only(query, _SELECT_PARTS):
        return False
    from_ = query.args.get("from_")
    if not isinstance(from_, exp.From):
        return False
    target = from_.this
    return (
        isinstance(target, exp.Table)
        and isinstance(target.this, exp.Identifier)
        and _only(target, _TABLE_PARTS)
        and _only(from_, _WRAPPER_PARTS)
    )


def _exists_to_in(node: exp.Exists) -> exp.Expr:
    """EXISTS (SELECT … FROM t s WHERE s.u = o.u AND cond) -> o.u IN (SELECT s.u FROM t s
    WHERE cond); anything else is refused by the checker later (left as is)."""
    inner = _inner(node.this)
    if inner is None or not _plain_subquery(node.this) or inner.args.get("where") is None:
        return node  # refused as it stands (dropping a LIMIT or GROUP BY changed its meaning)
    from_ = inner.args.get("from_")
    if from_ is None or not isinstance(from_.this, exp.Table):
        return node
    alias = from_.this.alias_or_name.lower()
    link: tuple[exp.Column, exp.Column] | None = None
    rest = []
    for conj in _conjuncts(inner.args["where"].this):
        if link is None and isinstance(conj, exp.EQ):
            a, b = conj.this, conj.expression
            if isinstance(a, exp.Column) and isinstance(b, exp.Column):
                if a.table.lower() == alias and b.table.lower() != alias:
                    link = (a, b)
                    continue
                if b.table.lower() == alias and a.table.lower() != alias:
                    link = (b, a)
                    continue
        rest.append(conj)
    if link is None:
        return node
    mine, outer = link
    subquery = exp.Select(expressions=[mine.copy()], from_=from_.copy())
    if rest:
        subquery = subquery.where(exp.and_(*[r.copy() for r in rest]), copy=False)
    return exp.In(this=outer.copy(), query=exp.Subquery(this=subquery))


def normalize(select: exp.Select) -> exp.Select:
    """Rewrite the semi-join conjuncts of WHERE into the one IN form (in place)."""
    where = select.args.get("where")
    if where is None:
        return select
    parts = []
    for conj in _conjuncts(where.this):
        negated = isinstance(conj, exp.Not)
        body = conj.this.unnest() if negated else conj
        if not isinstance(body, exp.Exists | exp.In):
            # Kept as written: rebuilt as Not(body) without its parentheses, NOT (a OR b)
            # printed as NOT a OR b, a different filter (found by an answer oracle,
            # 2026-12-05: 883 people counted where the query's filter keeps 369).
            parts.append(conj)
            continue
        if isinstance(body, exp.Exists):
            body = _exists_to_in(body)
        if isinstance(body, exp.In) and body.args.get("query") is not None:
            inner = _inner(body.args["query"])
            if inner is not None and len(inner.expressions) == 1:
                unit = inner.expressions[0]
                unit = unit.this if isinstance(unit, exp.Alias) else unit
                not_null = exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))
                old = inner.args.get("where")
                inner.set(
                    "where",
                    exp.Where(
                        this=not_null
                        if old is None
                        else exp.and_(exp.Paren(this=old.this), not_null, copy=False)
                    ),
                )
        parts.append(exp.not_(body, copy=False) if negated else body)
    where.set("this", exp.and_(*parts, copy=False) if len(parts) > 1 else parts[0])
    return select


def in_semi_join(node: exp.Expr, select: exp.Select) -> bool:
    """Whether ``node`` lies inside one of ``select``'s semi-join subqueries."""
    for found, _ in semi_joins(select):
        query = found.args["query"]
        if node is query or any(n is node for n in query.walk()):
            return True
    return False


def check(
    select: exp.Select,
    tables: dict[str, TableInfo],
    catalog: Catalog,
    population: str,
    scalar: Callable[[exp.Expr, str], None],
) -> None:
    """Refuse semi-joins that are not on the person of the query's population, or whose
    subquery is more than a filter of one table by a row-level condition."""
    outer_units = {
        (alias, str(t.policy.unit).lower())
        for alias, t in tables.items()
        if not t.public and t.policy.unit
    }
    for found, _ in semi_joins(select):
        hint = (
            "write WHERE user_id IN (SELECT user_id FROM <table> WHERE <condition>) with the "
            "person id on both sides and one table of the same population inside"
        )
        col = found.this
        inner = _inner(found.args["query"])
        if not (
            isinstance(col, exp.Column) and (col.table.lower(), col.name.lower()) in outer_units
        ):
            raise unsupported(
                "a subquery in WHERE must filter on the person id", hint, position_of(found)
            )
        if inner is None or not _plain_subquery(found.args["query"]):
            raise unsupported(
                "a subquery in WHERE must be a plain filter of one table", hint, position_of(found)
            )
        from_ = inner.args.get("from_")
        target = from_.this if from_ is not None else None
        if not isinstance(target, exp.Table):
            raise unsupported("the subquery must read a table", hint, position_of(found))
        info = catalog.get(target.db or "main", target.name)
        if info is None or info.public or info.policy.population != population:
            raise unsupported(
                "a subquery in WHERE must read a private table of the query's population",
                hint,
                position_of(found),
            )
        if len(inner.expressions) != 1:
            raise unsupported(
                "the subquery must select the person id alone", hint, position_of(found)
            )
        [item] = inner.expressions
        item = item.this if isinstance(item, exp.Alias) else item
        alias = target.alias_or_name.lower()
        if not (
            isinstance(item, exp.Column)
            and item.table.lower() == alias
            and item.name.lower() == str(info.policy.unit).lower()
        ):
            raise unsupported(
                "the subquery must select the person id of its table", hint, position_of(found)
            )
        where = inner.args.get("where")
        if where is not None:
            for c in where.this.find_all(exp.Column):
                if c.table.lower() != alias:
                    raise unsupported(
                        "the subquery's condition may read only its own table",
                        hint,
                        position_of(c),
                    )
            scalar(where.this, "a subquery's WHERE")
