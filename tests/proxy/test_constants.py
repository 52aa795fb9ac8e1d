"""A text constant compared with a typed column converts, or the query is refused before
any charge (proxy/constants.py): ``ts > '2024-13-45'`` was answered, and charged, as 0
rows, because the rewrite's TRY turned the failed cast into NULL."""

from __future__ import annotations

import pytest

from proxy.constants import converts
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE ts > '2024-13-45'",
        "SELECT COUNT(*) AS n FROM users WHERE age > 'abc'",
        "SELECT COUNT(*) AS n FROM prompts WHERE ts BETWEEN '2024-01-01' AND 'tomorrow'",
        "SELECT COUNT(*) AS n FROM users WHERE age IN ('30', 'thirty')",
        "SELECT COUNT(*) AS n FROM prompts WHERE '2024-02-30' <= ts",
        # a probe of the first check (2026-12-02): each was still answered as 0 rows
        "SELECT COUNT(*) AS n FROM users WHERE age > ('abc')",
        "SELECT COUNT(*) AS n FROM users WHERE age + 0 > 'abc'",
        "SELECT COUNT(*) AS n FROM users WHERE COALESCE(age, 0) > 'abc'",
        "SELECT COUNT(*) AS n FROM users WHERE EXTRACT(year FROM signup_month) = 'abc'",
        "SELECT COUNT(*) AS n FROM users WHERE date_trunc('month', signup_month) > "
        "'2024-13-45'",
        "SELECT COUNT(*) AS n FROM users WHERE signup_month + INTERVAL 1 DAY > '2024-13-45'",
        "SELECT COUNT(*) AS n FROM users WHERE signup_month > DATE '2024-13-45'",
        "SELECT COUNT(*) AS n FROM users WHERE signup_month > CAST('2024-13-45' AS DATE)",
        "SELECT COUNT(*) AS n FROM users WHERE age IS DISTINCT FROM 'abc'",
    ],
)
def test_a_constant_that_does_not_convert_is_refused(small_demo: Engine, sql: str) -> None:
    before = small_demo.ledger.history(limit=10**6)
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert refused.value.code == "bad_request"
    assert "is not of type" in refused.value.message
    assert refused.value.hint
    assert small_demo.ledger.history(limit=10**6) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE ts > '2024-01-31'",
        "SELECT COUNT(*) AS n FROM prompts WHERE ts >= '2024-01-31 12:30:00'",
        "SELECT COUNT(*) AS n FROM users WHERE age IN ('30', '31')",
        "SELECT COUNT(*) AS n FROM prompts WHERE model = 'small'",
    ],
)
def test_constants_that_convert_are_answered(small_demo: Engine, sql: str) -> None:
    assert small_demo.run(QueryRequest(sql, epsilon=1.0)).rows


def test_converts_uses_duckdbs_casts() -> None:
    assert converts("2024-01-31", "DATE") and not converts("2024-02-30", "DATE")
    assert converts(" 42 ", "INTEGER") and not converts("4.2e99", "INTEGER")
    assert converts("true", "BOOLEAN") and not converts("maybe", "BOOLEAN")


def test_a_number_compared_with_text_is_refused(small_demo: Engine) -> None:
    """``region = 1`` cast each row's text to a number: NULL for every region."""
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest("SELECT COUNT(*) AS n FROM users WHERE region = 1"))
    assert refused.value.code == "bad_request" and "'1'" in refused.value.hint
