"""Run the bounded core on DuckDB, sandboxed (the default engine).

The connection is read-only (CSV sources are read from a DuckDB copy, proxy/csv_copies.py), with external access
off, extensions never installed or loaded, the configuration locked, a thread count and
memory limit from the policy, and a time limit that interrupts the query. It implements
:class:`proxy.engines.executor.Executor`; PostgreSQL and Spark follow in proxy/engines/.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from proxy.catalog import FanOut, TableInfo, split_name
from proxy.csv_copies import CsvCopy, csv_copy
from proxy.duckdb_sandbox import sandbox_settings, spill_directory
from proxy.engines.collations import refuse_duckdb_collations
from proxy.engines.executor import check_one_row_per_person
from proxy.engines.rows_first_cut import rows_first
from proxy.errors import DPSQLError, query_timeout
from proxy.guarded_arithmetic import guarded_sql, under_try
from proxy.policy import Policy

# duplicate_groups: that optimizer drops a grouping column that is a function of the
# others, and so the keyed first column of a grouping by one column (the keyed hash
# then is not hashed: proxy/rewrite/keyed_groups.py; a probe, 2026-12-02: 1.76 s
# against 0.004 s on 32,768 crafted values).
_LOCKDOWN: dict[str, str | bool] = {
    "enable_external_access": False,
    "lock_configuration": True,
    "disabled_optimizers": "duplicate_groups",
}


def _spill(path: Path) -> dict[str, str]:
    """Spill to a folder of dpsql's own, not beside the data (see spill_directory)."""
    return {"temp_directory": spill_directory(path)}


