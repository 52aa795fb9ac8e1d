"""Which rows the declared bounds change: the flag the clipping estimate counts.

Bounding changes a person's contribution in two ways: the caps cut rows (more than C in
a group, more than K groups) and the clamps move values that lie outside a column's
declared bounds onto them. The clipping estimate counts the people either changed
(proxy/rewrite/per_person.py ``raw_statistic``), so that an answer says how much
bounding moved it even when the policy's bounds, not the caps, are what bit.

The flag of a row is 1 when any clamp the core applies to its values (each marked by
proxy/rewrite/clamp_inputs.py with its :class:`DeclaredBound`) binds, else 0. It
compares the same column (or the same DOUBLE of it) with the same literals as the clamp
itself, so it adds no way for a row to fail. Per person it enters the estimate as one
more reason for the 0/1 already counted, so the estimate's sensitivity is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from proxy import shape as S
from proxy.rewrite import core as C
from proxy.rewrite.clamp_inputs import clamp_columns
from proxy.rewrite.total_forms import total_value

FLAG = "__cl"


def _declared_clamps(arguments: Iterable[exp.Expr]) -> list[exp.Case]:
    return [
        node
        for argument in arguments
        for node in argument.find_all(exp.Case)
        if node.meta.get(C.DECLARED) is not None
    ]


def clamped_flag(core: C.Core) -> tuple[exp.Expr | None, tuple[C.DeclaredBound, ...]]:
    """``CASE WHEN <a declared clamp binds> THEN 1 ELSE 0 END`` over the rows of ``r``,
    and the bounds it tests; (None, ()) when the query's aggregates clamp nothing.

    Reads the clamped arguments of the released statistics and, for MEDIAN, quantiles,
    MIN and MAX (clamped later by their own rule), the same columns clamped the same
    way; and the flag column of a derived table whose values were clamped as it was
    derived."""
    arguments = list(core.arguments.values())
    arguments += [
        clamp_columns(core, total_value(call.arg))
        for call in core.shape.aggregates
        if call.kind in S.QUANTILE_KINDS and call.arg is not None
    ]
    conditions: dict[exp.Expr, None] = {}  # in order, each condition once
    bounds: dict[C.DeclaredBound, None] = {}
    for node in _declared_clamps(arguments):
        bounds[node.meta[C.DECLARED]] = None
        for branch in node.args.get("ifs") or []:
            conditions.setdefault(branch.this, None)
    for alias, info in core.shape.tables.items():
        # A per-person subquery's table: its hidden flag marks the people whose
        # per-person values the derivation clamped (proxy/per_person_values.py).
        if info.bounded_flag is not None:
            unit = core.shape.unit
            # (named as the query names it: the person id's table is this one)
            table = unit.args["table"].copy() if unit.table.lower() == alias else alias
            flagged = exp.EQ(
                this=exp.column(info.bounded_flag.column, table=table),
                expression=exp.Literal.number(1),
            )
            conditions.setdefault(flagged, None)
            bounds.update(dict.fromkeys(info.bounded_flag.bounds))
    if not conditions:
        return None, ()
    tests = [c.copy() for c in conditions]
    test = tests[0] if len(tests) == 1 else exp.or_(*tests, copy=False)
    flag = exp.Case(
        ifs=[exp.If(this=test, true=exp.Literal.number(1))],
        default=exp.Literal.number(0),
    )
    return flag, tuple(bounds)
