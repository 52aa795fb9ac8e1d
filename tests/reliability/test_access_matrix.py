"""Suite 6: every route × every kind of caller gets the documented status, and a refusal
leaves the ledger exactly as it was (same event count, same ε spent).

Callers: no Authorization header, a well-formed key that is not in the policy, an
analyst, an admin, and an analyst whose policy grants only ``users`` (every data route is
exercised on ``prompts``). Run with ``-s`` to see the matrix.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.server_harness import (
    Key,
    Server,
    error_code,
    fresh_keys,
    ledger_facts,
    running_server,
    write_keyed_policy,
)

CAP = 4.0
CALLERS = ("no key", "wrong key", "analyst", "admin", "analyst w/o table")
PROMPTS = "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"


@dataclass(frozen=True)
class Route:
    name: str
    # (client, headers, cursor of the analyst's paged answer) -> response
    call: Callable[[httpx.Client, dict[str, str], str], httpx.Response]
    # caller -> (HTTP status, ledger events a success adds)
    expect: dict[str, tuple[int, int]]


def _expect(
    analyst: int, admin: int, narrow: int, *, events: int = 0, anonymous: int = 401
) -> dict[str, tuple[int, int]]:
    def cell(status: int) -> tuple[int, int]:
        return status, events if status == 200 else 0

    return {
        "no key": cell(anonymous),
        "wrong key": cell(anonymous),
        "analyst": cell(analyst),
        "admin": cell(admin),
        "analyst w/o table": cell(narrow),
    }


def _post(
    path: str, body: dict[str, Any]
) -> Callable[[httpx.Client, dict[str, str], str], httpx.Response]:
    return lambda c, h, _cursor: c.post(path, json=body, headers=h)


def _get(path: str) -> Callable[[httpx.Client, dict[str, str], str], httpx.Response]:
    return lambda c, h, _cursor: c.get(path, headers=h)


ROUTES = (
    # An answer adds one event: the charge of a miss or the replay of a hit.
    Route(
        "POST /v1/query",
        _post("/v1/query", {"sql": PROMPTS, "epsilon": 0.1}),
        _expect(200, 200, 404, events=1),
    ),
    Route(
        "POST /v1/explain",
        _post("/v1/explain", {"sql": PROMPTS, "epsilon": 0.1}),
        _expect(200, 200, 404),
    ),
    # A cursor belongs to the key that asked: any other key is told it does not exist.
    Route(
        "GET /v1/pages/{cursor}",
        lambda c, h, cursor: c.get(f"/v1/pages/{cursor}", headers=h),
        _expect(200, 404, 404, events=1),
    ),
    Route("GET /v1/budget", _get("/v1/budget"), _expect(200, 200, 200)),
    # Console views (issue 17): every key sees its own history and its populations' usage.
    Route("GET /v1/history", _get("/v1/history"), _expect(200, 200, 200)),
    Route("GET /v1/usage", _get("/v1/usage"), _expect(200, 200, 200)),
    Route("GET /v1/schema", _get("/v1/schema"), _expect(200, 200, 200)),
    Route("GET /v1/ledger", _get("/v1/ledger?limit=5"), _expect(403, 200, 403)),
    Route("POST /v1/ledger/verify", _post("/v1/ledger/verify", {}), _expect(403, 200, 403)),
    Route(
        "POST /v1/charges",
        _post("/v1/charges", {"population": "users", "note": "access matrix", "rho": 1e-6}),
        _expect(403, 200, 403, events=1),
    ),
    Route(
        "PUT /v1/populations/{name}/cap",
        lambda c, h, _cursor: c.put(
            "/v1/populations/users/cap",
            json={"epsilon_cap": CAP, "reason": "access matrix"},
            headers=h,
        ),
        _expect(403, 200, 403, events=1),
    ),
    # The Trino door: same keys and grants; a refusal is a 200 carrying Trino's error.
    Route(
        "POST /v1/statement",
        lambda c, h, _cursor: c.post("/v1/statement", content=PROMPTS, headers=h),
        {**_expect(200, 200, 200, events=1), "analyst w/o table": (200, 0)},
    ),
    Route("GET /healthz", _get("/healthz"), _expect(200, 200, 200, anonymous=200)),
    Route("GET /metrics", _get("/metrics"), _expect(403, 200, 403)),
)


@pytest.fixture(scope="module")
def am_keys() -> dict[str, Key]:
    return fresh_keys()


@pytest.fixture(scope="module")
def am_server(
    tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path, am_keys: dict[str, Key]
) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("access")
    policy = write_keyed_policy(folder, fz_demo_db, am_keys, cap=CAP)
    with running_server(policy) as server:
        yield server


def _headers(caller: str, keys: dict[str, Key]) -> dict[str, str]:
    if caller == "no key":
        return {}
    if caller == "wrong key":
        return {"Authorization": f"Bearer {secrets.token_urlsafe(24)}"}
    return keys[
        {"analyst": "analyst", "admin": "admin", "analyst w/o table": "narrow"}[caller]
    ].headers()


def _cursor(client: httpx.Client, keys: dict[str, Key]) -> str:
    r = client.post(
        "/v1/query",
        json={"sql": PROMPTS, "epsilon": 0.2},
        params={"page_size": 1},
        headers=keys["analyst"].headers(),
    )
    assert r.status_code == 200, r.text
    cursor = r.json()["next"]
    assert isinstance(cursor, str) and cursor
    return cursor.rsplit("/", 1)[-1]


def test_every_route_and_caller_gets_the_documented_status(
    am_server: Server, am_keys: dict[str, Key]
) -> None:
    ledger = am_server.policy.with_name("ledger.sqlite")
    table: list[list[str]] = []
    wrong: list[str] = []
    with am_server.client() as client:
        cursor = _cursor(client, am_keys)
        for route in ROUTES:
            row = [route.name]
            for caller in CALLERS:
                status, added = route.expect[caller]
                before = ledger_facts(ledger)
                r = route.call(client, _headers(caller, am_keys), cursor)
                after = ledger_facts(ledger)
                cell = str(r.status_code)
                if r.status_code >= 400:
                    cell += f" {error_code(r)}"
                elif route.name == "POST /v1/statement":
                    refused = (r.json().get("error") or {}).get("errorName")
                    cell += f" {refused}" if refused else ""
                    if (refused == "NOT_FOUND") != (caller == "analyst w/o table"):
                        wrong.append(f"{route.name} as {caller}: {r.text[:200]}")
                row.append(cell)
                grew = len(after.events) - len(before.events)
                if r.status_code != status:
                    wrong.append(f"{route.name} as {caller}: {r.status_code} {r.text[:200]}")
                if r.status_code >= 400 and (grew or after.spent != before.spent):
                    wrong.append(f"{route.name} as {caller}: refusal changed the ledger (+{grew})")
                if r.status_code == status and grew != added:
                    wrong.append(f"{route.name} as {caller}: {grew} events, expected {added}")
                if r.status_code >= 400 and error_code(r).startswith("!"):
                    wrong.append(f"{route.name} as {caller}: {error_code(r)}")
            table.append(row)
        # What an analyst limited to `users` may see: only that table.
        schema = client.get("/v1/schema", headers=am_keys["narrow"].headers()).json()
        assert [t["name"] for t in schema["tables"]] == ["users"]
    widths = [
        max(len(r[i]) for r in [["route", *CALLERS], *table]) for i in range(len(CALLERS) + 1)
    ]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
        for r in [["route", *CALLERS], ["-" * w for w in widths], *table]
    ]
    print("\naccess control matrix (status and error code):\n" + "\n".join(lines))
    facts = ledger_facts(ledger)
    assert facts.verified, facts.problems
    assert not wrong, "\n".join(wrong)


def test_malformed_authorization_headers_are_refused_without_a_ledger_change(
    am_server: Server, am_keys: dict[str, Key]
) -> None:
    ledger = am_server.policy.with_name("ledger.sqlite")
    secret = am_keys["admin"].secret
    headers = [
        {"Authorization": secret},  # no scheme
        {"Authorization": f"Basic {secret}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {secret}x"},
        {"Authorization": f"Bearer {secret[:-1]}"},
        {"X-API-Key": secret},
    ]
    before = ledger_facts(ledger)
    with am_server.client() as client:
        for h in headers:
            for method, path, body in (
                ("POST", "/v1/query", {"sql": PROMPTS, "epsilon": 0.1}),
                ("POST", "/v1/charges", {"population": "users", "note": "x", "rho": 1e-6}),
                ("GET", "/v1/ledger", None),
            ):
                r = client.request(method, path, json=body, headers=h)
                assert (r.status_code, error_code(r)) == (401, "unauthorized"), (h, path, r.text)
    after = ledger_facts(ledger)
    assert after.events == before.events


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts",
        "SELECT COUNT(*) AS n FROM users u JOIN prompts p ON u.user_id = p.user_id",
        "SELECT COUNT(*) AS n FROM users WHERE user_id IN (SELECT user_id FROM prompts)",
        "WITH p AS (SELECT user_id FROM prompts) SELECT COUNT(*) AS n FROM p",
        "SELECT COUNT(*) AS n FROM PROMPTS",
        'SELECT COUNT(*) AS n FROM "prompts"',
        "SELECT COUNT(*) AS n FROM main.prompts",
    ],
)
def test_an_analyst_cannot_reach_an_ungranted_table_by_any_path(
    am_server: Server, am_keys: dict[str, Key], sql: str
) -> None:
    ledger = am_server.policy.with_name("ledger.sqlite")
    before = ledger_facts(ledger)
    with am_server.client() as client:
        for route in ("/v1/query", "/v1/explain"):
            r = client.post(route, json={"sql": sql}, headers=am_keys["narrow"].headers())
            assert r.status_code in (403, 404), (route, r.text)
            assert error_code(r) in ("forbidden", "not_found"), r.text
    assert ledger_facts(ledger).events == before.events
