"""The DuckDB type of a row-level expression of the core, as far as its total forms need it.

Rendering a core for another engine must keep DuckDB's semantics, and those depend on
types: ``a + b`` overflows at 2^31 for two INTEGERs and at 2^63 for BIGINTs, ``5 / 2`` is
a DOUBLE division, a DECIMAL rounds half away from zero when cast to an integer while a
DOUBLE rounds half to even. This infers, from the catalog's column types and DuckDB's
typing rules, the family (and integer width) of each expression the renderers guard.
Anything it cannot type is UNKNOWN, and renderers refuse to guess about it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from sqlglot import exp


class Family(StrEnum):
    INT = "int"
    DECIMAL = "decimal"
    FLOAT = "float"
    TEXT = "text"
    BOOL = "bool"
    DATE = "date"
    TIMESTAMP = "timestamp"
    NULL = "null"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Kind:
    family: Family
    bits: int = 0  # integer width (8, 16, 32, 64, 128); 0 for other families
    # A DECIMAL's precision and scale as DuckDB types it (precision 0: not known).
    precision: int = 0
    scale: int = 0

    @property
    def numeric(self) -> bool:
        return self.family in (Family.INT, Family.DECIMAL, Family.FLOAT)


UNKNOWN = Kind(Family.UNKNOWN)
NULL = Kind(Family.NULL)
BOOL = Kind(Family.BOOL)
TEXT = Kind(Family.TEXT)
FLOAT = Kind(Family.FLOAT)
DECIMAL = Kind(Family.DECIMAL)
BIGINT = Kind(Family.INT, 64)

_INT_BITS = {
    "TINYINT": 8,
    "UTINYINT": 16,
    "SMALLINT": 16,
    "USMALLINT": 32,
    "INTEGER": 32,
    "INT": 32,
    "UINTEGER": 64,
    "BIGINT": 64,
    "UBIGINT": 128,
    "HUGEINT": 128,
    "UHUGEINT": 128,
    # sqlglot writes DuckDB's HUGEINT and UHUGEINT so
    "INT128": 128,
    "UINT128": 128,
}


# The digits DuckDB gives an integer type in DECIMAL arithmetic (INTEGER: DECIMAL(10, 0)).
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19, 128: 38}
_DECIMAL_ARGS = re.compile(r"^(?:DECIMAL|NUMERIC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


def decimal_kind(precision: int, scale: int) -> Kind:
    """DECIMAL(precision, scale), or a DECIMAL of unknown width beyond DuckDB's 38."""
    if not 0 < precision <= 38 or not 0 <= scale <= precision:
        return DECIMAL
    return Kind(Family.DECIMAL, precision=precision, scale=scale)


def decimal_digits(kind: Kind) -> tuple[int, int] | None:
    """(precision, scale) of ``kind`` in DuckDB's DECIMAL arithmetic: a DECIMAL's own, an
    integer's digits with scale 0; None if not known."""
    if kind.family is Family.DECIMAL and kind.precision:
        return kind.precision, kind.scale
    if kind.family is Family.INT and kind.bits in _INT_DIGITS:
        return _INT_DIGITS[kind.bits], 0
    return None


def of_type_name(name: str) -> Kind:
    """A catalog (DuckDB) type name as a kind."""
    upper = name.upper().strip()
    if upper in _INT_BITS:
        return Kind(Family.INT, _INT_BITS[upper])
    if upper.startswith(("DECIMAL", "NUMERIC")):
        # DuckDB's defaults: DECIMAL is DECIMAL(18, 3), DECIMAL(p) is DECIMAL(p, 0)
        found = _DECIMAL_ARGS.match(upper)
        if found is None:
            return DECIMAL
        if found.group(1) is None:
            return decimal_kind(18, 3)
        return decimal_kind(int(found.group(1)), int(found.group(2) or 0))
    if upper in ("DOUBLE", "FLOAT", "REAL", "DOUBLE PRECISION", "FLOAT8", "FLOAT4"):
        return FLOAT
    if upper in ("VARCHAR", "TEXT", "STRING") or upper.startswith(("VARCHAR", "CHAR")):
        return TEXT
    if upper == "BOOLEAN":
        return BOOL
    if upper == "DATE":
        return Kind(Family.DATE)
    if upper.startswith("TIMESTAMP"):
        return Kind(Family.TIMESTAMP)
    return UNKNOWN


