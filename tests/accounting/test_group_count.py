"""Issue #12 §3 follow-up: the number of groups G behind the K choice, and the partition
selection weighed as it decides (accounting/group_bounds.py: group_count, dropped,
release_peak), on hand-built histograms whose right answer is known."""

from __future__ import annotations

import pytest

from accounting.bounds import BINS, CapTarget, OutputKind, RowHistogram
from accounting.group_bounds import (
    Selection,
    choose_groups,
    dropped,
    group_count,
    highest_shown,
    pair_cut,
    release_peak,
)
from accounting.partition import gaussian_threshold, laplace_threshold

DELTA = 1e-6


def hist(counts: dict[int, float]) -> RowHistogram:
    return RowHistogram.read([counts.get(j, 0.0) for j in range(BINS)], noise_std=1.0)


# 10,000 people: most in a few groups, a heavy tail up to 255 groups each.
HEAVY = hist({0: 5000, 1: 2500, 2: 1200, 3: 700, 4: 300, 5: 200, 6: 60, 7: 40})


def gaussian(sigma: float) -> Selection:
    return Selection(gaussian_threshold(sigma, 1, DELTA), DELTA)


def test_g_is_at_least_the_groups_of_the_heaviest_person_shown() -> None:
    # 340 people over a threshold of 100 would say 3.4 groups, but 10 people are seen
    # with 128 to 255 groups each: there are at least 128.
    few_heavy = hist({0: 200, 1: 50, 2: 30, 3: 20, 4: 10, 5: 10, 6: 10, 7: 10})
    assert highest_shown(few_heavy) == 128
    assert group_count(few_heavy, 100) == 128.0
    # Otherwise the people over the threshold (the typical group at K = 1 at it).
    assert group_count(hist({0: 5000, 1: 100}), 10) == pytest.approx(510.0)
    # A public domain is its size; no selection and no domain: one output.
    assert group_count(few_heavy, 100, domain=7) == 7.0
    assert group_count(few_heavy, None) == 1.0
    assert highest_shown(hist({})) == 0 and group_count(hist({}), 5) == 1.0


def test_a_group_below_the_threshold_is_dropped_not_half_shown() -> None:
    # One group per person, 50 groups: the typical group has the people over 50.
    one_each = hist({0: 5000})
    sel = Selection(laplace_threshold(1.0, 1, DELTA), DELTA)
    tau = sel.tau(1)
    at_half = hist({0: 50 * tau / 2})
    assert dropped(at_half, 1, 50.0, sel) > 0.99  # half the threshold: almost never shown
    far_above = hist({0: 50 * tau * 3})
    assert dropped(far_above, 1, 50.0, sel) < 0.01
    # Right at it: shown more often than not (the noise's tail at 0), not surely.
    assert 0.1 < dropped(hist({0: 50 * tau}), 1, 50.0, sel) < 0.5
    assert dropped(one_each, 1, 50.0, None) == 0.0  # public keys: nothing is dropped


def test_the_peak_of_pairs_kept_over_the_threshold_bounds_k() -> None:
    # A threshold of about 200 people at K = 1 (σ 40): it grows with √K, the pairs kept
    # by K grow fast at first, then slowly (the heavy tail is thin).
    sel = gaussian(40.0)
    ks = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    peak = release_peak(HEAVY, ks, sel)
    ratios = {k: pair_cut(HEAVY, k).kept / sel.tau(k) for k in ks}
    assert ratios[peak] == max(ratios.values())
    assert 1 < peak < 256
    assert all(ratios[k] < ratios[peak] for k in ks if k > peak)
    # A count with no noise would take the limit (least bias), but with private keys it
    # stops at the peak: a larger K releases only a subset of the peak's groups.
    free = CapTarget(OutputKind.TOTAL, 0.0, 1.0)
    assert choose_groups(HEAVY, [free], 50.0, 256, l2=True).k == 256
    chosen = choose_groups(HEAVY, [free], 50.0, 256, l2=True, selection=sel)
    assert chosen.k == peak == chosen.release_peak
    # One group per person: K = 1 is the peak (the threshold grows, the pairs do not).
    assert release_peak(hist({0: 5000}), ks, sel) == 1


def test_a_larger_g_estimate_picks_a_smaller_k_for_a_thin_key() -> None:
    # The same histogram spread over many more groups: each is small, so a K whose
    # threshold outgrows its pairs loses the groups; more groups never raise K.
    sel = gaussian(10.0)
    target = [CapTarget(OutputKind.TOTAL, 2.0, 1.0)]
    few = choose_groups(HEAVY, target, 20.0, 256, l2=True, selection=sel).k
    many = choose_groups(HEAVY, target, 2000.0, 256, l2=True, selection=sel).k
    assert many <= few
