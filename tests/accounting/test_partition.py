"""Partition-selection thresholds against brute-force discrete tails, and Monte Carlo.

The reference tails here sum the pmf over a wide explicit support, independently of the
code under test. Statistical checks use p-value floors of 1e-7.
"""

import itertools
import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from accounting.mechanisms import (
    describe_gaussian,
    describe_laplace,
    release_gaussian,
    release_laplace,
)
from accounting.partition import (
    EXACT_SIGMA_MAX,
    Threshold,
    ThresholdError,
    gaussian_threshold,
    keep_probability,
    laplace_threshold,
    one_person_release_probability,
    per_group_delta,
)
from accounting.rdp import discrete_laplace_curve, zcdp_curve


def dg_tail(sigma: float, t: int) -> float:
    """Pr[Z >= t] for the discrete Gaussian by brute force over |x| <= 60σ + 60."""
    w = int(60 * sigma) + 60
    x = np.arange(-w, w + 1).astype(float)
    f = np.exp(-(x**2) / (2 * sigma * sigma))
    return float(f[x >= t][::-1].sum() / f.sum())


def dl_tail(scale: float, t: int) -> float:
    """Pr[Z >= t] for the discrete Laplace by brute force over |x| <= 80b + 80."""
    w = int(80 * scale) + 80
    x = np.arange(-w, w + 1)
    r = math.exp(-1.0 / scale)
    p = (1 - r) / (1 + r) * r ** np.abs(x).astype(float)
    return float(p[x >= t][::-1].sum())


def ref_tail(th: Threshold, t: int) -> float:
    return dg_tail(th.scale, t) if th.mechanism == "gaussian" else dl_tail(th.scale, t)


def check_threshold(th: Threshold, delta: float) -> None:
    k = th.max_groups
    d_p = per_group_delta(delta, k)
    p = ref_tail(th, th.tau - 1)
    # τ is the smallest integer whose one-person release probability is <= δ_p.
    assert p <= d_p * (1 + 1e-9)
    if th.tau - 2 >= 1:
        assert ref_tail(th, th.tau - 2) > d_p * (1 - 1e-9)
    assert th.delta <= delta
    assert th.delta == pytest.approx(1 - (1 - p) ** k, rel=1e-9)
    assert one_person_release_probability(th) == pytest.approx(p, rel=1e-9)


def test_per_group_delta_is_precise():
    getcontext().prec = 50
    for delta, k in [(1e-9, 4), (1e-15, 1000), (0.05, 3), (0.3, 1), (1e-300, 7)]:
        d = Decimal(delta)
        exact = 1 - ((1 - d).ln() / k).exp()
        assert per_group_delta(delta, k) == pytest.approx(float(exact), rel=1e-13)
    assert per_group_delta(0.05, 1) == 0.05


@pytest.mark.parametrize("sigma", [0.5, 1.5, 10.0, 100.0])
@pytest.mark.parametrize("k", [1, 4, 25])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 0.05])
def test_gaussian_threshold_against_brute_force(sigma, k, delta):
    th = gaussian_threshold(sigma, k, delta)
    check_threshold(th, delta)
    d_p = per_group_delta(delta, k)
    assert th.tau_continuous == pytest.approx(1 + sigma * stats.norm.isf(d_p), rel=1e-12)
    assert th.curve == zcdp_curve(math.sqrt(k) ** 2 / (2 * sigma**2))
    np.testing.assert_allclose(
        th.curve.as_array(), zcdp_curve(k / (2 * sigma**2)).as_array(), rtol=1e-15
    )
    assert (th.mechanism, th.scale, th.max_groups) == ("gaussian", sigma, k)


@pytest.mark.parametrize("epsilon", [0.05, 0.2, 1.0, 5.0])
@pytest.mark.parametrize("k", [1, 3, 20])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 0.05])
def test_laplace_threshold_against_brute_force(epsilon, k, delta):
    th = laplace_threshold(epsilon, k, delta)
    check_threshold(th, delta)
    b = k / epsilon
    d_p = per_group_delta(delta, k)
    assert th.scale == b
    assert th.tau_continuous == pytest.approx(1 + b * math.log(1 / (2 * d_p)), rel=1e-12)
    # Closed form: the smallest t = τ − 1 >= 1 with r^t/(1+r) <= δ_p.
    r = math.exp(-1 / b)
    t = 1
    while r**t / (1 + r) > d_p:
        t += 1
    assert th.tau == t + 1
    assert th.curve == discrete_laplace_curve(k, b)


