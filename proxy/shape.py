"""What the checker found in a bound query: the facts the rewrite rules work from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from proxy.catalog import TableInfo

# Aggregate kinds an analyst may ask for, by what the rewrite needs to release them.
COUNT_ROWS = "count_rows"
COUNT = "count"
COUNT_PERSONS = "count_persons"
# COUNT(DISTINCT k), k not the person: each person keeps at most C distinct values of k
# per group (proxy/rewrite/distinct_values.py).
COUNT_DISTINCT = "count_distinct"
# SUM(DISTINCT x), AVG(DISTINCT x): over the same bounded distinct values.
SUM_DISTINCT = "sum_distinct"
AVG_DISTINCT = "avg_distinct"
SUM = "sum"
AVG = "avg"
VAR_POP = "var_pop"
VAR_SAMP = "var_samp"
STDDEV_POP = "stddev_pop"
STDDEV_SAMP = "stddev_samp"
VARIANCE_KINDS = (VAR_POP, VAR_SAMP, STDDEV_POP, STDDEV_SAMP)
# VAR/STDDEV(DISTINCT x): the variance of the bounded distinct values (as SUM(DISTINCT)).
DISTINCT_VARIANCE = {k: f"{k}_distinct" for k in VARIANCE_KINDS}
VARIANCE_DISTINCT_KINDS = tuple(DISTINCT_VARIANCE.values())
# Released by the exponential mechanism over a grid (proxy/quantile_sql.py lists the
# spellings): a quantile at level ``q``, or MIN/MAX as the value a few rows from the end.
QUANTILE = "quantile"
MINIMUM = "min"
MAXIMUM = "max"
QUANTILE_KINDS = (QUANTILE, MINIMUM, MAXIMUM)


@dataclass(frozen=True, eq=False)
class AggregateCall:
    """One aggregate of the analyst's query, with its (bound) row-level argument."""

    kind: str
    arg: exp.Expr | None
    sql: str  # canonical text of the whole aggregate node, to find it in the outer layer
    q: float | None = None  # the level of a QUANTILE (ascending order, in [0, 1])


@dataclass(frozen=True, eq=False)
class Shape:
    """A checked, answerable query."""

    select: exp.Select
    tables: Mapping[str, TableInfo]  # table alias -> table
    unit: exp.Column  # person id column of the anchor private table
    population: str
    keys: tuple[exp.Expr, ...]
    key_sqls: tuple[str, ...]  # canonical text of each key, rendered once by the checker
    # Canonical text of each select item (under its alias), where the checker rendered it.
    item_sqls: tuple[str | None, ...]
    aggregates: tuple[AggregateCall, ...]
    pins: tuple[str, ...]  # partition values the WHERE clause pins (empty: whole population)
    partition_column: str | None  # "table.column" of the population's partition, if any
    key_release: bool = False  # GROUP BY (or DISTINCT) with no aggregate: the keys alone

    def private_tables(self) -> tuple[TableInfo, ...]:
        return tuple(t for t in self.tables.values() if not t.public)
