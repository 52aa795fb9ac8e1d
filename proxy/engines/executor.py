"""The executor interface: everything the engine asks of the database that holds the data.

The engine never touches a database any other way. Every SQL text it hands over is in
the engine-neutral form the rewrite builds (sqlglot trees rendered as DuckDB SQL); each
executor renders it for its own engine (proxy/engines/render.py) or refuses it with
``unsupported_sql`` when the engine cannot run a construct with the same semantics. The
engine calls :meth:`Executor.describe` on every core before any charge, so such a refusal
always comes before the charge.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from proxy.catalog import FanOut, TableInfo, split_name
from proxy.errors import DPSQLError
from proxy.policy import Policy

# Catalog type names are DuckDB's (the engine and the doors compare, cast and show
# them): every executor maps its engine's types onto these names.
ColumnTypes = dict[tuple[str, str], dict[str, str]]


@runtime_checkable
class Executor(Protocol):
    """One database, read-only, behind a time limit."""

    #: the sqlglot dialect this executor renders to (plain DuckDB for the embedded one)
    dialect: str
    #: the time limit of one call of :meth:`run`, in seconds
    timeout_s: float
    #: what :meth:`evaluate` raises when an expression fails on its literals
    evaluation_errors: tuple[type[BaseException], ...]

    def column_types(self) -> ColumnTypes:
        """(schema, table) -> column -> catalog type name, lower-case names."""
        ...

    def describe(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[str, str]]:
        """Bind a core without reading data: its output columns and catalog types.
        Refuses (``bad_request`` or ``unsupported_sql``) what cannot run here."""
        ...

    def run(self, sql: str, params: Sequence[Any] = ()) -> dict[str, np.ndarray]:
        """Run a core (read-only, within the time limit): its columns by name."""
        ...

    def distinct_values(self, db: str, table: str, column: str, limit: int) -> list[Any]:
        """Up to ``limit + 1`` distinct non-NULL values of a PUBLIC table's column."""
        ...

    def fan_out(self, db: str, table: str, columns: tuple[str, ...]) -> FanOut:
        """Of a PUBLIC table: its row count and, per column, the most rows sharing one
        value (how far a join on that column can multiply a person's rows)."""
        ...

    def evaluate(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run trusted SQL over literals or public facts (key domains, checks)."""
        ...

    def close(self) -> None: ...


def public_table(executor: Executor, info: TableInfo) -> pa.Table:
    """All rows of a PUBLIC table, from any engine (never a private one)."""
    if not info.public:
        raise DPSQLError("internal", "only public tables are copied", "report this")
    own = getattr(executor, "public_table", None)
    if own is not None:
        table: pa.Table = own(info)
        return table
    names = list(info.column_types)
    quoted = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
    rows = executor.evaluate(f'SELECT {quoted} FROM "{info.db}"."{info.name}"')
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})


def check_one_row_per_person(policy: Policy, executor: Executor) -> None:
    """Refuse to start when a table declared one_row_per_person repeats a person: the
    rewrite relies on it (no per-person sum is scaled, one group per person)."""
    for table in policy.tables:
        if not (table.one_row_per_person and table.unit):
            continue
        db, name = split_name(table.name)
        unit = '"' + table.unit.replace('"', '""') + '"'
        rows = executor.evaluate(f'SELECT COUNT(*) = COUNT(DISTINCT {unit}) FROM "{db}"."{name}"')
        if not rows or not rows[0][0]:
            raise DPSQLError(
                "policy_error",
                f"table {table.name} is declared one_row_per_person but its unit "
                "column has repeated values",
                "remove one_row_per_person or fix the data",
            )


def frozen_unique_units(executor: Executor) -> frozenset[tuple[str, str]]:
    """(schema, table) of the one_row_per_person tables whose unit column stays unique
    for as long as ``executor`` lives: checked at its start by
    :func:`check_one_row_per_person` on data nobody can change while it reads them. Only
    executors that can promise that name any (the DuckDB one: ``unique_units``); the
    others keep enforcing one row per person in every core."""
    units: frozenset[tuple[str, str]] = getattr(executor, "unique_units", frozenset())
    return units


def plain(value: Any) -> Any:
    """NUMERIC values that are whole numbers as int (DuckDB gives BIGINT/HUGEINT)."""
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    return value


def columns_of(names: list[str], rows: list[tuple[Any, ...]]) -> dict[str, np.ndarray]:
    """Fetched rows as the executor interface's columns: int64 or float64 arrays where
    every value is one, else an object array (None for NULL)."""
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        values = [r[i] for r in rows]
        if (
            values
            and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            and all(-(2**63) <= v < 2**63 for v in values)
        ):
            out[name] = np.array(values, dtype=np.int64)
            continue
        if values and all(isinstance(v, float) for v in values):
            out[name] = np.array(values, dtype=np.float64)
            continue
        column = np.empty(len(values), dtype=object)
        column[:] = [plain(v) for v in values]
        out[name] = column
    return out