def of_data_type(node: exp.Expr) -> Kind:
    if not isinstance(node, exp.DataType):
        return UNKNOWN
    return of_type_name(node.sql(dialect="duckdb"))


def _literal(node: exp.Literal) -> Kind:
    if node.is_string:
        return TEXT
    text = node.this
    if "e" in text.lower():
        return FLOAT
    if "." in text:
        # DuckDB: as many digits as written (leading zeros too), the scale those after
        # the point (beyond 38 digits DuckDB reads a DOUBLE; its width is left unknown,
        # as the other engines' forms read such a literal as their exact NUMERIC)
        digits = sum(c.isdigit() for c in text)
        scale = sum(c.isdigit() for c in text.split(".", 1)[1])
        return decimal_kind(max(digits, 1), scale)
    return _integer_literal(int(text))


def _integer_literal(value: int) -> Kind:
    # DuckDB types an integer literal by the smallest width that holds it.
    for bits in (32, 64, 128):
        if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            return Kind(Family.INT, bits)
    return FLOAT


def common(a: Kind, b: Kind, *, compared: bool = False) -> Kind:
    """The type DuckDB gives CASE branches, COALESCE, LEAST or GREATEST of ``a`` and ``b``
    (for DECIMALs: the wider integer part and the larger scale; past 38 digits it keeps
    the integer part and gives up scale), or, ``compared``, the type it compares them in
    (past 38 digits it keeps the scale, and a value whose integer part no longer fits
    raises)."""
    digits = _decimal_operands(a, b)
    if isinstance(digits, Kind):
        return digits
    (p1, s1), (p2, s2) = digits
    whole = max(p1 - s1, p2 - s2)
    # beside an integer DuckDB keeps the DECIMAL's scale too (a probe: COALESCE(HUGEINT,
    # DECIMAL(18, 2)) is a DECIMAL(38, 2); typed DECIMAL(38, 0), the guard cast the
    # DECIMAL to it and answered 1.00 as 1, 9999999999999999.99 as 10000000000000000)
    keeps_scale = compared or Family.INT in (a.family, b.family)
    scale = max(s1, s2) if keeps_scale else min(max(s1, s2), max(38 - whole, 0))
    return decimal_kind(min(whole + scale, 38), scale)


def _decimal_operands(a: Kind, b: Kind) -> Kind | tuple[tuple[int, int], tuple[int, int]]:
    """Both operands' (precision, scale) when they meet as DECIMALs, else the kind the
    two make (not a DECIMAL, or one of unknown width)."""
    base = _arithmetic(a, b)
    if base.family is not Family.DECIMAL:
        return base
    da, db = decimal_digits(a), decimal_digits(b)
    if da is None or db is None:
        return DECIMAL
    return da, db


def decimal_result(node: exp.Expr, a: Kind, b: Kind) -> Kind:
    """DuckDB's type of ``a + b``, ``a - b``, ``a * b`` or ``a % b`` (``node`` says which).
    For DECIMALs (measured on DuckDB 2.0): a sum's precision is the wider integer part
    plus the larger scale plus one; a product's scale is the sum of the scales and its
    precision the sum of the precisions, at most 18 when both are at most 18 and the
    scale below 18, else at most 38. A result past that precision raises (under TRY:
    NULL)."""
    digits = _decimal_operands(a, b)
    if isinstance(digits, Kind):
        return digits
    (p1, s1), (p2, s2) = digits
    if isinstance(node, exp.Mul):
        scale = s1 + s2
        narrow = p1 <= 18 and p2 <= 18 and scale < 18
        return decimal_kind(min(p1 + p2, 18 if narrow else 38), scale)
    if isinstance(node, exp.Mod):
        # DuckDB: a DECIMAL % whose common type would pass 38 digits (with a HUGEINT,
        # say) is a DOUBLE
        if max(p1 - s1, p2 - s2) + max(s1, s2) > 38:
            return FLOAT
        return common(a, b)
    scale = max(s1, s2)
    return decimal_kind(min(max(p1 - s1, p2 - s2) + scale + 1, 38), scale)


