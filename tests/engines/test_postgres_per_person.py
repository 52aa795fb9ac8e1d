"""PostgreSQL's INTEGER per-person sums (proxy/engines/postgres_per_person.py): only over
r's small clamped integers read from one plain table, with DuckDB's exact values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlglot

from proxy.engine import Engine
from proxy.engines.kinds import Typer
from proxy.engines.postgres import PLAIN_TABLES_SQL
from proxy.engines.postgres_per_person import NARROW_BOUND, narrow_sums
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed
from tests.engines.compare import neutral
from tests.engines.conftest import database_section, demo_text, with_database
from tests.postgres_server import PgServer

PLAIN = frozenset({("main", "prompts")})

# The shape of a core's r and pp (proxy/rewrite/per_person.py), over a table.
CORE = """
WITH r AS (SELECT t0.user_id AS __u, t0.model AS __k0,
  CAST(CASE WHEN t0.tokens_in < 0 THEN 0 WHEN t0.tokens_in > 4000 THEN 4000
       ELSE t0.tokens_in END AS BIGINT) AS __x0
  FROM prompts AS t0 WHERE NOT t0.user_id IS NULL),
pp AS (SELECT __u, __k0, LEAST(COUNT(*), 3) AS __s0,
  CASE WHEN COUNT(__x0) > 3 THEN CAST(SUM(__x0) AS DOUBLE) * 3 / COUNT(__x0)
       ELSE SUM(__x0) END AS __s1,
  SUM((__x0 - 2000)) AS __s2,
  SUM((__x0 - 2000) * (__x0 - 2000)) AS __s3
  FROM r GROUP BY __u, __k0)
SELECT __k0, SUM(__s0) AS __s0, SUM(__s1) AS __s1 FROM pp GROUP BY __k0
"""


def _narrowed(sql: str, plain: frozenset[tuple[str, str]] = PLAIN) -> str:
    tree = sqlglot.parse_one(sql, read="duckdb")
    narrow_sums(tree, Typer({("main", "prompts"): {"tokens_in": "INTEGER"}}), plain)
    return tree.sql(dialect="duckdb")


def test_small_clamped_sums_over_one_plain_table_are_integer_sums() -> None:
    text = _narrowed(CORE)
    assert text.count("SUM(CAST(__x0 AS INT))") == 2  # the scaled sum's two branches
    assert "SUM(CAST((__x0 - 2000) AS INT))" in text  # |x - 2000| <= 6000
    # the square reaches 4000^2 * 4 > 2^20: it stays a BIGINT sum (NUMERIC on PG)
    assert "SUM((__x0 - 2000) * (__x0 - 2000))" in text
    # sums across people read pp's columns, not r's: untouched
    assert "SUM(__s0) AS __s0, SUM(__s1) AS __s1 FROM pp" in text


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("FROM prompts AS t0 WHERE", "FROM prompts AS t0 JOIN users AS t1 ON TRUE WHERE"), "join"),
        (("FROM prompts AS t0", "FROM (SELECT * FROM prompts) AS t0"), "subquery"),
        (("4000 THEN 4000", f"{NARROW_BOUND + 1} THEN {NARROW_BOUND + 1}"), "bound"),
        (("CASE WHEN t0.tokens_in < 0 THEN 0", "CASE WHEN t0.tokens_in < 0 THEN 1"), "clamp"),
    ],
)
def test_nothing_is_narrowed_without_the_row_and_value_bounds(
    change: tuple[str, str], why: str
) -> None:
    sql = CORE.replace(*change)
    assert sql != CORE, why
    assert "AS INT)" not in _narrowed(sql)


def test_a_view_or_any_relation_but_a_plain_table_is_not_narrowed() -> None:
    assert "AS INT)" not in _narrowed(CORE, plain=frozenset({("main", "users")}))


def test_the_bound_keeps_the_sum_below_2_63() -> None:
    # A plain table holds fewer than 2^43 rows (2^32 pages of at most 32 KB, at most
    # 1,165 rows each): its per-person sum of values within the bound fits a BIGINT.
    assert 2**32 * 1165 < 2**43
    assert 2**43 * NARROW_BOUND <= 2**63


def test_plain_tables_exclude_views_partitioned_and_inherited_tables(
    pg_cluster: PgServer,
) -> None:
    import psycopg

    name = "narrow_kinds"
    pg_cluster.replace_database(name)
    for statement in (
        "CREATE TABLE plain (x int)",
        "CREATE VIEW seen AS SELECT x FROM plain",
        "CREATE TABLE parted (x int) PARTITION BY RANGE (x)",
        "CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (10)",
        "CREATE TABLE parent (x int)",
        "CREATE TABLE child () INHERITS (parent)",
        "CREATE MATERIALIZED VIEW kept AS SELECT x FROM plain",
    ):
        pg_cluster.execute(statement, database=name)
    with psycopg.connect(pg_cluster.dsn(name)) as conn:
        found = {str(t) for _, t in conn.execute(PLAIN_TABLES_SQL).fetchall()}
    # a partition and an inheriting child are plain tables themselves; their parents
    # (which read their children's rows) are not
    assert found == {"plain", "parted_low", "child"}


@pytest.fixture(scope="module")
def demo_pair(
    pg_sources: dict[str, str], engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Engine]]:
    engines = []
    for kind in ("duckdb", "postgres"):
        tmp = tmp_path_factory.mktemp(f"narrow-{kind}")
        text = demo_text(tmp, engine_demo_db)
        if kind == "postgres":
            text = with_database(text, database_section("postgres", pg_sources["demo"]))
        engines.append(Engine(parse_policy(text, base_dir=tmp)))
    yield engines[0], engines[1]
    for engine in engines:
        engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts JOIN users "
        "USING (user_id) GROUP BY region",
        # (one group per person: which groups the L0 cut keeps is engine-specific)
        "SELECT plan, SUM(tokens_in) AS s, AVG(tokens_out) AS a FROM prompts JOIN users "
        "USING (user_id) GROUP BY plan",
    ],
)
def test_postgres_sums_them_as_integers_with_duckdbs_exact_values(
    sql: str, demo_pair: tuple[Engine, Engine]
) -> None:
    duck, pg = demo_pair
    request = QueryRequest(sql, epsilon=1.0, max_groups=1)
    _, plan = pg.prepare(request)
    assert "AS INT))" in pg.executor.rendered(plan.core_sql)
    _, duck_plan = duck.prepare(request)
    # the same core, DuckDB's groupings keyed (proxy/rewrite/keyed_groups.py)
    assert neutral(duck_plan.core_sql) == plan.core_sql
    # the exact bounded aggregates, before any noise, are DuckDB's
    expected = duck.executor.run(
        duck_plan.core_sql, [12345] if takes_seed(duck_plan.core_sql) else []
    )
    found = pg.executor.run(plan.core_sql, [12345] if takes_seed(plan.core_sql) else [])
    assert sorted(expected) == sorted(found)

    def rows(columns: dict) -> dict[str, dict[str, object]]:
        keys = [str(k) for k in columns["__k0"]]
        return {k: {c: columns[c][i] for c in columns} for i, k in enumerate(keys)}

    want, got = rows(expected), rows(found)
    assert sorted(want) == sorted(got) and len(want) > 1
    for key, row in want.items():
        for column, value in row.items():
            if column == "__k0":
                continue
            assert float(got[key][column]) == pytest.approx(float(value), rel=1e-12), column
