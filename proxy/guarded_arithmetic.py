"""DuckDB forms of a core's row-level arithmetic that never raise, for what runs under TRY.

The rewrite makes every row-level expression total with ``TRY(...)`` (rewrite/
total_forms.py), and DuckDB keeps that promise: an error becomes NULL. But it keeps it
by evaluating the whole 2,048-row vector again, row by row, whenever one row raises. One
person's rows can then make everyone's rows in their vectors slow: a probe (2026-12-02)
multiplied by ``CASE WHEN user_id = 43 THEN 9223372036854775807 ELSE 1 END`` and took
0.44 s with that person against 0.008 s without (a timeout with 40 such terms), with no
planted data at all. What nobody can make raise cannot take that path, so the operations
one row can most easily make raise get a form that gives the same NULL without raising:

* integer ``+ - *``, negation and ``abs``: computed one width up (BIGINT for up to 32
  bits, HUGEINT for 64, where no product of two operands overflows) and narrowed with
  ``TRY_CAST``, which yields NULL without raising;
* integer ``//`` and ``%``: the divisor's zero becomes NULL (``NULLIF``), and ``//`` runs
  one width up (the minimum divided by -1); so does a DOUBLE ``//``'s, and that of the
  DOUBLE ``%`` DuckDB makes of DECIMALs beside a HUGEINT;
* 128-bit ``+ - *``: computed only where the DOUBLE result is within 1.7e38 (operands
  that are columns, literals or casts of them; anything deeper stays with TRY);
* a date or timestamp plus an interval (or a number of days) read from the data: the
  amount within 10,000 years and the date within the years 1 to 9999, so the sum stays
  within DuckDB's range.

Anything else that raises still falls back under TRY; what remains is listed in
RELIABILITY.md ("Timing: TRY's fallback"). The forms change no answer: each gives
DuckDB's value where DuckDB gives one and NULL where TRY would, except a 128-bit result
within 1.4e34 of HUGEINT's limits, and a date moved by an interval read from the data
when the date is infinite or within 10,000 years of DuckDB's limits, which are NULL.
An integer literal counts as an INTEGER: DuckDB gives one that fits the other operand's
type that type (a SMALLINT times 1000 overflows at 32,767), unless its optimizer moves
the constant across a comparison, so where DuckDB's TRY gives NULL the guard may give
the exact value, as PostgreSQL does. Types come from the
catalog through :class:`proxy.engines.kinds.Typer`; an operation it cannot type is left
as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

# dpsql's handlers in sqlglot's DuckDB generator (imported for that effect): the guarded
# text is printed with them.
from proxy import duckdb_dialect  # noqa: F401
from proxy.engines.kinds import (
    INT_TYPE_NAMES,
    Family,
    Kind,
    Typer,
    choices,
    common,
    compared_sides,
    decimal_digits,
    duckdb_type,
    kept_value,
    places_of,
    remembered,
)

# _simple: an operand repeated by a guard (the 128-bit ones) has at most REPEATABLE_NODES
# nodes, the other engines' guards' limit; nested guards repeat their operands again, so
# deeper ones keep TRY.
from proxy.engines.render import placed
from proxy.engines.render import simple as _simple

_WIDER = {8: "BIGINT", 16: "BIGINT", 32: "BIGINT", 64: "HUGEINT"}
# |x| below this is within HUGEINT (2^127 ≈ 1.70141e38) whatever a DOUBLE's rounding.
_HUGE_DOUBLE = "1.7e38"
# An interval whose every field is within 10,000 years (months, days and hours), else
# NULL: two such add and subtract without overflow. (Checks over `__v`, for _kept.)
_INTERVAL_FIELDS = (
    "ABS(EXTRACT(YEAR FROM __v)) <= 10000 AND ABS(EXTRACT(DAY FROM __v)) <= 3652500 "
    "AND ABS(EXTRACT(HOUR FROM __v)) <= 87660000"
)
# An interval that moves a date, read from the data other than as `INTERVAL (n) unit` (a
# text cast to INTERVAL, an INTERVAL column, a CASE of them): its fields together within
# 10,000 years (years of 365 days, of 8,760 hours, rounded up), else NULL; a date within
# _TIMESTAMP_RANGE moved by it stays within DuckDB's range.
_MOVING_INTERVAL = (
    "ABS(CAST(EXTRACT(YEAR FROM __v) AS DOUBLE)) + 1 "
    "+ ABS(CAST(EXTRACT(DAY FROM __v) AS DOUBLE)) / 365 "
    "+ ABS(CAST(EXTRACT(HOUR FROM __v) AS DOUBLE)) / 8760 <= 10000"
)
# An interval times (or divided by) a number: each field's product, in DOUBLE, within
# what DuckDB's fields hold (months and days 32-bit, microseconds 64-bit), with a margin;
# else NULL. DuckDB multiplies field by field and raises past them.
_SCALED_INTERVAL = (
    "CASE WHEN ABS(CAST(EXTRACT(YEAR FROM __i) AS DOUBLE) * 12 + EXTRACT(MONTH FROM __i)) "
    "* __f < 2.0e9 AND ABS(CAST(EXTRACT(DAY FROM __i) AS DOUBLE)) * __f < 2.0e9 "
    "AND ABS(CAST(EXTRACT(HOUR FROM __i) AS DOUBLE) * 3600000000 "
    "+ EXTRACT(MINUTE FROM __i) * 60000000 + EXTRACT(MICROSECONDS FROM __i)) * __f < 9.0e18 "
    "THEN __i END"
)
# The most of each unit a date may move by: 10,000 years (the probe's `INTERVAL (x) YEAR`
# with x near 2^63 raised while converting the amount).
_INTERVAL_LIMIT = {
    "MILLENNIUM": 10,
    "MILLENNIA": 10,
    "CENTURY": 100,
    "CENTURIES": 100,
    "DECADE": 1_000,
    "DECADES": 1_000,
    "YEAR": 10_000,
    "YEARS": 10_000,
    "QUARTER": 40_000,
    "QUARTERS": 40_000,
    "MONTH": 120_000,
    "MONTHS": 120_000,
    "WEEK": 521_800,
    "WEEKS": 521_800,
    "DAY": 3_652_500,
    "DAYS": 3_652_500,
    "HOUR": 87_660_000,
    "HOURS": 87_660_000,
    "MINUTE": 5_259_600_000,
    "MINUTES": 5_259_600_000,
    "SECOND": 315_576_000_000,
    "SECONDS": 315_576_000_000,
    "MILLISECOND": 315_576_000_000_000,
    "MILLISECONDS": 315_576_000_000_000,
    "MICROSECOND": 315_576_000_000_000_000,
    "MICROSECONDS": 315_576_000_000_000_000,
}
# The units an amount from the data may take, and the most of each (10,000 years).
INTERVAL_UNITS: Mapping[str, int] = MappingProxyType(_INTERVAL_LIMIT)
_DAYS_LIMIT = _INTERVAL_LIMIT["DAY"]
# DuckDB refuses a substring offset or length beyond 2^32 - 1 (an error on that row).
_SUBSTRING_LIMIT = 4_294_967_295
# Unsigned types read as the signed type one width up (what Typer assumes), so that
# their arithmetic cannot fail below zero.
_SIGNED = {
    "UTINYINT": "SMALLINT",
    "USMALLINT": "INTEGER",
    "UINTEGER": "BIGINT",
    "UBIGINT": "HUGEINT",
    "UHUGEINT": "HUGEINT",
    "UINT128": "HUGEINT",
}
UNSIGNED_TYPES = frozenset(_SIGNED)  # the checker refuses casts to them
_COMPARED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
# Dates from which 10,000 years either way stay within DuckDB's TIMESTAMP range (290309 BC
# to 294247 AD) and its DATE range (5877642 BC to 5881580 AD).
_TIMESTAMP_RANGE = ("280000-01-01 (BC)", "284000-12-31")
_DAY_RANGE = ("5867000-01-01 (BC)", "5871000-12-31")
_DATES = (Family.DATE, Family.TIMESTAMP)
# Timestamps within this span are fewer than 2^63 microseconds apart (280,001 years).
_MICROSECOND_SPAN = ("140000-01-01 (BC)", "140000-12-31")
_MICROSECOND_UNITS = {"MICROSECOND", "MICROSECONDS", "US", "USEC", "USECS", "USECOND", "USECONDS"}
# DuckDB's nanosecond timestamps, as its catalog and sqlglot write them
_NANO_NAMES = frozenset({"TIMESTAMP_NS", "TIMESTAMPTZ_NS"})


def _nano_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb", udt=True)


def _unit(node: exp.Expr) -> str:
    unit = node.args.get("unit")
    return unit.name.upper() if isinstance(unit, (exp.Var, exp.Literal, exp.Column)) else ""


def _parse(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, read="duckdb")


def _wrap(node: exp.Expr, build: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """Put ``build(node)`` where ``node`` is, ``node`` itself (not a copy) inside it."""
    holder = exp.Null()
    node.replace(holder)
    built = build(node)
    holder.replace(built)
    return built


def _read_once(
    body: str, type_sql: str, fields: Mapping[str, exp.Expr], **parts: exp.Expr
) -> exp.Expr:
    """``body`` (DuckDB SQL over ``__guard.<field>``, and ``__<part>`` columns) with each
    field evaluated once per row: the fields of a one-element list's struct, mapped by a
    lambda (which sees only its parameter). Cast to ``type_sql``, the type ``body``
    already has, so that the typer, and the guard of an operation over this one, know
    it."""
    struct = ", ".join(f"'{name}': __{name}" for name in fields)
    return placed(
        f"CAST(LIST_TRANSFORM([{{{struct}}}], LAMBDA __guard : {body})[1] AS {type_sql})",
        **fields,
        **parts,
    )


# Nodes whose operands DuckDB casts to one common type.
_MIXED = (
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.In, exp.Between, exp.Case, exp.If, exp.Coalesce, exp.Least, exp.Greatest,
)


def _operands(node: exp.Expr) -> list[exp.Expr]:
    """The operands of a ``_MIXED`` node that DuckDB brings to one type."""
    if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Least, exp.Greatest)):
        parts: list[exp.Expr | None] = list(choices(node))
    elif isinstance(node, exp.In) and node.args.get("query") is not None:
        parts = []
    else:
        parts = list(compared_sides(node))
    return [p for p in parts if isinstance(p, exp.Expr)]


def _within(node: exp.Binary, op: str, limit: str, type_sql: str) -> exp.Expr:
    """``a op b`` where its DOUBLE is below ``limit``, else NULL, never raising. Operands
    small enough are written twice (the check and the operation); larger ones are read
    once, as the fields of a one-element list's struct: written twice, a chain of guarded
    operations would double at every level (a probe, 2026-12-02: 25 DECIMAL(38)
    additions under a product kept TRY's fallback, 3.71 s against 0.137 s)."""
    a, b = node.this, node.expression
    if _simple(a) and _simple(b):
        return placed(
            f"CASE WHEN ABS(CAST(__a AS DOUBLE) {op} CAST(__b AS DOUBLE)) < {limit} "
            f"THEN __a {op} __b END",
            a=a,
            b=b,
        )
    return _read_once(
        f"CASE WHEN ABS(CAST(__guard.a AS DOUBLE) {op} CAST(__guard.b AS DOUBLE)) < {limit} "
        f"THEN __guard.a {op} __guard.b END",
        type_sql,
        {"a": a, "b": b},
    )


def _once(node: exp.Expr, check: str, type_sql: str) -> exp.Expr:
    """``node`` (an operation on its ``this``, the value) where ``check`` (over ``__v``,
    the value) holds, else NULL: the value written twice when small, else read once
    through a one-element list of a struct, as :func:`_within` does, with the
    operation's other arguments that read the row (a lambda sees only its parameter)."""
    value = node.this
    if _simple(value):
        return placed(f"CASE WHEN {check} THEN __r END", v=value.copy(), r=node)
    fields = {"v": value}
    for key, arg in list(node.args.items()):
        if key != "this" and isinstance(arg, exp.Expr) and arg.find(exp.Column) is not None:
            fields[key] = arg
    for key in fields:
        node.set("this" if key == "v" else key, exp.column(key, table="__guard"))
    return _read_once(
        f"CASE WHEN {check.replace('__v', '__guard.v')} THEN __r END", type_sql, fields, r=node
    )


def _kept(value: exp.Expr, check: str) -> exp.Expr:
    """``value`` where ``check`` (DuckDB SQL over ``__v``, the value) holds, else NULL.
    A value too large to repeat is read once, through a one-element list (kinds.Typer
    types it as the element): the checks repeat their value up to four times, so nested
    moves of a date would otherwise multiply it at every level (a probe, 2026-12-04: nine
    nested `+ INTERVAL 1 DAY` grew to 1.4 MB of SQL and took 82 s to guard)."""
    if _simple(value):
        return placed(f"CASE WHEN {check} THEN __v END", v=value)
    return placed(
        f"LIST_TRANSFORM([__v], LAMBDA __guard : CASE WHEN {check.replace('__v', '__guard')} "
        "THEN __guard END)[1]",
        v=value,
    )


def _nonzero(value: exp.Expr) -> exp.Expr:
    """``value``, NULL where it is zero: a divisor. ``NULLIF(value, 0)`` for a small value
    holding no NULLIF; any other is read once (_kept), because DuckDB expands NULLIF to a
    CASE that holds its first argument twice while binding, so divisors nested in divisors
    doubled the binding's work at every level (a probe, 2026-12-04: 16 nested
    ``7 // (...)`` took 10.6 s to plan)."""
    if _simple(value) and value.find(exp.Nullif) is None:
        return placed("NULLIF(__v, 0)", v=value)
    return _kept(value, "__v <> 0")


def _peeled(node: exp.Expr) -> exp.Expr:
    """``node`` without the wrappers that keep its value and type: parentheses, TRY and
    the guards' read-once list (kinds.kept_value)."""
    while True:
        node = node.unnest()
        kept = kept_value(node)
        if kept is not None:
            node = kept
        elif isinstance(node, exp.Try):
            node = node.this
        else:
            return node


def _int_kind(kind: Kind) -> int:
    """The width of an integer kind this module guards (0: not one)."""
    return kind.bits if kind.family is Family.INT and kind.bits in (8, 16, 32, 64, 128) else 0


class _Guard:
    def __init__(self, typer: Typer):
        self.typer = typer
        # family's answers, remembered and forgotten as the typer's kinds are (each
        # looks through a chain of moves: asked at every level, it made a chain's
        # guarding 2.5 times slower)
        self._families: dict[int, tuple[exp.Expr, Family]] = {}
        # dated, day_dated and nanos look through a chain of choices and moves: asked at
        # every level of a COALESCE chain (and dated asks day_dated at every level of
        # its own search), unremembered they took time cubic in the depth (160 nested
        # COALESCEs: 10 s)
        self._dated: dict[int, tuple[exp.Expr, bool]] = {}
        self._day_dated: dict[int, tuple[exp.Expr, bool]] = {}
        self._nanos: dict[int, tuple[exp.Expr, exp.DataType | None]] = {}

    def form(self, node: exp.Expr) -> exp.Expr:
        """``node`` with its children guarded first, then itself (typed over its guarded
        children, whose narrowed casts carry DuckDB's widths up: a TINYINT product
        stays a TINYINT, as DuckDB types it)."""
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expr):
                node.set(key, self.form(value))
            elif isinstance(value, list):
                node.set(key, [self.form(v) if isinstance(v, exp.Expr) else v for v in value])
        out = self.own(node, self.typer.kind(node))
        # own changes the node and its direct children (a CASE's WHEN ... THEN), never
        # deeper: what is remembered of them is stale
        for changed in (node, out, *node.iter_expressions()):
            self.typer.forget(changed)
            for memo in (self._families, self._dated, self._day_dated, self._nanos):
                memo.pop(id(changed), None)
        return out

    def own(self, node: exp.Expr, kind: Kind) -> exp.Expr:
        if isinstance(node, _MIXED):
            self.implicit_decimals(node)
        if isinstance(node, (*_MIXED, exp.DateDiff)):
            self.dates_met_with_timestamps(node)
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
            # the rewrite's own casts (a predicate's to BOOLEAN): NULL rather than raise
            return exp.TryCast(this=node.this, to=node.to)
        if isinstance(node, (*_COMPARED, exp.In, exp.Between)):
            return self.compared(node)
        if isinstance(node, exp.Interval):
            return self.bounded_interval(node)
        if isinstance(node, exp.Substring):
            return self.substring(node)
        if isinstance(node, exp.Neg) and self.typer.is_interval(node.this):
            # negating a field at its type's least value raises
            node.set("this", _kept(node.this, _INTERVAL_FIELDS))
            return node
        if isinstance(node, (exp.Mul, exp.Div)) and self.typer.is_interval(node):
            return self.scaled_interval(node)
        bits = _int_kind(kind)
        if isinstance(node, (exp.Add, exp.Sub)) and (
            isinstance(node.expression, exp.Interval) or isinstance(node.this, exp.Interval)
        ):
            return self.moved_date(node)
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)) and self._date(node.this):
            # DuckDB truncates a DATE as a TIMESTAMP, and raises on one beyond its range
            node.set("this", exp.TryCast(this=node.this, to=exp.DataType.build("TIMESTAMP")))
            return node
        if isinstance(node, exp.Sub) and self.subtracted_timestamps(node):
            return node
        if isinstance(node, (exp.Add, exp.Sub)):
            moved = self.moved_by_interval(node)
            if moved is not None:
                return moved
            if self.typer.is_interval(node.this) and self.typer.is_interval(node.expression):
                # two intervals from the data add field by field, and a field past its
                # 32 or 64 bits raises: each kept within 10,000 years a field
                for side in (node.this, node.expression):
                    if not isinstance(side.unnest(), exp.Interval):
                        _wrap(side, lambda v: _kept(v, _INTERVAL_FIELDS))
                return node
        if isinstance(node, exp.Add) and (self.is_time(node.this) or self.is_time(node.expression)):
            date = node.expression if self.is_time(node.this) else node.this
            if self.typer.kind(date).family is Family.DATE and not isinstance(
                date.unnest(), exp.Literal
            ):
                _wrap(date, self.within_years)
            return node
        if isinstance(node, exp.DateDiff) and _unit(node) in _MICROSECOND_UNITS:
            # microseconds between two timestamps beyond 146,000 years apart overflow
            for key in ("this", "expression"):
                side = node.args[key]
                if not isinstance(side.unnest(), exp.Literal):
                    _wrap(side, lambda v: _kept(
                        v, f"__v BETWEEN DATE '{_MICROSECOND_SPAN[0]}' AND "
                        f"DATE '{_MICROSECOND_SPAN[1]}' OR NOT ISFINITE(__v)"
                    ))
            return node
        if isinstance(node, (exp.Add, exp.Sub)) and (
            self.day_dated(node.this) or self.day_dated(node.expression)
        ):
            return self.moved_by_days(node)
        if kind.family is Family.DECIMAL and isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
            return self.decimal(node, kind)
        if isinstance(node, exp.Round) and kind.family in (Family.DECIMAL, Family.INT):
            return self.rounded(node, kind)
        if kind.family is Family.FLOAT and self.divides_by_zero(node):
            # DuckDB's // of DOUBLEs, and the % of DECIMALs it reads as DOUBLEs (beside
            # a HUGEINT), raise on a zero divisor: NULL, as under TRY
            op = "//" if isinstance(node, exp.IntDiv) else "%"
            return placed(f"__a {op} __b", a=node.this, b=_nonzero(node.expression))
        if not bits:
            return node
        if isinstance(node, exp.Mod):  # any width: by zero is NULL, as under TRY
            return placed("__a % __b", a=node.this, b=_nonzero(node.expression))
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            op = "+" if isinstance(node, exp.Add) else "-" if isinstance(node, exp.Sub) else "*"
            if bits == 128:
                return self.huge(node, op)
            return placed(
                f"TRY_CAST(CAST(__a AS {_WIDER[bits]}) {op} CAST(__b AS {_WIDER[bits]}) "
                f"AS {INT_TYPE_NAMES[bits]})",
                a=node.this,
                b=node.expression,
            )
        if bits == 128:
            return self.huge_unary(node)
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            return node  # a negative constant (DuckDB types the literal wide enough)
        if isinstance(node, exp.Neg):
            return placed(
                f"TRY_CAST(-CAST(__a AS {_WIDER[bits]}) AS {INT_TYPE_NAMES[bits]})", a=node.this
            )
        if isinstance(node, exp.Abs):
            return placed(
                f"TRY_CAST(ABS(CAST(__a AS {_WIDER[bits]})) AS {INT_TYPE_NAMES[bits]})", a=node.this
            )
        if isinstance(node, exp.IntDiv):
            divisor = _nonzero(
                placed(f"CAST(__b AS {_WIDER[bits]})", b=node.expression)
            )
            return placed(
                f"TRY_CAST(CAST(__a AS {_WIDER[bits]}) // __b AS {INT_TYPE_NAMES[bits]})",
                a=node.this,
                b=divisor,
            )
        return node

    def divides_by_zero(self, node: exp.Expr) -> bool:
        """Whether ``node``, a DOUBLE, raises on a zero divisor: any ``//``, and a ``%``
        of numbers none of which is a DOUBLE (a DOUBLE's ``%`` by zero is NaN)."""
        if isinstance(node, exp.IntDiv):
            return True
        if not isinstance(node, exp.Mod):
            return False
        kinds = [self.typer.kind(side) for side in (node.this, node.expression)]
        return all(k.numeric and k.family is not Family.FLOAT for k in kinds)

    def kind_of(self, node: exp.Expr) -> Kind:
        """``node``'s kind, a date the kinds leave untyped as its family (family)."""
        found = self.family(node)
        return Kind(found) if found in _DATES else self.typer.kind(node)

    def family(self, node: exp.Expr) -> Family:
        """``node``'s family, with the dates the kinds leave untyped: a DATE moved by a
        number of days is a DATE, a date moved by an interval a TIMESTAMP (DuckDB's
        types). The guards that cast a DATE beside a TIMESTAMP need both."""
        return remembered(self._families, node, self._family)

    def _family(self, node: exp.Expr) -> Family:
        found = self.typer.kind(node).family
        if found in _DATES:
            return found
        if self.day_dated(node):
            return Family.DATE
        if self.dated(node):
            return Family.TIMESTAMP
        return found

    def huge_unary(self, node: exp.Expr) -> exp.Expr:
        """128-bit negation, abs and //: NULL at HUGEINT's minimum, by zero, and for the
        minimum divided by -1."""
        low = "-170141183460469231731687303715884105727 - 1"
        if isinstance(node, (exp.Neg, exp.Abs)):
            call = "-__a" if isinstance(node, exp.Neg) else "ABS(__a)"
            text = f"CASE WHEN __a <> {low} THEN {call} END"
            parts = {"a": node.this}
        elif isinstance(node, exp.IntDiv):
            text = f"CASE WHEN __a <> {low} OR __b <> -1 THEN __a // NULLIF(__b, 0) END"
            parts = {"a": node.this, "b": node.expression}
        else:
            return node
        if all(_simple(part) for part in parts.values()):
            return placed(text, **parts)
        # a larger operand read once (left as it was, a guarded difference divided by
        # zero raised: `i * (h - h) // 0`)
        for name in parts:
            text = text.replace(f"__{name}", f"__guard.{name}")
        return _read_once(text, "HUGEINT", parts)

    def implicit_decimals(self, node: exp.Expr) -> None:
        """Values DuckDB casts to a DECIMAL to compare or combine them with one (a
        comparison, IN, BETWEEN, CASE, COALESCE, LEAST, GREATEST): an integer or DECIMAL
        with more integer digits than the common type holds raises in that cast (a
        probe, 2026-12-02: a HUGEINT beside a DECIMAL(18, 2), 0.45 s against 0.011 s).
        Such an operand is cast to the common type with TRY_CAST, NULL without raising;
        where TRY made the whole expression NULL, only that operand is NULL now."""
        operands = _operands(node)
        kinds = [self.typer.kind(o) for o in operands]
        known = [k for k in kinds if k.family is not Family.NULL]
        if not any(k.family is Family.DECIMAL for k in known) or not all(k.numeric for k in known):
            return
        compared = isinstance(node, (*_COMPARED, exp.In, exp.Between))
        out = known[0]
        for k in known[1:]:
            out = common(out, k, compared=compared)
        if out.family is not Family.DECIMAL or not out.precision:
            return
        target = f"DECIMAL({out.precision}, {out.scale})"
        for operand, k in zip(operands, kinds, strict=True):
            digits = decimal_digits(k)
            if k.family is Family.INT and k.bits == 128:
                digits = (39, 0)  # DuckDB reads it as DECIMAL(38, 0); its values reach 1.7e38
            if digits is not None and digits[0] - digits[1] > out.precision - out.scale:
                _wrap(operand, lambda v: exp.TryCast(this=v, to=exp.DataType.build(target)))

    def compared(self, node: exp.Expr) -> exp.Expr:
        """A text compared with a number or a date is cast per row (and raises on a text
        that is neither): cast with TRY_CAST, which gives TRY's NULL without raising."""
        sides = compared_sides(node)
        # (a date moved, which the kinds leave untyped, is a date here: a text beside
        # `dt - s` was cast per row without TRY_CAST, and raised)
        kinds = [self.kind_of(side) if side is not None else None for side in sides]
        others = [k for k in kinds if k is not None and k.family not in (Family.TEXT, Family.NULL)]
        if not others or all(k is None or k.family is not Family.TEXT for k in kinds):
            return node
        target = duckdb_type(others[0])
        if target is None:
            return node
        for side, kind in zip(sides, kinds, strict=True):
            if side is None or kind is None or kind.family is not Family.TEXT:
                continue
            if isinstance(side.unnest(), exp.Literal):
                # a constant is cast once, while DuckDB binds: a bad one ('2024-13-45')
                # stays an error before any charge, not a silent NULL
                continue
            _wrap(side, lambda v: exp.TryCast(this=v, to=exp.DataType.build(target)))
        return node

    def bounded_interval(self, node: exp.Interval) -> exp.Expr:
        """An amount from the data within 10,000 years of its unit (the checker refuses
        an amount without a unit)."""
        amount = node.this
        unit = node.args.get("unit")
        limit = _INTERVAL_LIMIT.get(unit.name.upper()) if unit is not None else None
        if amount is None or isinstance(amount.unnest(), exp.Literal) or limit is None:
            return node
        node.set("this", _kept(amount.unnest(), f"__v BETWEEN -{limit} AND {limit}"))
        return node

    def substring(self, node: exp.Substring) -> exp.Expr:
        for key in ("start", "length"):
            value = node.args.get(key)
            if value is None or isinstance(value.unnest(), exp.Literal):
                continue
            node.set(key, _kept(value, f"__v BETWEEN -{_SUBSTRING_LIMIT} AND {_SUBSTRING_LIMIT}"))
        return node

    def decimal(self, node: exp.Binary, kind: Kind) -> exp.Expr:
        """DECIMAL ``+ - * %`` (kinds.decimal_result): ``%`` by zero is NULL; a result
        DuckDB caps at 18 digits is computed in 38 and narrowed with TRY_CAST; one capped
        at 38 is computed only where its DOUBLE is within 10^(38 - scale). Others cannot
        overflow and stay as they are."""
        for operand in (node.this, node.expression):
            k = self.typer.kind(operand)
            if k.family is Family.INT and k.bits == 128:
                # DuckDB casts it to DECIMAL(38, 0), which raises past 10^38
                _wrap(operand, lambda v: exp.TryCast(this=v, to=exp.DataType.build("DECIMAL(38, 0)")))
        if isinstance(node, exp.Mod):
            return placed("__a % __b", a=node.this, b=_nonzero(node.expression))
        a = decimal_digits(self.typer.kind(node.this))
        b = decimal_digits(self.typer.kind(node.expression))
        if a is None or b is None or not kind.precision:
            return node  # TRY's fallback, as before
        (p1, s1), (p2, s2) = a, b
        if isinstance(node, exp.Mul):
            natural = p1 + p2
            if kind.precision == 18 and natural > 18:
                # both operands within 18 digits: the product has at most 36
                return placed(
                    f"TRY_CAST(CAST(__a AS DECIMAL(38, {s1})) * CAST(__b AS DECIMAL(38, {s2})) "
                    f"AS DECIMAL(18, {kind.scale}))",
                    a=node.this,
                    b=node.expression,
                )
        else:
            natural = max(p1 - s1, p2 - s2) + max(s1, s2) + 1
        if natural <= kind.precision:
            return node  # the result always fits
        op = "+" if isinstance(node, exp.Add) else "-" if isinstance(node, exp.Sub) else "*"
        # 38 digits at this scale, less a DOUBLE's rounding of the operands and result
        return _within(
            node,
            op,
            f"{10.0 ** (38 - kind.scale) * (1 - 1e-12):.17g}",
            f"DECIMAL({kind.precision}, {kind.scale})",
        )

    def rounded(self, node: exp.Round, kind: Kind) -> exp.Expr:
        """ROUND to tens or more (places not known to be at least 0), whose carried digit
        may not fit the result's type (DuckDB raises): an integer rounds one width up and
        is narrowed with TRY_CAST; a HUGEINT or a DECIMAL(38, 0) rounds only where its
        DOUBLE leaves room for the carry (for places unknown, the room any places need:
        up to half the type's limit, which a value above it may not get)."""
        places = places_of(node.args.get("decimals"))
        if places is not None and places >= 0:
            return node  # no carry past the integer part
        inner = self.typer.kind(node.this)
        bits = _int_kind(inner)
        if bits and bits < 128:
            _wrap(node.this, lambda v: exp.Cast(this=v, to=exp.DataType.build(_WIDER[bits])))
            return exp.TryCast(this=node, to=exp.DataType.build(INT_TYPE_NAMES[bits]))
        if bits == 128:
            top, type_sql = 1.7e38, "HUGEINT"
        elif inner.family is Family.DECIMAL and inner.precision == 38 and inner.scale == 0:
            top, type_sql = 1e38, "DECIMAL(38, 0)"
        else:
            return node  # no carry past the type (DECIMAL(p < 38, 0) rounds into p + 1)
        if places is not None and -places > 38:
            return node  # rounds everything to 0
        carry = 0.5 * 10.0 ** (-places if places is not None and -places < 38 else 38)
        limit = f"{(top - carry) * (1 - 1e-12):.17g}"
        return _once(node, f"ABS(CAST(__v AS DOUBLE)) < {limit}", type_sql)

    def huge(self, node: exp.Binary, op: str) -> exp.Expr:
        return _within(node, op, _HUGE_DOUBLE, "HUGEINT")

    def moved_date(self, node: exp.Binary) -> exp.Expr:
        interval, date = (
            (node.expression, node.this)
            if isinstance(node.expression, exp.Interval)
            else (node.this, node.expression)
        )
        assert isinstance(interval, exp.Interval)  # its amount bounded (bounded_interval)
        if isinstance(date.unnest(), exp.Interval):
            return node  # two intervals, each within 10,000 years
        if self.typer.is_interval(date):
            # the sum of two intervals adds their months, days and microseconds: each
            # side's kept within 10,000 years a field, the sums cannot overflow (a
            # literal's amount from the data is bounded so; a constant one is not)
            _wrap(date, lambda v: _kept(v, _INTERVAL_FIELDS))
            amount = interval.this
            if amount is not None and isinstance(amount.unnest(), exp.Literal):
                _wrap(interval, lambda v: _kept(v, _INTERVAL_FIELDS))  # folded once
            return node
        if self.nanos(date) is not None:  # as in moved_by_interval
            date = _wrap(date, lambda v: exp.TryCast(this=v, to=exp.DataType.build("TIMESTAMP")))
        if not isinstance(date.unnest(), exp.Literal):
            # a date from the data near DuckDB's limits overflows, even by 1 year
            _wrap(date, self.within_years)
        return node

    def moved_by_interval(self, node: exp.Binary) -> exp.Expr | None:
        """A date or timestamp plus or minus an interval that is not an ``INTERVAL (n)
        unit`` (``CAST(text AS INTERVAL)``, an INTERVAL column): the interval within
        10,000 years in all (_MOVING_INTERVAL) and the date within _TIMESTAMP_RANGE, else
        NULL, as TRY gives. None when ``node`` is not such a move."""
        left, right = node.this, node.expression
        if self.typer.is_interval(right) and not self.typer.is_interval(left):
            date, interval = left, right
        elif isinstance(node, exp.Add) and self.typer.is_interval(left) and not (
            self.typer.is_interval(right)
        ):
            date, interval = right, left
        else:
            return None
        if not self.dated(date):
            return None
        if self.nanos(date) is not None:
            # DuckDB moves a TIMESTAMP_NS within its own range (years 1677-2262): moved
            # as a TIMESTAMP, it cannot leave one
            date = _wrap(date, lambda v: exp.TryCast(this=v, to=exp.DataType.build("TIMESTAMP")))
        _wrap(interval, lambda v: _kept(v, _MOVING_INTERVAL))
        if not isinstance(date.unnest(), exp.Literal):
            _wrap(date, self.within_years)
        return node

    def dated(self, node: exp.Expr) -> bool:
        """Whether ``node`` is a date or timestamp: typed so, or a date moved by an
        interval (the kinds leave that sum untyped; a TIMESTAMP in DuckDB)."""
        return remembered(
            self._dated,
            node,
            lambda n: self._moved(
                n,
                lambda m: self.typer.kind(m).family in _DATES or self.day_dated(m),
                self.typer.is_interval,
                self.dated,
            ),
        )

    def day_dated(self, node: exp.Expr) -> bool:
        """Whether ``node`` is a DATE: typed so, or a DATE moved by a number of days (the
        kinds leave that sum untyped)."""
        return remembered(
            self._day_dated,
            node,
            lambda n: self._moved(
                n,
                lambda m: self.typer.kind(m).family is Family.DATE,
                lambda m: bool(_int_kind(self.typer.kind(m))),
                self.day_dated,
            ),
        )

    @staticmethod
    def _moved(
        node: exp.Expr,
        base: Callable[[exp.Expr], bool],
        step: Callable[[exp.Expr], bool],
        again: Callable[[exp.Expr], bool],
    ) -> bool:
        """Whether ``node`` is a value ``base`` accepts, such a value plus or minus a
        ``step``, or a choice among such (the guards' own CASE WHEN ... THEN v END).
        ``again`` asks the same of a part (the caller's remembered question)."""
        if base(node):
            return True
        node = _peeled(node)
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Least, exp.Greatest)):
            branches = [b for b in _operands(node) if b is not None and not isinstance(b, exp.Null)]
            return bool(branches) and all(again(b) for b in branches)
        if isinstance(node, (exp.Add, exp.Sub)):
            sides = (node.this, node.expression)
            return any(step(s) for s in sides) and any(
                not step(s) and again(s) for s in sides
            )
        return False

    def nanos(self, node: exp.Expr) -> exp.DataType | None:
        """The type of ``node`` when it is a nanosecond timestamp (a TIMESTAMP_NS or
        TIMESTAMPTZ_NS column or cast, or a choice among them), else None: DuckDB raises
        on bringing a TIMESTAMP or DATE beyond years 1677-2262 to one."""
        return remembered(self._nanos, node, self._nanos_of)

    def _nanos_of(self, node: exp.Expr) -> exp.DataType | None:
        node = _peeled(node)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            name = node.to.sql(dialect="duckdb").upper()
            return _nano_type(name) if name in _NANO_NAMES else None
        if isinstance(node, exp.Column):
            found = (self.typer.column_type(node) or "").upper()
            return _nano_type(found) if found in _NANO_NAMES else None
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Least, exp.Greatest)):
            for operand in _operands(node):
                found_type = None if operand is None else self.nanos(operand)
                if found_type is not None:
                    return found_type
        return None

    def is_time(self, node: exp.Expr) -> bool:
        """Whether ``node`` is a TIME (a TIME column or cast): a DATE plus a TIME is a
        TIMESTAMP, which raises beyond TIMESTAMP's range."""
        node = node.unnest()
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return node.to.this in (exp.DataType.Type.TIME, exp.DataType.Type.TIMETZ)
        if isinstance(node, exp.Column):
            found = self.typer.column_type(node)
            return found is not None and found.upper().startswith("TIME") and not (
                found.upper().startswith("TIMESTAMP")
            )
        return False

    def _date(self, node: exp.Expr) -> bool:
        return self.family(node) is Family.DATE and not isinstance(
            node.unnest(), exp.Literal
        )

    def subtracted_timestamps(self, node: exp.Sub) -> bool:
        """A TIMESTAMP minus a TIMESTAMP (or a DATE) raises when either is infinite, and
        a DATE beyond TIMESTAMP's range raises in its cast: each side finite and cast
        with TRY_CAST, else NULL, as TRY gives. False when ``node`` is not such a
        difference."""
        kinds = [self.family(side) for side in (node.this, node.expression)]
        if Family.TIMESTAMP not in kinds or any(k not in _DATES for k in kinds):
            return False
        for key, family in zip(("this", "expression"), kinds, strict=True):
            side = node.args[key]
            if family is Family.DATE:
                side = exp.TryCast(this=side, to=exp.DataType.build("TIMESTAMP"))
            node.set(key, _kept(side, "ISFINITE(__v)"))
        return True

    def dates_met_with_timestamps(self, node: exp.Expr) -> None:
        """A DATE that DuckDB casts to TIMESTAMP to compare or combine it with one (a
        comparison, IN, BETWEEN, CASE, COALESCE, LEAST, GREATEST, DATE_DIFF) raises when
        the date is beyond TIMESTAMP's range (years 290309 BC to 294247 AD; DATEs reach
        5.8 million years): such an operand is cast with TRY_CAST, NULL without raising."""
        if isinstance(node, exp.DateDiff):
            operands = [node.this, node.expression]
        else:
            operands = _operands(node)
        operands = [o for o in operands if o is not None]
        families = [self.family(o) for o in operands]
        nano = next((t for t in map(self.nanos, operands) if t is not None), None)
        if nano is not None:
            # DuckDB brings a DATE or TIMESTAMP beside a nanosecond one to nanoseconds,
            # and raises beyond years 1677-2262 (a probe: DATE '3000-01-01')
            for operand, family in zip(operands, families, strict=True):
                if family in _DATES and self.nanos(operand) is None:
                    _wrap(operand, lambda v: exp.TryCast(this=v, to=nano.copy()))
            return
        if Family.TIMESTAMP not in families:
            return
        for operand, family in zip(operands, families, strict=True):
            if family is Family.DATE:
                _wrap(operand, lambda v: exp.TryCast(this=v, to=exp.DataType.build("TIMESTAMP")))

    def scaled_interval(self, node: exp.Mul | exp.Div) -> exp.Expr:
        """An interval times or divided by a number: the interval where every field's
        result stays within its type (_SCALED_INTERVAL), else NULL; a factor of zero
        divides to NULL, as TRY gives for DuckDB's division by zero."""
        if isinstance(node, exp.Mul) and not self.typer.is_interval(node.this):
            interval, number = node.expression, node.this
        else:
            interval, number = node.this, node.expression
        if self.typer.is_interval(number):
            return node  # not a product DuckDB has
        factor = (
            "ABS(CAST(__n AS DOUBLE))"
            if isinstance(node, exp.Mul)
            else "(1.0 / NULLIF(ABS(CAST(__n AS DOUBLE)), 0))"
        )
        text = _SCALED_INTERVAL.replace("__f", factor)
        if isinstance(node, exp.Mul) and _int_kind(self.typer.kind(number)) == 64:
            # DuckDB multiplies by a BIGINT cast to INTEGER, which raises beyond 2^31
            # whatever the interval (a probe: INTERVAL 16 MICROSECOND * 3037000500)
            text = text.replace(
                "CASE WHEN ", "CASE WHEN __n BETWEEN -2147483648 AND 2147483647 AND ", 1
            )
        if _simple(interval) and _simple(number):
            _wrap(interval, lambda i: placed(text, i=i, n=number.copy()))
            return node
        # the check repeats the interval six times and the number three: read once,
        # through a one-element list of a struct (each level of `(i * 2) * 2` would
        # otherwise multiply the SQL by seven)
        guarded = text.replace("__i", "__guard.i").replace("__n", "__guard.n")
        if isinstance(node, exp.Div):
            body = f"({guarded}) / __guard.n"
        elif node.this is interval:
            body = f"({guarded}) * __guard.n"
        else:
            body = f"__guard.n * ({guarded})"
        return _read_once(body, "INTERVAL", {"i": interval, "n": number})

    def moved_by_days(self, node: exp.Binary) -> exp.Expr:
        days, date = node.expression, node.this
        if not self.day_dated(date):
            days, date = node.this, node.expression
        if not self.day_dated(date) or not _int_kind(self.typer.kind(days)):
            return node
        _wrap(days, lambda v: _kept(v, f"__v BETWEEN -{_DAYS_LIMIT} AND {_DAYS_LIMIT}"))
        _wrap(date, lambda v: self.within_years(v, days=True))
        return node

    def within_years(self, date: exp.Expr, days: bool = False) -> exp.Expr:
        """``date`` where 10,000 years either way stay within DuckDB's range (a DATE moved
        by an interval becomes a TIMESTAMP, whose range is narrower), or infinite (which
        an interval leaves as it is); else NULL, as TRY would give."""
        lo, hi = _DAY_RANGE if days else _TIMESTAMP_RANGE
        return _kept(date, f"__v BETWEEN DATE '{lo}' AND DATE '{hi}' OR NOT ISFINITE(__v)")


