"""The shadow catalog: exact, data-free, per-analyst, sandboxed."""

from __future__ import annotations

import pytest

from proxy.pgwire.shadow import SessionFacts, ShadowCatalog, VisibleColumn, VisibleTable
from proxy.pgwire.sqlstate import WireError
from proxy.pgwire.statements import Kind, classify

USERS = VisibleTable(
    "public",
    "users",
    (
        VisibleColumn("user_id", "BIGINT", "person id"),
        VisibleColumn("age", "INTEGER", ""),
        VisibleColumn("score", "DECIMAL(10,2)", ""),
    ),
    "private",
)
PROMPTS = VisibleTable("public", "prompts", (VisibleColumn("ts", "TIMESTAMP", ""),), "private")
PUMS = VisibleTable("pums", "pums", (VisibleColumn("income", "DOUBLE", ""),), "private")
ALL = [("public", "users"), ("public", "prompts"), ("pums", "pums")]
FACTS = SessionFacts("ana", "dpsql", "PostgreSQL 15.0 (dpsql)", 7)
KEYS = frozenset(ALL)


@pytest.fixture(scope="module")
def full() -> ShadowCatalog:
    return ShadowCatalog([USERS, PROMPTS, PUMS])


def ask(shadow: ShadowCatalog, sql: str, params: list[object] | None = None) -> list[tuple]:
    statement = classify(sql, KEYS)
    assert statement.kind == Kind.CATALOG and statement.tree is not None
    return shadow.answer(statement.tree, params or [], FACTS).rows


def test_tables_columns_and_types(full: ShadowCatalog) -> None:
    rows = ask(
        full,
        "SELECT n.nspname, c.relname, c.reltuples FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace ORDER BY 1, 2",
    )
    # reltuples -1: the catalog states no statistics of the data
    assert rows == [("public", "prompts", -1.0), ("public", "users", -1.0), ("pums", "pums", -1.0)]
    columns = ask(
        full,
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "WHERE a.attrelid = 'users'::regclass ORDER BY a.attnum",
    )
    assert columns == [("user_id", "bigint"), ("age", "integer"), ("score", "numeric(10,2)")]
    info = ask(
        full,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
        ["pums", "pums"],
    )
    assert info == [("income", "double precision")]
    assert ask(full, "SELECT oid::regtype::text FROM pg_type WHERE typname = 'int8'") == [("int8",)]
    assert ask(full, "SELECT version(), current_user, current_schema()") == [
        ("PostgreSQL 15.0 (dpsql)", "ana", "public")
    ]


def test_each_analyst_sees_only_their_tables_with_stable_oids(full: ShadowCatalog) -> None:
    narrow = ShadowCatalog([USERS])
    try:
        names = ask(narrow, "SELECT relname FROM pg_class")
        assert names == [("users",)]
        oid_sql = "SELECT oid FROM pg_class WHERE relname = 'users'"
        assert ask(narrow, oid_sql) == ask(full, oid_sql)
    finally:
        narrow.close()


def test_pg_database_lists_the_fixed_and_the_sessions_own_database(full: ShadowCatalog) -> None:
    sql = "SELECT d.datname FROM pg_catalog.pg_database d ORDER BY d.oid"
    statement = classify(sql, KEYS)
    assert statement.tree is not None
    other = SessionFacts("ana", "ana_private", "PostgreSQL 15.0 (dpsql)", 7)
    assert full.answer(statement.tree, [], other).rows == [("dpsql",), ("ana_private",)]
    # never stored: the next session (another analyst's) does not see it
    assert ask(full, sql) == [("dpsql",)]
    assert ask(full, "SELECT pg_database.datname FROM pg_database") == [("dpsql",)]


def test_unknown_catalog_sql_fails_with_a_sqlstate(full: ShadowCatalog) -> None:
    for sql in (
        "SELECT * FROM pg_catalog.pg_stat_activity",
        "SELECT pg_catalog.pg_nonexistent_function(1) FROM pg_class",
    ):
        with pytest.raises(WireError) as refused:
            ask(full, sql)
        assert refused.value.sqlstate == "0A000"


def test_the_shadow_reads_no_files(full: ShadowCatalog) -> None:
    with pytest.raises(WireError) as refused:
        ask(full, "SELECT * FROM pg_class, read_csv('/etc/passwd')")
    # Refused before it runs (proxy/catalog_limits.py: no table function but the row
    # sources); DuckDB's enable_external_access = false stays behind it.
    assert "the table function read_csv" in refused.value.message, refused.value
    import duckdb

    with pytest.raises(duckdb.Error, match=r"disabled|Permission"):
        full._db.execute("SELECT * FROM read_csv('/etc/passwd')")
