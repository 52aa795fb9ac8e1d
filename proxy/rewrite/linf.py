"""Rule: clamp each person's statistics within a group (Linf: at most C rows' worth).

Counts are capped at C; a person's sum of values in [L, U] is clamped to
[C·min(L, 0), C·max(U, 0)]; centred sums to ±C·(U−L)/2 and centred squares to
[0, C·((U−L)/2)²]. Float sums are cast to DECIMAL(38, 9) before clamping so the
cross-person total is exact and within the bound (the bounds are rounded outward).
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from sqlglot import exp

from proxy.rewrite import core as C

# DECIMAL(38, 9), built rather than parsed: parsed nodes carry source positions that
# make every copy slower. Shared: insert copies only.
DECIMAL = exp.DataType(
    this=exp.DataType.Type.DECIMAL,
    expressions=[exp.DataTypeParam(this=exp.Literal.number(n)) for n in (38, 9)],
    nested=False,
)


_NINE = Decimal("1e-9")


def _outward(value: Decimal, up: bool) -> Decimal:
    return value.quantize(_NINE, rounding=ROUND_CEILING if up else ROUND_FLOOR)


def statistic_bounds(stat: C.Statistic, max_rows: int) -> tuple[Decimal, Decimal]:
    """Exact bounds of one person's clamped statistic in one group.

    Float statistics are rounded outward to 9 decimals, the DECIMAL scale they are summed
    in, so the clamped per-person values and their exact cross-person sum respect them.
    """
    c = Decimal(max_rows)
    lower, upper = Decimal(stat.lower), Decimal(stat.upper)  # exact binary values
    half = (upper - lower) / 2
    if stat.kind in (C.ROWS, C.COUNT):
        return Decimal(0), c
    if stat.kind == C.PERSONS:
        return Decimal(0), Decimal(1)
    if stat.kind == C.SUM:
        lo, hi = c * min(lower, Decimal(0)), c * max(upper, Decimal(0))
    elif stat.kind == C.CENTRED_SUM:
        lo, hi = -c * half, c * half
    else:
        lo, hi = Decimal(0), c * half * half
    if stat.integer:
        return lo.to_integral_value(ROUND_FLOOR), hi.to_integral_value(ROUND_CEILING)
    return _outward(lo, up=False), _outward(hi, up=True)


def per_group_bound(stat: C.Statistic, max_rows: int) -> float:
    """max |contribution| as a float rounded up: the Δ∞ the released column must cover."""
    lo, hi = statistic_bounds(stat, max_rows)
    bound = max(abs(lo), abs(hi))
    value = float(bound)
    return value if Decimal(value) >= bound else math.nextafter(value, math.inf)


def _number(value: Decimal, integer: bool) -> exp.Expr:
    if integer:
        return exp.Literal.number(int(value))
    return exp.cast(exp.Literal.number(str(value)), DECIMAL.copy(), copy=False)


def clamped(stat: C.Statistic, expression: exp.Expr, max_rows: int) -> exp.Expr:
    lo, hi = statistic_bounds(stat, max_rows)
    if stat.kind in (C.ROWS, C.COUNT):
        return exp.Least(
            this=expression, expressions=[exp.Literal.number(max_rows)], ignore_nulls=True
        )
    value: exp.Expr = exp.Coalesce(this=expression, expressions=[exp.Literal.number(0)])
    if not stat.integer:
        # Clamp in DOUBLE first so the DECIMAL cast can never overflow on some person's
        # raw sum (that error would depend on data), then clamp exactly in DECIMAL.
        value = exp.cast(_between(value, _float(lo), _float(hi)), DECIMAL.copy(), copy=False)
    return _between(value, _number(lo, stat.integer), _number(hi, stat.integer))


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
