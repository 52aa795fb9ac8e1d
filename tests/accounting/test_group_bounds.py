"""Issue #12 §3: K (groups per person) chosen by expected error, bias + noise
(accounting/group_bounds.py), on hand-built histograms whose right answer is known."""

from __future__ import annotations

import pytest

from accounting.bounds import BINS, BoundsError, CapTarget, OutputKind, RowHistogram
from accounting.group_bounds import choose_groups, group_error, pair_cut


def hist(counts: dict[int, float]) -> RowHistogram:
    return RowHistogram.read([counts.get(j, 0.0) for j in range(BINS)], noise_std=1.0)


# 10,000 people: most in a few groups, a heavy tail up to 255 groups each.
HEAVY = hist({0: 5000, 1: 2500, 2: 1200, 3: 700, 4: 300, 5: 200, 6: 60, 7: 40})
COUNT = OutputKind.TOTAL


def count_with_std(std: float) -> CapTarget:
    """A COUNT whose noise at K = 1 (and C = 1) has this standard deviation."""
    return CapTarget(COUNT, std, 1.0)


def test_the_pairs_cut_are_those_beyond_k() -> None:
    one_each = hist({0: 1000})
    assert pair_cut(one_each, 1).share == 0.0  # one group per person: nothing cut at K = 1
    assert pair_cut(one_each, 1).people == 0.0
    # Bin 1 holds people with 2 or 3 groups: K = 2 cuts one pair of half of them.
    two_three = hist({1: 1000})
    cut = pair_cut(two_three, 2)
    assert cut.pairs == pytest.approx(2500) and cut.kept == pytest.approx(2000)
    assert cut.people == pytest.approx(0.5)
    assert pair_cut(two_three, 3).share == 0.0
    # The hidden bin (one past the tail) counts only in the upper estimate.
    assert pair_cut(two_three, 3, upper=True).share > 0.0


def test_a_tiny_epsilon_picks_a_small_k_and_a_large_one_a_larger_k() -> None:
    groups = 50.0  # private keys: about 10,000 people over 200 per group
    noisy = choose_groups(HEAVY, [count_with_std(400.0)], groups, 256, l2=False)
    quiet = choose_groups(HEAVY, [count_with_std(0.5)], groups, 256, l2=False)
    assert noisy.k <= 2 < 32 <= quiet.k
    # Each is the smallest error among the candidates it lists, all within the limit.
    for choice in (noisy, quiet):
        assert dict(choice.errors)[choice.k] == min(e for _, e in choice.errors)
        assert all(k <= 256 for k, _ in choice.errors)
    # The small K cuts many pairs, and says so; the large one few.
    assert noisy.pairs_cut > 0.3 and quiet.pairs_cut < 0.05
    assert noisy.people_cut > quiet.people_cut


def test_never_above_the_limit() -> None:
    # Noise-free: the largest candidate wins — which is the limit, not a bin edge above.
    choice = choose_groups(HEAVY, [count_with_std(0.0)], 50.0, 20, l2=False)
    assert choice.k == 20 and choice.limit == 20
    assert [k for k, _ in choice.errors] == [1, 2, 4, 8, 16, 20]
    with pytest.raises(BoundsError):
        choose_groups(HEAVY, [count_with_std(1.0)], 50.0, 0, l2=False)


def test_l2_noise_grows_slower_so_the_gaussian_allows_a_larger_k() -> None:
    target = [count_with_std(20.0)]
    laplace = choose_groups(HEAVY, target, 50.0, 256, l2=False)
    gaussian = choose_groups(HEAVY, target, 50.0, 256, l2=True)
    assert gaussian.k > laplace.k
    assert group_error(HEAVY, target[0], 16, 50.0, True) < group_error(
        HEAVY, target[0], 16, 50.0, False
    )


def test_means_want_a_smaller_k_than_totals() -> None:
    total = CapTarget(OutputKind.TOTAL, 5.0, 1.0)
    mean = CapTarget(OutputKind.MEAN, 5.0, 1.0)
    assert (
        choose_groups(HEAVY, [mean], 50.0, 256, l2=False).k
        < choose_groups(HEAVY, [total], 50.0, 256, l2=False).k
    )


def test_nothing_to_weigh_keeps_the_limit() -> None:
    assert choose_groups(HEAVY, [], 50.0, 64, l2=False).k == 64
    assert choose_groups(hist({}), [count_with_std(1.0)], 1.0, 8, l2=False).k == 8
    # One group per person: K = 1 cuts nothing and has the least noise.
    assert choose_groups(hist({0: 5000}), [count_with_std(3.0)], 10.0, 64, l2=False).k == 1
