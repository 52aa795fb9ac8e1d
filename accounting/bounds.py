"""Contribution bounds chosen from the data: the per-person row cap C (Linf) picked from a
DP histogram of how many rows each person has, to minimise the expected error of the
answers it bounds (bias from the rows it cuts plus the noise it forces).

The trade-off is that of Amin, Kulesza, Muñoz Medina and Vassilvitskii, "Bounding User
Contributions: A Bias-Variance Trade-off in Differential Privacy" (ICML 2019): a small
cap cuts heavy persons' rows (bias), a large cap scales the noise (variance). Here the
distribution of rows per person is released once per table as a histogram over
power-of-two bins — one person is in exactly one bin, so the histogram has L1 and L2
sensitivity 1 — and every later query reuses it for free (post-processing).

The estimate of the bias uses each person's total rows in the table, an upper bound on
their rows in any one group: the cap chosen is never too small for a grouping, at worst
a little larger than a fine grouping needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from accounting.mechanisms import Z_975


@dataclass(frozen=True)
class RowBins:
    """Power-of-two bins of rows per person up to a limit L: bin j holds persons with
    2^j ≤ n < 2^(j+1) rows, the last bin everyone with n ≥ 2^last (last = ⌊log2 L⌋)."""

    limit: int

    @property
    def count(self) -> int:
        return math.floor(math.log2(self.limit)) + 1

    def lower(self, j: int) -> int:
        return 2**j

    def typical(self, j: int) -> float:
        """A representative row count of bin j (its geometric middle; the last bin, open
        above, is taken at twice its lower edge)."""
        if j == self.count - 1:
            return 2.0 * 2**j
        return 2**j * math.sqrt(2.0)

    def candidates(self) -> tuple[int, ...]:
        """Caps considered: the bins' lower edges, and the limit."""
        return tuple(sorted({*(2**j for j in range(self.count)), self.limit}))


def expected_error(bins: RowBins, counts: Sequence[float], cap: int, noise_unit: float) -> float:
    """Bias plus 95% noise of a total count under cap C: the rows the cap cuts,
    Σ_bins count·max(0, typical − C), plus 1.96·σ_unit·C.

    Preconditions: ``counts`` has one (noisy) count per bin; σ_unit > 0 is the noise
    standard deviation of a count of sensitivity 1 at the reference budget. Claim: an
    estimate of the absolute error of a released total, for choosing C; no privacy
    claim (it reads only released counts and public numbers).
    """
    bias = sum(max(0.0, c) * max(0.0, bins.typical(j) - cap) for j, c in enumerate(counts))
    return bias + Z_975 * noise_unit * cap


def rows_cut_fraction(bins: RowBins, counts: Sequence[float], cap: int) -> float:
    """The share of a table's rows a cap of C leaves out, estimated from the histogram:
    Σ count·max(0, typical − C) / Σ count·typical. Post-processing of released counts;
    an estimate for warnings (rows per group are at most a person's total, so for a
    grouped query it is an upper bound)."""
    total = sum(max(0.0, c) * bins.typical(j) for j, c in enumerate(counts))
    cut = sum(max(0.0, c) * max(0.0, bins.typical(j) - cap) for j, c in enumerate(counts))
    return cut / total if total > 0 else 0.0


def choose_rows_cap(bins: RowBins, counts: Sequence[float], noise_unit: float) -> int:
    """The candidate cap with the smallest :func:`expected_error` (the smaller on ties).

    Post-processing of the released histogram: a deterministic function of released
    counts and public numbers, so it costs nothing and replays identically."""
    if len(counts) != bins.count:
        raise ValueError(f"expected {bins.count} bin counts, got {len(counts)}")
    best = min(bins.candidates(), key=lambda c: (expected_error(bins, counts, c, noise_unit), c))
    return int(best)