class _Watchdog:
    """One thread that interrupts queries past their deadline (a timer thread per query
    would cost more than a small query itself)."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._armed: dict[int, tuple[float, Callable[[], object]]] = {}
        self._next = itertools.count()
        self._thread: threading.Thread | None = None
        # When the thread waits: the time it wakes by itself (else -inf: it is about to
        # look at the armed deadlines anyway).
        self._wakes_at = -math.inf

    def arm(self, timeout_s: float, interrupt: Callable[[], object]) -> int:
        token = next(self._next)
        deadline = time.monotonic() + timeout_s
        with self._wake:
            self._armed[token] = (deadline, interrupt)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dpsql-watchdog", daemon=True
                )
                self._thread.start()
            if deadline < self._wakes_at:
                # Only a sooner deadline wakes the thread: each wake-up costs the query
                # that armed it a thread switch (with equal timeouts, a later query's
                # deadline is never the sooner one).
                self._wake.notify()
        return token

    def disarm(self, token: int) -> None:
        with self._wake:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                due = [t for t, (deadline, _) in self._armed.items() if deadline <= now]
                fire = [self._armed.pop(t)[1] for t in due]
                if not fire:
                    soonest = min((d for d, _ in self._armed.values()), default=now + 60.0)
                    self._wakes_at = soonest
                    self._wake.wait(max(0.0, soonest - now))
                    self._wakes_at = -math.inf
                    continue
            for interrupt in fire:
                # The query may have finished and its cursor closed meanwhile.
                with contextlib.suppress(Exception):
                    interrupt()


WATCHDOG = _Watchdog()  # shared with the public sandbox (proxy/public_queries.py)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DuckDBExecutor:
    """Owns one locked DuckDB database; each call runs on its own cursor."""

    dialect = "duckdb"  # the core is built in DuckDB's SQL: nothing to render
    evaluation_errors: tuple[type[BaseException], ...] = (duckdb.Error,)

    def __init__(self, policy: Policy):
        self.timeout_s = policy.proxy.query_timeout_s
        config = sandbox_settings(policy)
        path = policy.duckdb_path
        self._csv: CsvCopy | None = None
        if policy.csv_tables:
            self._csv = csv_copy(policy, config)
            path = self._csv.path
        if path is None or not path.exists():
            raise DPSQLError(
                "policy_error",
                f"the database file {path} does not exist",
                "generate it (python -m sample_data.generate) or fix [database] duckdb",
            )
        # Read-only and locked at connect: DuckDB shares one instance per file within a
        # process, and every connection must then ask for the same locked configuration.
        try:
            self._db = duckdb.connect(
                str(path), read_only=True, config={**config, **_LOCKDOWN, **_spill(path)}
            )
        except duckdb.IOException:
            if self._csv is None or path.exists():
                raise
            # Another process replaced the kept CSV copy between our check and the
            # connect (proxy/csv_copies.py): build it again.
            self._csv = csv_copy(policy, config)
            self._db = duckdb.connect(
                str(self._csv.path),
                read_only=True,
                config={**config, **_LOCKDOWN, **_spill(self._csv.path)},
            )
        refuse_duckdb_collations(self.evaluate)
        check_one_row_per_person(policy, self)
        self.unique_units = self._frozen_one_row_tables(policy)
        # The core as it runs: what raises under TRY in a form that cannot (one raising
        # row made DuckDB redo its whole vector row by row: proxy/guarded_arithmetic.py).
        self._guarded = functools.lru_cache(maxsize=512)(self._guard)
        self._guard_types: dict[tuple[str, str], dict[str, str]] | None = None
        # The first cores with a TRY may be written on several threads at once.
        self._guard_types_lock = threading.Lock()

    def _frozen_one_row_tables(self, policy: Policy) -> frozenset[tuple[str, str]]:
        """The one_row_per_person tables that stay as the check above found them: base
        tables of a file this connection holds read-only. DuckDB then locks its writers
        out (another process cannot open the file for writing while we hold it; tested),
        and external access is off, so nothing the file does not hold can change. A view
        is left out: what it computes is not a table the check and the lock pin down;
        so is a table with a generated column, computed again at every read (a person id
        ``AS (CASE WHEN current_query() ...)`` passed the check and then repeated a
        person: a review, 2026-12-04). Only DuckDB writers are locked out: replacing
        the file by other means while the proxy runs is not supported (README.md)."""
        wanted = {split_name(t.name) for t in policy.tables if t.one_row_per_person and t.unit}
        if not wanted:
            return frozenset()
        rows = self._db.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() AS t "
            "WHERE database_name = current_database() AND NOT temporary AND NOT EXISTS ("
            "SELECT 1 FROM duckdb_columns() AS c WHERE c.is_generated "
            "AND c.database_name = t.database_name AND c.schema_name = t.schema_name "
            "AND c.table_name = t.table_name)"
        ).fetchall()
        base = {(str(s).lower(), str(t).lower()) for s, t in rows}
        return frozenset(key for key in wanted if key in base)

    def _guard(self, sql: str) -> str:
        """``sql`` as it runs: an L0 cut over a fine time key rows first (the same rows,
        proxy/engines/rows_first_cut.py), then what raises under TRY in its guarded form
        (the catalog's types read once, by the first core that has a TRY: start-up reads
        none)."""
        sql = rows_first(sql)
        if not under_try(sql):
            return sql
        with self._guard_types_lock:
            if self._guard_types is None:
                self._guard_types = self.column_types()
            types = self._guard_types
        return guarded_sql(sql, types)

    def guard(self, sql: str) -> None:
        """Write ``sql`` in the form it runs in (``_guard``) now, before any charge: the
        time that takes, and a refusal (a query nested too deeply to write), then fall
        before the charge whatever the data; ``run`` finds the text remembered."""
        self._guarded(sql)

    def column_types(self) -> dict[tuple[str, str], dict[str, str]]:
        # duckdb_columns() of the opened database: what information_schema.columns
        # lists at start-up (no temporary tables yet), without building and binding the
        # system catalog's default views. With the collation check, which reads the same
        # way, the executor's start-up took 34 ms of CPU and takes 21.
        # On a cursor of its own, as every other read here: DuckDB (2.0) refuses a call on
        # a connection another thread is using ("connection is busy with another call"),
        # and the first cores with a TRY read these types on request threads.
        cursor = self._db.cursor()
        try:
            rows = cursor.execute(
                "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
                "WHERE database_name = current_database() AND NOT internal ORDER BY column_index"
            ).fetchall()
        finally:
            cursor.close()
        out: dict[tuple[str, str], dict[str, str]] = {}
        for schema, table, column, dtype in rows:
            out.setdefault((str(schema).lower(), str(table).lower()), {})[str(column).lower()] = (
                str(dtype)
            )
        return out

    def run(self, sql: str, params: Sequence[Any] = ()) -> dict[str, np.ndarray]:
        cursor = self._db.cursor()
        token = WATCHDOG.arm(self.timeout_s, cursor.interrupt)
        try:
            result = cursor.execute(self._guarded(sql), list(params)).fetchnumpy()
        except duckdb.InterruptException:
            raise query_timeout(self.timeout_s) from None
        except duckdb.Error as error:
            # The rewrite makes every expression total, so an engine error here is a
            # defect or resource limit, never a data-dependent signal: keep the detail out.
            raise DPSQLError(
                "internal",
                f"the engine could not run the query ({type(error).__name__})",
                "report this to the operator; the budget charge stands",
            ) from None
        finally:
            WATCHDOG.disarm(token)
            cursor.close()
        return {k: _with_nulls(v) for k, v in result.items()}

    def fan_out(self, db: str, table: str, columns: tuple[str, ...]) -> FanOut:
        """Row count of a PUBLIC table and, per column, the most rows sharing a value."""
        name = f"{_quote(db)}.{_quote(table)}"
        cursor = self._db.cursor()
        try:
            row = cursor.execute(f"SELECT COUNT(*) FROM {name}").fetchone()
            per_value = {}
            for column in columns:
                top = cursor.execute(
                    f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {name} GROUP BY {_quote(column)})"
                ).fetchone()
                per_value[column] = int(top[0] or 0) if top else 0
        finally:
            cursor.close()
        return FanOut(int(row[0]) if row else 0, per_value)

    def public_table(self, info: TableInfo) -> pa.Table:
        """All rows of a PUBLIC table (copied into the public sandbox; never a private one)."""
        if not info.public:
            raise DPSQLError("internal", "only public tables are copied", "report this")
        cursor = self._db.cursor()
        try:
            relation = cursor.sql(f"SELECT * FROM {_quote(info.db)}.{_quote(info.name)}")
            # DuckDB 1.4 named it to_arrow_table; older releases within our range, arrow.
            method = "to_arrow_table" if hasattr(relation, "to_arrow_table") else "arrow"
            table: pa.Table = getattr(relation, method)()
            return table
        finally:
            cursor.close()

    def distinct_values(self, db: str, table: str, column: str, limit: int) -> list[Any]:
        """Distinct values of a PUBLIC table column (a public key domain)."""
        cursor = self._db.cursor()
        try:
            rows = cursor.execute(
                f"SELECT DISTINCT {_quote(column)} FROM {_quote(db)}.{_quote(table)} "
                f"WHERE {_quote(column)} IS NOT NULL ORDER BY 1 LIMIT {int(limit) + 1}"
            ).fetchall()
        finally:
            cursor.close()
        return [r[0] for r in rows]

    def describe(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[str, str]]:
        """Bind a query without running it: its output columns and types. Reads no
        data, so its errors depend only on the query text and the schema."""
        cursor = self._db.cursor()
        try:
            rows = cursor.execute("DESCRIBE " + self._guarded(sql), list(params)).fetchall()
        except duckdb.Error as error:
            first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            raise DPSQLError(
                "bad_request",
                f"the query cannot run: {first}",
                "fix the expression named above; nothing was charged",
            ) from None
        finally:
            cursor.close()
        return [(str(r[0]), str(r[1])) for r in rows]

    def evaluate(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL over literals only (key-domain expressions); no table is read."""
        cursor = self._db.cursor()
        try:
            return [tuple(r) for r in cursor.execute(sql, list(params)).fetchall()]
        finally:
            cursor.close()

    def close(self) -> None:
        self._db.close()
        if self._csv is not None:
            self._csv.close()


def _with_nulls(values: Any) -> np.ndarray:
    """A fetched column with SQL NULLs as None (np.asarray would drop the mask)."""
    # DuckDB hands back a column with NULLs as a numpy.ma masked array, which carries
    # its own mask. The mask is read from the value, never through numpy.ma: NumPy
    # imports numpy.ma lazily (about 10 ms of a cold `dpsql query`, left to the first
    # result with NULLs), and a module looked up while another thread's DuckDB is
    # importing it is half-built (an AttributeError on a loaded server, 2026-12-05: a
    # failure after the charge that a result with NULLs set off).
    mask = getattr(values, "mask", None) if isinstance(values, np.ndarray) else None
    if mask is None:
        return np.asarray(values)
    hidden = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(values))
    if not hidden.any():
        return np.asarray(values)
    out = np.array(np.asarray(values.data), dtype=object)
    out[hidden] = None
    return out
