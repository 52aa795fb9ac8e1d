"""Value bounds chosen from the data, for numeric columns whose policy says
``upper = "auto"`` with an ``upper_limit`` and/or ``lower = "auto"`` with a
``lower_limit`` (method and proof: accounting/value_bounds.py).

A lower bound mirrors an upper one on the same kind of histogram: its grid runs from the
lower_limit up to the column's declared upper bound, or to its upper_limit when the
upper is "auto" too — then both sides share ONE grid, so ONE histogram (one key, one
charge) serves both.

The first query whose aggregates read such a column releases, once per (table, column),
a DP histogram of the column's values on a public grid of round numbers (each person at
most C values), charged to the table's population at ``[proxy] auto_bounds_epsilon``
like the histogram of rows per person (proxy/auto_bounds.py) and stored in the release
cache under a key of (table, column, data version, grid, C and what sets the noise).
Every later query — any analyst, any door — reads it for free: the engine picks the
query's own upper and lower bounds from it (Engine._choose_values: the candidates of
least expected error for the sums that read the column at the query's budget) and plans
with them as if the column declared them, so they are part of the plan and its cache
key; without such a sum, and in the schema, the histogram's 95th percentile (upper) and
5th percentile (lower) stand. Until the release exists, planning assumes the limits and
the plan says what the first run will pay.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from sqlglot import exp

from accounting import value_bounds as V
from accounting.calibrate import Calibration
from proxy.budgets import Budgets
from proxy.cache import ReleaseStore
from proxy.catalog import split_name
from proxy.engines.executor import Executor
from proxy.policy import ColumnPolicy, Policy, TablePolicy
from proxy.released_once import AUTOMATIC_NOTE, PersonHistogram, release_once

# Values per person in the draw on a table whose row cap is "auto". One value (the
# proxy's default cap) would be each person's median, whose 95th percentile is far below
# the rows' own for a heavy tail; 8 keep each person's 1/16 … 15/16 quantiles, at 8 times
# the rank noise of one (a few hundred rows at ε = 0.25, against tens of thousands of
# rows on the demo data).
AUTO_TABLE_ROWS = 8


class Side(StrEnum):
    """Which bound of a column is chosen from the data."""

    UPPER = "upper"
    LOWER = "lower"


@dataclass(frozen=True)
class PendingValueBound:
    """What the first query reading an auto column pays to choose one of its bounds."""

    table: str
    column: str
    limit: float
    epsilon: float
    side: Side = Side.UPPER


@dataclass(frozen=True)
class ColumnBounds:
    """The bounds planning uses for a column with an "auto" side: released, else that
    side's limit; None for a side the policy declares as a number."""

    lower: float | None
    upper: float | None


def _limit(column: ColumnPolicy, side: Side) -> float | None:
    return column.upper_limit if side is Side.UPPER else column.lower_limit


def _sides(column: ColumnPolicy) -> str:
    """What a column's one histogram chooses, as the ledger's note names it."""
    auto = [str(side) for side in (Side.LOWER, Side.UPPER) if _limit(column, side) is not None]
    return " and ".join(auto) + (" bounds" if len(auto) > 1 else " bound")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def aggregated_columns(tree: exp.Expr) -> frozenset[str]:
    """Names of the columns whose bounds a query may need: read inside an aggregate
    other than COUNT (whose argument's value is never summed), or passed on by the
    select list of a subquery or CTE (an outer aggregate may sum them under another
    name). By name only, so a column of the same name in another table may be released
    needlessly (paid once, never a wrong bound); a column only filtered or grouped on
    needs none."""
    names: set[str] = set()
    for agg in tree.find_all(exp.AggFunc):
        if isinstance(agg, exp.Count):
            continue
        names.update(c.name.lower() for c in agg.find_all(exp.Column))
    for select in tree.find_all(exp.Select):
        if select is tree:
            continue
        for item in select.expressions:
            names.update(c.name.lower() for c in item.find_all(exp.Column))
    return frozenset(names)


