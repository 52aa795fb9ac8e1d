"""Range analysis of math functions in aggregate arguments (used by ranges.py).

Each function maps the intervals of its arguments to a sound interval of its value:
monotone functions map their bounds, SIN/COS/SIGN/ATAN are bounded by construction,
and a function whose argument's range leaves its domain (LN of a range that reaches 0,
SQRT of a negative range, ASIN outside [-1, 1], TAN across π/2 + kπ) or that could
overflow a double (EXP above 709, POWER) is refused at plan time, with a rewrite that
stays inside the domain. So an answered aggregate never meets NaN, an infinity or an
engine error on any row: its argument is defined and finite wherever its inputs lie
within the policy's bounds (which the clamp rule enforces where they are read).

Functions of sqlglot's tree, as DuckDB evaluates them: ``Log(this=b, expression=x)``
is the base-b logarithm; a one-argument ``Log(x)`` is DuckDB's LOG, base 10.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from proxy.errors import DPSQLError, unsupported

INF = math.inf
# The largest value EXP and POWER may reach: one person's contribution is capped at
# 1e18 anyway (clamp_inputs.MAX_PER_GROUP), so a larger one is refused here with a hint
# that names the function rather than later with a generic one.
MAX_VALUE = 1e18


class Bounds(Protocol):
    @property
    def lower(self) -> float: ...
    @property
    def upper(self) -> float: ...
    @property
    def integer(self) -> bool: ...


@dataclass(frozen=True)
class Interval:
    lower: float
    upper: float
    integer: bool = False


UNBOUNDED = Interval(-INF, INF)

MATH_NODES: tuple[type[exp.Expr], ...] = (
    exp.Ln,
    exp.Log,
    exp.Exp,
    exp.Pow,
    exp.Sqrt,
    exp.Cbrt,
    exp.Sign,
    exp.Sin,
    exp.Cos,
    exp.Tan,
    exp.Cot,
    exp.Asin,
    exp.Acos,
    exp.Atan,
    exp.Atan2,
    exp.Degrees,
    exp.Radians,
    exp.Pi,
    exp.SafeDivide,
)


def arguments(node: exp.Expr) -> list[exp.Expr]:
    """The value arguments of a math node, in the order :func:`interval` expects."""
    if isinstance(node, exp.Log):
        # (value, base) with base None for DuckDB's one-argument LOG (base 10)
        return [node.expression, node.this] if node.expression is not None else [node.this]
    return [a for a in (node.this, node.args.get("expression")) if isinstance(a, exp.Expr)]


def number_literal(node: exp.Expr | None) -> float | None:
    if isinstance(node, exp.Neg):
        inner = number_literal(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Paren):
        return number_literal(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    return None


def clamp_pattern(node: exp.Expr) -> tuple[exp.Expr, float, float] | None:
    """``CASE WHEN e < lo THEN lo WHEN e > hi THEN hi ELSE e END`` (the NULL-preserving
    clamp the clamp rule writes, and the form of BigQuery's contribution bounds): (e,
    lo, hi), so that its range is the clamp of e's range, not the union of the branches."""
    if not isinstance(node, exp.Case) or node.this is not None:
        return None
    ifs = node.args.get("ifs") or []
    default = node.args.get("default")
    if len(ifs) != 2 or default is None:
        return None
    below, above = ifs[0].this, ifs[1].this
    if not (isinstance(below, exp.LT) and isinstance(above, exp.GT)):
        return None
    low, high = number_literal(below.expression), number_literal(above.expression)
    if (
        low is None
        or high is None
        or low > high
        or number_literal(ifs[0].args.get("true")) != low
        or number_literal(ifs[1].args.get("true")) != high
        or not (below.this == default and above.this == default)
    ):
        return None
    return default, low, high


def _unclamped(node: exp.Expr) -> exp.Expr:
    """The expression as the analyst wrote it: the clamp rule's column clamps and the
    binder's table aliases removed."""
    found = clamp_pattern(node)
    if found is not None and isinstance(found[0], exp.Column):
        return exp.column(found[0].name)
    if isinstance(node, exp.Column) and node.table:
        return exp.column(node.name)
    return node


