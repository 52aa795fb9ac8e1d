"""Per-person aggregates (issue 13 §3): an inner query grouped by the person id,
aggregated again outside.

    SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t
    SELECT COUNT(*) FROM (SELECT user_id FROM prompts GROUP BY user_id
                          HAVING COUNT(*) > 10) t
    SELECT plan, AVG(n) FROM (SELECT user_id, plan, COUNT(*) AS n FROM prompts
                              JOIN users USING (user_id) GROUP BY user_id, plan) t
    GROUP BY plan

The inner query is never released. It is turned into a *derived table* with exactly one
row per person (the SQL groups by the person id alone; other inner keys must be constant
for a person and are taken as their MIN), whose value columns are each person's
aggregates **clamped** to the interval accounting/per_person_bounds.py derives (COUNT(*)
to [1, C] with C the inner tables' row cap, SUM(x) to [C·min(L, 0), C·max(U, 0)], AVG,
MIN, MAX, quantiles to [L, U], ...). Filters (the inner HAVING, the outer WHERE), keys
and outer aggregates all read those bounded values. The outer query is then an ordinary
query over a one-row-per-person private table of the inner query's population — the
derived table enters the catalog for that query only, with its columns' bounds declared
— and is checked, rewritten, charged and released like any other (C = K = 1 for it).

Why this is private: removing a person from the database removes their rows from the
inner tables, so it removes exactly their row of the derived table and changes no other
row (the inner query's joins between private tables are on the person id only, its
semi-joins are on the person, as everywhere in dpsql). Each value lies in its declared
interval by the clamp, so the outer query's sensitivity is that of a one-row-per-person
table with those bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlglot import exp

from accounting.per_person_bounds import InnerAggregate, ValueBounds, value_bounds
from proxy import shape as S
from proxy.allowlist import AGGREGATES
from proxy.bind import bind
from proxy.catalog import (
    DEFAULT_DB,
    BoundedFlag,
    Catalog,
    DeclaredBound,
    TableInfo,
    column_type,
)
from proxy.check import check_scalar, check_shape, distinct_as_group_by, is_person_id
from proxy.derived_source import from_source
from proxy.engines.executor import Executor
from proxy.errors import DPSQLError, position_of, unsupported
from proxy.policy import ColumnPolicy, TablePolicy
from proxy.quantile_sql import is_quantile
from proxy.rewrite import clamped_rows, keyed_groups, person_constant
from proxy.rewrite import core as C
from proxy.rewrite.clamp_inputs import as_double, clamp
from proxy.rewrite.l0 import describe_params
from proxy.rewrite.ranges import derive
from proxy.rewrite.total_forms import total_predicate, total_value

DERIVED = "__per_person"  # the derived table's name (main.__per_person), never a real one
PERSON = "__person"  # its person id column, when the inner query does not select one
FLAG = "__cl"  # its hidden column: 1 where a clamp moved a value the outer query reads
_AGG_TYPES = tuple(AGGREGATES)

_KINDS = {
    S.COUNT_ROWS: InnerAggregate.ROWS,
    S.COUNT: InnerAggregate.COUNT,
    S.COUNT_DISTINCT: InnerAggregate.COUNT,
    S.COUNT_PERSONS: InnerAggregate.PERSONS,
    S.SUM_DISTINCT: InnerAggregate.SUM,
    S.AVG_DISTINCT: InnerAggregate.MEAN,
    S.SUM: InnerAggregate.SUM,
    S.AVG: InnerAggregate.MEAN,
    S.QUANTILE: InnerAggregate.MEAN,
    S.MINIMUM: InnerAggregate.ORDER,
    S.MAXIMUM: InnerAggregate.ORDER,
    # Distinct values are a subset of the person's values: the same bounds hold.
    S.DISTINCT_VARIANCE[S.VAR_POP]: InnerAggregate.VAR_POP,
    S.DISTINCT_VARIANCE[S.VAR_SAMP]: InnerAggregate.VAR_SAMP,
    S.DISTINCT_VARIANCE[S.STDDEV_POP]: InnerAggregate.STDDEV_POP,
    S.DISTINCT_VARIANCE[S.STDDEV_SAMP]: InnerAggregate.STDDEV_SAMP,
    S.VAR_POP: InnerAggregate.VAR_POP,
    S.VAR_SAMP: InnerAggregate.VAR_SAMP,
    S.STDDEV_POP: InnerAggregate.STDDEV_POP,
    S.STDDEV_SAMP: InnerAggregate.STDDEV_SAMP,
}


@dataclass(frozen=True)
class PerPersonQuery:
    """The outer query (reading ``main.__per_person``), the derived table and the SQL
    that computes it, and the catalog the outer query is bound against."""

    outer: exp.Select
    table: TableInfo
    relation: exp.Select
    inner: S.Shape  # the checked inner query (its tables' row caps and "auto" caps)
    catalog: Catalog
    max_rows: int  # C of the inner tables: the bound of a per-person count


def _inner_source(tree: exp.Expr) -> tuple[exp.Select, str] | None:
    """The inner SELECT an outer query reads through its FROM (a subquery or a CTE used
    there), with the name the outer query calls it by."""
    found = from_source(tree)
    if found is None or not isinstance(found[0], exp.Select):
        return None
    return found[0], found[1]


def _person_keys(bound: exp.Select, catalog: Catalog) -> list[exp.Expr]:
    from proxy.joins import tables_of, unit_columns

    group = bound.args.get("group")
    if group is None:
        return []
    units = unit_columns(tables_of(bound, catalog))
    return [k for k in group.expressions if is_person_id(k, units)]


def _bound_inner(inner: exp.Select, catalog: Catalog, allowed: frozenset[str] | None) -> exp.Select:
    return bind(distinct_as_group_by(inner.copy()), catalog, allowed)


def groups_by_person(tree: exp.Expr, catalog: Catalog, allowed: frozenset[str] | None) -> bool:
    """True when ``tree`` reads, in its FROM, an inner query grouped by the person id
    (so it is a per-person aggregate, not a query over a released answer)."""
    found = _inner_source(tree)
    if found is None:
        return False
    try:
        return bool(_person_keys(_bound_inner(found[0], catalog, allowed), catalog))
    except DPSQLError:
        return False


def _aggregate_nodes(node: exp.Expr, out: dict[str, exp.Expr]) -> None:
    """The outermost aggregates under ``node``, by their canonical text."""
    if isinstance(node, (exp.Count, *_AGG_TYPES)) or is_quantile(node):
        out.setdefault(node.sql(dialect="duckdb"), node)
        return
    for child in node.iter_expressions():
        _aggregate_nodes(child, out)


def _total_aggregate(node: exp.Expr, *, in_double: bool = False) -> exp.Expr:
    """The aggregate over total (never failing) row-level arguments; ``in_double``: the
    arguments read as DOUBLE (see :func:`_in_double`)."""
    copied = node.copy()
    target = copied.this if isinstance(copied, exp.Bracket) else copied

    def total(e: exp.Expr) -> exp.Expr:
        value = total_value(e)
        return as_double(value) if in_double else value

    if isinstance(target, exp.WithinGroup):
        order = target.args.get("expression")
        if isinstance(order, exp.Order):
            for o in order.expressions:
                o.set("this", total(o.this))
        return copied

    arg = target.args.get("this")
    if isinstance(arg, exp.Distinct):
        arg.set("expressions", [total(e) for e in arg.expressions])
    elif isinstance(arg, exp.Expr) and not isinstance(arg, exp.Star):
        target.set("this", total(arg))
    return copied


# Aggregates that add a person's values.
_SUMMED = frozenset({S.SUM, S.SUM_DISTINCT, S.AVG, S.AVG_DISTINCT})
_T = exp.DataType.Type
_NARROW_CASTS = frozenset(
    {_T.TINYINT, _T.SMALLINT, _T.INT, _T.BIGINT, _T.UTINYINT, _T.USMALLINT, _T.UINT, _T.UBIGINT}
)
# Integer column types of at most 64 bits.
_NARROW_INTEGERS = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}
)


def _in_double(call: S.AggregateCall, shape: S.Shape, clamped: ValueBounds | None) -> bool:
    """Whether a per-person aggregate reads its argument as DOUBLE (clamp_inputs.as_double).

    DuckDB adds integers and DECIMALs in 128-bit integers and fails on overflow, and
    converts a clamp's bounds to a DECIMAL value's type, which may not hold them: either
    failure would end the query after the charge for a person with such values, and say
    so. The rows here are not clamped (their declared bounds say nothing of them), so a
    SUM or AVG runs in the argument's own type only when that type is at most 64 bits
    wide (:func:`_at_most_64_bits`) or DOUBLE; a value that is clamped later (``clamped``:
    MIN, MAX, quantiles of a bounded number) is read as DOUBLE unless it is known to be
    an integer or a DOUBLE. Anything else (text, an unbounded order statistic) is read as
    it is: it is never clamped."""
    arg = call.arg
    if arg is None:
        return False
    tables = dict(shape.tables)
    if _at_most_64_bits(arg, tables) or _column_kind(arg, tables) in _DOUBLES:
        return False
    if call.kind in _SUMMED:
        return True
    if derive(arg, tables).integer:
        return False  # an integer type: its clamp's bounds convert to it without fail
    return clamped is not None and not clamped.integer and _KINDS[call.kind] in _CLAMPED_ORDER


_DOUBLES = frozenset({"FLOAT", "REAL", "DOUBLE"})


def _column_kind(node: exp.Expr, tables: dict[str, TableInfo]) -> str:
    if not isinstance(node, exp.Column):
        return ""
    return column_type(tables, node.table, node.name)


def _at_most_64_bits(node: exp.Expr, tables: dict[str, TableInfo]) -> bool:
    """Whether DuckDB types ``node`` as an integer of at most 64 bits (whose sum over any
    number of rows a table can hold stays within a 128-bit accumulator): integer columns
    that narrow, integer literals below 2^63, casts to such integers, and arithmetic and
    choices among them. Conservative: anything else answers False."""
    if isinstance(node, exp.Column):
        return _column_kind(node, tables) in _NARROW_INTEGERS
    if isinstance(node, exp.Literal):
        return not node.is_string and node.is_int and abs(int(node.this)) < 2**63
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return node.to.this in _NARROW_CASTS
    if isinstance(node, exp.Try | exp.Paren | exp.Neg | exp.Abs):
        return _at_most_64_bits(node.this, tables)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        return _at_most_64_bits(node.left, tables) and _at_most_64_bits(node.right, tables)
    if isinstance(node, exp.Case):
        values = [i.args.get("true") for i in node.args.get("ifs") or []]
        values.append(node.args.get("default"))
        return all(v is None or _at_most_64_bits(v, tables) for v in values)
    return False


_CLAMPED_ORDER = frozenset({InnerAggregate.ORDER, InnerAggregate.MEAN})


def _refuse_inner(message: str, hint: str, node: exp.Expr | None = None) -> DPSQLError:
    return unsupported(message, hint, position_of(node) if node is not None else None)


def _check_copy(
    bound: exp.Select, person_keys: list[exp.Expr], units: set[tuple[str, str]]
) -> exp.Select:
    """The inner query without its person id (in GROUP BY and the select list): what the
    ordinary checker must accept for the per-person values to be computable."""
    copy = bound.copy()
    copy.set("order", None)
    person_sqls = {k.sql(dialect="duckdb") for k in person_keys}
    group = copy.args.get("group")
    keys = group.expressions if group is not None else []
    rest = [k for k in keys if k.sql(dialect="duckdb") not in person_sqls]
    copy.set("group", exp.Group(expressions=rest) if rest else None)
    items = [
        e
        for e in copy.expressions
        if not is_person_id(e.this if isinstance(e, exp.Alias) else e, units)
    ]
    items.append(exp.alias_(exp.Count(this=exp.Star()), "__rows", copy=False))
    copy.set("expressions", items)
    return copy


def derive_query(
    tree: exp.Expr,
    catalog: Catalog,
    allowed: frozenset[str] | None,
    executor: Executor,
    max_rows_of: Callable[[S.Shape], int],
) -> PerPersonQuery | None:
    """The per-person form of ``tree``, or None when its FROM is not an inner query
    grouped by the person id. ``max_rows_of`` gives C for the checked inner query."""
    from proxy.joins import tables_of, unit_columns

    found = _inner_source(tree)
    if found is None:
        return None
    inner, alias = found
    bound = _bound_inner(inner, catalog, allowed)
    person_keys = _person_keys(bound, catalog)
    if not person_keys:
        return None
    for clause in ("limit", "offset"):
        if bound.args.get(clause) is not None:
            raise _refuse_inner(
                f"{clause.upper()} in a per-person subquery would keep some people's "
                "rows depending on the others'",
                "remove it from the subquery (a LIMIT on the outer query is fine)",
                bound.args[clause],
            )
    tables = tables_of(bound, catalog)
    units = unit_columns(tables)
    shape = check_shape(_check_copy(bound, person_keys, units), catalog)
    never_null = {(shape.unit.table.lower(), shape.unit.name.lower())}
    for key in person_keys:
        if not is_person_id(key, never_null | _inner_joined_units(shape)):
            raise _refuse_inner(
                f"the subquery groups by {key.sql()}, a person id that may be NULL on a "
                "row (a LEFT JOINed table's)",
                f"group by {shape.unit.sql()}, the person id of the table in FROM",
                key,
            )
    constant = person_constant(shape)
    for key in shape.keys:
        outside = [c for c in key.find_all(exp.Column) if c.table.lower() not in constant]
        if outside:
            raise _refuse_inner(
                f"the subquery groups by the person id and by {key.sql()[:60]}, which can "
                "differ between one person's rows: that is several rows per person",
                "group the subquery by the person id alone (and by columns of a "
                "one-row-per-person table joined on it, e.g. users.plan), and compute "
                "the rest with aggregates",
                key,
            )
    max_rows = max_rows_of(shape)
    return _build(tree, alias, bound, shape, catalog, allowed, executor, max_rows, units)


def _inner_joined_units(shape: S.Shape) -> set[tuple[str, str]]:
    joined = {
        j.this.alias_or_name.lower()
        for j in shape.select.args.get("joins") or []
        if not j.side and isinstance(j.this, exp.Table)
    }
    return {
        (alias, str(t.policy.unit).lower())
        for alias, t in shape.tables.items()
        if alias in joined and not t.public and t.policy.unit
    }


def _argument_range(
    call: S.AggregateCall, shape: S.Shape
) -> tuple[tuple[float, float] | None, bool]:
    if call.arg is None:
        return None, False
    r = derive(call.arg, dict(shape.tables))
    if r.lower > r.upper:  # only NULLs
        return (0.0, 0.0), True
    return ((r.lower, r.upper) if r.bounded else None), r.integer


def _build(
    tree: exp.Expr,
    alias: str,
    bound: exp.Select,
    shape: S.Shape,
    catalog: Catalog,
    allowed: frozenset[str] | None,
    executor: Executor,
    max_rows: int,
    units: set[tuple[str, str]],
) -> PerPersonQuery:
    calls = {c.sql: c for c in shape.aggregates}
    nodes: dict[str, exp.Expr] = {}
    for item in bound.expressions:
        _aggregate_nodes(item, nodes)
    having = bound.args.get("having")
    if having is not None:
        _aggregate_nodes(having.this, nodes)
    key_sqls = [k.sql(dialect="duckdb") for k in shape.keys]

    # Layer A: one row per person, exact aggregates of total arguments.
    unit = shape.unit
    a_cols: list[exp.Expr] = [exp.alias_(unit.copy(), PERSON, copy=False)]
    a_cols += [
        exp.alias_(exp.Min(this=total_value(k)), f"__k{i}", copy=False)
        for i, k in enumerate(shape.keys)
    ]
    bounded: dict[str, exp.Expr] = {}  # aggregate text -> its bounded value over layer A
    for i, (text, node) in enumerate(nodes.items()):
        call = calls.get(text)
        if call is None:  # the checker renders every aggregate it accepts
            raise _refuse_inner(f"{text[:60]} is not answered", "use COUNT, SUM or AVG", node)
        argument, integer = _argument_range(call, shape)
        found = value_bounds(_KINDS[call.kind], max_rows, argument, integer)
        in_double = _in_double(call, shape, found)
        a_cols.append(
            exp.alias_(_total_aggregate(node, in_double=in_double), f"__a{i}", copy=False)
        )
        column = exp.column(f"__a{i}", table="__a")
        if found is None:
            bounded[text] = column
            continue
        clamped = clamp(column, found.lower, found.upper)
        # Marked, so that the people whose values it moves are counted (_bounded_flag).
        clamped.meta[C.DECLARED] = DeclaredBound(
            _unqualified(node), found.lower, found.upper, per_person=True
        )
        bounded[text] = clamped
    a = exp.Select(expressions=a_cols)
    a.set("from_", bound.args["from_"].copy())
    tables = dict(shape.tables)
    joins = [j.copy() for j in bound.args.get("joins") or []]
    for join in joins:
        if join.args.get("on") is not None:
            join.set("on", total_predicate(join.args["on"], tables))
    if joins:
        # (each column equality also on its keyed hash: keyed_groups.keyed_joins)
        a.set("joins", keyed_groups.keyed_joins(joins, shape))
    not_null = exp.Not(this=exp.Is(this=unit.copy(), expression=exp.Null()))
    where = bound.args.get("where")
    total = None if where is None else total_predicate(where.this, tables)
    if total is not None and len(tables) > 1:
        total = keyed_groups.keyed_where(total, shape)
    condition: exp.Expr = (
        not_null if total is None else exp.and_(exp.Paren(this=total), not_null, copy=False)
    )
    a.set("where", exp.Where(this=condition))
    a.set("group", exp.Group(expressions=[unit.copy()]))
    a = _distinct_layers(a, shape)

    def substitute(node: exp.Expr) -> exp.Expr:
        text = node.sql(dialect="duckdb")
        if text in bounded:
            return bounded[text].copy()
        if text in key_sqls:
            return exp.column(f"__k{key_sqls.index(text)}", table="__a")
        if is_person_id(node, units):
            return exp.column(PERSON, table="__a")
        for child_key, child in list(node.args.items()):
            if isinstance(child, exp.Expr):
                node.set(child_key, substitute(child))
            elif isinstance(child, list):
                node.set(
                    child_key,
                    [substitute(c) if isinstance(c, exp.Expr) else c for c in child],
                )
        return node

    # Layer B: the analyst's select list over bounded values, filtered by their HAVING.
    b_cols: list[exp.Expr] = []
    names: list[str] = []
    unit_name: str | None = None
    for item in bound.expressions:
        value = item.this if isinstance(item, exp.Alias) else item
        name = item.alias_or_name.lower()
        if name in names or name in (PERSON, FLAG):
            raise _refuse_inner(
                f"the subquery has two columns named {name}",
                "give each column of the subquery its own alias",
                item,
            )
        names.append(name)
        if is_person_id(value, units):
            if unit_name is not None:
                raise _refuse_inner(
                    "the subquery selects the person id twice",
                    "select it once",
                    item,
                )
            unit_name = name
            b_cols.append(exp.alias_(exp.column(PERSON, table="__a"), name, copy=False))
            continue
        replaced = substitute(value.copy())
        _check_private_scalar(replaced, "a per-person subquery's select list")
        b_cols.append(exp.alias_(total_value(replaced), name, copy=False))
    if unit_name is None:
        unit_name = PERSON
        b_cols.insert(0, exp.column(PERSON, table="__a"))
        names.insert(0, PERSON)
    b = exp.Select(expressions=b_cols)
    b.set(
        "from_",
        exp.From(this=exp.Subquery(this=a, alias=exp.TableAlias(this=exp.to_identifier("__a")))),
    )
    if having is not None:
        filtered = substitute(having.this.copy())
        _check_private_scalar(filtered, "a per-person subquery's HAVING")
        b.set("where", exp.Where(this=total_predicate(filtered, {})))
    b_sql, a_sql = b.sql(dialect="duckdb"), a.sql(dialect="duckdb")
    types = dict(executor.describe(b_sql, describe_params(b_sql)))
    a_types = dict(executor.describe(a_sql, describe_params(a_sql)))
    table = _derived_table(b, names, unit_name, types, a_types, shape)
    outer = tree.copy()
    assert isinstance(outer, exp.Select)  # _inner_source found its FROM
    _read_derived(outer, alias)
    relation, flag = _bounded_flag(b, names, outer)
    if flag is not None:
        table = replace(table, bounded_flag=flag)
    return PerPersonQuery(
        outer=outer,
        table=table,
        relation=relation,
        inner=shape,
        catalog=catalog.with_derived(table),
        max_rows=max_rows,
    )


def _unqualified(node: exp.Expr) -> str:
    """An aggregate's text without the binder's table aliases: AVG(v), not AVG(t0.v)."""

    def bare(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table:
            return exp.column(n.args["this"].copy())
        return n

    return node.copy().transform(bare, copy=False).sql(dialect="duckdb")


def _bounded_flag(
    b: exp.Select, names: list[str], outer: exp.Select
) -> tuple[exp.Select, BoundedFlag | None]:
    """Layer B with a hidden column FLAG, 1 for a person when a clamp moved one of their
    per-person values that the outer query reads, and the bounds of those clamps (the
    clipping estimate counts the people it flags; the column is not in the derived
    table's catalog, so the analyst cannot name it; a clamp in a branch of their CASE or
    IF counts only where the branch is taken). Values read only by the subquery's
    HAVING are not counted: it filters on bounded values, and a person it drops is in no
    group (bounds_note says so on every answer)."""
    read = {c.name.lower() for c in outer.find_all(exp.Column)}
    items = [item for item, name in zip(b.expressions, names, strict=True) if name in read]
    # (a clamp in a branch of the analyst's CASE or IF: only where the branch is taken)
    tests, bounds = clamped_rows.clamp_tests(items)
    if not tests:
        return b, None
    relation = b.copy()
    relation.append("expressions", exp.alias_(clamped_rows.flag_case(tests), FLAG, copy=False))
    return relation, BoundedFlag(FLAG, bounds)


def _distinct_layers(a: exp.Select, shape: S.Shape) -> exp.Select:
    """Layer A with each ``AGG(DISTINCT x)`` read from its own layer: the person's rows
    grouped by (person, x) — first by their keyed hash (proxy/rewrite/keyed_groups.py) —
    and aggregated without DISTINCT per person, joined on the person. The same values:
    every person of layer A has rows there (the same FROM and WHERE), and AGG over the
    distinct (person, x) groups is AGG(DISTINCT x), NULL groups read as NULL. DuckDB's own
    DISTINCT would hash the person's x values with its unkeyed hash: a person's 32,768
    crafted ``prompt_id`` values took 3.9 s there against 0.07 s without them."""
    kinds = keyed_groups.typer(shape)
    unit = shape.unit
    unit_by_bytes = keyed_groups.unit_by_bytes(shape)
    layers: list[tuple[str, exp.Select]] = []
    kept: list[exp.Expr] = []
    for item in a.expressions:
        target = item.this.this if isinstance(item.this, exp.Bracket) else item.this
        distinct = target.args.get("this") if isinstance(item, exp.Alias) else None
        if not (isinstance(distinct, exp.Distinct) and len(distinct.expressions) == 1):
            kept.append(item)
            continue
        value = distinct.expressions[0]
        by_bytes = [unit_by_bytes, keyed_groups.hashed_by_bytes(kinds.kind(value))]
        pairs = a.copy()
        pairs.set(
            "expressions",
            [exp.alias_(unit.copy(), "__u", copy=False), exp.alias_(value.copy(), "__v", copy=False)],
        )
        group = keyed_groups.keyed_first([unit.copy(), value.copy()], by_bytes)
        if keyed_groups.interval_valued(shape, value):
            # an INTERVAL's text is not one per value: its total is
            group[0] = keyed_groups.companion(
                [
                    keyed_groups.part(unit.copy(), unit_by_bytes),
                    keyed_groups.part(keyed_groups.interval_total(value), True),
                ]
            )
        pairs.set("group", exp.Group(expressions=group))
        plain = item.this.copy()
        plain_target = plain.this if isinstance(plain, exp.Bracket) else plain
        plain_target.set("this", exp.column("__v"))
        layers.append(
            (
                item.alias,
                exp.Select(
                    expressions=[exp.column("__u"), exp.alias_(plain, "__d", copy=False)],
                    from_=exp.From(
                        this=exp.Subquery(
                            this=pairs, alias=exp.TableAlias(this=exp.to_identifier("__p"))
                        )
                    ),
                    group=exp.Group(expressions=[exp.column("__u")]),
                ),
            )
        )
    if not layers:
        return a
    rest = a.copy()
    rest.set("expressions", kept)
    out = exp.Select(
        expressions=[exp.Column(this=exp.Star(), table=exp.to_identifier("__r"))],
        from_=exp.From(
            this=exp.Subquery(this=rest, alias=exp.TableAlias(this=exp.to_identifier("__r")))
        ),
    )
    for i, (alias, layer) in enumerate(layers):
        d = f"__d{i}"
        out.append(
            "expressions", exp.alias_(exp.column("__d", table=d), alias, copy=False)
        )
        out = out.join(
            exp.Subquery(this=layer, alias=exp.TableAlias(this=exp.to_identifier(d))),
            on=exp.EQ(
                this=exp.column("__u", table=d), expression=exp.column(PERSON, table="__r")
            ),
            join_type="LEFT",
            copy=False,
        )
    return out


def _check_private_scalar(node: exp.Expr, where: str) -> None:
    """Layer B runs the analyst's select list and HAVING over each person's exact
    (clamped) aggregates, before anything is released: it is row-level SQL over private
    values, not the outer layer's post-processing of released ones. So it gets the
    row-level allowlist and string-growth bound (``check_scalar``), not the outer
    layer's wider one: ``REPEAT(MAX(model), COUNT(*) * 20000000)`` pinned to one person
    ran the core 2 s with them and 3 ms without (a timing signal of the person), and
    RAND or a window there would make one person's value depend on chance or on the
    others' rows."""
    try:
        check_scalar(node, where)
    except DPSQLError as error:
        raise DPSQLError(
            error.code,
            error.message,
            "it runs on each person's private values, so it takes the functions a WHERE "
            "clause may use; apply the others to the outer query's aggregates, which are "
            "released values (nothing was charged)",
            error.position,
        ) from None


