"""Value bounds chosen from the data: the upper bound of a numeric column whose policy
says ``upper = "auto"`` (with a declared ``lower`` and an ``upper_limit``).

Method. Clamping a value to [L, U] before summing trades bias (values above U are cut)
against noise (the sensitivity grows with U): the trade-off of Amin, Kulesza, Muñoz
Medina and Vassilvitskii, "Bounding User Contributions: A Bias-Variance Trade-off in
Differential Privacy" (ICML 2019), who pick the bound at a DP quantile of the
contributions. Here U is the upper edge of the bin holding a high quantile
(:data:`QUANTILE`) of the per-row values, released once per (table, column) with the
vetted exponential mechanism on a grid of :mod:`accounting.quantiles` (Smith 2011's rank
score; McSherry & Talwar 2007), user-level: each person contributes at most C rows
(the table's row cap), so one person moves the histogram by at most C in L1 and the
draw is ε-DP at θ = 2Δ/ε with Δ = C·max(q, 1 − q) (the proof is that module's).

A lower bound (``lower = "auto"`` with a ``lower_limit``) is chosen the same way on the
grid from its limit up to the column's upper bound (or upper_limit): the lower edge of
the bin holding the :data:`LOWER_QUANTILE` (:func:`lower_bound_of`), so the grid's
round numbers are finest near the limit, where such values lie.

The grid is public and coarse: edges at L + m·10^k for m in 1, 1.5, 2, 3, 5, 7 over
:data:`DECADES` decades below the span U_limit − L, and U_limit itself (the last bin is
open above: every larger value lands there). So the chosen bound is a round, stable
number, never above the declared limit, and a function of the released bin index only
(:func:`bound_of`): reading it back is post-processing.

Why q = 0.95 and not 0.99: the draw's rank error at ε = 0.25 and C = 8 is about
θ·ln(B/0.05) ≈ 500 rows; above the data every empty bin scores (1 − q)·n, so with
q = 0.99 on a table of tens of thousands of rows, the many empty bins between the
quantile and the limit would win often and the bound would drift to the limit. At
q = 0.95 they score five times worse. Values above the bound are clamped (the bias the
README's "How a query is bounded" describes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accounting.quantiles import (
    QuantileDescriptor,
    TargetKind,
    describe_quantile,
    grid_for,
    release_quantiles,
)

QUANTILE = 0.95
LOWER_QUANTILE = 0.05  # of a lower bound chosen from the data (``lower = "auto"``)
DECADES = 6  # relative resolution of the grid: 1e-6 of the span at the bottom
MANTISSAS = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)


class ValueBoundsError(ValueError):
    """Inputs outside the preconditions (limit not above lower, bad counts, ...)."""


@dataclass(frozen=True)
class ValueGrid:
    """The public bin edges of one auto column, as offsets above its lower bound: bin j
    holds values v with edges[j−1] < v − L ≤ edges[j] (bin 0: v − L ≤ edges[0]; the last
    edge is the span U_limit − L and its bin also takes every larger value)."""

    lower: float
    limit: float
    edges: tuple[float, ...]

    @property
    def bins(self) -> int:
        return len(self.edges)


def value_grid(lower: float, limit: float) -> ValueGrid:
    """The grid of a column declared on [lower, "auto" ≤ limit]. Reads public numbers."""
    if not (math.isfinite(lower) and math.isfinite(limit) and limit > lower):
        raise ValueBoundsError(f"upper_limit {limit!r} must be a finite number above {lower!r}")
    span = limit - lower
    top = math.floor(math.log10(span))
    edges: set[float] = set()
    for k in range(top - DECADES, top + 1):
        for m in MANTISSAS:
            # 6 significant digits: 1.5e-3 and friends stay short decimals that print cleanly
            e = float(f"{m * 10.0**k:.6g}")
            if e < span:
                edges.add(e)
    edges.add(span)
    return ValueGrid(lower, limit, tuple(sorted(edges)))


def bound_of(grid: ValueGrid, index: int) -> float:
    """The upper bound released bin ``index`` stands for: L + its upper edge (≤ limit).
    Post-processing of the released index only."""
    if not 0 <= index < grid.bins:
        raise ValueBoundsError(f"bin {index} is outside the grid's {grid.bins} bins")
    return min(grid.limit, grid.lower + grid.edges[index])


def lower_bound_of(grid: ValueGrid, index: int) -> float:
    """The lower bound released bin ``index`` stands for: L + the bin's lower edge (the
    grid's own L for bin 0), so that the values below it are at most those of the bins
    below the drawn one. Post-processing of the released index only."""
    if not 0 <= index < grid.bins:
        raise ValueBoundsError(f"bin {index} is outside the grid's {grid.bins} bins")
    return grid.lower + (grid.edges[index - 1] if index > 0 else 0.0)


def describe(
    grid: ValueGrid, *, max_rows: int, epsilon: float, q: float = QUANTILE
) -> QuantileDescriptor:
    """The exponential mechanism's descriptor: the bins are the integers 0..B−1 of an
    exact integer grid, the target the rank ``q`` (:data:`QUANTILE` for an upper bound,
    :data:`LOWER_QUANTILE` for a lower one), one group, each person at most ``max_rows``
    rows. Its ``curve`` is what the release costs (ε-DP; the rank score's sensitivity is
    max(q, 1 − q)·C, the same for both)."""
    return describe_quantile(
        grid=grid_for(0, grid.bins - 1, integer=True, max_bins=grid.bins),
        kind=TargetKind.QUANTILE,
        q=q,
        max_rows=max_rows,
        max_groups=1,
        epsilon_per_group=epsilon,
    )


def release_bound(
    grid: ValueGrid, counts: Sequence[int] | np.ndarray, descriptor: QuantileDescriptor
) -> int:
    """Draw the bin of the quantile from the exact bounded histogram ``counts`` (rows per
    bin, each person at most ``descriptor.max_rows`` rows in all). Returns the bin index
    (its bound: :func:`bound_of`). Privacy claim: ``descriptor.curve``."""
    h = np.asarray(counts, dtype=np.int64)
    if h.shape != (grid.bins,):
        raise ValueBoundsError(f"expected {grid.bins} bin counts, got shape {h.shape}")
    return int(release_quantiles(h[None, :], descriptor).bins[0])
