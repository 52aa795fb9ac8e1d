"""Rule: every row-level expression becomes total, so no row can make the query fail.

A query whose success depended on a private value would leak that value through the
error. CAST becomes TRY_CAST, and every predicate, key and aggregate argument that could
raise on some row — arithmetic overflow, a per-row regex or date part, an implicit cast
of a text column to a number — is wrapped in TRY(...), which yields NULL instead.
Simple comparisons of a column with literals stay unwrapped so that DuckDB can still
push them into the scan; they cannot fail on a row.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from proxy.catalog import TableInfo, column_type
from proxy.rewrite.core import Core
from proxy.semijoins import semi_join_of

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_TEXT = ("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR")
_BOOLEAN = exp.DataType.build("BOOLEAN")  # shared: insert copies only


def _column_type(col: exp.Column, tables: dict[str, TableInfo]) -> str:
    return column_type(tables, col.table, col.name)


_NARROW_NUMBERS = ("DECIMAL", "NUMERIC", "FLOAT", "REAL")


def _literal_fits(col: exp.Column, literals: list[exp.Expr], tables: dict[str, TableInfo]) -> bool:
    """A text column compared with a number would be cast row by row; all else binds once."""
    if not all(isinstance(lit, exp.Literal) for lit in literals):
        return False
    # Same kind on both sides: nothing is cast per row. A text column against a number
    # is cast row by row; a number column against text fails at run time: both TRY.
    strings = all(isinstance(lit, exp.Literal) and lit.is_string for lit in literals)
    numbers = all(isinstance(lit, exp.Literal) and not lit.is_string for lit in literals)
    info = tables.get(col.table.lower())
    if info is None:
        return False
    kind = _column_type(col, tables)
    if kind.startswith(_TEXT):
        return strings
    if kind.startswith(_NARROW_NUMBERS):
        # DuckDB converts the literal to a DECIMAL or FLOAT column's type, which may not
        # hold it (DECIMAL(38, 37) and 50, FLOAT and 1e39): that fails on each row that
        # reaches it, so those go under TRY. Integer and DOUBLE columns widen instead.
        return False
    if info.is_numeric(col.name):
        return numbers
    return False


def _safe(node: exp.Expr, tables: dict[str, TableInfo]) -> bool:
    """True for predicates that cannot raise on any row."""
    if isinstance(node, (exp.And, exp.Or)):
        return _safe(node.left, tables) and _safe(node.right, tables)
    if isinstance(node, (exp.Not, exp.Paren)):
        return _safe(node.this, tables)
    if isinstance(node, exp.Is):
        # IS NULL reads no value; IS TRUE/FALSE casts a non-BOOLEAN column per row.
        return isinstance(node.this, exp.Column) and (
            isinstance(node.expression, exp.Null) or _column_type(node.this, tables) == "BOOLEAN"
        )
    if isinstance(node, _COMPARISONS):
        left, right = node.left, node.right
        if isinstance(left, exp.Column) and isinstance(right, exp.Column):
            return _column_type(left, tables) == _column_type(right, tables) != ""
        if isinstance(left, exp.Column):
            return _literal_fits(left, [right], tables)
        if isinstance(right, exp.Column):
            return _literal_fits(right, [left], tables)
        return False
    if isinstance(node, exp.In) and isinstance(node.this, exp.Column):
        return _literal_fits(node.this, list(node.expressions), tables)
    if isinstance(node, exp.Between) and isinstance(node.this, exp.Column):
        return _literal_fits(node.this, [node.args["low"], node.args["high"]], tables)
    return isinstance(node, (exp.Boolean, exp.Column)) and (
        not isinstance(node, exp.Column) or _column_type(node, tables) == "BOOLEAN"
    )


def _try_casts(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
        return exp.TryCast(this=node.this, to=node.to)
    return node


def total_value(expression: exp.Expr) -> exp.Expr:
    """A key or aggregate argument: bare columns as they are, anything else under TRY."""
    copied = expression.copy()
    if copied.find(exp.Cast) is not None:  # no transform to walk when there is none
        copied = copied.transform(_try_casts, copy=False)
    if isinstance(copied, (exp.Column, exp.Literal, exp.Try)):
        return copied
    return exp.Try(this=copied)


def total_predicate(expression: exp.Expr, tables: dict[str, TableInfo]) -> exp.Expr:
    """A WHERE or ON condition: safe conjuncts unwrapped, every other one under TRY."""
    copied = expression.copy()
    if copied.find(exp.Cast) is not None:
        copied = copied.transform(_try_casts, copy=False)
    conjuncts = list(copied.flatten()) if isinstance(copied, exp.And) else [copied]
    # The cast to BOOLEAN sits inside TRY: a text column used as a predicate would
    # otherwise be cast, and fail, outside it.
    parts = [
        _total_semi_join(c, tables)
        if semi_join_of(c.unnest()) is not None
        else c
        if _safe(c, tables)
        else exp.Try(this=exp.Cast(this=c, to=_BOOLEAN.copy()))
        for c in conjuncts
    ]
    # The parts belong to the fresh copy: joining them needs no second copy.
    return exp.and_(*parts, copy=False) if len(parts) > 1 else parts[0]


def _total_semi_join(conj: exp.Expr, tables: dict[str, TableInfo]) -> exp.Expr:
    """A semi-join stays a semi-join; its subquery's condition is made total."""
    found = semi_join_of(conj.unnest())
    assert found is not None
    inner = found[0].args["query"].this
    where = inner.args.get("where")
    if where is not None:
        where.set("this", total_predicate(where.this, tables))
    return conj


def apply(core: Core) -> Core:
    select = core.shape.select
    tables = dict(core.shape.tables)
    from_ = select.args.get("from_")
    joins = tuple(j.copy() for j in select.args.get("joins") or [])
    for join in joins:
        on = join.args.get("on")
        if on is not None:
            join.set("on", total_predicate(on, tables))
    where = select.args.get("where")
    arguments = {a.sql: total_value(a.arg) for a in core.shape.aggregates if a.arg is not None}
    return replace(
        core,
        from_=from_.copy() if from_ is not None else None,
        joins=joins,
        where=total_predicate(where.this, tables) if where is not None else None,
        keys=tuple(total_value(k) for k in core.shape.keys),
        arguments=arguments,
    )
