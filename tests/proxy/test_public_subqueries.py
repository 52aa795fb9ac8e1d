"""Subqueries of public tables in conditions are answered as the constants they are
(proxy/public_subqueries.py): they were refused as "not row-level" (an honest-answers
probe, 2026-12-06). Each answered case here was refused before."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

EPS = 1e4


def _n(engine: Engine, sql: str) -> float:
    [(value,)] = engine.run(QueryRequest(sql, epsilon=EPS)).rows
    return float(value)


@pytest.mark.parametrize(
    ("folded", "written"),
    [
        (
            "SELECT COUNT(*) AS n FROM users u WHERE u.region = "
            "(SELECT region FROM regions WHERE name = 'East')",
            "SELECT COUNT(*) AS n FROM users u WHERE u.region = 'east'",
        ),
        (
            "SELECT COUNT(*) AS n FROM users u WHERE u.region IN "
            "(SELECT region FROM regions WHERE name <> 'East')",
            "SELECT COUNT(*) AS n FROM users u WHERE u.region IN ('north', 'south', 'west')",
        ),
        (
            "SELECT COUNT(*) AS n FROM users u WHERE u.region NOT IN "
            "(SELECT region FROM regions WHERE name = 'Nowhere')",
            "SELECT COUNT(*) AS n FROM users u",
        ),
        (
            "SELECT COUNT(*) AS n FROM users WHERE NOT EXISTS "
            "(SELECT 1 FROM regions WHERE name = 'Nowhere')",
            "SELECT COUNT(*) AS n FROM users",
        ),
    ],
)
def test_a_public_subquery_is_its_values(small_demo: Engine, folded: str, written: str) -> None:
    assert abs(_n(small_demo, folded) - _n(small_demo, written)) < 3


def test_the_folded_values_narrow_a_public_key(small_demo: Engine) -> None:
    rows = small_demo.run(
        QueryRequest(
            "SELECT region, COUNT(*) AS n FROM users WHERE region IN "
            "(SELECT region FROM regions WHERE name IN ('East', 'West')) GROUP BY 1",
            epsilon=EPS,
        )
    ).rows
    assert sorted(r[0] for r in rows) == ["east", "west"]


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        (
            "SELECT COUNT(*) AS n FROM users u WHERE u.region = (SELECT region FROM regions)",
            "returned 4 rows",
        ),
        (
            "SELECT COUNT(*) AS n FROM prompts WHERE user_id IN (SELECT region FROM regions)",
            "'north' is not of type BIGINT",
        ),
        # correlated: not folded, refused as before
        (
            "SELECT COUNT(*) AS n FROM users u WHERE EXISTS "
            "(SELECT 1 FROM regions r WHERE r.region = u.region)",
            "subquery",
        ),
    ],
)
def test_what_does_not_fold_is_refused_before_any_charge(
    small_demo: Engine, sql: str, said: str
) -> None:
    spent = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert said in str(refused.value)
    assert small_demo.ledger.history() == spent
