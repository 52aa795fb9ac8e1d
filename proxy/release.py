"""Turn exact per-group aggregates into the released noisy table, then run the
analyst's outer layer (arithmetic, HAVING, ORDER BY, LIMIT) over it.

Noise comes only from ``accounting.mechanisms``. Public key domains are completed (every
key, empty ones as zeros before noise); private keys go through partition selection on
the noisy person count. The outer layer runs in a separate in-memory DuckDB that holds
nothing but the released table.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from accounting import mechanisms
from accounting.calibrate import Mechanism
from accounting.mechanisms import MAX_UNITS, PlannedColumn
from proxy import quantile_release
from proxy.budget import ColumnNoise
from proxy.errors import DPSQLError
from proxy.plan import Plan
from proxy.post_database import POST_MEMORY_LIMIT, open_post_database
from proxy.rewrite import core as C

_FLOAT_LIMIT = 1e300  # finite; the mechanism clamps to its own grid range below this


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _decimal(value: Any) -> Any:
    """A DECIMAL key the core returned as its text (Core.text_keys), as the exact
    Decimal; NULL stays None, and a text no Decimal reads stays text (nothing after the
    charge may fail on a value)."""
    value = _python(value)
    if not isinstance(value, str):
        return value
    try:
        return Decimal(value)
    except InvalidOperation:
        return value


def _exact_keys(values: Sequence[Any], sql_type: str) -> list[Any]:
    """The core's key values as released: DECIMALs from their text, exactly (a domain's
    Decimal('0.1') then matches the group's, which as a float64 it never did)."""
    if sql_type.startswith("DECIMAL"):
        return [_decimal(v) for v in values]
    if sql_type == "DATE":
        # NumPy fetches a DATE as a timestamp at midnight, which no domain's date
        # equals: a DATE column's declared values answered 0 in every group (a review,
        # 2026-12-06)
        return [_as_date(v) for v in values]
    return [_python(v) for v in values]


def _as_date(value: Any) -> Any:
    if isinstance(value, np.datetime64):
        return None if np.isnat(value) else value.astype("datetime64[D]").item()
    value = _python(value)
    return value.date() if isinstance(value, datetime) else value


def release_keys(values: list[Any]) -> pa.Array:
    """Key values as a released Arrow column (see :func:`_key_array`)."""
    return _key_array(values)


# A type name as DESCRIBE writes it (no quotes, no statement separators).
_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]*(\([0-9, ]*\))?")


@functools.lru_cache(maxsize=256)
def _arrow_type(sql_type: str) -> pa.DataType | None:
    """The Arrow type DuckDB gives a column of ``sql_type``, or None when unknown."""
    if not _TYPE_NAME.fullmatch(sql_type):
        return None
    try:
        with duckdb.connect(":memory:") as con:
            return con.sql(f"SELECT CAST(NULL AS {sql_type}) AS k").to_arrow_table().schema[0].type
    except duckdb.Error:
        return None


def _key_array(values: list[Any], sql_type: str = "") -> pa.Array:
    """Key values as an Arrow column; values Arrow cannot type (128-bit integers,
    mixed kinds) are released as text rather than failing after the charge. A DATE key
    stays a date (NumPy fetches it as a timestamp at midnight). A float -0.0 is released
    as 0.0: DuckDB groups the two together and keeps whichever it met first, so the
    sign would say whose row came first (a probe, 2026-12-02). With no values, the column
    still has the key's type, so that the outer layer binds as it would with rows."""
    values = [v + 0.0 if isinstance(v, float) else v for v in values]
    try:
        if sql_type == "DATE":
            return pa.array(
                [v.date() if isinstance(v, datetime) else v for v in values], type=pa.date32()
            )
        if not values and sql_type:
            kind = _arrow_type(sql_type)
            if kind is not None:
                return pa.array([], type=kind)
        return pa.array(values)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def _filled(array: np.ndarray) -> np.ndarray:
    """Statistics of an empty input (SQL NULL) count as 0."""
    if array.dtype == object:
        return np.array([0 if v is None else v for v in array], dtype=object)
    return array


def _complete_domain(
    plan: Plan, exact: Mapping[str, np.ndarray]
) -> tuple[list[tuple[Any, ...]], dict[str, np.ndarray], list[int | None]]:
    """Per domain key: its statistics (0 when absent) and its row in ``exact`` (or None)."""
    assert plan.domain is not None
    types = {name: kind.upper() for name, kind in plan.released_columns}
    keys = [_exact_keys(list(exact[k]), types.get(k, "")) for k in plan.key_columns]
    rows = len(keys[0]) if keys else len(next(iter(exact.values())))
    index = {tuple(k[i] for k in keys): i for i in range(rows)}
    found = [index.get(tuple(_python(v) for v in d)) for d in plan.domain]
    out: dict[str, np.ndarray] = {}
    for noise in plan.noise:
        column = _filled(np.asarray(exact[noise.statistic.column]))
        out[noise.statistic.column] = np.array(
            [0 if i is None else column[i] for i in found], dtype=object
        )
    return list(plan.domain), out, found


