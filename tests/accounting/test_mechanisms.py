"""Mechanisms: exact descriptors, refusals, and statistical checks of the samplers.

OpenDP's samplers cannot be seeded, so every statistical check uses fixed tolerances whose
false-alarm probability is below 1e-6 (6 standard errors, or p-value floors of 1e-7).
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from accounting import mechanisms as mech
from accounting.mechanisms import (
    GRID_BITS,
    MechanismError,
    NoiseDescriptor,
    describe_gaussian,
    describe_laplace,
    gaussian_sigma_for_rho,
    grid_for_scale,
    laplace_scale_for_epsilon,
    release_gaussian,
    release_laplace,
    secret_seed,
)
from accounting.rdp import (
    ORDERS,
    discrete_laplace_curve,
    gaussian_curve,
    laplace_curve,
    pure_dp_curve,
    zcdp_curve,
)

ROOT = Path(__file__).resolve().parents[2]


# --- reference distributions, computed independently of the code under test -----------


def dg_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    wide = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * sigma * sigma)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma * sigma)) / norm


def dl_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    r = math.exp(-1.0 / scale)
    return (1 - r) / (1 + r) * r ** np.abs(support).astype(float)


def moments(pmf, scale: float) -> tuple[float, float]:
    """Variance and fourth central moment of a symmetric integer distribution."""
    x = np.arange(-int(80 * scale) - 80, int(80 * scale) + 81)
    p = pmf(scale, x)
    return float((p * x**2).sum()), float((p * x.astype(float) ** 4).sum())


def check_mean_and_variance(noise: np.ndarray, var: float, mu4: float) -> None:
    n = noise.size
    assert abs(noise.mean()) <= 6 * math.sqrt(var / n)
    # Standard error of the sample variance: sqrt((μ4 − σ⁴)/n).
    assert abs(noise.var() - var) <= 6 * math.sqrt((mu4 - var * var) / n)


def chi_square_p(noise: np.ndarray, pmf, scale: float) -> float:
    """Goodness of fit on bins -h..h, both tails pooled, h as large as keeps every
    expected count >= 5."""
    n = noise.size
    for half in range(int(20 * scale) + 20, 0, -1):
        p = pmf(scale, np.arange(-half, half + 1))
        tail = (1.0 - p.sum()) / 2.0
        expected = np.concatenate([[tail], p, [tail]]) * n
        if expected.min() >= 5:
            break
    assert half >= 2
    clipped = np.clip(noise, -half - 1, half + 1)
    observed = np.array([(clipped == v).sum() for v in range(-half - 1, half + 2)])
    return float(stats.chisquare(observed, expected * (n / expected.sum())).pvalue)


# --- calibration helpers ---------------------------------------------------------------


def test_sigma_for_rho_and_scale_for_epsilon():
    assert gaussian_sigma_for_rho(2.0, 0.125) == 4.0
    assert gaussian_sigma_for_rho(1.0, 0.5) == 1.0
    assert laplace_scale_for_epsilon(3.0, 1.5) == 2.0
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(MechanismError):
            gaussian_sigma_for_rho(1.0, bad)
        with pytest.raises(MechanismError):
            laplace_scale_for_epsilon(bad, 1.0)


def test_secret_seed_is_63_bits_and_fresh():
    seeds = {secret_seed() for _ in range(64)}
    assert all(0 <= s < 2**63 for s in seeds)
    assert len(seeds) == 64  # a collision has probability < 2^-50
    assert max(seeds) >= 2**55  # all below has probability 2^-512


# --- descriptors: the exact cost ---------------------------------------------------------


def test_integer_gaussian_curve_is_exact_rho():
    d = describe_gaussian(l2_sensitivity=2.0, sigma=4.0, integer=True, length=5)
    assert d.curve == zcdp_curve(2.0**2 / (2 * 16.0))
    assert d.curve.values[0] == pytest.approx(0.125 * ORDERS[0], rel=1e-15)
    assert (d.mechanism, d.scale, d.grid, d.l2_sensitivity) == ("gaussian", 4.0, 1.0, 2.0)
    assert d.half_width_95 == pytest.approx(1.959964 * 4.0, rel=1e-6)


def test_integer_laplace_curve_is_the_discrete_curve_not_the_continuous_one():
    d = describe_laplace(l1_sensitivity=1.0, scale=1.5, integer=True, length=3)
    assert d.curve == discrete_laplace_curve(1, 1.5)
    # At Δ = 1 the discrete Laplace is randomized response: the largest ε0-DP curve.
    np.testing.assert_allclose(d.curve.as_array(), pure_dp_curve(1 / 1.5).as_array(), rtol=1e-9)
    assert np.all(d.curve.as_array() > laplace_curve(1.0, 1.5).as_array())
    # A fractional sensitivity is rounded up: integer neighbours differ by whole units.
    d2 = describe_laplace(l1_sensitivity=2.5, scale=1.5, integer=True, length=3)
    assert d2.curve == discrete_laplace_curve(3, 1.5)


def test_grid_is_a_power_of_two_well_below_the_scale():
    for scale in (0.37, 1.0, 3.0, 4.0, 1e-6, 12345.678, 2.0**40):
        g = grid_for_scale(scale)
        mantissa, _ = math.frexp(g)
        assert mantissa == 0.5  # a power of two
        assert 2.0**GRID_BITS <= scale / g < 2.0 ** (GRID_BITS + 1)
    assert grid_for_scale(4.0) == 2.0 ** (2 - GRID_BITS)
    assert grid_for_scale(3.999) == 2.0 ** (1 - GRID_BITS)


def test_float_gaussian_curve_includes_the_rounding_slack():
    d2, sigma, m = 3.0, 5.0, 4
    d = describe_gaussian(
        l2_sensitivity=d2, sigma=sigma, integer=False, length=100, changed_coordinates=m
    )
    g = 2.0 ** (2 - GRID_BITS)
    assert d.grid == g
    assert d.curve == gaussian_curve(d2 / g + math.sqrt(m), sigma / g)
    rho = (d2 + math.sqrt(m) * g) ** 2 / (2 * sigma**2)
    assert d.curve.values[0] / ORDERS[0] == pytest.approx(rho, rel=1e-12)
    no_slack = gaussian_curve(d2, sigma)
    assert np.all(d.curve.as_array() > no_slack.as_array())
    # By default every coordinate may change: m = length.
    dflt = describe_gaussian(l2_sensitivity=d2, sigma=sigma, integer=False, length=100)
    assert dflt.curve == gaussian_curve(d2 / g + 10.0, sigma / g)
    assert np.all(dflt.curve.as_array() > d.curve.as_array())


def test_float_laplace_curve_includes_the_rounding_slack():
    d1, b, m = 2.5, 3.0, 3
    d = describe_laplace(l1_sensitivity=d1, scale=b, integer=False, length=7, changed_coordinates=m)
    g = 2.0 ** (1 - GRID_BITS)
    assert d.grid == g
    assert d.curve == discrete_laplace_curve(math.ceil(d1 / g) + m, b / g)
    assert np.all(d.curve.as_array() > discrete_laplace_curve(math.ceil(d1 / g), b / g).as_array())
    assert d.half_width_95 == pytest.approx(b * math.log(20.0), rel=1e-15)


def test_cost_depends_only_on_public_parameters():
    a = describe_gaussian(
        l2_sensitivity=1.0, sigma=2.0, integer=False, length=3, changed_coordinates=2
    )
    b = describe_gaussian(
        l2_sensitivity=1.0, sigma=2.0, integer=False, length=3000, changed_coordinates=2
    )
    assert a.curve == b.curve and a.grid == b.grid


def test_opendp_privacy_map_agrees_with_the_curve():
    # OpenDP's own map of the measurement we build, at the distance we claim, gives the
    # same ρ (Gaussian) and the same pure ε that bounds our discrete Laplace curve.
    d = describe_gaussian(l2_sensitivity=3.0, sigma=5.0, integer=False, length=4)
    units = 3.0 / d.grid + 2.0
    rho_opendp = mech._measurement("gaussian", d.scale / d.grid).map(units)
    assert rho_opendp == pytest.approx(d.curve.values[0] / ORDERS[0], rel=1e-9)
    di = describe_gaussian(l2_sensitivity=2.0, sigma=4.0, integer=True, length=4)
    assert mech._measurement("gaussian", 4.0).map(2.0) == pytest.approx(0.125, rel=1e-12)
    assert di.curve == zcdp_curve(0.125)
    dl = describe_laplace(l1_sensitivity=3.0, scale=1.5, integer=True, length=4)
    eps_opendp = mech._measurement("laplace", 1.5).map(3)
    assert eps_opendp == pytest.approx(2.0, rel=1e-12)
    assert max(dl.curve.values) <= eps_opendp


def test_exact_discrete_laplace_half_width():
    for b in (0.3, 1.0, 1.5, 4.0, 25.0):
        d = describe_laplace(l1_sensitivity=1, scale=b, integer=True, length=1)
        h = int(d.half_width_95)
        x = np.arange(-h, h + 1)
        assert dl_pmf(b, x).sum() >= 0.95
        assert h == 0 or dl_pmf(b, np.arange(-h + 1, h)).sum() < 0.95
    big = describe_laplace(l1_sensitivity=1, scale=1e6, integer=True, length=1)
    assert big.half_width_95 == pytest.approx(1e6 * math.log(20.0), rel=1e-5)


def test_refusals():
    with pytest.raises(MechanismError, match="integer"):
        release_gaussian([1.5, 2.0], l2_sensitivity=1, sigma=1, integer=True)
    with pytest.raises(MechanismError, match="finite"):
        release_laplace([1.0, math.nan], l1_sensitivity=1, scale=1, integer=False)
    with pytest.raises(MechanismError, match="finite"):
        release_gaussian([math.inf], l2_sensitivity=1, sigma=1, integer=True)
    with pytest.raises(MechanismError, match="one-dimensional"):
        release_gaussian([[1, 2]], l2_sensitivity=1, sigma=1, integer=True)  # type: ignore[list-item]
    with pytest.raises(MechanismError, match="numbers"):
        release_gaussian(["a"], l2_sensitivity=1, sigma=1, integer=False)  # type: ignore[list-item]
    with pytest.raises(MechanismError, match="sigma"):
        release_gaussian([1], l2_sensitivity=1, sigma=0, integer=True)
    with pytest.raises(MechanismError, match="sigma"):
        describe_gaussian(l2_sensitivity=1, sigma=1e-300, integer=False, length=1)
    with pytest.raises(MechanismError, match="l2_sensitivity"):
        describe_gaussian(l2_sensitivity=-1, sigma=1, integer=True, length=1)
    with pytest.raises(MechanismError, match="l1_sensitivity"):
        describe_laplace(l1_sensitivity=math.nan, scale=1, integer=True, length=1)
    with pytest.raises(MechanismError, match="changed_coordinates"):
        release_laplace([1], l1_sensitivity=1, scale=1, integer=True, changed_coordinates=0)
    with pytest.raises(MechanismError, match="length"):
        describe_laplace(l1_sensitivity=1, scale=1, integer=True, length=-1)


# --- releases ----------------------------------------------------------------------------


@pytest.mark.parametrize("integer", [True, False])
def test_release_returns_the_described_descriptor(integer):
    values = [3, 1, 4, 1, 5]
    out, d = release_gaussian(
        values, l2_sensitivity=2.0, sigma=1.7, integer=integer, changed_coordinates=2
    )
    assert d == describe_gaussian(
        l2_sensitivity=2.0, sigma=1.7, integer=integer, length=5, changed_coordinates=2
    )
    assert isinstance(d, NoiseDescriptor) and out.shape == (5,)
    out, d = release_laplace(np.array(values), l1_sensitivity=2.0, scale=1.7, integer=integer)
    assert d == describe_laplace(l1_sensitivity=2.0, scale=1.7, integer=integer, length=5)
    assert out.dtype == (np.int64 if integer else np.float64)


def test_empty_column():
    out, d = release_gaussian([], l2_sensitivity=1, sigma=1, integer=True, changed_coordinates=1)
    assert out.size == 0 and d.curve == zcdp_curve(0.5)


@pytest.mark.parametrize("release", [release_gaussian, release_laplace])
def test_float_releases_land_on_the_grid(release):
    values = np.array([1 / 3, -2.718281828, 0.0, 1e6 + 0.1, -7.25] * 200)
    kw = (
        {"l2_sensitivity": 1.0, "sigma": 0.37}
        if release is release_gaussian
        else {"l1_sensitivity": 1.0, "scale": 0.37}
    )
    out, d = release(values, integer=False, **kw)
    assert d.grid == 2.0 ** (-2 - GRID_BITS)
    units = out / d.grid
    assert np.all(units == np.round(units))
    assert np.all(np.isfinite(out))
    # And the noise is really there (all 1000 equal to the rounded input: p < 1e-300).
    assert np.any(np.abs(out - values) > d.grid)


def test_float_values_are_rounded_by_us_not_truncated():
    # With a huge scale the grid is coarse (2^-4 at σ = 2^20): inputs go to the nearest
    # multiple, so a value of k + 0.4 grid units is recorded as k (ties to even).
    g = grid_for_scale(2.0**20)
    assert g == 2.0 ** (20 - GRID_BITS)
    units = mech._to_units(np.array([5.4 * g, -5.6 * g, 2.5 * g]), integer=False, grid=g)
    assert units.tolist() == [5, -6, 2]


def test_huge_values_are_clamped_not_wrapped():
    units = mech._to_units(np.array([2.0**70, -(2.0**70)]), integer=True, grid=1.0)
    assert units.tolist() == [mech.MAX_UNITS, -mech.MAX_UNITS]
    units = mech._to_units(np.array([2**64 - 1], dtype=np.uint64), integer=True, grid=1.0)
    assert units.tolist() == [mech.MAX_UNITS]
    out, _ = release_gaussian([1e300], l2_sensitivity=1, sigma=1.0, integer=False)
    assert out[0] == pytest.approx(mech.MAX_UNITS * grid_for_scale(1.0), abs=30.0)  # 30σ


def test_integer_columns_accept_integral_floats_and_ints():
    out, _ = release_laplace(np.array([2.0, 5.0]), l1_sensitivity=1, scale=0.01, integer=True)
    assert out.dtype == np.int64
    # b = 0.01: Pr[noise != 0] = 2r/(1+r) with r = e^-100, so this is deterministic.
    assert out.tolist() == [2, 5]


# --- the samplers' distributions -----------------------------------------------------------


N_CI = 20_000


def test_discrete_gaussian_moments_and_pmf():
    sigma = 1.5
    out, _ = release_gaussian(
        np.full(N_CI, 7, dtype=np.int64), l2_sensitivity=1, sigma=sigma, integer=True
    )
    noise = out - 7
    var, mu4 = moments(dg_pmf, sigma)
    check_mean_and_variance(noise, var, mu4)
    assert chi_square_p(noise, dg_pmf, sigma) > 1e-6
    # The check has power: a 13% wrong σ is rejected (typical p-value ~1e-90).
    assert chi_square_p(noise, dg_pmf, 1.7) < 1e-6


def test_a_reused_measurement_draws_afresh_for_every_short_release():
    """Issue 18: each (mechanism, scale) builds its OpenDP measurement once and every
    release invokes it again, short columns crossing as a Python list (mechanisms._draw).
    Many two-value releases through one kept measurement: the draws have the discrete
    Gaussian's distribution, and are independent across the two coordinates of a
    release and across consecutive releases (each correlation about N(0, 1/n); 6
    standard errors), never the same pair twice in a row."""
    sigma, n = 2.5, 4000
    mech._measurement.cache_clear()
    values = np.array([7, -3], dtype=np.int64)
    noise = np.array(
        [
            release_gaussian(values, l2_sensitivity=1, sigma=sigma, integer=True)[0] - values
            for _ in range(n)
        ]
    )
    info = mech._measurement.cache_info()
    assert info.currsize == 1 and info.misses == 1 and info.hits == n - 1  # built once
    assert noise.dtype == np.int64
    var, mu4 = moments(dg_pmf, sigma)
    check_mean_and_variance(noise.ravel(), var, mu4)
    assert chi_square_p(noise.ravel(), dg_pmf, sigma) > 1e-6
    tol = 6 / math.sqrt(n)
    assert abs(np.corrcoef(noise[:, 0], noise[:, 1])[0, 1]) < tol
    assert abs(np.corrcoef(noise[:-1, 0], noise[1:, 0])[0, 1]) < tol
    assert abs(np.corrcoef(noise[:-1, 1], noise[1:, 0])[0, 1]) < tol
    # A release repeating the previous pair: probability (Σ p²)² when independent.
    support = np.arange(-40, 41)
    q = float((dg_pmf(sigma, support) ** 2).sum()) ** 2
    repeats = np.mean(np.all(noise[:-1] == noise[1:], axis=1))
    assert abs(repeats - q) < 6 * math.sqrt(q * (1 - q) / (n - 1))


def _recording_threads(monkeypatch) -> list[tuple[str, int]]:
    """Each OpenDP call of mechanisms._draw as (thread name, values drawn)."""
    import threading

    calls: list[tuple[str, int]] = []
    original = mech._invoke

    def recording(meas, units):
        calls.append((threading.current_thread().name, int(units.size)))
        return original(meas, units)

    monkeypatch.setattr(mech, "_invoke", recording)
    return calls


def test_a_long_column_is_drawn_in_two_halves_on_two_threads(monkeypatch):
    """A column of _SPLIT_AT values or more is drawn in two OpenDP calls at once, the
    first half on the helper thread: each value keeps its place (values 1000 apart, noise
    far smaller), the noise has the discrete Gaussian's distribution, and the halves are
    independent of each other (correlation about N(0, 1/n); 6 standard errors)."""
    monkeypatch.setattr(mech, "_CORES", 2)
    calls = _recording_threads(monkeypatch)
    sigma, n = 1.5, N_CI
    values = np.arange(n, dtype=np.int64) * 1000
    out, _ = release_gaussian(values, l2_sensitivity=1, sigma=sigma, integer=True)
    noise = out - values
    assert np.all(np.abs(noise) < 100)  # every value noised in its own place
    assert sorted(size for _, size in calls) == [n // 2, n - n // 2]
    assert {name.startswith("dpsql-noise") for name, _ in calls} == {True, False}
    var, mu4 = moments(dg_pmf, sigma)
    check_mean_and_variance(noise, var, mu4)
    assert chi_square_p(noise, dg_pmf, sigma) > 1e-6
    half = n // 2
    assert abs(np.corrcoef(noise[:half], noise[half:])[0, 1]) < 6 / math.sqrt(half)
    again, _ = release_gaussian(values, l2_sensitivity=1, sigma=sigma, integer=True)
    assert abs(np.corrcoef(noise, again - values)[0, 1]) < 6 / math.sqrt(n)


def test_a_long_column_is_drawn_whole_when_the_helper_is_busy_or_short(monkeypatch):
    monkeypatch.setattr(mech, "_CORES", 2)
    calls = _recording_threads(monkeypatch)
    values = np.zeros(mech._SPLIT_AT, dtype=np.int64)
    with mech._helper_free:  # another release is using the helper
        release_gaussian(values, l2_sensitivity=1, sigma=2.0, integer=True)
    release_gaussian(values[:-1], l2_sensitivity=1, sigma=2.0, integer=True)
    monkeypatch.setattr(mech, "_CORES", 1)
    release_gaussian(values, l2_sensitivity=1, sigma=2.0, integer=True)
    assert [size for _, size in calls] == [mech._SPLIT_AT, mech._SPLIT_AT - 1, mech._SPLIT_AT]
    assert not any(name.startswith("dpsql-noise") for name, _ in calls)


def test_discrete_laplace_moments_and_pmf():
    scale = 1.5
    out, _ = release_laplace(np.full(N_CI, -3), l1_sensitivity=1, scale=scale, integer=True)
    noise = out + 3
    r = math.exp(-1 / scale)
    var, mu4 = moments(dl_pmf, scale)
    assert var == pytest.approx(2 * r / (1 - r) ** 2, rel=1e-12)
    check_mean_and_variance(noise, var, mu4)
    assert chi_square_p(noise, dl_pmf, scale) > 1e-6
    assert chi_square_p(noise, dl_pmf, 1.8) < 1e-6  # power: typical p-value ~1e-90


@pytest.mark.parametrize("sigma", [0.37, 1234.5])
def test_float_gaussian_moments(sigma):
    values = np.linspace(-50.0, 50.0, N_CI)
    out, d = release_gaussian(values, l2_sensitivity=1, sigma=sigma, integer=False)
    noise = (out - values) / sigma
    # Rounding adds at most half a grid unit (< 2^-24 σ); the noise is Gaussian with std 1.
    check_mean_and_variance(noise, 1.0, 3.0)
    assert stats.kstest(noise, "norm").pvalue > 1e-6
    assert d.half_width_95 == pytest.approx(1.959964 * sigma, rel=1e-6)


def test_float_laplace_moments():
    scale = 2.5
    values = np.linspace(-50.0, 50.0, N_CI)
    out, _ = release_laplace(values, l1_sensitivity=1, scale=scale, integer=False)
    noise = (out - values) / scale
    check_mean_and_variance(noise, 2.0, 24.0)
    assert stats.kstest(noise, "laplace").pvalue > 1e-6


def _planned_column(values, mechanism, scale, integer, k=1):
    describe = describe_gaussian if mechanism == "gaussian" else describe_laplace
    sens = {"l2_sensitivity": 1.0} if mechanism == "gaussian" else {"l1_sensitivity": 1.0}
    width = {"sigma": scale} if mechanism == "gaussian" else {"scale": scale}
    d = describe(**sens, **width, integer=integer, length=len(values), changed_coordinates=k)
    return mech.PlannedColumn(
        np.asarray(values),
        mechanism,
        1.0,
        scale,
        integer,
        changed_coordinates=k,
        planned=d.curve,
    )


def test_columns_released_together_match_release_planned_column_by_column():
    """Same types, grid and lengths as release_planned; columns sharing a scale share one
    draw, each coordinate with its own noise (the shared columns' noise differs)."""
    columns = [
        _planned_column(np.full(N_CI, 5, dtype=np.int64), "gaussian", 1.5, True),
        _planned_column(np.full(N_CI, 5, dtype=np.int64), "gaussian", 1.5, True),
        _planned_column(np.linspace(-50.0, 50.0, N_CI), "gaussian", 0.37, False),
        _planned_column(np.full(3, -3, dtype=np.int64), "laplace", 1.5, True),
        _planned_column(np.zeros(0, dtype=np.int64), "gaussian", 1.5, True),
    ]
    out = mech.release_planned_columns(columns)
    one_by_one = [
        mech.release_planned(
            c.values,
            mechanism=c.mechanism,
            sensitivity=c.sensitivity,
            scale=c.scale,
            integer=c.integer,
            changed_coordinates=c.changed_coordinates,
            planned=c.planned,
        )
        for c in columns
    ]
    for together, alone in zip(out, one_by_one, strict=True):
        assert together.dtype == alone.dtype and together.shape == alone.shape
    d = describe_gaussian(
        l2_sensitivity=1.0, sigma=0.37, integer=False, length=N_CI, changed_coordinates=1
    )
    assert np.all(out[2] / d.grid == np.round(out[2] / d.grid))
    first, second = out[0] - 5, out[1] - 5
    assert not np.array_equal(first, second)
    var, mu4 = moments(dg_pmf, 1.5)
    for noise in (first, second):
        check_mean_and_variance(noise, var, mu4)
        assert chi_square_p(noise, dg_pmf, 1.5) > 1e-6
    # Independent coordinates: the two halves of one draw are uncorrelated.
    assert abs(np.corrcoef(first, second)[0, 1]) < 6 / math.sqrt(N_CI)
    noise = (out[2] - columns[2].values) / 0.37
    check_mean_and_variance(noise, 1.0, 3.0)


def test_columns_released_together_refuse_a_wrong_curve_before_drawing():
    good = _planned_column(np.full(4, 1, dtype=np.int64), "gaussian", 1.5, True)
    wrong = _planned_column(np.full(4, 1, dtype=np.int64), "gaussian", 2.5, True)
    wrong = mech.PlannedColumn(
        wrong.values, "gaussian", 1.0, 1.5, True, changed_coordinates=1, planned=wrong.planned
    )
    mech._measurement.cache_clear()
    with pytest.raises(MechanismError, match="different curve"):
        mech.release_planned_columns([good, wrong])
    assert mech._measurement.cache_info().currsize == 0  # nothing was drawn


def test_an_integer_and_a_float_column_at_one_unit_scale_share_a_draw_independently():
    """Review 4: a float column of scale b (grid 2^-24 here) and an integer column of
    scale b·2^24 have the same scale in grid units, so release_planned_columns draws them
    in one sampler call. Each still has its own calibrated discrete Laplace noise (the
    float one on its grid), the two are uncorrelated within the batch and with the next
    release's draw (nothing is reused across columns or releases), and the curve of each
    is the one release_planned would charge."""
    b = 1.5
    grid = grid_for_scale(b)
    assert grid == 2.0**-24
    units = b / grid
    values_f = np.linspace(-40.0, 40.0, N_CI)
    values_i = np.full(N_CI, 11, dtype=np.int64)
    columns = [
        _planned_column(values_f, "laplace", b, False, k=3),
        _planned_column(values_i, "laplace", units, True, k=3),
    ]
    mech._measurement.cache_clear()
    first = mech.release_planned_columns(columns)
    assert mech._measurement.cache_info().currsize == 1  # one scale: one sampler
    second = mech.release_planned_columns(columns)
    assert first[0].dtype == np.float64 and first[1].dtype == np.int64
    noise_f = [np.rint((out[0] - values_f) / grid) for out in (first, second)]
    noise_i = [out[1] - values_i for out in (first, second)]
    for out in (first, second):
        # on the grid: every released float is an exact multiple of g
        assert np.all(out[0] / grid == np.rint(out[0] / grid))
    # The same distribution for both columns, the discrete Laplace of scale b/g grid
    # units (2.5e7: the continuous Laplace to the KS test's eye), and against each other.
    for noise in (*noise_f, *noise_i):
        assert stats.kstest(noise / units, "laplace").pvalue > 1e-6
        check_mean_and_variance(noise / units, 2.0, 24.0)
    assert stats.ks_2samp(noise_f[0], noise_i[0]).pvalue > 1e-6
    # Independent: within one batch (float vs integer), across releases (same column),
    # and across columns of consecutive releases. Under independence each correlation
    # is about N(0, 1/n); 6 standard errors.
    tol = 6 / math.sqrt(N_CI)
    pairs = [
        (noise_f[0], noise_i[0]),
        (noise_f[0], noise_f[1]),
        (noise_i[0], noise_i[1]),
        (noise_f[1], noise_i[0]),
        # neighbouring coordinates of one column (the sampler is not a walk)
        (noise_i[0][:-1], noise_i[0][1:]),
    ]
    for a, c in pairs:
        assert abs(np.corrcoef(a, c)[0, 1]) < tol
        # and no shared draws: two continuous-like draws of ~2.5e7 units agree rarely
        assert np.mean(a == c) < 0.001
    # The charge is column by column: the same curves release_planned checks.
    for c in columns:
        d = describe_laplace(
            l1_sensitivity=1.0,
            scale=c.scale,
            integer=c.integer,
            length=N_CI,
            changed_coordinates=3,
        )
        assert d.curve == c.planned


def test_columns_released_together_check_every_curve_before_any_draw_whatever_the_order():
    """A wrong curve anywhere in the batch (first, middle, last; another scale group than
    the good columns) refuses the whole release before OpenDP is reached."""
    good = _planned_column(np.full(5, 2, dtype=np.int64), "gaussian", 1.5, True)
    other = _planned_column(np.linspace(0.0, 1.0, 5), "laplace", 0.7, False)
    bad = mech.PlannedColumn(
        good.values, "laplace", 1.0, 0.7, True, changed_coordinates=1, planned=good.planned
    )
    for batch in ([bad, good, other], [good, bad, other], [good, other, bad]):
        mech._measurement.cache_clear()
        with pytest.raises(MechanismError, match="different curve"):
            mech.release_planned_columns(batch)
        assert mech._measurement.cache_info().currsize == 0


def test_large_integer_scale_is_fine():
    sigma = 1e7
    out, _ = release_gaussian(
        np.zeros(2000, dtype=np.int64), l2_sensitivity=1, sigma=sigma, integer=True
    )
    check_mean_and_variance(out / sigma, 1.0, 3.0)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.8, 1.5, 4.0])
