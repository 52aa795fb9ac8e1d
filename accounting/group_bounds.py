"""The number of groups K one person may contribute to (L0), chosen from the data for
queries on tables whose policy says ``max_groups = "auto"``.

A DP histogram of *distinct groups per person* under one query's GROUP BY keys is
released once per (tables, keys) over the same power-of-two bins as the rows per person
(:mod:`accounting.bounds`: bin j holds the people with 2^j … 2^(j+1) − 1 groups, the last
bin open above). One person is in exactly one bin, so the histogram has L1 and L2
sensitivity 1. It is read as :class:`accounting.bounds.RowHistogram` reads its own
(bins below the detection threshold empty, the first empty bin past the mode *hidden*:
up to that threshold of people may be there unseen): a "row" of that histogram is here
one (person, group) *pair*.

Each query picks its own K from it, as :func:`accounting.bounds.choose_cap` picks the
row cap: the candidate that minimises the expected error (bias + noise) of what the query
releases — the contribution-bound trade-off of Amin, Kulesza, Muñoz Medina and
Vassilvitskii, "Bounding User Contributions: A Bias-Variance Trade-off in Differential
Privacy" (ICML 2019). The simplifications used:

* **Candidates** are the bins' lower edges 1, 2, 4, … up to the policy's limit, and the
  limit itself (:func:`accounting.bounds.candidates`).
* **Noise** of each released statistic is measured once, on the query planned with
  K = 1 and C = 1, and scaled by K under L1 (the Laplace: a person in K groups moves K
  noisy cells) or by √K under L2 (the Gaussian). The partition threshold's growth with K
  is weighed through the typical group: with private keys (``selection``) the threshold
  in people at K is computed for the same budget share, and the share by which the
  typical group's people (pairs kept over the groups) fall short of it counts as an
  error (a group below the threshold is mostly not shown at all).
* **Bias of totals** (COUNT, SUM): a person above K keeps K of their groups, chosen by a
  hash (proxy/rewrite/l0.py), so the lost pairs are spread over all groups alike; the
  relative bias of a group's total is the share of pairs beyond K, Σ people·(groups −
  K)⁺ over the pairs — each bin's people spread evenly over its counts, so a bin of
  one group per person loses nothing at K = 1 — counting the hidden bin as full (a bias
  nobody sees is worse than noise the interval states).
* **Bias of means** (AVG, ratios): dropping a person's pair removes it from numerator and
  denominator alike, so only the difference between heavy people's rows and the others'
  remains, taken as :data:`accounting.bounds.REWEIGHT` × the share of pairs cut.
* **Size of a group**: the pairs the histogram implies (kept by K, for means) spread over
  the expected number of groups G, which the caller estimates as ``choose_cap``'s is
  (the public domain's size; with private keys the people over the partition threshold
  in people, the most groups the people allow; else 1), times one row's scale. Each pair
  counts as one row (the noise is measured at C = 1).
* A query's error is the root mean square over its outputs; the smallest wins, the
  smaller K on ties; with no output that depends on K the limit is kept.

Post-processing of a released histogram: a deterministic function of released counts,
public numbers and the request, so it costs nothing and replays identically.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from accounting.bounds import (
    REWEIGHT,
    BoundsError,
    CapTarget,
    OutputKind,
    RowHistogram,
    candidates,
)
from accounting.partition import Threshold, gaussian_threshold, laplace_threshold


@dataclass(frozen=True)
class GroupChoice:
    """The chosen K with what it rests on: the limit it may not exceed, each candidate's
    estimated relative error, the share of (person, group) pairs it cuts (point estimate
    and with the hidden bin full) and the share of people with more than K groups (with
    the hidden bin full)."""

    k: int
    limit: int
    errors: tuple[tuple[int, float], ...]
    pairs_cut: float
    pairs_cut_upper: float
    people_cut: float


def _edges(j: int) -> tuple[int, int]:
    """The fewest and most groups of a person in bin j (the last, open bin: taken as
    its lower edge to twice that)."""
    return 2**j, 2 ** (j + 1) - 1


def _beyond(j: int, k: int) -> tuple[float, float, float]:
    """Per person of bin j, taken uniform over the bin's counts: (pairs, pairs beyond
    k, share of the bin's people with more than k)."""
    a, b = _edges(j)
    width = b - a + 1
    mean = (a + b) / 2.0
    if k >= b:
        return mean, 0.0, 0.0
    if k < a:
        return mean, mean - k, 1.0
    m = b - k
    return mean, m * (m + 1) / 2.0 / width, m / width


