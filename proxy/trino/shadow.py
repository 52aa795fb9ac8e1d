"""The shadow catalog: a data-free, in-memory DuckDB that answers catalog questions.

It holds, for the tables one caller may read, empty tables with the real columns and
types (catalog ``dpsql``, one schema per policy schema), and Trino's own metadata tables
— ``information_schema.schemata/tables/columns/views``, ``system.jdbc.*`` and
``system.metadata.*`` — filled from the policy's schema. Catalog SQL as tools send it
(LIKE, ESCAPE, ORDER BY, joins, ``SELECT * FROM t LIMIT 0``) runs here unchanged after
its table names are mapped, so it is answered exactly, never touches a private row and
is never charged. Kept apart from the other doors' shadows on purpose (its tables are
Trino's); the lead may merge the common part later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp

from proxy import catalog_limits as limits
from proxy import typed_division
from proxy.errors import DPSQLError, query_timeout
from proxy.trino import types as T
from proxy.trino.answer import Answer

CATALOG = "dpsql"
META = "trino_meta"  # the attached database holding Trino's metadata tables

# Trino schema.table -> (shadow schema, columns as (name, DuckDB type))
_VARCHAR = "VARCHAR"
_BIGINT = "BIGINT"
META_TABLES: dict[tuple[str, str], tuple[str, tuple[tuple[str, str], ...]]] = {
    ("information_schema", "schemata"): (
        "isc",
        (("catalog_name", _VARCHAR), ("schema_name", _VARCHAR)),
    ),
    ("information_schema", "tables"): (
        "isc",
        (
            ("table_catalog", _VARCHAR),
            ("table_schema", _VARCHAR),
            ("table_name", _VARCHAR),
            ("table_type", _VARCHAR),
        ),
    ),
    ("information_schema", "columns"): (
        "isc",
        (
            ("table_catalog", _VARCHAR),
            ("table_schema", _VARCHAR),
            ("table_name", _VARCHAR),
            ("column_name", _VARCHAR),
            ("ordinal_position", _BIGINT),
            ("column_default", _VARCHAR),
            ("is_nullable", _VARCHAR),
            ("data_type", _VARCHAR),
            ("comment", _VARCHAR),
            ("extra_info", _VARCHAR),
        ),
    ),
    ("information_schema", "views"): (
        "isc",
        (
            ("table_catalog", _VARCHAR),
            ("table_schema", _VARCHAR),
            ("table_name", _VARCHAR),
            ("view_definition", _VARCHAR),
        ),
    ),
    ("jdbc", "catalogs"): ("sys_jdbc", (("table_cat", _VARCHAR),)),
    ("jdbc", "schemas"): ("sys_jdbc", (("table_schem", _VARCHAR), ("table_catalog", _VARCHAR))),
    ("jdbc", "table_types"): ("sys_jdbc", (("table_type", _VARCHAR),)),
    ("jdbc", "tables"): (
        "sys_jdbc",
        tuple(
            (c, _VARCHAR)
            for c in (
                "table_cat",
                "table_schem",
                "table_name",
                "table_type",
                "remarks",
                "type_cat",
                "type_schem",
                "type_name",
                "self_referencing_col_name",
                "ref_generation",
            )
        ),
    ),
    ("jdbc", "columns"): (
        "sys_jdbc",
        (
            ("table_cat", _VARCHAR),
            ("table_schem", _VARCHAR),
            ("table_name", _VARCHAR),
            ("column_name", _VARCHAR),
            ("data_type", _BIGINT),
            ("type_name", _VARCHAR),
            ("column_size", _BIGINT),
            ("buffer_length", _BIGINT),
            ("decimal_digits", _BIGINT),
            ("num_prec_radix", _BIGINT),
            ("nullable", _BIGINT),
            ("remarks", _VARCHAR),
            ("column_def", _VARCHAR),
            ("sql_data_type", _BIGINT),
            ("sql_datetime_sub", _BIGINT),
            ("char_octet_length", _BIGINT),
            ("ordinal_position", _BIGINT),
            ("is_nullable", _VARCHAR),
            ("scope_catalog", _VARCHAR),
            ("scope_schema", _VARCHAR),
            ("scope_table", _VARCHAR),
            ("source_data_type", _BIGINT),
            ("is_autoincrement", _VARCHAR),
            ("is_generatedcolumn", _VARCHAR),
        ),
    ),
    ("metadata", "catalogs"): (
        "sys_metadata",
        (("catalog_name", _VARCHAR), ("connector_id", _VARCHAR), ("connector_name", _VARCHAR)),
    ),
    ("metadata", "table_comments"): (
        "sys_metadata",
        (
            ("catalog_name", _VARCHAR),
            ("schema_name", _VARCHAR),
            ("table_name", _VARCHAR),
            ("comment", _VARCHAR),
        ),
    ),
}
SYSTEM_SCHEMAS = ("jdbc", "metadata")

# java.sql.Types codes, for system.jdbc.columns (what JDBC-based tools read)
_JDBC_TYPES = {
    "bigint": -5,
    "integer": 4,
    "smallint": 5,
    "tinyint": -6,
    "double": 8,
    "real": 7,
    "boolean": 16,
    "varchar": 12,
    "date": 91,
    "timestamp": 93,
    "timestamp with time zone": 2014,
    "time": 92,
    "decimal": 3,
    "varbinary": -3,
}


@dataclass(frozen=True)
class ShadowTable:
    schema: str
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type), in table order


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _meta_rows(tables: Sequence[ShadowTable]) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    data_schemas = sorted({t.schema for t in tables} | {"main"})
    rows: dict[tuple[str, str], list[tuple[Any, ...]]] = {k: [] for k in META_TABLES}
    rows["information_schema", "schemata"] = [
        (CATALOG, s) for s in ["information_schema", *data_schemas]
    ]
    described: list[tuple[str, str, tuple[tuple[str, T.TrinoType], ...]]] = [
        (t.schema, t.name, tuple((c, T.from_duckdb(d)) for c, d in t.columns)) for t in tables
    ]
    described += [
        (schema, name, tuple((c, T.from_duckdb(d)) for c, d in columns))
        for (schema, name), (_, columns) in META_TABLES.items()
        if schema == "information_schema"
    ]
    for schema, name, columns in sorted(described):
        rows["information_schema", "tables"].append((CATALOG, schema, name, "BASE TABLE"))
        rows["jdbc", "tables"].append(
            (CATALOG, schema, name, "TABLE", None, None, None, None, None, None)
        )
        rows["metadata", "table_comments"].append((CATALOG, schema, name, None))
        for position, (column, kind) in enumerate(columns, start=1):
            rows["information_schema", "columns"].append(
                (CATALOG, schema, name, column, position, None, "YES", kind.name, None, None)
            )
            size = kind.params[0] if kind.params else None
            digits = kind.params[1] if len(kind.params) > 1 else None
            rows["jdbc", "columns"].append(
                (
                    CATALOG,
                    schema,
                    name,
                    column,
                    _JDBC_TYPES.get(kind.raw, 1111),
                    kind.name,
                    size,
                    None,
                    digits,
                    10
                    if kind.raw in ("bigint", "integer", "smallint", "tinyint", "decimal")
                    else None,
                    1,
                    None,
                    None,
                    None,
                    None,
                    size if kind.raw == "varchar" else None,
                    position,
                    "YES",
                    None,
                    None,
                    None,
                    None,
                    "NO",
                    "NO",
                )
            )
    rows["jdbc", "catalogs"] = [(CATALOG,)]
    rows["jdbc", "schemas"] = [(s, CATALOG) for s in ["information_schema", *data_schemas]]
    rows["jdbc", "table_types"] = [("TABLE",), ("VIEW",)]
    rows["metadata", "catalogs"] = [(CATALOG, CATALOG, "dpsql")]
    return rows


class ShadowCatalog:
    """One sandboxed in-memory DuckDB per set of visible tables (no rows anywhere)."""

    def __init__(self, tables: Sequence[ShadowTable]):
        self.tables = tuple(tables)
        self._known = {(t.schema, t.name) for t in self.tables}
        self.schemas = frozenset({"information_schema", "main", *(t.schema for t in tables)})
        self._db = duckdb.connect(
            ":memory:",
            config={
                "threads": 1,
                "memory_limit": "256MB",
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
            },
        )
        self._db.execute(f"ATTACH ':memory:' AS {CATALOG}")
        self._db.execute(f"ATTACH ':memory:' AS {META}")
        for schema in sorted(self.schemas - {"information_schema"}):
            self._db.execute(f"CREATE SCHEMA IF NOT EXISTS {CATALOG}.{_quote(schema)}")
        for t in self.tables:
            spec = ", ".join(f"{_quote(c)} {d}" for c, d in t.columns)
            self._db.execute(f"CREATE TABLE {CATALOG}.{_quote(t.schema)}.{_quote(t.name)} ({spec})")
        for schema in sorted({s for s, _ in META_TABLES.values()}):
            self._db.execute(f"CREATE SCHEMA {META}.{schema}")
        for (schema, name), table_rows in _meta_rows(self.tables).items():
            shadow_schema, columns = META_TABLES[schema, name]
            target = f"{META}.{shadow_schema}.{name}"
            self._db.execute(
                f"CREATE TABLE {target} ({', '.join(f'{_quote(c)} {d}' for c, d in columns)})"
            )
            if table_rows:
                marks = ", ".join("?" for _ in columns)
                self._db.executemany(f"INSERT INTO {target} VALUES ({marks})", table_rows)
        # After set-up: no files, no extensions, no configuration changes.
        self._db.execute("SET enable_external_access = false")
        self._db.execute("SET lock_configuration = true")

    def has_table(self, schema: str, name: str) -> bool:
        return (schema.lower(), name.lower()) in self._known

    def table(self, schema: str, name: str) -> ShadowTable | None:
        return next(
            (t for t in self.tables if (t.schema, t.name) == (schema.lower(), name.lower())), None
        )

    def map_table(self, table: exp.Table, *, catalog: str, schema: str) -> exp.Table:
        """The shadow table a Trino table name stands for (refusing unknown names)."""
        cat = (table.catalog or "").lower() or catalog.lower()
        db = (table.db or "").lower()
        name = table.name.lower()
        if (cat == "system" and db in SYSTEM_SCHEMAS) or db == "information_schema":
            if cat not in ("system", CATALOG):
                raise _not_found(f"catalog '{cat}' does not exist")
            key = ("information_schema" if db == "information_schema" else db, name)
            found = META_TABLES.get(key)
            if found is None:
                raise _not_found(f"table '{cat}.{db}.{name}' does not exist")
            return exp.table_(name, db=found[0], catalog=META, alias=table.alias or name)
        if cat != CATALOG:
            raise _not_found(f"catalog '{cat}' does not exist")
        db = db or schema.lower()
        if (db, name) not in self._known:
            raise _not_found(f"table '{CATALOG}.{db}.{name}' does not exist")
        return exp.table_(name, db=db, catalog=CATALOG, alias=table.alias or None)

    def run(self, tree: exp.Expr) -> Answer:
        """Run a query that reads only shadow tables (DuckDB's dialect); a failure is the
        query's fault. Refused first what proxy/catalog_limits.py refuses; interrupted
        after its time limit; its answer fetched within its rows and bytes."""
        if not isinstance(tree, exp.Query):
            raise DPSQLError("unsupported_sql", "only queries are answered", "send a SELECT")
        refused = limits.refusal(tree)
        if refused is not None:
            raise _refused(refused)
        cursor = self._db.cursor()
        try:
            with limits.interrupted_after(cursor.interrupt):
                result = cursor.execute(
                    typed_division.of_known_integers(tree).sql(dialect="duckdb")
                )
                described = result.description or []
                names = tuple(str(d[0]) for d in described)
                kinds = tuple(T.from_duckdb(str(d[1])) for d in described)
                rows, too_large = limits.fetch_bounded(result)
        except duckdb.InterruptException:
            raise query_timeout(
                limits.TIMEOUT_S, "narrow the catalog query (it is not charged)"
            ) from None
        except duckdb.Error as error:
            raise DPSQLError(
                "bad_request",
                f"the catalog query failed: {str(error).splitlines()[0][:300]}",
                "catalog queries read information_schema, system.jdbc and system.metadata",
            ) from None
        finally:
            cursor.close()
        if too_large is not None:
            raise _refused(too_large)
        return Answer(names=names, types=kinds, rows=rows)

    def close(self) -> None:
        self._db.close()


def _refused(refusal: limits.Refusal) -> DPSQLError:
    code = "too_large" if refusal.too_large else "unsupported_sql"
    return DPSQLError(code, refusal.message, refusal.hint)


def _not_found(message: str) -> DPSQLError:
    return DPSQLError(
        "not_found", message, "SHOW CATALOGS, SHOW SCHEMAS and SHOW TABLES list what exists"
    )
