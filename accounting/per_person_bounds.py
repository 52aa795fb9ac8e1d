"""Bounds of one person's value in a per-person aggregate (issue 13 §3).

A query such as ``SELECT AVG(n) FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP
BY user_id)`` first computes one value per person, then aggregates those values across
people. The outer aggregate is an ordinary one over a table with one row per person, so
its sensitivity is the usual one for C = 1 and K = 1 once each person's value lies in a
known [lower, upper]. This module says what that interval is for each inner aggregate,
given the bounds [L, U] of its argument (from the policy's declared ranges) and the row
cap C of the inner tables (the Linf cap the same query would get without the grouping
by person).

Derivation, one inner aggregate at a time (n is the person's number of rows in the
inner query, after its WHERE):

* ``COUNT(*)``: the inner query puts each person in exactly one group (grouped by the
  person id and by columns constant for the person), so the cap on a person's rows per
  group, C, is the cap on their rows in the query: the value is min(n, C) ∈ [1, C] (a
  person has a row in the inner result only if they have at least one row). Summed over
  people, the per-person counts give the same total as ``SELECT COUNT(*)`` bounded at C,
  with the same sensitivity C.
* ``COUNT(x)``, ``COUNT(DISTINCT x)``: at most the person's rows, so [0, C].
* ``COUNT(DISTINCT <person id>)``: 1 for the person, [0, 1].
* ``SUM(x)`` with x ∈ [L, U]: C of the person's rows sum to a value in
  [C·min(L, 0), C·max(U, 0)] (a person may have fewer than C rows, hence the 0); the
  person's exact sum is clamped into that interval.
* ``AVG``, ``MIN``, ``MAX``, ``MEDIAN`` and other quantiles of x: a mean or an order
  statistic of values in [L, U] lies in [L, U].
* ``VAR_POP(x)`` ≤ (U − L)²/4 (Popoviciu's inequality); ``VAR_SAMP(x)`` = n/(n − 1) ·
  VAR_POP ≤ 2 · (U − L)²/4 for n ≥ 2 (NULL for n = 1); the standard deviations are the
  square roots: [0, (U − L)/2] and [0, (U − L)/√2].

Each value is clamped to its interval in SQL before anything else reads it, so the
interval holds whatever the data contain (and whatever the declared [L, U] claim).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum


class InnerAggregate(Enum):
    """What a per-person value aggregates over the person's rows."""

    ROWS = "rows"  # COUNT(*)
    COUNT = "count"  # COUNT(x), COUNT(DISTINCT x)
    PERSONS = "persons"  # COUNT(DISTINCT person id)
    SUM = "sum"
    MEAN = "mean"  # AVG
    ORDER = "order"  # MIN, MAX, MEDIAN, quantiles: one of the person's values (or between two)
    VAR_POP = "var_pop"
    VAR_SAMP = "var_samp"
    STDDEV_POP = "stddev_pop"
    STDDEV_SAMP = "stddev_samp"


@dataclass(frozen=True)
class ValueBounds:
    lower: float
    upper: float
    integer: bool


def value_bounds(
    kind: InnerAggregate,
    max_rows: int,
    argument: tuple[float, float] | None = None,
    integer_argument: bool = False,
) -> ValueBounds | None:
    """The interval one person's value lies in, or None when the argument has no finite
    range (the value may then be filtered on or grouped by, but an outer aggregate of it
    needs a clamp the analyst writes)."""
    if max_rows < 1:
        raise ValueError("the row cap C must be at least 1")
    if kind is InnerAggregate.ROWS:
        return ValueBounds(1.0, float(max_rows), True)
    if kind is InnerAggregate.COUNT:
        return ValueBounds(0.0, float(max_rows), True)
    if kind is InnerAggregate.PERSONS:
        return ValueBounds(0.0, 1.0, True)
    if argument is None:
        return None
    low, high = argument
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return None
    if kind is InnerAggregate.SUM:
        return ValueBounds(max_rows * min(low, 0.0), max_rows * max(high, 0.0), integer_argument)
    if kind is InnerAggregate.MEAN:
        return ValueBounds(low, high, False)
    if kind is InnerAggregate.ORDER:
        return ValueBounds(low, high, integer_argument)
    half = (high - low) / 2.0
    return {
        InnerAggregate.VAR_POP: ValueBounds(0.0, half * half, False),
        InnerAggregate.VAR_SAMP: ValueBounds(0.0, 2.0 * half * half, False),
        InnerAggregate.STDDEV_POP: ValueBounds(0.0, half, False),
        InnerAggregate.STDDEV_SAMP: ValueBounds(0.0, half * math.sqrt(2.0), False),
    }[kind]
