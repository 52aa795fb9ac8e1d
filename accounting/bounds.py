"""Contribution bounds chosen from the data: the per-person row cap C (Linf) of each
query, picked from a DP histogram of how many rows each person has, to minimise the
expected error of what that query releases (bias from the rows the cap cuts plus the
noise it forces).

The trade-off is that of Amin, Kulesza, Muñoz Medina and Vassilvitskii, "Bounding User
Contributions: A Bias-Variance Trade-off in Differential Privacy" (ICML 2019): a small
cap cuts heavy persons' rows (bias), a large cap scales the noise (variance). The
distribution of rows per person is released once per table as a histogram over
power-of-two bins up to 2^20 rows — one person is in exactly one bin, so the histogram
has L1 and L2 sensitivity 1 — and every later query reuses it for free
(post-processing) to choose its own cap among the bins' lower edges up to the policy's
limit:

* **Reading the histogram** (:class:`RowHistogram`). A bin whose noisy count is below
  :data:`DETECTION` standard deviations of the noise is read as empty, and so is every
  bin above the first empty one past the mode: noise in the far, empty bins (each worth
  2^j rows per person) would otherwise read as heavy users. The first bin above the
  visible tail may still hold up to that threshold of people unseen (the *hidden* bin).
* **Totals** (COUNT, SUM, and sums or differences of them): the relative error of a
  group's total under cap C is √(cut(C)² + (σ₁·C / (N/G · m))²): cut(C) the share of
  rows beyond C — counting the hidden bin as full, since a bias nobody sees is worse
  than noise the interval states —, σ₁ the statistic's noise per unit of C, N the rows
  the histogram implies, G the expected number of groups and m one row's typical
  magnitude (1 for counts, half the larger bound for sums).
* **Means** (AVG, VAR, STDDEV, ratios of totals, quantiles): bounding keeps each
  person's own mean and re-weights heavy persons to C rows, so the bias is only that
  of the re-weighting; it is taken as :data:`REWEIGHT` × the share of rows re-weighted
  (an assumption: the rows a cap re-weights differ in mean from the others by that
  share of the declared range). The noise is that of the numerator over the rows the
  cap keeps per group, in units of the declared range.
* A query whose WHERE clause reads a multi-row table keeps an unknown share of each
  person's rows; the proxy assumes a share (``keep``) and the cut of C on the thinned
  rows is that of C/keep on the table's.
* A query's error is the root mean square over its outputs; the smallest error wins,
  the smaller cap on ties. A count over a coarse key wants a large cap, an AVG a small
  one.

The estimate of the cut uses each person's total rows in the table, an upper bound on
their rows in any one group: for a fine grouping it overstates the cut, so the cap is
never too small for totals.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

BINS = 21  # rows per person: 1, 2–3, 4–7, …, 2^19–2^20−1, and ≥ 2^20 (open above)
DETECTION = 2.0  # a bin is read as non-empty from this many noise standard deviations
# Assumed shift of a mean per unit share of rows re-weighted, in declared ranges. Not
# knowable from the histogram: on the demo data the person-weighted mean of tokens_out
# by plan differs from the row-weighted one by 0.18% of the range per share re-weighted,
# a 0/1 rate (flagged) by about 0.7%. At 0.5% the choice took C = 4 for AVG(tokens_out)
# by plan, whose smallest group (395 people) then had 9.8% median error against 8.6%
# at C = 1 (BENCHMARKS.md §8): the average group the choice weighs understates the
# noise of the smallest one, and a smaller value leans means towards small caps.
REWEIGHT = 0.002
# The same for a quantile of the middle (MEDIAN, levels 0.25-0.75), in rank units: the
# share of a group's rank a re-weighted share of rows moves it by. Also an assumption,
# set on the demo data (an honesty probe, 2026-12-06, 8 answers each at ε = 1 and 3,
# median relative error against SQL): at 0.25 a median of tickets by category (groups
# of 54-231 rows, limit 32) chooses C = 1-2 and is 6% off (30 times off at the limit,
# where its rank error was ±309 rows); medians and a first quartile over prompts (groups
# of thousands) choose C = 32-128 and are 0.7-4% off (1-11% at the limit of 256); with
# no bias term every quantile chose C = 1, and a first quartile of tokens_in was 51% off.
RANK_REWEIGHT = 0.25


class BoundsError(ValueError):
    """Inputs outside the preconditions (wrong number of bins, a limit below 1, ...)."""


def lower(j: int) -> int:
    """The fewest rows a person in bin j has (2^j)."""
    return 2**j


def typical(j: int) -> float:
    """A representative row count of bin j: its geometric middle 2^j·√2 (the last bin,
    open above, is taken at that too)."""
    return 2**j * math.sqrt(2.0)


_TYPICAL = tuple(typical(j) for j in range(BINS))


def candidates(limit: int) -> tuple[int, ...]:
    """Caps considered: the bins' lower edges up to ``limit``, and the limit itself."""
    if limit < 1:
        raise BoundsError(f"the limit must be >= 1, got {limit}")
    return tuple(sorted({*(2**j for j in range(BINS) if 2**j <= limit), limit}))


