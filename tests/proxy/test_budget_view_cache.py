"""Budget views kept in memory (proxy/budgets.py, issue 18) follow every charge of any
engine on the same ledger, and a release kept in memory is the one the shared store holds.
Two engines on one policy stand for two worker processes: each has its own ledger
connection, so the other's commits reach it only through the store."""

from __future__ import annotations

from pathlib import Path

from proxy.budgets import Budgets
from proxy.engine import Engine
from proxy.request import QueryRequest
from tests.proxy.conftest import pums_policy

SQL = "SELECT sex, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex"


def test_a_kept_view_follows_another_engines_charges(tmp_path: Path) -> None:
    policy = pums_policy(tmp_path, cap=50.0)
    a, b = Engine(policy), Engine(policy)
    try:
        start = b.budgets.view("pums")
        assert b.budgets.view("pums") == start  # kept: same figures, nothing committed
        first = a.run(QueryRequest(SQL, epsilon=1.0))
        assert first.privacy.charge_id is not None
        seen = b.budgets.view("pums")
        assert seen.epsilon_spent > start.epsilon_spent
        fresh = Budgets(policy, a.budgets.ledger).view("pums")
        assert seen == fresh
        # A replay on the other engine costs nothing and keeps the view.
        again = b.run(QueryRequest(SQL, epsilon=1.0))
        assert again.privacy.cached and again.rows == first.rows
        assert b.budgets.view("pums") == seen
        a.run(QueryRequest(SQL.replace("sex", "married"), epsilon=2.0))
        later = b.budgets.view("pums")
        assert later.epsilon_spent > seen.epsilon_spent
        assert later.remaining == Budgets(policy, a.budgets.ledger).view("pums").remaining
    finally:
        a.close()
        b.close()


def test_a_release_kept_in_memory_is_the_stored_one(tmp_path: Path) -> None:
    policy = pums_policy(tmp_path, cap=50.0)
    a, b = Engine(policy), Engine(policy)
    try:
        first = b.run(QueryRequest(SQL, epsilon=1.0))
        hits = [e.run(QueryRequest(SQL, epsilon=1.0)) for e in (a, b, a, b)]
        assert all(h.privacy.cached and h.rows == first.rows for h in hits)
        assert {h.privacy.charge_id for h in hits} == {first.privacy.charge_id}
    finally:
        a.close()
        b.close()