def _numbers(values: np.ndarray, integer: bool) -> np.ndarray:
    """Exact statistics as the mechanism's input type. The core already hands them over
    as BIGINT within ±2^62 or finite DOUBLE; clamping again costs nothing and keeps this
    step total should a value ever arrive outside that range."""
    if integer:
        if values.dtype == np.int64:  # as fetched: the same clamp, without a Python loop
            return np.clip(values, -MAX_UNITS, MAX_UNITS)
        return np.array([max(-MAX_UNITS, min(MAX_UNITS, int(v))) for v in values], dtype=np.int64)
    data = (
        values  # nan_to_num below copies
        if values.dtype == np.float64
        else np.array([float(v) for v in values], dtype=np.float64)
    )
    return np.nan_to_num(data, nan=0.0, posinf=_FLOAT_LIMIT, neginf=-_FLOAT_LIMIT)


def _planned_column(noise: ColumnNoise, values: np.ndarray, k: int) -> PlannedColumn:
    integer = noise.statistic.integer
    return PlannedColumn(
        _numbers(values, integer),
        mechanism=noise.descriptor.mechanism,
        sensitivity=Mechanism(noise.descriptor.mechanism).sensitivity_of(noise.sensitivity),
        scale=noise.descriptor.scale,
        integer=integer,
        changed_coordinates=k,
        planned=noise.descriptor.curve,
    )


def _noised(columns: Sequence[PlannedColumn]) -> list[np.ndarray]:
    """The statistics' columns noised as planned: one sampler call per distinct scale
    (accounting/mechanisms.py), not one per column."""
    try:
        return [np.asarray(c) for c in mechanisms.release_planned_columns(columns)]
    except mechanisms.MechanismError:
        # The plan and the draw disagree: a defect, and the charge already stands.
        raise DPSQLError("internal", "noise differs from the plan", "report this") from None


def _planned(values: np.ndarray, **kwargs: Any) -> np.ndarray:
    try:
        return mechanisms.release_planned(values, **kwargs)
    except mechanisms.MechanismError:
        # The plan and the draw disagree: a defect, and the charge already stands.
        raise DPSQLError("internal", "noise differs from the plan", "report this") from None


