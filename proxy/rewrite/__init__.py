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


def _one_group_per_person(shape: Shape) -> bool:
    """True when every key reads only a one-row-per-person table of the population."""
    if not shape.keys:
        return True
    for key in shape.keys:
        for col in key.find_all(exp.Column):
            info = shape.tables.get(col.table.lower())
            if info is None or info.public or not getattr(info.policy, "one_row_per_person", False):
                return False
    return True


def rewrite(shape: Shape, *, max_rows: int, max_groups: int) -> Core:
    one = _one_group_per_person(shape)
    core = Core(
        shape=shape,
        max_rows=max_rows,
        max_groups=1 if one else max_groups,
        one_group_per_person=one,
    )
    for rule in RULES:
        core = rule(core)
    return core


__all__ = ["RULES", "Core", "Statistic", "rewrite"]
