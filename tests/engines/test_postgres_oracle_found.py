"""What the answer oracle found on the PostgreSQL engine (2026-12-05): each query gives
DuckDB's bounded answer there too, or the engine refuses to start with words of its own.
Each failed before its fix: a dropped cast took the parentheses of an OR with it (the
filter ANDed with its right side only: 262 prompts where 119 pass), MIN over a boolean
per-person key (no such aggregate in PostgreSQL), two DISTINCT arguments' values typed
by their shared column name (a text cast to BIGINT, after the charge), an integer
compared with a boolean (no such operator), DuckDB's part functions (``dayofweek(ts)``:
refused), and table names with capitals (the driver's own error at start)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from tests.engines import compare
from tests.engines.conftest import database_section, with_database
from tests.engines.test_postgres import pair  # noqa: F401 (the DuckDB and PostgreSQL engines)
from tests.policies import users_policy
from tests.postgres_server import PgServer

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
    policy: str, sql: str, pair: dict[str, tuple[Engine, Engine]]  # noqa: F811
) -> None:
    duck, pg = pair[policy]
    compare.assert_same(duck, pg, sql)


@pytest.mark.parametrize(
    "ddl",
    [
        'CREATE TABLE "Ev" (user_id BIGINT, v INTEGER)',
        'CREATE TABLE ev (user_id BIGINT, "V" INTEGER)',
    ],
    ids=["table", "column"],
)
def test_capitals_in_a_named_tables_names_are_refused_at_start(
    ddl: str, pg_cluster: PgServer, tmp_path: Path
) -> None:
    database = "capitals"
    with psycopg.connect(pg_cluster.replace_database(database), autocommit=True) as conn:
        conn.execute(ddl)
    text = users_policy('[tables.ev]\npopulation = "users"\nunit = "user_id"\n')
    section = database_section("postgres", pg_cluster.grant_reader(database))
    policy = with_database(text, section).format(folder=tmp_path)
    with pytest.raises(DPSQLError) as refused:
        Engine(parse_policy(policy, base_dir=tmp_path))
    assert refused.value.code == "policy_error"
    assert "capital letters" in refused.value.message and "RENAME" in refused.value.hint