def test_known_values():
    th = gaussian_threshold(10.0, 1, 0.05)
    assert (th.tau, round(th.tau_continuous, 6)) == (18, 17.448536)
    assert th.delta == pytest.approx(0.0494011552336, rel=1e-9)
    th = laplace_threshold(0.2, 1, 0.05)
    assert (th.tau, round(th.tau_continuous, 6)) == (13, 12.512925)
    # r^12/(1+r), r = e^-0.2
    assert th.delta == pytest.approx(math.exp(-2.4) / (1 + math.exp(-0.2)), rel=1e-12)


def test_thresholds_charge_what_the_mechanism_describes():
    for k in (1, 3, 10):
        g = gaussian_threshold(7.0, k, 1e-8)
        d = describe_gaussian(l2_sensitivity=math.sqrt(k), sigma=7.0, integer=True, length=50)
        assert g.curve == d.curve
        lap = laplace_threshold(0.5, k, 1e-8)
        dl = describe_laplace(l1_sensitivity=k, scale=lap.scale, integer=True, length=50)
        assert lap.curve == dl.curve


def test_keep_probability_against_brute_force():
    for th in (gaussian_threshold(3.0, 2, 1e-6), laplace_threshold(1.0, 2, 1e-6)):
        for persons in (0, 1, 2, th.tau - 1, th.tau, th.tau + 4, 3 * th.tau):
            expected = ref_tail(th, th.tau - persons)
            assert keep_probability(th, persons) == pytest.approx(expected, rel=1e-9, abs=1e-300)
        assert keep_probability(th, th.tau) > 0.5
        assert keep_probability(th, 1) == one_person_release_probability(th)
        probs = [keep_probability(th, n) for n in range(0, 3 * th.tau)]
        assert all(a <= b for a, b in itertools.pairwise(probs))


def test_large_sigma_uses_a_rigorous_upper_bound():
    sigma, k, delta = 2.0 * EXACT_SIGMA_MAX, 5, 1e-7
    th = gaussian_threshold(sigma, k, delta)
    d_p = per_group_delta(delta, k)
    exact = dg_tail(sigma, th.tau - 1)
    reported = one_person_release_probability(th)
    assert exact <= reported <= d_p
    assert reported == pytest.approx(exact, rel=(th.tau / sigma**2) * 2)
    assert th.delta <= delta
    assert abs(th.tau - th.tau_continuous) <= 2
    # Near the switch the exact path agrees with brute force.
    th_exact = gaussian_threshold(EXACT_SIGMA_MAX, k, delta)
    p = dg_tail(EXACT_SIGMA_MAX, th_exact.tau - 1)
    assert one_person_release_probability(th_exact) == pytest.approx(p, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    sigma=st.floats(0.3, 300.0),
    k=st.integers(1, 50),
    delta=st.floats(1e-14, 0.3),
)
def test_gaussian_threshold_property(sigma, k, delta):
    check_threshold(gaussian_threshold(sigma, k, delta), delta)


