"""Two uvicorn workers, many concurrent clients, a small cap: the ledger never admits
more than the cap, identical queries are charged once, and it verifies afterwards."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import httpx
import pytest

from accounting.ledger import epsilon_at
from accounting.rdp import ZERO, Curve
from tests.server.conftest import auth, start_server, stop_server, write_policy

CAP = 1.0


def test_concurrent_clients_on_two_workers_never_exceed_the_cap(
    tmp_path: Path, dataset: Path
) -> None:
    server = start_server(write_policy(tmp_path, dataset, cap=CAP), workers=2)
    try:
        # 12 distinct queries at ε=0.5 each (about four fit under the cap by composition),
        # every one asked by two clients at once.
        bodies = [
            {
                "sql": f"SELECT plan, COUNT(*) AS n FROM users WHERE age > {20 + i} GROUP BY plan",
                "epsilon": 0.5,
            }
            for i in range(12)
        ]
        results: list[tuple[int, dict]] = []
        lock = threading.Lock()

        def client(work: list[dict], who: str) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                for body in work:
                    r = c.post("/v1/query", json=body, headers=auth(who))
                    with lock:
                        results.append((r.status_code, r.json()))

        threads = [
            threading.Thread(target=client, args=(bodies[k::4], who))
            for k in range(4)
            for who in ("ana", "bob")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted({s for s, _ in results})
        assert set(statuses) <= {200, 402}, results
        answered = [b for s, b in results if s == 200]
        charged = [b for b in answered if not b["privacy"]["cached"]]
        refused = [b for s, b in results if s == 402]
        assert all(b["error"]["code"] == "budget_exhausted" for b in refused)
        assert charged and refused
        # Identical queries share one charge even across workers.
        ids = [b["privacy"]["charge_id"] for b in charged]
        assert len(ids) == len(set(ids))
        with httpx.Client(base_url=server.url, timeout=60) as c:
            budget = c.get("/v1/budget", headers=auth("adm")).json()["populations"][0]
            events = c.get("/v1/ledger", params={"limit": 1000}, headers=auth("adm")).json()
            verify = c.post("/v1/ledger/verify", headers=auth("adm")).json()
        cost = [e for e in events["events"] if e["kind"] == "charge"]
        assert sorted(e["id"] for e in cost) == sorted(ids)
        total = ZERO
        for e in cost:
            total = total + Curve(tuple(math.inf if v is None else v for v in e["rdp"]))
        assert budget["epsilon_spent"] == pytest.approx(epsilon_at(total, 1e-6, 0.0), rel=1e-12)
        assert budget["epsilon_spent"] <= CAP
        # Refused only because the next charge really would not fit (all curves are equal).
        one = Curve(tuple(math.inf if v is None else v for v in cost[0]["rdp"]))
        assert epsilon_at(total + one, 1e-6, 0.0) > CAP
        assert verify["ok"] is True, verify
        assert server.log.read_text().count('"event":"started"') == 2  # two engines served
        # Responses are not held back by Nagle's algorithm until the client's delayed
        # ACK (~40 ms each): seen with 2 workers on uvicorn's h11 protocol.
        with httpx.Client(base_url=server.url, timeout=60) as c:
            times = []
            for _ in range(21):
                t0 = time.perf_counter()
                assert c.get("/v1/schema", headers=auth("ana")).status_code == 200
                times.append(time.perf_counter() - t0)
        # Nagle would delay every response by ~40 ms; load delays only some: the fastest
        # of 21 is well under the delayed-ACK time unless every response waited for it.
        assert min(times) < 0.03, times
    finally:
        stop_server(server)
