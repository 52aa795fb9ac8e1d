"""The number of groups K one person may contribute to (L0), chosen from the data for
queries on tables whose policy says ``max_groups = "auto"``.

A DP histogram of *distinct groups per person* under one query's GROUP BY keys is
released once per (tables, keys) over the same power-of-two bins as the rows per person
(:mod:`accounting.bounds`: bin j holds the people with 2^j … 2^(j+1) − 1 groups, the last
bin open above). One person is in exactly one bin, so the histogram has L1 and L2
sensitivity 1. It is read as :class:`accounting.bounds.RowHistogram` reads its own
(bins below the detection threshold empty, the first empty bin past the mode *hidden*:
up to that threshold of people may be there unseen).

The choice is the contribution-bound trade-off of Amin, Kulesza, Muñoz Medina and
Vassilvitskii, "Bounding User Contributions: A Bias-Variance Trade-off in Differential
Privacy" (ICML 2019), in its simplest form, a quantile of the per-person contribution:
K is the smallest bin's upper edge (1, 3, 7, 15, …, never above the policy's limit) that
covers all the groups of at least :data:`COVERAGE` of the people, counting the hidden
bin's people as not covered. A person above K keeps K of their groups (the L0 rule of
proxy/rewrite/l0.py), so at most 1 − COVERAGE of the people lose any group, while the
noise of every statistic grows with K (in L1) or √K (in L2). Unlike the row cap, K is
not weighed against each query's noise: which groups a person loses depends on a hash,
not on the size of the group, so the bias is spread over all groups and is small per
group when few people are cut.

Post-processing of a released histogram: a deterministic function of released counts and
the policy's limit, so it costs nothing and replays identically.
"""

from __future__ import annotations

from dataclasses import dataclass

from accounting.bounds import BINS, BoundsError, RowHistogram

COVERAGE = 0.9  # share of people whose groups K must all keep


@dataclass(frozen=True)
class GroupChoice:
    """The chosen K, the limit it may not exceed, and the estimated share of people
    whose every group it keeps (hidden people counted as not kept)."""

    k: int
    limit: int
    covered: float


def upper_edge(j: int) -> int:
    """The most groups a person in bin j has (2^(j+1) − 1)."""
    return 2 ** (j + 1) - 1


def choose_groups(hist: RowHistogram, limit: int, coverage: float = COVERAGE) -> GroupChoice:
    """The smallest bin upper edge (at most ``limit``) covering ``coverage`` of the
    people; the limit when no smaller edge does, or when the histogram shows nobody.

    Preconditions: limit ≥ 1, 0 < coverage ≤ 1."""
    if limit < 1:
        raise BoundsError(f"the limit must be >= 1, got {limit}")
    if not 0 < coverage <= 1:
        raise BoundsError(f"the coverage must be in (0, 1], got {coverage}")
    hidden = hist.threshold if hist.hidden is not None else 0.0
    total = hist.people + hidden
    if hist.people <= 0:
        return GroupChoice(limit, limit, 0.0)
    kept = 0.0
    for j in range(BINS):
        edge = upper_edge(j)
        if edge >= limit:
            break
        kept += hist.counts[j]
        if kept / total >= coverage:
            return GroupChoice(edge, limit, kept / total)
    covered = sum(c for j, c in enumerate(hist.counts) if upper_edge(j) <= limit)
    return GroupChoice(limit, limit, covered / total)
