"""Reads of the clock (proxy/clock.py) and constant time arithmetic
(proxy/constant_times.py): ``now()``, ``CURRENT_DATE`` and their spellings become the
time the request arrived, written into its text before any memo or cache reads it; the
arithmetic on it is computed at planning, so a relative filter answers for the right
rows, says which time it used, and is replayed only while it computes the same times.
(Both were refused as "not allowed in WHERE": the BI corpus's R5.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
import sqlglot

from proxy.clock import read_clock
from proxy.constant_times import fold_constant_times
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

T = dt.datetime(2025, 6, 30, 12, 34, 56, 789012, tzinfo=dt.UTC)
TS = "CAST('2025-06-30 12:34:56.789012' AS TIMESTAMP)"
DAY = "CAST('2025-06-30' AS DATE)"


@pytest.mark.parametrize(
    ("dialect", "sql", "want"),
    [
        ("duckdb", "SELECT now(), NOW ( ), today()", f"SELECT {TS}, {TS}, {DAY}"),
        (
            "postgres",
            "SELECT current_date, CURRENT_TIMESTAMP, current_timestamp(3), localtimestamp, "
            "transaction_timestamp(), statement_timestamp()",
            f"SELECT {DAY}, {TS}, CAST('2025-06-30 12:34:56.789000' AS TIMESTAMP), {TS}, {TS}, "
            f"{TS}",
        ),
        ("trino", "SELECT now(), current_date", f"SELECT {TS}, {DAY}"),
        (
            "bigquery",
            "SELECT CURRENT_TIMESTAMP(), CURRENT_DATE(), CURRENT_DATETIME()",
            "SELECT CAST('2025-06-30 12:34:56.789012' AS DATETIME), "
            f"{DAY}, CAST('2025-06-30 12:34:56.789012' AS DATETIME)",
        ),
        ("snowflake", "SELECT sysdate(), getdate()", f"SELECT {TS}, {TS}"),
    ],
)
def test_each_spelling_of_the_clock_becomes_a_typed_literal(dialect: str, sql: str, want: str):
    read = read_clock(sql, dialect, T)
    assert read is not None and read.sql == want
    assert "UTC" in read.note


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'now()', \"now\", t.now() FROM t",  # a string, a column, a qualified name
        "SELECT known_users, nowhere FROM t",
        "SELECT current_time, localtime FROM t",  # times of day alone are not read
        "SELECT now FROM t",  # a column named now, not called
    ],
)
def test_what_is_not_a_clock_call_is_left_as_written(sql: str):
    assert read_clock(sql, "duckdb", T) is None


def test_aliases_and_precisions():
    # (a review, 2026-12-06) an alias named like the clock is a name, as DuckDB reads it
    assert read_clock("SELECT COUNT(*) AS current_date FROM prompts", "duckdb", T) is None
    # CURRENT_TIMESTAMP(n) is the time rounded to n fractional digits, as PostgreSQL has it
    read = read_clock("SELECT CURRENT_TIMESTAMP(0), current_timestamp(3)", "postgres", T)
    assert read is not None and read.sql == (
        "SELECT CAST('2025-06-30 12:34:57.000000' AS TIMESTAMP), "
        "CAST('2025-06-30 12:34:56.789000' AS TIMESTAMP)"
    )


def test_a_session_zone_reads_the_wall_clock_there():
    # PostgreSQL reads now() into a timestamp or a date in the session's TimeZone: at
    # 12:34 UTC it is 21:34 in Tokyo, and at 20:00 UTC already tomorrow there
    read = read_clock("SELECT now(), current_date", "postgres", T, "Asia/Tokyo")
    assert read is not None and read.sql == (
        "SELECT CAST('2025-06-30 21:34:56.789012' AS TIMESTAMP), CAST('2025-06-30' AS DATE)"
    )
    assert "Asia/Tokyo" in read.note
    late = read_clock("SELECT current_date", "postgres", T.replace(hour=20), "'Asia/Tokyo'")
    assert late is not None and late.sql == "SELECT CAST('2025-07-01' AS DATE)"
    assert read_clock("SELECT now()", "postgres", T, "UTC") == read_clock(
        "SELECT now()", "postgres", T
    )
    with pytest.raises(DPSQLError) as info:
        read_clock("SELECT now()", "postgres", T, "Mars/Olympus")
    assert info.value.code == "bad_request" and "SET TIME ZONE" in (info.value.hint or "")
    # a zone nobody reads the clock in refuses nothing
    assert read_clock("SELECT 1", "postgres", T, "Mars/Olympus") is None
    assert read_clock("SELECT known, now AS t FROM t", "postgres", T, "Mars/Olympus") is None


def test_only_the_calls_characters_change():
    sql = "SELECT 'é€ now()' AS x, now() AS y  -- now()\nFROM t"
    read = read_clock(sql, "duckdb", T)
    assert read is not None
    assert read.sql == f"SELECT 'é€ now()' AS x, {TS} AS y  -- now()\nFROM t"
    # a zone-aware clock reading is written in UTC
    east = T.astimezone(dt.timezone(dt.timedelta(hours=5)))
    again = read_clock("SELECT now()", "duckdb", east)
    assert again is not None and again.sql == f"SELECT {TS}"


def _folded(sql: str, dialect: str = "duckdb") -> str:
    return fold_constant_times(sqlglot.parse_one(sql, read=dialect)).sql(dialect="duckdb")


def test_time_arithmetic_on_literals_is_computed_once():
    # Metabase's "previous 3 years" on PostgreSQL, once the clock is read
    assert _folded(
        f"SELECT 1 FROM t WHERE ts >= CAST((CAST({TS} AS timestamp) + INTERVAL '-3 year') "
        f"AS date) AND ts < CAST(CAST({TS} AS timestamp) AS date)",
        "postgres",
    ) == (
        "SELECT 1 FROM t WHERE ts >= CAST('2022-06-30' AS DATE) AND ts < CAST('2025-06-30' AS DATE)"
    )
    assert _folded(f"SELECT 1 FROM t WHERE ts > {TS} - INTERVAL 2 YEAR") == (
        "SELECT 1 FROM t WHERE ts > CAST('2023-06-30 12:34:56.789012' AS TIMESTAMP)"
    )
    # DuckDB truncates a DATE to a TIMESTAMP: its own value is what is written
    assert _folded(f"SELECT date_trunc('month', {DAY}) AS m") == (
        "SELECT CAST('2025-06-01 00:00:00.000000' AS TIMESTAMP) AS m"
    )
    # DuckDB's own value: a DATE minus an INTERVAL is a TIMESTAMP
    assert _folded(f"SELECT {DAY} - INTERVAL '30 day'") == (
        "SELECT CAST('2025-05-31 00:00:00.000000' AS TIMESTAMP)"
    )
    # a literal stays; columns, zones and non-time values are left as written
    assert _folded(f"SELECT {DAY}") == f"SELECT {DAY}"
    assert "ts +" in _folded("SELECT ts + INTERVAL '1 day' FROM t").lower().replace("  ", " ")
    kept = _folded("SELECT CAST(CAST('2025-06-30 12:00:00' AS TIMESTAMPTZ) AS DATE)")
    assert "TIMESTAMPTZ" in kept
    assert _folded(f"SELECT {DAY} - CAST('2025-01-01' AS DATE)").count("CAST(") == 2


def test_infinities_are_left_as_written():
    # (a review, 2026-12-06) DuckDB hands infinity to Python as datetime.max: it was
    # written back as 9999-12-31 23:59:59.999999, a finite time
    out = _folded("SELECT 1 FROM t WHERE ts < CAST('infinity' AS DATE) - INTERVAL 1 DAY")
    assert "9999" not in out and "infinity" in out


def test_a_time_that_cannot_be_computed_is_refused():
    with pytest.raises(DPSQLError) as info:
        _folded("SELECT 1 FROM t WHERE ts > CAST('294247-01-01' AS DATE) + INTERVAL '1000 year'")
    assert info.value.code == "bad_request" and "cannot be computed" in info.value.message


@pytest.fixture
def clocked(small_demo: Engine) -> Iterator[Engine]:
    before = small_demo.clock
    yield small_demo
    small_demo.clock = before


def _exact(engine: Engine, where: str) -> int:
    [(count,)] = engine.executor.evaluate(f"SELECT COUNT(*) FROM prompts WHERE {where}")
    return int(count)


def _events(engine: Engine) -> int:
    return len(engine.ledger.history(limit=10**6))


def test_a_relative_filter_answers_for_the_time_it_arrived(clocked: Engine):
    clocked.clock = lambda: T
    sql = (
        "SELECT COUNT(*) AS n FROM prompts WHERE ts >= CAST(now() AS date) - INTERVAL '30 day' "
        "AND ts < CAST(now() AS date)"
    )
    result = clocked.run(QueryRequest(sql, epsilon=1000.0))
    assert any("now() read as 2025-06-30 12:34:56 UTC" in w for w in result.warnings)
    first = result.privacy.charge_id
    # the very query with the times written out: the same release
    written = (
        "SELECT COUNT(*) AS n FROM prompts WHERE ts >= CAST('2025-05-31 00:00:00.000000' AS TIMESTAMP) "
        "AND ts < CAST('2025-06-30' AS DATE)"
    )
    assert clocked.run(QueryRequest(written, epsilon=1000.0)).privacy.charge_id == first
    assert _exact(clocked, "ts >= DATE '2025-05-31' AND ts < DATE '2025-06-30'") > 100
    # later the same day: the same times, the same release, no charge
    clocked.clock = lambda: T + dt.timedelta(hours=3)
    before = _events(clocked)
    again = clocked.run(QueryRequest(sql, epsilon=1000.0))
    assert again.privacy.cached and again.privacy.charge_id == first
    assert _events(clocked) == before + 1  # the replay record only
    # the next day: another query, charged again
    clocked.clock = lambda: T + dt.timedelta(days=1)
    later = clocked.run(QueryRequest(sql, epsilon=1000.0))
    assert not later.privacy.cached and later.privacy.charge_id != first


def test_a_repeat_is_never_answered_from_an_earlier_time(clocked: Engine):
    sql = "SELECT COUNT(*) AS n FROM prompts WHERE ts > now() - INTERVAL 1 YEAR"
    clocked.clock = lambda: T
    first = clocked.run(QueryRequest(sql, epsilon=1000.0))
    assert clocked.run_cached(QueryRequest(sql, epsilon=1000.0)) is None
    clocked.clock = lambda: T + dt.timedelta(days=90)
    second = clocked.run(QueryRequest(sql, epsilon=1000.0))
    assert not second.privacy.cached and second.privacy.charge_id != first.privacy.charge_id
    # each answer is the one its own time gives, written out
    for answer, when in ((first, "2024-06-30"), (second, "2024-09-28")):
        written = (
            "SELECT COUNT(*) AS n FROM prompts WHERE ts > "
            f"CAST('{when} 12:34:56.789012' AS TIMESTAMP)"
        )
        again = clocked.run(QueryRequest(written, epsilon=1000.0))
        assert again.privacy.cached and again.privacy.charge_id == answer.privacy.charge_id
    assert _exact(clocked, "ts > TIMESTAMP '2024-06-30 12:34:56'") > _exact(
        clocked, "ts > TIMESTAMP '2024-09-28 12:34:56'"
    )


def test_the_session_zone_decides_the_day_and_then_stays_out_of_the_keys(clocked: Engine):
    sql = "SELECT COUNT(*) AS n FROM prompts WHERE ts < current_date"
    clocked.clock = lambda: T.replace(hour=20)  # 2025-07-01 already in Tokyo
    tokyo = clocked.run(QueryRequest(sql, epsilon=1000.0, time_zone="Asia/Tokyo"))
    assert any("read as 2025-07-01 Asia/Tokyo" in w for w in tokyo.warnings)
    written = "SELECT COUNT(*) AS n FROM prompts WHERE ts < CAST('2025-07-01' AS DATE)"
    again = clocked.run(QueryRequest(written, epsilon=1000.0, time_zone="Europe/Paris"))
    assert again.privacy.cached and again.privacy.charge_id == tokyo.privacy.charge_id
    utc = clocked.run(QueryRequest(sql, epsilon=1000.0))
    assert not utc.privacy.cached and utc.privacy.charge_id != tokyo.privacy.charge_id


def test_a_clock_time_that_cannot_be_computed_costs_nothing(clocked: Engine):
    clocked.clock = lambda: T
    before = _events(clocked)
    with pytest.raises(DPSQLError) as info:
        clocked.run(
            QueryRequest(
                "SELECT COUNT(*) AS n FROM prompts WHERE ts > now() + INTERVAL '300000 year'",
                epsilon=1.0,
            )
        )
    assert info.value.code == "bad_request"
    assert _events(clocked) == before


def test_a_session_zone_does_not_keep_a_repeat_from_memory(clocked: Engine):
    # the Trino client sends its zone on every statement: a repeat of a text without
    # the clock is still answered from memory (run_cached), as without a zone
    sql = "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"
    first = clocked.run(QueryRequest(sql, epsilon=1000.0, time_zone="Asia/Tokyo"))
    clocked.run(QueryRequest(sql, epsilon=1000.0, time_zone="Asia/Tokyo"))  # (memoised)
    again = clocked.run_cached(QueryRequest(sql, epsilon=1000.0, time_zone="Asia/Tokyo"))
    assert again is not None and again.privacy.charge_id == first.privacy.charge_id