def test_discrete_gaussian_pmf_many_draws(sigma):
    n = 400_000
    out, _ = release_gaussian(
        np.zeros(n, dtype=np.int64), l2_sensitivity=1, sigma=sigma, integer=True
    )
    var, mu4 = moments(dg_pmf, sigma)
    check_mean_and_variance(out, var, mu4)
    assert chi_square_p(out, dg_pmf, sigma) > 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.4, 1.5, 4.0])
def test_discrete_laplace_pmf_many_draws(scale):
    n = 400_000
    out, _ = release_laplace(
        np.zeros(n, dtype=np.int64), l1_sensitivity=1, scale=scale, integer=True
    )
    var, mu4 = moments(dl_pmf, scale)
    check_mean_and_variance(out, var, mu4)
    assert chi_square_p(out, dl_pmf, scale) > 1e-6


# --- only this module draws noise ---------------------------------------------------------


def test_only_mechanisms_imports_opendp_or_draws_random_numbers():
    allowed = ROOT / "accounting" / "mechanisms.py"
    opendp = re.compile(r"^\s*(import opendp|from opendp)", re.MULTILINE)
    rng = re.compile(
        r"np\.random|numpy\.random|^\s*import random\b|^\s*from random import", re.MULTILINE
    )
    checked = 0
    for package in ("accounting", "proxy"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            checked += 1
            if path != allowed:
                assert not opendp.search(text), f"{path} imports opendp"
            assert not rng.search(text), f"{path} uses a non-vetted random source"
    assert checked >= 3
    assert opendp.search(allowed.read_text(encoding="utf-8"))
