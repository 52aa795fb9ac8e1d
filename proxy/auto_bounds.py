"""Per-person row caps chosen from the data, for tables whose policy says
``max_rows_per_group = "auto"`` (with a ``max_rows_per_group_limit``).

The first query on such a table releases, once, a DP histogram of rows per person over
power-of-two bins (``accounting.bounds``), charged to the table's population like any
release at ``[proxy] auto_bounds_epsilon`` and stored in the release cache under a key
of (table, data version, limit, mechanism, ε). Every later query — any analyst, any
door — reads the stored histogram and picks the cap from it for free: the choice is
post-processing of a released histogram. Until it is released, ``explain`` shows the
limit and says what the first query will pay.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from accounting import mechanisms
from accounting.bounds import RowBins, choose_rows_cap, rows_cut_fraction
from accounting.calibrate import (
    CalibrationError,
    ColumnSpec,
    EpsilonBudget,
    Mechanism,
    calibrate,
)
from accounting.sensitivity import AggregateKind, sensitivity
from proxy.budgets import Budgets
from proxy.cache import ReleaseStore
from proxy.catalog import split_name
from proxy.engines.executor import Executor
from proxy.errors import DPSQLError
from proxy.policy import Policy, TablePolicy


@dataclass(frozen=True)
class PendingBounds:
    """What the first query on an auto table pays to choose its cap."""

    table: str
    limit: int
    epsilon: float


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class AutoBounds:
    """Choose, store and read the data-chosen row caps of "auto" tables."""

    def __init__(self, policy: Policy, executor: Executor, cache: ReleaseStore, budgets: Budgets):
        self.policy = policy
        self._executor = executor
        self._cache = cache
        self._budgets = budgets
        self._mechanism = Mechanism(policy.proxy.mechanism)
        self._chosen: dict[str, int] = {}

    def _key(self, table: TablePolicy) -> str:
        facts = (
            "auto-bounds",
            table.name,
            self.policy.data_version,
            table.auto_rows_limit,
            self._mechanism.value,
            self.policy.proxy.auto_bounds_epsilon,
        )
        return hashlib.sha256(repr(facts).encode()).hexdigest()

    def _noise_unit(self, table: TablePolicy) -> float:
        """Std of a count of sensitivity 1 per group at the policy's default budget:
        the noise a cap of C multiplies by C."""
        k = table.max_groups or self.policy.proxy.max_groups
        cal = calibrate(
            self._mechanism,
            (ColumnSpec(True, sensitivity(AggregateKind.ROW_COUNT, max_groups=k), count=True),),
            EpsilonBudget(self.policy.proxy.default_epsilon),
            threshold_weight=None,
            max_groups=k,
            delta_conversion=self.policy.proxy.default_delta,
            delta_threshold=0.0,
        )
        return self._mechanism.std(cal.descriptors[0].scale)

    def chosen(self, table: TablePolicy) -> int | None:
        """The cap chosen for ``table`` from its released histogram, or None."""
        if table.auto_rows_limit is None:
            return None
        found = self._chosen.get(table.name)
        if found is not None:
            return found
        hit = self._cache.get(self._key(table))
        if hit is None:
            return None
        counts = hit[1].column("count").to_pylist()
        cap = choose_rows_cap(RowBins(table.auto_rows_limit), counts, self._noise_unit(table))
        self._chosen[table.name] = cap
        return cap

    def rows_cut(self, table: TablePolicy, cap: int) -> float | None:
        """Estimated share of ``table``'s rows a cap of ``cap`` leaves out (from its
        released histogram; None before it is released)."""
        if table.auto_rows_limit is None:
            return None
        hit = self._cache.get(self._key(table))
        if hit is None:
            return None
        counts = hit[1].column("count").to_pylist()
        return rows_cut_fraction(RowBins(table.auto_rows_limit), counts, cap)

    def pending(self, table: TablePolicy) -> PendingBounds | None:
        if table.auto_rows_limit is None or self.chosen(table) is not None:
            return None
        return PendingBounds(
            table.name, table.auto_rows_limit, self.policy.proxy.auto_bounds_epsilon
        )

    def release(self, table: TablePolicy, analyst: str) -> int:
        """Charge for, release and store the histogram of ``table`` (once: a second
        caller finds it stored); returns the chosen cap."""
        assert table.auto_rows_limit is not None and table.population and table.unit
        key = self._key(table)
        bins = RowBins(table.auto_rows_limit)
        one = sensitivity(AggregateKind.PERSON_COUNT, max_groups=1)
        try:
            cal = calibrate(
                self._mechanism,
                (ColumnSpec(True, one, count=True),),
                EpsilonBudget(self.policy.proxy.auto_bounds_epsilon),
                threshold_weight=None,
                max_groups=1,
                delta_conversion=self.policy.proxy.default_delta,
                delta_threshold=0.0,
            )
        except CalibrationError as error:
            raise DPSQLError(
                "policy_error",
                f"auto bounds of {table.name} cannot be calibrated: {error}",
                "raise [proxy] auto_bounds_epsilon in the policy",
            ) from None
        while not self._cache.claim(key):
            if self._cache.get(key) is not None:
                break
        try:
            if self._cache.get(key) is None:
                receipt = self._budgets.charge(
                    (table.population,),
                    cal.curve,
                    0.0,
                    analyst=analyst,
                    fingerprint=key,
                    note=f"auto bounds of {table.name}",
                )
                counts = self._exact_counts(table, bins)
                noisy = mechanisms.release_planned(
                    np.asarray(counts, dtype=np.int64),
                    mechanism=self._mechanism.value,
                    sensitivity=1.0,
                    scale=cal.descriptors[0].scale,
                    integer=True,
                    changed_coordinates=1,
                    planned=cal.descriptors[0].curve,
                )
                released = pa.table({"bin": pa.array(range(bins.count)), "count": pa.array(noisy)})
                self._cache.put(key, receipt.event_id, released)
        finally:
            self._cache.finish(key)
        cap = self.chosen(table)
        assert cap is not None
        return cap

    def _exact_counts(self, table: TablePolicy, bins: RowBins) -> list[int]:
        """Persons per power-of-two bin of their row count (the last bin open above).
        Total for every database: counts of rows are ≥ 1, and LOG2 of them is finite."""
        db, name = split_name(table.name)
        unit = _quote(table.unit or "")
        last = bins.count - 1
        sql = (
            f"SELECT LEAST(CAST(FLOOR(LOG2(n)) AS INTEGER), {last}) AS b, COUNT(*) AS c "
            f"FROM (SELECT {unit}, COUNT(*) AS n FROM {_quote(db)}.{_quote(name)} "
            f"WHERE {unit} IS NOT NULL GROUP BY {unit}) GROUP BY b"
        )
        out = self._executor.run(sql)
        counts = [0] * bins.count
        for b, c in zip(out["b"], out["c"], strict=True):
            counts[int(b)] = int(c)
        return counts
