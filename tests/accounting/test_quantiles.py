"""Quantiles by the exponential mechanism: grid, scores, user-level sensitivity, cost,
exact output distribution, empirical privacy and accuracy.

OpenDP's samplers cannot be seeded, so every statistical check has a fixed false-alarm
probability below 1e-6 (p-value floors, Clopper–Pearson bounds at 1e-7 each). The
reference scores are computed here from sorted rows with exact fractions, independently of
the histogram arithmetic under test.
"""

import itertools
import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import opendp.prelude as dp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from accounting import mechanisms, quantiles
from accounting.mechanisms import MechanismError, report_noisy_min
from accounting.quantiles import (
    DENOMINATOR,
    QuantileError,
    RankTarget,
    TargetKind,
    accuracy,
    dense_histograms,
    describe_quantile,
    epsilon_per_group_for_share,
    grid_for,
    quantile_for_share,
    quantile_numerator,
    release_quantiles,
    score_sensitivity,
    scores,
    selection_curve,
)
from accounting.rdp import ORDERS, compose, pure_dp_curve, zcdp_curve

P_FLOOR = 1e-6

dp.enable_features("contrib")


# --- references, independent of the code under test ------------------------------------


def reference_scores(hist, target: RankTarget) -> list[int]:
    """Scores from the definition: expand the histogram into sorted rows (bin indices),
    count rows below / at most each bin, distance from the exact target rank, in units of
    1/DENOMINATOR."""
    rows = sorted(j for j, c in enumerate(hist) for _ in range(int(c)))
    n = len(rows)
    if target.kind is TargetKind.QUANTILE:
        r = Fraction(target.numerator, DENOMINATOR) * n
    elif target.kind is TargetKind.MIN:
        r = min(Fraction(target.offset), Fraction(n, 2))
    else:
        r = max(Fraction(n - target.offset), Fraction(n, 2))
    out = []
    for j in range(len(hist)):
        lt = sum(1 for x in rows if x < j)
        le = sum(1 for x in rows if x <= j)
        out.append(int(max(lt - r, r - le, 0) * DENOMINATOR))
    return out


def em_probabilities(s: np.ndarray, scale: float) -> np.ndarray:
    """P(j) = exp(−s_j/scale)/Σ exp(−s_k/scale), in log space."""
    logits = -np.asarray(s, dtype=np.float64) / scale
    return np.exp(logits - special.logsumexp(logits))


def targets(offset: int = 3) -> list[RankTarget]:
    return [
        RankTarget(TargetKind.QUANTILE, numerator=5000),
        RankTarget(TargetKind.QUANTILE, numerator=9000),
        RankTarget(TargetKind.QUANTILE, numerator=1234),
        RankTarget(TargetKind.QUANTILE, numerator=0),
        RankTarget(TargetKind.QUANTILE, numerator=DENOMINATOR),
        RankTarget(TargetKind.MIN, offset=offset),
        RankTarget(TargetKind.MAX, offset=offset),
    ]


target_strategy = st.one_of(
    st.integers(0, DENOMINATOR).map(lambda n: RankTarget(TargetKind.QUANTILE, numerator=n)),
    st.integers(0, 40).map(lambda t: RankTarget(TargetKind.MIN, offset=t)),
    st.integers(0, 40).map(lambda t: RankTarget(TargetKind.MAX, offset=t)),
)


# --- the grid ------------------------------------------------------------------------------


def test_integer_grid_is_exact_for_small_ranges():
    g = grid_for(0, 120, integer=True)
    assert (g.bins, g.width) == (121, 1.0)
    x = np.arange(0, 121)
    assert np.array_equal(g.bin_index(x), x)
    assert [g.value(int(j)) for j in g.bin_index(x)] == list(map(float, x))
    # Out-of-range values land in the end bins (the engine clamps them first anyway).
    assert list(g.bin_index([-5, 500])) == [0, 120]


