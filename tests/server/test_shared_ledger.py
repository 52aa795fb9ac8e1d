"""Two proxy hosts on one PostgreSQL ledger and release cache (``[ledger] url``): two real
`dpsql serve` processes, concurrent queries on both until the budget runs out. The cap
is never exceeded, every miss is charged once (identical misses on the two hosts
included), and what one host released the other replays for free."""

from __future__ import annotations

import collections
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from accounting.store_postgres import PostgresLedger
from tests.server.conftest import auth, start_server, stop_server, write_policy

CAP = 1.0
EPSILON = 0.3


def _queries() -> list[str]:
    """Distinct queries (distinct releases): root charges and partition charges."""
    out = []
    for k in range(20, 80, 2):
        out.append(f"SELECT region, COUNT(*) AS n FROM users WHERE age >= {k} GROUP BY region")
        out.append(f"SELECT COUNT(*) AS n FROM users WHERE region = 'north' AND age >= {k}")
    return out


def test_two_hosts_share_one_ledger_and_cache(tmp_path: Path, dataset: Path, pg_database):
    policy = write_policy(tmp_path, dataset, cap=CAP)
    text = policy.read_text()
    old = f'path = "{tmp_path / "ledger.sqlite"}"'
    assert old in text
    policy.write_text(text.replace(old, f'url = "{pg_database.dsn}"'))
    env = {"DPSQL_RATE_LIMIT": "off"}
    hosts = [start_server(policy, env=env)]
    try:
        hosts.append(start_server(policy, env=env))
        clients = [h.client() for h in hosts]
        answers: list[tuple[int, int, int, dict[str, Any]]] = []  # (query, host, status, body)
        lock = threading.Lock()

        def ask(task: tuple[int, int]) -> None:
            i, host = task
            body = {"sql": QUERIES[i], "epsilon": EPSILON}
            r = clients[host].post("/v1/query", json=body, headers=auth("ana"))
            with lock:
                answers.append((i, host, r.status_code, r.json()))

        # Each query goes to both hosts at about the same time: identical misses race.
        tasks = list(itertools.product(range(len(QUERIES)), (0, 1)))
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(ask, tasks))

        statuses = collections.Counter(status for _, _, status, _ in answers)
        assert set(statuses) <= {200, 402}, statuses
        assert statuses[402] > 0, "the budget never ran out"
        paid = [(i, h, b) for i, h, s, b in answers if s == 200 and not b["privacy"]["cached"]]
        replayed = [(i, h, b) for i, h, s, b in answers if s == 200 and b["privacy"]["cached"]]
        assert paid and replayed
        # Every 200 for one query carries the same charge: it was paid once.
        by_query: dict[int, set[int]] = collections.defaultdict(set)
        for i, _, s, b in answers:
            if s == 200:
                by_query[i].add(b["privacy"]["charge_id"])
        assert all(len(ids) == 1 for ids in by_query.values()), by_query
        for _, _, b in replayed:
            assert b["privacy"]["epsilon"] == 0.0

        ledger = PostgresLedger(pg_database.dsn)
        try:
            events = ledger.history(limit=100000)
            charges = [e for e in events if e.kind == "charge"]
            # Every miss charged once: one charge per paid answer, one per release.
            assert sorted(e.id for e in charges) == sorted(
                b["privacy"]["charge_id"] for *_, b in paid
            )
            per_release = collections.Counter(e.fingerprint for e in charges)
            assert max(per_release.values()) == 1
            assert len([e for e in events if e.kind == "replay"]) == len(replayed)
            for pop in ledger.populations():
                assert ledger.spent(pop).epsilon <= CAP, pop
            report = ledger.verify()
            assert report.ok, report.problems
        finally:
            ledger.close()

        # A release paid on one host is replayed free by the other.
        i, host, first = paid[0]
        again = clients[1 - host].post(
            "/v1/query", json={"sql": QUERIES[i], "epsilon": EPSILON}, headers=auth("bob")
        )
        assert again.status_code == 200, again.text
        privacy = again.json()["privacy"]
        assert privacy["cached"] and privacy["epsilon"] == 0.0
        assert privacy["charge_id"] == first["privacy"]["charge_id"]
        assert again.json()["rows"] == first["rows"]
        # Both hosts report the same budget: one ledger.
        budgets = [c.get("/v1/budget", headers=auth("ana")).json() for c in clients]
        assert budgets[0] == budgets[1]
        for c in clients:
            c.close()
    finally:
        for h in hosts:
            stop_server(h)


QUERIES = _queries()
