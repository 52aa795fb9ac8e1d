"""Rewrite a checked query into the bounded core, one rule per module.

The rules run in order; each takes and returns a :class:`Core`. The final SQL is made
by sqlglot from the AST, never by pasting analyst text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from proxy.rewrite import (
    clamp_inputs,
    cross_person,
    distinct_values,
    key_join,
    l0,
    linf,
    per_person,
    quantile_histogram,
    total_forms,
)
from proxy.rewrite.core import Core, Statistic
from proxy.shape import Shape

Rule = Callable[[Core], Core]

RULES: tuple[Rule, ...] = (
    total_forms.apply,
    clamp_inputs.apply,
    per_person.apply,
    linf.apply,
    l0.apply,
    distinct_values.apply,
    quantile_histogram.apply,
    key_join.apply,
    cross_person.apply,
)


def _conjuncts(on: exp.Expr) -> list[exp.Expr]:
    return [c.unnest() for c in (on.flatten() if isinstance(on, exp.And) else [on])]


def _unit_of(side: exp.Expr, units: dict[str, str]) -> str | None:
    """The table alias whose person id ``side`` is, if it is one."""
    if isinstance(side, exp.Column) and units.get(side.table.lower()) == side.name.lower():
        return side.table.lower()
    return None


def person_constant(shape: Shape) -> set[str]:
    """Aliases of one-row-per-person tables whose joined row is the same on every row of
    one person: the anchor; a table INNER JOINed with a person-id equality; a table LEFT
    JOINed on nothing but person-id equalities with the anchor or INNER-joined tables.

    Why this holds: the checker makes every private join carry a person-id equality with
    an earlier private table, so on every row each private table's id is the anchor's
    (the row's person) or NULL. An INNER join keeps only rows where the ids are equal, so
    its one-row table gives that person's row. A LEFT join matches the person's row when
    the other side's id is never NULL; with an extra condition, or through a LEFT-joined
    table, it may match on some of a person's rows and give NULL on others.
    """
    units = {a: str(t.policy.unit).lower() for a, t in shape.tables.items() if t.policy.unit}
    anchor = shape.unit.table.lower()
    never_null = {anchor}
    constant = {anchor} if shape.tables[anchor].policy.one_row_per_person else set()
    for join in shape.select.args.get("joins") or []:
        alias = join.this.alias_or_name.lower()
        info = shape.tables.get(alias)
        on = join.args.get("on")
        if info is None or info.public or on is None:
            continue
        side = (join.side or "").upper()
        conjuncts = _conjuncts(on)
        equalities = [
            (_unit_of(c.this, units), _unit_of(c.expression, units))
            for c in conjuncts
            if isinstance(c, exp.EQ)
        ]
        linked = [b if a == alias else a for a, b in equalities if alias in (a, b) and a and b]
        if not side:
            if linked:
                never_null.add(alias)
                if info.policy.one_row_per_person:
                    constant.add(alias)
        elif (
            side == "LEFT"
            and info.policy.one_row_per_person
            and len(equalities) == len(conjuncts)
            and len(linked) == len(conjuncts)
            and all(other in never_null for other in linked)
        ):
            constant.add(alias)
    return constant


def _one_group_per_person(shape: Shape) -> bool:
    """True when every key is a function of person-constant tables (see
    :func:`person_constant`), so each person lands in one group. The core enforces it
    anyway (one row per person, see the per-person rule); this only decides that no
    sampling is needed, so that the answer is exact."""
    if not shape.keys:
        return True
    constant = person_constant(shape)
    return all(
        col.table.lower() in constant for key in shape.keys for col in key.find_all(exp.Column)
    )


def rewrite(
    shape: Shape,
    *,
    max_rows: int,
    max_groups: int,
    bounding: bool = True,
    clipping: bool = False,
    dated_keys: frozenset[int] = frozenset(),
    timed_keys: frozenset[int] = frozenset(),
    text_keys: frozenset[int] = frozenset(),
    keyed_grouping: bool = False,
) -> Core:
    """The bounded core of a checked query. ``bounding=False`` skips the Linf and L0
    rules while the sensitivities stay as if they ran: it breaks the privacy promise and
    exists only so that empirical audits can show they detect a violation.
    ``dated_keys``, ``timed_keys``: the indexes of the keys whose type is DATE, or a
    TIMESTAMP type (Core.dated_keys); ``text_keys``: of a DECIMAL type (Core.text_keys).
    ``keyed_grouping``: group first by a keyed hash (DuckDB only, rewrite/keyed_groups.py)."""
    core = initial_core(
        shape, max_rows=max_rows, max_groups=max_groups, bounding=bounding, clipping=clipping
    )
    if dated_keys or timed_keys or text_keys or keyed_grouping:
        core = replace(
            core,
            dated_keys=dated_keys,
            timed_keys=timed_keys,
            text_keys=text_keys,
            keyed_grouping=keyed_grouping,
        )
    for rule in RULES:
        core = rule(core)
    return core


def initial_core(
    shape: Shape, *, max_rows: int, max_groups: int, bounding: bool = True, clipping: bool = False
) -> Core:
    """The core before any rule ran (the per-rule fixtures start from it)."""
    one = _one_group_per_person(shape)
    return Core(
        shape=shape,
        max_rows=max_rows,
        max_groups=1 if one else max_groups,
        one_group_per_person=one,
        one_row_per_person=all(
            not t.public and t.policy.one_row_per_person for t in shape.tables.values()
        ),
        bounding=bounding,
        clipping=clipping and bounding,
    )


__all__ = ["RULES", "Core", "Statistic", "initial_core", "person_constant", "rewrite"]