def test_integer_grid_for_wide_ranges_covers_every_integer_once():
    g = grid_for(-7, 10_000, integer=True, max_bins=100)
    assert g.bins <= 100 and g.width == math.ceil(10_008 / 100)
    x = np.arange(-7, 10_001)
    idx = g.bin_index(x)
    assert idx.min() == 0 and idx.max() == g.bins - 1
    for j in range(g.bins):
        lo, hi = g.bounds(j)
        members = x[idx == j]
        assert members.min() == lo and members.max() == hi
        assert lo <= g.value(j) <= hi and g.value(j) == math.floor(g.value(j))
        assert max(abs(members - g.value(j))) <= g.half_bin()
    assert g.bounds(g.bins - 1)[1] == 10_000


@settings(max_examples=200, deadline=None)
@given(
    lower=st.floats(-1e6, 1e6),
    span=st.floats(1e-3, 1e6),
    bins=st.integers(1, 4096),
    u=st.floats(0.0, 1.0),
)
def test_float_grid_value_is_within_half_a_bin(lower, span, bins, u):
    g = grid_for(lower, lower + span, integer=False, max_bins=bins)
    x = g.lower + u * (g.upper - g.lower)
    j = int(g.bin_index([x])[0])
    lo, hi = g.bounds(j)
    assert g.lower <= g.value(j) <= g.upper
    # The engine's rounding at an edge may pick a neighbouring bin: allow one ulp-scale slip.
    slack = 1e-9 * max(1.0, abs(g.lower), abs(g.upper))
    assert lo - slack <= x <= hi + slack
    assert abs(g.value(j) - x) <= g.half_bin() + slack


def test_degenerate_and_bad_grids():
    assert grid_for(3.0, 3.0, integer=False).bins == 1
    assert grid_for(3, 3, integer=True).bins == 1
    for bad in (
        dict(lower=2.0, upper=1.0, integer=False),
        dict(lower=0.5, upper=3.0, integer=True),
        dict(lower=0, upper=2**60, integer=True),
        dict(lower=float("nan"), upper=1.0, integer=False),
        dict(lower=0.0, upper=1.0, integer=False, max_bins=0),
        dict(lower=0.0, upper=1.0, integer=False, max_bins=2**17),
        dict(lower=-1e308, upper=1e308, integer=False),
    ):
        with pytest.raises(QuantileError):
            grid_for(**bad)


# --- targets and scores ----------------------------------------------------------------------


def test_quantile_numerator_rounds_to_four_decimals():
    assert quantile_numerator(0.5) == 5000
    assert quantile_numerator(0.95) == 9500
    assert quantile_numerator(0.999) == 9990
    assert quantile_numerator(1 / 3) == 3333
    assert quantile_numerator(0.0) == 0 and quantile_numerator(1.0) == DENOMINATOR
    assert quantile_numerator(0.00005) == 1  # ties round up
    for bad in (-0.1, 1.5, math.nan, math.inf, "0.5", True):
        with pytest.raises(QuantileError):
            quantile_numerator(bad)


def test_targets_refuse_mixed_fields():
    with pytest.raises(QuantileError):
        RankTarget(TargetKind.MIN, numerator=5)
    with pytest.raises(QuantileError):
        RankTarget(TargetKind.QUANTILE, offset=5)
    with pytest.raises(QuantileError):
        RankTarget(TargetKind.QUANTILE, numerator=DENOMINATOR + 1)
    with pytest.raises(QuantileError):
        RankTarget("min")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    hist=st.lists(st.integers(0, 6), min_size=1, max_size=9),
    target=target_strategy,
)
def test_scores_match_the_definition(hist, target):
    assert list(scores(hist, target)) == reference_scores(hist, target)


def test_zero_scores_are_exactly_the_bins_holding_the_target():
    hist = [3, 0, 2, 4, 1]
    # n = 10: the median's rank 5 is held by bins 2 (ranks 3..5) and 3 (ranks 5..9).
    s = scores(hist, RankTarget(TargetKind.QUANTILE, numerator=5000))
    assert list(s) == [2 * DENOMINATOR, 2 * DENOMINATOR, 0, 0, 4 * DENOMINATOR]
    # MIN with offset 1: rank 1 lies in bin 0 only; the empty bin 1 sits at ranks 3..3.
    s = scores(hist, RankTarget(TargetKind.MIN, offset=1))
    assert list(s) == [0, 2 * DENOMINATOR, 2 * DENOMINATOR, 4 * DENOMINATOR, 8 * DENOMINATOR]
    # A group smaller than 2t aims at its median instead.
    s = scores([1, 0, 1], RankTarget(TargetKind.MIN, offset=50))
    assert list(s) == [0, 0, 0]


