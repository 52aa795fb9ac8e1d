"""Rule: clamp every bounded input and fix the statistics the query releases.

Columns with declared bounds are clamped where they are read, so the range analysis of
each aggregate argument holds whatever the data contains. Each aggregate then maps to
the statistics that release it: COUNT → count, SUM → sum, AVG → count and centred sum,
VAR/STDDEV → count, centred sum and centred squares; COUNT(DISTINCT unit) → persons.
"""

from __future__ import annotations

import re
from dataclasses import replace

from sqlglot import exp

from proxy import shape as S
from proxy.catalog import UNION_TABLE
from proxy.errors import bad_request
from proxy.render import duckdb_sql
from proxy.rewrite import core as C
from proxy.rewrite.core import DECLARED, DeclaredBound
from proxy.rewrite.math_ranges import clamp_pattern
from proxy.rewrite.ranges import Range, bounded_range


def _literal(value: float) -> exp.Expr:
    if float(value).is_integer():
        return exp.Literal.number(int(value))
    return exp.Literal.number(repr(float(value)))


def clamp(expression: exp.Expr, lower: float, upper: float) -> exp.Expr:
    """NULL-preserving clamp (DuckDB's LEAST/GREATEST skip NULLs, which would turn a
    missing value into a bound)."""
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.LT(this=expression.copy(), expression=_literal(lower)),
                true=_literal(lower),
            ),
            exp.If(
                this=exp.GT(this=expression.copy(), expression=_literal(upper)),
                true=_literal(upper),
            ),
        ],
        default=expression,
    )


_DOUBLE = exp.DataType.build("DOUBLE")  # shared: insert copies only
_FLOAT_MAX = 3.4028234663852886e38


def _holds(kind: str, lower: float, upper: float) -> bool:
    """Whether a column of type ``kind`` can hold both bounds, so that a clamp comparing
    it with them converts nothing per row. DECIMAL(38, s) cannot hold 100 once s > 36,
    FLOAT cannot hold 1e39, UHUGEINT cannot hold -5, and DuckDB has no wider type to
    compare them in; other integer types widen, and DOUBLE holds every bound."""
    kind = kind.upper().replace(" ", "")
    if kind.startswith(("DECIMAL", "NUMERIC")):
        found = re.fullmatch(r"(?:DECIMAL|NUMERIC)\((\d+),(\d+)\)", kind)
        if found is None:
            return False  # DuckDB's bare DECIMAL is DECIMAL(18, 3): only spelt out ones
        digits = int(found.group(1)) - int(found.group(2))
        return max(abs(lower), abs(upper)) < 10.0**digits
    if kind in ("FLOAT", "REAL"):
        return max(abs(lower), abs(upper)) <= _FLOAT_MAX
    if kind == "UHUGEINT":
        return lower >= 0
    return True


def as_double(expression: exp.Expr) -> exp.Expr:
    """``TRY_CAST(expression AS DOUBLE)``, for a value a clamp or a sum must not meet in
    a DECIMAL type.

    DuckDB converts a clamp's literal bounds to the value's type, and DECIMAL(38, s)
    cannot hold 100 once s > 36: the conversion fails when a row reaches it, so the
    core would fail after the charge for a person with a row and answer without them.
    A SUM of DECIMAL(p > 18) values accumulates in a 128-bit integer and fails on
    overflow the same way. A DOUBLE holds every bound, a conversion to it from any
    number never fails (TRY_CAST makes anything else NULL on its own row), and its
    sums saturate at infinity, which the later clamps bound, instead of failing."""
    return exp.TryCast(this=expression, to=_DOUBLE.copy())


