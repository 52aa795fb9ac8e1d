"""Accuracy-first budgeting: closed forms, round trips, monotonicity and the cap count."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, special

from accounting.planning import (
    ABSURD_EPSILON,
    Accuracy,
    Budget,
    accuracy_for_budget,
    budget_for_accuracy,
    laplace_sum_tail,
    releases_within_cap,
)
from accounting.rdp import (
    ZERO,
    Curve,
    gaussian_curve,
    laplace_curve,
    max_rho_within,
    pure_dp_curve,
    zcdp_curve,
)

Z975 = float(special.ndtri(0.975))

# --- closed forms -------------------------------------------------------------------


def test_laplace_single_cell_closed_form():
    b = budget_for_accuracy(
        rel_error=0.1, at_count=100, confidence=0.95, sensitivity=1, mechanism="laplace"
    )
    assert isinstance(b, Budget)
    assert b.mechanism == "laplace"
    assert b.scale == pytest.approx(10 / math.log(20), rel=1e-12)
    assert b.epsilon == pytest.approx(math.log(20) / 10, rel=1e-12)
    assert b.rho is None
    assert b.curve == laplace_curve(1.0, b.scale)
    assert b.ledger_epsilon == pytest.approx(b.curve.epsilon(1e-9), rel=1e-12)
    assert not b.absurd


def test_gaussian_single_cell_closed_form():
    b = budget_for_accuracy(rel_error=0.1, at_count=100, confidence=0.95, sensitivity=1)
    sigma = 0.1 * 100 / Z975
    assert b.rho is not None
    assert b.mechanism == "gaussian"
    assert b.scale == pytest.approx(sigma, rel=1e-12)
    assert b.rho == pytest.approx(1 / (2 * sigma**2), rel=1e-12)
    assert b.curve == zcdp_curve(b.rho)
    assert b.epsilon == pytest.approx(zcdp_curve(b.rho).epsilon(1e-9), rel=1e-12)
    assert b.ledger_epsilon == b.epsilon
    # σ = 5.10213..., ρ = 0.0192073..., the figures a human can check by hand.
    assert b.scale == pytest.approx(5.102134569, rel=1e-9)


def test_gaussian_cells_and_sensitivity_scale_as_expected():
    one = budget_for_accuracy(rel_error=0.05, at_count=1000, sensitivity=1)
    many = budget_for_accuracy(rel_error=0.05, at_count=1000, sensitivity=3, cells=16)
    assert many.scale == pytest.approx(one.scale / 4, rel=1e-12)
    assert one.rho is not None
    assert many.rho == pytest.approx(one.rho * 9 * 16, rel=1e-12)


def test_laplace_two_cells_closed_form():
    # S = L1 + L2 has P(S > u·b) = e^{−u}(2 + u)/4; solve 2·that = 0.05 independently.
    u = float(optimize.brentq(lambda x: math.exp(-x) * (2 + x) / 2 - 0.05, 0.0, 50.0, xtol=1e-15))
    b = budget_for_accuracy(
        rel_error=0.1, at_count=100, sensitivity=2, mechanism="laplace", cells=2
    )
    assert b.scale == pytest.approx(10 / u, rel=1e-10)
    assert b.epsilon == pytest.approx(2 * u / 10, rel=1e-10)


def _gil_pelaez_two_sided(u: float, m: int) -> float:
    """P(|S_m| > u) for b = 1 from the characteristic function (1 + s²)^{−m}."""
    # sin(us)/s is regular at 0, so the head is a plain integral; the tail uses QAWF.
    head, _ = integrate.quad(
        lambda s: u * float(np.sinc(u * s / math.pi)) * (1 + s * s) ** (-m),
        0,
        1,
        epsabs=1e-14,
        epsrel=1e-12,
        limit=200,
    )
    tail, _ = integrate.quad(lambda s: (1 + s * s) ** (-m) / s, 1, math.inf, weight="sin", wvar=u)
    return 1 - 2 / math.pi * (head + tail)


@pytest.mark.parametrize("m", [2, 3, 7, 20, 60])
@pytest.mark.parametrize("u", [0.5, 2.0, 6.0, 15.0])
def test_laplace_sum_tail_matches_characteristic_function(m, u):
    assert laplace_sum_tail(u, m) == pytest.approx(_gil_pelaez_two_sided(u, m), rel=1e-6, abs=1e-9)


def test_laplace_sum_tail_single_and_large():
    assert laplace_sum_tail(3.0, 1) == pytest.approx(math.exp(-3.0), rel=1e-15)
    # For many cells the sum is close to N(0, 2m); the exact tail is a little heavier.
    m = 20000
    u = math.sqrt(2 * m) * Z975
    exact = laplace_sum_tail(u, m)
    assert 0.05 < exact < 0.0502


def test_laplace_quantile_is_conservative_and_tight():
    for m in (1, 2, 9, 400, 50000):
        b = budget_for_accuracy(
            rel_error=0.1,
            at_count=500,
            confidence=0.99,
            sensitivity=1,
            mechanism="laplace",
            cells=m,
        )
        u = 50.0 / b.scale
        assert laplace_sum_tail(u, m) <= 0.01 * (1 + 1e-12)  # b = t/u loses an ulp
        assert laplace_sum_tail(u * (1 - 1e-9), m) > 0.01


# --- round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
@pytest.mark.parametrize("cells", [1, 5, 300])
@pytest.mark.parametrize("confidence", [0.5, 0.95, 0.999])
def test_round_trip_budget_accuracy_budget(mechanism, cells, confidence):
    kw = dict(
        at_count=250.0,
        confidence=confidence,
        sensitivity=2.0,
        mechanism=mechanism,
        cells=cells,
        delta=1e-7,
    )
    b = budget_for_accuracy(rel_error=0.07, **kw)
    a = accuracy_for_budget(epsilon=b.epsilon, **kw)
    assert isinstance(a, Accuracy)
    assert a.confidence == confidence
    assert a.relative_error_at_count == pytest.approx(0.07, rel=1e-8)
    assert a.absolute_error == pytest.approx(0.07 * 250, rel=1e-8)
    assert a.scale == pytest.approx(b.scale, rel=1e-8)
    b2 = budget_for_accuracy(rel_error=a.relative_error_at_count, **kw)
    assert b2.epsilon == pytest.approx(b.epsilon, rel=1e-8)


def test_round_trip_via_rho():
    b = budget_for_accuracy(rel_error=0.02, at_count=1e4, sensitivity=1, cells=4)
    a = accuracy_for_budget(rho=b.rho, at_count=1e4, sensitivity=1, cells=4)
    assert a.relative_error_at_count == pytest.approx(0.02, rel=1e-12)


def test_accuracy_for_budget_gaussian_uses_ledger_calibration():
    a = accuracy_for_budget(epsilon=1.0, at_count=100, sensitivity=1, delta=1e-9)
    sigma = 1 / math.sqrt(2 * max_rho_within(1.0, 1e-9))
    assert a.scale == pytest.approx(sigma, rel=1e-12)
    assert a.absolute_error == pytest.approx(sigma * Z975, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    r1=st.floats(1e-3, 2.0),
    factor=st.floats(1.01, 10.0),
    count=st.floats(1.0, 1e6),
    q=st.floats(0.05, 0.999),
    m=st.integers(1, 200),
    mechanism=st.sampled_from(["gaussian", "laplace"]),
)
def test_tighter_error_costs_more(r1, factor, count, q, m, mechanism):
    kw = dict(at_count=count, confidence=q, sensitivity=1.0, mechanism=mechanism, cells=m)
    loose = budget_for_accuracy(rel_error=r1 * factor, **kw)
    tight = budget_for_accuracy(rel_error=r1, **kw)
    assert tight.scale < loose.scale
    assert tight.epsilon >= loose.epsilon
    assert all(t >= x for t, x in zip(tight.curve.values, loose.curve.values, strict=True))


@settings(max_examples=40, deadline=None)
@given(
    r=st.floats(1e-3, 1.0),
    q1=st.floats(0.05, 0.9),
    q2=st.floats(0.91, 0.9999),
    m=st.integers(1, 100),
    mechanism=st.sampled_from(["gaussian", "laplace"]),
)
def test_more_confidence_costs_more(r, q1, q2, m, mechanism):
    kw = dict(rel_error=r, at_count=100.0, sensitivity=1.0, mechanism=mechanism, cells=m)
    assert (
        budget_for_accuracy(confidence=q2, **kw).epsilon
        > budget_for_accuracy(confidence=q1, **kw).epsilon
    )


# --- absurd budgets and refusals ----------------------------------------------------


def test_absurd_flag():
    b = budget_for_accuracy(rel_error=0.01, at_count=10, sensitivity=1)
    assert b.epsilon > ABSURD_EPSILON
    assert b.absurd
    assert "ABSURD" in b.note
    ok = budget_for_accuracy(rel_error=0.1, at_count=1000, sensitivity=1)
    assert not ok.absurd
    assert "ABSURD" not in ok.note
    lap = budget_for_accuracy(rel_error=0.01, at_count=10, sensitivity=1, mechanism="laplace")
    assert lap.absurd and lap.epsilon == pytest.approx(100 * math.log(20) / 10, rel=1e-12)


@pytest.mark.parametrize(
    ("arg", "value"),
    [
        ("rel_error", 0.0),
        ("rel_error", -0.1),
        ("rel_error", math.nan),
        ("rel_error", math.inf),
        ("at_count", 0.0),
        ("at_count", -5.0),
        ("confidence", 0.0),
        ("confidence", 1.0),
        ("confidence", 1.5),
        ("confidence", math.nan),
        ("sensitivity", 0.0),
        ("sensitivity", -1.0),
        ("cells", 0),
        ("cells", 1.5),
        ("cells", True),
        ("delta", 0.0),
        ("delta", 1.0),
        ("mechanism", "exponential"),
    ],
)
def test_budget_refuses_nonsense(arg, value):
    kw: dict[str, object] = dict(rel_error=0.1, at_count=100.0, sensitivity=1.0)
    kw[arg] = value
    with pytest.raises(ValueError, match=arg):
        budget_for_accuracy(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(rho=0.0), "rho"),
        (dict(), "exactly one"),
        (dict(epsilon=1.0, rho=0.1), "exactly one"),
        (dict(rho=0.1, mechanism="laplace"), "rho"),
        (dict(epsilon=1.0, at_count=0.0), "at_count"),
        (dict(epsilon=1.0, cells=0), "cells"),
        (dict(epsilon=1.0, confidence=1.0), "confidence"),
    ],
)
def test_accuracy_refuses_nonsense(kw, match):
    args: dict[str, object] = dict(at_count=100.0, sensitivity=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        accuracy_for_budget(**args)  # type: ignore[arg-type]


# --- releases within a cap ------------------------------------------------------------


def _brute_force(per, cap, delta, spent=ZERO, each=0.0, extra=0.0, limit=50_000):
    total = spent
    n = 0
    while n < limit:
        total = total + per
        d_left = delta - extra - (n + 1) * each
        if d_left <= 0 or total.epsilon(d_left) > cap:
            return n
        n += 1
    raise AssertionError("brute force limit reached")


@settings(max_examples=40, deadline=None)
@given(
    sigma=st.floats(2.0, 60.0),
    cap=st.floats(0.2, 6.0),
    delta=st.sampled_from([1e-5, 1e-6, 1e-9]),
    spent_k=st.integers(0, 5),
)
def test_releases_within_cap_matches_brute_force_gaussian(sigma, cap, delta, spent_k):
    per = gaussian_curve(1.0, sigma)
    spent = gaussian_curve(1.0, 7.0) * spent_k
    assert releases_within_cap(per, cap=cap, delta=delta, spent=spent) == _brute_force(
        per, cap, delta, spent
    )


@settings(max_examples=30, deadline=None)
@given(
    b=st.floats(5.0, 80.0),
    cap=st.floats(0.2, 4.0),
    each=st.sampled_from([0.0, 1e-8, 1e-7]),
    extra=st.sampled_from([0.0, 3e-7]),
)
def test_releases_within_cap_matches_brute_force_laplace_with_delta(b, cap, each, extra):
    per = laplace_curve(1.0, b)
    got = releases_within_cap(
        per, cap=cap, delta=1e-6, delta_extra_each=each, delta_extra_spent=extra
    )
    assert got == _brute_force(per, cap, 1e-6, each=each, extra=extra)


def test_releases_within_cap_delta_runs_out():
    # Pure δ cost: 1e-6 total, 3e-7 already spent, 1e-7 each → 6 more would leave 1e-7,
    # 7 would leave 0, which is no guarantee at all.
    per = zcdp_curve(1e-12)
    n = releases_within_cap(
        per, cap=10.0, delta=1e-6, delta_extra_each=1e-7, delta_extra_spent=3e-7
    )
    assert n == 6


def test_releases_within_cap_edges():
    per = gaussian_curve(1.0, 10.0)
    # Already over the cap: nothing more fits.
    assert releases_within_cap(per, cap=1.0, delta=1e-6, spent=per * 100) == 0
    # Exactly k fit when the cap is the ε of k releases.
    k = 37
    cap = (per * k).epsilon(1e-6)
    assert releases_within_cap(per, cap=cap, delta=1e-6) == k
    assert releases_within_cap(per, cap=cap * (1 - 1e-12), delta=1e-6) == k - 1
    with pytest.raises(ValueError, match="nothing"):
        releases_within_cap(ZERO, cap=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="cap"):
        releases_within_cap(per, cap=-1.0, delta=1e-6)
    with pytest.raises(ValueError, match="delta"):
        releases_within_cap(per, cap=1.0, delta=0.0)
    # Zero at order 256, where the conversion alone is below the cap: never exhausted.
    odd = Curve((*per.values[:-1], 0.0))
    with pytest.raises(ValueError, match="without practical limit"):
        releases_within_cap(odd, cap=1.0, delta=1e-6)


def test_releases_within_cap_large_counts_are_exact():
    per = gaussian_curve(1.0, 1000.0)
    n = releases_within_cap(per, cap=1.0, delta=1e-6)
    assert (per * n).epsilon(1e-6) <= 1.0 < (per * (n + 1)).epsilon(1e-6)
    # Same ρ budget as calibrating the whole cap at once: n ≈ max_rho / ρ_each.
    assert n == math.floor(max_rho_within(1.0, 1e-6) / (1 / (2 * 1000.0**2)))


@pytest.mark.parametrize(("sigma", "at_least"), [(30.0, 5.0), (100.0, 15.0), (300.0, 100.0)])
def test_composition_beats_naive_division(sigma, at_least):
    per = gaussian_curve(1.0, sigma)
    eps_each = per.epsilon(1e-6)
    naive = math.floor(2.0 / eps_each)
    n = releases_within_cap(per, cap=2.0, delta=1e-6)
    assert n >= at_least * naive


def test_pure_dp_composition_is_at_least_basic():
    # Many small pure-DP releases: the RDP count is at least what basic composition admits.
    per = pure_dp_curve(0.05)
    n = releases_within_cap(per, cap=2.0, delta=1e-6)
    assert n >= 2.0 / 0.05


def test_accuracy_for_tiny_gaussian_epsilon_refuses():
    # Below the order grid's floor no Gaussian noise can be certified (see test_rdp).
    with pytest.raises(ValueError, match="epsilon"):
        accuracy_for_budget(epsilon=0.01, at_count=100, sensitivity=1, delta=1e-6)


@settings(max_examples=60, deadline=None)
@given(s1=st.floats(1e-3, 5.0), s2=st.floats(1e-3, 5.0))
def test_laplace_curve_superadditive_so_vector_release_uses_total_l1(s1, s2):
    # A Laplace release over several cells with L1 sensitivity Δ is charged
    # laplace_curve(Δ, b); that is an upper bound for any split of Δ across cells only if
    # the per-order divergence is superadditive in the shift (convex with f(0) = 0).
    split = laplace_curve(s1, 1.0) + laplace_curve(s2, 1.0)
    whole = laplace_curve(s1 + s2, 1.0)
    assert np.all(split.as_array() <= whole.as_array() * (1 + 1e-12) + 1e-15)
