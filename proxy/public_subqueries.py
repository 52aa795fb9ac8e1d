"""Rule: a subquery in a condition that reads only public tables is replaced by its
values before planning.

``WHERE u.region IN (SELECT region FROM regions WHERE name <> 'East')`` or ``u.region =
(SELECT region FROM regions WHERE name = 'East')`` compare a person's row with values of
a public table. Those values hold nothing about any person, so they are read in the
public sandbox (proxy/public_queries.py, the same path that answers queries over public
tables alone, exactly and free) and written into the query as constants: the private
query that remains is one the checker already answers (``IN (...)`` of constants, ``=``
a constant, ``TRUE``/``FALSE`` for EXISTS). Such subqueries were refused as "not
row-level" (an honest-answers probe, 2026-12-06).

Only uncorrelated subqueries fold: one that names a column of the outer query cannot
run in the sandbox and is left as written (and refused or answered as before). A scalar
subquery of more than one row is refused, as SQL refuses it; an ``IN`` list of more
than :data:`MAX_VALUES` values is left as written. What folds is decided by public data
and the query's text alone, before any charge.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from proxy.allowlist import COMPARISONS
from proxy.catalog import Catalog
from proxy.errors import DPSQLError, position_of, unsupported
from proxy.public_queries import PublicQuery, classify

#: the most values a folded IN list may hold (the IN-list checks bound the rest)
MAX_VALUES = 1_000
_PLAIN = (int, float, str, bool, decimal.Decimal, datetime.date, datetime.datetime)

Runner = Callable[[PublicQuery], tuple[list[str], list[tuple[Any, ...]]]]


def _literal(value: Any) -> exp.Expr | None:
    if value is None:
        return exp.Null()
    if isinstance(value, datetime.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, datetime.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, _PLAIN):
        return exp.convert(value)
    return None


def _rows(
    query: exp.Expr, catalog: Catalog, allowed: frozenset[str] | None, run: Runner
) -> list[tuple[Any, ...]] | None:
    """The subquery's rows when it reads public tables only and runs alone, else None."""
    try:
        public = classify(query.copy(), catalog, allowed)
    except DPSQLError:
        return None
    if public is None or not public.tables:
        return None
    try:
        names, rows = run(public)
    except DPSQLError as error:
        if error.code == "timeout":
            raise
        return None  # e.g. it names a column of the outer query: not folded
    return rows if len(names) == 1 else None


def fold(
    tree: exp.Expr, catalog: Catalog, allowed: frozenset[str] | None, run: Runner
) -> exp.Expr:
    """``tree`` (in place) with each public, uncorrelated subquery of a condition
    replaced by its values. Reads public tables only."""
    for node in list(tree.find_all(exp.In, exp.Exists, exp.Subquery)):
        if isinstance(node, exp.In) and isinstance(node.args.get("query"), exp.Subquery):
            rows = _rows(node.args["query"].this, catalog, allowed, run)
            if rows is None or len(rows) > MAX_VALUES:
                continue
            values = [_literal(r[0]) for r in rows]
            if any(v is None for v in values):
                continue
            if not values:
                node.replace(exp.false())  # x IN (no rows) is false, NOT IN true
                continue
            node.set("query", None)
            node.set("expressions", values)
        elif isinstance(node, exp.Exists) and isinstance(node.this, exp.Query):
            rows = _rows(node.this, catalog, allowed, run)
            if rows is not None:
                node.replace(exp.true() if rows else exp.false())
        elif isinstance(node, exp.Subquery) and isinstance(node.parent, COMPARISONS):
            rows = _rows(node.this, catalog, allowed, run)
            if rows is None:
                continue
            if len(rows) > 1:
                raise unsupported(
                    f"a scalar subquery over public tables returned {len(rows)} rows",
                    "make it return one row (a WHERE on a key, or an aggregate), or use IN",
                    position_of(node),
                )
            value = _literal(rows[0][0]) if rows else exp.Null()
            if value is not None:
                node.replace(value)
    return tree
