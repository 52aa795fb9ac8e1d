"""Rule: arithmetic on time literals is computed once, at planning, and written as the
literal it gives.

``CAST(CAST('2026-12-06 07:12:03.5' AS TIMESTAMP) AS DATE) - INTERVAL '30 day'`` (what a
relative filter becomes once proxy/clock.py has read the clock) depends on the query's
text alone. Computed here, it becomes ``CAST('2026-11-06 00:00:00.000000' AS
TIMESTAMP)``: the core then compares each row with one constant, and two requests whose
times compute to the same value share one release (the cache keys by the core's text).
It also turns a constant that cannot be computed (``CAST('294247-01-01' AS DATE) +
INTERVAL '1000 year'``, out of DuckDB's range), which the core's TRY would have made NULL
and so answered with no rows, into a refusal before any charge. A value DuckDB computes
but Python cannot hold (past the year 9999, or an infinity) is left as written.

Only what is plainly constant is computed: literals, casts to DATE and TIMESTAMP,
intervals, ``+``, ``-``, ``*``, parentheses, date truncation and the date-add spellings.
A cast to a type with a time zone is left as written (its value depends on a session
setting). The value is DuckDB's own, on the in-memory connection that converts text
constants (proxy/constants.py): the engine would have computed the same on DuckDB.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from sqlglot import exp

from proxy.errors import DPSQLError
from proxy.literal_times import date_literal, timestamp_literal

_SHAPES: tuple[type[exp.Expr], ...] = (
    exp.Cast,
    exp.Paren,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Neg,
    exp.Interval,
    exp.Literal,
    exp.DataType,
    exp.Var,
    exp.DateTrunc,
    exp.TimestampTrunc,
    exp.DateAdd,
    exp.DateSub,
    exp.TsOrDsAdd,
    exp.TimestampAdd,
    exp.TimestampSub,
    exp.DatetimeAdd,
    exp.DatetimeSub,
)
_TIME_TYPES = frozenset(
    {
        exp.DataType.Type.DATE,
        exp.DataType.Type.TIMESTAMP,
        exp.DataType.Type.TIMESTAMPNTZ,
        exp.DataType.Type.DATETIME,
    }
)


def _time_literal(node: exp.Expr) -> bool:
    """``CAST('…' AS DATE/TIMESTAMP)``: the form every time literal is written in."""
    return (
        isinstance(node, exp.Cast)
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
        and node.to.this in _TIME_TYPES
    )


def _computable(node: exp.Expr) -> bool:
    """Every node is a constant shape, no type has a zone, and a time literal is in it."""
    has_time = False
    for sub in node.walk():
        if not isinstance(sub, _SHAPES):
            return False
        if (
            isinstance(sub, exp.DataType)
            and sub.this not in _TIME_TYPES
            and sub.is_type(*exp.DataType.TEMPORAL_TYPES)
        ):
            return False  # a zone (TIMESTAMPTZ …) or a time of day: left as written
        has_time = has_time or _time_literal(sub)
    return has_time


@functools.lru_cache(maxsize=1024)
def _value(sql: str) -> Any:
    """DuckDB's value of the constant expression ``sql`` (duckdb.Error when it has none)."""
    from proxy.constants import connection

    row = connection().execute(f"SELECT {sql}").fetchone()
    return None if row is None else row[0]


def _literal(value: Any) -> exp.Expr | None:
    """The typed literal of a finite DATE or TIMESTAMP value, else None (left as
    written). DuckDB hands its infinities to Python as the extreme finite values
    (``datetime.max``): those are left alone, not written as a finite time."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None or value in (dt.datetime.max, dt.datetime.min):
            return None
        return timestamp_literal(value)
    if isinstance(value, dt.date):
        if value in (dt.date.max, dt.date.min):
            return None
        return date_literal(value)
    return None


def _fold(node: exp.Expr) -> exp.Expr:
    if not _time_literal(node) and _computable(node):
        import duckdb

        sql = node.sql(dialect="duckdb")
        try:
            value = _value(sql)
        except duckdb.Error as error:
            first = str(error).splitlines()[0][:200]
            raise DPSQLError(
                "bad_request",
                f"the time expression {sql[:120]} cannot be computed: {first}",
                "write a time within DuckDB's range, or compute it before sending",
            ) from None
        literal = _literal(value)
        if literal is not None:
            return literal
    for key, child in list(node.args.items()):
        if isinstance(child, exp.Expr):
            node.set(key, _fold(child))
        elif isinstance(child, list):
            node.set(key, [_fold(c) if isinstance(c, exp.Expr) else c for c in child])
    return node


def fold_constant_times(tree: exp.Expr) -> exp.Expr:
    """``tree`` (changed in place) with each largest constant time expression replaced by
    its value. Reads no data: what is computed depends on the query's text alone, and
    an expression with no value is refused before any charge."""
    if not any(_time_literal(n) for n in tree.find_all(exp.Cast)):
        return tree
    return _fold(tree)
