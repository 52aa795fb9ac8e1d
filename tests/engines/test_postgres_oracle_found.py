"""What the answer oracle found on the PostgreSQL engine (2026-12-05): each query gives
DuckDB's bounded answer there too, or the engine refuses to start with words of its own.
Each failed before its fix: a dropped cast took the parentheses of an OR with it (the
filter ANDed with its right side only: 262 prompts where 119 pass), MIN over a boolean
per-person key (no such aggregate in PostgreSQL), two DISTINCT arguments' values typed
by their shared column name (a text cast to BIGINT, after the charge), an integer
compared with a boolean (no such operator), DuckDB's part functions (``dayofweek(ts)``:
refused), and table names with capitals (the driver's own error at start; now read as
the server spells them, tests below)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from sample_data.export import source, to_postgres
from tests.engines import compare
from tests.engines.conftest import database_section, demo_text, with_database
from tests.engines.test_postgres import pair  # noqa: F401 (the DuckDB and PostgreSQL engines)
from tests.policies import users_policy
from tests.postgres_server import PgServer
from tests.proxy.conftest import demo_policy

FOUND = (
    ("demo", "SELECT k, COUNT(*) AS n FROM (SELECT user_id, tokens_in // 1000 AS k FROM "
     "prompts WHERE model <> 'small') s WHERE k > 0 OR k IS NULL GROUP BY k"),
    ("demo", "SELECT COUNT(*) AS n FROM (SELECT user_id, tokens_in // 1000 AS k, model "
     "FROM prompts) s WHERE (k > 0 OR k IS NULL) AND model <> 'small'"),
    ("pums", "SELECT COUNT(*) AS n FROM (SELECT pid, age - 40 AS a, sex FROM PUMS.PUMS) s "
     "WHERE (a > 0 OR a < -10) AND sex = 1"),
    ("pums", "SELECT income > 30000 AS high, COUNT(*) AS n FROM PUMS.PUMS GROUP BY high"),
    ("demo", "SELECT plan = 'pro' AS pro, COUNT(*) AS n FROM users GROUP BY pro"),
    ("demo", "SELECT COUNT(DISTINCT model) AS m, COUNT(DISTINCT tokens_in // 1000) AS b "
     "FROM prompts"),
    ("pums", "SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE married = TRUE"),
    ("demo", "SELECT COUNT(*) AS n FROM prompts WHERE flagged = 1"),
    ("pums", "SELECT SUM(CASE WHEN TRUE <> married THEN 1 ELSE 0 END) AS n FROM PUMS.PUMS"),
    ("demo", "SELECT dayofweek(ts) AS d, COUNT(*) AS n FROM prompts GROUP BY 1"),
    ("demo", "SELECT strftime(ts, '%Y-%m') AS ym, COUNT(*) AS n FROM prompts GROUP BY 1"),
    ("demo", "SELECT strftime(CAST(ts AS DATE), '%y/%m/%d %H:%M:%S') AS t, COUNT(*) AS n "
     "FROM prompts WHERE strftime(ts, '%H') < '12' GROUP BY 1"),
    ("demo", "SELECT year(ts) AS y, quarter(ts) AS q, COUNT(*) AS n FROM prompts "
     "WHERE dayofmonth(ts) < 15 GROUP BY 1, 2"),
)  # fmt: skip


@pytest.mark.parametrize(("policy", "sql"), FOUND, ids=[f"q{i}" for i in range(len(FOUND))])
def test_the_oracles_queries_give_duckdbs_bounded_answers(
    policy: str,
    sql: str,
    pair: dict[str, tuple[Engine, Engine]],  # noqa: F811
) -> None:
    duck, pg = pair[policy]
    compare.assert_same(duck, pg, sql)


# The demo data as a tool that quotes its names writes it (an ORM's "User"."createdAt"):
# every table and column with capitals.
_SPELLED = {"users": "Users", "prompts": "Prompts"}


def _capitalised(name: str) -> str:
    return "_".join(part.capitalize() for part in name.split("_"))


@pytest.fixture(scope="module")
def spelled(
    pg_cluster: PgServer, engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Engine]]:
    """(DuckDB engine, PostgreSQL engine over the demo data with capitals in every name)."""
    tmp = tmp_path_factory.mktemp("pg-spelled")
    # (a copy: the DuckDB engines of this module hold the file open in another mode)
    copy = Path(shutil.copy(engine_demo_db, tmp / "usage.duckdb"))
    with source(demo_policy(tmp, copy)) as con:
        to_postgres(con, pg_cluster.replace_database("spelled"))
    with psycopg.connect(pg_cluster.dsn("spelled"), autocommit=True) as conn:
        for table, new_name in _SPELLED.items():
            columns = conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
                (table,),
            ).fetchall()
            for (column,) in columns:
                conn.execute(
                    f'ALTER TABLE {table} RENAME COLUMN {column} TO "{_capitalised(column)}"'
                )  # type: ignore[arg-type]
            conn.execute(f'ALTER TABLE {table} RENAME TO "{new_name}"')  # type: ignore[arg-type]
    engines = []
    for kind in ("duckdb", "postgres"):
        folder = tmp_path_factory.mktemp(f"spelled-{kind}")
        text = demo_text(folder, engine_demo_db)
        if kind == "postgres":
            text = with_database(
                text, database_section("postgres", pg_cluster.grant_reader("spelled"))
            )
        engines.append(Engine(parse_policy(text, base_dir=folder)))
    yield engines[0], engines[1]
    for engine in engines:
        engine.close()


SPELLED_QUERIES = (
    "SELECT region, COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts JOIN users USING (user_id) "
    "GROUP BY region",
    "SELECT p.model, AVG(p.tokens_in) AS a FROM prompts AS p JOIN users AS u "
    "ON p.user_id = u.user_id WHERE u.plan = 'pro' GROUP BY p.model",
    "SELECT COUNT(DISTINCT model) AS m FROM prompts WHERE flagged",
    "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM Prompts GROUP BY 1",
    "SELECT plan, COUNT(*) AS n FROM users WHERE user_id IN (SELECT user_id FROM prompts "
    "WHERE tokens_in > 100) GROUP BY plan",
    "SELECT COUNT(*) AS n FROM (SELECT user_id, COUNT(*) AS c FROM prompts GROUP BY user_id) "
    "AS per WHERE c > 3",
)


@pytest.mark.parametrize("sql", SPELLED_QUERIES, ids=[f"q{i}" for i in range(len(SPELLED_QUERIES))])
def test_names_with_capitals_are_read_as_postgresql_spells_them(
    sql: str, spelled: tuple[Engine, Engine]
) -> None:
    duck, pg = spelled
    compare.assert_same(duck, pg, sql)
    # the text sent quotes the server's own spelling
    _, plan = pg.prepare(QueryRequest(sql, epsilon=1.0))
    sent = pg.executor.rendered(plan.core_sql)  # type: ignore[attr-defined]
    assert '"User_Id"' in sent and ('"Prompts"' in sent or '"Users"' in sent)


def test_a_domain_probe_and_fan_out_read_the_servers_spelling(
    spelled: tuple[Engine, Engine],
) -> None:
    _, pg = spelled
    executor = pg.executor
    values = executor.distinct_values("main", "users", "region", 100)  # type: ignore[attr-defined]
    assert values and all(isinstance(v, str) for v in values)
    fan = executor.fan_out("main", "users", ("region",))  # type: ignore[attr-defined]
    assert fan.rows > 0 and fan.per_value["region"] > 0


@pytest.mark.parametrize(
    "ddl",
    [
        'CREATE TABLE "Ev" (user_id BIGINT, v INTEGER); CREATE TABLE ev (user_id BIGINT)',
        'CREATE TABLE ev (user_id BIGINT, "V" INTEGER, v INTEGER)',
    ],
    ids=["table", "column"],
)
def test_names_differing_only_in_case_are_refused_at_start(
    ddl: str, pg_cluster: PgServer, tmp_path: Path
) -> None:
    database = "folded"
    with psycopg.connect(pg_cluster.replace_database(database), autocommit=True) as conn:
        for statement in ddl.split("; "):
            conn.execute(statement)  # type: ignore[arg-type]
    text = users_policy('[tables.ev]\npopulation = "users"\nunit = "user_id"\n')
    section = database_section("postgres", pg_cluster.grant_reader(database))
    policy = with_database(text, section).format(folder=tmp_path)
    with pytest.raises(DPSQLError) as refused:
        Engine(parse_policy(policy, base_dir=tmp_path))
    assert refused.value.code == "policy_error"
    assert "differ only in case" in refused.value.message and "RENAME" in refused.value.hint