def places_of(node: exp.Expr | None) -> int | None:
    """The places a ROUND or TRUNC rounds to: 0 when not given, None when not a literal
    (parenthesised or negated)."""
    if node is None:
        return 0
    node = node.unnest()
    negative = isinstance(node, exp.Neg)
    literal = node.this.unnest() if negative else node
    if not (isinstance(literal, exp.Literal) and not literal.is_string):
        return None
    try:
        value = int(literal.this)
    except ValueError:
        return None
    return -value if negative else value


def _rounded(kind: Kind, places: int | None, rounds: bool = False) -> Kind:
    """DuckDB's DECIMAL(p, s) rounded (or truncated) to ``places``: DECIMAL(p, min(max(n,
    0), s)), except that ROUND of a DECIMAL(p, 0) to tens or more may carry a digit:
    DECIMAL(p + 1, 0), at most 38 (where it raises instead)."""
    if not kind.precision or places is None:
        return DECIMAL
    if rounds and places < 0 and kind.scale == 0:
        return decimal_kind(min(kind.precision + 1, 38), 0)
    return decimal_kind(kind.precision, min(max(places, 0), kind.scale))


def _arithmetic(a: Kind, b: Kind) -> Kind:
    if a.family is Family.NULL:
        return b
    if b.family is Family.NULL:
        return a
    if not (a.numeric and b.numeric):
        return UNKNOWN
    if Family.FLOAT in (a.family, b.family):
        return FLOAT
    if Family.DECIMAL in (a.family, b.family):
        return DECIMAL
    return Kind(Family.INT, max(a.bits, b.bits))


_BOOLEANS = (
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
    exp.RegexpLike,
    exp.StartsWith,
)
# DuckDB's calendar parts, positions and date differences: BIGINT.
# EXTRACT parts DuckDB gives as BIGINT.
_INTEGER_PARTS = frozenset(
    {
        "YEAR", "YEARS", "MONTH", "MONTHS", "DAY", "DAYS", "HOUR", "HOURS", "MINUTE",
        "MINUTES", "SECOND", "SECONDS", "MILLISECOND", "MILLISECONDS", "MICROSECOND",
        "MICROSECONDS", "QUARTER", "DOW", "ISODOW", "DOY", "WEEK", "WEEKS", "ISOYEAR",
        "YEARWEEK", "DECADE", "CENTURY", "MILLENNIUM", "ERA", "DAYOFWEEK", "DAYOFYEAR",
        "WEEKDAY", "WEEKOFYEAR", "TIMEZONE", "TIMEZONE_HOUR", "TIMEZONE_MINUTE",
    }
)

_BIGINT_CALLS = (
    exp.Year,
    exp.Month,
    exp.Day,
    exp.Quarter,
    exp.DayOfYear,
    exp.DayOfWeek,
    exp.Week,
    exp.WeekOfYear,
    exp.Hour,
    exp.Minute,
    exp.Second,
    exp.StrPosition,
    exp.DateDiff,
)
_TEXTS = (
    exp.Lower,
    exp.Upper,
    exp.Trim,
    exp.Substring,
    exp.Concat,
    exp.DPipe,
    exp.Left,
    exp.Right,
    # (typed, so that the keyed hashes of PostgreSQL and Spark read them: they leave
    # out what is untyped)
    exp.Replace,
    exp.TimeToStr,
)


