"""Range analysis: the interval an aggregate argument can take, from the policy's bounds.

A SUM or AVG is answered only when every value of its argument provably lies in a finite
[lower, upper]; these bounds set the sensitivity. The analysis is interval arithmetic
over column bounds, literals, + − *, CASE, LEAST/GREATEST, booleans and CAST, and the
math functions of math_ranges.py (which refuse an argument range outside their domain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from proxy.catalog import TableInfo
from proxy.engines.kinds import Family, Typer
from proxy.errors import unsupported
from proxy.rewrite import math_ranges

INF = math.inf
_BOOLEAN_NODES = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Boolean,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.StartsWith,
    exp.Contains,
    exp.RegexpLike,
)
_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "HUGEINT", "BOOLEAN"}


@dataclass(frozen=True)
class Range:
    lower: float
    upper: float
    integer: bool

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.lower) and math.isfinite(self.upper)

    def union(self, other: Range) -> Range:
        return Range(
            min(self.lower, other.lower),
            max(self.upper, other.upper),
            self.integer and other.integer,
        )


UNKNOWN = Range(-INF, INF, False)
BOOLEAN = Range(0.0, 1.0, True)


def _mul(a: float, b: float) -> float:
    if a == 0 or b == 0:
        return 0.0
    return a * b


def _literal(node: exp.Literal) -> Range:
    if node.is_string:
        return UNKNOWN
    value = float(node.this)
    return Range(value, value, node.is_int)


def _column(node: exp.Column, tables: dict[str, TableInfo]) -> Range:
    info = tables.get(node.table.lower())
    if info is None:
        return UNKNOWN
    if not info.is_numeric(node.name):
        # Bounds on a text or date column would be compared with numbers row by row.
        return UNKNOWN
    integer = info.is_integer(node.name)
    if info.column_types.get(node.name.lower(), "").upper() == "BOOLEAN":
        return BOOLEAN
    policy = info.column(node.name)
    if policy is None:
        return Range(-INF, INF, integer)
    if policy.lower is not None and policy.upper is not None:
        return Range(float(policy.lower), float(policy.upper), integer)
    if policy.values:
        numbers = [
            v for v in policy.values if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        if numbers and len(numbers) == len(policy.values):
            return Range(float(min(numbers)), float(max(numbers)), integer)
    return Range(-INF, INF, integer)


def _truncated(x: float) -> float:
    return float(math.trunc(x)) if math.isfinite(x) else x


def _never_null(node: exp.Expr) -> bool:
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string


def derive(node: exp.Expr, tables: dict[str, TableInfo]) -> Range:
    """The range of a row-level expression; UNKNOWN parts propagate as infinite bounds."""
    if isinstance(node, exp.Paren):
        return derive(node.this, tables)
    if isinstance(node, exp.Literal):
        return _literal(node)
    if isinstance(node, exp.Null):
        return Range(INF, -INF, True)  # empty: NULL contributes nothing to SUM/COUNT
    if isinstance(node, exp.Column):
        return _column(node, tables)
    if isinstance(node, _BOOLEAN_NODES):
        return BOOLEAN
    if isinstance(node, exp.Neg):
        r = derive(node.this, tables)
        return Range(-r.upper, -r.lower, r.integer)
    if isinstance(node, (exp.Add, exp.Sub)):
        a, b = derive(node.left, tables), derive(node.right, tables)
        if isinstance(node, exp.Add):
            return Range(a.lower + b.lower, a.upper + b.upper, a.integer and b.integer)
        return Range(a.lower - b.upper, a.upper - b.lower, a.integer and b.integer)
    if isinstance(node, exp.Mul):
        a, b = derive(node.left, tables), derive(node.right, tables)
        corners = [_mul(x, y) for x in (a.lower, a.upper) for y in (b.lower, b.upper)]
        if any(math.isnan(c) for c in corners):
            return UNKNOWN
        return Range(min(corners), max(corners), a.integer and b.integer)
    if isinstance(node, exp.Div):
        a, b = derive(node.left, tables), derive(node.right, tables)
        if b.lower == b.upper and b.lower != 0 and math.isfinite(b.lower):
            lo, hi = sorted((a.lower / b.lower, a.upper / b.lower))
            return Range(lo, hi, False)
        return _quotient(a, b, typed=bool(node.args.get("typed")))
    if isinstance(node, exp.IntDiv):
        # DuckDB's // truncates towards zero on two integers (a monotone step of a / c)
        # and divides as / does otherwise.
        a, b = derive(node.left, tables), derive(node.right, tables)
        if b.lower == b.upper and b.lower != 0 and math.isfinite(b.lower):
            whole = a.integer and b.integer
            ends = [x / b.lower for x in (a.lower, a.upper)]
            if whole:
                ends = [_truncated(x) for x in ends]
            return Range(min(ends), max(ends), whole)
        return _quotient(a, b, typed=True)
    if isinstance(node, exp.Abs):
        r = derive(node.this, tables)
        if r.lower >= 0:
            return r
        if r.upper <= 0:
            return Range(-r.upper, -r.lower, r.integer)
        return Range(0.0, max(-r.lower, r.upper), r.integer)
    if isinstance(node, (exp.Least, exp.Greatest)):
        # DuckDB skips NULL arguments, so only never-NULL arguments (literals) cap the result.
        args = [node.this, *node.expressions]
        parts = [derive(a, tables) for a in args]
        fixed = [p for a, p in zip(args, parts, strict=True) if _never_null(a)]
        integer = all(p.integer for p in parts)
        if isinstance(node, exp.Least):
            upper = min(p.upper for p in fixed) if fixed else max(p.upper for p in parts)
            return Range(min(p.lower for p in parts), upper, integer)
        lower = max(p.lower for p in fixed) if fixed else min(p.lower for p in parts)
        return Range(lower, max(p.upper for p in parts), integer)
    if isinstance(node, (exp.Case, exp.If)):
        clamped = math_ranges.clamp_pattern(node)
        if clamped is not None:
            inner, low, high = clamped
            r = derive(inner, tables)
            if r.lower > r.upper:
                return r  # only NULLs
            # A clamp is monotone: the range of clamp(x) is [clamp(lower), clamp(upper)].
            return Range(
                min(max(r.lower, low), high),
                min(max(r.upper, low), high),
                r.integer and float(low).is_integer() and float(high).is_integer(),
            )
        if isinstance(node, exp.If):
            branches = [node.args.get("true"), node.args.get("false")]
        else:
            branches = [i.args.get("true") for i in node.args.get("ifs") or []]
            branches.append(node.args.get("default"))
        result = Range(INF, -INF, True)
        for branch in branches:
            result = result.union(
                derive(branch, tables) if branch is not None else Range(INF, -INF, True)
            )
        return result
    if isinstance(node, exp.Coalesce):
        parts = [derive(node.this, tables), *(derive(e, tables) for e in node.expressions)]
        result = parts[0]
        for p in parts[1:]:
            result = result.union(p)
        return result
    if isinstance(node, (exp.Cast, exp.TryCast)):
        r = derive(node.this, tables)
        target = node.to.this.name if isinstance(node.to, exp.DataType) else ""
        if target.upper() in _INTEGER_TYPES:
            return Range(
                float(math.floor(r.lower)) if math.isfinite(r.lower) else r.lower,
                float(math.ceil(r.upper)) if math.isfinite(r.upper) else r.upper,
                True,
            )
        if node.to.is_type(*exp.DataType.NUMERIC_TYPES):
            return Range(r.lower, r.upper, False)
        return UNKNOWN
    if isinstance(node, (exp.Round, exp.Floor, exp.Ceil)):
        r = derive(node.this, tables)
        return Range(
            float(math.floor(r.lower)) if math.isfinite(r.lower) else r.lower,
            float(math.ceil(r.upper)) if math.isfinite(r.upper) else r.upper,
            r.integer,
        )
    if isinstance(node, exp.Try):
        return derive(node.this, tables)
    if isinstance(node, exp.Mod):
        return _remainder(derive(node.left, tables), derive(node.right, tables))
    if isinstance(node, exp.Extract):
        unit = node.this
        part = unit.name.upper() if isinstance(unit, exp.Var) else ""
        if not _dated(node.expression, tables):
            return UNKNOWN
        return _PART_RANGES.get(_PART_NAMES.get(part, part), UNKNOWN)
    if isinstance(node, math_ranges.MATH_NODES):
        parts = [derive(a, tables) for a in math_ranges.arguments(node)]
        if any(p.lower > p.upper for p in parts):
            return Range(INF, -INF, True)  # a NULL argument: the value is NULL
        found = math_ranges.interval(node, parts)
        return Range(found.lower, found.upper, found.integer)
    return UNKNOWN


# The values a calendar part takes on every engine (seconds as PostgreSQL gives them,
# with their fraction and a leap second). The rewrite clamps an aggregate's argument to
# its derived range in the SQL that runs, so these are enforced, not assumed.
_PART_RANGES = {
    "MONTH": Range(1.0, 12.0, True),
    "DAY": Range(1.0, 31.0, True),
    "DOW": Range(0.0, 6.0, True),
    "ISODOW": Range(1.0, 7.0, True),
    "DOY": Range(1.0, 366.0, True),
    "WEEK": Range(1.0, 53.0, True),
    "QUARTER": Range(1.0, 4.0, True),
    "HOUR": Range(0.0, 23.0, True),
    "MINUTE": Range(0.0, 59.0, True),
    "SECOND": Range(0.0, 61.0, False),
}
# (``month(x)``, ``hour(x)`` ... reach here as EXTRACT: proxy/spellings.py respells them)
_PART_NAMES = {
    "DAYOFWEEK": "DOW",
    "WEEKDAY": "DOW",
    "DAYOFYEAR": "DOY",
    "DAYOFMONTH": "DAY",
    "WEEKOFYEAR": "WEEK",
}


def _dated(node: exp.Expr, tables: dict[str, TableInfo]) -> bool:
    """Whether ``node`` is a DATE or TIMESTAMP by its type: a calendar part of anything
    else has no range of its own (the days of an INTERVAL are any number: a review,
    2026-12-06, found ``EXTRACT(day FROM ts - TIMESTAMP '2020-01-01')`` clamped to 31)."""
    typer = Typer({alias: info.column_types for alias, info in tables.items()})
    if typer.is_interval(node):
        return False
    return typer.kind(node).family in (Family.DATE, Family.TIMESTAMP)


def _quotient(a: Range, b: Range, *, typed: bool) -> Range:
    """``a / b`` for a divisor whose range keeps away from 0 (``x / GREATEST(y, 1)``,
    ``x / (y + 1)`` of a count): on either side of 0 division is monotone in each
    argument, so the four corners' quotients bound every quotient (and a correctly
    rounded division keeps that order). A divisor that can be 0, or a bound that is not
    finite, gives no range. ``typed``: a dialect's division that truncates when both
    arguments are integers (PostgreSQL's ``/``)."""
    if a.lower > a.upper or b.lower > b.upper:
        return Range(INF, -INF, True)  # only NULLs
    if not (a.bounded and b.bounded) or b.lower <= 0 <= b.upper:
        return UNKNOWN
    corners = [x / y for x in (a.lower, a.upper) for y in (b.lower, b.upper)]
    low, high = min(corners), max(corners)
    if typed:
        whole = a.integer and b.integer
        return Range(float(math.floor(low)), float(math.ceil(high)), whole)
    return Range(low, high, False)


def _remainder(a: Range, b: Range) -> Range:
    """``a % b`` for a constant ``b`` other than 0: below ``|b|`` in size, with the sign
    of ``a`` (DuckDB, PostgreSQL and Spark alike)."""
    if not (b.lower == b.upper and b.lower != 0 and math.isfinite(b.lower)):
        return UNKNOWN
    if a.lower > a.upper:
        return a  # only NULLs
    if not a.bounded:
        # a remainder of a value the policy does not bound (the person id's
        # ``user_id % 1000``) stays refused: bounds describe measurements, not ids
        return UNKNOWN
    whole = a.integer and b.integer
    most = abs(b.lower) - 1 if whole else abs(b.lower)
    low = 0.0 if a.lower >= 0 else max(-most, a.lower)
    high = 0.0 if a.upper <= 0 else min(most, a.upper)
    return Range(low, high, whole)


def bounded_range(node: exp.Expr, tables: dict[str, TableInfo], aggregate: str) -> Range:
    """The range of an aggregate argument, or a refusal naming what to declare or clamp."""
    r = derive(node, tables)
    if r.lower > r.upper:  # only NULLs: nothing to bound, the sum is always zero
        return Range(0.0, 0.0, True)
    if not r.bounded:
        # Named by its columns: the node is the rewritten argument (clamps and TRY
        # added), whose text the analyst never wrote.
        cols = sorted({c.name for c in node.find_all(exp.Column)})
        divisor = _zero_divisor(node, tables)
        if divisor is not None:
            raise unsupported(
                f"cannot bound the argument of {aggregate}: it divides by a value that can "
                f"be 0 (of {divisor}), so the quotient has no bound",
                f"divide by a value kept away from 0, e.g. GREATEST({divisor}, 1) for a "
                "count; NULLIF(x, 0) compares the value before the policy's bounds clamp "
                "it, so it does not keep the divisor from 0",
            )
        raise unsupported(
            f"cannot bound the argument of {aggregate}: no finite range follows from the "
            f"policy's bounds of {', '.join(cols) or 'its values'}",
            "declare lower/upper for column "
            + (", ".join(cols) or "it")
            + " in the policy, or clamp it with LEAST(GREATEST(x, lo), hi)",
        )
    return r


def _zero_divisor(node: exp.Expr, tables: dict[str, TableInfo]) -> str | None:
    """The column a division in ``node`` divides by when its divisor's range holds 0
    (what the refusal's hint names), or None."""
    for division in node.find_all(exp.Div, exp.IntDiv):
        b = derive(division.right, tables)
        if b.bounded and b.lower <= 0 <= b.upper:
            cols = sorted({c.name for c in division.right.find_all(exp.Column)})
            return cols[0] if len(cols) == 1 else "the divisor"
    return None
