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
  is weighed through the typical group (below: partition selection).
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
  the expected number of groups G (:func:`group_count`), times one row's scale. Each
  pair counts as one row (the noise is measured at C = 1).
* **The number of groups G** is not released, and the histogram of groups per person
  does not determine it: the same histogram fits G = the most groups anyone has (every
  person's groups overlap) up to G = the pairs (nobody shares a group). What it does
  say: a person with g groups touches g distinct groups, so G is at least the lower
  edge of the highest bin the histogram shows (a bin shown holds at least its detection
  threshold of people; the hidden bin, which may be empty, is not used). With a public
  key domain G is its size. Otherwise G is taken as the larger of that bound and the
  people over the partition threshold at K = 1 (the typical group, at K = 1, right at
  the threshold: the most groups the people allow at that size). Both are public or
  post-processing of the released histogram.
* **Partition selection** (private keys): a group is released when its noisy count of
  people *after the L0 cut* reaches the threshold τ(K), which grows with K (the same
  budget share noises a count of sensitivity K). The typical group's people at K are
  the pairs K keeps — the point estimate, not the hidden bin counted full: a bin
  nobody may be in must not make groups look larger — over G, and its chance of
  passing is the exact tail of the threshold's discrete noise
  (:func:`accounting.partition.keep_probability`); a group not released is missing, an
  error of 100%, so the term is 1 − that chance. A K whose extra pairs grow more slowly
  than its threshold loses groups — the daily and weekly keys of people with dozens of
  active days each, where the largest K kept every heavy person's pairs and released
  few groups. Since G is only estimated (and on such keys underestimated: 2,000 people
  over a threshold of 6 suggest 255 days where there are 1,238), no K is chosen above
  the peak of pairs kept over the threshold (:func:`release_peak`), which needs no G.
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
from accounting.partition import (
    Threshold,
    gaussian_threshold,
    keep_probability,
    laplace_threshold,
)


@dataclass(frozen=True)
class GroupChoice:
    """The chosen K with what it rests on: the limit it may not exceed, each candidate's
    estimated relative error, the share of (person, group) pairs it cuts (point estimate
    and with the hidden bin full), the share of people with more than K groups (with
    the hidden bin full) and, with private keys, the candidate of the largest release
    ratio (:func:`release_peak`: no K above it is chosen)."""

    k: int
    limit: int
    errors: tuple[tuple[int, float], ...]
    pairs_cut: float
    pairs_cut_upper: float
    people_cut: float
    release_peak: int | None = None


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

    def at(self, k: int) -> Threshold:
        """The threshold at K for the same share of the budget: the Laplace scale grows
        with K (b = K/ε), the Gaussian σ with √K (ρ = K/2σ²)."""
        t = self.threshold
        if t.mechanism == "gaussian":
            return gaussian_threshold(t.scale * math.sqrt(k), k, self.delta)
        return laplace_threshold(1.0 / t.scale, k, self.delta)

    def tau(self, k: int) -> int:
        """The threshold in people at K (see :meth:`at`)."""
        return self.at(k).tau


def highest_shown(hist: RowHistogram) -> int:
    """The fewest groups a person of the highest non-empty bin has (0 when the histogram
    shows nobody): at least that many distinct groups exist."""
    shown = [j for j, c in enumerate(hist.counts) if c > 0]
    return _edges(shown[-1])[0] if shown else 0


def group_count(hist: RowHistogram, tau: int | None, domain: int | None = None) -> float:
    """The number of groups G the query's outputs spread over (see the module docstring):
    a public domain's size; else, with private keys (``tau``: the partition threshold in
    people at K = 1), the larger of the people over ``tau`` and the lower edge of the
    highest bin shown; else (no partition selection, no domain: one output) 1.

    Preconditions: tau ≥ 1 when given, domain ≥ 0 when given."""
    if domain is not None:
        return float(max(1, domain))
    if tau is None:
        return 1.0
    return max(1.0, hist.people / max(1.0, float(tau)), float(highest_shown(hist)))


def dropped(hist: RowHistogram, k: int, groups: float, selection: Selection | None) -> float:
    """The chance that the typical group is not released at K (0 without partition
    selection): its people are the pairs K keeps (point estimate) over the groups, and it
    passes when their noisy count reaches the threshold at K. A group not shown is an
    error of 100%."""
    if selection is None:
        return 0.0
    people = pair_cut(hist, k).kept / max(groups, 1.0)
    return 1.0 - keep_probability(selection.at(k), round(people))


def release_peak(hist: RowHistogram, ks: Sequence[int], selection: Selection) -> int:
    """The candidate with the largest *release ratio*, pairs kept over the threshold at
    K (the largest K on ties), which does not depend on G. A person with g groups keeps
    each with chance min(1, K/g) (the cut's hash), so when heavy people are spread over
    the groups alike every group's people after the cut are its people before it times
    the same kept(K)/pairs: a group passes (noise aside) when its people reach
    τ(K)·pairs/kept(K), and the groups a K past the peak releases are a subset of the
    peak's — whatever G is and however the group sizes spread. Beyond the peak a larger
    K only trades groups shown for less bias on the groups still shown, and G (which
    says whether any group is lost) is only estimated; an empty, charged answer being
    the worse error, K stops at the peak."""
    ratios = [(pair_cut(hist, k).kept / max(1, selection.tau(k)), k) for k in ks]
    return max(ratios)[1]


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
    """The candidate K (≤ ``limit``, and with private keys ≤ the :func:`release_peak`)
    with the smallest root-mean-square estimated error over ``targets`` (the smaller K
    on ties); the limit when there is no target or the histogram shows nobody (nothing
    to weigh the noise against).

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
    peak = None
    if weighed and selection is not None:
        peak = release_peak(hist, [k for k, _ in errors], selection)
    eligible = [e for e in errors if peak is None or e[0] <= peak]
    best = min(eligible, key=lambda e: (e[1], e[0]))[0] if weighed else limit
    seen, full = pair_cut(hist, best), pair_cut(hist, best, upper=True)
    return GroupChoice(best, limit, tuple(errors), seen.share, full.share, full.people, peak)
