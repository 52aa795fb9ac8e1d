"""The cache-hit door of POST /v1/query (issue 18, proxy/server/hits.py): a repeat hit
answered before the router gets the same body, headers, ledger event, metrics and log
line as the route; first receipts, misses and refusals go to the route unchanged, and a
request is counted once by the rate limiter whichever way it goes."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from proxy.server import Settings, create_app
from tests.server.conftest import Server, auth, write_policy

DOOR_SQL = "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"


def _replays(c: httpx.Client) -> list[dict]:
    r = c.get("/v1/ledger", params={"limit": 1000}, headers=auth("adm"))
    assert r.status_code == 200, r.text
    return [e for e in r.json()["events"] if e["kind"] == "replay"]


def _dpsql_headers(r: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in r.headers.items() if k.lower().startswith("x-dpsql")}


def _metric(c: httpx.Client, name: str) -> float:
    text = c.get("/metrics", headers=auth("adm")).text
    line = next(x for x in text.splitlines() if x.startswith(name + " "))
    return float(line.split()[1])


def test_a_repeat_hit_through_the_door_is_the_routes_answer(server: Server) -> None:
    body = {"sql": DOOR_SQL, "epsilon": 0.37}
    with server.client() as c:
        paid = c.post("/v1/query", json=body, headers=auth("ana"))
        assert paid.status_code == 200 and paid.json()["privacy"]["cached"] is False
        before = len(_replays(c))
        hits_before = _metric(c, "dpsql_cache_hits_total")
        # ?format=json makes the route answer; without it, the door does.
        routed = c.post("/v1/query?format=json", json=body, headers=auth("ana"))
        door = c.post("/v1/query", json=body, headers=auth("ana"))
        for r in (routed, door):
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert door.json() == routed.json()
        assert door.json()["privacy"]["cached"] is True
        assert door.json()["privacy"]["charge_id"] == paid.json()["privacy"]["charge_id"]
        assert _dpsql_headers(door) == _dpsql_headers(routed)
        assert door.headers.get("x-content-type-options") == "nosniff"  # SecurityHeaders
        # Each answer is a replay of ana's charge, in the ledger when the answer is out.
        new = _replays(c)[before:]
        assert [(e["analyst"], e["parent_id"]) for e in new] == [
            ("ana", paid.json()["privacy"]["charge_id"])
        ] * 2
        assert _metric(c, "dpsql_cache_hits_total") == hits_before + 2
    # Both requests logged under the route's path, as cached answers.
    lines = [json.loads(x) for x in server.log.read_text().splitlines() if x.startswith("{")]
    hits = [
        x
        for x in lines
        if x.get("event") == "request" and x.get("cached") is True and x.get("analyst") == "ana"
    ]
    assert len(hits) >= 2 and {x["route"] for x in hits[-2:]} == {"/v1/query"}


def test_first_receipts_and_refusals_go_to_the_route(server: Server) -> None:
    body = {"sql": DOOR_SQL, "epsilon": 0.41}
    with server.client() as c:
        paid = c.post("/v1/query", json=body, headers=auth("ana")).json()["privacy"]
        before = len(_replays(c))
        # bob has never received this release: the door declines, the route answers
        # and records bob's first receipt.
        first = c.post("/v1/query", json=body, headers=auth("bob"))
        assert first.status_code == 200 and first.json()["privacy"]["cached"] is True
        assert [(e["analyst"], e["parent_id"]) for e in _replays(c)[before:]] == [
            ("bob", paid["charge_id"])
        ]
        # Refusals keep the route's shape, door or not.
        bad_key = c.post("/v1/query", json=body, headers={"Authorization": "Bearer nope"})
        assert bad_key.status_code == 401 and bad_key.json()["error"]["code"] == "unauthorized"
        assert bad_key.headers["www-authenticate"] == "Bearer"
        invalid = c.post("/v1/query", json={**body, "epsilon": -1}, headers=auth("ana"))
        assert invalid.status_code == 422
        assert invalid.json()["error"]["code"] == "validation_error"


def test_the_rate_limit_counts_each_request_once(tmp_path: Path, dataset: Path) -> None:
    # A day's window: the limiter's sliding-window counter weighs the previous window's
    # hits, so a test that straddled a minute boundary could be let one request more.
    settings = Settings(policy=write_policy(tmp_path, dataset), rate_limit="4/day")
    body = {"sql": DOOR_SQL, "epsilon": 0.5}
    app = create_app(settings)
    with TestClient(app) as client:
        engine = app.state.ctx.engine
        runs: list[str] = []
        run = engine.run

        def counted(request):  # type: ignore[no-untyped-def]
            runs.append(request.analyst)
            return run(request)

        engine.run = counted  # the real engine still answers: this only counts
        # A miss (door declines, route answers), bob's first receipt (the same), then
        # two repeats the door answers: four requests, each counted once.
        codes = [client.post("/v1/query", json=body, headers=auth("ana")).status_code]
        assert client.post("/v1/query", json=body, headers=auth("bob")).status_code == 200
        codes += [client.post("/v1/query", json=body, headers=auth("ana")).status_code]
        codes += [client.post("/v1/query", json=body, headers=auth("ana")).status_code]
        codes += [client.post("/v1/query", json=body, headers=auth("ana")).status_code]
        codes += [client.post("/v1/query", json=body, headers=auth("ana")).status_code]
        assert codes == [200, 200, 200, 200, 429]
        # The route ran the engine for the miss and bob's first receipt only: the door
        # answered ana's repeats.
        assert runs == ["ana", "bob"]
        refused = client.post("/v1/query", json=body, headers=auth("ana"))
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 86_400


def test_a_kept_repeat_shows_the_budget_after_a_later_charge(server: Server) -> None:
    body = {"sql": DOOR_SQL, "epsilon": 0.29}
    with server.client() as c:
        c.post("/v1/query", json=body, headers=auth("ana"))
        first = c.post("/v1/query", json=body, headers=auth("ana")).json()["privacy"]
        again = c.post("/v1/query", json=body, headers=auth("ana")).json()["privacy"]
        assert first["cached"] and again["remaining"] == first["remaining"]
        # Another charge on the same population moves what every answer shows.
        other = {"sql": DOOR_SQL.replace("plan", "region"), "epsilon": 0.31}
        assert c.post("/v1/query", json=other, headers=auth("bob")).status_code == 200
        after = c.post("/v1/query", json=body, headers=auth("ana")).json()["privacy"]
        assert after["cached"] and after["charge_id"] == first["charge_id"]
        assert set(after["remaining"]) == set(first["remaining"])
        assert all(after["remaining"][p] < first["remaining"][p] for p in first["remaining"])


def test_queries_sharing_a_release_keep_their_own_answers_at_the_door(server: Server) -> None:
    """Review 3: two outer layers of one release (another ORDER BY and LIMIT), each a
    repeat the door answers, each get the route's own answer for their text."""
    top = {"sql": DOOR_SQL + " ORDER BY n DESC LIMIT 1", "epsilon": 0.43}
    every = {"sql": DOOR_SQL + " ORDER BY plan", "epsilon": 0.43}
    with server.client() as c:
        for body in (top, every, top, every):  # paid once, then held by ana
            assert c.post("/v1/query", json=body, headers=auth("ana")).status_code == 200
        for body in (top, every):
            door = c.post("/v1/query", json=body, headers=auth("ana")).json()
            routed = c.post("/v1/query?format=json", json=body, headers=auth("ana")).json()
            assert door["privacy"]["cached"] and door == routed
        assert len(c.post("/v1/query", json=top, headers=auth("ana")).json()["rows"]) == 1