class AutoValues:
    """Release and store the histograms of "auto" columns; read their bounds back."""

    def __init__(self, policy: Policy, executor: Executor, cache: ReleaseStore, budgets: Budgets):
        self.policy = policy
        self._executor = executor
        self._cache = cache
        self._budgets = budgets
        self._bounds: dict[tuple[str, str, Side], float] = {}
        self._hist = PersonHistogram(policy)
        self._histograms: dict[tuple[str, str], V.ValueHistogram] = {}

    def _grid(self, column: ColumnPolicy) -> V.ValueGrid:
        """The column's grid, from the lower end (the declared lower, else the
        lower_limit) to the upper end (the declared upper, else the upper_limit): one
        grid, so one histogram, for both sides when both are "auto"."""
        low = column.lower if column.lower is not None else column.lower_limit
        high = column.upper if column.upper is not None else column.upper_limit
        assert low is not None and high is not None
        return V.value_grid(low, high)

    def rows_per_person(self, table: TablePolicy) -> int:
        """C of the draw: one row for a one-row-per-person table, else the table's row
        cap; an "auto" table, whose cap each query chooses, uses :data:`AUTO_TABLE_ROWS`
        (at most its limit)."""
        if table.one_row_per_person:
            return 1
        if table.max_rows_per_group is not None:
            return table.max_rows_per_group
        return min(AUTO_TABLE_ROWS, table.auto_rows_limit or AUTO_TABLE_ROWS)

    def _calibration(self, table: TablePolicy, column: ColumnPolicy) -> Calibration:
        """The noise of a column's histogram: one person adds at most C values."""
        return self._hist.calibration(
            f"the auto bounds of {table.name}.{column.name}", self.rows_per_person(table)
        )

    def _key(self, table: TablePolicy, column: ColumnPolicy) -> str:
        # (the population and person column as for the rows histogram: AutoBounds._key)
        return self._hist.key(
            "auto-value-histogram",
            table.name,
            table.population,
            table.unit,
            column.name,
            self._grid(column),
            self.rows_per_person(table),
        )

    def histogram(self, table: TablePolicy, column: ColumnPolicy) -> V.ValueHistogram | None:
        """The released histogram of an auto column's values, read (thresholded at its
        detection level), or None before it is released."""
        found = self._histograms.get((table.name, column.name))
        if found is not None:
            return found
        hit = self._cache.get(self._key(table, column))
        if hit is None:
            return None
        counts = [float(c) for c in hit[1].column("count").to_pylist()]
        std = self._hist.std(self._calibration(table, column))
        found = V.ValueHistogram.read(self._grid(column), counts, std)
        self._histograms[(table.name, column.name)] = found
        return found

    def released(
        self, table: TablePolicy, column: ColumnPolicy, side: Side = Side.UPPER
    ) -> float | None:
        """The default bound of an auto column's side, or None before its histogram is
        released: the upper edge of the bin holding the 95th percentile of the released
        histogram (upper), the lower edge of the bin holding its 5th (lower). A query
        may choose its own from :meth:`histogram`."""
        found = self._bounds.get((table.name, column.name, side))
        if found is not None:
            return found
        hist = self.histogram(table, column)
        if hist is None:
            return None
        if side is Side.UPPER:
            found = hist.quantile(V.QUANTILE)
        else:
            found = hist.lower_quantile(V.LOWER_QUANTILE)
        self._bounds[(table.name, column.name, side)] = found
        return found

    def bounds(self) -> dict[tuple[str, str], ColumnBounds]:
        """Every auto column's bounds for planning: each auto side released, else its
        limit (None for a side the policy declares)."""
        out: dict[tuple[str, str], ColumnBounds] = {}
        for table in self.policy.tables:
            for column in table.columns:
                sides = {}
                for side in Side:
                    limit = _limit(column, side)
                    if limit is not None:
                        got = self.released(table, column, side)
                        sides[side] = limit if got is None else got
                if sides:
                    out[(table.name, column.name)] = ColumnBounds(
                        sides.get(Side.LOWER), sides.get(Side.UPPER)
                    )
        return out

    def pending(self, table: TablePolicy, needed: frozenset[str]) -> tuple[PendingValueBound, ...]:
        """The auto sides of ``table``'s columns among ``needed`` not released yet."""
        return tuple(
            PendingValueBound(
                table.name, c.name, limit, self.policy.proxy.auto_bounds_epsilon, side
            )
            for c in table.columns
            if c.name in needed
            for side in Side
            if (limit := _limit(c, side)) is not None and self.released(table, c, side) is None
        )

    def release(self, pending: PendingValueBound, analyst: str) -> float:
        """Charge for, draw and store the histogram of one column (once: a second caller,
        or the other side of a column whose bounds are both "auto", finds it stored);
        returns the side's default bound."""
        table = next(t for t in self.policy.tables if t.name == pending.table)
        column = table.column(pending.column)
        assert column is not None and table.population and table.unit
        cal = self._calibration(table, column)
        c = self.rows_per_person(table)
        release_once(
            self._cache,
            self._budgets,
            self._key(table, column),
            population=table.population,
            curve=cal.curve,
            analyst=analyst,
            note=f"{AUTOMATIC_NOTE}{_sides(column)} of {table.name}.{column.name}",
            draw=lambda: self._hist.draw(self.exact_counts(table, column), cal, c),
        )
        found = self.released(table, column, pending.side)
        assert found is not None
        return found

    def exact_counts(self, table: TablePolicy, column: ColumnPolicy) -> np.ndarray:
        """Rows per bin of the grid, each person keeping at most C of their values: a
        person with t > C values keeps those at their own positions ⌊(j + ½)·t/C⌋,
        j = 0..C−1, of their sorted values (the rule of proxy/rewrite/quantile_histogram.py:
        it reads only the person's own rows, needs no seed, and keeps C values spread like
        theirs). Values below the lower bound fall in bin 0, above the limit in the last
        bin; NULLs are left out (they never reach a sum either), and so is a value that is
        not a number (TRY_CAST: the draw runs after its charge, so no row may fail it).
        One person therefore moves the histogram by at most C in L1 (tests/reliability/test_neighbours.py).
        Both sides read this one histogram."""
        grid = self._grid(column)
        db, name = split_name(table.name)
        unit, col = _quote(table.unit or ""), _quote(column.name)
        c = self.rows_per_person(table)
        whens = " ".join(f"WHEN v <= {edge!r} THEN {j}" for j, edge in enumerate(grid.edges[:-1]))
        binned = (
            f"SELECT u, CASE {whens} ELSE {grid.bins - 1} END AS b FROM "
            f"(SELECT {unit} AS u, TRY_CAST({col} AS DOUBLE) - ({grid.lower!r}) AS v "
            f"FROM {_quote(db)}.{_quote(name)} "
            f"WHERE {unit} IS NOT NULL) AS __v WHERE v IS NOT NULL"
        )
        # Per person and bin: n values, t in all, hi = values up to this bin (inclusive).
        # F(x) = #{j ≥ 0 : (j + ½)·t/C < x} = max(0, ⌈(2xC − t)/(2t)⌉); bin b keeps
        # F(hi) − F(hi − n), which sums to F(t) = C over the person's bins.
        per_bin = (
            f"SELECT u, b, n, SUM(n) OVER (PARTITION BY u) AS t, SUM(n) OVER (PARTITION BY u "
            "ORDER BY b ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS hi "
            f"FROM (SELECT u, b, COUNT(*) AS n FROM ({binned}) AS __b GROUP BY u, b) AS __n"
        )

        def f(x: str) -> str:
            return f"GREATEST(0, CAST(CEIL((2.0 * ({x}) * {c} - t) / (2.0 * t)) AS BIGINT))"

        sql = (
            f"SELECT b, SUM(CASE WHEN t <= {c} THEN n ELSE {f('hi')} - {f('hi - n')} END) AS c "
            f"FROM ({per_bin}) AS __p GROUP BY b"
        )
        out = self._executor.run(sql)
        counts = np.zeros(grid.bins, dtype=np.int64)
        for b, n in zip(out["b"], out["c"], strict=True):
            counts[int(b)] = int(n)
        return counts
