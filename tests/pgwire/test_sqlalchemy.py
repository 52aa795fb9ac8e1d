"""SQLAlchemy 2 (psycopg2 and psycopg dialects), pandas, and the statements Superset
sends over psycopg2 (tests/fixtures/pgwire/superset_catalog.sql, from
shared/notes/superset.md §4)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.pgwire.conftest import PgDoor

sa = pytest.importorskip("sqlalchemy", reason="the pg extra (sqlalchemy) is not installed")
pd = pytest.importorskip("pandas", reason="the pg extra (pandas) is not installed")
psycopg2 = pytest.importorskip("psycopg2", reason="the pg extra (psycopg2) is not installed")

SUPERSET = Path(__file__).resolve().parents[1] / "fixtures" / "pgwire" / "superset_catalog.sql"


@pytest.mark.parametrize("driver", ["psycopg2", "psycopg"])
def test_inspector_and_read_sql(door: PgDoor, driver: str) -> None:
    engine = sa.create_engine(door.url(driver), poolclass=sa.pool.NullPool)
    inspector = sa.inspect(engine)
    assert inspector.get_schema_names() == ["information_schema", "public"]
    assert inspector.get_table_names() == ["prompts", "regions", "tickets", "users"]
    columns = {c["name"]: c for c in inspector.get_columns("prompts")}
    assert list(columns) == [
        "prompt_id",
        "user_id",
        "ts",
        "model",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "flagged",
    ]
    assert isinstance(columns["prompt_id"]["type"], sa.BigInteger)
    assert isinstance(columns["ts"]["type"], sa.TIMESTAMP)
    assert isinstance(columns["flagged"]["type"], sa.Boolean)
    assert columns["tokens_in"]["comment"] == "clamped to [0, 4000]"
    assert inspector.get_pk_constraint("prompts")["constrained_columns"] == []
    assert inspector.get_foreign_keys("prompts") == []
    assert inspector.get_indexes("prompts") == []
    assert inspector.get_view_names() == []
    assert inspector.has_table("users") and not inspector.has_table("secrets")
    frame = pd.read_sql(
        "SELECT region, COUNT(*) AS n, AVG(age) AS mean_age FROM users GROUP BY region", engine
    )
    assert list(frame.columns) == ["region", "n", "mean_age"]
    assert sorted(frame["region"]) == ["east", "north", "south", "west"]
    assert frame["n"].dtype.kind == "i" and frame["mean_age"].dtype.kind == "f"
    bound = pd.read_sql(
        sa.text("SELECT plan, COUNT(*) AS n FROM public.users WHERE region = :r GROUP BY plan"),
        engine,
        params={"r": "north"},
    )
    assert sorted(bound["plan"]) == ["free", "pro", "team"]
    engine.dispose()


def _superset_queries(table: str, oid: int) -> dict[str, str]:
    text = SUPERSET.read_text()
    blocks = re.split(r"^-- \[(C\d+)\]\n", text, flags=re.M)[1:]
    return {
        label: sql.strip().replace("{table}", table).replace("{oid}", str(oid))
        for label, sql in zip(blocks[::2], blocks[1::2], strict=True)
    }


def test_superset_preamble_catalog_and_chart(door: PgDoor) -> None:
    """One Superset connection: the [P] preamble, the catalog queries [C1]-[C16] in
    BEGIN ... ROLLBACK, `set search_path`, and a schema-qualified chart query."""
    conn = psycopg2.connect(door.dsn())
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT t.oid, typarray\nFROM pg_type t JOIN pg_namespace ns\n"
            "    ON typnamespace = ns.oid\nWHERE typname = 'hstore';\n"
        )
        assert cur.fetchall() == []
        conn.rollback()
        cur.execute("select pg_catalog.version()")
        assert re.match(r"PostgreSQL 15\.\d+ ", cur.fetchone()[0])
        cur.execute("select current_schema()")
        assert cur.fetchone() == ("public",)
        cur.execute("show transaction isolation level")
        assert cur.fetchone() == ("read committed",)
        cur.execute("show standard_conforming_strings")
        assert cur.fetchone() == ("on",)
        conn.rollback()
        cur.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' ORDER BY nspname"
        )
        assert cur.fetchall() == [("information_schema",), ("public",)]
        queries = _superset_queries("prompts", 0)
        cur.execute(queries["C5"])
        (oid,) = cur.fetchone()
        queries = _superset_queries("prompts", oid)
        answers = {}
        for label, sql in queries.items():
            cur.execute(sql)
            answers[label] = cur.fetchall()
        conn.rollback()
        assert answers["C1"] == [("dpsql",)]
        assert sorted(r[0] for r in answers["C2"]) == ["prompts", "regions", "tickets", "users"]
        assert answers["C3"] == answers["C4"] == []
        columns = [(r[0], r[1]) for r in answers["C6"]]
        assert columns[:3] == [
            ("prompt_id", "bigint"),
            ("user_id", "bigint"),
            ("ts", "timestamp without time zone"),
        ]
        assert answers["C16"] == [("prompts",)]
        for empty in ("C7", "C8", "C9", "C10", "C11", "C12", "C14", "C15"):
            assert answers[empty] == [], empty
        assert answers["C13"][0][0].startswith("dpsql private table")
        cur.execute('set search_path = "public"')
        cur.execute(
            "SELECT model AS model, COUNT(*) AS count FROM public.prompts GROUP BY model "
            "ORDER BY count DESC LIMIT 1000"
        )
        assert sorted(r[0] for r in cur.fetchall()) == ["large", "medium", "small"]
        cur.execute("SHOW dpsql.last_release")
        assert json.loads(cur.fetchone()[0])["populations"] == ["users"]
        cur.execute("SELECT pg_backend_pid()")
        assert cur.fetchone()[0] > 0
        conn.rollback()
    finally:
        conn.close()