def _text(node: exp.Expr) -> str:
    return node.copy().transform(_unclamped, copy=False).sql(dialect="duckdb")[:80]


def _fmt(value: float) -> str:
    return f"{value:g}"


def _domain_error(call: str, arg: exp.Expr, r: Bounds, why: str, rewrite: str) -> DPSQLError:
    """``call`` is the function call as written; ``arg`` the argument out of its domain."""
    return unsupported(
        f"{call} is {why}, and {_text(arg)} ranges over "
        f"[{_fmt(r.lower)}, {_fmt(r.upper)}] under the policy's bounds",
        f"keep the argument inside the domain, e.g. {rewrite}",
    )


def _monotone(f: Callable[[float], float], r: Bounds) -> Interval:
    a, b = f(r.lower), f(r.upper)
    return Interval(min(a, b), max(a, b))


def _logarithm(call: Callable[[str], str], arg: exp.Expr, r: Bounds, base: float) -> Interval:
    """``call(text)`` spells the logarithm of an argument text (for the messages)."""
    if not (math.isfinite(r.lower) and math.isfinite(r.upper)):
        return UNBOUNDED  # an unbounded column: the generic refusal says what to declare
    if r.lower <= 0:
        text = _text(arg)
        shift = 1 - math.floor(r.lower)
        raise unsupported(
            f"{call(text)} is undefined for values at or below 0 (and unbounded near 0), "
            f"and {text} ranges over [{_fmt(r.lower)}, {_fmt(r.upper)}] under the "
            "policy's bounds",
            f"keep the argument positive, e.g. {call(f'{text} + {shift:g}')} or "
            f"{call(f'GREATEST({text}, 1)')}",
        )
    return _monotone(lambda x: math.log(x) / math.log(base), r)


def _log(node: exp.Expr, args: Sequence[Bounds]) -> Interval:
    value = arguments(node)[0]
    if isinstance(node, exp.Ln):
        return _logarithm(lambda t: f"LN({t})", value, args[0], math.e)
    if len(args) == 1:
        return _logarithm(lambda t: f"LOG({t})", value, args[0], 10.0)
    base = args[1]
    if base.lower != base.upper or not math.isfinite(base.lower):
        return UNBOUNDED  # a variable base: refused as unbounded, with the generic hint
    b = base.lower
    if b <= 0 or b == 1:
        r = args[0]
        text = _text(value)
        if math.isfinite(r.lower) and r.lower <= 0:
            text = f"{text} + {1 - math.floor(r.lower):g}"
        raise unsupported(
            f"LOG with base {_fmt(b)} is undefined",
            f"use a positive base other than 1, e.g. LOG(2, {text})",
        )
    return _logarithm(lambda t: f"LOG({_fmt(b)}, {t})", value, args[0], b)


def _exp(value: exp.Expr, r: Bounds) -> Interval:
    if not math.isfinite(r.upper):
        return UNBOUNDED
    if r.upper > math.log(MAX_VALUE):
        raise unsupported(
            f"EXP({_text(value)}) could reach {math.exp(min(r.upper, 709)):.3g}: "
            f"{_text(value)} reaches {_fmt(r.upper)} under the policy's bounds, and dpsql "
            f"bounds values at {MAX_VALUE:.0e}",
            f"cap the argument, e.g. EXP(LEAST({_text(value)}, 40))",
        )
    return Interval(math.exp(r.lower) if math.isfinite(r.lower) else 0.0, math.exp(r.upper))


