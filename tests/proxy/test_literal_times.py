"""Literal-only time parsing in filters (what BI tools send for a time range) is folded
to a typed literal before binding: answered, sharing the CAST form's release, and a
literal that does not match its format is refused before any charge."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.literal_times import fold_literal_times
from proxy.request import QueryRequest

PG_RANGE = (
    "ts >= TO_TIMESTAMP('2024-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') "
    "AND ts < TO_TIMESTAMP('2024-07-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')"
)
CAST_RANGE = (
    "ts >= CAST('2024-01-01 00:00:00.000000' AS TIMESTAMP) "
    "AND ts < CAST('2024-07-01 00:00:00.000000' AS TIMESTAMP)"
)


def folded(sql: str, dialect: str) -> str:
    return fold_literal_times(sqlglot.parse_one(sql, read=dialect)).sql(dialect="duckdb")


def test_literal_only_calls_become_typed_literals():
    assert folded(f"SELECT 1 FROM t WHERE {PG_RANGE}", "postgres") == (
        "SELECT 1 FROM t WHERE ts >= CAST('2024-01-01 00:00:00.000000' AS TIMESTAMP) "
        "AND ts < CAST('2024-07-01 00:00:00.000000' AS TIMESTAMP)"
    )
    assert folded("SELECT TO_DATE('2024-02-03', 'YYYY-MM-DD')", "postgres") == (
        "SELECT CAST('2024-02-03' AS DATE)"
    )
    # trino's date_parse and DuckDB's strptime parse to the same node
    assert folded("SELECT date_parse('2024-02-03 04:05', '%Y-%m-%d %H:%i')", "trino") == (
        "SELECT CAST('2024-02-03 04:05:00.000000' AS TIMESTAMP)"
    )
    # a column argument is left for the checker, which refuses parsing on rows
    assert "STRPTIME(model" in folded("SELECT 1 FROM t WHERE strptime(model, '%Y') > 0", "duckdb")


def test_trino_iso8601_readers_of_literals_become_typed_literals():
    # Superset's Trino engine spec writes time-range bounds this way
    assert folded(
        "SELECT 1 FROM t WHERE ts >= from_iso8601_timestamp('2025-01-01T00:00:00.000000') "
        "AND d < from_iso8601_date('2025-07-01')",
        "trino",
    ) == (
        "SELECT 1 FROM t WHERE ts >= CAST('2025-01-01 00:00:00.000000' AS TIMESTAMP) "
        "AND d < CAST('2025-07-01' AS DATE)"
    )
    # an offset names an instant: the same one in UTC, the door's zone
    assert folded("SELECT from_iso8601_timestamp('2025-01-01T01:30:00+02:00')", "trino") == (
        "SELECT CAST('2024-12-31 23:30:00.000000' AS TIMESTAMP)"
    )
    assert folded("SELECT from_iso8601_timestamp('2025-01-01T12:00:00Z')", "trino") == (
        "SELECT CAST('2025-01-01 12:00:00.000000' AS TIMESTAMP)"
    )
    # a column argument is left for the checker
    assert "ts_text" in folded("SELECT from_iso8601_timestamp(ts_text) FROM t", "trino")


@pytest.mark.parametrize(
    "call",
    ["from_iso8601_timestamp('2025-13-01T00:00:00')", "from_iso8601_date('yesterday')"],
)
def test_an_iso8601_literal_that_does_not_read_is_refused(call: str):
    with pytest.raises(DPSQLError) as info:
        fold_literal_times(sqlglot.parse_one(f"SELECT {call}", read="trino"))
    assert info.value.code == "bad_request"
    assert "ISO 8601" in info.value.message and info.value.hint


def test_a_literal_that_does_not_match_its_format_is_refused():
    with pytest.raises(DPSQLError) as info:
        fold_literal_times(
            sqlglot.parse_one("SELECT TO_TIMESTAMP('2024-13-01', 'YYYY-MM-DD')", read="postgres")
        )
    assert info.value.code == "bad_request"
    assert "does not match its format" in info.value.message


def _events(engine: Engine) -> int:
    return len(engine.ledger.history(limit=10**6))


def test_a_postgres_time_range_is_answered_and_shares_the_cast_forms_release(
    demo_engine: Engine,
):
    pg = QueryRequest(
        f"SELECT model, COUNT(*) AS n FROM prompts WHERE {PG_RANGE} GROUP BY model",
        dialect="postgres",
        epsilon=0.3,
    )
    first = demo_engine.run(pg)
    assert first.columns == ("model", "n") and len(first.rows) == 3
    assert not first.privacy.cached and first.privacy.epsilon == pytest.approx(0.3)
    cast = QueryRequest(
        f"SELECT model, COUNT(*) AS n FROM prompts WHERE {CAST_RANGE} GROUP BY model",
        dialect="trino",
        epsilon=0.3,
    )
    again = demo_engine.run(cast)
    assert again.privacy.cached and again.privacy.charge_id == first.privacy.charge_id


@pytest.mark.parametrize(
    ("where", "code"),
    [
        ("ts >= TO_TIMESTAMP('2024-01-01', 'YYYY-DD-MM HH24')", "bad_request"),
        ("ts >= TO_TIMESTAMP(model, 'YYYY-MM-DD')", "unsupported_sql"),
    ],
)
def test_refusals_cost_nothing(demo_engine: Engine, where: str, code: str):
    before = _events(demo_engine)
    with pytest.raises(DPSQLError) as info:
        demo_engine.run(
            QueryRequest(f"SELECT COUNT(*) AS n FROM prompts WHERE {where}", dialect="postgres")
        )
    assert info.value.code == code
    assert _events(demo_engine) == before


def test_a_trino_iso8601_range_shares_the_cast_forms_release(demo_engine: Engine):
    iso = QueryRequest(
        "SELECT model, COUNT(*) AS n FROM prompts WHERE ts >= from_iso8601_timestamp("
        "'2024-01-01T00:00:00.000000') AND ts < from_iso8601_timestamp("
        "'2024-07-01T00:00:00.000000') GROUP BY model",
        dialect="trino",
        epsilon=0.3,
    )
    first = demo_engine.run(iso)
    assert first.columns == ("model", "n") and len(first.rows) == 3
    cast = QueryRequest(
        f"SELECT model, COUNT(*) AS n FROM prompts WHERE {CAST_RANGE} GROUP BY model",
        dialect="trino",
        epsilon=0.3,
    )
    again = demo_engine.run(cast)
    assert again.privacy.cached and again.privacy.charge_id == first.privacy.charge_id
    before = _events(demo_engine)
    with pytest.raises(DPSQLError) as info:
        demo_engine.run(
            QueryRequest(
                "SELECT COUNT(*) AS n FROM prompts WHERE ts >= from_iso8601_timestamp('2024-02-30')",
                dialect="trino",
            )
        )
    assert info.value.code == "bad_request"
    assert _events(demo_engine) == before
