"""Copy a DuckDB database (the generator's output, or a policy's CSV sources) to another
engine: PostgreSQL tables (``dpsql generate --dsn``) or Parquet folders for Spark
(``dpsql generate --parquet``, laid out as ``DIR/<schema>/<table>/``).

DuckDB's default schema ``main`` becomes PostgreSQL's ``public``. Tables are streamed
through CSV into ``COPY ... FROM STDIN``, then analysed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from proxy.csv_copies import load_sources
from proxy.policy import Policy

_PG_TYPES = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "HUGEINT": "numeric(39, 0)",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "VARCHAR": "text",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP WITH TIME ZONE": "timestamptz",
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _pg_type(duckdb_type: str) -> str:
    upper = duckdb_type.upper()
    if upper.startswith("DECIMAL"):
        return "numeric" + upper[len("DECIMAL") :]
    return _PG_TYPES.get(upper, "text")


def tables_of(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_type = 'BASE TABLE' ORDER BY 1, 2"
    ).fetchall()
    return [(str(s), str(t)) for s, t in rows]


@contextmanager
def source(policy: Policy) -> Iterator[duckdb.DuckDBPyConnection]:
    """The policy's data as one DuckDB connection (its file, or its CSV sources loaded
    into memory)."""
    if policy.duckdb_path is not None:
        con = duckdb.connect(str(policy.duckdb_path), read_only=True)
    else:
        con = duckdb.connect(":memory:")
        load_sources(policy, con)  # the engine's reader: the policy's declared types
    try:
        yield con
    finally:
        con.close()


def to_postgres(con: duckdb.DuckDBPyConnection, dsn: str) -> list[str]:
    """Create (or replace) every table of ``con`` in the PostgreSQL database ``dsn``,
    its schema, table and column names in lower case (as PostgreSQL folds unquoted
    names, and as dpsql reads them: a DuckDB schema ``PUMS`` becomes ``pums``)."""
    import psycopg

    done = []
    with psycopg.connect(dsn, autocommit=True) as pg, tempfile.TemporaryDirectory() as tmp:
        for schema, table in tables_of(con):
            target_schema = "public" if schema == "main" else schema.lower()
            target = f"{_quote(target_schema)}.{_quote(table.lower())}"
            columns = con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                [schema, table],
            ).fetchall()
            ddl = ", ".join(f"{_quote(str(c).lower())} {_pg_type(str(t))}" for c, t in columns)
            pg.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(target_schema)}")
            pg.execute(f"DROP TABLE IF EXISTS {target}")
            pg.execute(f"CREATE TABLE {target} ({ddl})")
            csv = Path(tmp) / f"{schema}.{table}.csv"
            con.execute(
                f"COPY (SELECT * FROM {_quote(schema)}.{_quote(table)}) TO '{csv}' "
                "(HEADER, DELIMITER ',')"
            )
            with (
                pg.cursor() as cur,
                cur.copy(f"COPY {target} FROM STDIN WITH (FORMAT csv, HEADER true)") as copy,
                csv.open("rb") as f,
            ):
                while chunk := f.read(1 << 20):
                    copy.write(chunk)
            csv.unlink()
            pg.execute(f"ANALYZE {target}")
            done.append(f"{target_schema}.{table.lower()}")
    return done


def to_parquet(con: duckdb.DuckDBPyConnection, folder: Path) -> list[Path]:
    """Every table of ``con`` as ``folder/<schema>/<table>/data.parquet``."""
    out = []
    for schema, table in tables_of(con):
        target = folder / schema / table
        target.mkdir(parents=True, exist_ok=True)
        file = target / "data.parquet"
        con.execute(
            f"COPY (SELECT * FROM {_quote(schema)}.{_quote(table)}) TO '{file}' (FORMAT parquet)"
        )
        out.append(target)
    return out
