"""RDP curves: published reference values, exact forms checked by brute force, properties,
and a cross-check against Google's dp_accounting (bench-only dependency)."""

from __future__ import annotations

import itertools
import math
import random
import struct

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import special

from accounting.rdp import (
    ORDERS,
    ZERO,
    Curve,
    CurveError,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    compose,
    curve_from_orders,
    discrete_laplace_curve,
    gaussian_curve,
    laplace_curve,
    max_rho_within,
    pure_dp_curve,
    rho_for_epsilon,
    zcdp_curve,
    zcdp_epsilon_closed_form,
)

ALPHA = np.asarray(ORDERS)
N = len(ORDERS)

# --- the grid ---------------------------------------------------------------------------


def test_order_grid_is_the_designed_one():
    assert N == 109
    assert ORDERS[0] == 1.1 and ORDERS[98] == 10.9
    assert ORDERS[99:] == (12.0, 14.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0)
    assert all(b > a for a, b in itertools.pairwise(ORDERS))


# --- reference values (δ = 1e-6) -----------------------------------------------------


def test_fifty_gaussians_reference_values():
    total = gaussian_curve(1.0, 10.0) * 50
    assert np.allclose(total.as_array(), zcdp_curve(0.25).as_array(), rtol=1e-14, atol=0)
    assert round(zcdp_epsilon_closed_form(0.25, 1e-6), 4) == 3.9669
    assert round(total.epsilon_textbook(1e-6), 3) == 3.967
    assert round(total.epsilon(1e-6), 5) == 3.54236
    assert round(analytic_gaussian_epsilon(math.sqrt(0.5), 1e-6), 4) == 3.3076
    # The orderings the design relies on: exact < CKS < textbook.
    assert (
        analytic_gaussian_epsilon(math.sqrt(0.5), 1e-6)
        < total.epsilon(1e-6)
        < total.epsilon_textbook(1e-6)
    )


def test_hundred_laplaces_reference_values():
    total = laplace_curve(1.0, 10.0) * 100
    eps = total.epsilon(1e-6)
    assert 4.98 <= eps <= 5.00
    assert round(eps, 4) == 4.9842
    assert eps < 100 * (1.0 / 10.0)  # basic composition: 10.0
    assert total.epsilon_textbook(1e-6) > eps


def test_analytic_gaussian_sigma_balle_wang_table():
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert round(sigma, 4) == 3.7306
    # And it is the exact inverse of the ε computation.
    assert analytic_gaussian_epsilon(1.0 / sigma, 1e-5) == pytest.approx(1.0, abs=1e-9)
    assert analytic_gaussian_sigma(1.0, 1e-5, 3.0) == pytest.approx(3 * sigma, rel=1e-10)


def test_analytic_delta_matches_textbook_formula():
    # δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ), evaluated naively where that is safe.
    mu = 0.9
    eps = analytic_gaussian_epsilon(mu, 1e-3)
    naive = special.ndtr(mu / 2 - eps / mu) - math.exp(eps) * special.ndtr(-mu / 2 - eps / mu)
    assert naive == pytest.approx(1e-3, rel=1e-8)


# --- exact curves checked against brute force -----------------------------------------


def _renyi_discrete(log_p: np.ndarray, log_q: np.ndarray) -> np.ndarray:
    """D_α(P‖Q) at every order from log-probabilities on a common support."""
    out = []
    for a in ORDERS:
        out.append(special.logsumexp(a * log_p + (1 - a) * log_q) / (a - 1))
    return np.asarray(out)


@pytest.mark.parametrize(("n", "b"), [(1, 0.7), (1, 5.0), (2, 3.0), (3, 1.5), (5, 20.0)])
def test_discrete_laplace_curve_against_direct_sum(n, b):
    # Two-sided geometric on a support wide enough that the missing mass is < e^{-400}.
    xs = np.arange(-int(400 * b) - 10, int(400 * b) + n + 10)
    log_z = math.log(math.tanh(1 / (2 * b)))  # normaliser (1 − r)/(1 + r)
    log_p = log_z - np.abs(xs) / b
    log_q = log_z - np.abs(xs - n) / b
    direct = np.maximum(_renyi_discrete(log_p, log_q), 0.0)
    # Both directions agree by symmetry; the closed form must match either.
    got = discrete_laplace_curve(n, b).as_array()
    assert np.allclose(got, np.minimum(direct, n / b), rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 3.0])
