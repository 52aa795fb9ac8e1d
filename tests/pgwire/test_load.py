"""Load through the PostgreSQL door: 32 concurrent connections mixing new and cached
queries until the budget runs out, and clients that hang up mid-query.

Checked against the ledger and release-cache files afterwards: every answered miss is
one charge and every charge one distinct answered miss or abandoned query (never two
charges for one release); every hit is a zero-cost replay event of the charge that
paid for it (extra replays come only from hung-up queries); ε spent stays within the cap; refusals past the cap are 53400; every thread ends
within its deadline; every charge has its stored release (a client that disconnects
mid-query leaves no half-written charge); the ledger verifies.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.pgwire.conftest import pg_policy, start_door, stop_door
from tests.reliability.server_harness import ledger_facts, released_keys

psycopg = pytest.importorskip("psycopg", reason="the pg extra (psycopg) is not installed")

CAP = 2.0
EPSILON = 0.3
REPEATS = [
    f"SELECT {key}, COUNT(*) AS n FROM users GROUP BY {key}" for key in ("region", "plan")
] + [
    "SELECT model, AVG(tokens_in) AS t FROM prompts GROUP BY model",
    "SELECT COUNT(*) AS n FROM tickets",
]
CHARGED = re.compile(r"charged ε=([0-9.e-]+) .* as charge #(\d+)")
REPLAYED = re.compile(r"replayed from the cache, charged nothing \(paid by charge #(\d+)")


@dataclass
class Tally:
    misses: list[tuple[int, str]] = field(default_factory=list)  # (charge id, sql)
    hits: list[int] = field(default_factory=list)  # charge ids replayed
    exhausted: int = 0
    abandoned: int = 0
    other: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _client(dsn: str, plan: list[tuple[str, str]], tally: Tally, deadline: float) -> None:
    notes: list[str] = []
    conn = psycopg.connect(dsn, autocommit=True)
    conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
    conn.execute(f"SET dpsql.epsilon = {EPSILON}")
    try:
        for action, sql in plan:
            if time.monotonic() > deadline:
                break
            if action == "hangup":
                # send a new query on a fresh connection and hang up without reading
                quitter = psycopg.connect(dsn, autocommit=True)
                quitter.pgconn.send_query(sql.encode())
                quitter.pgconn.flush()
                quitter.close()
                with tally.lock:
                    tally.abandoned += 1
                continue
            notes.clear()
            try:
                conn.execute(sql).fetchall()
            except psycopg.errors.ConfigurationLimitExceeded:
                with tally.lock:
                    tally.exhausted += 1
                continue
            except psycopg.Error as error:
                with tally.lock:
                    tally.other.append(f"{type(error).__name__}: {error}"[:200])
                continue
            text = " ".join(notes)
            charged, replayed = CHARGED.search(text), REPLAYED.search(text)
            with tally.lock:
                if charged:
                    assert float(charged.group(1)) == pytest.approx(EPSILON, rel=1e-3)
                    tally.misses.append((int(charged.group(2)), sql))
                elif replayed:
                    tally.hits.append(int(replayed.group(1)))
                else:
                    tally.other.append(f"no privacy notice for {sql!r}: {text!r}")
    finally:
        conn.close()


def run_load(
    folder: Path, dataset: Path, *, clients: int, per_client: int, seed: int, cap: float = CAP
) -> None:
    policy = pg_policy(folder, dataset, cap=cap)
    door = start_door(policy)
    rng = random.Random(seed)
    counter = iter(range(10**6))
    plans = []
    for _ in range(clients):
        plan = []
        for _ in range(per_client):
            roll = rng.random()
            if roll < 0.45:
                plan.append(("ask", rng.choice(REPEATS)))
            elif roll < 0.93:
                k = next(counter)
                plan.append(("ask", f"SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > {k}"))
            else:
                k = next(counter)
                plan.append(("hangup", f"SELECT COUNT(*) AS n FROM users WHERE age > {k % 80}"))
        plans.append(plan)
    tally = Tally()
    deadline = time.monotonic() + 60 + 2 * per_client
    threads = [
        threading.Thread(target=_client, args=(door.dsn(), plan, tally, deadline)) for plan in plans
    ]
    start = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(1.0, deadline + 30 - time.monotonic()))
        hanging = [t for t in threads if t.is_alive()]
        assert not hanging, f"{len(hanging)} client connections never finished"
        wall = time.monotonic() - start
        # abandoned queries finish in the server's threads: wait until quiet
        facts = ledger_facts(door.ledger())
        for _ in range(100):
            released = set(released_keys(policy).values())
            facts = ledger_facts(door.ledger())
            if {e.id for e in facts.of_kind("charge")} <= released:
                break
            time.sleep(0.2)
    finally:
        stop_door(door)

    assert tally.other == []
    assert tally.exhausted > 0, "the budget never ran out"
    charges = {e.id: e for e in facts.of_kind("charge")}
    missed = [charge for charge, _ in tally.misses]
    assert len(missed) == len(set(missed)), "two answers claim the same charge as a miss"
    assert set(missed) <= set(charges)
    extra = set(charges) - set(missed)
    replays = facts.of_kind("replay")
    unseen_replays = Counter(e.parent_id for e in replays) - Counter(tally.hits)
    assert not Counter(tally.hits) - Counter(e.parent_id for e in replays)  # each hit replayed
    # charges and replays nobody received come from hung-up queries only
    assert len(extra) + sum(unseen_replays.values()) <= tally.abandoned
    assert set(tally.hits) <= set(charges)
    # one release per charge, every charge has its release: nothing half-written
    assert set(released_keys(policy).values()) == set(charges)
    assert facts.verified, facts.problems
    for population, spent in facts.spent.items():
        assert spent <= cap + 1e-9, (population, spent)
    print(
        f"\nPG load: {clients} connections, {sum(len(p) for p in plans)} planned, "
        f"{len(missed)} misses = charges ({len(extra)} more from {tally.abandoned} hang-ups), "
        f"{len(tally.hits)} hits = replays, {tally.exhausted} x 53400, wall {wall:.1f} s, "
        f"ε spent {facts.spent}"
    )


def test_load_ci(tmp_path: Path, pg_dataset: Path) -> None:
    run_load(tmp_path, pg_dataset, clients=32, per_client=6, seed=15)


@pytest.mark.slow
def test_load_full(tmp_path: Path, pg_dataset: Path) -> None:
    run_load(tmp_path, pg_dataset, clients=32, per_client=60, seed=1515, cap=10.0)
