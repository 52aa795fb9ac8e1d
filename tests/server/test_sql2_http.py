"""Per-person aggregates, COUNT(DISTINCT value) and UNION ALL through a real `dpsql
serve` on the demo data (issue #13 §2, §3, §5): answered with intervals, charged once,
replayed free, refused before any charge with a hint."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import Server
from tests.server.test_http import ask, events, spent

PER_PERSON = (
    "SELECT plan, AVG(n) AS prompts_per_user, COUNT(*) AS users FROM "
    "(SELECT p.user_id, u.plan, COUNT(*) AS n FROM prompts p JOIN users u "
    "ON u.user_id = p.user_id GROUP BY p.user_id, u.plan) t GROUP BY plan"
)
DISTINCT = "SELECT plan, COUNT(DISTINCT region) AS regions FROM users GROUP BY plan"
UNION = (
    "SELECT COUNT(*) AS n FROM (SELECT user_id FROM prompts UNION ALL "
    "SELECT user_id FROM tickets) t"
)


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


@pytest.mark.parametrize("sql", [PER_PERSON, DISTINCT, UNION], ids=["pp", "distinct", "union"])
def test_answered_then_replayed_free(c: httpx.Client, sql: str) -> None:
    before = spent(c)
    r = ask(c, {"sql": sql, "epsilon": 0.5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rows"] and body["privacy"]["cached"] is False
    assert all(w[-1] is not None and w[-1] > 0 for w in body["intervals_95"])
    assert spent(c)["epsilon_spent"] > before["epsilon_spent"]
    charges = len(events(c, "charge"))
    again = ask(c, {"sql": sql, "epsilon": 0.5}, who="bob").json()
    assert again["privacy"]["cached"] is True and again["rows"] == body["rows"]
    assert len(events(c, "charge")) == charges


def test_per_person_rows_are_the_plans(c: httpx.Client) -> None:
    body = ask(c, {"sql": PER_PERSON, "epsilon": 0.5}).json()
    assert sorted(row[0] for row in body["rows"]) == ["free", "pro", "team"]
    # A per-person count lies in [1, C] (C = 10 for prompts): so does its average.
    assert all(1 <= row[1] <= 10 for row in body["rows"])


def test_refused_before_any_charge(c: httpx.Client) -> None:
    charges = len(events(c, "charge"))
    r = ask(
        c,
        {
            "sql": "SELECT AVG(n) FROM (SELECT user_id, model, COUNT(*) AS n FROM prompts "
            "GROUP BY user_id, model) t"
        },
    )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "unsupported_sql" and "person id alone" in error["hint"]
    assert len(events(c, "charge")) == charges