def bin_of(rows: int) -> int:
    """The bin of a person with ``rows`` ≥ 1 rows."""
    return min(BINS - 1, rows.bit_length() - 1)


@dataclass(frozen=True)
class RowHistogram:
    """A released histogram of rows per person, read for choosing caps.

    ``counts``: people per bin after reading (below the detection threshold, or above
    the first empty bin past the mode: 0); ``threshold``: that threshold, in people;
    ``hidden``: the first bin above the visible tail, where up to ``threshold`` people
    may be unseen (None when the tail reaches the last bin)."""

    counts: tuple[float, ...]
    threshold: float
    hidden: int | None

    @classmethod
    def read(cls, noisy: Sequence[float], noise_std: float) -> RowHistogram:
        """Read a released histogram whose counts carry noise of standard deviation
        ``noise_std``. Post-processing of released counts: no privacy cost."""
        if len(noisy) != BINS:
            raise BoundsError(f"expected {BINS} bin counts, got {len(noisy)}")
        if not noise_std > 0:
            raise BoundsError(f"the noise std must be > 0, got {noise_std}")
        threshold = DETECTION * noise_std
        seen = [float(c) if c >= threshold else 0.0 for c in noisy]
        mode = max(range(BINS), key=lambda j: (seen[j], -j))
        hidden = next((j for j in range(mode + 1, BINS) if seen[j] == 0.0), None)
        if seen[mode] == 0.0:  # nothing seen at all: everybody may hide in bin 0
            hidden = 0
        if hidden is not None:
            seen[hidden:] = [0.0] * (BINS - hidden)
        return cls(tuple(seen), threshold, hidden)

    @property
    def people(self) -> float:
        return sum(self.counts)

    # A cap choice reads the histogram a few hundred times (every candidate cap, every
    # output): the sums below run over the bins that hold people only, and the rows the
    # histogram implies are summed once. Leaving out a bin of 0.0 people leaves out a term
    # of exactly 0.0, so every sum is the same number, bit for bit, as over all bins.
    @functools.cached_property
    def _seen(self) -> tuple[tuple[float, float], ...]:
        """(people, typical rows) of each bin holding people, in bin order."""
        return tuple((c, _TYPICAL[j]) for j, c in enumerate(self.counts) if c != 0.0)

    @functools.cached_property
    def _rows_seen(self) -> float:
        return sum((c * t for c, t in self._seen), 0.0)

    def _hidden(self, upper: bool) -> tuple[float, float]:
        """(people, typical rows) of the hidden bin when ``upper``, else nothing."""
        if upper and self.hidden is not None:
            return self.threshold, _TYPICAL[self.hidden]
        return 0.0, 0.0

    def rows(self, *, upper: bool = False) -> float:
        """Rows in the table, as the histogram implies them (``upper``: with the hidden
        bin full)."""
        people, rows = self._hidden(upper)
        return self._rows_seen + people * rows

    def rows_kept(self, cap: float, *, upper: bool = False) -> float:
        """Rows a cap of C keeps: Σ people · min(typical, C)."""
        people, rows = self._hidden(upper)
        kept = sum((c * min(t, cap) for c, t in self._seen), 0.0)
        return kept + people * min(rows, cap)

    def rows_cut(self, cap: float, *, upper: bool = False) -> float:
        """The share of the table's rows a cap of C leaves out: Σ people·(typical − C)⁺
        over the rows. ``upper``: also count ``threshold`` people in the hidden bin (the
        most the histogram cannot rule out, one bin beyond what it shows)."""
        people, rows = self._hidden(upper)
        cut = sum((c * max(0.0, t - cap) for c, t in self._seen), 0.0)
        cut += people * max(0.0, rows - cap)
        total = self.rows(upper=upper)
        return cut / total if total > 0 else 0.0


