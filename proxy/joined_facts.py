"""Per-person facts joined to a one-row-per-person table, read as the per-person
subquery dpsql answers.

Looker's derived tables, Tableau's FIXED expressions and notebooks write "per user,
then by segment" as a per-person aggregate joined to the people's table on the id::

    SELECT u.plan, AVG(f.n) FROM users u
    JOIN (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) f
      ON f.user_id = u.user_id
    GROUP BY u.plan

dpsql answers the same question with the table's columns inside the subquery, grouped
with the person id (README, "Per-person aggregates")::

    SELECT f.__j_plan, AVG(f.n) FROM
      (SELECT user_id, COUNT(*) AS n, j.plan AS __j_plan FROM prompts
       JOIN users AS j ON j.user_id = user_id GROUP BY user_id, j.plan) f
    GROUP BY f.__j_plan

The two are the same rows: the table has one row per person (declared, and checked on
the data: ``one_row_per_person``), so joining it inside the subquery adds one value per
person and multiplies no row, and an INNER join keeps the people found on both sides
either way. A LEFT join from the people's table would add people with no facts (the
subquery's table holds none of them): not this rule's, so it stays refused with a hint.
Only the query's text changes; every check then applies to the rewritten query.
(A corpus of BI SQL, 2026-12-06: four of its queries had this shape.)
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog import DEFAULT_DB, Catalog, TableInfo

PREFIX = "__j_"  # the names the moved columns take in the subquery


def _people_table(node: exp.Expr, catalog: Catalog) -> TableInfo | None:
    """The one-row-per-person policy table ``node`` names, if it does."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        return None
    info = catalog.get(node.db or DEFAULT_DB, node.name)
    if info is None or info.public or not info.policy.one_row_per_person:
        return None
    return info if info.policy.unit else None


def _facts(node: exp.Expr) -> tuple[exp.Select, str] | None:
    """(the subquery's SELECT, its person-id output) of an aggregate grouped by one
    column that it selects; None for any other FROM item."""
    if not isinstance(node, exp.Subquery) or not isinstance(node.this, exp.Select):
        return None
    body = node.this
    group = body.args.get("group")
    if group is None or len(group.expressions) != 1 or body.args.get("with_"):
        return None
    if any(body.args.get(k) for k in ("distinct", "limit", "offset", "order", "qualify")):
        return None
    key = group.expressions[0]
    if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.this) <= len(body.expressions):
        item = body.expressions[int(key.this) - 1]  # GROUP BY 1: the first item's column
        key = item.this if isinstance(item, exp.Alias) else item
        if isinstance(key, exp.Column):
            group.set("expressions", [key.copy()])
    if not isinstance(key, exp.Column):
        return None
    for item in body.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.name.lower() == key.name.lower():
            return body, item.alias_or_name.lower()
    return None


def _equal_ids(on: exp.Expr, people: str, unit: str, facts: str, fact_id: str) -> bool:
    """Whether ``on`` is exactly ``people.unit = facts.fact_id`` (either way round)."""
    on = on.unnest()
    if not isinstance(on, exp.EQ):
        return False
    sides = {
        (c.table.lower(), c.name.lower())
        for c in (on.this, on.expression)
        if isinstance(c, exp.Column)
    }
    return sides == {(people, unit), (facts, fact_id)}


