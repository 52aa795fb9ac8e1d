"""PostgreSQL's and Trino's ``/`` divides two integers as integers (proxy/typed_division.py).

Before, every such division ran as DuckDB's float division: ``WHERE age / 100 = 0``
counted nobody instead of everyone under 100, and shared its cache key with DuckDB's
own reading of the text. Each answer here is checked against the exact value computed
on the data, at an ε whose noise is far below the tolerance."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

EPSILON = 5000.0  # count noise scale well below 0.01: answers within 0.5 of the truth


def _exact(engine: Engine, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in engine.executor.evaluate(sql)]


def test_duckdb_integer_division_matches_postgres() -> None:
    """What on_duckdb relies on: DuckDB's // truncates two integers towards zero (as
    PostgreSQL and Trino do) and divides any other pair exactly as / does."""
    [row] = duckdb.sql(
        "SELECT 7 // 2, -7 // 2, 7 // -2, CAST(-7 AS HUGEINT) // 2, CAST(10 AS BIGINT) // "
        "CAST(4 AS TINYINT), 7.5 // 2, CAST(-7 AS DOUBLE) // 2, CAST(7.5 AS DECIMAL(4, 1)) "
        "// CAST(2 AS DECIMAL(3, 1))"
    ).fetchall()
    assert row == (3, -3, -3, -3, 2, 3.75, -3.5, 3.75)


@pytest.mark.parametrize("dialect", ["postgres", "trino"])
def test_where_integer_division(small_demo: Engine, dialect: str) -> None:
    engine = small_demo
    truth = _exact(engine, "SELECT COUNT(*) FROM users WHERE age // 100 = 0")[0][0]
    assert truth > 0
    sql = "SELECT COUNT(*) AS n FROM users WHERE age / 100 = 0"
    answer = engine.run(QueryRequest(sql, epsilon=EPSILON, dialect=dialect))
    assert abs(answer.rows[0][0] - truth) < 0.5
    # DuckDB's reading of the same text is a float division: another query, another key.
    duck = engine.run(QueryRequest(sql, epsilon=EPSILON))
    assert abs(duck.rows[0][0]) < 0.5
    assert duck.cache_key != answer.cache_key


def test_select_list_and_sum(small_demo: Engine) -> None:
    engine = small_demo
    truth = dict(_exact(engine, "SELECT region, COUNT(*) // 2 FROM users GROUP BY region"))
    answer = engine.run(
        QueryRequest(
            "SELECT region, COUNT(*) / 2 AS h FROM users GROUP BY region",
            epsilon=EPSILON,
            dialect="postgres",
        )
    )
    for region, half in answer.rows:
        assert float(half).is_integer() and abs(half - truth[region]) <= 1
    total = _exact(engine, "SELECT SUM(age // 10) FROM users")[0][0]
    summed = engine.run(
        QueryRequest("SELECT SUM(age / 10) AS s FROM users", epsilon=EPSILON, dialect="postgres")
    )
    assert abs(summed.rows[0][0] - total) < 5


def test_float_operands_stay_float(small_demo: Engine) -> None:
    engine = small_demo
    truth = _exact(engine, "SELECT COUNT(*) FROM users WHERE CAST(age AS DOUBLE) / 100 < 0.3")[0][0]
    answer = engine.run(
        QueryRequest(
            "SELECT COUNT(*) AS n FROM users WHERE CAST(age AS DOUBLE) / 100 < 0.3",
            epsilon=EPSILON,
            dialect="postgres",
        )
    )
    assert abs(answer.rows[0][0] - truth) < 0.5


def test_nested_and_public_queries(small_demo: Engine) -> None:
    """The outer query over a released table and a public query run on DuckDB as they
    are: their typed divisions become //."""
    engine = small_demo
    public = engine.run(QueryRequest("SELECT 7 / 2 AS x FROM regions", dialect="postgres"))
    assert {r[0] for r in public.rows} == {3}
    nested = engine.run(
        QueryRequest(
            "SELECT n / 2 AS h FROM (SELECT region, COUNT(*) AS n FROM users GROUP BY region) t",
            epsilon=EPSILON,
            dialect="postgres",
        )
    )
    assert all(float(r[0]).is_integer() for r in nested.rows)


def test_unknown_operand_type_refused(small_demo: Engine) -> None:
    engine = small_demo
    before = len(engine.ledger.history(limit=100_000))
    with pytest.raises(DPSQLError) as info:
        engine.run(
            QueryRequest(
                "SELECT COUNT(*) AS n FROM users WHERE NULL / 2 = 1",
                epsilon=1.0,
                dialect="postgres",
            )
        )
    assert info.value.code == "unsupported_sql" and "CAST" in info.value.hint
    assert len(engine.ledger.history(limit=100_000)) == before