def choices(node: exp.Expr) -> list[exp.Expr]:
    """The values a CASE, IF, COALESCE, LEAST or GREATEST chooses among (absent
    branches left out); [] for any other node."""
    if isinstance(node, exp.Case):
        parts = [i.args.get("true") for i in node.args.get("ifs") or []]
        parts.append(node.args.get("default"))
    elif isinstance(node, exp.If):
        parts = [node.args.get("true"), node.args.get("false")]
    elif isinstance(node, (exp.Coalesce, exp.Least, exp.Greatest)):
        parts = [node.this, *node.expressions]
    else:
        parts = []
    return [p for p in parts if p is not None]


def kept_value(node: exp.Expr) -> exp.Expr | None:
    """The value inside the DuckDB guards' read-once form, ``LIST_TRANSFORM([v], LAMBDA
    __guard : CASE WHEN ... THEN __guard END)[1]`` (proxy/guarded_arithmetic.py, _kept:
    ``v`` or NULL, so of v's type), else None."""
    if not isinstance(node, exp.Bracket) or not isinstance(node.this, exp.Transform):
        return None
    array, body = node.this.this, node.this.expression
    if not (
        isinstance(array, exp.Array)
        and len(array.expressions) == 1
        and isinstance(body, exp.Lambda)
        and [p.name for p in body.expressions] == ["__guard"]
    ):
        return None
    return array.expressions[0]


_T = TypeVar("_T")


def remembered(
    memo: dict[int, tuple[exp.Expr, _T]] | None,
    node: exp.Expr,
    compute: Callable[[exp.Expr], _T],
) -> _T:
    """``compute(node)``, once per node while ``memo`` is kept (None: every time)."""
    if memo is None:
        return compute(node)
    found = memo.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    answer = compute(node)
    memo[id(node)] = (node, answer)
    return answer


