"""The DuckDB executor reads its catalog at start-up from the opened database only
(proxy/execute.py column_types, proxy/engines/collations.py): a scan of the whole catalog
built every default view and macro of DuckDB's system catalog first. What it reads must
be what information_schema.columns lists for that database, type for type and in column
order."""

from __future__ import annotations

from pathlib import Path

import duckdb

from proxy.execute import DuckDBExecutor
from proxy.policy import parse_policy

POLICY = """
[database]
duckdb = "{db}"
[ledger]
path = "{ledger}"
[populations.p]
epsilon_cap = 10.0
delta = 1e-6
[tables."s.t"]
population = "p"
unit = "a"
"""


def test_the_column_types_are_information_schemas(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TYPE mood AS ENUM ('a', 'b')")
    con.execute(
        "CREATE TABLE s.t (a INTEGER, b DECIMAL(10, 2), c VARCHAR, d STRUCT(x INT, y VARCHAR), "
        'e INT[], f TIMESTAMPTZ, g mood, h MAP(VARCHAR, INT), "Mixed Case" DOUBLE, i UUID, '
        "j BLOB, k DATE, l HUGEINT)"
    )
    con.execute("CREATE TABLE u (x BIGINT, y BOOLEAN)")
    con.execute("CREATE VIEW v AS SELECT x, y, x + 1 AS z FROM u")
    expected: dict[tuple[str, str], dict[str, str]] = {}
    for schema, table, column, dtype in con.execute(
        "SELECT table_schema, table_name, column_name, data_type "
        "FROM information_schema.columns ORDER BY ordinal_position"
    ).fetchall():
        expected.setdefault((schema.lower(), table.lower()), {})[column.lower()] = dtype
    con.close()
    assert set(expected) == {("s", "t"), ("main", "u"), ("main", "v")}
    executor = DuckDBExecutor(
        parse_policy(POLICY.format(db=db, ledger=tmp_path / "l.sqlite"), base_dir=tmp_path)
    )
    try:
        got = executor.column_types()
    finally:
        executor.close()
    assert got == expected
    # and each table's columns in their order
    assert {k: list(cols) for k, cols in got.items()} == {
        k: list(cols) for k, cols in expected.items()
    }
    assert got[("s", "t")]["d"] == "STRUCT(x INTEGER, y VARCHAR)"