def _select_partitions(
    plan: Plan, exact: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    thr = plan.threshold
    assert thr is not None
    persons = np.asarray(_filled(np.asarray(exact["__persons"])), dtype=np.int64)
    k = thr.max_groups
    noisy = np.asarray(
        _planned(
            persons,
            mechanism=thr.mechanism,
            sensitivity=Mechanism(thr.mechanism).threshold_sensitivity(k),
            scale=thr.scale,
            integer=True,
            changed_coordinates=k,
            planned=thr.curve,
        ),
        dtype=np.int64,
    )
    return noisy >= thr.tau, noisy


def release(plan: Plan, exact: Mapping[str, np.ndarray]) -> pa.Table:
    """The released table: key columns, one noisy column per statistic (+ ``__persons``)."""
    columns: dict[str, Any] = {}
    sources: list[int | None]  # the row of ``exact`` each released row comes from
    types = {name: kind.upper() for name, kind in plan.released_columns}
    if plan.domain is not None:
        domain_rows, stats, sources = _complete_domain(plan, exact)
        for i, name in enumerate(plan.key_columns):
            columns[name] = _key_array([row[i] for row in domain_rows], types.get(name, ""))
    else:
        keep, noisy_persons = _select_partitions(plan, exact)
        for name in plan.key_columns:
            values = np.asarray(exact[name], dtype=object)[keep]
            kind = types.get(name, "")
            columns[name] = _key_array(_exact_keys(list(values), kind), kind)
        stats = {
            n.statistic.column: _filled(np.asarray(exact[n.statistic.column]))[keep]
            for n in plan.noise
        }
        columns["__persons"] = noisy_persons[keep]
        sources = [int(i) for i in np.flatnonzero(keep)]
    planned = [
        _planned_column(noise, stats[noise.statistic.column], plan.max_groups)
        for noise in plan.noise
    ]
    for noise, noisy in zip(plan.noise, _noised(planned), strict=True):
        if (
            noise.statistic.kind == C.SUM
            and noise.statistic.values_integer
            and not (noise.statistic.integer)
        ):
            # A sum of integers noised on a float grid (its per-person parts may be
            # scaled): shown as a whole number, since the fraction is noise alone.
            noisy = np.clip(np.rint(noisy), -MAX_UNITS, MAX_UNITS).astype(np.int64)
        columns[noise.statistic.column] = noisy
    # MEDIAN, quantiles, MIN, MAX: drawn for the released groups only.
    columns.update(quantile_release.released_columns(plan, exact, sources))
    table = pa.table(columns)
    if plan.domain is None and plan.key_columns:
        # The engine emits groups in the order it met them, which follows the data (e.g.
        # the first person's groups first): released rows are put in key order, so that
        # what an answer shows is a function of the released values alone.
        table = table.take(_key_order(table, plan.key_columns))
    return table


def _key_order(table: pa.Table, keys: tuple[str, ...]) -> pa.Array:
    """Row order by key; by the keys' text where Arrow cannot sort their type."""
    # Imported here: pyarrow.compute is a fifth of pyarrow's import time, and answers
    # over public key domains and cache hits (a cold `dpsql query`) never sort.
    import pyarrow.compute as pc

    try:
        return pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        rows = zip(*(table.column(k).to_pylist() for k in keys), strict=True)
        text = [tuple("" if v is None else str(v) for v in row) for row in rows]
        return pa.array(sorted(range(len(text)), key=text.__getitem__), type=pa.int64())


class PostProcessor:
    """Runs outer layers over released tables in a private in-memory DuckDB."""

    def __init__(
        self,
        memory_limit: str = POST_MEMORY_LIMIT,
        *,
        database: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        # The database is opened on first use: starting a DuckDB instance is a
        # noticeable part of a cold CLI process that may never run an outer layer.
        # ``database``: one open_post_database opened already (proxy/engine_opening.py).
        self._memory_limit = memory_limit
        self._db: duckdb.DuckDBPyConnection | None = database
        self._opening = threading.Lock()
        self._local = threading.local()

    def _database(self) -> duckdb.DuckDBPyConnection:
        with self._opening:
            if self._db is None:
                self._db = open_post_database(self._memory_limit)
            return self._db

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._database().cursor()
            self._local.cursor = cursor
        return cursor

    def run(self, outer_sql: str, table: pa.Table) -> tuple[list[str], list[tuple[Any, ...]]]:
        cursor = self._cursor()
        try:
            # Registering replaces this thread's previous table; unregistering it
            # would cost a quarter of a small outer query.
            cursor.register("released", table)
            result = cursor.execute(outer_sql)
            names = [d[0] for d in result.description or []]
            rows = [tuple(r) for r in result.fetchall()]
        except (duckdb.Error, ValueError, OverflowError) as error:
            # Released values only: a failure here (e.g. a date beyond Python's range)
            # says nothing the released table does not, and the release stays cached.
            raise DPSQLError(
                "bad_request",
                f"the outer layer (select list, HAVING, ORDER BY) failed: {type(error).__name__}",
                "check arithmetic over aggregates; it runs on released values only, and the "
                "release is cached: asking again with a fixed outer layer is free",
            ) from None
        return names, rows

    def described(self, outer_sql: str, table: pa.Table) -> tuple[tuple[str, pa.DataType], ...]:
        """The column types of ``outer_sql`` over ``table``: (DuckDB's name, Arrow's type)
        of each; () where it does not bind (its run above reports that)."""
        cursor = self._cursor()
        cursor.register("released", table)
        try:
            relation = cursor.sql(f"SELECT * FROM ({outer_sql}) LIMIT 0")
            names = tuple(str(t) for t in relation.types)
            arrow = relation.to_arrow_table().schema.types
        except duckdb.Error:
            return ()
        return tuple(zip(names, arrow, strict=True))

    def double(self, literal_sql: str) -> float:
        """DuckDB's DOUBLE value of a numeric literal as written in an outer layer (what
        its arithmetic with DOUBLE operands reads; proxy/outer_direct.py); NaN when it
        has none, which leaves the layer to DuckDB."""
        try:
            # fetchall: a result left open would keep the cursor from registering tables.
            rows = self._cursor().execute(f"SELECT CAST({literal_sql} AS DOUBLE)").fetchall()
        except duckdb.Error:
            return math.nan
        if len(rows) != 1 or not isinstance(rows[0][0], float):
            return math.nan
        value: float = rows[0][0]
        return value

    def stand_in(self, columns: Sequence[tuple[str, str]]) -> pa.Table:
        """One row of the released table's columns: NULL keys, zero statistics."""
        values = ", ".join(
            f"CAST({'NULL' if name.startswith('__k') else '0'} AS {ctype}) AS {name}"
            for name, ctype in columns
        )
        cursor = self._cursor()
        table: pa.Table = cursor.sql(f"SELECT {values}").to_arrow_table()
        return table

    def validate(self, outer_sql: str, columns: list[tuple[str, str]]) -> None:
        """Bind the outer layer against an empty table of the released schema, so that
        its mistakes are refused before the charge rather than after it."""
        # Keys NULL, statistics 0: one row makes DuckDB evaluate every expression once.
        values = ", ".join(
            f"CAST({'NULL' if name.startswith('__k') else '0'} AS {ctype}) AS {name}"
            for name, ctype in columns
        )
        cursor = self._cursor()
        try:
            cursor.execute(f"WITH released AS (SELECT {values}) {outer_sql}").fetchall()
        except duckdb.Error as error:
            first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            raise DPSQLError(
                "bad_request",
                f"the outer layer (select list, HAVING, ORDER BY) cannot run: {first}",
                "check arithmetic over aggregates and the names used in ORDER BY/HAVING",
            ) from None

    def close(self) -> None:
        with self._opening:
            if self._db is not None:
                self._db.close()
