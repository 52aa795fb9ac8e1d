"""Per-person row caps chosen from the data, for tables whose policy says
``max_rows_per_group = "auto"`` (with a ``max_rows_per_group_limit``).

The first query on such a table releases, once, a DP histogram of rows per person over
power-of-two bins up to 2^20 (``accounting.bounds``), charged to the table's population
like any release at ``[proxy] auto_bounds_epsilon`` and stored in the release cache
under a key of (table, data version, bins, mechanism, ε). Every later query — any
analyst, any door — reads the stored histogram and picks ITS OWN cap from it for free,
by what it releases (:func:`cap_targets`: totals want a large cap, means a small one),
its budget and its number of groups: the choice is post-processing of a released
histogram and the request, and the chosen cap is part of the plan's cache key. Until
the histogram is released, ``explain`` shows the limit and says what the first query
will pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from accounting.bounds import CapChoice, CapTarget, OutputKind, RowHistogram, choose_cap
from accounting.calibrate import (
    Mechanism,
)
from accounting.quantiles import TargetKind
from proxy.budget import ColumnNoise, QuantileNoise
from proxy.budgets import Budgets
from proxy.cache import ReleaseStore
from proxy.catalog import split_name
from proxy.engines.executor import Executor
from proxy.policy import Policy, TablePolicy
from proxy.released_once import AUTOMATIC_NOTE, StoredHistograms, person_bins
from proxy.rewrite import core as C
from proxy.shape import Shape


@dataclass(frozen=True)
class PendingBounds:
    """What the first query on an auto table pays to choose its cap."""

    table: str
    limit: int
    epsilon: float


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class TotalsUse:
    """How a query's outputs use its COUNT and SUM aggregates: as totals (shown, summed,
    differenced) and/or as ratios of each other (SUM(x)/COUNT(*)), which act as means:
    bounding only re-weights them."""

    totals: bool
    ratios: bool


# Quantile levels a row cap re-weights without thinning (cap_targets).
MIDDLE = (0.25, 0.75)

# The share of each person's rows a WHERE clause on a multi-row table is assumed to keep
# (how many it keeps is not released): a filter such as "WHERE flagged" leaves each
# person far fewer rows than the histogram of the whole table shows.
FILTERED_KEEP = 0.1


def filter_keep(shape: Shape) -> float:
    """:data:`FILTERED_KEEP` when the WHERE clause reads a column of a private table
    with several rows per person, else 1 (no filter, or one that keeps or drops whole
    persons, such as a region of users)."""
    where = shape.select.args.get("where")
    if where is None:
        return 1.0
    for column in where.find_all(exp.Column):
        info = shape.tables.get(column.table)
        if info is not None and not info.public and not info.policy.one_row_per_person:
            return FILTERED_KEEP
    return 1.0


def totals_use(shape: Shape) -> TotalsUse:
    totals = ratios = False
    for item in shape.select.expressions:
        divided: set[int] = set()
        for div in item.find_all(exp.Div):
            if div.expression.find(exp.Distinct):
                # Per person (COUNT(*) / COUNT(DISTINCT user_id)): the numerator is a
                # total the cap cuts, not a mean it re-weights.
                continue
            if div.this.find(exp.AggFunc) and div.expression.find(exp.AggFunc):
                ratios = True
                divided.update(id(a) for a in div.find_all(exp.Count, exp.Sum))
        if any(id(a) not in divided for a in item.find_all(exp.Count, exp.Sum)):
            totals = True
    return TotalsUse(totals, ratios)


def cap_targets(
    noise: Sequence[ColumnNoise],
    mechanism: Mechanism,
    use: TotalsUse,
    quantiles: Sequence[QuantileNoise] = (),
) -> tuple[CapTarget, ...]:
    """The outputs the cap choice weighs, from the noise of a plan calibrated at C = 1
    (each statistic's noise grows in proportion to C): sums and counts as totals when
    the query shows them as such, as means when it divides them (both when it does
    both); the centred sums and squares of AVG/VAR/STDDEV as means. People counts and
    the clipping estimate do not depend on the cap's trade-off and are left out.
    A quantile of the middle (levels 0.25 to 0.75, MEDIAN) weighs in rank units
    (``OutputKind.RANK``): its expected rank error at C = 1 (rows, growing with C) over
    the rows a group keeps. Without it a query of quantiles alone kept the policy's limit, and a median of
    groups of 54-231 tickets had a rank error of ±309 rows (6,394 where the true one was
    98; an honesty probe, 2026-12-06; now C = 1 and 6% off). A level in a tail, MIN and
    MAX are left out: a small cap keeps each heavy person's middle values and thins the
    tails (a 95th percentile of latency by model went from 9% off at the limit to 23% at
    C = 1, at ε = 3)."""
    out = [
        CapTarget(OutputKind.RANK, q.descriptor.expected_rank_error, 1.0)
        for q in quantiles
        if q.statistic.kind is TargetKind.QUANTILE
        and q.statistic.q is not None
        and MIDDLE[0] <= q.statistic.q <= MIDDLE[1]
        and q.descriptor.expected_rank_error > 0
    ]
    kinds = [k for k, on in ((OutputKind.TOTAL, use.totals), (OutputKind.MEAN, use.ratios)) if on]
    for n in noise:
        s = n.statistic
        std = mechanism.std(n.descriptor.scale)
        half = max(abs(s.lower), abs(s.upper)) / 2.0
        if s.kind in (C.ROWS, C.COUNT):
            out += [CapTarget(kind, std, 1.0) for kind in kinds]
        elif s.kind == C.SUM and half > 0:
            out += [
                CapTarget(kind, std, half if kind is OutputKind.TOTAL else s.upper - s.lower)
                for kind in kinds
            ]
        elif s.kind == C.CENTRED_SUM and s.upper > s.lower:
            out.append(CapTarget(OutputKind.MEAN, std, s.upper - s.lower))
        elif s.kind == C.CENTRED_SQUARES and s.upper > s.lower:
            out.append(CapTarget(OutputKind.MEAN, std, ((s.upper - s.lower) / 2.0) ** 2))
    return tuple(out)


@dataclass(frozen=True)
class RowsCut:
    """The share of a table's rows a cap leaves out, as its released histogram reads."""

    point: float
    upper: float
    hidden_people: float  # a bin holding fewer people than this reads as empty


class AutoBounds:
    """Release and store the histograms of "auto" tables; choose each query's cap."""

    def __init__(self, policy: Policy, executor: Executor, cache: ReleaseStore, budgets: Budgets):
        self.policy = policy
        self._executor = executor
        self._stored = StoredHistograms(policy, cache, budgets)

    def _key(self, table: TablePolicy) -> str:
        # Who the person is belongs to what was counted and charged: after the policy
        # names another population or person column for the same files, the histogram
        # about the old ones is not one the new population paid for.
        return self._stored.person.key("auto-bounds", table.name, table.population, table.unit)

    def histogram(self, table: TablePolicy) -> RowHistogram | None:
        """The released histogram of ``table``'s rows per person, read (thresholded at
        the detection level), or None before it is released."""
        if table.auto_rows_limit is None:
            return None
        return self._stored.get(self._key(table), f"{AUTOMATIC_NOTE}bounds of {table.name}")

    def choose(
        self, table: TablePolicy, targets: Sequence[CapTarget], groups: float, keep: float
    ) -> CapChoice | None:
        """The cap of one query on ``table`` (None before the histogram is released)."""
        hist = self.histogram(table)
        if hist is None or table.auto_rows_limit is None:
            return None
        return choose_cap(hist, targets, groups, table.auto_rows_limit, keep)

    def rows_cut_reading(self, table: TablePolicy, cap: int) -> RowsCut | None:
        """What the released histogram says of the rows a cap of ``cap`` leaves out: its
        point reading, its upper reading (the first hidden bin full) and how many people
        a bin can hide (None before it is released). Post-processing: free."""
        hist = self.histogram(table)
        if hist is None:
            return None
        return RowsCut(hist.rows_cut(cap), hist.rows_cut(cap, upper=True), hist.threshold)

    def pending(self, table: TablePolicy) -> PendingBounds | None:
        if table.auto_rows_limit is None or self.histogram(table) is not None:
            return None
        return PendingBounds(
            table.name, table.auto_rows_limit, self.policy.proxy.auto_bounds_epsilon
        )

    def release(self, table: TablePolicy, analyst: str) -> RowHistogram:
        """Charge for, release and store the histogram of ``table`` (once: a second
        caller finds it stored); returns it, read."""
        assert table.auto_rows_limit is not None and table.population and table.unit
        return self._stored.release(
            self._key(table),
            f"{AUTOMATIC_NOTE}bounds of {table.name}",
            population=table.population,
            analyst=analyst,
            counts=lambda: self._exact_counts(table),
        )

    def _exact_counts(self, table: TablePolicy) -> list[int]:
        """Persons per power-of-two bin of their row count (the last bin open above).
        Total for every database: counts of rows are ≥ 1, and LOG2 of them is finite."""
        db, name = split_name(table.name)
        unit = _quote(table.unit or "")
        return person_bins(
            self._executor,
            f"SELECT {unit}, COUNT(*) AS n FROM {_quote(db)}.{_quote(name)} "
            f"WHERE {unit} IS NOT NULL GROUP BY {unit}",
        )
