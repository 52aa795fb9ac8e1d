"""Rule: clamp each person's statistics within a group (Linf: at most C rows' worth).

Counts are capped at C; a person's sum of values in [L, U] is clamped to
[C·min(L, 0), C·max(U, 0)]; centred sums to ±C·(U−L)/2 and centred squares to
[0, C·((U−L)/2)²]. Float sums are cast to DECIMAL(38, s) before clamping so the
cross-person total is exact and within the bound (the bounds are rounded outward to s
decimals). s is 9 unless one person's bound is so large that 10^s units of it would not
fit 2^62: every clamped per-person value is then at most 2^62 units, and a sum of up to
2^63 of them fits the engine's 128-bit accumulator, so the cross-person sum can never
overflow, whatever the data.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from sqlglot import exp

from proxy.rewrite import core as C

MAX_SCALE = 9  # decimals kept of float per-person statistics
UNIT_LIMIT = Decimal(2**62)  # the most units one person's clamped statistic may take


def _decimal(scale: int) -> exp.DataType:
    # Built rather than parsed: parsed nodes carry source positions that make every
    # copy slower.
    return exp.DataType(
        this=exp.DataType.Type.DECIMAL,
        expressions=[exp.DataTypeParam(this=exp.Literal.number(n)) for n in (38, scale)],
        nested=False,
    )


def _raw_bounds(stat: C.Statistic, max_rows: int) -> tuple[Decimal, Decimal]:
    c = Decimal(max_rows)
    lower, upper = Decimal(stat.lower), Decimal(stat.upper)  # exact binary values
    half = (upper - lower) / 2
    if stat.kind in (C.ROWS, C.COUNT, C.DISTINCT):
        return Decimal(0), c
    if stat.kind in (C.PERSONS, C.CLIPPED):
        return Decimal(0), Decimal(1)
    if stat.kind in (C.SUM, C.DISTINCT_SUM):
        return c * min(lower, Decimal(0)), c * max(upper, Decimal(0))
    if stat.kind in (C.CENTRED_SUM, C.DISTINCT_CENTRED_SUM):
        return -c * half, c * half
    return Decimal(0), c * half * half


def decimal_scale(stat: C.Statistic, max_rows: int) -> int:
    """Decimals kept of a float statistic's per-person value: at most 9, fewer when one
    person's bound B is so large that B·10^s would exceed 2^62 units. Depends on public
    bounds only."""
    lo, hi = _raw_bounds(stat, max_rows)
    bound = max(abs(lo), abs(hi), Decimal(1))
    scale = MAX_SCALE
    while scale > 0 and bound.scaleb(scale) > UNIT_LIMIT:
        scale -= 1
    return scale


def _outward(value: Decimal, up: bool, scale: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_CEILING if up else ROUND_FLOOR)


def statistic_bounds(stat: C.Statistic, max_rows: int) -> tuple[Decimal, Decimal]:
    """Exact bounds of one person's clamped statistic in one group.

    Float statistics are rounded outward to the decimals they are summed in
    (:func:`decimal_scale`), so the clamped per-person values and their exact
    cross-person sum respect them.
    """
    lo, hi = _raw_bounds(stat, max_rows)
    if stat.kind in (C.ROWS, C.COUNT, C.DISTINCT, C.PERSONS, C.CLIPPED):
        return lo, hi
    if stat.integer:
        return lo.to_integral_value(ROUND_FLOOR), hi.to_integral_value(ROUND_CEILING)
    scale = decimal_scale(stat, max_rows)
    return _outward(lo, False, scale), _outward(hi, True, scale)


def per_group_bound(stat: C.Statistic, max_rows: int) -> float:
    """max |contribution| as a float rounded up: the Δ∞ the released column must cover."""
    lo, hi = statistic_bounds(stat, max_rows)
    bound = max(abs(lo), abs(hi))
    value = float(bound)
    return value if Decimal(value) >= bound else math.nextafter(value, math.inf)


def _number(value: Decimal, integer: bool, scale: int) -> exp.Expr:
    if integer:
        return exp.Literal.number(int(value))
    return exp.cast(exp.Literal.number(str(value)), _decimal(scale), copy=False)


def clamped(stat: C.Statistic, expression: exp.Expr, max_rows: int) -> exp.Expr:
    lo, hi = statistic_bounds(stat, max_rows)
    if stat.kind in (C.ROWS, C.COUNT, C.CLIPPED):
        return exp.Least(
            this=expression, expressions=[exp.Literal.number(int(hi))], ignore_nulls=True
        )
    value: exp.Expr = exp.Coalesce(this=expression, expressions=[exp.Literal.number(0)])
    scale = 0 if stat.integer else decimal_scale(stat, max_rows)
    if not stat.integer:
        # Clamp in DOUBLE first so the DECIMAL cast can never overflow on some person's
        # raw sum (that error would depend on data), then clamp exactly in DECIMAL.
        value = exp.cast(_between(value, _float(lo), _float(hi)), _decimal(scale), copy=False)
    return _between(value, _number(lo, stat.integer, scale), _number(hi, stat.integer, scale))


def _float(value: Decimal) -> exp.Expr:
    return exp.Literal.number(repr(float(value)))


def _between(value: exp.Expr, lo: exp.Expr, hi: exp.Expr) -> exp.Expr:
    # ignore_nulls: plain DuckDB LEAST/GREATEST; the value is never NULL here.
    return exp.Least(
        this=exp.Greatest(this=value, expressions=[lo], ignore_nulls=True),
        expressions=[hi],
        ignore_nulls=True,
    )


def apply(core: C.Core) -> C.Core:
    if not core.bounding:
        return core
    ctes = dict(core.ctes)
    pp = ctes["pp"].copy()
    new_cols: list[exp.Expr] = []
    by_name = {s.column: s for s in core.statistics}
    for col in pp.expressions:
        stat = by_name.get(col.alias) if isinstance(col, exp.Alias) else None
        if stat is None:
            new_cols.append(col)
        else:
            new_cols.append(
                exp.alias_(clamped(stat, col.this, core.max_rows), stat.column, copy=False)
            )
    pp.set("expressions", new_cols)
    ctes["pp"] = pp
    return replace(core, ctes=tuple(ctes.items()))
