"""Issue #12 §3, value bounds by expected error (accounting/value_bounds.py: the released
histogram on the public grid, read, and choose_upper), on hand-built histograms whose
right answer is known."""

from __future__ import annotations

import pytest

from accounting import value_bounds as V

GRID = V.value_grid(0.0, 100000.0)


def hist(rows_at: dict[float, float], std: float = 1.0) -> V.ValueHistogram:
    """A histogram with ``rows`` in the bin whose upper edge is each key."""
    counts = [0.0] * GRID.bins
    for edge, rows in rows_at.items():
        counts[GRID.edges.index(edge)] = rows
    return V.ValueHistogram.read(GRID, counts, std)


# About 10,000 rows: most near 1,000, a tail up to 50,000 (no empty bin in between: the
# reading takes everything past the first empty bin above the mode for noise).
TAILED = hist(
    {
        700.0: 3000,
        1000.0: 4000,
        1500.0: 1500,
        2000.0: 500,
        3000.0: 400,
        5000.0: 300,
        7000.0: 150,
        10000.0: 80,
        15000.0: 40,
        20000.0: 20,
        30000.0: 10,
        50000.0: 5,
    }
)


def total(std_at_limit: float) -> V.ValueTarget:
    """A SUM whose noise has this standard deviation with the bound at the limit."""
    return V.ValueTarget(V.ValueUse.TOTAL, std_at_limit, 100000.0)


def test_reading_thresholds_noise_and_the_far_tail() -> None:
    noisy = [0.0] * GRID.bins
    noisy[GRID.edges.index(1000.0)] = 500.0
    noisy[GRID.edges.index(1500.0)] = 1.5  # below 2σ: read as empty
    noisy[GRID.edges.index(70000.0)] = 40.0  # past the first empty bin: noise, not a tail
    read = V.ValueHistogram.read(GRID, noisy, 1.0)
    assert read.rows() == 500.0 and read.threshold == 2.0
    assert read.hidden == GRID.edges.index(1000.0) + 1
    # The hidden bin counts in the clipped share only (up to the threshold's rows).
    assert read.clipped(1000.0) > 0.0 == read.clipped(100000.0)
    assert read.quantile(0.95) == 1000.0
    with pytest.raises(V.ValueBoundsError):
        V.ValueHistogram.read(GRID, noisy[:-1], 1.0)


def test_little_noise_keeps_the_tail_and_much_noise_cuts_it() -> None:
    quiet = V.choose_upper(TAILED, [total(1e3)], groups=1.0)
    noisy = V.choose_upper(TAILED, [total(1e8)], groups=1.0)
    assert noisy.bound < 5000.0 < 50000.0 <= quiet.bound <= 100000.0
    assert quiet.clipped < 0.01 < noisy.clipped
    for choice in (quiet, noisy):
        assert dict(choice.errors)[choice.bound] == min(e for _, e in choice.errors)
        assert all(b <= 100000.0 for b, _ in choice.errors)
    # More groups share the same rows: each total is smaller, so the noise weighs more.
    assert (
        V.choose_upper(TAILED, [total(1e6)], groups=100.0).bound
        < V.choose_upper(TAILED, [total(1e6)], groups=1.0).bound
    )


def test_a_centred_sum_grows_with_the_range_and_the_limit_caps_everything() -> None:
    centred = V.ValueTarget(V.ValueUse.CENTRED, 1e6, 100000.0)
    assert V.ValueUse.CENTRED.scale(0.0, 100000.0) == 50000.0
    assert V.ValueUse.TOTAL.scale(-10.0, 5.0) == 10.0
    choice = V.choose_upper(TAILED, [centred], groups=1.0)
    assert 1500.0 <= choice.bound <= 100000.0
    # Noise-free: the largest candidate with nothing clipped, never above the limit.
    free = V.choose_upper(TAILED, [total(0.0)], groups=1.0)
    assert free.clipped == 0.0 and free.bound <= 100000.0


def test_nothing_to_weigh_keeps_the_quantile_bound() -> None:
    assert V.choose_upper(TAILED, [], groups=1.0).bound == TAILED.quantile(V.QUANTILE)
    empty = hist({})
    assert V.choose_upper(empty, [total(1.0)], groups=1.0).bound == 100000.0


# --- the lower bound, the mirror ------------------------------------------------------------

# About 9,700 rows: most near 50,000-70,000, a tail down to 2,000 (the bin of 1,500 is the
# first empty one below the mode: the lower side counts it full, as if it held the
# detection threshold's rows).
LOW_TAILED = hist(
    {
        100000.0: 200,
        70000.0: 4000,
        50000.0: 3000,
        30000.0: 1500,
        20000.0: 500,
        15000.0: 300,
        10000.0: 200,
        7000.0: 100,
        5000.0: 50,
        3000.0: 30,
        2000.0: 20,
    }
)


def centred(std_at_limits: float) -> V.LowerTarget:
    """An AVG's centred sum whose noise has this std planned on [0, 100000]."""
    return V.LowerTarget(V.ValueUse.CENTRED, std_at_limits, 0.0, 100000.0)


def test_reading_finds_the_first_empty_bin_below_the_mode() -> None:
    assert LOW_TAILED.hidden_low == GRID.edges.index(1500.0)
    # The default lower bound: the lower edge of the bin of the 5th percentile.
    assert LOW_TAILED.lower_quantile(V.LOWER_QUANTILE) == 10000.0
    assert LOW_TAILED.clipped_below(0.0) == 0.0 < LOW_TAILED.clipped_below(1300.0)
    assert hist({}).lower_quantile(V.LOWER_QUANTILE) == 0.0


def test_a_tiny_epsilon_picks_a_tighter_lower_bound_than_a_large_one() -> None:
    tight = V.choose_lower(LOW_TAILED, [centred(1e8)], groups=1.0, upper=100000.0)
    loose = V.choose_lower(LOW_TAILED, [centred(1e3)], groups=1.0, upper=100000.0)
    assert 0.0 <= loose.bound < tight.bound <= LOW_TAILED.lower_quantile(0.5)
    assert loose.clipped < 0.01 < tight.clipped
    for choice in (tight, loose):
        assert choice.limit == 0.0
        assert dict(choice.errors)[choice.bound] == min(e for _, e in choice.errors)
        assert all(b >= 0.0 for b, _ in choice.errors)  # never below the lower_limit


def test_a_total_of_positive_values_never_pays_for_a_lower_bound() -> None:
    # max(|L|, |U|) = U whatever L ≥ 0 is: no noise to save, so no bias is taken, and on
    # ties the tighter bound (the lower edge of the hidden bin) wins.
    total_low = V.LowerTarget(V.ValueUse.TOTAL, 1e8, 0.0, 100000.0)
    choice = V.choose_lower(LOW_TAILED, [total_low], groups=1.0, upper=100000.0)
    assert choice.bound == 1000.0 and choice.clipped == 0.0


def test_no_lower_target_keeps_the_quantile_bound() -> None:
    assert V.choose_lower(LOW_TAILED, [], groups=1.0, upper=100000.0).bound == 10000.0
    assert V.choose_lower(hist({}), [centred(1.0)], groups=1.0, upper=100000.0).bound == 0.0
