"""Stage 4: rewrite a checked query into the bounded core, one rule per module.

The rules run in order; each takes and returns a :class:`Core`. The final SQL is made
by sqlglot from the AST, never by pasting analyst text.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.rewrite import clamp_inputs, cross_person, l0, linf, per_person, total_forms
from proxy.rewrite.core import Core, Statistic
from proxy.shape import Shape

Rule = Callable[[Core], Core]

RULES: tuple[Rule, ...] = (
    total_forms.apply,
    clamp_inputs.apply,
    per_person.apply,
    linf.apply,
    l0.apply,
    cross_person.apply,
)


def _only_unit_equalities(on: exp.Expr | None, shape: Shape) -> bool:
    units = {(a, str(t.policy.unit).lower()) for a, t in shape.tables.items() if t.policy.unit}
    if on is None:
        return False
    for conj in on.flatten() if isinstance(on, exp.And) else [on]:
        conj = conj.unnest()
        if not (
            isinstance(conj, exp.EQ)
            and all(
                isinstance(side, exp.Column) and (side.table.lower(), side.name.lower()) in units
                for side in (conj.this, conj.expression)
            )
        ):
            return False
    return True


def _row_stable(shape: Shape) -> set[str]:
    """Tables whose matched row is the same for all of one person's rows: the FROM
    table, INNER joins, and LEFT joins on the person id alone (an extra ON condition on
    a LEFT join would split a person's rows between the match and NULL)."""
    from_ = shape.select.args["from_"].this
    stable = {from_.alias_or_name.lower()}
    for join in shape.select.args.get("joins") or []:
        side = (join.side or "").upper()
        if not side or (side == "LEFT" and _only_unit_equalities(join.args.get("on"), shape)):
            stable.add(join.this.alias_or_name.lower())
    return stable


def _one_group_per_person(shape: Shape) -> bool:
    """True when every key is a function of one-row-per-person tables joined stably, so
    each person lands in exactly one group (L0 = 1 without sampling)."""
    if not shape.keys:
        return True
    stable = _row_stable(shape)
    for key in shape.keys:
        for col in key.find_all(exp.Column):
            alias = col.table.lower()
            info = shape.tables.get(alias)
            if (
                info is None
                or info.public
                or alias not in stable
                or not info.policy.one_row_per_person
            ):
                return False
    return True


def rewrite(shape: Shape, *, max_rows: int, max_groups: int, bounding: bool = True) -> Core:
    """The bounded core of a checked query. ``bounding=False`` skips the Linf and L0
    rules while the sensitivities stay as if they ran: it breaks the privacy promise and
    exists only so that empirical audits can show they detect a violation."""
    one = _one_group_per_person(shape)
    core = Core(
        shape=shape,
        max_rows=max_rows,
        max_groups=1 if one else max_groups,
        one_group_per_person=one,
        bounding=bounding,
    )
    for rule in RULES:
        core = rule(core)
    return core


__all__ = ["RULES", "Core", "Statistic", "rewrite"]