def test_scores_clamp_huge_counts_and_refuse_bad_histograms():
    cap = quantiles.max_bin_count(2)
    s = scores(np.array([2**62, 2**62], dtype=np.int64), RankTarget(TargetKind.MIN, offset=0))
    assert int(s.max()) <= 2**62 and int(s[1]) == cap * DENOMINATOR
    for bad in ([1, -1], [0.5, 1.0], [], [[1, 2]], [math.nan, 1.0]):
        with pytest.raises(QuantileError):
            scores(bad, RankTarget(TargetKind.MIN, offset=0))


# --- user-level sensitivity ----------------------------------------------------------------


def person_strategy(bins: int, c: int):
    """One person's rows in the group: at most C bin indices."""
    return st.lists(st.integers(0, bins - 1), min_size=0, max_size=c)


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    bins=st.integers(1, 10),
    c=st.integers(1, 5),
    target=target_strategy,
)
def test_one_person_moves_every_score_by_at_most_the_sensitivity(data, bins, c, target):
    others = data.draw(st.lists(st.integers(0, 30), min_size=bins, max_size=bins))
    person = data.draw(person_strategy(bins, c))
    with_person = np.array(others) + np.bincount(person, minlength=bins)
    moved = np.abs(scores(with_person, target) - scores(others, target))
    assert int(moved.max()) <= score_sensitivity(target, c)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    bins=st.integers(2, 8),
    c=st.integers(1, 4),
    target=target_strategy,
)
def test_removing_the_heaviest_person_moves_scores_by_at_most_the_sensitivity(
    data, bins, c, target
):
    # D as a population of persons, each capped at C rows in the group (as the core does).
    persons = data.draw(st.lists(person_strategy(bins, c), min_size=1, max_size=12))
    heaviest = max(range(len(persons)), key=lambda i: len(persons[i]))
    full = sum((np.bincount(p, minlength=bins) for p in persons), np.zeros(bins, np.int64))
    without = full - np.bincount(persons[heaviest], minlength=bins)
    moved = np.abs(scores(full, target) - scores(without, target))
    assert int(moved.max()) <= score_sensitivity(target, c)


def test_the_sensitivity_is_attained():
    # Median, C = 3: a person with all three rows in bin 0 shifts the far bins' ranks by
    # 3 and the target by 1.5 — exactly max(q, 1 − q)·C.
    others = np.array([0, 10, 0, 10])
    person = np.array([3, 0, 0, 0])
    t = RankTarget(TargetKind.QUANTILE, numerator=5000)
    moved = np.abs(scores(others + person, t) - scores(others, t))
    assert int(moved.max()) == score_sensitivity(t, 3) == 3 * 5000
    m = RankTarget(TargetKind.MIN, offset=2)
    moved = np.abs(scores(others + person, m) - scores(others, m))
    assert int(moved.max()) == score_sensitivity(m, 3) == 3 * DENOMINATOR


@pytest.mark.parametrize("q", [0.5, 0.9, 0.25, 0.01])
@pytest.mark.parametrize("c", [1, 3, 7])
def test_sensitivity_equals_opendps_quantile_scorer_per_record(q, c):
    # OpenDP's scorer for the same α states C·max(α, 1 − α) (in its own units) for C
    # added or removed records: our per-person constant is the same in rank units.
    t = dp.t.make_quantile_score_candidates(
        dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance(), [0, 1, 2], q
    )
    num = t.map(c)
    den = Fraction(q).denominator if Fraction(q).denominator < 10_000 else 10_000
    target = RankTarget(TargetKind.QUANTILE, numerator=quantile_numerator(q))
    assert Fraction(num, den) == Fraction(score_sensitivity(target, c), DENOMINATOR)