def under_try(sql: str) -> bool:
    """Whether ``sql`` has a TRY for the guards to look into (most cores have none)."""
    return "TRY(" in sql.upper()


def guarded_sql(sql: str, types: Mapping[tuple[str, str], Mapping[str, str]]) -> str:
    """``sql`` (a core, in DuckDB's dialect) with the operations under each TRY in the
    forms above. Precondition: ``types`` are the catalog's column types. Claim: the
    same answer on every row, and none of these operations raises."""
    if not under_try(sql):
        return sql
    try:
        tree = _parse(sql)
    except SqlglotError:
        return sql
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    # Each TRY is typed by the tables of its own SELECT: an alias names a catalog table
    # in one scope and a derived table in another (a per-person subquery reuses its
    # table's t0 for its aggregates), whose columns are of other types.
    scopes: dict[int, tuple[dict[str, Mapping[str, str]], _Guard]] = {}
    changed = False
    for node in list(tree.find_all(exp.Try)):
        if node.find_ancestor(exp.Try) is not None:
            continue  # guarded with its outermost TRY
        select = node.find_ancestor(exp.Select)
        found = scopes.get(id(select))
        if found is None:
            aliases = _scope_aliases(select, types, ctes) if select is not None else {}
            found = scopes[id(select)] = (aliases, _Guard(Typer(aliases, remember=True)))
        aliases, guard = found
        before = node.this.sql(dialect="duckdb")
        _signed_columns(node, aliases)
        node.set("this", guard.form(node.this))
        changed = changed or node.this.sql(dialect="duckdb") != before
    return tree.sql(dialect="duckdb") if changed else sql


