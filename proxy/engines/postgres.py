"""The PostgreSQL executor: the bounded core runs where the data already is.

Read-only three times over: the operator's role should only have SELECT (README,
"Engines"), every session starts with ``default_transaction_read_only = on``, and every
call runs in a ``READ ONLY`` transaction. Each call sets ``statement_timeout`` to the
policy's time limit, so the server itself stops a query past it. The secret L0 seed is
bound server-side as ``$1`` (psycopg's raw cursor: PostgreSQL's own placeholders, the
extended protocol): it is never part of the SQL text, the server's statement log, or an
error message. Cores are rendered by proxy/engines/render.py with the total forms of
proxy/engines/postgres_forms.py, and :meth:`describe` prepares them without running
them, so a construct PostgreSQL cannot run with DuckDB's meaning is refused before any
charge. Needs the ``postgres`` extra (psycopg 3.2+).
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from proxy.catalog import FanOut
from proxy.engines.collations import refuse_postgres_collations
from proxy.engines.executor import ColumnTypes, check_one_row_per_person, columns_of, plain
from proxy.engines.postgres_forms import PostgresForms
from proxy.engines.postgres_names import PostgresNames, catalog_db
from proxy.engines.render import Rendered, render
from proxy.errors import DPSQLError, query_timeout
from proxy.policy import Policy

try:
    import psycopg
    from psycopg import pq
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]

# PostgreSQL type OIDs -> catalog (DuckDB) type names
_OID_TYPES = {
    16: "BOOLEAN",
    20: "BIGINT",
    21: "SMALLINT",
    23: "INTEGER",
    25: "VARCHAR",
    700: "FLOAT",
    701: "DOUBLE",
    1042: "VARCHAR",
    1043: "VARCHAR",
    1082: "DATE",
    1114: "TIMESTAMP",
    1184: "TIMESTAMP WITH TIME ZONE",
    1700: "DECIMAL",
}
_NAMED_TYPES = {
    "boolean": "BOOLEAN",
    "bigint": "BIGINT",
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "character": "VARCHAR",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "date": "DATE",
    "timestamp without time zone": "TIMESTAMP",
    "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
}
POOL_SIZE = 4


def _wide_numeric(name: str, precision: int | None) -> bool:
    """A NUMERIC no DuckDB DECIMAL holds: unconstrained, or of more than 38 digits. Read
    as DECIMAL(38, 9) (PostgresForms.source_values)."""
    return name == "numeric" and (precision is None or precision > 38)


def _catalog_type(name: str, precision: int | None, scale: int | None) -> str:
    if name == "numeric":
        if _wide_numeric(name, precision):
            return "DECIMAL(38, 9)"
        return f"DECIMAL({precision}, {scale or 0})"
    return _NAMED_TYPES.get(name, name.upper())


def _oid_type(oid: int, modifier: int) -> str:
    if oid == 1700 and modifier >= 4:
        # numeric's typmod: ((precision << 16) | scale) + 4
        value = modifier - 4
        return f"DECIMAL({(value >> 16) & 0xFFFF}, {value & 0xFFFF})"
    if oid == 1700:
        return "DECIMAL(38, 9)"
    return _OID_TYPES.get(oid, "UNKNOWN")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _param_oid(value: Any) -> int:
    if isinstance(value, bool):
        return 16
    if isinstance(value, int):
        return 20
    if isinstance(value, str):
        return 25
    return 0


# (schema, table) of the ordinary tables without inheritance children (see _base_tables).
PLAIN_TABLES_SQL = (
    "SELECT n.nspname, c.relname FROM pg_catalog.pg_class AS c "
    "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
    "WHERE c.relkind = 'r' AND NOT c.relhassubclass "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
)


class PostgresExecutor:
    """A few connections to one PostgreSQL database, each call in its own read-only
    transaction."""

    dialect = "postgres"

    def __init__(self, policy: Policy):
        if psycopg is None:
            raise DPSQLError(
                "policy_error",
                'engine = "postgres" needs the postgres extra',
                "pip install 'dpsql[postgres]'",
            )
        self.evaluation_errors: tuple[type[BaseException], ...] = (psycopg.Error,)
        self.timeout_s = policy.proxy.query_timeout_s
        self._dsn = str(policy.database.dsn)
        self._pool: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._made = 0
        self._guard = threading.Lock()
        self._closed = False
        try:
            self._types, wide, self._names = self._introspect()
            self._names.refuse_folded(policy)
            self._forms = PostgresForms(
                base_tables=self._base_tables(), wide_numerics=wide, names=self._names
            )
            self._render = functools.lru_cache(maxsize=512)(self._render_uncached)
            refuse_postgres_collations(lambda sql: self._fetch(sql, ())[1])
            check_one_row_per_person(policy, self)
        except BaseException:
            self.close()  # a refusal to start leaves no connection behind
            raise

    # --- connections ------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                cursor_factory=psycopg.RawCursor,
                # Every transaction read-only, floats written in their shortest exact
                # form, dates in one style whatever the role's defaults, and bound
                # parameters (the seed) kept out of the server's error log.
                options="-c default_transaction_read_only=on -c extra_float_digits=1 "
                "-c DateStyle=ISO -c TimeZone=UTC -c log_parameter_max_length_on_error=0 "
                "-c bytea_output=hex",
                connect_timeout=10,
            )
        except psycopg.Error as error:
            raise DPSQLError(
                "internal",
                f"cannot connect to PostgreSQL ({type(error).__name__})",
                "check [database] dsn and that the server is up",
            ) from None
        conn.read_only = True
        return conn

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            conn = self._pool.get_nowait()
        except queue.Empty:
            conn = self._connect()
        healthy = True
        try:
            yield conn
        except BaseException:
            healthy = not conn.closed and conn.info.transaction_status == pq.TransactionStatus.IDLE
            raise
        finally:
            if healthy and not self._closed and self._pool.qsize() < POOL_SIZE:
                self._pool.put(conn)
            else:
                conn.close()

    # --- the interface ------------------------------------------------------------------

    def _introspect(self) -> tuple[ColumnTypes, frozenset[tuple[str, str, str]], PostgresNames]:
        """The catalog's column types, the (db, table, column) of wide NUMERICs, and
        PostgreSQL's own spelling of the names (proxy/engines/postgres_names.py)."""
        rows = self._fetch(
            "SELECT table_schema, table_name, column_name, data_type, numeric_precision, "
            "numeric_scale FROM information_schema.columns WHERE table_schema NOT IN "
            "('pg_catalog', 'information_schema') ORDER BY table_schema, table_name, "
            "ordinal_position",
            (),
        )[1]
        out: ColumnTypes = {}
        wide: set[tuple[str, str, str]] = set()
        for schema, table, column, dtype, precision, scale in rows:
            key = (catalog_db(str(schema)), str(table).lower(), str(column).lower())
            out.setdefault(key[:2], {})[key[2]] = _catalog_type(str(dtype), precision, scale)
            if _wide_numeric(str(dtype), precision):
                wide.add(key)
        names = PostgresNames.from_columns((str(r[0]), str(r[1]), str(r[2])) for r in rows)
        return out, frozenset(wide), names

    def _base_tables(self) -> frozenset[tuple[str, str]]:
        """(db, table) of the plain tables, in the catalog's naming: ordinary tables
        without inheritance children (a view, a partitioned or foreign table, or a
        parent of inherited tables reads rows beyond one table's size limit)."""
        rows = self._fetch(PLAIN_TABLES_SQL, ())[1]
        return frozenset((catalog_db(str(schema)), str(table).lower()) for schema, table in rows)

    def column_types(self) -> ColumnTypes:
        return {k: dict(v) for k, v in self._types.items()}

    def _render_uncached(self, sql: str) -> Rendered:
        return render(sql, self._forms, self._types)

    def rendered(self, sql: str) -> str:
        """The SQL this executor sends for ``sql`` (for explain and the tests)."""
        return self._render(sql).sql

    def describe(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[str, str]]:
        rendered = self._render(sql)
        text, params = rendered.sql, rendered.bound(params)
        with self._connection() as conn:
            pgconn = conn.pgconn
            prepared = pgconn.prepare(b"", text.encode(), [_param_oid(p) for p in params])
            if prepared.status != pq.ExecStatus.COMMAND_OK:
                message = (prepared.error_message or b"").decode(errors="replace")
                first = message.splitlines()[0][:300] if message else "cannot bind"
                raise DPSQLError(
                    "bad_request",
                    f"the query cannot run on PostgreSQL: {first}",
                    "fix the expression named above; nothing was charged",
                )
            described = pgconn.describe_prepared(b"")
            return [
                (
                    (described.fname(i) or b"").decode(),
                    _oid_type(described.ftype(i), described.fmod(i)),
                )
                for i in range(described.nfields)
            ]

    def _fetch(
        self, text: str, params: Sequence[Any], timeout_s: float | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self._connection() as conn, conn.transaction():
            cursor = conn.cursor()
            if timeout_s is not None:
                cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
            cursor.execute(text, list(params))
            names = [d.name for d in cursor.description or []]
            return names, list(cursor.fetchall())

    def run(self, sql: str, params: Sequence[Any] = ()) -> dict[str, np.ndarray]:
        rendered = self._render(sql)
        text, params = rendered.sql, rendered.bound(params)
        try:
            names, rows = self._fetch(text, params, self.timeout_s)
        except psycopg.errors.QueryCanceled:
            raise query_timeout(self.timeout_s) from None
        except psycopg.Error as error:
            # Total forms make every expression total: an error here is a defect or a
            # resource limit, never a data-dependent signal; keep its detail out.
            raise DPSQLError(
                "internal",
                f"the engine could not run the query ({type(error).__name__})",
                "report this to the operator; the budget charge stands",
            ) from None
        return columns_of(names, rows)

    def distinct_values(self, db: str, table: str, column: str, limit: int) -> list[Any]:
        name = ".".join(map(_quote, self._names.table(db, table)))
        value = _quote(self._names.column(db, table, column))
        _, rows = self._fetch(
            f"SELECT DISTINCT {value} FROM {name} "
            f"WHERE {value} IS NOT NULL ORDER BY 1 LIMIT {int(limit) + 1}",
            (),
            self.timeout_s,
        )
        return [plain(r[0]) for r in rows]

    def fan_out(self, db: str, table: str, columns: tuple[str, ...]) -> FanOut:
        name = ".".join(map(_quote, self._names.table(db, table)))
        _, rows = self._fetch(f"SELECT COUNT(*) FROM {name}", (), self.timeout_s)
        per_value = {}
        for column in columns:
            _, top = self._fetch(
                f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {name} "
                f"GROUP BY {_quote(self._names.column(db, table, column))}) AS c",
                (),
                self.timeout_s,
            )
            per_value[column] = int(top[0][0] or 0) if top else 0
        return FanOut(int(rows[0][0]) if rows else 0, per_value)

    def evaluate(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rendered = self._render(sql)
        _, rows = self._fetch(rendered.sql, rendered.bound(params), self.timeout_s)
        return [tuple(plain(v) for v in r) for r in rows]

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                return