def _derived_table(
    b: exp.Select,
    names: list[str],
    unit_name: str,
    types: dict[str, str],
    a_types: dict[str, str],
    shape: S.Shape,
) -> TableInfo:
    """The derived table's policy: its columns' bounds, from the clamps (values) and
    from the keys' own policy (columns of person-constant tables)."""
    a_policies: list[ColumnPolicy] = []
    for i, key in enumerate(shape.keys):
        r = derive(key, dict(shape.tables))
        values = None
        if isinstance(key, exp.Column):
            info = shape.tables.get(key.table.lower())
            rule = info.column(key.name) if info else None
            values = rule.values if rule else None
        a_policies.append(
            ColumnPolicy(
                f"__k{i}",
                r.lower if r.bounded else None,
                r.upper if r.bounded else None,
                values,
            )
        )
    a_info = TableInfo(
        TablePolicy(
            name="__a",
            public=False,
            population=shape.population,
            unit=PERSON,
            max_groups=1,
            max_rows_per_group=1,
            columns=tuple(a_policies),
            grants=None,
            one_row_per_person=True,
        ),
        DEFAULT_DB,
        "__a",
        a_types,
    )
    columns: list[ColumnPolicy] = []
    for item, name in zip(b.expressions, names, strict=True):
        if name == unit_name:
            continue
        value = item.this if isinstance(item, exp.Alias) else item
        if isinstance(value, exp.Column) and value.name.startswith("__k"):
            rule = a_info.column(value.name)
            assert rule is not None
            columns.append(ColumnPolicy(name, rule.lower, rule.upper, rule.values))
            continue
        r = derive(value, {"__a": a_info})
        if r.bounded and r.lower <= r.upper:
            columns.append(ColumnPolicy(name, r.lower, r.upper))
    policy = TablePolicy(
        name=DERIVED,
        public=False,
        population=shape.population,
        unit=unit_name,
        max_groups=1,
        max_rows_per_group=1,
        columns=tuple(columns),
        grants=None,
        one_row_per_person=True,
    )
    return TableInfo(policy, DEFAULT_DB, DERIVED, types)


