"""Rule: the row-level relation ``r`` and the per-person, per-group pre-aggregation ``pp``.

``r`` keeps the analyst's FROM, joins and WHERE (made total) and projects the person id,
the group keys and the clamped aggregate arguments. ``pp`` has one row per (person,
group) with that person's raw statistics — or one row per person when each person is in
one group (L0 = 1), which the grouping then enforces; the Linf rule clamps them next.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from proxy.catalog import column_type
from proxy.rewrite import clamped_rows, keyed_groups
from proxy.rewrite import core as C


def argument_columns(core: C.Core) -> dict[str, str]:
    """Canonical argument text -> column name in ``r``."""
    names: dict[str, str] = {}
    for stat in core.statistics:
        if stat.arg_sql is not None and stat.arg_sql not in names:
            names[stat.arg_sql] = f"__x{len(names)}"
    return names


def _arguments_by_sql(core: C.Core) -> dict[str, exp.Expr]:
    return {core.argument_sql[call]: arg for call, arg in core.arguments.items()}


# Shared: insert copies only.
_TYPES = {name: exp.DataType.build(name) for name in ("BIGINT", "DOUBLE")}


def _centred(column: str, centre: float) -> exp.Expr:
    if centre == 0:
        return exp.column(column)
    lit = exp.Literal.number(int(centre) if float(centre).is_integer() else repr(centre))
    return exp.Paren(this=exp.Sub(this=exp.column(column), expression=lit))


def _widened(core: C.Core, arg_sql: str, arg: exp.Expr) -> exp.Expr:
    """The clamped argument in a type its sums and squares cannot overflow: BIGINT for
    integer statistics (bounds keep |x|, (x−m)² ≤ 1e18), DOUBLE otherwise. Arithmetic in
    the column's own type (e.g. INTEGER squares) could fail on some rows, and that
    failure would depend on the data."""
    stats = [
        s
        for s in core.statistics
        if s.arg_sql == arg_sql and s.kind != C.COUNT and s.kind not in C.DISTINCT_KINDS
    ]
    if not stats:
        return arg  # only counted: its type does not matter
    target = "BIGINT" if any(s.integer or s.values_integer for s in stats) else "DOUBLE"
    return exp.Cast(this=arg, to=_TYPES[target].copy())


_DOUBLE = exp.DataType.build("DOUBLE")  # shared: insert copies only


def _scaled(total: exp.Expr, col: str, max_rows: int | None) -> exp.Expr:
    """A person's sum over their n values in a group, times min(n, C)/n: what C of their
    rows would give at their own mean. Counts are capped at C (the Linf rule), so a sum
    scaled this way keeps the person's mean (and mean square) in every ratio taken with
    their count, instead of clamping the sum of all n rows into C rows' range, which
    pulled heavy persons' means to a bound. |scaled| ≤ C·max|x| up to DOUBLE rounding;
    the Linf rule still clamps it.

    Computed as (DOUBLE total · C) / n, the grouping its text has always had: the tree
    once held total · (C / n) and printed without the parentheses, so what ran was not
    what the tree said (tests/render_check.py now compares the two)."""
    if max_rows is None:
        return total
    n = exp.Count(this=exp.column(col))
    scaled = exp.Mul(
        this=exp.Cast(this=total.copy(), to=_DOUBLE.copy()),
        expression=exp.Literal.number(max_rows),
    )
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.GT(this=n.copy(), expression=exp.Literal.number(max_rows)),
                true=exp.Div(this=scaled, expression=n, typed=False, safe=False),
            )
        ],
        default=total,
    )


def raw_statistic(
    stat: C.Statistic,
    columns: dict[str, str],
    max_rows: int | None = None,
    clamped: str | None = None,
) -> exp.Expr | None:
    """One person's statistic within one group, before clamping; with ``max_rows`` (C),
    sums of a person with more than C values are scaled to C values' worth. ``clamped``
    names r's flag of rows a declared bound changed (the clipping estimate counts them)."""
    if stat.kind == C.ROWS:
        return exp.Count(this=exp.Star())
    if stat.kind == C.PERSONS or stat.kind in C.DISTINCT_KINDS:
        return None  # counted across people (cross_person, distinct_values)
    if stat.kind == C.CLIPPED:
        if max_rows is None:
            return exp.Literal.number(0)
        # 1 when the row cap cuts this person's rows in this group, or a clamp to the
        # declared bounds moved one of their values (``clamped``: r's flag column); the
        # L0 rule adds the people it cut to other groups. SUM, not MAX, of the 0/1 flag:
        # the same test, and Spark's two-level per-person grouping takes only COUNT and
        # SUM (proxy/engines/spark_per_person.py).
        ifs = [
            exp.If(
                this=exp.GT(
                    this=exp.Count(this=exp.Star()), expression=exp.Literal.number(max_rows)
                ),
                true=exp.Literal.number(1),
            )
        ]
        if clamped is not None:
            ifs.append(
                exp.If(
                    this=exp.GT(
                        this=exp.Sum(this=exp.column(clamped)), expression=exp.Literal.number(0)
                    ),
                    true=exp.Literal.number(1),
                )
            )
        return exp.Case(ifs=ifs, default=exp.Literal.number(0))
    col = columns[str(stat.arg_sql)]
    if stat.kind == C.COUNT:
        return exp.Count(this=exp.column(col))
    if stat.kind == C.SUM:
        return _scaled(exp.Sum(this=exp.column(col)), col, max_rows)
    centred = _centred(col, stat.centre)
    if stat.kind == C.CENTRED_SUM:
        return _scaled(exp.Sum(this=centred), col, max_rows)
    return _scaled(exp.Sum(this=exp.Mul(this=centred, expression=centred.copy())), col, max_rows)


