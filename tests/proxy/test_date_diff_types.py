"""DATE_DIFF is answered between DATE and TIMESTAMP values only, decided by type.

DuckDB's DATE_DIFF of times of day raises NotImplementedException on every row that
reaches it, and TRY does not catch it. The checker once refused only a bare TIME cast
or column, so a TIME in parentheses, under TRY or COALESCE, or moved by an interval got
through: pinned to one person, the query was charged and then failed only when that
person had rows (an adversarial probe, 2026-12-05). Now each operand must be a DATE or
TIMESTAMP by its type (proxy/check.py ``check_date_diff_columns``)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

TIME_OPERANDS = [
    "date_diff('day', (CAST(ts AS TIME)), (CAST(ts AS TIME)))",
    "date_diff('day', (CAST(ts AS TIME)), (TIME '00:00'))",
    "date_diff('hour', TRY(CAST(ts AS TIME)), TIME '00:00')",
    "date_diff('day', COALESCE(CAST(ts AS TIME), TIME '01:00'), TIME '00:00')",
    "date_diff('day', CAST(ts AS TIME) + INTERVAL 1 HOUR, ts)",
    "date_diff('day', CASE WHEN tokens_in > 5 THEN CAST(ts AS TIME) END, TIME '00:00')",
]


@pytest.mark.parametrize("diff", TIME_OPERANDS)
def test_a_time_of_day_is_refused_before_any_charge(small_demo: Engine, diff: str) -> None:
    spent = small_demo.ledger.history()
    for sql in (
        f"SELECT COUNT(*) AS n FROM prompts WHERE {diff} > 0",
        f"SELECT SUM({diff}) AS s FROM prompts",
        f"SELECT COUNT(*) AS n FROM (SELECT user_id, ts FROM prompts WHERE {diff} > 0) q",
    ):
        with pytest.raises(DPSQLError) as refused:
            small_demo.run(QueryRequest(sql, epsilon=1.0))
        assert refused.value.code == "unsupported_sql", sql
        assert "DATE_DIFF" in str(refused.value)
    assert small_demo.ledger.history() == spent


@pytest.mark.parametrize(
    "diff",
    [
        "date_diff('day', ts, ts + INTERVAL 1 DAY)",
        "date_diff('day', CAST(ts AS DATE), DATE '2024-01-01')",
        "date_diff('day', ts, '2024-01-01')",
        "date_diff('month', date_trunc('month', ts), TIMESTAMP '2024-06-01')",
    ],
)
def test_dates_and_timestamps_are_answered(small_demo: Engine, diff: str) -> None:
    answer = small_demo.run(QueryRequest(f"SELECT COUNT(*) AS n FROM prompts WHERE {diff} > 0"))
    assert len(answer.rows) == 1


@pytest.mark.parametrize("constant", ["garbage", "2024-13-45", "yesterday-ish"])
def test_a_text_constant_that_is_no_date_is_refused_before_any_charge(
    small_demo: Engine, constant: str
) -> None:
    """``ts > 'garbage'`` was refused while ``date_diff('day', ts, 'garbage')`` was answered
    as NULL on every row, and charged (an adversarial probe, 2026-12-06)."""
    spent = small_demo.ledger.history()
    for sql in (
        f"SELECT COUNT(*) AS n FROM prompts WHERE date_diff('day', ts, '{constant}') IS NULL",
        f"SELECT COUNT(*) AS n FROM prompts WHERE date_diff('day', '{constant}', ts) > 1",
    ):
        with pytest.raises(DPSQLError) as refused:
            small_demo.run(QueryRequest(sql, epsilon=1.0))
        assert refused.value.code == "bad_request" and constant in refused.value.message
    assert small_demo.ledger.history() == spent
