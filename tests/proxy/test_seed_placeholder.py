"""The L0 seed's placeholder is found outside quotes (proxy/rewrite/l0.py `takes_seed`).

A ``?`` in a string literal made planning pass a parameter the core did not take: the
query was refused as a binder error, or, when the catalog typed its keys and no DESCRIBE
ran first, it failed after the charge (a probe's side note, 2026-12-02)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed


def test_takes_seed() -> None:
    assert takes_seed("SELECT HASH(a, ?) FROM t")
    assert takes_seed("SELECT HASH(a, ?) FROM t WHERE m = 'a?b'")
    assert not takes_seed("SELECT COUNT(*) FROM t WHERE m = 'a?b'")
    assert not takes_seed("SELECT 'it''s ?' AS \"col?\" FROM t")
    assert not takes_seed("SELECT 1")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE model LIKE '%?%'",
        "SELECT COUNT(*) AS n FROM prompts WHERE model = 'a?b'",
        "SELECT model, COUNT(*) AS n FROM prompts WHERE model <> 'x?' GROUP BY model",
        "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n FROM prompts "
        "WHERE model <> 'it''s ?' GROUP BY d",
    ],
)
def test_question_marks_in_literals_are_answered(small_demo: Engine, sql: str) -> None:
    result = small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert result.columns