def test_pure_dp_curve_is_randomized_response(eps):
    p = math.exp(eps) / (1 + math.exp(eps))
    log_p = np.log([p, 1 - p])
    log_q = np.log([1 - p, p])
    direct = _renyi_discrete(log_p, log_q)
    assert np.allclose(pure_dp_curve(eps).as_array(), direct, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("b", [0.5, 2.0, 10.0, 100.0])
def test_discrete_laplace_at_one_unit_is_randomized_response(b):
    dl = discrete_laplace_curve(1, b).as_array()
    rr = pure_dp_curve(1 / b).as_array()
    assert np.allclose(dl, rr, rtol=1e-9, atol=1e-15)
    assert np.all(dl >= laplace_curve(1, b).as_array())


def test_discrete_laplace_approaches_continuous_from_above():
    ratio = 0.1  # n/b fixed: the same ε0
    gaps = []
    for n in (1, 2, 4, 8, 16, 64, 256):
        dl = discrete_laplace_curve(n, n / ratio).as_array()
        lap = laplace_curve(n, n / ratio).as_array()
        assert np.all(dl >= lap), n
        gaps.append(float(np.max(dl - lap)))
    assert all(g2 < g1 for g1, g2 in itertools.pairwise(gaps))
    assert gaps[-1] < 1e-7 < gaps[0]


@settings(max_examples=60, deadline=None)
@given(e0=st.floats(1e-4, 30.0))
def test_laplace_curve_below_pure_bound_and_nondecreasing(e0):
    v = laplace_curve(1.0, 1.0 / e0).as_array()
    assert np.all(v >= 0) and np.all(v <= e0)
    assert np.all(np.diff(v) >= -1e-12 * e0)  # Rényi divergence grows with the order
    assert np.all(v <= pure_dp_curve(e0).as_array() * (1 + 1e-9) + 1e-15)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), b=st.floats(0.2, 200.0))
def test_discrete_laplace_bounded_and_nondecreasing(n, b):
    v = discrete_laplace_curve(n, b).as_array()
    assert np.all(v >= 0) and np.all(v <= n / b)
    assert np.all(np.diff(v) >= -1e-12 * (n / b))
    # n = 1 is equality (randomized response); both sides carry ~1e-11 relative rounding.
    assert np.all(v <= pure_dp_curve(n / b).as_array() * (1 + 1e-9) + 1e-15)


# --- closed forms and calibration ------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(eps=st.floats(1e-4, 50.0), delta=st.floats(1e-15, 0.5))
def test_rho_for_epsilon_inverts_closed_form(eps, delta):
    assert zcdp_epsilon_closed_form(rho_for_epsilon(eps, delta), delta) == pytest.approx(
        eps, rel=1e-10
    )


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.1, 40.0), delta=st.sampled_from([1e-5, 1e-6, 1e-9, 1e-12]))
def test_max_rho_within_is_tight(eps, delta):
    rho = max_rho_within(eps, delta)
    assert rho > 0
    assert zcdp_curve(rho).epsilon(delta) <= eps
    assert zcdp_curve(rho * (1 + 1e-9)).epsilon(delta) > eps
    # CKS admits more ρ than the closed form does, as long as the closed form's best
    # order 1 + √(ln(1/δ)/ρ) lies on the grid (it stops at 256; beyond, the grid loses).
    rho_cf = rho_for_epsilon(eps, delta)
    if 1 + math.sqrt(math.log(1 / delta) / rho_cf) <= ORDERS[-1]:
        assert rho >= rho_cf


@pytest.mark.parametrize(("eps", "delta"), [(0.01, 1e-6), (0.02, 1e-6), (0.05, 1e-9)])
def test_max_rho_within_below_grid_floor_refuses(eps, delta):
    # With orders only up to 256, even a vanishing ρ converts to about
    # (ln(1/δ) − ln 256)/255 (0.0285 at δ = 1e-6): no positive ρ meets a smaller ε.
    # Returning ρ = 0 would break the claim zcdp_curve(ρ).epsilon(δ) ≤ ε and mean
    # infinite noise downstream, so the function must refuse.
    assert zcdp_curve(1e-12).epsilon(delta) > eps
    with pytest.raises(CurveError, match="epsilon"):
        max_rho_within(eps, delta)


# --- properties of curves and conversion ---------------------------------------------

curve_values = st.lists(st.floats(0.0, 50.0), min_size=N, max_size=N).map(lambda v: Curve(tuple(v)))
deltas = st.floats(1e-14, 0.5)