# --- cost ------------------------------------------------------------------------------------


def test_selection_curve_is_the_minimum_of_its_two_bounds():
    for eps in (0.01, 0.3, 1.0, 2.0, 8.0):
        curve = selection_curve(eps, eps * eps / 8.0)
        zc, pure = zcdp_curve(eps * eps / 8.0).as_array(), pure_dp_curve(eps).as_array()
        assert np.array_equal(curve.as_array(), np.minimum(zc, pure))
        assert np.all(curve.as_array() <= pure) and np.all(curve.as_array() <= zc)
    # ε²/8 wins at small orders; the pure bound ε caps large orders.
    c = selection_curve(1.0, 0.125)
    assert c.values[0] == pytest.approx(0.125 * ORDERS[0])
    assert c.values[-1] <= 1.0
    with pytest.raises(QuantileError):
        selection_curve(1.0, 0.1)  # below ε²/8: not a bound this module may claim


def test_curve_is_monotone_in_epsilon_and_composes_over_groups():
    g = grid_for(0.0, 1.0, integer=False, max_bins=64)
    previous = None
    for eps in (0.05, 0.1, 0.5, 1.0, 3.0):
        d = describe_quantile(
            grid=g, kind=TargetKind.QUANTILE, q=0.5, max_rows=2, max_groups=1, epsilon_per_group=eps
        )
        if previous is not None:
            assert np.all(d.curve.as_array() >= previous.as_array())
        previous = d.curve
        d5 = describe_quantile(
            grid=g, kind=TargetKind.QUANTILE, q=0.5, max_rows=2, max_groups=5, epsilon_per_group=eps
        )
        assert d5.curve == d.curve * 5
        assert d5.pure_epsilon == pytest.approx(5 * eps, rel=1e-15)
        np.testing.assert_allclose(
            compose([d.curve] * 5).as_array(), d5.curve.as_array(), rtol=1e-14
        )


def test_descriptor_matches_opendps_privacy_map():
    g = grid_for(0, 999, integer=True)
    for kind, q in ((TargetKind.QUANTILE, 0.5), (TargetKind.QUANTILE, 0.9), (TargetKind.MAX, None)):
        d = describe_quantile(
            grid=g, kind=kind, q=q, max_rows=4, max_groups=3, epsilon_per_group=0.7
        )
        assert d.scale == pytest.approx(2 * d.sensitivity / 0.7, rel=1e-15)
        rho_opendp = mechanisms.exponential_mechanism_rho(d.sensitivity, d.scale)
        assert rho_opendp == pytest.approx(0.7**2 / 8, rel=1e-12)
        assert d.rho_per_group >= rho_opendp
        assert d.curve == selection_curve(0.7, d.rho_per_group) * 3
        # No order of the curve exceeds the column's pure ε (K·ε_g).
        assert max(d.curve.values) <= d.pure_epsilon


@pytest.mark.parametrize("k", [1, 4, 30])
@pytest.mark.parametrize("share", [1e-4, 0.01, 0.5])
def test_a_budget_share_buys_no_more_than_it_pays_for(k, share):
    g = grid_for(0.0, 100.0, integer=False)
    d = quantile_for_share(
        mechanism="gaussian",
        share=share,
        grid=g,
        kind=TargetKind.QUANTILE,
        q=0.5,
        max_rows=2,
        max_groups=k,
    )
    assert np.all(d.curve.as_array() <= zcdp_curve(share).as_array() * (1 + 1e-12))
    assert d.epsilon_per_group == pytest.approx(math.sqrt(8 * share / k), rel=1e-15)
    d = quantile_for_share(
        mechanism="laplace", share=share, grid=g, kind=TargetKind.MIN, max_rows=2, max_groups=k
    )
    assert d.pure_epsilon <= share * (1 + 1e-12)
    if k == 1:
        assert np.all(d.curve.as_array() <= pure_dp_curve(share).as_array() * (1 + 1e-12))
    with pytest.raises(QuantileError):
        epsilon_per_group_for_share("rdp", share, k)


