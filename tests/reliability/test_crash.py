"""Suite 2: SIGKILL the server at random moments during a query stream, restart it on
the same ledger and cache files, and check after every restart that

* the ledger store opens and verifies, and every charge has its totals rows (none is
  half-written or counted twice);
* every answer the client received as a miss names a committed charge event for its
  query (no answer was delivered without a committed charge), and no query was answered
  from two charges;
* every cached answer survives: asked again after the restart it is a hit, costs 0,
  names the same charge and returns the same rows.

Charges committed just before a kill, whose answer was never delivered, stand (charge
before noise) and are counted in the figures. The kill moments come from a seeded
``random.Random``; the seed is printed with the figures.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.server_harness import (
    Key,
    Server,
    cli_verify,
    fresh_keys,
    kill_server,
    ledger_facts,
    released_keys,
    start_tracked,
    stop_server,
    write_keyed_policy,
)

CAP = 1000.0  # never reached: this suite is about durability, not admission
TEMPLATES = (
    "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE tokens_in < {a}",
    "SELECT plan, COUNT(*) AS n FROM users WHERE age > {b} AND age < {c} GROUP BY plan",
    "SELECT model, AVG(latency_ms) AS l FROM prompts WHERE tokens_out > {a} GROUP BY model",
)


def new_body(k: int) -> dict[str, Any]:
    """A query no earlier k asked (distinct literal, or distinct ε once literals repeat)."""
    sql = TEMPLATES[k % 3].format(a=10 + k, b=18 + k % 40, c=60 + k // 40 % 40)
    return {"sql": sql, "epsilon": round(0.2 + (k // 1600) * 1e-3, 6)}


def _key(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True)


@dataclass
class Stream:
    """What the client saw: answers by request, and the request that was in flight when
    the server died."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # first miss answer
    hits: list[dict[str, Any]] = field(default_factory=list)
    in_flight: dict[str, Any] | None = None
    sent: int = 0
    refused: Counter[str] = field(default_factory=Counter)


def stream(
    url: str, key: Key, state: Stream, counter: list[int], rng: random.Random, stop: threading.Event
) -> None:
    """Ask new queries and repeats of answered ones until the connection dies (bounded
    in count and time: the main thread always kills the server well before either)."""
    deadline = time.monotonic() + 120
    with httpx.Client(base_url=url, timeout=60) as c:
        for _ in range(2000):
            if stop.is_set() or time.monotonic() > deadline:
                return
            if state.answers and rng.random() < 0.3:
                body = json.loads(rng.choice(sorted(state.answers)))
            else:
                body = new_body(counter[0])
                counter[0] += 1
            state.in_flight = body
            try:
                r = c.post("/v1/query", json=body, headers=key.headers())
            except httpx.TransportError:
                return
            state.in_flight = None
            state.sent += 1
            if r.status_code != 200:
                state.refused[f"{r.status_code} {r.text[:120]}"] += 1
                continue
            out = r.json()
            if out["privacy"]["cached"]:
                state.hits.append(out)
            else:
                assert _key(body) not in state.answers, "a query answered as a miss twice"
                state.answers[_key(body)] = out


def check_store(policy: Path, state: Stream, replays_before: int) -> dict[str, int]:
    facts = ledger_facts(policy.with_name("ledger.sqlite"))
    assert facts.verified, facts.problems
    # One totals row step per population a charge names: nothing half-written or doubled.
    assert facts.charges == facts.counted == facts.named, facts
    charges = {e.id: e for e in facts.of_kind("charge")}
    released = released_keys(policy)
    for body, out in state.answers.items():
        charge = charges.get(out["privacy"]["charge_id"])
        assert charge is not None, f"answer {body} has no committed charge"
        assert released.get(charge.fingerprint) == charge.id, f"answer {body} was not stored"
    answered = Counter(
        charges[out["privacy"]["charge_id"]].fingerprint for out in state.answers.values()
    )
    assert max(answered.values(), default=1) == 1, "a query was answered from two charges"
    for key, charge_id in released.items():
        assert charges[charge_id].fingerprint == key
    parents = Counter(e.parent_id for e in facts.of_kind("replay"))
    assert len(facts.of_kind("replay")) >= replays_before
    for hit in state.hits:
        assert parents[hit["privacy"]["charge_id"]] >= 1, "a hit was answered without a replay"
    # Charges that stand although the client never got their answer: killed between
    # the charge and the release, or between the release and the response.
    unreleased = [c for c in charges.values() if released.get(c.fingerprint) != c.id]
    delivered = {out["privacy"]["charge_id"] for out in state.answers.values()}
    return {
        "charges": len(charges),
        "charged_not_released": len(unreleased),
        "charged_not_delivered": len(set(charges) - delivered),
        "replays": len(facts.of_kind("replay")),
    }


