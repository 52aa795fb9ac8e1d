"""A subquery that is not row-level is refused with the rewrite that answers its shape
(a corpus of BI SQL, 2026-12-06: "move aggregation to the outer query" was the hint for
per-person facts joined to a table, Looker's derived tables, and for a percent of the
total by a scalar subquery, where it does not help). Each hint's rewrite is answered."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

JOINED = "join the other table inside the subquery"
SHARE = "SUM(COUNT(*)) OVER ()"


@pytest.mark.parametrize(
    ("refused", "fragment", "rewrite"),
    [
        (
            # (LEFT from the people's table: people without facts are added; the INNER
            # form is answered, proxy/joined_facts.py)
            "SELECT u.plan, AVG(t.n) AS a FROM users u LEFT JOIN (SELECT user_id, COUNT(*) "
            "AS n FROM prompts GROUP BY user_id) t ON t.user_id = u.user_id GROUP BY u.plan",
            JOINED,
            "SELECT plan, AVG(n) AS a FROM (SELECT p.user_id, u.plan, COUNT(*) AS n FROM "
            "prompts p JOIN users u ON u.user_id = p.user_id GROUP BY p.user_id, u.plan) t "
            "GROUP BY plan",
        ),
        (
            "WITH facts AS (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY 1) SELECT "
            "users.plan, AVG(facts.n) AS a FROM users LEFT JOIN facts ON users.user_id = "
            "facts.user_id GROUP BY 1",
            JOINED,
            "SELECT plan, AVG(n) AS a FROM (SELECT p.user_id, u.plan, COUNT(*) AS n FROM "
            "prompts p JOIN users u ON u.user_id = p.user_id GROUP BY p.user_id, u.plan) t "
            "GROUP BY plan",
        ),
        (
            "SELECT model, COUNT(*) * 100.0 / (SELECT COUNT(*) FROM prompts) AS pct "
            "FROM prompts GROUP BY model",
            SHARE,
            "SELECT model, COUNT(*) * 100.0 / SUM(COUNT(*)) OVER () AS pct FROM prompts "
            "GROUP BY model",
        ),
    ],
    ids=["joined_subquery", "joined_cte", "scalar_total"],
)
def test_the_hint_names_a_rewrite_that_is_answered(
    small_demo: Engine, refused: str, fragment: str, rewrite: str
) -> None:
    before = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as error:
        small_demo.run(QueryRequest(refused, epsilon=1.0))
    assert error.value.code == "unsupported_sql" and fragment in error.value.hint
    assert small_demo.ledger.history() == before
    assert small_demo.run(QueryRequest(rewrite, epsilon=1.0)).rows
