"""Values that are released once and then read for free: the histograms and bounds that
"auto" policy settings are chosen from (proxy/auto_bounds.py: rows per person,
proxy/auto_groups.py: groups per person, proxy/auto_values.py: a column's values and
lower bound).

Each is charged to its population, drawn and stored under one cache key, with the
cache's single-flight claim so that concurrent first callers pay once; every later
read is post-processing of the stored release.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from accounting import mechanisms
from accounting.bounds import BINS, RowHistogram
from accounting.calibrate import (
    Calibration,
    CalibrationError,
    ColumnSpec,
    EpsilonBudget,
    Mechanism,
    calibrate,
)
from accounting.rdp import Curve
from accounting.sensitivity import AggregateKind, sensitivity
from proxy.budgets import Budgets
from proxy.cache import ReleaseStore
from proxy.engines.executor import Executor
from proxy.errors import DPSQLError
from proxy.policy import Policy
from proxy.rewrite.l0 import takes_seed

POLL_S = 0.05  # between looks at a release another caller is drawing

# The ledger note of every release made here begins so ("auto bounds of prompts"): the
# console tells these charges, which dpsql makes itself to choose a cap for the query
# that needed it, from the analyst's own queries (proxy/ledger_views.py).
AUTOMATIC_NOTE = "auto "


def release_once(
    cache: ReleaseStore,
    budgets: Budgets,
    key: str,
    *,
    population: str,
    curve: Curve,
    analyst: str,
    note: str,
    draw: Callable[[], pa.Table],
) -> None:
    """Charge ``curve`` to ``population`` and store ``draw()`` under ``key``, unless a
    release is stored there already (then nothing is charged). The charge is durable
    before ``draw`` reads any data, as for every answer."""
    while not cache.claim(key):
        if cache.get(key) is not None:
            break
        # Another caller flies it: poll as the engine's single flight does, not in a
        # hot loop (each claim is a write transaction on the store).
        time.sleep(POLL_S)
    try:
        if cache.get(key) is None:
            receipt = budgets.charge(
                (population,), curve, 0.0, analyst=analyst, fingerprint=key, note=note
            )
            cache.put(key, receipt.event_id, draw())
    finally:
        cache.finish(key)


class PersonHistogram:
    """A histogram with one count per person (each person in one power-of-two bin, so
    L1 sensitivity 1), released at ``[proxy] auto_bounds_epsilon``."""

    def __init__(self, policy: Policy):
        self.mechanism = Mechanism(policy.proxy.mechanism)
        self._epsilon = policy.proxy.auto_bounds_epsilon
        self._delta = policy.proxy.default_delta
        self._data_version = policy.data_version

    def key(self, *facts: object) -> str:
        """The cache key of one histogram: ``facts`` name what it counts; the data
        version and everything that sets its noise complete it."""
        everything = (
            *facts,
            self._data_version,
            BINS,
            self.mechanism.value,
            self._epsilon,
            self._delta,
        )
        return hashlib.sha256(repr(everything).encode()).hexdigest()

    def calibration(self, what: str, rows: int = 1) -> Calibration:
        """The noise of the histogram of ``what`` (named in the error if it cannot be
        calibrated at the policy's ε); ``rows``: how many counts one person adds (1 for
        people per bin, C for a column's values, each person at most C of them)."""
        one = (
            sensitivity(AggregateKind.PERSON_COUNT, max_groups=1)
            if rows == 1
            else sensitivity(AggregateKind.ROW_COUNT, max_rows=rows, max_groups=1)
        )
        try:
            return calibrate(
                self.mechanism,
                (ColumnSpec(True, one, count=True),),
                EpsilonBudget(self._epsilon),
                threshold_weight=None,
                max_groups=1,
                delta_conversion=self._delta,
                delta_threshold=0.0,
            )
        except CalibrationError as error:
            raise DPSQLError(
                "policy_error",
                f"{what} cannot be calibrated: {error}",
                "raise [proxy] auto_bounds_epsilon in the policy",
            ) from None

    def draw(
        self, counts: list[int] | np.ndarray, calibration: Calibration, rows: int = 1
    ) -> pa.Table:
        """The noisy bins of ``counts`` (one person adds at most ``rows`` in all, so at
        most ``rows`` in L1 and L2 and over at most ``rows`` bins), as stored."""
        descriptor = calibration.descriptors[0]
        noisy = mechanisms.release_planned(
            np.asarray(counts, dtype=np.int64),
            mechanism=self.mechanism.value,
            sensitivity=float(rows),
            scale=descriptor.scale,
            integer=True,
            changed_coordinates=rows,
            planned=descriptor.curve,
        )
        return pa.table({"bin": pa.array(range(len(counts))), "count": pa.array(noisy)})

    def std(self, calibration: Calibration) -> float:
        """The standard deviation of the histogram's noise."""
        return self.mechanism.std(calibration.descriptors[0].scale)

    def read(self, stored: pa.Table, calibration: Calibration) -> RowHistogram:
        """A stored release, thresholded at its detection level (accounting/bounds.py)."""
        counts = [float(c) for c in stored.column("count").to_pylist()]
        return RowHistogram.read(counts, self.mechanism.std(calibration.descriptors[0].scale))


class StoredHistograms:
    """Person histograms (:class:`PersonHistogram`) released once each and kept: read
    from the release store on first use and memoised by cache key, since a stored
    release never changes. The row caps' and K's histograms are both kept here."""

    def __init__(self, policy: Policy, cache: ReleaseStore, budgets: Budgets):
        self.person = PersonHistogram(policy)
        self._cache = cache
        self._budgets = budgets
        self._read: dict[str, RowHistogram] = {}

    def get(self, key: str, what: str) -> RowHistogram | None:
        """The released histogram under ``key``, read, or None before it is released
        (``what`` names it if it cannot be calibrated)."""
        found = self._read.get(key)
        if found is not None:
            return found
        hit = self._cache.get(key)
        if hit is None:
            return None
        found = self.person.read(hit[1], self.person.calibration(what))
        self._read[key] = found
        return found

    def release(
        self,
        key: str,
        what: str,
        *,
        population: str,
        analyst: str,
        counts: Callable[[], list[int]],
    ) -> RowHistogram:
        """Charge ``population`` for, release and store the histogram of ``counts``
        under ``key`` (once: a second caller finds it stored); returns it, read. The
        ledger note is ``what``."""
        cal = self.person.calibration(what)
        release_once(
            self._cache,
            self._budgets,
            key,
            population=population,
            curve=cal.curve,
            analyst=analyst,
            note=what,
            draw=lambda: self.person.draw(counts(), cal),
        )
        found = self.get(key, what)
        assert found is not None
        return found


def person_bins(executor: Executor, per_person_sql: str) -> list[int]:
    """People per power-of-two bin of ``n``, from SQL giving one row (person, n ≥ 1) per
    person; the last bin is open above. Total for every database: LOG2 of a count ≥ 1
    is finite."""
    last = BINS - 1
    sql = (
        f"SELECT LEAST(CAST(FLOOR(LOG2(n)) AS INTEGER), {last}) AS b, COUNT(*) AS c "
        f"FROM ({per_person_sql}) AS __n GROUP BY b"
    )
    # (a keyed grouping reads the secret seed: proxy/rewrite/keyed_groups.py)
    out = executor.run(sql, [mechanisms.secret_seed()] if takes_seed(sql) else [])
    counts = [0] * BINS
    for b, c in zip(out["b"], out["c"], strict=True):
        counts[int(b)] = int(c)
    return counts