# The dates a DATE or TIMESTAMP key is read within; others (infinity, or beyond the
# years a Python date holds) group as NULL. Fetching a DATE of infinity, or of a year
# past 294247, fails in DuckDB's conversion to NumPy, after the charge and only if some
# person's row held one; a released date or time past 9999 has no Python form, and was
# rendered one way or another depending on the other keys beside it.
DATE_KEY_RANGE = ("0001-01-01", "9999-12-31 23:59:59.999999")
_DATE = exp.DataType.build("DATE")
_TIMESTAMP = exp.DataType.build("TIMESTAMP")


def _within_range(tested: exp.Expr, value: exp.Expr, timestamp: bool) -> exp.Case:
    """``value`` if ``tested`` lies within DATE_KEY_RANGE (as TIMESTAMPs or as DATEs),
    else NULL."""
    kind = _TIMESTAMP if timestamp else _DATE
    low, high = (
        exp.cast(exp.Literal.string(d if timestamp else d[:10]), kind.copy())
        for d in DATE_KEY_RANGE
    )
    return exp.Case(ifs=[exp.If(this=exp.Between(this=tested, low=low, high=high), true=value)])


def _dated(key: exp.Expr, timestamp: bool) -> exp.Expr:
    """``key`` if it lies within DATE_KEY_RANGE, else NULL (never failing: a TIMESTAMP
    variant is compared as a TIMESTAMP by TRY_CAST, a DATE with DATEs)."""
    tested = exp.TryCast(this=key.copy(), to=_TIMESTAMP.copy()) if timestamp else key.copy()
    return _within_range(tested, key, timestamp)