class Typer:
    """Kinds of expressions over the core's aliased tables (alias -> column -> type).

    With ``remember``, each node's kind (and whether it is an interval) is computed once:
    typing a node types its whole subtree, so a caller that types every level of a deep
    expression would otherwise take time quadratic in its depth or worse (a probe,
    2026-12-04: 80 nested date moves took 46 s to guard). Precondition for ``remember``:
    the caller types a node only once its subtree is final, and calls :meth:`forget` on
    a node it changes afterwards. (Entries hold their node, so that an id is not reused
    while it is remembered.)"""

    def __init__(self, columns: Mapping[str, Mapping[str, str]], *, remember: bool = False):
        self._columns = columns
        self._kinds: dict[int, tuple[exp.Expr, Kind]] | None = {} if remember else None
        self._intervals: dict[int, tuple[exp.Expr, bool]] | None = {} if remember else None
        # _date_family looks through a whole chain of moves, and is_interval asks it at
        # every level of one: unremembered, 160 nested `- INTERVAL 1 HOUR` in WHERE took
        # 3.2 s to guard, the time quadratic in the depth
        self._dates: dict[int, tuple[exp.Expr, Family | None]] | None = {} if remember else None

    def remembering(self) -> Typer:
        """A typer over the same columns that remembers (the class docstring's
        precondition is the caller's)."""
        return Typer(self._columns, remember=True)

    def forget(self, *nodes: exp.Expr) -> None:
        """Drop what is remembered of ``nodes`` (changed since they were typed)."""
        if self._kinds is None or self._intervals is None or self._dates is None:
            return
        for node in nodes:
            self._kinds.pop(id(node), None)
            self._intervals.pop(id(node), None)
            self._dates.pop(id(node), None)

    def column_type(self, node: exp.Column) -> str | None:
        """The catalog type name of a column of the core's aliased tables, if known."""
        return self._columns.get(node.table.lower(), {}).get(node.name.lower())

    def is_interval(self, node: exp.Expr) -> bool:
        """Whether ``node`` is an INTERVAL (the kinds leave INTERVALs UNKNOWN): an
        INTERVAL column or literal, a cast to INTERVAL, the difference of two
        timestamps, and the sums, differences, negations, multiples, quotients and
        CASE / COALESCE / LEAST / GREATEST choices of intervals."""
        return remembered(self._intervals, node, self._is_interval)

    def _is_interval(self, node: exp.Expr) -> bool:
        node = node.unnest()
        if isinstance(node, exp.Try):  # the total forms' wrapper: the same type
            return self.is_interval(node.this)
        kept = kept_value(node)
        if kept is not None:
            return self.is_interval(kept)
        if isinstance(node, exp.Interval):
            return True
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return node.to.this is exp.DataType.Type.INTERVAL
        if isinstance(node, exp.Column):
            found = self._columns.get(node.table.lower(), {}).get(node.name.lower())
            return found is not None and found.upper() == "INTERVAL"
        if isinstance(node, exp.Neg):
            return self.is_interval(node.this)
        if isinstance(node, (exp.Add, exp.Sub)):
            if isinstance(node, exp.Sub):
                families = [self._date_family(side) for side in (node.this, node.expression)]
                if Family.TIMESTAMP in families and None not in families:
                    # DuckDB's and PostgreSQL's difference of two timestamps (or of a
                    # timestamp and a date), moved ones too (left out, a product of
                    # `ts - (dt + INTERVAL 1 DAY)` went unguarded, and raised)
                    return True
            # a timestamp moved by an interval is a timestamp: both sides are intervals
            return self.is_interval(node.this) and self.is_interval(node.expression)
        if isinstance(node, exp.Mul):
            return self.is_interval(node.this) or self.is_interval(node.expression)
        if isinstance(node, exp.Div):
            return self.is_interval(node.this)
        if isinstance(node, exp.Case):
            branches = [i.args.get("true") for i in node.args.get("ifs") or []]
            branches.append(node.args.get("default"))
            return any(b is not None and self.is_interval(b) for b in branches)
        if isinstance(node, exp.If):
            branches = [node.args.get("true"), node.args.get("false")]
            return any(b is not None and self.is_interval(b) for b in branches)
        if isinstance(node, (exp.Coalesce, exp.Least, exp.Greatest)):
            return any(self.is_interval(b) for b in (node.this, *node.expressions))
        return False

    def _date_family(self, node: exp.Expr) -> Family | None:
        """DATE or TIMESTAMP when ``node`` is one: typed so, a date moved by an interval
        (a TIMESTAMP) or by a number of days (a DATE), which the kinds leave untyped, or
        a choice among such; else None."""
        return remembered(self._dates, node, self._own_date_family)

    def _own_date_family(self, node: exp.Expr) -> Family | None:
        found = self.kind(node).family
        if found in (Family.DATE, Family.TIMESTAMP):
            return found
        node = node.unnest()
        if isinstance(node, exp.Try):
            return self._date_family(node.this)
        kept = kept_value(node)
        if kept is not None:
            return self._date_family(kept)
        if isinstance(node, (exp.Add, exp.Sub)):
            pairs = [(node.this, node.expression)]  # (a date less an amount)
            if isinstance(node, exp.Add):
                pairs.append((node.expression, node.this))
            for date, amount in pairs:
                family = self._date_family(date)
                if family is None:
                    continue
                if self.is_interval(amount):
                    return Family.TIMESTAMP
                if family is Family.DATE and self.kind(amount).family is Family.INT:
                    return Family.DATE
            return None
        branches = [b for b in choices(node) if not isinstance(b, exp.Null)]
        if not branches:
            return None
        families = [self._date_family(b) for b in branches]
        if None in families:
            return None
        return Family.DATE if all(f is Family.DATE for f in families) else Family.TIMESTAMP

    def kind(self, node: exp.Expr) -> Kind:
        """The kind of ``node`` (UNKNOWN where it cannot be told)."""
        return remembered(self._kinds, node, self._kind)

    def _kind(self, node: exp.Expr) -> Kind:
        if isinstance(node, exp.Paren):
            return self.kind(node.this)
        kept = kept_value(node)
        if kept is not None:
            return self.kind(kept)
        if isinstance(node, exp.Literal):
            return _literal(node)
        if isinstance(node, exp.Null):
            return NULL
        if isinstance(node, exp.Column):
            found = self._columns.get(node.table.lower(), {}).get(node.name.lower())
            return UNKNOWN if found is None else of_type_name(found)
        if isinstance(node, _BOOLEANS):
            return BOOL
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return of_data_type(node.to)
        if isinstance(node, exp.Try):
            return self.kind(node.this)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
            left, right = self.kind(node.left), self.kind(node.right)
            # a DATE moved by a number of days is a DATE (DuckDB and PostgreSQL): typed so,
            # Spark's DATE - DATE form reads ``(dt + i) - dt`` as days (an adversarial
            # probe, 2026-12-06: a raw Spark error before the charge)
            moved = (left.family, right.family) == (Family.DATE, Family.INT)
            if isinstance(node, exp.Add):
                moved = moved or (left.family, right.family) == (Family.INT, Family.DATE)
            if moved and isinstance(node, (exp.Add, exp.Sub)):
                return Kind(Family.DATE)
            return decimal_result(node, left, right)
        if isinstance(node, exp.Div):
            both = _arithmetic(self.kind(node.left), self.kind(node.right))
            return FLOAT if both.numeric else UNKNOWN
        if isinstance(node, exp.IntDiv):
            # DuckDB's //: an integer of the operands' type for two integers, else as /.
            both = _arithmetic(self.kind(node.left), self.kind(node.right))
            return both if both.family is Family.INT else FLOAT if both.numeric else UNKNOWN
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            # a negative constant: DuckDB types it as its digits (-2147483648 is a
            # BIGINT), except the least BIGINT and HUGEINT, which it reads whole (typed
            # by 9223372036854775808, a HUGEINT, the guards let a BIGINT product with
            # -9223372036854775808 raise)
            literal = node.this
            if not literal.is_string and literal.this.isdigit():
                value = int(literal.this)
                return _integer_literal(-value if value in (2**63, 2**127) else value)
        if isinstance(node, (exp.Neg, exp.Abs)):
            return self.kind(node.this)
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Nullif)):
            return self._branches(node)
        if isinstance(node, _TEXTS):
            return TEXT
        if isinstance(node, (exp.Length, *_BIGINT_CALLS)):
            return BIGINT
        if isinstance(node, exp.Extract):
            # DuckDB: the epoch and the julian day are DOUBLE (a probe: typed BIGINT,
            # the guard narrowed EXTRACT(epoch ...) * 10^12 and changed answers)
            part = node.this.name.upper() if isinstance(node.this, (exp.Var, exp.Column)) else ""
            if part in ("EPOCH", "JULIAN"):
                return FLOAT
            return BIGINT if part in _INTEGER_PARTS else UNKNOWN
        if isinstance(node, exp.DateTrunc | exp.TimestampTrunc):
            return Kind(Family.TIMESTAMP)
        if isinstance(node, (exp.Least, exp.Greatest)):
            kinds = [self.kind(part) for part in (node.this, *node.expressions)]
            dated = _dated(kinds)
            if dated is not None:
                return dated
            out = kinds[0]
            for other in kinds[1:]:
                out = common(out, other)
            return out
        if isinstance(node, exp.Count):
            return BIGINT
        if isinstance(node, exp.Sum):
            inner = self.kind(node.this)
            # DuckDB sums integers in 128 bits, DECIMAL(p, s) as DECIMAL(38, s)
            if inner.family is Family.DECIMAL and inner.precision:
                return decimal_kind(38, inner.scale)
            return Kind(Family.INT, 128) if inner.family is Family.INT else inner
        if isinstance(node, (exp.Min, exp.Max)):
            return self.kind(node.this)
        if isinstance(node, (exp.Floor, exp.Ceil)):
            # DuckDB: FLOOR and CEIL of an integer are DOUBLE (of a DECIMAL(p, s), a
            # DECIMAL(p, 0))
            inner = self.kind(node.this)
            if inner.family is Family.INT:
                return FLOAT
            if inner.family is Family.DECIMAL:
                return _rounded(inner, 0)
            return inner if inner.numeric else UNKNOWN
        if isinstance(node, (exp.Round, exp.Trunc)):
            inner = self.kind(node.this)
            if inner.family is Family.DECIMAL:
                places = places_of(node.args.get("decimals"))
                return _rounded(inner, places, isinstance(node, exp.Round))
            return inner if inner.numeric else UNKNOWN
        if isinstance(node, exp.Sign):
            return Kind(Family.INT, 8)  # DuckDB's SIGN is a TINYINT, whatever its argument
        return UNKNOWN

    def _branches(self, node: exp.Expr) -> Kind:
        if isinstance(node, exp.Case):
            parts = [i.args.get("true") for i in node.args.get("ifs") or []]
            parts.append(node.args.get("default"))
        elif isinstance(node, exp.If):
            parts = [node.args.get("true"), node.args.get("false")]
        elif isinstance(node, exp.Coalesce):
            parts = [node.this, *node.expressions]
        else:
            parts = [node.this]
        kinds = [self.kind(p) for p in parts if p is not None]
        known = [k for k in kinds if k.family is not Family.NULL]
        if not known:
            return NULL
        first = known[0]
        if all(k == first for k in known):
            return first
        dated = _dated(known)
        if dated is not None:
            return dated
        if all(k.numeric for k in known):
            out = known[0]
            for k in known[1:]:
                out = common(out, k)
            return out
        return UNKNOWN


