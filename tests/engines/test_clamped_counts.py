"""The clipping estimate's count of people whose values a declared bound clamped
(proxy/rewrite/clamped_rows.py), or a per-person subquery's bounds
(proxy/per_person_values.py), is the same on PostgreSQL and Spark as on DuckDB: the
flag compares the same columns with the same literals on every engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.rewrite import core as C
from sample_data.export import source, to_parquet, to_postgres
from tests.engines import compare
from tests.engines.conftest import database_section, with_database
from tests.postgres_server import PgServer
from tests.proxy.test_clipping import CLAMPED_POLICY, clamped_database

QUERIES = (
    "SELECT k, AVG(v) AS m FROM ev GROUP BY k",
    "SELECT SUM(v * 2) AS s, COUNT(*) AS n FROM ev WHERE user_id > 10",
    # a per-person subquery: its hidden flag marks the people whose AVG(v) was clamped
    "SELECT k, AVG(m) AS a FROM (SELECT user_id, MIN(k) AS k, AVG(v) AS m FROM ev "
    "GROUP BY user_id) t GROUP BY k",
    # CASE x WHEN a: the flag compares x = a under TRY, rendered for each engine
    "SELECT SUM(CASE k WHEN 'a' THEN v ELSE 0 END) AS s FROM ev",
)


@pytest.fixture(scope="module")
def duck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, str, Path]]:
    """The DuckDB engine, and a policy over a second copy of its data to export from
    (the engine holds its own file open)."""
    root = tmp_path_factory.mktemp("clamped-engines")
    db = clamped_database(root / "clamped.duckdb")
    engine = Engine(parse_policy(CLAMPED_POLICY.format(db=db, folder=root), base_dir=root))
    copy = clamped_database(root / "export.duckdb")
    yield engine, CLAMPED_POLICY.format(db=copy, folder=root / "other"), root
    engine.close()


def _clipped(engine: Engine, sql: str) -> int:
    plan, out = compare.exact(engine, sql)
    column = next(s.column for s in plan.statistics if s.kind == C.CLIPPED)
    assert "__cl" in plan.core_sql
    return int(sum(out[column].tolist()))


def _check(reference: Engine, other: Engine) -> None:
    for sql in QUERIES:
        compare.assert_same(reference, other, sql)
    assert _clipped(other, QUERIES[0]) == _clipped(reference, QUERIES[0]) == 30
    assert _clipped(other, QUERIES[1]) == _clipped(reference, QUERIES[1]) == 20
    assert _clipped(other, QUERIES[2]) == _clipped(reference, QUERIES[2]) == 30


def test_postgres_counts_the_clamped_people_as_duckdb_does(
    duck: tuple[Engine, str, Path], pg_cluster: PgServer
) -> None:
    engine, text, root = duck
    with source(parse_policy(text, base_dir=root)) as con:
        to_postgres(con, pg_cluster.replace_database("clamped"))
    section = database_section("postgres", pg_cluster.grant_reader("clamped"))
    pg = Engine(parse_policy(with_database(text, section), base_dir=root))
    try:
        _check(engine, pg)
    finally:
        pg.close()


@pytest.mark.slow
def test_spark_counts_the_clamped_people_as_duckdb_does(
    duck: tuple[Engine, str, Path], tmp_path: Path
) -> None:
    pytest.importorskip("pyspark")
    engine, text, root = duck
    with source(parse_policy(text, base_dir=root)) as con:
        to_parquet(con, tmp_path / "parquet")
    section = database_section("spark", str(tmp_path / "parquet"))
    spark = Engine(parse_policy(with_database(text, section), base_dir=tmp_path))
    try:
        _check(engine, spark)
    finally:
        spark.close()
