"""Value bounds chosen from the data: the upper bound of a numeric column whose policy
says ``upper = "auto"`` (with a declared ``lower`` and an ``upper_limit``), and the lower
bound of one that says ``lower = "auto"`` (with a ``lower_limit``).

Method. Clamping a value to [L, U] before summing trades bias (values above U are cut)
against noise (the sensitivity grows with U): the trade-off of Amin, Kulesza, Muñoz
Medina and Vassilvitskii, "Bounding User Contributions: A Bias-Variance Trade-off in
Differential Privacy" (ICML 2019), who pick the bound that minimises the expected error
(bias + noise). The upper side follows them: a noisy histogram of the per-row values on
the public grid below is released once per (table, column) — user-level, each person
contributing at most C values (the table's row cap), so one person moves it by at most C
in L1 and in L2 and the noise (discrete Laplace or Gaussian, accounting/mechanisms.py) is
calibrated to C — and each query picks its own U from it for free (:func:`choose_upper`,
with the simplifications stated above it). Planning without a query to weigh (the
schema, and sums of expressions of the column) uses the edge of the bin holding the
:data:`QUANTILE` of the histogram (:meth:`ValueHistogram.quantile`).

The lower side mirrors it on the same kind of histogram (:func:`choose_lower`): each
query picks its own L from the mass clamped below L against the noise growing with the
range (a centred sum's sensitivity C·(U − L)/2, a total's C·max(|L|, |U|)); without a
query to weigh, the lower edge of the bin holding the :data:`LOWER_QUANTILE`
(:meth:`ValueHistogram.lower_quantile`). When both sides are "auto" the grid spans
lower_limit..upper_limit and ONE histogram, released once, serves both (both bounds are
post-processing of it); a lower-only "auto" column's grid runs from its lower_limit up
to its declared upper bound.

The grid is public and coarse: edges at L + m·10^k for m in 1, 1.5, 2, 3, 5, 7 over
:data:`DECADES` decades below the span U_limit − L, and U_limit itself (the last bin is
open above: every larger value lands there). So the chosen bound is a round, stable
number, never above the declared limit, and a function of released values only (the
drawn bin, :func:`bound_of`, or the histogram): reading it back is post-processing.

The exponential-mechanism quantile draw (:func:`describe`, :func:`release_bound`: Smith
2011's rank score, McSherry & Talwar 2007, through :mod:`accounting.quantiles`) is kept
for callers that want a single quantile; the auto bounds no longer use it. Values beyond
a bound are clamped (the bias the README's "How a query is bounded" describes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

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


# --- the upper bound by expected error, from a released histogram -------------------------
#
# Amin et al. pick the bound that minimises the expected error of the query (bias from the
# values clamped plus the noise the bound forces); a single quantile cannot tell how much
# mass lies above each candidate, so the upper side releases, once per (table, column), a
# noisy histogram of the values on the public grid (each person at most C values, so one
# person moves it by at most C in L1 and in L2: discrete Laplace or Gaussian noise through
# accounting/mechanisms.py), and every query picks its own bound from it for free.
# Simplifications: each bin's rows are taken at the middle of the bin (the open last bin at
# its upper edge); the histogram's rows (≤ C per person) stand for the query's rows; the
# rows are spread over the query's expected groups as for the row cap; a mean's bias is
# taken as that of the total (clamping lowers the sum, not the count); squares (VAR) are
# not weighed.

DETECTION = 2.0  # a bin is read as non-empty from this many noise standard deviations


@dataclass(frozen=True)
class ValueHistogram:
    """A released histogram of values on a :class:`ValueGrid`, read: bins below the
    detection threshold (:data:`DETECTION` noise standard deviations) are empty, and so is
    every bin past the first empty one above the mode (noise in the far, empty bins would
    otherwise read as a heavy tail); the first such bin (``hidden``) may hold up to
    ``threshold`` rows unseen."""

    grid: ValueGrid
    counts: tuple[float, ...]
    threshold: float
    hidden: int | None
    # The lower side's mirror of ``hidden``: the first empty bin below the mode; the
    # lower side reads the bins below it as noise (the counts keep them: the upper side
    # and the quantiles read them as before).
    hidden_low: int | None = None

    @classmethod
    def read(cls, grid: ValueGrid, noisy: Sequence[float], noise_std: float) -> ValueHistogram:
        """Post-processing of released counts: no privacy cost."""
        if len(noisy) != grid.bins:
            raise ValueBoundsError(f"expected {grid.bins} bin counts, got {len(noisy)}")
        if not noise_std > 0:
            raise ValueBoundsError(f"the noise std must be > 0, got {noise_std}")
        threshold = DETECTION * noise_std
        seen = [float(c) if c >= threshold else 0.0 for c in noisy]
        mode = max(range(grid.bins), key=lambda j: (seen[j], -j))
        hidden = next((j for j in range(mode + 1, grid.bins) if seen[j] == 0.0), None)
        hidden_low = next((j for j in range(mode - 1, -1, -1) if seen[j] == 0.0), None)
        if seen[mode] == 0.0:
            hidden, hidden_low = 0, None
        if hidden is not None:
            seen[hidden:] = [0.0] * (grid.bins - hidden)
        return cls(grid, tuple(seen), threshold, hidden, hidden_low)

    def value(self, j: int) -> float:
        """The value bin j's rows are taken at: its middle (bin 0: half its edge; the last
        bin, open above: its upper edge, the limit)."""
        e = self.grid.edges
        if j == self.grid.bins - 1:
            return self.grid.lower + e[j]
        below = e[j - 1] if j > 0 else 0.0
        return self.grid.lower + (below + e[j]) / 2.0

    def _rows(self, upper: bool) -> list[tuple[float, float]]:
        """(rows, value) of each non-empty bin, with the hidden bin full if ``upper``."""
        rows = [(c, self.value(j)) for j, c in enumerate(self.counts) if c > 0]
        if upper and self.hidden is not None:
            rows.append((self.threshold, self.value(self.hidden)))
        return rows

    def _low_rows(self) -> list[tuple[float, float]]:
        """(rows, value) of the bins the lower side reads: those above ``hidden_low``,
        with that bin full (up to the threshold's rows unseen)."""
        start = 0 if self.hidden_low is None else self.hidden_low + 1
        rows = [(c, self.value(j)) for j, c in enumerate(self.counts) if c > 0 and j >= start]
        if self.hidden_low is not None:
            rows.append((self.threshold, self.value(self.hidden_low)))
        return rows

    def lower_quantile(self, q: float) -> float:
        """The lower edge of the bin holding the ``q`` quantile of the rows seen (the
        grid's lower end when nothing is seen): the default lower bound."""
        total = sum(self.counts)
        running = 0.0
        for j, c in enumerate(self.counts):
            running += c
            if total > 0 and running >= q * total:
                return lower_bound_of(self.grid, j)
        return self.grid.lower

    def clipped_below(self, bound: float) -> float:
        """The share of the mass a lower bound clamps away: Σ rows·(bound − value)⁺ over
        the mass, the hidden low bin counted full."""
        rows = self._low_rows()
        mass = sum(c * abs(v) for c, v in rows)
        cut = sum(c * max(0.0, bound - v) for c, v in rows)
        return cut / mass if mass > 0 else 0.0

    def quantile(self, q: float) -> float:
        """The upper edge of the bin holding the ``q`` quantile of the rows seen (the
        limit when nothing is seen): the default bound, as the single quantile was."""
        total = sum(self.counts)
        running = 0.0
        for j, c in enumerate(self.counts):
            running += c
            if total > 0 and running >= q * total:
                return bound_of(self.grid, j)
        return self.grid.limit

    def mass(self) -> float:
        """Σ rows·|value| over the bins seen: the size of a total over all the rows."""
        return sum(c * abs(v) for c, v in self._rows(False))

    def rows(self) -> float:
        return sum(self.counts)

    def clipped(self, bound: float) -> float:
        """The share of the mass a bound clamps away: Σ rows·(value − bound)⁺ over the
        mass, the hidden bin counted full (a bias nobody sees is worse than noise the
        interval states)."""
        rows = self._rows(True)
        mass = sum(c * abs(v) for c, v in rows)
        cut = sum(c * max(0.0, v - bound) for c, v in rows)
        return cut / mass if mass > 0 else 0.0


class ValueUse(StrEnum):
    """How a statistic's noise grows with the upper bound U (lower bound L fixed): a sum's
    sensitivity is C·max(|L|, |U|), a centred sum's (for AVG) C·(U − L)/2."""

    TOTAL = "total"
    CENTRED = "centred"

    def scale(self, lower: float, upper: float) -> float:
        if self is ValueUse.TOTAL:
            return max(abs(lower), abs(upper))
        return (upper - lower) / 2.0


@dataclass(frozen=True)
class ValueTarget:
    """One released statistic reading the column: how it uses the bound, and the
    standard deviation of its noise when planned with the bound ``at``."""

    use: ValueUse
    std: float
    at: float


@dataclass(frozen=True)
class ValueChoice:
    """The chosen upper bound, each candidate's estimated relative error and the share
    of the mass it clamps away (hidden bin full)."""

    bound: float
    limit: float
    errors: tuple[tuple[float, float], ...]
    clipped: float


def candidates_of(hist: ValueHistogram) -> tuple[float, ...]:
    """Upper bounds considered: every bin's upper edge from the median of the rows seen
    up to the limit (below the median the bias alone exceeds half the mass)."""
    start = hist.quantile(0.5)
    return tuple(b for j in range(hist.grid.bins) if (b := bound_of(hist.grid, j)) >= start)


def choose_upper(
    hist: ValueHistogram,
    targets: Sequence[ValueTarget],
    groups: float,
    lower: float | None = None,
) -> ValueChoice:
    """The upper bound of least root-mean-square estimated relative error over
    ``targets``, each sqrt(clipped(U)² + (σ(U)/(mass/groups))²) with σ(U) = σ·scale(U)/
    scale(at) (the smaller bound on ties); the :data:`QUANTILE` bin's edge when there is
    no target or nothing is seen. A deterministic function of released counts, public
    numbers and the request: free, and it replays identically.

    ``lower`` is the lower bound the query uses (default: the grid's lower end).

    Preconditions: groups ≥ 1, targets' std ≥ 0 and scale(at) > 0."""
    lower = hist.grid.lower if lower is None else lower
    per_group = hist.mass() / max(groups, 1.0)
    options = candidates_of(hist)
    errors: list[tuple[float, float]] = []
    for bound in options:
        squares = []
        bias = hist.clipped(bound)
        for t in targets:
            std = t.std * t.use.scale(lower, bound) / t.use.scale(lower, t.at)
            noise = std / per_group if per_group > 0 else math.inf
            squares.append(math.hypot(bias, noise) ** 2)
        errors.append((bound, math.sqrt(sum(squares) / len(squares)) if squares else 0.0))
    if not targets or per_group <= 0:
        best = hist.quantile(QUANTILE)
    else:
        best = min(errors, key=lambda e: (e[1], e[0]))[0]
    return ValueChoice(best, hist.grid.limit, tuple(errors), hist.clipped(best))


# --- the lower bound by expected error, the mirror ----------------------------------------
#
# The same estimate on the other side: a lower bound L clamps the mass below it (bias) and
# the noise grows with the range U − L (a centred sum) or with max(|L|, |U|) (a total). The
# upper bound U is the query's own (declared, or chosen first by choose_upper with L at its
# default): one step of coordinate descent, not a joint minimum.


@dataclass(frozen=True)
class LowerTarget:
    """One released statistic reading the column: how it uses the bounds, and the
    standard deviation of its noise when planned with the bounds [``lower_at``,
    ``upper_at``]."""

    use: ValueUse
    std: float
    lower_at: float
    upper_at: float


def lower_candidates_of(hist: ValueHistogram) -> tuple[float, ...]:
    """Lower bounds considered: every bin's lower edge from the grid's lower end (the
    lower_limit) up to the median of the rows seen."""
    stop = hist.lower_quantile(0.5)
    return tuple(b for j in range(hist.grid.bins) if (b := lower_bound_of(hist.grid, j)) <= stop)


def choose_lower(
    hist: ValueHistogram, targets: Sequence[LowerTarget], groups: float, upper: float
) -> ValueChoice:
    """The lower bound of least root-mean-square estimated relative error over
    ``targets`` at the query's upper bound ``upper``, each sqrt(clipped_below(L)² +
    (σ(L)/(mass/groups))²) with σ(L) = σ·scale(L, upper)/scale(lower_at, upper_at) (the
    larger, tighter bound on ties); the :data:`LOWER_QUANTILE` bin's lower edge when there
    is no target or nothing is seen. Never below the grid's lower end (the lower_limit).
    A deterministic function of released counts, public numbers and the request: free.

    Preconditions: groups ≥ 1, targets' std ≥ 0 and scale(lower_at, upper_at) > 0."""
    mass = sum(c * abs(v) for c, v in hist._low_rows())
    per_group = mass / max(groups, 1.0)
    errors: list[tuple[float, float]] = []
    for bound in lower_candidates_of(hist):
        bias = hist.clipped_below(bound)
        squares = []
        for t in targets:
            std = t.std * t.use.scale(bound, upper) / t.use.scale(t.lower_at, t.upper_at)
            noise = std / per_group if per_group > 0 else math.inf
            squares.append(math.hypot(bias, noise) ** 2)
        errors.append((bound, math.sqrt(sum(squares) / len(squares)) if squares else 0.0))
    if not targets or per_group <= 0 or not errors:
        best = hist.lower_quantile(LOWER_QUANTILE)
    else:
        best = min(errors, key=lambda e: (e[1], -e[0]))[0]
    return ValueChoice(best, hist.grid.lower, tuple(errors), hist.clipped_below(best))