def clamp_columns(core: C.Core, expression: exp.Expr) -> exp.Expr:
    """``expression`` (copied) with every column that has declared bounds clamped to them
    where its value is read, each clamp marked with its :class:`DeclaredBound`.

    A column read only by a comparison (``income > 100000``, ``x IN (...)``, ``BETWEEN``,
    ``IS NULL``, ``LIKE``; sqlglot's predicates) is left as it is: a predicate's value
    is TRUE, FALSE or NULL whatever its operands, so the range analysis never reads
    their bounds (proxy/rewrite/ranges.py), and clamped there it changed which rows a
    CASE takes rather than what they add. ``SUM(CASE WHEN income > 100000 THEN 1 ELSE 0
    END)`` with income declared within [0, 100000] counted 0 of the 56 people above it
    (an answer oracle, 2026-12-05), where the same query's WHERE and COUNT read the
    column as it is. The values the aggregate adds are still clamped, and the derived
    range's own clamp (:func:`clamped_argument`) still bounds the whole argument.

    The analyst's own clamp, ``CASE WHEN e < lo THEN lo WHEN e > hi THEN hi ELSE e END``
    (and BigQuery's contribution bounds, written so), tests the value it returns: its
    conditions are clamped with it, so that the three ``e`` stay one expression and the
    range analysis still reads the form as a clamp to [lo, hi]
    (math_ranges.clamp_pattern); clamping its tests with its value gives what the clamp
    of the clamped value gives."""
    tables = core.shape.tables
    copied = expression.copy()
    tests = {
        id(branch.this)
        for case in copied.find_all(exp.Case)
        if clamp_pattern(case) is not None
        for branch in case.args["ifs"]
    }
    compared = {
        id(c)
        for p in copied.find_all(exp.Predicate)
        if id(p) not in tests
        for c in p.find_all(exp.Column)
    }

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and id(node) not in compared:
            info = tables.get(node.table.lower())
            policy = info.column(node.name) if info else None
            if policy is not None and policy.lower is not None and policy.upper is not None:
                # The node is in this rule's own copy: the clamp takes it over. A column
                # whose type may not hold the bounds is compared as a DOUBLE.
                kind = info.type_of(node.name) if info else ""
                fits = _holds(kind, policy.lower, policy.upper)
                name = f"{info.policy.name}.{node.name.lower()}" if info else node.name
                if info and info.policy.name == UNION_TABLE:
                    # the UNION ALL a query derives (a column's bounds are its arms'):
                    # the answer names the column, not that internal table
                    name = f"{node.name.lower()} (UNION ALL)"
                clamped = clamp(node if fits else as_double(node), policy.lower, policy.upper)
                # Marked, so that the clipping estimate counts the people it changes
                # (proxy/rewrite/clamped_rows.py); sqlglot keeps meta through copies. A
                # derived table's bounds hold by construction: its own flag counts them.
                if info is None or info.bounded_flag is None:
                    clamped.meta[DECLARED] = DeclaredBound(name, policy.lower, policy.upper)
                return clamped
        return node

    return copied.transform(visit, copy=False)


def _is_clamp(node: exp.Expr) -> bool:
    return isinstance(node, exp.Case) and len(node.args.get("ifs") or []) == 2


_INTEGER = exp.DataType.build("INTEGER")  # shared: insert copies only


def _numeric(expression: exp.Expr) -> exp.Expr:
    # Booleans sum as 0/1; DuckDB does not SUM a BOOLEAN directly.
    return exp.TryCast(this=expression, to=_INTEGER.copy())


EXACT_INTEGER = 2**53
MAX_PER_GROUP = 1e18  # one person's contribution; keeps exact DECIMAL(38, 9) sums in range


def _check_magnitude(stat: C.Statistic, max_rows: int) -> None:
    half = (stat.upper - stat.lower) / 2.0
    per_group = {
        C.SUM: max_rows * max(abs(stat.lower), abs(stat.upper)),
        C.CENTRED_SUM: max_rows * half,
        C.CENTRED_SQUARES: max_rows * half * half,
        C.DISTINCT_CENTRED_SUM: max_rows * half,
        C.DISTINCT_SQUARES: max_rows * half * half,
    }.get(stat.kind, 0.0)
    if not per_group <= MAX_PER_GROUP:
        raise bad_request(
            f"one person's contribution to a {stat.kind.replace('_', ' ')} could reach "
            f"{per_group:.3g}, above the supported {MAX_PER_GROUP:.0e}",
            "declare tighter lower/upper bounds, or clamp the value in SQL",
        )