def test_the_dialects_own_types_decide(small_demo: Engine) -> None:
    """A probe of the new code (2026-12-02): typed by DuckDB's rules, PostgreSQL's
    EXTRACT (NUMERIC) and SUM of a BIGINT (NUMERIC) were divided as integers."""
    engine = small_demo
    month = "SELECT COUNT(*) AS n FROM users WHERE EXTRACT(MONTH FROM signup_month) / 2 = 1"
    exact = {
        "postgres": _exact(
            engine, "SELECT COUNT(*) FROM users WHERE EXTRACT(MONTH FROM signup_month) / 2 = 1"
        )[0][0],
        "trino": _exact(
            engine, "SELECT COUNT(*) FROM users WHERE EXTRACT(MONTH FROM signup_month) // 2 = 1"
        )[0][0],
    }
    assert exact["postgres"] != exact["trino"]
    for dialect, truth in exact.items():
        answer = engine.run(QueryRequest(month, epsilon=EPSILON, dialect=dialect))
        assert abs(answer.rows[0][0] - truth) < 0.5, dialect
    mean = engine.run(
        QueryRequest(
            "SELECT SUM(CAST(age AS BIGINT)) / COUNT(*) AS q FROM users",
            epsilon=EPSILON,
            dialect="postgres",
        )
    )
    assert not float(mean.rows[0][0]).is_integer()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM users WHERE sign(age) / 2 = 0",
        "SELECT COUNT(*) AS n FROM users WHERE ROUND(age) / 2 = 0",
    ],
    ids=["sign", "round"],
)
def test_operands_the_engines_disagree_on_are_refused(small_demo: Engine, sql: str) -> None:
    before = len(small_demo.ledger.history(limit=100_000))
    with pytest.raises(DPSQLError) as info:
        small_demo.run(QueryRequest(sql, epsilon=1.0, dialect="postgres"))
    assert info.value.code == "unsupported_sql" and "CAST" in info.value.hint
    assert len(small_demo.ledger.history(limit=100_000)) == before


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgres", "SELECT COUNT(*) AS n FROM prompts WHERE "
                     "(CAST(ts AS DATE) - DATE '2024-01-01') / 7 > 3"),
        ("trino", "SELECT COUNT(*) AS n FROM prompts WHERE date_diff('day', ts, ts) / 7 = 0"),
        ("trino", "SELECT COUNT(*) AS n FROM prompts WHERE year(ts) / 100 = 20"),
        ("postgres", "SELECT SUM(CASE WHEN age > 40 THEN 1 ELSE 0 END) / COUNT(*) AS r FROM users"),
        ("trino", "SELECT SUM(IF(age > 40, 1, 0)) / COUNT(*) AS r FROM users"),
        ("postgres", "SELECT COUNT(*) AS n FROM prompts WHERE GREATEST(tokens_in, 1) / 100 = 1"),
    ],
    ids=["pg-date-difference", "trino-date-diff", "trino-year", "pg-sum-case", "trino-sum-if",
         "pg-greatest"],
)
def test_operands_each_engine_types_as_integers(
    small_demo: Engine, dialect: str, sql: str
) -> None:
    """A review of real analyst SQL (2026-12-02) found these refused: each engine types
    them as integers, so they divide as integers."""
    result = small_demo.run(QueryRequest(sql, epsilon=EPSILON, dialect=dialect))
    assert result.rows and float(result.rows[0][0]).is_integer()


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        # Metabase's "share" metric: a CASE with a 0.0 branch is NUMERIC, so is its SUM
        ("postgres", "SELECT SUM(CASE WHEN age > 40 THEN 1 ELSE 0.0 END) / COUNT(*) AS r FROM users"),
        ("trino", "SELECT SUM(CAST(age AS DOUBLE)) / COUNT(*) AS r FROM users"),
    ],
    ids=["pg-sum-of-numerics", "trino-sum-of-doubles"],
)
def test_a_sum_of_non_integers_divides_as_a_fraction(
    small_demo: Engine, dialect: str, sql: str
) -> None:
    """Refused before (a SUM's type was not known here; a corpus of BI SQL, 2026-12-06):
    a sum of non-integers is no integer in either dialect, so `/` divides exactly."""
    result = small_demo.run(QueryRequest(sql, epsilon=EPSILON, dialect=dialect))
    value = float(result.rows[0][0])
    exact = small_demo.executor.evaluate(  # type: ignore[attr-defined]
        sql.replace(" AS r FROM users", " FROM users").replace("SUM(CASE", "SUM(CAST(CASE")
        .replace("END) /", "END AS DOUBLE)) /")
        if dialect == "postgres"
        else sql.replace(" AS r FROM users", " FROM users")
    )[0][0]
    assert not float(exact).is_integer() and abs(value - float(exact)) < 0.5 * abs(float(exact))