def _power(node: exp.Expr, base: Bounds, power: Bounds) -> Interval:
    finite = all(math.isfinite(v) for v in (base.lower, base.upper, power.lower, power.upper))
    if not finite:
        return UNBOUNDED

    def overflow() -> DPSQLError:
        x_sql, y_sql = _text(node.this), _text(node.expression)
        n = power.lower
        if power.lower == power.upper and n > 0:
            # The largest base whose n-th power stays within MAX_VALUE.
            cap = math.floor(MAX_VALUE ** (1.0 / n) * (1 - 1e-9))
            capped = (
                f"LEAST(GREATEST({x_sql}, {-cap}), {cap})"
                if base.lower < -cap
                else f"LEAST({x_sql}, {cap})"
            )
            rewrite = f"POWER({capped}, {y_sql})"
        else:
            rewrite = f"POWER({x_sql}, LEAST({y_sql}, 2))"
        return unsupported(
            f"POWER({x_sql}, {y_sql}) could exceed {MAX_VALUE:.0e} under the policy's bounds",
            f"cap the base or the exponent, e.g. {rewrite}",
        )

    found = _power_interval(node, base, power, overflow)
    if max(abs(found.lower), abs(found.upper)) > MAX_VALUE:
        raise overflow()
    return found


def _power_interval(
    node: exp.Expr,
    base: Bounds,
    power: Bounds,
    overflow: Callable[[], DPSQLError],
) -> Interval:
    # The texts are for the messages only: printed when one is raised, never per level
    # (printed at every level of nested POWERs, they made the bound quadratic in the
    # depth: 600 levels took 4 s to plan, 2026-12-04)
    def texts() -> tuple[str, str]:
        return _text(node.this), _text(node.expression)

    try:
        if power.lower == power.upper:
            n = power.lower
            if n == 0:
                return Interval(1.0, 1.0)
            a, b = base.lower, base.upper
            if a <= 0 <= b and n < 0:
                x_sql, y_sql = texts()
                raise _domain_error(
                    f"POWER({x_sql}, {y_sql})",
                    node.this,
                    base,
                    f"unbounded near 0 for the negative exponent {_fmt(n)}",
                    f"POWER({x_sql} + {1 - math.floor(a):g}, {y_sql})",
                )
            if a < 0 and not float(n).is_integer():
                x_sql, y_sql = texts()
                raise _domain_error(
                    f"POWER({x_sql}, {y_sql})",
                    node.this,
                    base,
                    f"undefined for negative values with the fractional exponent {_fmt(n)}",
                    f"POWER(GREATEST({x_sql}, 0), {y_sql})",
                )
            ends = [math.pow(a, n), math.pow(b, n)]
            if a < 0 < b and n > 0 and float(n).is_integer() and int(n) % 2 == 0:
                return Interval(0.0, max(ends))  # an even power crosses its minimum at 0
            return Interval(min(ends), max(ends))
        if base.lower <= 0:
            return UNBOUNDED  # x^y with a variable exponent: positive bases only
        corners = [
            math.pow(x, y) for x in (base.lower, base.upper) for y in (power.lower, power.upper)
        ]
        return Interval(min(corners), max(corners))
    except (OverflowError, ValueError):
        raise overflow() from None


def _periodic_extremes(r: Bounds, peak: float) -> tuple[bool, bool]:
    """Whether [lower, upper] contains a maximum (peak + 2kπ) or a minimum
    (peak + π + 2kπ) of a sine-like function."""

    def contains(point: float) -> bool:
        k = math.ceil((r.lower - point) / (2 * math.pi))
        return point + 2 * math.pi * k <= r.upper

    return contains(peak), contains(peak + math.pi)


def _wave(f: Callable[[float], float], r: Bounds, peak: float) -> Interval:
    if not (math.isfinite(r.lower) and math.isfinite(r.upper)) or r.upper - r.lower >= 2 * math.pi:
        return Interval(-1.0, 1.0)
    ends = [f(r.lower), f(r.upper)]
    has_max, has_min = _periodic_extremes(r, peak)
    return Interval(-1.0 if has_min else min(ends), 1.0 if has_max else max(ends))


