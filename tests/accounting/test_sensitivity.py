import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounting.sensitivity import AggregateKind, Sensitivity, SensitivityError, sensitivity

K_ = AggregateKind


@pytest.mark.parametrize(
    ("kind", "lower", "upper", "rows", "groups", "expected"),
    [
        (K_.ROW_COUNT, 0, 0, 10, 4, Sensitivity(10.0, 40.0, 20.0, 4, 10)),
        (K_.ROW_COUNT, 0, 0, 1, 1, Sensitivity(1.0, 1.0, 1.0, 1, 1)),
        (K_.PERSON_COUNT, 0, 0, 10, 4, Sensitivity(1.0, 4.0, 2.0, 4, 10)),
        (K_.SUM, 0, 4000, 10, 4, Sensitivity(40000.0, 160000.0, 80000.0, 4, 10)),
        (K_.SUM, -5, 3, 2, 1, Sensitivity(10.0, 10.0, 10.0, 1, 2)),
        (K_.SUM, 2, 7, 3, 1, Sensitivity(21.0, 21.0, 21.0, 1, 3)),
        (K_.SUM, -7, -2, 3, 9, Sensitivity(21.0, 189.0, 63.0, 9, 3)),
        (K_.CENTRED_SUM, 18, 100, 1, 1, Sensitivity(41.0, 41.0, 41.0, 1, 1)),
        (K_.CENTRED_SUM, 18, 100, 1, 9, Sensitivity(41.0, 369.0, 123.0, 9, 1)),
        (K_.CENTRED_SUM, -1, 1, 4, 1, Sensitivity(4.0, 4.0, 4.0, 1, 4)),
        (K_.SUM_SQUARES, 18, 100, 2, 1, Sensitivity(3362.0, 3362.0, 3362.0, 1, 2)),
        (K_.SUM_SQUARES, 0, 1, 1, 4, Sensitivity(0.25, 1.0, 0.5, 4, 1)),
        (K_.SUM, 3, 3, 1, 1, Sensitivity(3.0, 3.0, 3.0, 1, 1)),
        (K_.DISTINCT_COUNT, 0, 0, 3, 4, Sensitivity(3.0, 12.0, 6.0, 4, 3)),
        (K_.DISTINCT_SUM, -5, 3, 2, 1, Sensitivity(10.0, 10.0, 10.0, 1, 2)),
        (K_.DISTINCT_SQUARES, 18, 100, 2, 4, Sensitivity(3362.0, 13448.0, 6724.0, 4, 2)),
        (K_.DISTINCT_CENTRED_SUM, 18, 100, 2, 1, Sensitivity(82.0, 82.0, 82.0, 1, 2)),
        (K_.CENTRED_SUM, 3, 3, 5, 2, Sensitivity(0.0, 0.0, 0.0, 2, 5)),
    ],
)
def test_sensitivity_table(kind, lower, upper, rows, groups, expected):
    got = sensitivity(kind, lower=lower, upper=upper, max_rows=rows, max_groups=groups)
    assert got == expected


def test_kind_may_be_given_as_its_value():
    assert sensitivity("sum", lower=0, upper=2, max_rows=3) == sensitivity(  # type: ignore[arg-type]
        K_.SUM, lower=0, upper=2, max_rows=3
    )
    assert K_.SUM == "sum"


def test_integral_floats_are_accepted_as_counts():
    assert sensitivity(K_.ROW_COUNT, max_rows=3.0, max_groups=4.0).l1 == 12.0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"lower": 5, "upper": 1}, "lower"),
        ({"lower": math.nan, "upper": 1}, "lower"),
        ({"lower": 0, "upper": math.inf}, "upper"),
        ({"lower": -math.inf, "upper": 0}, "lower"),
        ({"lower": "0", "upper": 1}, "lower"),
        ({"max_rows": 0}, "max_rows"),
        ({"max_rows": -3}, "max_rows"),
        ({"max_rows": 1.5}, "max_rows"),
        ({"max_rows": True}, "max_rows"),
        ({"max_rows": math.nan}, "max_rows"),
        ({"max_groups": 0}, "max_groups"),
        ({"max_groups": 2.5}, "max_groups"),
        ({"max_groups": False}, "max_groups"),
        ({"max_groups": "3"}, "max_groups"),
    ],
)
@pytest.mark.parametrize("kind", list(K_))
def test_refusals_name_the_argument(kind, kwargs, names):
    with pytest.raises(SensitivityError, match=names):
        sensitivity(kind, **kwargs)


@pytest.mark.parametrize(
    ("kind", "lower", "upper", "rows"),
    [
        (K_.CENTRED_SUM, -1e308, 1e308, 1),
        (K_.SUM_SQUARES, -1e200, 1e200, 1),
        (K_.SUM, 0, 1e308, 10),
    ],
)
def test_overflowing_bounds_are_refused(kind, lower, upper, rows):
    with pytest.raises(SensitivityError, match="lower/upper"):
        sensitivity(kind, lower=lower, upper=upper, max_rows=rows)


def test_unknown_kind_is_refused():
    with pytest.raises(SensitivityError, match="kind"):
        sensitivity("median")  # type: ignore[arg-type]


def test_error_is_a_value_error():
    assert issubclass(SensitivityError, ValueError)


bounds = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(a=bounds, b=bounds, rows=st.integers(1, 50), groups=st.integers(1, 50))
def test_bounds_match_extreme_contributions(a, b, rows, groups):
    lo, hi = min(a, b), max(a, b)
    # A person's contribution to one group is a sum of at most C clamped values; its
    # extremes are C copies of one bound (or nothing, i.e. 0).
    s = sensitivity(K_.SUM, lower=lo, upper=hi, max_rows=rows, max_groups=groups)
    assert s.per_group == max(abs(rows * lo), abs(rows * hi), 0.0)
    mid = (lo + hi) / 2.0
    c = sensitivity(K_.CENTRED_SUM, lower=lo, upper=hi, max_rows=rows, max_groups=groups)
    assert c.per_group == pytest.approx(max(abs(rows * (lo - mid)), abs(rows * (hi - mid))))
    q = sensitivity(K_.SUM_SQUARES, lower=lo, upper=hi, max_rows=rows, max_groups=groups)
    assert q.per_group == pytest.approx(rows * max((lo - mid) ** 2, (hi - mid) ** 2))
    for x in (s, c, q):
        assert x.l1 == groups * x.per_group
        assert x.l2 == pytest.approx(math.sqrt(groups) * x.per_group, rel=1e-15)
        assert x.l2 <= x.l1 * (1 + 1e-15)