def replay_after_restart(
    server: Server, key: Key, state: Stream, rng: random.Random, n: int
) -> None:
    """Answers delivered before any of the kills come back from the cache, for free."""
    chosen = rng.sample(sorted(state.answers), min(n, len(state.answers)))
    with server.client() as c:
        for body in chosen:
            first = state.answers[body]
            r = c.post("/v1/query", json=json.loads(body), headers=key.headers())
            assert r.status_code == 200, r.text
            again = r.json()
            p = again["privacy"]
            assert p["cached"] is True and p["epsilon"] == 0.0 and p["delta"] == 0.0, p
            assert p["charge_id"] == first["privacy"]["charge_id"]
            assert again["rows"] == first["rows"] and again["columns"] == first["columns"]
            state.hits.append(again)


def crash_rounds(tmp_path: Path, db: Path, *, rounds: int, seed: int) -> dict[str, Any]:
    keys = fresh_keys()
    policy = write_keyed_policy(tmp_path, db, keys, cap=CAP, extra_proxy="query_timeout_s = 2")
    rng = random.Random(seed)
    state, counter = Stream(), [0]
    figures: dict[str, Any] = {"seed": seed, "rounds": rounds, "in_flight_retries": Counter()}
    server = start_tracked(policy)
    restarts: list[float] = []
    t_start = time.perf_counter()
    try:
        for _ in range(rounds):
            stop = threading.Event()
            client = threading.Thread(
                target=stream,
                args=(
                    server.url,
                    keys["analyst"],
                    state,
                    counter,
                    random.Random(rng.random()),
                    stop,
                ),
                daemon=True,
            )
            client.start()
            time.sleep(rng.uniform(0.05, 1.5))
            kill_server(server)
            stop.set()
            client.join(90)
            assert not client.is_alive()
            assert server.process.returncode is not None and server.process.returncode < 0
            facts = check_store(policy, state, 0)
            t0 = time.perf_counter()
            server = start_tracked(policy)
            restarts.append(time.perf_counter() - t0)
            replay_after_restart(server, keys["analyst"], state, rng, 5)
            if state.in_flight is not None:
                # The client retries the request it lost when the server died: the dead
                # worker's flight claim must not block it.
                with server.client() as c:
                    r = c.post("/v1/query", json=state.in_flight, headers=keys["analyst"].headers())
                figures["in_flight_retries"][r.status_code] += 1
                assert r.status_code == 200, r.text
                out = r.json()
                if out["privacy"]["cached"]:
                    state.hits.append(out)
                else:
                    state.answers[_key(state.in_flight)] = out
                state.in_flight = None
        with server.client() as c:
            verify = c.post("/v1/ledger/verify", headers=keys["admin"].headers()).json()
        assert verify["ok"] is True, verify
    finally:
        stop_server(server)
    facts = check_store(policy, state, 0)
    cli = cli_verify(policy)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert not state.refused, state.refused
    figures.update(
        facts,
        requests_answered=state.sent,
        distinct_answers=len(state.answers),
        hits_seen=len(state.hits),
        restart_s_median=round(sorted(restarts)[len(restarts) // 2], 2),
        wall_s=round(time.perf_counter() - t_start, 1),
        in_flight_retries=dict(figures["in_flight_retries"]),
    )
    print(f"\ncrash figures: {json.dumps(figures)}")
    assert len(state.answers) >= rounds  # the stream really ran between the kills
    return figures


def test_sigkill_and_restart_ci_size(tmp_path: Path, fz_demo_db: Path) -> None:
    crash_rounds(tmp_path, fz_demo_db, rounds=3, seed=7)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_sigkill_and_restart_full_size(tmp_path: Path, fz_demo_db: Path) -> None:
    crash_rounds(tmp_path, fz_demo_db, rounds=50, seed=8)


_CLAIM_AND_DIE = """
import os, signal, sys
from proxy.cache import ReleaseCache
assert ReleaseCache(sys.argv[1]).claim(sys.argv[2])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_flight_left_by_a_killed_worker_does_not_block_its_query(
    tmp_path: Path, fz_demo_db: Path
) -> None:
    """Minimal reproduction of what the crash suite sees on some in-flight retries: a
    process claims the flight of a query (as Engine.run does before charging) and is
    SIGKILLed; the restarted server must still answer that query."""
    import subprocess
    import sys

    from tests.reliability.server_harness import REPO, running_server

    keys = fresh_keys()
    policy = write_keyed_policy(
        tmp_path, fz_demo_db, keys, cap=CAP, extra_proxy="query_timeout_s = 1"
    )
    body = {"sql": "SELECT COUNT(*) AS n FROM users", "epsilon": 0.3}
    with running_server(policy) as server, server.client() as c:
        key = c.post("/v1/explain", json=body, headers=keys["analyst"].headers()).json()
        died = subprocess.run(
            [
                sys.executable,
                "-c",
                _CLAIM_AND_DIE,
                str(policy.with_name("ledger-cache.sqlite")),
                key["cache_key"],
            ],
            cwd=REPO,
            timeout=60,
        )
        assert died.returncode == -9
        r = c.post("/v1/query", json=body, headers=keys["analyst"].headers())
        assert r.status_code == 200, r.text