# Truncations that never leave DATE_KEY_RANGE for a value within it: each rounds down
# (so stays below its upper end), and the range's first instant is the start of a year
# (so of every such unit; not of a week, a decade or a century, which start elsewhere).
_WITHIN_RANGE_TRUNCS = frozenset(
    {"MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "QUARTER", "YEAR"}
)


def _truncated_within(core: C.Core, key: exp.Expr) -> exp.Expr | None:
    """``DATE_TRUNC(unit, x)`` (under TRY or not) of a DATE or TIMESTAMP column x, as
    the truncation of x read within DATE_KEY_RANGE, else None. The same values as
    :func:`_dated` of the key, with the range tested on x once instead of truncating
    again to test the result: engines without common subexpressions (PostgreSQL, which
    also reads the key again in its keyed hash) truncated each row up to four times.
    Only for exactly DATE and TIMESTAMP (microseconds, no time zone), whose values are
    compared with the range's ends without conversion."""
    trunc = key.this if isinstance(key, exp.Try) else key
    if not isinstance(trunc, exp.TimestampTrunc) or not isinstance(trunc.this, exp.Column):
        return None
    unit = trunc.args.get("unit")
    if unit is None or unit.name.upper() not in _WITHIN_RANGE_TRUNCS:
        return None
    column = trunc.this
    kind = column_type(core.shape.tables, column.table, column.name)
    if kind not in ("DATE", "TIMESTAMP"):
        return None
    within = _within_range(column.copy(), column.copy(), kind == "TIMESTAMP")
    out = key.copy()
    inner = out.this if isinstance(out, exp.Try) else out
    inner.set("this", within)
    return out


_TEXT = exp.DataType.build("VARCHAR")


def _key(core: C.Core, index: int, key: exp.Expr) -> exp.Expr:
    """Key ``index`` as the core groups it: dates within their range, DECIMALs as their
    text (a DECIMAL's text is one per value, its scale being fixed by its type)."""
    if index in core.dated_keys or index in core.timed_keys:
        within = _truncated_within(core, key)
        if within is not None:
            return within
        return _dated(key.copy(), index in core.timed_keys)
    if index in core.text_keys:
        return exp.Cast(this=key.copy(), to=_TEXT.copy())
    return key.copy()


def apply(core: C.Core) -> C.Core:
    columns = argument_columns(core)
    by_sql = _arguments_by_sql(core)
    # Every piece is copied once here; the builders below must not copy again.
    projection: list[exp.Expr] = [exp.alias_(core.shape.unit.copy(), "__u", copy=False)]
    projection += [
        exp.alias_(_key(core, i, k), f"__k{i}", copy=False) for i, k in enumerate(core.keys)
    ]
    projection += [
        exp.alias_(_widened(core, sql, by_sql[sql].copy()), name, copy=False)
        for sql, name in columns.items()
    ]
    flag: exp.Expr | None = None
    declared: tuple[C.DeclaredBound, ...] = ()
    if core.bounding and any(s.kind == C.CLIPPED for s in core.statistics):
        flag, declared = clamped_rows.clamped_flag(core)
        if flag is not None:
            projection.append(exp.alias_(flag, clamped_rows.FLAG, copy=False))
    r = exp.Select(expressions=projection)
    r.set("from_", core.from_.copy() if core.from_ is not None else None)
    if core.joins:
        # (on DuckDB each column equality also on its keyed hash: keyed_groups.keyed_joins)
        joins = (
            keyed_groups.keyed_joins(core.joins, core.shape)
            if core.keyed_grouping
            else [j.copy() for j in core.joins]
        )
        r.set("joins", joins)
    not_null = exp.Not(this=exp.Is(this=core.shape.unit.copy(), expression=exp.Null()))
    where = core.where.copy() if core.where is not None else None
    if where is not None and core.keyed_grouping and len(core.shape.tables) > 1:
        where = keyed_groups.keyed_where(where, core.shape)
    condition = (
        not_null if where is None else exp.and_(exp.Paren(this=where), not_null, copy=False)
    )
    r = r.where(condition, copy=False)

    # Built node by node: the select/from_/group_by builders would copy every fresh
    # piece again and parse the table name.
    if core.one_group_per_person:
        # One row per person whatever the data: the keys are expected to be constant for
        # each person (see rewrite.person_constant), and grouping by the person alone
        # enforces L0 = 1 even if they were not — each person's rows then all count in
        # the group of their smallest key.
        group: list[exp.Expr] = [exp.column("__u")]
        keys: list[exp.Expr] = [
            exp.alias_(exp.Min(this=exp.column(k)), k, copy=False) for k in core.key_columns()
        ]
    else:
        group = [exp.column("__u"), *(exp.column(k) for k in core.key_columns())]
        keys = [exp.column(k) for k in core.key_columns()]
    pp_cols: list[exp.Expr] = [exp.column("__u"), *keys]
    # Scaling needs the per-person cap; an audit run without bounding skips it too.
    scale_to = core.max_rows if core.bounding and not core.one_row_per_person else None
    for stat in core.statistics:
        raw = raw_statistic(
            stat,
            columns,
            core.max_rows if stat.kind == C.CLIPPED and core.bounding else scale_to,
            clamped_rows.FLAG if flag is not None else None,
        )
        if raw is not None:
            pp_cols.append(exp.alias_(raw, stat.column, copy=False))
    if not core.one_group_per_person and core.keyed_grouping:
        # (grouped by the person alone, one person's values cannot meet in a bucket)
        by_bytes = [keyed_groups.unit_by_bytes(core.shape), *keyed_groups.key_by_bytes(core)]
        group = keyed_groups.keyed_first(group, by_bytes)
    pp = exp.Select(
        expressions=pp_cols, from_=C.from_table("r"), group=exp.Group(expressions=group)
    )
    return replace(core, ctes=(("r", r), ("pp", pp)), declared_bounds=declared)
