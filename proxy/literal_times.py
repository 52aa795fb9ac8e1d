"""Fold time parsing of literals (``TO_TIMESTAMP('2024-01-01 00:00:00', 'YYYY-MM-…')``)
into typed literals before binding.

BI tools write every time-range filter this way (Superset on PostgreSQL sends
``ts >= TO_TIMESTAMP('…', 'YYYY-MM-DD HH24:MI:SS.US')``, on Trino
``ts >= from_iso8601_timestamp('2025-01-01T00:00:00.000000')`` and
``from_iso8601_date('2025-01-01')``). Parsing a string is not
allowed on rows — it could fail on some private value — but a call whose arguments are
all literals depends on the query text alone: it is evaluated here, once, in Python, and
replaced by ``CAST('YYYY-MM-DD HH:MM:SS.ffffff' AS TIMESTAMP)``. A literal that does not
match its format is refused before any charge, so the folded query can never fail on a
data row because of it.
"""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from proxy.errors import DPSQLError, position_of

_FOLDABLE = (exp.StrToTime, exp.StrToDate, exp.FromISO8601Timestamp, exp.FromISO8601Date)
_ISO = (exp.FromISO8601Timestamp, exp.FromISO8601Date)


def _literal_text(node: exp.Expr | None) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def timestamp_literal(value: dt.datetime) -> exp.Expr:
    """``CAST('YYYY-MM-DD HH:MM:SS.ffffff' AS TIMESTAMP)``: the one form every folded
    time is written in (so that equal times give equal cores, and share a release)."""
    return exp.cast(exp.Literal.string(value.strftime("%Y-%m-%d %H:%M:%S.%f")), "TIMESTAMP")


def date_literal(value: dt.date) -> exp.Expr:
    """``CAST('YYYY-MM-DD' AS DATE)``."""
    return exp.cast(exp.Literal.string(value.isoformat()), "DATE")


def _fold_iso(node: exp.Expr) -> exp.Expr:
    """Trino's ISO 8601 readers of a literal. A time with an offset is the same instant
    in UTC, the door's session zone, so it compares with a TIMESTAMP column as Trino
    compares them there; one without an offset is read in that zone (as written)."""
    text = _literal_text(node.this)
    if text is None:
        return node  # not literal-only: the checker decides (and refuses it on rows)
    name = (
        "from_iso8601_date" if isinstance(node, exp.FromISO8601Date) else "from_iso8601_timestamp"
    )
    try:
        if isinstance(node, exp.FromISO8601Date):
            return date_literal(dt.date.fromisoformat(text))
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise DPSQLError(
            "bad_request",
            f"{name} cannot read {text[:40]!r} as an ISO 8601 "
            + ("date" if isinstance(node, exp.FromISO8601Date) else "timestamp"),
            "write it as '2025-01-31' or '2025-01-31T12:00:00' (an offset such as "
            "'+01:00' may follow the time)",
            position_of(node),
        ) from None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return timestamp_literal(value)


def _fold(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, _FOLDABLE):
        return node
    if isinstance(node, _ISO):
        return _fold_iso(node)
    text, fmt = _literal_text(node.this), _literal_text(node.args.get("format"))
    if text is None or fmt is None:
        return node  # not literal-only: the checker decides (and refuses it on rows)
    try:
        value = dt.datetime.strptime(text, fmt)
    except ValueError:
        raise DPSQLError(
            "bad_request",
            f"the time literal {text[:40]!r} does not match its format {fmt[:40]!r}",
            "fix the literal or the format, or write CAST('YYYY-MM-DD HH:MM:SS' AS TIMESTAMP)",
            position_of(node),
        ) from None
    if isinstance(node, exp.StrToDate):
        return date_literal(value.date())
    return timestamp_literal(value)


def fold_literal_times(tree: exp.Expr) -> exp.Expr:
    """``tree`` with every literal-only string-to-time call replaced by its value."""
    if not any(True for _ in tree.find_all(*_FOLDABLE)):
        return tree
    return tree.transform(_fold, copy=False)