def test_min_and_max_offsets_and_rank_errors_follow_the_stated_formulas():
    g = grid_for(0.0, 1.0, integer=False, max_bins=1024)
    d = describe_quantile(
        grid=g, kind=TargetKind.MIN, max_rows=2, max_groups=1, epsilon_per_group=0.5
    )
    theta = 2 * 2 / 0.5  # 2C/ε in rows
    tau = theta * math.log(1023 / 0.05)
    assert d.rank_error == pytest.approx(tau, rel=1e-12)
    assert d.target.offset == math.ceil(tau)
    assert d.expected_rank_error == pytest.approx(theta * (1 + math.log(1023)), rel=1e-12)
    m = describe_quantile(
        grid=g, kind=TargetKind.QUANTILE, q=0.5, max_rows=2, max_groups=1, epsilon_per_group=0.5
    )
    assert m.rank_error == pytest.approx(tau / 2, rel=1e-12)  # Δ = C/2 for the median
    one = describe_quantile(
        grid=grid_for(2.0, 2.0, integer=False),
        kind=TargetKind.MAX,
        max_rows=1,
        max_groups=1,
        epsilon_per_group=1.0,
    )
    assert one.rank_error == 0.0 and one.target.offset == 0


def test_accuracy_prediction():
    g = grid_for(0.0, 100.0, integer=False, max_bins=1000)
    d = describe_quantile(
        grid=g, kind=TargetKind.QUANTILE, q=0.5, max_rows=1, max_groups=1, epsilon_per_group=1.0
    )
    a = accuracy(d, 1000)
    assert a.rank_error == d.rank_error and a.quantile_error == pytest.approx(d.rank_error / 1000)
    assert a.value_error_uniform == pytest.approx(100 * d.rank_error / 1000 + 0.05)
    tiny = accuracy(d, 1)
    assert tiny.quantile_error == 1.0 and tiny.value_error_uniform == 100.0
    dm = describe_quantile(
        grid=g, kind=TargetKind.MAX, max_rows=1, max_groups=1, epsilon_per_group=1.0
    )
    assert accuracy(dm, 1e6).rank_error == pytest.approx(dm.rank_error + dm.target.offset)
    assert d.half_width is None and "density" in d.interval_note
    with pytest.raises(QuantileError):
        accuracy(d, 0)


def test_describe_refuses_bad_inputs():
    g = grid_for(0.0, 1.0, integer=False)
    ok = dict(
        grid=g, kind=TargetKind.QUANTILE, q=0.5, max_rows=1, max_groups=1, epsilon_per_group=1.0
    )
    for change in (
        dict(q=None),
        dict(kind=TargetKind.MIN),
        dict(kind="mode"),
        dict(max_rows=0),
        dict(max_groups=True),
        dict(epsilon_per_group=0.0),
        dict(epsilon_per_group=math.inf),
        dict(confidence=1.0),
        dict(grid=(0, 1)),
        dict(q=2.0),
    ):
        with pytest.raises(QuantileError):
            describe_quantile(**{**ok, **change})


# --- the sampler -------------------------------------------------------------------------------


def test_report_noisy_min_preconditions_and_a_certain_winner():
    assert report_noisy_min(np.array([10**12, 0, 10**12]), scale=1.0) == 1
    assert report_noisy_min([7], scale=3.0) == 0
    for bad in (
        np.array([], dtype=np.int64),
        np.array([[1, 2]]),
        np.array([1.5, 2.0]),
        np.array([-1, 2]),
        np.array([2**63, 0], dtype=np.uint64),
    ):
        with pytest.raises(MechanismError):
            report_noisy_min(bad, scale=1.0)
    for scale in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(MechanismError):
            report_noisy_min([1, 2], scale=scale)
    with pytest.raises(MechanismError):
        mechanisms.exponential_mechanism_rho(0, 1.0)


def draw_counts(hist, descriptor, draws: int) -> np.ndarray:
    out = release_quantiles(np.tile(np.asarray(hist), (draws, 1)), descriptor)
    return np.bincount(out.bins, minlength=descriptor.grid.bins)


