"""A function call whose arguments sqlglot's parser would drop is refused, before any
charge (proxy/dropped_arguments.py); calls whose every argument is kept still parse.

Each refused case was answered before the check as a different query: DuckDB's and
Trino's three-argument ``date_trunc`` as a truncation in the session's zone."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.parse import parse
from proxy.request import QueryRequest

DROPPED = [
    ("duckdb", "SELECT date_trunc('day', ts, 'America/New_York') FROM prompts"),
    ("trino", "SELECT date_trunc('day', ts, 'America/New_York') FROM prompts"),
    ("snowflake", "SELECT date_trunc('day', ts, 'America/New_York') FROM prompts"),
    ("duckdb", "SELECT date_diff('day', ts, ts, ts) FROM prompts"),
    ("trino", "SELECT date_diff('day', ts, ts, ts) FROM prompts"),
    ("duckdb", "SELECT strftime(ts, '%Y', 3) FROM prompts"),
    # builders that wrap their result hide the drop from the node; DuckDB's own
    # overloads say the call is wrong (DuckDB-dialect text only)
    ("duckdb", "SELECT length(model, 2) FROM prompts"),
    ("duckdb", "SELECT left(model, 2, 3) FROM prompts"),
    ("duckdb", "SELECT regexp_matches(model, 'a', 'i', 4) FROM prompts"),
]

KEPT = [
    ("duckdb", "SELECT date_trunc('day', ts), date_diff('day', ts, ts), strftime(ts, '%Y') "
               "FROM prompts"),
    ("duckdb", "SELECT COUNT(DISTINCT user_id), COUNT(*), COUNT() FROM prompts"),
    ("duckdb", "SELECT left(model, 2), substring(model, 1, 2), length(model), "
               "coalesce(model, 'a', 'b'), greatest(1, 2, 3), least(1, 2) FROM prompts"),
    ("duckdb", "SELECT regexp_matches(model, 'a', 'i'), date_add(ts, INTERVAL 1 DAY), "
               "mod(tokens_in, 3), round(tokens_in, 1) FROM prompts"),
    ("duckdb", "SELECT * FROM (VALUES (1, 2), (3, 4)) v(a, b)"),
    ("duckdb", "SELECT COUNT(*) FROM prompts WHERE model IN ('a', 'b', 'c')"),
    ("duckdb", "SELECT CAST(tokens_in AS DECIMAL(38, 9)), EXTRACT(year FROM ts) FROM prompts"),
    ("postgres", "SELECT to_char(ts, 'YYYY'), date_part('year', ts), "
                 "date_trunc('day', ts, 'UTC') FROM prompts"),
    ("snowflake", "SELECT to_timestamp(model, 'YYYY-MM-DD'), dateadd(day, 1, ts), "
                  "datediff(day, ts, ts), iff(true, 1, 2) FROM prompts"),
    ("trino", "SELECT date_add('day', 1, ts), date_diff('day', ts, ts), "
              "format_datetime(ts, 'yyyy') FROM prompts"),
    ("bigquery", "SELECT DATE_TRUNC(ts, DAY), TIMESTAMP_DIFF(ts, ts, DAY), "
                 "COUNTIF(true) FROM prompts"),
    ("duckdb", "SELECT model, COUNT(*) FROM prompts GROUP BY GROUPING SETS ((model), ())"),
    ("duckdb", "SELECT SUM(tokens_in) OVER (PARTITION BY model, user_id) FROM prompts"),
    ("duckdb", "SELECT trim(BOTH 'x' FROM model), substring(model FROM 1 FOR 2), "
               "position('a' IN model), string_agg(model, ',' ORDER BY ts), "
               "concat(model, model, model), hash(model, ts), make_date(2024, 1, 1), "
               "list_transform([1, 2], x -> x + 1) FROM prompts"),
    # a keyword before a bracket is no call (FILTER is also a DuckDB function's name)
    ("duckdb", "SELECT COUNT(*) FILTER (WHERE model = 'a'), SUM(tokens_in) OVER (PARTITION "
               "BY model) FROM prompts"),
]


@pytest.mark.parametrize(("dialect", "sql"), DROPPED)
def test_dropped_arguments_refused(dialect: str, sql: str) -> None:
    with pytest.raises(DPSQLError) as info:
        parse(sql, dialect, max_length=10_000, max_nodes=10_000)
    assert info.value.code == "unsupported_sql"
    assert "arguments" in info.value.message and info.value.hint


@pytest.mark.parametrize(("dialect", "sql"), KEPT)
def test_kept_arguments_parse(dialect: str, sql: str) -> None:
    parse(sql, dialect, max_length=10_000, max_nodes=10_000)


def test_zone_truncation_refused_before_any_charge(small_demo: Engine) -> None:
    """The known gap: a daily count in New York's days was answered in UTC's days."""
    sql = ("SELECT date_trunc('day', ts, 'America/New_York') AS d, COUNT(*) "
           "FROM prompts GROUP BY 1")
    before = len(small_demo.ledger.history(limit=100_000))
    for dialect in ("duckdb", "trino"):
        with pytest.raises(DPSQLError) as info:
            small_demo.run(QueryRequest(sql, epsilon=1.0, dialect=dialect))
        assert info.value.code == "unsupported_sql"
    assert len(small_demo.ledger.history(limit=100_000)) == before
    # The hint's form (no zone) is answered.
    answered = small_demo.run(QueryRequest(sql.replace(", 'America/New_York'", ""), epsilon=1.0))
    assert answered.columns == ("d", "COUNT(*)")
