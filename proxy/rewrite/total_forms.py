"""Rule: partial expressions become total, so no row can make the query fail.

A query whose success depended on a private value would leak it through the error.
CAST becomes TRY_CAST; division, modulo and arithmetic that could overflow are wrapped
in TRY(...), which yields NULL instead of raising.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from proxy.rewrite.core import Core

_PARTIAL = (
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Pow,
    exp.Neg,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.DateAdd,
    exp.DateSub,
    exp.Exp,
)


def _total_node(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
        return exp.TryCast(this=node.this, to=node.to)
    if (
        isinstance(node, _PARTIAL)
        and any(isinstance(c, exp.Column) for c in node.find_all(exp.Column))
        and node.find_ancestor(exp.Try) is None
    ):
        return exp.Try(this=node)
    return node


def make_total(expression: exp.Expr) -> exp.Expr:
    return expression.copy().transform(_total_node, copy=False)


def apply(core: Core) -> Core:
    select = core.shape.select
    from_ = select.args.get("from_") or select.args.get("from")
    joins = tuple(j.copy() for j in select.args.get("joins") or [])
    for join in joins:
        on = join.args.get("on")
        if on is not None:
            join.set("on", make_total(on))
    where = select.args.get("where")
    arguments = {a.sql: make_total(a.arg) for a in core.shape.aggregates if a.arg is not None}
    return replace(
        core,
        from_=from_.copy() if from_ is not None else None,
        joins=joins,
        where=make_total(where.this) if where is not None else None,
        keys=tuple(make_total(k) for k in core.shape.keys),
        arguments=arguments,
    )
