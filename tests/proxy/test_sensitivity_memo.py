"""proxy/budget.py memoises each statistic's sensitivity (issue 18): the memo must give
exactly what computing it afresh gives, keep int and float bounds apart (they are equal
as numbers but recorded differently), and refuse what afresh refuses."""

from __future__ import annotations

import pytest

from proxy import budget
from proxy.errors import DPSQLError
from proxy.rewrite import core as C

STATS = (
    C.Statistic(C.ROWS, None, column="__s0"),
    C.Statistic(C.COUNT, "x", 0.0, 100.0, column="__s1"),
    C.Statistic(C.SUM, "x", -5.0, 250000.0, integer=True, column="__s2"),
    C.Statistic(C.CENTRED_SUM, "x", 0.0, 0.5, integer=False, column="__s3"),
    C.Statistic(C.CENTRED_SQUARES, "x", 1.0, 3.0, integer=False, column="__s4"),
    C.Statistic(C.SUM, "x", 0, 7, integer=True, column="__s5"),  # int bounds
    C.Statistic(C.SUM, "x", 0.0, 7.0, integer=True, column="__s5"),  # float bounds
)


class _Caps:
    """The two fields of a core the sensitivity reads."""

    def __init__(self, max_rows: int, max_groups: int) -> None:
        self.max_rows = max_rows
        self.max_groups = max_groups


@pytest.mark.parametrize("stat", STATS)
@pytest.mark.parametrize(("max_rows", "max_groups"), [(1, 1), (5, 3), (40, 200)])
def test_memoised_sensitivity_is_the_fresh_one(
    stat: C.Statistic, max_rows: int, max_groups: int
) -> None:
    core = _Caps(max_rows, max_groups)
    fresh = budget._sensitivity_of(stat, max_rows, max_groups)
    first = budget._sensitivity(stat, core)  # type: ignore[arg-type]
    again = budget._sensitivity(stat, core)  # type: ignore[arg-type]
    assert repr(first) == repr(fresh)
    assert again is first  # served from the memo


def test_int_and_float_bounds_are_separate_entries() -> None:
    as_int, as_float = STATS[5], STATS[6]
    assert as_int == as_float  # equal as dataclasses: a plain dict would share them
    core = _Caps(2, 2)
    got_int = budget._sensitivity(as_int, core)  # type: ignore[arg-type]
    got_float = budget._sensitivity(as_float, core)  # type: ignore[arg-type]
    assert repr(got_int) == repr(budget._sensitivity_of(as_int, 2, 2))
    assert repr(got_float) == repr(budget._sensitivity_of(as_float, 2, 2))


def test_a_refused_statistic_is_refused_every_time() -> None:
    bad = C.Statistic(C.SUM, "x", 5.0, 1.0, column="__s9")  # lower above upper
    for _ in range(2):
        with pytest.raises(DPSQLError):
            budget._sensitivity(bad, _Caps(1, 1))  # type: ignore[arg-type]