# Integer totals are released exactly in 64-bit integers, saturating at ±2^62 (see the
# cross-person rule). A statistic one person can move by more than 2^28 would saturate
# once about 2^34 people contribute; it is noised on a float grid instead, whose range
# grows with its noise scale.
MAX_INTEGER_PER_GROUP = 2**28


def _integer_fits(stat: C.Statistic, max_rows: int, scaled: bool) -> C.Statistic:
    if stat.integer and stat.kind in (C.DISTINCT_CENTRED_SUM, C.DISTINCT_SQUARES):
        # Summed across people, never scaled; exact while one person's bound is small.
        half = (stat.upper - stat.lower) / 2.0
        bound = max_rows * (half if stat.kind == C.DISTINCT_CENTRED_SUM else half * half)
        if bound > MAX_INTEGER_PER_GROUP:
            return replace(stat, integer=False)
    if stat.integer and stat.kind in (C.SUM, C.CENTRED_SUM, C.CENTRED_SQUARES):
        if scaled:
            # A person's sum may be scaled to C rows' worth (see per_person._scaled):
            # not an integer any more, so it is noised on a float grid.
            return replace(stat, integer=False)
        half = (stat.upper - stat.lower) / 2.0
        per_group = {
            C.SUM: max_rows * max(abs(stat.lower), abs(stat.upper)),
            C.CENTRED_SUM: max_rows * half,
            C.CENTRED_SQUARES: max_rows * half * half,
        }[stat.kind]
        if per_group > MAX_INTEGER_PER_GROUP:
            return replace(stat, integer=False)
    return stat


def clamped_argument(core: C.Core, raw: exp.Expr, aggregate: str) -> tuple[exp.Expr, Range]:
    """An aggregate's (total) argument with every bounded column clamped where it is
    read, and its derived range; refuses an argument with no finite range, naming what
    to declare or clamp. The quantile rule bins the same argument (no second copy of
    this logic)."""
    clamped = clamp_columns(core, raw)
    rng = bounded_range(clamped, dict(core.shape.tables), aggregate)
    if rng.integer and max(abs(rng.lower), abs(rng.upper)) > EXACT_INTEGER:
        # Beyond 2^53 values are not exact as doubles or safe as BIGINT: treat them
        # as floats, summed exactly in DECIMAL.
        rng = replace(rng, integer=False)
    if rng.lower >= 0 and rng.upper <= 1 and rng.integer:
        clamped = _numeric(clamped)
    # A bare bounded column is already clamped to exactly its range; anything else
    # gets a final clamp to the derived range, in case a function's semantics and
    # the interval arithmetic ever disagree. A value that is not known to be an integer
    # may be a DECIMAL of any scale (a cast, a literal, a column): it is clamped as a
    # DOUBLE, which every later step reads it as anyway.
    if isinstance(raw, exp.Column) and _is_clamp(clamped):
        arg = clamped
    else:
        arg = clamp(clamped if rng.integer else as_double(clamped), rng.lower, rng.upper)
    return arg, rng


