"""Quantiles, MEDIAN, MIN and MAX under user-level DP: the exponential mechanism on a grid.

What is released, per group. The value is clamped to a public ``[L, U]`` and cut into the
B bins of a public :class:`Grid`; the engine computes, per group, the histogram ``h`` of
bin counts over the bounded rows (each person keeps at most C rows per group and appears in
at most K groups, so one person moves one group's histogram by at most C in L1 norm). For a
target rank r — r = q·n for a quantile (n = Σh), or a small rank from either end for MIN and
MAX — every bin j gets the integer score

    s_j = distance from r to the bin's rank interval [lt_j, le_j]
        = max(lt_j − r, r − le_j, 0),   lt_j = Σ_{i<j} h_i,  le_j = lt_j + h_j,

so s_j = 0 exactly on the bins that hold rank r. The exponential mechanism draws bin j with
probability ∝ exp(−s_j/θ) (McSherry & Talwar 2007; the rank score is Smith 2011's, on a
grid as in Gillenwater, Joseph & Kulesza 2021), via OpenDP's Gumbel report-noisy-max
(:func:`accounting.mechanisms.report_noisy_min`); the released value is the bin's
representative point (:meth:`Grid.value`).

Sensitivity (stated and tested): adding a person whose histogram is p ≥ 0 with ‖p‖₁ ≤ C
moves lt_j by P_<j ∈ [0, C], le_j by P_≤j ∈ [0, C] and n by ‖p‖₁. For r = q·n both
lt_j − r and r − le_j move by at most max(q, 1 − q)·C, and max(·, ·, 0) is 1-Lipschitz, so
every score moves by at most Δ = max(q, 1 − q)·C. MIN's target min(t, n/2) and MAX's
max(n − t, n/2) move by between 0 and ‖p‖₁, which gives Δ = C. Scores are kept in integer
units of 1/DENOMINATOR rank (q is rounded to 4 decimals), so Δ is an integer too.

Cost. With θ = 2Δ/ε_g the draw is ε_g-DP and ε_g-bounded-range, hence ε_g²/8-zCDP (Durfee
& Rogers 2019; Cesar & Rogers 2021); its curve on the ledger's orders is the order-wise
minimum of that zCDP line and :func:`accounting.rdp.pure_dp_curve` (ε_g), each a valid
bound. A person changes at most K groups' histograms and the groups are drawn
independently, so one column of quantiles costs K times that curve (and K·ε_g pure).

Accuracy (for every dataset): P[s_out > x] ≤ (B − 1)·exp(−x/θ), so with probability
``confidence`` the released bin is within τ = θ_rank·ln((B − 1)/(1 − confidence)) rows of
the target rank (θ_rank = θ/DENOMINATOR), and the expected distance is at most
θ_rank·(1 + ln(B − 1)). No value interval is released (see :data:`INTERVAL_NOTE`).

Everything here is arithmetic on public numbers and on the exact histograms; the only draw
is the call into :mod:`accounting.mechanisms`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

import numpy as np

from accounting import mechanisms
from accounting.rdp import Curve, pure_dp_curve, zcdp_curve

DENOMINATOR = 10_000
"""Scores are in units of 1/DENOMINATOR rank; q is rounded to a multiple of 1e-4. Even, so
that half a count (MIN/MAX's cap at n/2) is a whole number of units."""

DEFAULT_MAX_BINS = 1024
"""Default grid size: the binning error is 1/2048 of the range while the rank error grows
only like ln B; one draw over 1024 bins takes about 1–2.5 ms in OpenDP."""

MAX_BINS = 1 << 16

CONFIDENCE = 0.95

INTERVAL_NOTE = (
    "no interval: the exponential mechanism's guarantee is in ranks (the released value's "
    "bin is within the stated number of rows of the target rank, for every dataset); "
    "turning ranks into a value interval needs the data's density around the quantile, "
    "which is private, or further releases that the query did not pay for"
)

# Whole numbers exactly representable as float64: integer grids keep their bounds exact.
_EXACT = 2**53

_MECHANISMS = ("gaussian", "laplace")


class QuantileError(ValueError):
    """A grid, target, descriptor or histogram outside its preconditions."""


class TargetKind(StrEnum):
    """What rank a release aims at: a quantile q·n, or a small rank from either end."""

    QUANTILE = "quantile"
    MIN = "min"
    MAX = "max"


# --- argument checks -------------------------------------------------------------------


def _count(name: str, value: object, *, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise QuantileError(f"{name} must be an integer >= {low}, got {value!r}")
    n = int(value)
    if n < low or (high is not None and n > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise QuantileError(f"{name} must be an integer {bound}, got {value!r}")
    return n


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise QuantileError(f"{name} must be a finite number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise QuantileError(f"{name} must be a finite number, got {value!r}")
    return v


def _positive(name: str, value: object) -> float:
    v = _real(name, value)
    if v <= 0.0:
        raise QuantileError(f"{name} must be > 0, got {value!r}")
    return v


def _confidence(value: object) -> float:
    v = _real("confidence", value)
    if not 0.0 < v < 1.0:
        raise QuantileError(f"confidence must lie in (0, 1), got {value!r}")
    return v


# --- the public grid ---------------------------------------------------------------------


@dataclass(frozen=True)
class Grid:
    """B bins covering ``[lower, upper]``; a function of public bounds only.

    Float grids: B equal bins of width (U − L)/B, bin j = [L + j·w, L + (j+1)·w) (the last
    one closed). Integer grids (integers, and dates/timestamps as integer units): bins of
    ``width`` consecutive whole numbers starting at L, the last one cut at U; with
    U − L + 1 ≤ B every integer has its own bin and the grid is exact.
    """

    lower: float
    upper: float
    bins: int
    integer: bool
    width: float

    def bin_index(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """The bin of each value, clamped to [0, B − 1] (reference for the engine's SQL).

        Which bin a row lands in is a per-row function of its own value: any deterministic
        rule (including the engine's rounding at a bin edge) keeps the sensitivity."""
        x = np.asarray(values, dtype=np.float64)
        if self.bins == 1 or self.width == 0.0:
            return np.zeros(x.shape, dtype=np.int64)
        raw = np.floor((x - self.lower) / self.width)
        return np.clip(raw, 0, self.bins - 1).astype(np.int64)

    def bounds(self, index: int) -> tuple[float, float]:
        """The values bin ``index`` covers: [lo, hi) for floats, [lo, hi] for integers."""
        j = _count("index", index, low=0, high=self.bins - 1)
        if self.integer:
            lo = self.lower + j * self.width
            return lo, min(self.upper, lo + self.width - 1)
        lo = self.lower + j * self.width
        hi = self.upper if j == self.bins - 1 else min(self.upper, lo + self.width)
        return lo, hi

    def value(self, index: int) -> float:
        """The point released for bin ``index``: its middle (the lower middle integer on
        integer grids), so binning adds at most half a bin of error. Post-processing of
        the released index only."""
        lo, hi = self.bounds(index)
        if self.integer:
            return float(lo + (hi - lo) // 2)
        return min(self.upper, lo + (hi - lo) / 2.0)

    def half_bin(self) -> float:
        """The largest distance from a value to its bin's released point."""
        if self.integer:
            return float(self.width // 2)
        return self.width / 2.0


def grid_for(
    lower: float, upper: float, *, integer: bool, max_bins: int = DEFAULT_MAX_BINS
) -> Grid:
    """The grid of a column declared on ``[lower, upper]``.

    Integer columns: one bin per integer when U − L + 1 ≤ ``max_bins``, otherwise bins of
    w = ⌈(U − L + 1)/max_bins⌉ integers (B = ⌈(U − L + 1)/w⌉ ≤ max_bins). Float columns:
    ``max_bins`` equal bins (one when L = U).
    Preconditions: L ≤ U finite (integral and within ±2^53 for integer grids),
    1 ≤ max_bins ≤ 65536. Privacy claim: none needed — it reads public numbers only.
    """
    lo = _real("lower", lower)
    hi = _real("upper", upper)
    if lo > hi:
        raise QuantileError(f"lower must be <= upper, got {lo!r} > {hi!r}")
    b = _count("max_bins", max_bins, high=MAX_BINS)
    if integer:
        if not (lo.is_integer() and hi.is_integer() and abs(lo) <= _EXACT and abs(hi) <= _EXACT):
            raise QuantileError("an integer grid needs whole bounds within ±2^53")
        span = int(hi) - int(lo) + 1
        units = 1 if span <= b else -(-span // b)
        return Grid(lo, hi, -(-span // units), True, float(units))
    if lo == hi:
        return Grid(lo, hi, 1, False, 0.0)
    width = (hi - lo) / b
    if not (math.isfinite(width) and width > 0.0):
        raise QuantileError(f"the range [{lo!r}, {hi!r}] cannot be cut into {b} bins")
    return Grid(lo, hi, b, False, width)


# --- targets and scores --------------------------------------------------------------------


@dataclass(frozen=True)
class RankTarget:
    """The rank a release aims at, in units of 1/DENOMINATOR.

    QUANTILE: r = (numerator/DENOMINATOR)·n. MIN: r = min(offset, n/2). MAX:
    r = max(n − offset, n/2). The cap at n/2 keeps small groups from aiming beyond their
    data (there MIN and MAX fall back to the median); it does not change Δ.
    """

    kind: TargetKind
    numerator: int = 0
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, TargetKind):
            raise QuantileError(f"kind must be a TargetKind, got {self.kind!r}")
        _count("numerator", self.numerator, low=0, high=DENOMINATOR)
        _count("offset", self.offset, low=0)
        if self.kind is not TargetKind.QUANTILE and self.numerator != 0:
            raise QuantileError("MIN and MAX targets take an offset, not a quantile")
        if self.kind is TargetKind.QUANTILE and self.offset != 0:
            raise QuantileError("a quantile target takes no offset")

    @property
    def q(self) -> float:
        """The quantile aimed at (0 for MIN, 1 for MAX)."""
        if self.kind is TargetKind.MAX:
            return 1.0
        return self.numerator / DENOMINATOR

    def scaled_rank(self, n: int) -> int:
        """r·DENOMINATOR for a histogram of n rows (exact integer arithmetic)."""
        total = n * DENOMINATOR
        if self.kind is TargetKind.QUANTILE:
            return self.numerator * n
        if self.kind is TargetKind.MIN:
            return min(self.offset * DENOMINATOR, total // 2)
        return max(total - self.offset * DENOMINATOR, total // 2)


def quantile_numerator(q: float) -> int:
    """q rounded to the nearest multiple of 1/DENOMINATOR (ties up), as that multiple.

    Preconditions: 0 ≤ q ≤ 1. The rounding is public: the released value targets the
    rounded q, which results should show."""
    v = _real("q", q)
    if not 0.0 <= v <= 1.0:
        raise QuantileError(f"q must lie in [0, 1], got {q!r}")
    return math.floor(Fraction(v) * DENOMINATOR + Fraction(1, 2))


def score_sensitivity(target: RankTarget, max_rows: int) -> int:
    """Δ in score units: C·max(num, DENOMINATOR − num) for a quantile, C·DENOMINATOR for
    MIN and MAX (see the module docstring for the proof).

    Preconditions: C ≥ 1. Privacy claim: adding or removing one person whose rows in the
    group are at most C moves every score of :func:`scores` by at most this much."""
    c = _count("max_rows", max_rows)
    if target.kind is TargetKind.QUANTILE:
        return c * max(target.numerator, DENOMINATOR - target.numerator)
    return c * DENOMINATOR


def max_bin_count(bins: int) -> int:
    """The count each bin is clamped to before scoring: n·DENOMINATOR then stays ≤ 2^62.

    Clamping a count is monotone and 1-Lipschitz, so a neighbour's histogram stays within
    C in L1 and above the other's: the sensitivity argument is unchanged."""
    b = _count("bins", bins, high=MAX_BINS)
    return (2**62) // (DENOMINATOR * b)


def _histogram(histogram: Sequence[int] | np.ndarray, bins: int) -> np.ndarray:
    h = np.asarray(histogram)
    if h.ndim != 1 or h.size != bins:
        raise QuantileError(f"a histogram needs {bins} counts, got shape {h.shape}")
    whole = h.dtype.kind in "iu" or (
        h.dtype.kind == "f" and bool(np.all(np.isfinite(h))) and bool(np.all(h == np.floor(h)))
    )
    if not whole:
        raise QuantileError("histogram counts must be whole numbers")
    if np.any(h < 0):
        raise QuantileError("histogram counts must be >= 0")
    cap = max_bin_count(bins)
    return np.minimum(h, cap).astype(np.int64)


def scores(histogram: Sequence[int] | np.ndarray, target: RankTarget) -> np.ndarray:
    """The integer score of every bin: DENOMINATOR·max(lt_j − r, r − le_j, 0).

    Lower is better; 0 on exactly the bins holding rank r. Preconditions: one count ≥ 0
    per bin (whole numbers; clamped to :func:`max_bin_count`). Privacy claim: none by
    itself — :func:`score_sensitivity` bounds how far a person moves each score."""
    h = _histogram(histogram, np.asarray(histogram).size)
    le = np.cumsum(h, dtype=np.int64) * DENOMINATOR
    lt = le - h * DENOMINATOR
    n = int(le[-1]) // DENOMINATOR if h.size else 0
    r = target.scaled_rank(n)
    return np.maximum(np.maximum(lt - r, r - le), 0)


# --- cost and calibration ----------------------------------------------------------------


@dataclass(frozen=True)
class QuantileDescriptor:
    """One column of per-group quantile releases and what it costs.

    ``epsilon_per_group`` is ε_g, the pure-DP (and bounded-range) parameter of one group's
    draw; ``sensitivity`` Δ and ``scale`` θ = 2Δ/ε_g are in score units (1/DENOMINATOR
    rank); ``rho_per_group`` = ε_g²/8 (OpenDP's map, rounded up); ``curve`` the cost of
    the whole column, K groups composed; ``pure_epsilon`` = K·ε_g. ``rank_error`` τ and
    ``expected_rank_error`` are in rows and hold for every dataset; ``half_width`` is
    always None (:data:`INTERVAL_NOTE`).
    """

    grid: Grid
    target: RankTarget
    max_rows: int
    max_groups: int
    epsilon_per_group: float
    confidence: float
    sensitivity: int
    scale: float
    rho_per_group: float
    curve: Curve
    pure_epsilon: float
    rank_error: float
    expected_rank_error: float
    mechanism: str = "exponential"
    half_width: float | None = None
    interval_note: str = INTERVAL_NOTE


def rank_error_bound(theta_rank: float, bins: int, confidence: float = CONFIDENCE) -> float:
    """τ = θ·ln((B − 1)/(1 − confidence)): the released bin is within τ rows of the
    target rank with probability ≥ confidence, whatever the data (0 when B = 1).

    Why: the best bin has weight ≥ e^{−s_min/θ}, so P[s_out − s_min ≥ x] ≤ (B−1)e^{−x/θ};
    s_min = 0 because the target rank always lies in [0, n]. Preconditions: θ > 0, B ≥ 1."""
    t = _positive("theta_rank", theta_rank)
    b = _count("bins", bins, high=MAX_BINS)
    c = _confidence(confidence)
    if b == 1:
        return 0.0
    return t * (math.log(b - 1) - math.log1p(-c))


def expected_rank_error_bound(theta_rank: float, bins: int) -> float:
    """E[distance to the target rank] ≤ ∫ min(1, (B−1)e^{−x/θ}) dx = θ·(1 + ln(B − 1))."""
    t = _positive("theta_rank", theta_rank)
    b = _count("bins", bins, high=MAX_BINS)
    return 0.0 if b == 1 else t * (1.0 + math.log(b - 1))


def selection_curve(epsilon: float, rho: float) -> Curve:
    """Curve of one ε-bounded-range draw: order-wise min of ρ-zCDP and the ε-DP bound.

    Preconditions: ε > 0, ρ ≥ ε²/8 (the caller passes OpenDP's map). Privacy claim: an
    ε-BR mechanism is ε-DP (so :func:`accounting.rdp.pure_dp_curve` bounds it) and
    ε²/8-zCDP (Cesar & Rogers 2021); the minimum of two valid bounds is valid."""
    e = _positive("epsilon", epsilon)
    r = _positive("rho", rho)
    if r < e * e / 8.0 * (1.0 - 1e-12):
        raise QuantileError(f"rho {r!r} is below epsilon²/8 = {e * e / 8.0!r}")
    zc = zcdp_curve(r).values
    pure = pure_dp_curve(e).values
    return Curve(tuple(min(a, b) for a, b in zip(zc, pure, strict=True)))


def _target(kind: TargetKind, q: float | None, offset: int) -> RankTarget:
    if kind is TargetKind.QUANTILE:
        if q is None:
            raise QuantileError("a quantile target needs q")
        return RankTarget(kind, numerator=quantile_numerator(q))
    if q is not None:
        raise QuantileError(f"{kind.value.upper()} takes no q")
    return RankTarget(kind, offset=offset)


def describe_quantile(
    *,
    grid: Grid,
    kind: TargetKind,
    q: float | None = None,
    max_rows: int,
    max_groups: int,
    epsilon_per_group: float,
    confidence: float = CONFIDENCE,
) -> QuantileDescriptor:
    """The descriptor of one column of per-group releases, from public numbers only.

    θ = 2Δ/ε_g; ρ_g = max(ε_g²/8, OpenDP's map); the curve is K × :func:`selection_curve`.
    MIN and MAX aim at offset t = ⌈τ⌉ rows from their end (τ at ``confidence``), so that
    with probability ≥ confidence the released bin is not beyond the true extreme's bin
    (every such bin is at least t rows from the target) and at most t + τ rows lie beyond
    it. Preconditions: C, K ≥ 1 integers; ε_g > 0; q in [0, 1] for QUANTILE only (q = 0
    or 1 aim at rank 0 or n, where every bin beyond the data ties: use MIN/MAX instead);
    0 < confidence < 1. Privacy claim: releasing every group's draw (see
    :func:`release_quantiles`) costs ``curve`` (and is ``pure_epsilon``-DP) for neighbours
    that differ by one person with at most C rows in each of at most K groups.
    """
    if not isinstance(grid, Grid):
        raise QuantileError("grid must be a Grid (see grid_for)")
    try:
        kind = TargetKind(kind)
    except ValueError:
        raise QuantileError(f"kind must be a TargetKind, got {kind!r}") from None
    c = _count("max_rows", max_rows)
    k = _count("max_groups", max_groups)
    eps = _positive("epsilon_per_group", epsilon_per_group)
    conf = _confidence(confidence)
    target = _target(kind, q, 0)
    delta = score_sensitivity(target, c)
    if delta > mechanisms.MAX_SCORE:
        raise QuantileError("max_rows is too large for integer scores")
    scale = 2.0 * delta / eps
    if not 1e-280 <= scale <= 1e250:
        raise QuantileError(f"epsilon_per_group {eps!r} gives an unusable scale {scale!r}")
    theta_rank = scale / DENOMINATOR
    tau = rank_error_bound(theta_rank, grid.bins, conf)
    if kind is not TargetKind.QUANTILE:
        target = _target(kind, None, math.ceil(tau))
    # The pure and zCDP readings of the draw at this exact scale, never below ε_g.
    eps_exact = max(eps, 2.0 * delta / scale)
    rho = max(eps_exact * eps_exact / 8.0, mechanisms.exponential_mechanism_rho(delta, scale))
    per_group = selection_curve(eps_exact, rho)
    return QuantileDescriptor(
        grid=grid,
        target=target,
        max_rows=c,
        max_groups=k,
        epsilon_per_group=eps,
        confidence=conf,
        sensitivity=delta,
        scale=scale,
        rho_per_group=rho,
        curve=per_group * k,
        pure_epsilon=k * eps_exact,
        rank_error=tau,
        expected_rank_error=expected_rank_error_bound(theta_rank, grid.bins),
    )


def epsilon_per_group_for_share(mechanism: str, share: float, max_groups: int) -> float:
    """ε_g for one column's share of a query's budget.

    "gaussian" (the share is ρ): ε_g = √(8ρ/K), so K draws cost K·ε_g²/8 = ρ. "laplace"
    (the share is a pure ε): ε_g = ε/K. Preconditions: share > 0, K ≥ 1. Privacy claim:
    the resulting descriptor's curve is at most zcdp(ρ) (resp. its pure ε at most ε), up
    to OpenDP's upward rounding of the map (a few ulps)."""
    if mechanism not in _MECHANISMS:
        raise QuantileError(f"mechanism must be one of {_MECHANISMS}, got {mechanism!r}")
    s = _positive("share", share)
    k = _count("max_groups", max_groups)
    if mechanism == "gaussian":
        return math.sqrt(8.0 * s / k)
    return s / k


def quantile_for_share(
    *,
    mechanism: str,
    share: float,
    grid: Grid,
    kind: TargetKind,
    q: float | None = None,
    max_rows: int,
    max_groups: int,
    confidence: float = CONFIDENCE,
) -> QuantileDescriptor:
    """:func:`describe_quantile` at the ε_g of :func:`epsilon_per_group_for_share`.

    This is the entry point for a query's budget split: each released quantile column
    (each (column, q) pair, and each MIN and MAX) takes one share, like a noised
    statistic. Preconditions and privacy claim: those of both functions."""
    eps = epsilon_per_group_for_share(mechanism, share, max_groups)
    return describe_quantile(
        grid=grid,
        kind=kind,
        q=q,
        max_rows=max_rows,
        max_groups=max_groups,
        epsilon_per_group=eps,
        confidence=confidence,
    )


# --- release -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantileRelease:
    """One drawn bin per group and its released value (grid points; float64)."""

    bins: np.ndarray
    values: np.ndarray


def dense_histograms(
    groups: Sequence[int] | np.ndarray,
    bins: Sequence[int] | np.ndarray,
    counts: Sequence[int] | np.ndarray,
    *,
    n_groups: int,
    grid: Grid,
) -> np.ndarray:
    """A (n_groups × B) int64 array from the engine's sparse rows (group, bin, count).

    Rows for the same (group, bin) are added. Preconditions: 0 ≤ group < n_groups,
    0 ≤ bin < B, counts whole numbers ≥ 0. Privacy claim: none (a re-arrangement)."""
    g = np.asarray(groups, dtype=np.int64)
    b = np.asarray(bins, dtype=np.int64)
    c = np.asarray(counts)
    m = _count("n_groups", n_groups, low=0)
    if not (g.ndim == b.ndim == c.ndim == 1 and g.size == b.size == c.size):
        raise QuantileError("groups, bins and counts must be vectors of one length")
    if g.size and (g.min() < 0 or g.max() >= m):
        raise QuantileError("a group index is out of range")
    if b.size and (b.min() < 0 or b.max() >= grid.bins):
        raise QuantileError("a bin index is out of range")
    if c.size and (c.dtype.kind not in "iu" or c.min() < 0):
        raise QuantileError("counts must be whole numbers >= 0")
    out = np.zeros((m, grid.bins), dtype=np.int64)
    np.add.at(out, (g, b), c.astype(np.int64))
    return out


def release_quantiles(
    histograms: Sequence[Sequence[int]] | np.ndarray, descriptor: QuantileDescriptor
) -> QuantileRelease:
    """Draw every group's bin: scores of its histogram, then one OpenDP exponential draw.

    The descriptor is re-derived from its public fields and refused unless identical, so
    nothing is drawn that the charged curve does not cover (as
    :func:`accounting.mechanisms.release_planned`). Preconditions: a (groups × B) array of
    whole counts ≥ 0, each row the bounded histogram of one group (each person at most
    ``max_rows`` rows per group and at most ``max_groups`` groups). Privacy claim: the
    descriptor's ``curve`` for the whole column; an empty group (all zeros) gets a uniform
    draw, which is exactly what the mechanism promises.
    """
    if not isinstance(descriptor, QuantileDescriptor):
        raise QuantileError("descriptor must be a QuantileDescriptor")
    again = describe_quantile(
        grid=descriptor.grid,
        kind=descriptor.target.kind,
        q=descriptor.target.q if descriptor.target.kind is TargetKind.QUANTILE else None,
        max_rows=descriptor.max_rows,
        max_groups=descriptor.max_groups,
        epsilon_per_group=descriptor.epsilon_per_group,
        confidence=descriptor.confidence,
    )
    if again != descriptor:
        raise QuantileError("the descriptor does not match its own public parameters")
    hs = np.asarray(histograms)
    if hs.ndim != 2 or hs.shape[1] != descriptor.grid.bins:
        raise QuantileError(
            f"histograms must have shape (groups, {descriptor.grid.bins}), got {hs.shape}"
        )
    chosen = np.empty(hs.shape[0], dtype=np.int64)
    for i in range(hs.shape[0]):
        s = scores(hs[i], descriptor.target)
        chosen[i] = mechanisms.report_noisy_min(s, scale=descriptor.scale)
    grid = descriptor.grid
    values = np.array([grid.value(int(j)) for j in chosen], dtype=np.float64)
    return QuantileRelease(bins=chosen, values=values)


# --- accuracy, for explain -------------------------------------------------------------------


@dataclass(frozen=True)
class QuantileAccuracy:
    """What a release is expected to achieve on a group of ``rows`` bounded rows.

    ``rank_error`` (rows, at ``confidence``) and ``expected_rank_error`` hold for every
    dataset. ``quantile_error`` = rank_error/rows: how far the released value's quantile
    level can be from q. ``value_error_uniform``: the value error at ``confidence`` if the
    rows were spread evenly over [L, U] — a reference figure, not a guarantee. For MIN and
    MAX the errors are measured from the true extreme (offset t plus τ).
    """

    rows: float
    confidence: float
    rank_error: float
    expected_rank_error: float
    quantile_error: float
    value_error_uniform: float
    half_bin: float


def accuracy(descriptor: QuantileDescriptor, rows: float) -> QuantileAccuracy:
    """Predicted error of a descriptor's release for a group of about ``rows`` rows.

    Preconditions: rows > 0 (an expected group size, public: e.g. the analyst's
    ``at_count``). Privacy claim: none; it reads public numbers only."""
    if not isinstance(descriptor, QuantileDescriptor):
        raise QuantileError("descriptor must be a QuantileDescriptor")
    n = _positive("rows", rows)
    extra = float(descriptor.target.offset)
    rank = descriptor.rank_error + extra
    expected = descriptor.expected_rank_error + extra
    level = min(1.0, rank / n)
    grid = descriptor.grid
    span = grid.upper - grid.lower
    return QuantileAccuracy(
        rows=n,
        confidence=descriptor.confidence,
        rank_error=rank,
        expected_rank_error=expected,
        quantile_error=level,
        value_error_uniform=min(span, level * span + grid.half_bin()),
        half_bin=grid.half_bin(),
    )
