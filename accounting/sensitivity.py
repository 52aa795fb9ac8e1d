"""Sensitivities of the bounded aggregates, for one person.

Neighbouring databases differ by all rows of one person. After the rewrite a person
touches at most ``K = max_groups`` groups (L0) and contributes at most ``C = max_rows``
rows to each (Linf), each row's input clamped to ``[L, U]``. From those public numbers
alone this module derives how much one person can move one group's aggregate (Δ∞) and the
whole released column (Δ1 = K·Δ∞, Δ2 = √K·Δ∞). Pure arithmetic: nothing is read or drawn.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from enum import StrEnum


class SensitivityError(ValueError):
    """Bounds or contribution limits that do not describe a bounded aggregate."""


class AggregateKind(StrEnum):
    """The per-group aggregates the rewrite produces (one column of the core query)."""

    ROW_COUNT = "row_count"
    PERSON_COUNT = "person_count"
    SUM = "sum"
    CENTRED_SUM = "centred_sum"
    SUM_SQUARES = "sum_squares"
    DISTINCT_COUNT = "distinct_count"
    DISTINCT_SUM = "distinct_sum"
    DISTINCT_CENTRED_SUM = "distinct_centred_sum"
    DISTINCT_SQUARES = "distinct_squares"


@dataclass(frozen=True)
class Sensitivity:
    """How far one person can move one aggregate column.

    ``per_group`` is Δ∞ (one group's value), ``l1`` = K·Δ∞ and ``l2`` = √K·Δ∞ bound the
    change of the whole column of per-group values, in the aggregate's own units.
    """

    per_group: float
    l1: float
    l2: float
    max_groups: int
    max_rows: int


def _count(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise SensitivityError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif (
        isinstance(value, numbers.Real)
        and math.isfinite(float(value))
        and float(value).is_integer()
    ):
        n = int(float(value))
    else:
        raise SensitivityError(f"{name} must be an integer >= 1, got {value!r}")
    if n < 1:
        raise SensitivityError(f"{name} must be an integer >= 1, got {value!r}")
    return n


def _bound(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SensitivityError(f"{name} must be a finite number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise SensitivityError(f"{name} must be a finite number, got {value!r}")
    return v


def sensitivity(
    kind: AggregateKind,
    *,
    lower: float = 0,
    upper: float = 0,
    max_rows: int = 1,
    max_groups: int = 1,
) -> Sensitivity:
    """Sensitivity of one aggregate column under user-level neighbours.

    Per-group bound Δ∞ with ``C = max_rows`` and values in ``[L, U] = [lower, upper]``:

    * ROW_COUNT: C (a person's rows are capped at C per group);
    * PERSON_COUNT: 1;
    * DISTINCT_COUNT (COUNT(DISTINCT k), k not the person): C — each person keeps at
      most C distinct values of k per group, and the group's count is the number of
      distinct values among everyone's kept values; removing a person removes only the
      values nobody else kept, at most C of them (a value held by many counts once);
    * DISTINCT_SUM (SUM(DISTINCT x) over the same kept values): C·max(|L|, |U|) — the
      values removed with a person are at most C, each in [L, U];
    * DISTINCT_CENTRED_SUM (Σ (v − m) over the same kept distinct values, for
      AVG/VAR(DISTINCT x)): C·(U−L)/2 — at most C values removed, each term in
      [−(U−L)/2, (U−L)/2];
    * DISTINCT_SQUARES (Σ (v − m)² over the same kept distinct values, m = (L+U)/2, for
      VAR(DISTINCT x)): C·((U−L)/2)² — at most C values removed, each term in
      [0, ((U−L)/2)²];
    * SUM: C·max(|L|, |U|) — a person's clamped sum lies in [C·min(L,0), C·max(U,0)] and
      removing the person moves the group's sum by exactly that contribution;
    * CENTRED_SUM (values minus m = (L+U)/2, for AVG and VAR): C·(U−L)/2;
    * SUM_SQUARES of centred values: C·((U−L)/2)².

    Preconditions: L ≤ U, both finite; C and K integers ≥ 1 (the bounds are checked for
    every kind so that a bad policy never passes silently). Raises SensitivityError naming
    the argument otherwise.
    Privacy claim: if the executed query enforces the bounds above (L0, Linf, clamping),
    adding or removing one person changes one group's aggregate by at most ``per_group``,
    and the vector of all groups' aggregates by at most ``l1`` in L1 norm and ``l2`` in L2
    norm.
    """
    try:
        k = AggregateKind(kind)
    except ValueError:
        raise SensitivityError(f"kind must be an AggregateKind, got {kind!r}") from None
    lo = _bound("lower", lower)
    hi = _bound("upper", upper)
    if lo > hi:
        raise SensitivityError(f"lower must be <= upper, got lower={lo!r} > upper={hi!r}")
    c = _count("max_rows", max_rows)
    groups = _count("max_groups", max_groups)

    half_range = (hi - lo) / 2.0
    if k in (AggregateKind.ROW_COUNT, AggregateKind.DISTINCT_COUNT):
        per_group = float(c)
    elif k is AggregateKind.PERSON_COUNT:
        per_group = 1.0
    elif k in (AggregateKind.SUM, AggregateKind.DISTINCT_SUM):
        per_group = c * max(abs(lo), abs(hi))
    elif k in (AggregateKind.CENTRED_SUM, AggregateKind.DISTINCT_CENTRED_SUM):
        per_group = c * half_range
    else:
        per_group = c * half_range * half_range
    if not math.isfinite(per_group):
        raise SensitivityError("lower/upper are too large: the sensitivity overflows")
    return Sensitivity(
        per_group=per_group,
        l1=groups * per_group,
        l2=math.sqrt(groups) * per_group,
        max_groups=groups,
        max_rows=c,
    )