def _dated(kinds: list[Kind]) -> Kind | None:
    """The kind DuckDB gives a choice among DATEs and TIMESTAMPs (NULLs aside): a DATE
    among DATEs, else a TIMESTAMP (the DATEs cast to it); None for any other choice.
    (Left UNKNOWN, the guards did not see a DATE beyond TIMESTAMP's range in
    ``GREATEST(GREATEST(ts, ts), dt)`` and DuckDB raised casting it.)"""
    known = [k.family for k in kinds if k.family is not Family.NULL]
    if not known or any(f not in (Family.DATE, Family.TIMESTAMP) for f in known):
        return None
    return Kind(Family.DATE) if all(f is Family.DATE for f in known) else Kind(Family.TIMESTAMP)


def table_aliases(
    tree: exp.Expr, types: Mapping[tuple[str, str], Mapping[str, str]]
) -> dict[str, Mapping[str, str]]:
    """alias -> column types, for every catalog table the core reads."""
    out: dict[str, Mapping[str, str]] = {}
    for table in tree.find_all(exp.Table):
        key = ((table.db or "main").lower(), table.name.lower())
        found = types.get(key)
        if found is not None:
            out[table.alias_or_name.lower()] = found
    return out


def compared_sides(node: exp.Expr) -> list[exp.Expr | None]:
    """The operands a comparison, ``IN`` list or ``BETWEEN`` compares with each other."""
    if isinstance(node, exp.In):
        return [node.this, *node.expressions]
    if isinstance(node, exp.Between):
        return [node.this, node.args.get("low"), node.args.get("high")]
    return [node.this, node.expression]


INT_TYPE_NAMES = {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT", 128: "HUGEINT"}
_FAMILY_NAMES = {
    Family.FLOAT: "DOUBLE",
    Family.DECIMAL: "DOUBLE",  # its precision is not carried: the widest reading
    Family.DATE: "DATE",
    Family.TIMESTAMP: "TIMESTAMP",
    Family.BOOL: "BOOLEAN",
}


def duckdb_type(kind: Kind) -> str | None:
    """DuckDB's name for a value of ``kind`` (None for text, NULL and unknown kinds)."""
    if kind.family is Family.INT:
        return INT_TYPE_NAMES.get(kind.bits)
    return _FAMILY_NAMES.get(kind.family)