def _inline_ctes(select: exp.Select) -> None:
    """A CTE read once, as a FROM or JOIN item, written as a subquery there (so that the
    rule sees the one shape)."""
    with_ = select.args.get("with_")
    if with_ is None:
        return
    for cte in list(with_.expressions):
        name = cte.alias.lower()
        reads = [
            t
            for t in select.find_all(exp.Table)
            if not t.db and t.name.lower() == name and isinstance(t.parent, (exp.From, exp.Join))
        ]
        if len(reads) != 1 or any(
            not t.db and t.name.lower() == name and t not in reads
            for t in cte.this.find_all(exp.Table)
        ):
            continue
        table = reads[0]
        alias = table.alias or table.name
        table.replace(
            exp.Subquery(this=cte.this.copy(), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        )
        cte.pop()
    if not with_.expressions:
        select.set("with_", None)


def _qualified(inner: exp.Select) -> bool:
    """Qualify the subquery's own bare columns with its one FROM table (another table
    joins it next, which may share their names); False where it reads more than one."""
    from_ = inner.args.get("from_")
    if (
        not isinstance(from_, exp.From)
        or inner.args.get("joins")
        or not isinstance(from_.this, exp.Table)
    ):
        return all(c.table for c in _own_columns(inner))
    name = from_.this.alias_or_name
    for column in _own_columns(inner):
        if not column.table:
            column.set("table", exp.to_identifier(name))
    return True


def _own_columns(select: exp.Select) -> list[exp.Column]:
    """The columns of ``select`` outside its nested subqueries."""
    nested = {id(n) for sub in select.find_all(exp.Subquery) for n in sub.walk()}
    return [c for c in select.find_all(exp.Column) if id(c) not in nested]


def push(tree: exp.Expr, catalog: Catalog) -> exp.Expr:
    """``tree`` with a top-level join of a one-row-per-person table to a per-person
    aggregate on the person id written as that aggregate with the table's columns
    inside (module text); any other query as it is. In place."""
    if not isinstance(tree, exp.Select):
        return tree
    joins = tree.args.get("joins") or []
    from_ = tree.args.get("from_")
    if len(joins) != 1 or from_ is None:
        return tree
    probe = tree.copy()
    _inline_ctes(probe)
    joins = probe.args.get("joins") or []
    from_ = probe.args.get("from_")
    if not isinstance(from_, exp.From) or len(joins) != 1:
        return tree
    join = joins[0]
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    if kind not in ("", "INNER") or join.args.get("using") or join.args.get("on") is None:
        return tree
    first, second = from_.this, join.this
    for people_node, facts_node, facts_left in ((first, second, False), (second, first, True)):
        info = _people_table(people_node, catalog)
        found = _facts(facts_node)
        if info is None or found is None:
            continue
        # INNER only, or the facts' side keeping its rows (LEFT from the facts): the
        # same LEFT join inside then gives each person's NULL attributes alike.
        if side and not (side == "LEFT" and facts_left):
            continue
        body, fact_id = found
        people = (people_node.alias_or_name).lower()
        facts = (facts_node.alias_or_name).lower()
        unit = str(info.policy.unit).lower()
        if not _equal_ids(join.args["on"], people, unit, facts, fact_id):
            continue
        rewritten = _rewrite(probe, body, people_node, facts_node, info, fact_id, side)
        return rewritten if rewritten is not None else tree
    return tree


def _rewrite(
    select: exp.Select,
    body: exp.Select,
    people_node: exp.Table,
    facts_node: exp.Subquery,
    info: TableInfo,
    fact_id: str,
    side: str,
) -> exp.Select | None:
    people = people_node.alias_or_name.lower()
    facts = facts_node.alias_or_name
    unit = str(info.policy.unit).lower()
    columns = {c.lower() for c in info.column_types}
    inside = {id(n) for n in facts_node.walk()}
    outputs = {item.alias_or_name.lower() for item in body.expressions}
    outside = [c for c in select.find_all(exp.Column) if id(c) not in inside]
    moved: dict[str, str] = {}
    for column in outside:
        if column.find_ancestor(exp.Join) is not None:
            continue  # the ON condition, dropped below
        if column.table.lower() == people:
            name = column.name.lower()
            if name not in columns:
                return None
            if name == unit:
                replacement_id: exp.Expr = exp.column(fact_id, table=facts)
                if column.parent is select and column.arg_key == "expressions":
                    replacement_id = exp.alias_(replacement_id, column.name)
                column.replace(replacement_id)
                continue
            moved.setdefault(name, PREFIX + name)
            replacement: exp.Expr = exp.column(moved[name], table=facts)
            if column.parent is select and column.arg_key == "expressions":
                # a bare select item keeps its output name
                replacement = exp.alias_(replacement, column.name)
            column.replace(replacement)
        elif not column.table:
            # a bare name: the facts' output or the table's column, never both
            name = column.name.lower()
            if name in outputs and name not in columns:
                column.set("table", exp.to_identifier(facts))
            elif name in columns and name not in outputs and name != unit:
                moved.setdefault(name, PREFIX + name)
                bare: exp.Expr = exp.column(moved[name], table=facts)
                if column.parent is select and column.arg_key == "expressions":
                    bare = exp.alias_(bare, column.name)
                column.replace(bare)
            else:
                return None  # a name both sides have: left as written (SQL refuses it)
    inner = body.copy()
    if not _qualified(inner):
        return None
    group = inner.args["group"]
    person = group.expressions[0]
    alias = exp.to_identifier("__j")
    db = people_node.args.get("db")
    people_copy = exp.Table(
        this=people_node.this.copy(),
        db=db.copy() if isinstance(db, exp.Expr) else None,
        alias=exp.TableAlias(this=alias),
    )
    inner.join(
        people_copy,
        on=exp.EQ(this=exp.column(unit, table="__j"), expression=person.copy()),
        join_type="LEFT" if side else "INNER",
        copy=False,
    )
    for name, new in moved.items():
        inner.select(exp.alias_(exp.column(name, table="__j"), new), copy=False)
        group.append("expressions", exp.column(name, table="__j"))
    out = select.copy()
    out.set("joins", None)
    out.set(
        "from_",
        exp.From(
            this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(facts)))
        ),
    )
    return out