@settings(max_examples=80, deadline=None)
@given(a=curve_values, b=curve_values, c=curve_values)
def test_addition_commutative_and_associative(a, b, c):
    assert a + b == b + a
    left, right = ((a + b) + c).as_array(), (a + (b + c)).as_array()
    assert np.allclose(left, right, rtol=1e-14, atol=0)
    assert compose([a, b, c]).as_array() == pytest.approx(left, rel=1e-14)
    assert a + ZERO == a


@settings(max_examples=80, deadline=None)
@given(c=curve_values, delta=deltas)
def test_cks_never_above_textbook(c, delta):
    assert c.epsilon(delta) <= c.epsilon_textbook(delta)


@settings(max_examples=60, deadline=None)
@given(
    rho=st.floats(1e-6, 2.0),
    e0=st.floats(1e-3, 5.0),
    k=st.integers(0, 300),
    delta=deltas,
)
def test_more_releases_never_lower_epsilon(rho, e0, k, delta):
    for per in (zcdp_curve(rho), laplace_curve(1.0, 1.0 / e0)):
        assert (per * k).epsilon(delta) <= (per * (k + 1)).epsilon(delta)
        assert (per * k).epsilon_textbook(delta) <= (per * (k + 1)).epsilon_textbook(delta)


@settings(max_examples=60, deadline=None)
@given(c=curve_values, d1=deltas, d2=deltas)
def test_conversion_non_increasing_in_delta(c, d1, d2):
    lo, hi = min(d1, d2), max(d1, d2)
    assert c.epsilon(hi) <= c.epsilon(lo)
    assert c.epsilon_textbook(hi) <= c.epsilon_textbook(lo)


@settings(max_examples=60, deadline=None)
@given(c=curve_values, delta=deltas)
def test_best_order_attains_the_conversion(c, delta):
    a = c.best_order(delta)
    i = ORDERS.index(a)
    at = c.values[i] + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)
    assert c.epsilon(delta) == pytest.approx(max(0.0, at), rel=1e-12, abs=1e-15)


def test_scaling_is_repeated_addition():
    per = laplace_curve(1.0, 7.0)
    total = ZERO
    for _ in range(13):
        total = total + per
    assert np.allclose((per * 13).as_array(), total.as_array(), rtol=1e-14)
    assert 13 * per == per * 13
    assert per * 0 == ZERO


def test_zero_fold_composition_of_an_infinite_curve_is_zero():
    # "+inf means no guarantee"; composing such a release zero times reveals nothing.
    # 0 · inf is NaN in floats, so a naive k·v would make Curve reject its own product.
    inf_curve = Curve(tuple(math.inf for _ in ORDERS))
    assert inf_curve * 0 == ZERO
    assert (inf_curve * 3).epsilon(1e-6) == math.inf


@pytest.mark.parametrize(
    "values",
    [
        (0.0,) * (N - 1),
        (0.0,) * (N + 1),
        (),
        (*([0.1] * (N - 1)), math.nan),
        (*([0.1] * (N - 1)), -1e-9),
        (-0.5, *([0.1] * (N - 1))),
    ],
)
def test_curve_rejects_bad_values(values):
    with pytest.raises(CurveError):
        Curve(values)


@pytest.mark.parametrize("k", [1.5, 2.0, -1, True, "3", None, np.float64(2.0)])
def test_scaling_refuses_non_integers(k):
    with pytest.raises(CurveError):
        _ = zcdp_curve(0.1) * k


def test_curve_from_orders_refuses_other_grids():
    vals = zcdp_curve(0.1).values
    assert curve_from_orders(list(ORDERS), list(vals)) == zcdp_curve(0.1)
    with pytest.raises(CurveError):
        curve_from_orders([*ORDERS[:-1], 512.0], list(vals))
    with pytest.raises(CurveError):
        curve_from_orders(list(ORDERS[:-1]), list(vals[:-1]))


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-9, 2.0, math.nan])
def test_conversion_refuses_bad_delta(delta):
    with pytest.raises(CurveError):
        zcdp_curve(0.1).epsilon(delta)
    with pytest.raises(CurveError):
        zcdp_curve(0.1).epsilon_textbook(delta)


@pytest.mark.parametrize(
    "call",
    [
        lambda: gaussian_curve(1.0, 0.0),
        lambda: gaussian_curve(-1.0, 1.0),
        lambda: laplace_curve(1.0, math.inf),
        lambda: laplace_curve(math.nan, 1.0),
        lambda: zcdp_curve(-0.1),
        lambda: discrete_laplace_curve(1.5, 2.0),  # type: ignore[arg-type]
        lambda: discrete_laplace_curve(-1, 2.0),
        lambda: pure_dp_curve(-1.0),
        lambda: analytic_gaussian_epsilon(0.0, 1e-6),
        lambda: max_rho_within(0.0, 1e-6),
    ],
)
def test_constructors_refuse_bad_inputs(call):
    with pytest.raises(CurveError):
        call()