@settings(max_examples=40, deadline=None)
@given(epsilon=st.floats(0.01, 10.0), k=st.integers(1, 50), delta=st.floats(1e-14, 0.3))
def test_laplace_threshold_property(epsilon, k, delta):
    check_threshold(laplace_threshold(epsilon, k, delta), delta)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gaussian_threshold(0.0, 1, 1e-6), "sigma"),
        (lambda: gaussian_threshold(math.nan, 1, 1e-6), "sigma"),
        (lambda: gaussian_threshold(1.0, 0, 1e-6), "max_groups"),
        (lambda: gaussian_threshold(1.0, 1.5, 1e-6), "max_groups"),  # type: ignore[arg-type]
        (lambda: gaussian_threshold(1.0, True, 1e-6), "max_groups"),
        (lambda: gaussian_threshold(1.0, 1, 0.0), "delta"),
        (lambda: gaussian_threshold(1.0, 1, 0.5), "delta"),
        (lambda: gaussian_threshold(1.0, 1, math.nan), "delta"),
        (lambda: laplace_threshold(0.0, 1, 1e-6), "epsilon"),
        (lambda: laplace_threshold(-1.0, 1, 1e-6), "epsilon"),
        (lambda: laplace_threshold(1.0, -2, 1e-6), "max_groups"),
        (lambda: laplace_threshold(1.0, 2, 1.0), "delta"),
        (lambda: keep_probability(gaussian_threshold(1.0, 1, 1e-6), -1), "persons"),
    ],
)
def test_refusals(call, match):
    with pytest.raises(ThresholdError, match=match):
        call()


# --- Monte Carlo: the released rate of a one-person group ------------------------------


def released_rate_check(th: Threshold, delta: float, n: int) -> None:
    """Noise n one-person counts exactly as the proxy does and compare the release rate.

    Checks, each with false-alarm probability < 1e-7: the rate is not above δ_p, not
    below δ_p/2 (τ is not absurdly conservative), and matches the exact Pr[Z >= τ−1].
    With n = 100k these checks catch an off-by-one in τ or in the comparison.
    """
    d_p = per_group_delta(delta, th.max_groups)
    ones = np.ones(n, dtype=np.int64)
    if th.mechanism == "gaussian":
        noisy, _ = release_gaussian(
            ones, l2_sensitivity=math.sqrt(th.max_groups), sigma=th.scale, integer=True
        )
    else:
        noisy, _ = release_laplace(ones, l1_sensitivity=th.max_groups, scale=th.scale, integer=True)
    released = int((noisy >= th.tau).sum())
    p = one_person_release_probability(th)
    assert p <= d_p
    assert stats.binom.sf(released - 1, n, d_p) > 1e-7, "released more often than δ_p"
    assert stats.binom.cdf(released, n, 0.5 * d_p) > 1e-7, "τ is needlessly conservative"
    assert stats.binomtest(released, n, p).pvalue > 1e-7


def test_one_person_group_release_rate_gaussian():
    th = gaussian_threshold(10.0, 1, 0.05)
    released_rate_check(th, 0.05, 100_000)


def test_one_person_group_release_rate_laplace():
    th = laplace_threshold(0.2, 1, 0.05)
    released_rate_check(th, 0.05, 100_000)


def test_one_person_group_release_rate_several_groups():
    released_rate_check(gaussian_threshold(6.0, 3, 0.05), 0.05, 20_000)
    released_rate_check(laplace_threshold(0.6, 3, 0.05), 0.05, 20_000)


@pytest.mark.slow
@pytest.mark.parametrize(
    "th",
    [
        gaussian_threshold(2.5, 1, 0.05),
        gaussian_threshold(40.0, 4, 0.05),
        laplace_threshold(1.0, 1, 0.05),
        laplace_threshold(0.3, 4, 0.05),
    ],
)
def test_one_person_group_release_rate_many_draws(th):
    released_rate_check(th, 0.05, 600_000)


@settings(max_examples=200, deadline=None)
@given(
    mechanism=st.sampled_from(["gaussian", "laplace"]),
    scale=st.floats(0.3, 60.0),
    log_target=st.floats(-40.0, -0.8),
    guess=st.integers(1, 3000),
)
def test_smallest_t_from_any_guess(mechanism, scale, log_target, guess):
    # The search gallops away from the continuous guess; a guess far off on either side
    # must still give the smallest t whose tail is at most the target (a linear scan).
    from accounting.partition import _dg_log_tail, _dl_log_tail, _smallest_t

    log_tail = _dg_log_tail if mechanism == "gaussian" else _dl_log_tail
    expected = 1
    while log_tail(expected, scale) > log_target:
        expected += 1
    assert _smallest_t(mechanism, scale, log_target, guess) == expected