@dataclass(frozen=True)
class PairCut:
    """What K cuts, estimated from the histogram: the pairs it implies and keeps, the
    share of pairs beyond K and the share of people above it."""

    pairs: float
    kept: float
    share: float
    people: float


def pair_cut(hist: RowHistogram, k: int, *, upper: bool = False) -> PairCut:
    """Pairs and people K cuts, each bin's people taken uniform over its counts (a bin
    of one group per person loses nothing at K = 1). ``upper``: with the hidden bin's
    ``threshold`` people counted (the most the histogram cannot rule out)."""
    bins = [(j, c) for j, c in enumerate(hist.counts) if c > 0]
    if upper and hist.hidden is not None:
        bins.append((hist.hidden, hist.threshold))
    pairs = cut = people = above = 0.0
    for j, c in bins:
        mean, beyond, share = _beyond(j, k)
        pairs += c * mean
        cut += c * beyond
        people += c
        above += c * share
    return PairCut(
        pairs,
        pairs - cut,
        cut / pairs if pairs > 0 else 0.0,
        above / people if people > 0 else 0.0,
    )


@dataclass(frozen=True)
class Selection:
    """The partition selection of the query planned at K = 1 (its threshold and the δ
    it was asked for): with K the same budget gives a larger threshold."""

    threshold: Threshold
    delta: float

    def tau(self, k: int) -> int:
        """The threshold in people at K, for the same share of the budget: the Laplace
        scale grows with K (b = K/ε), the Gaussian σ with √K (ρ = K/2σ²)."""
        t = self.threshold
        if t.mechanism == "gaussian":
            return gaussian_threshold(t.scale * math.sqrt(k), k, self.delta).tau
        return laplace_threshold(1.0 / t.scale, k, self.delta).tau


def dropped(hist: RowHistogram, k: int, groups: float, selection: Selection | None) -> float:
    """How far short of the threshold at K the typical group falls, as a share of the
    threshold (0 when it reaches it): its people are the pairs K keeps over the groups.
    A group below the threshold is mostly not shown at all, an error of 100%."""
    if selection is None:
        return 0.0
    people = pair_cut(hist, k, upper=True).kept / max(groups, 1.0)
    tau = selection.tau(k)
    return max(0.0, 1.0 - people / tau) if tau > 0 else 0.0


def group_error(
    hist: RowHistogram,
    target: CapTarget,
    k: int,
    groups: float,
    l2: bool,
    selection: Selection | None = None,
) -> float:
    """Estimated relative error of one output under K (see the module docstring):
    ``target.noise_per_cap`` is its noise at K = 1, ``l2`` whether it grows with √K
    (the Gaussian) rather than K; ``selection``: the partition selection at K = 1 of a
    query with private keys.

    Preconditions: k ≥ 1, groups ≥ 1, row_scale > 0, noise_per_cap ≥ 0."""
    per_group = max(groups, 1.0)
    if target.kind is OutputKind.TOTAL:
        full = pair_cut(hist, k, upper=True)
        bias, pairs = full.share, full.pairs
    else:
        seen = pair_cut(hist, k)
        bias = REWEIGHT * seen.share
        pairs = seen.kept or pair_cut(hist, k, upper=True).kept
    size = pairs / per_group * target.row_scale
    growth = math.sqrt(k) if l2 else float(k)
    noise = target.noise_per_cap * growth / size if size > 0 else math.inf
    return math.hypot(bias, noise, dropped(hist, k, groups, selection))


def choose_groups(
    hist: RowHistogram,
    targets: Sequence[CapTarget],
    groups: float,
    limit: int,
    *,
    l2: bool,
    selection: Selection | None = None,
) -> GroupChoice:
    """The candidate K (≤ ``limit``) with the smallest root-mean-square estimated error
    over ``targets`` (the smaller K on ties); the limit when there is no target or the
    histogram shows nobody (nothing to weigh the noise against).

    Preconditions: limit ≥ 1, groups ≥ 1."""
    if limit < 1:
        raise BoundsError(f"the limit must be >= 1, got {limit}")
    errors: list[tuple[int, float]] = []
    for k in candidates(limit):
        if targets:
            squares = [group_error(hist, t, k, groups, l2, selection) ** 2 for t in targets]
            errors.append((k, math.sqrt(sum(squares) / len(squares))))
        else:
            errors.append((k, 0.0))
    weighed = bool(targets) and hist.people > 0
    best = min(errors, key=lambda e: (e[1], e[0]))[0] if weighed else limit
    seen, full = pair_cut(hist, best), pair_cut(hist, best, upper=True)
    return GroupChoice(best, limit, tuple(errors), seen.share, full.share, full.people)
