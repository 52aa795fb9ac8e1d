"""Text where a condition needs true or false is refused before any charge.

DuckDB casts a text column used as a condition to BOOLEAN row by row; the total forms
put that cast under TRY, so ``WHERE model`` and ``COUNT(*) FILTER (WHERE model)`` over
words kept no row and answered a noisy 0 without a word (a probe, 2026-12-06).
PostgreSQL refuses such a query outright; so does dpsql now (proxy/check.py
``check_conditions``). Numbers and booleans stay conditions, as DuckDB reads them."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

TEXT_CONDITIONS = [
    "SELECT COUNT(*) AS n FROM prompts WHERE model",
    "SELECT COUNT(*) FILTER (WHERE model) AS n FROM prompts",
    "SELECT SUM(CASE WHEN model THEN 1 ELSE 0 END) AS s FROM prompts",
    "SELECT COUNT(*) AS n FROM prompts WHERE flagged AND NOT (model)",
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 5 OR lower(model)",
    "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id AND u.region",
    "SELECT COUNT(*) AS n FROM (SELECT user_id FROM prompts WHERE model) q",
    # a review (2026-12-06): a timestamp as a condition, and IS TRUE / IS NOT FALSE of
    # text, answered a noisy 0 too
    "SELECT COUNT(*) AS n FROM prompts WHERE ts",
    "SELECT COUNT(*) AS n FROM prompts WHERE NOT ts",
    "SELECT COUNT(*) AS n FROM prompts WHERE model IS TRUE",
    "SELECT COUNT(*) AS n FROM prompts WHERE model IS NOT FALSE",
]


@pytest.mark.parametrize("sql", TEXT_CONDITIONS)
def test_text_as_a_condition_is_refused_before_any_charge(small_demo: Engine, sql: str) -> None:
    spent = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert refused.value.code == "unsupported_sql"
    assert "and a condition needs true or false" in str(refused.value)
    assert "IS NOT NULL" in (refused.value.hint or "")
    assert small_demo.ledger.history() == spent


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE flagged",
        "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in",
        "SELECT COUNT(*) FILTER (WHERE model = 'small') AS n FROM prompts",
        "SELECT COUNT(*) AS n FROM prompts WHERE model IS NOT NULL AND NOT flagged",
        "SELECT COUNT(*) AS n FROM prompts WHERE flagged IS TRUE",
        "SELECT COUNT(*) AS n FROM prompts WHERE flagged = 'true'",
    ],
)
def test_truth_values_and_comparisons_are_answered(small_demo: Engine, sql: str) -> None:
    assert len(small_demo.run(QueryRequest(sql, epsilon=1.0)).rows) == 1


def test_the_hint_works(small_demo: Engine) -> None:
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest("SELECT COUNT(*) AS n FROM prompts WHERE model"))
    hinted = (refused.value.hint or "").split("e.g. ")[1].replace("'...'", "'small'")
    condition = hinted.split(" or ")[0]
    answer = small_demo.run(QueryRequest(f"SELECT COUNT(*) AS n FROM prompts WHERE {condition}"))
    assert len(answer.rows) == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE (model = 'small') = model",
        "SELECT COUNT(*) AS n FROM prompts WHERE flagged = model",
    ],
)
def test_truth_compared_with_text_is_refused_before_any_charge(
    small_demo: Engine, sql: str
) -> None:
    spent = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert "compares true or false with text" in str(refused.value)
    assert small_demo.ledger.history() == spent
