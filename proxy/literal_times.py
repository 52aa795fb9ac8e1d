"""Fold time parsing of literals (``TO_TIMESTAMP('2024-01-01 00:00:00', 'YYYY-MM-…')``)
into typed literals before binding.

BI tools write every time-range filter this way (Superset on PostgreSQL sends
``ts >= TO_TIMESTAMP('…', 'YYYY-MM-DD HH24:MI:SS.US')``). Parsing a string is not
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

_FOLDABLE = (exp.StrToTime, exp.StrToDate)


def _literal_text(node: exp.Expr | None) -> str | None:
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def _fold(node: exp.Expr) -> exp.Expr:
    if not isinstance(node, _FOLDABLE):
        return node
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
        return exp.cast(exp.Literal.string(value.date().isoformat()), "DATE")
    return exp.cast(exp.Literal.string(value.strftime("%Y-%m-%d %H:%M:%S.%f")), "TIMESTAMP")


def fold_literal_times(tree: exp.Expr) -> exp.Expr:
    """``tree`` with every literal-only string-to-time call replaced by its value."""
    if not any(True for _ in tree.find_all(*_FOLDABLE)):
        return tree
    return tree.transform(_fold, copy=False)
