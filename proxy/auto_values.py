"""Upper value bounds chosen from the data, for numeric columns whose policy says
``upper = "auto"`` with an ``upper_limit`` (method and proof: accounting/value_bounds.py).

The first query whose aggregates read such a column releases, once per (table, column),
a DP draw of the bin holding a high quantile of the column's values (each person at
most C rows), charged to the table's population at ``[proxy] auto_bounds_epsilon`` like
the histogram of rows per person (proxy/auto_bounds.py) and stored in the release cache
under a key of (table, column, data version, grid, C, q, ε). Every later query — any
analyst, any door — reads the stored bin index and plans with its bound for free: the
bound is a function of the released index and public numbers only, and it reaches the
plan (and so its cache key) as the column's declared upper bound. Until it is released,
planning assumes the limit and the plan says what the first run will pay.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from accounting import value_bounds as V
from accounting.quantiles import QuantileDescriptor
from proxy.budgets import Budgets
from proxy.cache import ReleaseStore
from proxy.catalog import split_name
from proxy.engines.executor import Executor
from proxy.policy import ColumnPolicy, Policy, TablePolicy
from proxy.released_once import release_once

# Values per person in the draw on a table whose row cap is "auto". One value (the
# proxy's default cap) would be each person's median, whose 95th percentile is far below
# the rows' own for a heavy tail; 8 keep each person's 1/16 … 15/16 quantiles, at 8 times
# the rank noise of one (a few hundred rows at ε = 0.25, against tens of thousands of
# rows on the demo data).
AUTO_TABLE_ROWS = 8


@dataclass(frozen=True)
class PendingValueBound:
    """What the first query reading an auto column pays to choose its upper bound."""

    table: str
    column: str
    limit: float
    epsilon: float


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
    """Release and store the upper bounds of "auto" columns; read them back."""

    def __init__(self, policy: Policy, executor: Executor, cache: ReleaseStore, budgets: Budgets):
        self.policy = policy
        self._executor = executor
        self._cache = cache
        self._budgets = budgets
        self._bounds: dict[tuple[str, str], float] = {}

    def _grid(self, column: ColumnPolicy) -> V.ValueGrid:
        assert column.lower is not None and column.upper_limit is not None
        return V.value_grid(column.lower, column.upper_limit)

    def rows_per_person(self, table: TablePolicy) -> int:
        """C of the draw: one row for a one-row-per-person table, else the table's row
        cap; an "auto" table, whose cap each query chooses, uses :data:`AUTO_TABLE_ROWS`
        (at most its limit)."""
        if table.one_row_per_person:
            return 1
        if table.max_rows_per_group is not None:
            return table.max_rows_per_group
        return min(AUTO_TABLE_ROWS, table.auto_rows_limit or AUTO_TABLE_ROWS)

    def _descriptor(self, table: TablePolicy, column: ColumnPolicy) -> QuantileDescriptor:
        return V.describe(
            self._grid(column),
            max_rows=self.rows_per_person(table),
            epsilon=self.policy.proxy.auto_bounds_epsilon,
        )

    def _key(self, table: TablePolicy, column: ColumnPolicy) -> str:
        facts = (
            "auto-value-bound",
            table.name,
            column.name,
            self.policy.data_version,
            self._grid(column),
            self.rows_per_person(table),
            V.QUANTILE,
            self.policy.proxy.auto_bounds_epsilon,
        )
        return hashlib.sha256(repr(facts).encode()).hexdigest()

    def released(self, table: TablePolicy, column: ColumnPolicy) -> float | None:
        """The released upper bound of an auto column, or None before it is released."""
        found = self._bounds.get((table.name, column.name))
        if found is not None:
            return found
        hit = self._cache.get(self._key(table, column))
        if hit is None:
            return None
        index = int(hit[1].column("bin").to_pylist()[0])
        found = V.bound_of(self._grid(column), index)
        self._bounds[(table.name, column.name)] = found
        return found

    def bounds(self) -> dict[tuple[str, str], float]:
        """Every auto column's upper bound for planning: released, else its limit."""
        out: dict[tuple[str, str], float] = {}
        for table in self.policy.tables:
            for column in table.columns:
                if column.upper_limit is not None:
                    got = self.released(table, column)
                    out[(table.name, column.name)] = column.upper_limit if got is None else got
        return out

    def pending(self, table: TablePolicy, needed: frozenset[str]) -> tuple[PendingValueBound, ...]:
        """The auto columns of ``table`` among ``needed`` whose bounds are not released."""
        return tuple(
            PendingValueBound(
                table.name, c.name, c.upper_limit, self.policy.proxy.auto_bounds_epsilon
            )
            for c in table.columns
            if c.upper_limit is not None
            and c.name in needed
            and self.released(table, c) is None
        )

    def release(self, pending: PendingValueBound, analyst: str) -> float:
        """Charge for, draw and store the bound of one column (once: a second caller
        finds it stored); returns the bound."""
        table = next(t for t in self.policy.tables if t.name == pending.table)
        column = table.column(pending.column)
        assert column is not None and table.population and table.unit
        descriptor = self._descriptor(table, column)
        release_once(
            self._cache,
            self._budgets,
            self._key(table, column),
            population=table.population,
            curve=descriptor.curve,
            analyst=analyst,
            note=f"auto upper bound of {table.name}.{column.name}",
            draw=lambda: self._draw(table, column, descriptor),
        )
        found = self.released(table, column)
        assert found is not None
        return found

    def _draw(
        self, table: TablePolicy, column: ColumnPolicy, descriptor: QuantileDescriptor
    ) -> pa.Table:
        """The drawn bin of the column's grid, as stored."""
        index = V.release_bound(self._grid(column), self.exact_counts(table, column), descriptor)
        return pa.table({"bin": pa.array([index])})

    def exact_counts(self, table: TablePolicy, column: ColumnPolicy) -> np.ndarray:
        """Rows per bin of the grid, each person keeping at most C of their values: a
        person with t > C values keeps those at their own positions ⌊(j + ½)·t/C⌋,
        j = 0..C−1, of their sorted values (the rule of proxy/rewrite/quantile_histogram.py:
        it reads only the person's own rows, needs no seed, and keeps C values spread like
        theirs). Values below the lower bound fall in bin 0, above the limit in the last
        bin; NULLs are left out (they never reach a sum either), and so is a value that is
        not a number (TRY_CAST: the draw runs after its charge, so no row may fail it).
        One person therefore moves the histogram by at most C in L1 (tests/reliability/test_neighbours.py)."""
        grid = self._grid(column)
        assert column.lower is not None
        db, name = split_name(table.name)
        unit, col = _quote(table.unit or ""), _quote(column.name)
        c = self.rows_per_person(table)
        whens = " ".join(f"WHEN v <= {edge!r} THEN {j}" for j, edge in enumerate(grid.edges[:-1]))
        binned = (
            f"SELECT u, CASE {whens} ELSE {grid.bins - 1} END AS b FROM "
            f"(SELECT {unit} AS u, TRY_CAST({col} AS DOUBLE) - {column.lower!r} AS v "
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