def tiny_median(eps: float = 1.0, c: int = 1) -> quantiles.QuantileDescriptor:
    return describe_quantile(
        grid=grid_for(0, 4, integer=True),
        kind=TargetKind.QUANTILE,
        q=0.5,
        max_rows=c,
        max_groups=1,
        epsilon_per_group=eps,
    )


def check_distribution(draws: int) -> None:
    d = tiny_median()
    hist = [3, 0, 2, 4, 1]
    p = em_probabilities(scores(hist, d.target), d.scale)
    # θ = 1 rank: the closed form is ∝ (e^−2, e^−2, 1, 1, e^−4).
    ref = np.exp([-2.0, -2.0, 0.0, 0.0, -4.0])
    np.testing.assert_allclose(p, ref / ref.sum(), rtol=1e-12)
    observed = draw_counts(hist, d, draws)
    assert stats.chisquare(observed, p * draws).pvalue > P_FLOOR


def test_output_distribution_is_the_exponential_mechanism():
    check_distribution(3_000)


@pytest.mark.slow
def test_output_distribution_is_the_exponential_mechanism_long():
    check_distribution(200_000)


def test_exhaustive_privacy_of_the_closed_form_on_small_neighbours():
    # Every histogram with counts ≤ 3 over 3 bins, every person with ≤ C = 2 rows: the
    # exponential mechanism's exact probabilities differ by at most e^{ε_g}.
    eps = 0.8
    g = grid_for(0, 2, integer=True)
    worst = 0.0
    for kind, q in (
        (TargetKind.QUANTILE, 0.5),
        (TargetKind.QUANTILE, 0.9),
        (TargetKind.MIN, None),
        (TargetKind.MAX, None),
    ):
        d = describe_quantile(
            grid=g, kind=kind, q=q, max_rows=2, max_groups=1, epsilon_per_group=eps
        )
        # A small offset so the MIN/MAX caps at n/2 are exercised on these tiny groups.
        target = d.target if kind is TargetKind.QUANTILE else RankTarget(kind, offset=1)
        for others in itertools.product(range(4), repeat=3):
            base = np.log(em_probabilities(scores(others, target), d.scale))
            for rows in itertools.chain.from_iterable(
                itertools.combinations_with_replacement(range(3), m) for m in range(3)
            ):
                with_p = np.array(others) + np.bincount(np.array(rows, dtype=int), minlength=3)
                moved = np.log(em_probabilities(scores(with_p, target), d.scale))
                worst = max(worst, float(np.max(np.abs(moved - base))))
    assert worst <= eps * (1 + 1e-12)
    assert worst >= 0.5 * eps  # the check is not vacuous


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


def check_empirical_privacy(draws: int) -> None:
    eps = 1.0
    d = tiny_median(eps=eps, c=2)
    others = np.array([1, 0, 2, 0, 1])
    heaviest = np.array([2, 0, 0, 0, 0])  # C = 2 rows, both at the bottom
    a = draw_counts(others + heaviest, d, draws)
    b = draw_counts(others, d, draws)
    for j in range(5):
        for x, y in ((a, b), (b, a)):
            x_lo, _ = clopper_pearson(int(x[j]), draws, 1e-7)
            _, y_hi = clopper_pearson(int(y[j]), draws, 1e-7)
            # Only fails (w.p. < 2e-7 per check) if P_D(j) > e^ε·P_D'(j).
            assert x_lo <= math.exp(eps) * y_hi


def test_empirical_privacy_on_neighbours():
    check_empirical_privacy(2_000)


@pytest.mark.slow
def test_empirical_privacy_on_neighbours_long():
    check_empirical_privacy(100_000)


# --- accuracy on a known distribution --------------------------------------------------------


def binomial_ok(failures: int, trials: int, rate: float) -> bool:
    """False only if `failures` is implausibly many for a failure rate ≤ `rate`."""
    return failures == 0 or float(stats.binom.sf(failures - 1, trials, rate)) > P_FLOOR