def _scope_aliases(
    select: exp.Select, types: Mapping[tuple[str, str], Mapping[str, str]], ctes: set[str]
) -> dict[str, Mapping[str, str]]:
    """alias -> column types of the catalog tables ``select`` itself reads (its FROM and
    joins; not a CTE's name, not a derived table)."""
    sources = [select.args["from_"].this] if select.args.get("from_") else []
    sources += [j.this for j in select.args.get("joins") or []]
    out: dict[str, Mapping[str, str]] = {}
    for source in sources:
        if not isinstance(source, exp.Table) or (not source.db and source.name.lower() in ctes):
            continue
        columns = types.get(((source.db or "main").lower(), source.name.lower()))
        if columns is not None:
            out[source.alias_or_name.lower()] = columns
    return out


def _signed_columns(root: exp.Expr, aliases: Mapping[str, Mapping[str, str]]) -> None:
    """Unsigned columns under ``root`` read as the signed type one width up."""
    for column in list(root.find_all(exp.Column)):
        found = aliases.get(column.table.lower(), {}).get(column.name.lower(), "").upper()
        signed = _SIGNED.get(found)
        if signed is not None:
            cast = exp.TryCast if found in ("UHUGEINT", "UINT128") else exp.Cast
            column.replace(cast(this=column.copy(), to=exp.DataType.build(signed)))