# --- cross-check against Google's dp_accounting ------------------------------------------


def _dp_accounting():
    # Imported, not importorskip'd: the dev extra installs it, and a skip here silently
    # dropped the only independent check of the accountant (CI had no bench extra).
    import dp_accounting

    return dp_accounting


def test_dp_accounting_uses_the_cks_conversion():
    """Finding: dp_accounting's RdpAccountant converts with the improved bound of
    Asoodeh et al./Canonne–Kamath–Steinke (rdp + ln(1−1/α) − ln(δα)/(α−1)), i.e. our
    ``Curve.epsilon``, not the textbook one (it also returns 0 when δ² > 1 − e^{−ε(α)})."""
    dpa = _dp_accounting()
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(orders=list(ORDERS))
    acc.compose(dpa.GaussianDpEvent(10.0), 50)
    ours = gaussian_curve(1.0, 10.0) * 50
    assert acc.get_epsilon(1e-6) == pytest.approx(ours.epsilon(1e-6), rel=1e-9)
    assert acc.get_epsilon(1e-6) < ours.epsilon_textbook(1e-6) * 0.95


@settings(max_examples=25, deadline=None)
@given(
    gauss=st.lists(st.tuples(st.floats(0.5, 50.0), st.integers(1, 50)), max_size=4),
    lap=st.lists(st.tuples(st.floats(0.5, 50.0), st.integers(1, 50)), max_size=4),
    delta=st.sampled_from([1e-5, 1e-6, 1e-9]),
)
def test_matches_dp_accounting_rdp_accountant(gauss, lap, delta):
    assume(gauss or lap)
    dpa = _dp_accounting()
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(orders=list(ORDERS))
    ours = ZERO
    for sigma, k in gauss:
        acc.compose(dpa.GaussianDpEvent(sigma), k)
        ours = ours + gaussian_curve(1.0, sigma) * k
    for b, k in lap:
        acc.compose(dpa.LaplaceDpEvent(b), k)
        ours = ours + laplace_curve(1.0, b) * k
    assert np.allclose(ours.as_array(), acc.rdp, rtol=1e-9, atol=1e-15)
    theirs = acc.get_epsilon(delta)
    assume(theirs > 1e-3)  # below that their KL shortcut may return 0 on purpose
    assert ours.epsilon(delta) == pytest.approx(theirs, rel=1e-6)
    assert ours.epsilon_textbook(delta) >= theirs


def test_analytic_gaussian_matches_dp_accounting_pld():
    dpa = _dp_accounting()
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant()
    acc.compose(dpa.GaussianDpEvent(10.0), 50)
    # PLD discretises pessimistically; agreement to 1e-4 shows both are the exact value.
    assert analytic_gaussian_epsilon(math.sqrt(0.5), 1e-6) == pytest.approx(
        acc.get_epsilon(1e-6), rel=1e-4
    )


def test_zcdp_curve_has_the_bits_of_the_per_order_products() -> None:
    """Issue 18: the curve is built as one numpy product; every value must be the bits
    of ``rho * alpha`` in Python (the ledger hashes and stores them), overflow included."""
    rng = random.Random(18)
    rhos = [0.0, 5e-324, 1e-300, 1e300, 7e305, 1.7e308]
    rhos += [rng.random() * 10 ** rng.randint(-20, 8) for _ in range(2000)]
    for rho in rhos:
        built = zcdp_curve(rho)
        by_hand = Curve(tuple(rho * a for a in ORDERS))
        assert [struct.pack("<d", v) for v in built.values] == [
            struct.pack("<d", v) for v in by_hand.values
        ], rho
        assert all(type(v) is float for v in built.values)
        assert built == by_hand and hash(built) == hash(by_hand)


def test_pure_dp_curve_at_a_large_epsilon() -> None:
    """math.exp(ε) overflowed past ε ≈ 709 (a quantile at ε = 2,000 raised OverflowError)."""
    from accounting.rdp import pure_dp_curve

    for epsilon in (700.0, 2000.0, 10000.0):
        values = pure_dp_curve(epsilon).values
        assert all(0.0 <= v <= epsilon for v in values)
        assert values[-1] > 0.99 * epsilon  # randomized response: ε(α) → ε as α grows
    small, large = pure_dp_curve(5.0).values, pure_dp_curve(2000.0).values
    assert all(a <= b for a, b in zip(small, large, strict=True))
