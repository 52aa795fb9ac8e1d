"""The Spark SQL executor: local mode (``master = "local[2]"``) or a cluster through
Spark Connect (``remote = "sc://host:15002"``).

Each executor has its own Spark session (one JVM per process, sessions share it), with
ANSI mode off (see proxy/engines/spark_forms.py for why and what stays total), UTC as
the session time zone and the Spark UI off. With ``parquet = DIR`` the policy's tables
are registered as temporary views of ``DIR/<schema>/<table>/`` -- a read-only catalog
that lives and dies with the session; without it the session's own catalog is read
(``default`` for DuckDB's ``main``). Only SQL rendered from the rewrite's trees is ever
sent, and :meth:`_checked` makes sure it is one query. The time limit tags each call's
jobs and interrupts the tag when the limit passes. The secret seed is a named parameter
(``:p0``), bound by Spark, never in the SQL text. Needs the ``spark`` extra.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from proxy.catalog import FanOut, split_name
from proxy.engines.executor import ColumnTypes, check_one_row_per_person, columns_of
from proxy.engines.render import Rendered, render
from proxy.engines.spark_forms import SparkForms, view_name
from proxy.errors import DPSQLError, query_timeout
from proxy.policy import Policy

_TYPES = {
    "boolean": "BOOLEAN",
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "int": "INTEGER",
    "bigint": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP",
}
_CALLS = itertools.count()


def catalog_type(spark_type: str) -> str:
    name = spark_type.lower()
    if name.startswith("decimal"):
        return name.upper().replace(",", ", ")
    if name.startswith(("varchar", "char")):
        return "VARCHAR"
    return _TYPES.get(name, name.upper())


class SparkExecutor:
    dialect = "spark"

    def __init__(self, policy: Policy):
        try:
            from pyspark.errors import PySparkException
            from pyspark.sql import SparkSession
        except ImportError:
            raise DPSQLError(
                "policy_error",
                'engine = "spark" needs the spark extra',
                "pip install 'dpsql[spark]'",
            ) from None
        self.evaluation_errors: tuple[type[BaseException], ...] = (PySparkException,)
        self._errors = PySparkException
        self.timeout_s = policy.proxy.query_timeout_s
        settings = policy.database
        builder = SparkSession.builder
        if settings.remote:
            builder = builder.remote(settings.remote)
        else:
            builder = (
                builder.master(str(settings.master))
                .config("spark.ui.enabled", "false")
                .config("spark.driver.memory", settings.driver_memory or driver_memory())
            )
        self._spark = builder.getOrCreate().newSession()
        for key, value in (
            ("spark.sql.ansi.enabled", "false"),
            ("spark.sql.session.timeZone", "UTC"),
            ("spark.sql.parquet.inferTimestampNTZ.enabled", "true"),
        ):
            self._spark.conf.set(key, value)
        self._views = settings.parquet is not None
        self._remote = settings.remote is not None
        if settings.parquet is not None:
            for table in policy.tables:
                db, name = split_name(table.name)
                folder = settings.parquet / db / name
                if not folder.exists():
                    raise DPSQLError(
                        "policy_error",
                        f"table {table.name}: {folder} does not exist",
                        "write it with `dpsql generate --parquet DIR` or fix [database] parquet",
                    )
                frame = self._spark.read.parquet(str(folder))
                frame.createOrReplaceTempView(view_name(db, name))
        if not self._remote:
            # (a Spark Connect server keeps its own setting: its operator sized it)
            partitions = settings.shuffle_partitions or shuffle_partitions(
                policy.proxy.threads, _parquet_bytes(policy)
            )
            self._spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        self._forms = SparkForms(self._views)
        self._types = self._introspect(policy)
        self._render = functools.lru_cache(maxsize=512)(self._render_uncached)
        check_one_row_per_person(policy, self)

    def _introspect(self, policy: Policy) -> ColumnTypes:
        out: ColumnTypes = {}
        for table in policy.tables:
            db, name = split_name(table.name)
            relation = self._forms.table(db, name).sql(dialect="spark")
            try:
                fields = self._spark.table(relation).dtypes
            except self._errors:
                continue  # the catalog check (proxy/catalog.py) names the missing table
            out[(db, name)] = {c.lower(): catalog_type(t) for c, t in fields}
        return out

    def column_types(self) -> ColumnTypes:
        return {k: dict(v) for k, v in self._types.items()}

    def _render_uncached(self, sql: str) -> Rendered:
        rendered = render(sql, self._forms, self._types)
        _checked(rendered.sql)
        return rendered

    def rendered(self, sql: str) -> str:
        return self._render(sql).sql

    def _frame(self, sql: str, params: Sequence[Any]) -> Any:
        rendered = self._render(sql)
        # (a long IN list keyed in a core without a seed reads one of its own)
        args = {f"p{i}": v for i, v in enumerate(rendered.bound(params))}
        return self._spark.sql(rendered.sql, args=args or None)

    def describe(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[str, str]]:
        try:
            # Analysis only: a DataFrame's schema is resolved without running a job.
            fields = self._frame(sql, params).dtypes
        except self._errors as error:
            first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            raise DPSQLError(
                "bad_request",
                f"the query cannot run on Spark: {first}",
                "fix the expression named above; nothing was charged",
            ) from None
        return [(c, catalog_type(t)) for c, t in fields]

    def _collect(
        self, sql: str, params: Sequence[Any]
    ) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """The rows of ``sql``, and whether the time limit passed before they came."""
        tag = f"dpsql-{next(_CALLS)}"
        stop: Callable[[], object]
        if self._remote:
            # Spark Connect: the session's operation tags
            self._spark.addTag(tag)
            stop = functools.partial(self._spark.interruptTag, tag)
        else:
            # classic: a job group of this thread (PySpark pins Python threads to JVM
            # threads), cancelled with its running tasks
            context = self._spark.sparkContext
            context.setJobGroup(tag, "dpsql core", interruptOnCancel=True)
            stop = functools.partial(context.cancelJobGroup, tag)
        done, late = threading.Event(), threading.Event()

        def stop_until_done() -> None:
            # A cancel that finds no active job (the query between two of its jobs, or
            # still planning) is lost, and the next job would run to the end: cancel
            # again until the call returns, and let run() refuse what comes late.
            late.set()
            while not done.is_set():
                stop()
                done.wait(0.1)

        timer = threading.Timer(self.timeout_s, stop_until_done)
        timer.daemon = True
        timer.start()
        try:
            table = self._frame(sql, params).toArrow()
        finally:
            done.set()
            timer.cancel()
            if self._remote:
                self._spark.removeTag(tag)
            else:
                self._spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        names = list(table.column_names)
        columns = [_plain_column(table.column(i).to_pylist()) for i in range(table.num_columns)]
        rows = list(zip(*columns, strict=True)) if columns else []
        return names, rows, late.is_set()

    def run(self, sql: str, params: Sequence[Any] = ()) -> dict[str, np.ndarray]:
        started = _now()
        try:
            names, rows, late = self._collect(sql, params)
        except Exception as error:  # py4j and Spark errors alike
            if _now() - started >= self.timeout_s:
                raise query_timeout(self.timeout_s) from None
            raise DPSQLError(
                "internal",
                f"the engine could not run the query ({type(error).__name__})",
                "report this to the operator; the budget charge stands",
            ) from None
        if late:
            # Past the limit, whether or not a cancel reached the job: the same outcome
            # for every query that runs that long.
            raise query_timeout(self.timeout_s)
        return columns_of(names, rows)

    def distinct_values(self, db: str, table: str, column: str, limit: int) -> list[Any]:
        quoted = exp.column(column, quoted=True).sql(dialect="duckdb")
        rows = self.evaluate(
            f'SELECT DISTINCT {quoted} FROM "{db}"."{table}" WHERE {quoted} IS NOT NULL '
            f"ORDER BY 1 LIMIT {int(limit) + 1}"
        )
        return [r[0] for r in rows]

    def fan_out(self, db: str, table: str, columns: tuple[str, ...]) -> FanOut:
        name = f'"{db}"."{table}"'
        rows = self.evaluate(f"SELECT COUNT(*) FROM {name}")
        per_value = {}
        for column in columns:
            quoted = exp.column(column, quoted=True).sql(dialect="duckdb")
            top = self.evaluate(
                f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {name} GROUP BY {quoted}) AS c"
            )
            per_value[column] = int(top[0][0] or 0) if top else 0
        return FanOut(int(rows[0][0]) if rows else 0, per_value)

    def evaluate(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._collect(sql, params)[1]

    def close(self) -> None:
        if self._views:
            for name in self._spark.catalog.listTables():
                if name.isTemporary:
                    self._spark.catalog.dropTempView(name.name)


def driver_memory(physical: int | None = None) -> str:
    """The heap of the Spark JVM dpsql starts when the policy does not size it: a
    quarter of the machine's memory, from 1 to 8 GiB. Spark's own default of 1 GiB is
    meant for a driver that only coordinates; in local mode the driver runs every task,
    and at 10M rows the private key's floor took 13.8 s and its core 19.7 s (1.43x) with
    1 GiB, 9.0 s and 8.9 s with 6 GiB (BENCHMARKS.md, Spark). The setting takes effect
    when the JVM starts: the first Spark engine of a process sizes it for all."""
    if physical is None:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    gib = min(8, max(1, physical // 4 // 2**30))
    return f"{gib}g"


# One shuffle partition per this much of the tables' Parquet (see shuffle_partitions).
_PARTITION_BYTES = 64 * 2**20


def shuffle_partitions(threads: int, input_bytes: int) -> int:
    """How many partitions a shuffle of a local-mode query gets: one per 64 MiB of the
    policy's Parquet tables, and at least two per thread.

    Each partition of the person-hashed rows is aggregated by one task in one hash map.
    With 4 partitions (two per thread) at 100M prompts (1.9 GB of Parquet) each task's
    map held about 25M (person, day) groups and the private key's core took 178 s
    against an 87 s floor; with 32 it took 52 s against 72 s (BENCHMARKS.md, Spark).
    At 1M rows 4 partitions were the fastest (32 cost 15%, 200 cost 40%) and at 10M,
    4 to 64 measured alike, so the count grows with the data only past 64 MiB a
    partition. The size is read once, when the engine opens: it is a property of the
    tables, not of any query, and every query on them gets the same plan."""
    return max(2, 2 * threads, -(-input_bytes // _PARTITION_BYTES))


def _parquet_bytes(policy: Policy) -> int:
    """The size of the policy's tables in their Parquet folders (0 without them: tables
    of the session's own catalog are not measured; ``[database] shuffle_partitions``
    sizes their shuffles)."""
    folder = policy.database.parquet
    if folder is None:
        return 0
    total = 0
    for table in policy.tables:
        db, name = split_name(table.name)
        for path in (folder / db / name).rglob("*"):
            if path.is_file():
                total += path.stat().st_size
    return total


def _now() -> float:
    return time.monotonic()


def _plain_column(values: list[Any]) -> list[Any]:
    """Spark hands TIMESTAMP values back as aware datetimes in the session's zone (UTC):
    as naive ones, like DuckDB's TIMESTAMP."""
    return [v.replace(tzinfo=None) if getattr(v, "tzinfo", None) is not None else v for v in values]


def _checked(sql: str) -> None:
    """Only one query goes to Spark (the renderer builds it from trees; this makes sure
    nothing else, e.g. a second statement or a DDL, could ride along)."""
    statements = sqlglot.parse(sql, read="spark")
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise DPSQLError("internal", "the rendered core is not one query", "report this")