def _branch(
    name: str, value: exp.Expr, r: Bounds, f: Callable[[float], float], start: float
) -> Interval:
    """TAN and COT: monotone on each branch (start + kπ, start + (k+1)π)."""
    if not (math.isfinite(r.lower) and math.isfinite(r.upper)):
        return UNBOUNDED
    k = math.floor((r.lower - start) / math.pi)
    low, high = start + k * math.pi, start + (k + 1) * math.pi
    if not (low < r.lower and r.upper < high):
        clamp = "-1.5, 1.5" if name == "TAN" else "0.1, 3.0"
        lo, hi = clamp.split(", ")
        raise _domain_error(
            f"{name}({_text(value)})",
            value,
            r,
            "unbounded where its argument crosses a pole (π/2 + kπ for TAN, kπ for COT)",
            f"{name}(LEAST(GREATEST({_text(value)}, {lo}), {hi}))",
        )
    found = _monotone(f, r)
    if not max(abs(found.lower), abs(found.upper)) <= MAX_VALUE:  # next to a pole
        raise _domain_error(
            f"{name}({_text(value)})",
            value,
            r,
            "too large next to a pole (π/2 + kπ for TAN, kπ for COT)",
            f"{name}(LEAST(GREATEST({_text(value)}, {'-1.5' if name == 'TAN' else '0.1'}), "
            f"{'1.5' if name == 'TAN' else '3.0'}))",
        )
    return found


def interval(node: exp.Expr, args: Sequence[Bounds]) -> Interval:
    """The interval of a math node (one of :data:`MATH_NODES`) from its arguments'
    intervals, or a refusal when the argument leaves the function's domain."""
    values = arguments(node)
    if isinstance(node, exp.Pi):
        return Interval(math.pi, math.pi)
    if isinstance(node, (exp.Ln, exp.Log)):
        return _log(node, args)
    r = args[0]
    if isinstance(node, exp.Exp):
        return _exp(values[0], r)
    if isinstance(node, exp.Pow):
        return _power(node, r, args[1])
    if isinstance(node, exp.Sqrt):
        if r.lower < 0:
            if not math.isfinite(r.lower):
                return UNBOUNDED
            raise _domain_error(
                f"SQRT({_text(values[0])})",
                values[0],
                r,
                "undefined for negative values",
                f"SQRT(GREATEST({_text(values[0])}, 0))",
            )
        return _monotone(math.sqrt, r) if math.isfinite(r.upper) else UNBOUNDED
    if isinstance(node, exp.Cbrt):
        return _monotone(math.cbrt, r) if r.lower > -INF and r.upper < INF else UNBOUNDED
    if isinstance(node, exp.Sign):
        sign = lambda v: float((v > 0) - (v < 0))  # noqa: E731
        return Interval(sign(r.lower), sign(r.upper), True)
    if isinstance(node, exp.Sin):
        return _wave(math.sin, r, math.pi / 2)
    if isinstance(node, exp.Cos):
        return _wave(math.cos, r, 0.0)
    if isinstance(node, exp.Tan):
        return _branch("TAN", values[0], r, math.tan, -math.pi / 2)
    if isinstance(node, exp.Cot):
        return _branch("COT", values[0], r, lambda v: 1.0 / math.tan(v), 0.0)
    if isinstance(node, (exp.Asin, exp.Acos)):
        name = "ASIN" if isinstance(node, exp.Asin) else "ACOS"
        if r.lower < -1 or r.upper > 1:
            raise _domain_error(
                f"{name}({_text(values[0])})",
                values[0],
                r,
                "undefined outside [-1, 1]",
                f"{name}(LEAST(GREATEST({_text(values[0])}, -1), 1))",
            )
        return _monotone(math.asin if name == "ASIN" else math.acos, r)
    if isinstance(node, exp.Atan):
        return _monotone(math.atan, r)
    if isinstance(node, exp.Atan2):
        return Interval(-math.pi, math.pi)
    if isinstance(node, (exp.Degrees, exp.Radians)):
        factor = 180.0 / math.pi if isinstance(node, exp.Degrees) else math.pi / 180.0
        return Interval(r.lower * factor, r.upper * factor)
    if isinstance(node, exp.SafeDivide):
        d = args[1]
        if d.lower == d.upper and d.lower != 0 and math.isfinite(d.lower):
            ends = [r.lower / d.lower, r.upper / d.lower]
            return Interval(min(ends), max(ends))
        return UNBOUNDED
    return UNBOUNDED