def check_accuracy(draws: int) -> None:
    n = 2000
    g = grid_for(-5.0, 5.0, integer=False, max_bins=1024)
    x = -5.0 + 10.0 * (np.arange(n) + 0.5) / n  # evenly spread: the reference case
    hist = np.bincount(g.bin_index(x), minlength=g.bins)
    sorted_x = np.sort(x)
    for kind, q in (
        (TargetKind.QUANTILE, 0.5),
        (TargetKind.QUANTILE, 0.9),
        (TargetKind.MIN, None),
        (TargetKind.MAX, None),
    ):
        d = describe_quantile(
            grid=g, kind=kind, q=q, max_rows=1, max_groups=1, epsilon_per_group=1.0
        )
        out = release_quantiles(np.tile(hist, (draws, 1)), d)
        s = scores(hist, d.target)[out.bins] / DENOMINATOR  # rows from the target rank
        assert binomial_ok(int(np.sum(s > d.rank_error)), draws, 1 - d.confidence)
        # The bound on the mean is loose; 6 standard errors of slack on the sample mean.
        assert s.mean() <= d.expected_rank_error + 6 * s.std() / math.sqrt(draws) + 1e-9
        a = accuracy(d, n)
        if kind is TargetKind.QUANTILE:
            truth = sorted_x[int(q * n)]
        else:
            truth = sorted_x[0] if kind is TargetKind.MIN else sorted_x[-1]
        err = np.abs(out.values - truth)
        assert binomial_ok(int(np.sum(err > a.value_error_uniform)), draws, 1 - d.confidence)
        if kind is not TargetKind.QUANTILE:
            # Not beyond the true extreme's bin, except with probability ≤ 1 − confidence.
            extreme_bin = g.bin_index([truth])[0]
            beyond = out.bins < extreme_bin if kind is TargetKind.MIN else out.bins > extreme_bin
            assert binomial_ok(int(np.sum(beyond)), draws, 1 - d.confidence)


def test_accuracy_on_a_known_distribution():
    check_accuracy(60)


@pytest.mark.slow
def test_accuracy_on_a_known_distribution_long():
    check_accuracy(2_000)


# --- release plumbing ---------------------------------------------------------------------------


def test_release_refuses_a_tampered_descriptor_and_bad_shapes():
    d = tiny_median()
    with pytest.raises(QuantileError):
        release_quantiles([[1, 1, 1, 1, 1]], replace(d, scale=d.scale / 10))
    with pytest.raises(QuantileError):
        release_quantiles([[1, 1, 1, 1, 1]], replace(d, curve=d.curve * 0))
    with pytest.raises(QuantileError):
        release_quantiles([[1, 1, 1]], d)
    with pytest.raises(QuantileError):
        release_quantiles([1, 1, 1, 1, 1], d)
    empty = release_quantiles(np.zeros((3, 5), dtype=np.int64), d)  # uniform, but valid
    assert empty.bins.shape == (3,) and set(empty.values) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    assert release_quantiles(np.zeros((0, 5), dtype=np.int64), d).bins.size == 0


def test_dense_histograms_from_sparse_rows():
    g = grid_for(0, 3, integer=True)
    h = dense_histograms([0, 0, 2, 0], [1, 3, 0, 1], [2, 5, 7, 1], n_groups=3, grid=g)
    assert h.tolist() == [[0, 3, 0, 5], [0, 0, 0, 0], [7, 0, 0, 0]]
    for bad in (
        ([3], [0], [1]),
        ([0], [4], [1]),
        ([0], [0], [-1]),
        ([0], [0], [0.5]),
        ([0, 1], [0], [1]),
    ):
        with pytest.raises(QuantileError):
            dense_histograms(*bad, n_groups=3, grid=g)


def test_quantiles_module_draws_nothing_itself():
    # The only draw is mechanisms.report_noisy_min; the module imports no sampler.
    text = Path(quantiles.__file__).read_text(encoding="utf-8")
    assert "import opendp" not in text and "from opendp" not in text
    assert text.count("mechanisms.report_noisy_min(") == 1