def _bound(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.6g}"


def bounds_note(found: PerPersonQuery) -> tuple[str, ...]:
    """What the answer says of a per-person subquery whatever the data: each person's
    values are clamped to their bounds before the outer query reads them, so a person
    beyond a bound counts at it (an audit, 2026-12-03: with C = 10, an average of 12.5
    prompts per person came back as 5.5 with no word)."""
    ranges = [
        f"{c.name} within [{_bound(c.lower)}, {_bound(c.upper)}]"
        for c in found.table.policy.columns
        if c.values is None and c.lower is not None and c.upper is not None
    ]
    if not ranges:
        return ()
    return (
        "each person's values in the per-person subquery are bounded before the outer query "
        f"reads them ({'; '.join(ranges)}): a person beyond a bound counts at the bound, and "
        "a filter on these values sees the bounded ones; the table's max_rows_per_group and "
        "column bounds in the policy set them (wider bounds add noise)",
    )


def _read_derived(outer: exp.Select, alias: str) -> None:
    """Point the outer query's FROM at the derived table, under the inner query's alias
    (its columns keep their names), and drop the CTE it came from."""
    source = outer.args["from_"].this
    table = exp.Table(
        this=exp.to_identifier(DERIVED),
        db=exp.to_identifier(DEFAULT_DB),
        alias=exp.TableAlias(this=exp.to_identifier(alias or DERIVED)),
    )
    source.replace(table)
    outer.set("with_", None)


def embed(shape: S.Shape, found: PerPersonQuery) -> None:
    """Replace the derived table in the checked outer query by the SQL computing it
    (in place): the rewrite then reads the bounded per-person rows."""
    for table in list(shape.select.find_all(exp.Table)):
        if table.name.lower() == DERIVED:
            table.replace(
                exp.Subquery(
                    this=found.relation.copy(),
                    alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
                )
            )