class OutputKind(StrEnum):
    """How an output depends on the cap: a total loses the rows beyond it; a mean (or a
    ratio of totals) only re-weights heavy persons."""

    TOTAL = "total"
    MEAN = "mean"
    RANK = "rank"  # a quantile of the middle, in rank units (see RANK_REWEIGHT)


@dataclass(frozen=True)
class CapTarget:
    """One released output as the cap choice sees it: its kind, the standard deviation
    of its (numerator's) noise per unit of C, and one row's scale (totals: a row's
    typical magnitude; means: the range a row's value spans)."""

    kind: OutputKind
    noise_per_cap: float
    row_scale: float


@dataclass(frozen=True)
class CapChoice:
    """The chosen cap with what it rests on: each candidate's estimated relative error,
    and the share of rows the chosen cap cuts (point estimate and upper end)."""

    cap: int
    limit: int
    errors: tuple[tuple[int, float], ...]
    rows_cut: float
    rows_cut_upper: float


def target_error(
    hist: RowHistogram, target: CapTarget, cap: int, groups: float, keep: float = 1.0
) -> float:
    """Estimated relative error of one output under cap C (see the module docstring).
    ``keep``: the share of each person's rows the query reads (a filter thins every
    person's rows alike, so a cap of C on them cuts what C/keep cuts on the table).

    Preconditions: groups ≥ 1, row_scale > 0, noise_per_cap ≥ 0, 0 < keep ≤ 1."""
    per_group = max(groups, 1.0)
    at = cap / keep
    if target.kind is OutputKind.TOTAL:
        bias = hist.rows_cut(at, upper=True)
        size = keep * hist.rows(upper=True) / per_group * target.row_scale
    else:
        shift = REWEIGHT if target.kind is OutputKind.MEAN else RANK_REWEIGHT
        bias = shift * hist.rows_cut(at)
        kept = hist.rows_kept(at) or hist.rows_kept(at, upper=True)
        size = keep * kept / per_group * target.row_scale
    noise = target.noise_per_cap * cap / size if size > 0 else math.inf
    return math.hypot(bias, noise)


def choose_cap(
    hist: RowHistogram,
    targets: Sequence[CapTarget],
    groups: float,
    limit: int,
    keep: float = 1.0,
) -> CapChoice:
    """The candidate cap (≤ ``limit``) with the smallest root-mean-square estimated error
    over ``targets`` (the smaller cap on ties); the limit when there is no target.

    Post-processing of a released histogram: a deterministic function of released
    counts, public numbers and the request, so it costs nothing and replays identically.
    """
    options = candidates(limit)
    errors: list[tuple[int, float]] = []
    for cap in options:
        if targets:
            squares = [target_error(hist, t, cap, groups, keep) ** 2 for t in targets]
            errors.append((cap, math.sqrt(sum(squares) / len(squares))))
        else:
            errors.append((cap, 0.0))
    # With no target nothing released depends on the cap: keep the policy's limit.
    best = min(errors, key=lambda e: (e[1], e[0]))[0] if targets else limit
    return CapChoice(
        best,
        limit,
        tuple(errors),
        hist.rows_cut(best / keep),
        hist.rows_cut(best / keep, upper=True),
    )