def test_json_nested_past_pythons_limit_is_a_refusal_not_a_500(server: Server) -> None:
    """A review (2026-12-04): a body 100,000 arrays deep, within the body's size cap,
    raised RecursionError in the door's parse and came back as a 500 without the
    security headers, with or without a valid key. The route refuses it instead."""
    body = '{"sql": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with server.client() as c:
        for key in ({"Authorization": "Bearer not-a-key"}, auth("ana")):
            r = c.post(
                "/v1/query",
                content=body,
                headers={**key, "Content-Type": "application/json"},
            )
            assert 400 <= r.status_code < 500, r.text
            assert r.json()["error"]["code"] in ("bad_request", "unauthorized")
            assert r.headers.get("x-content-type-options") == "nosniff"


def test_an_internal_error_carries_the_security_headers(tmp_path: Path, dataset: Path) -> None:
    """What escapes a middleware is answered from outside them all, SecurityHeaders
    included: the internal-error response sets the headers itself."""
    from proxy.server import hits

    app = create_app(Settings(policy=write_policy(tmp_path, dataset)))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as c:
        original = hits.CacheHits._answer
        hits.CacheHits._answer = broken  # type: ignore[method-assign, assignment]
        try:
            r = c.post("/v1/query", json={"sql": DOOR_SQL}, headers=auth("ana"))
        finally:
            hits.CacheHits._answer = original  # type: ignore[method-assign]
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal"
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert "default-src 'none'" in r.headers.get("content-security-policy", "")


def test_an_internal_error_logs_where_it_was_raised_and_not_its_message(
    tmp_path: Path, dataset: Path
) -> None:
    """The operator's log line names the code that failed (file, line, function), so an
    internal error can be found; the exception's message, which could quote data, stays
    out."""
    import io
    import json
    import logging

    from proxy.server import hits
    from proxy.server.logs import LOGGER, JSONFormatter

    app = create_app(Settings(policy=write_policy(tmp_path, dataset)))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a value that must not reach the log: 4242")

    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JSONFormatter())
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    original = hits.CacheHits._answer
    hits.CacheHits._answer = broken  # type: ignore[method-assign, assignment]
    try:
        with TestClient(app, raise_server_exceptions=False) as c:
            r = c.post("/v1/query", json={"sql": DOOR_SQL}, headers=auth("ana"))
    finally:
        hits.CacheHits._answer = original  # type: ignore[method-assign]
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert r.status_code == 500
    events = [json.loads(line) for line in lines.getvalue().splitlines()]
    internal = [e for e in events if e["event"] == "internal_error"]
    assert len(internal) == 1, events
    assert internal[0]["exception"] == "RuntimeError"
    assert internal[0]["at"][-1].startswith("test_cache_hit_door.py:")
    assert internal[0]["at"][-1].endswith(" in broken")
    assert "4242" not in lines.getvalue()