def apply(core: C.Core) -> C.Core:
    stats: dict[tuple[str, str | None], C.Statistic] = {}
    arguments: dict[str, exp.Expr] = {}
    argument_sql: dict[str, str] = {}

    def add(stat: C.Statistic) -> None:
        stats.setdefault((stat.kind, stat.arg_sql), stat)

    for call in core.shape.aggregates:
        if call.kind in S.QUANTILE_KINDS:
            continue  # released from histograms: proxy/rewrite/quantile_histogram.py
        if call.kind == S.COUNT_ROWS:
            add(C.Statistic(C.ROWS, None))
            continue
        if call.kind == S.COUNT_PERSONS:
            add(C.Statistic(C.PERSONS, None))
            continue
        raw = core.arguments[call.sql]
        if call.kind == S.COUNT_DISTINCT:
            # Values are counted, not summed: no range needed (any type, unclamped).
            arguments[call.sql] = raw
            argument_sql[call.sql] = duckdb_sql(raw)
            add(C.Statistic(C.DISTINCT, argument_sql[call.sql]))
            continue
        if call.kind in (S.SUM_DISTINCT, S.AVG_DISTINCT, *S.VARIANCE_DISTINCT_KINDS):
            label = call.kind.removesuffix("_distinct").upper() + "(DISTINCT)"
            arg, rng = clamped_argument(core, raw, label)
            arguments[call.sql] = arg
            key = argument_sql[call.sql] = duckdb_sql(arg)
            centred_integer = rng.integer and float(rng.lower + rng.upper) % 2 == 0
            # SUM(DISTINCT) releases the plain sum; AVG and VAR the sum about the midpoint
            # (sensitivity C·(U−L)/2 instead of C·max(|L|, |U|)) and the count.
            add(
                C.Statistic(
                    C.DISTINCT_SUM if call.kind == S.SUM_DISTINCT else C.DISTINCT_CENTRED_SUM,
                    key,
                    rng.lower,
                    rng.upper,
                    rng.integer if call.kind == S.SUM_DISTINCT else centred_integer,
                    values_integer=rng.integer,
                )
            )
            if call.kind != S.SUM_DISTINCT:
                add(C.Statistic(C.DISTINCT, key))
            if call.kind in S.VARIANCE_DISTINCT_KINDS:
                add(
                    C.Statistic(
                        C.DISTINCT_SQUARES,
                        key,
                        rng.lower,
                        rng.upper,
                        centred_integer,
                        values_integer=rng.integer,
                    )
                )
            continue
        if call.kind == S.COUNT:
            arg = raw
            arguments[call.sql] = arg
            argument_sql[call.sql] = duckdb_sql(arg)
            add(C.Statistic(C.COUNT, argument_sql[call.sql]))
            continue
        arg, rng = clamped_argument(core, raw, call.kind.upper())
        arguments[call.sql] = arg
        key = argument_sql[call.sql] = duckdb_sql(arg)
        if call.kind == S.SUM:
            add(
                C.Statistic(
                    C.SUM, key, rng.lower, rng.upper, rng.integer, values_integer=rng.integer
                )
            )
            continue
        add(C.Statistic(C.COUNT, key))
        centred_integer = rng.integer and float(rng.lower + rng.upper) % 2 == 0
        add(
            C.Statistic(
                C.CENTRED_SUM,
                key,
                rng.lower,
                rng.upper,
                centred_integer,
                values_integer=rng.integer,
            )
        )
        if call.kind in S.VARIANCE_KINDS:
            add(
                C.Statistic(
                    C.CENTRED_SQUARES,
                    key,
                    rng.lower,
                    rng.upper,
                    centred_integer,
                    values_integer=rng.integer,
                )
            )
    if core.clipping:
        # How many people bounding cut, per group, and how many people there are.
        add(C.Statistic(C.CLIPPED, None))
        add(C.Statistic(C.PERSONS, None))
    for stat in stats.values():
        _check_magnitude(stat, core.max_rows)
    scaled = core.bounding and not core.one_row_per_person
    ordered = sorted(
        (_integer_fits(s, core.max_rows, scaled) for s in stats.values()),
        key=C.Statistic.sort_key,
    )
    named = tuple(replace(s, column=f"__s{i}") for i, s in enumerate(ordered))
    return replace(core, arguments=arguments, argument_sql=argument_sql, statistics=named)
