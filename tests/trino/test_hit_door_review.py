"""Review 5 of the Trino cache-hit door (proxy/trino/hits.py), in process: a repeat
answered before the route is the route's answer for *this* caller only. Another analyst
who cannot read the table gets the route's refusal, not the cached rows; one who can is
charged for their own release; every key form is authenticated as the route does it;
the schema header changes the answer; no refusal changes the ledger."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from proxy.server.app import create_app
from proxy.server.settings import Settings
from tests.server.conftest import KEYS, auth, write_policy
from tests.trino.test_trino_client import basic

PROMPTS = "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"
USERS = "SELECT plan, COUNT(*) AS n FROM users WHERE age > 33 GROUP BY plan"


def _events(client: TestClient) -> list[Any]:
    r = client.get("/v1/ledger", params={"limit": 1000}, headers=auth("adm"))
    r.raise_for_status()
    return list(r.json()["events"])


def _basic(text: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(text.encode()).decode()}


def test_a_repeat_is_answered_for_its_caller_only(tmp_path: Path, dataset: Path) -> None:
    app = create_app(Settings(policy=write_policy(tmp_path, dataset, cap=50.0), rate_limit="off"))
    with TestClient(app, base_url="https://127.0.0.1") as client:
        for sql in (PROMPTS, USERS, PROMPTS, USERS):  # charged, then replayed by the route
            r = client.post("/v1/statement", content=sql, headers=basic("ana"))
            assert r.json()["stats"]["state"] == "FINISHED", r.text
        door = app.state.trino.door
        routed: list[str] = []
        execute = door.execute

        def spy(text: str, *args: Any) -> Any:
            routed.append(text)
            return execute(text, *args)

        door.execute = spy
        hit = client.post("/v1/statement", content=PROMPTS, headers=auth("ana"))  # Bearer
        assert hit.headers["X-DPSQL-Cached"] == "true" and routed == []
        events = _events(client)

        # narrow may not read prompts: the route's refusal (not the rows ana holds)
        for headers in (basic("narrow"), auth("narrow")):
            refused = client.post("/v1/statement", content=PROMPTS, headers=headers)
            assert refused.status_code == 200
            doc = refused.json()
            assert doc["stats"]["state"] == "FAILED" and "data" not in doc, doc
            assert doc["error"]["errorName"] == "NOT_FOUND", doc["error"]
        assert routed == [PROMPTS, PROMPTS]
        assert _events(client) == events

        # narrow may read users: the route answers their first ask (the release is
        # shared, so it is a free replay recorded for narrow), the door the next
        mine = client.post("/v1/statement", content=USERS, headers=basic("narrow"))
        assert mine.headers["X-DPSQL-Cached"] == "true" and routed[-1] == USERS
        again = client.post("/v1/statement", content=USERS, headers=basic("narrow"))
        assert again.json()["data"] == mine.json()["data"] and len(routed) == 3
        events = _events(client)

        # every key form the route refuses is its 401, and nothing is recorded
        for headers in (
            {},
            {"Authorization": "Bearer not-a-key"},
            {"Authorization": f"Token {KEYS['ana'][1]}"},
            _basic("ana"),  # no password
            _basic("ana:"),
            {"Authorization": "Basic !!!"},
            _basic("ana:" + KEYS["ana"][1] + "x"),
            {"X-Trino-User": "ana"},
        ):
            refused = client.post("/v1/statement", content=PROMPTS, headers=headers)
            assert refused.status_code == 401, (headers, refused.status_code, refused.text)
            assert refused.json()["error"]["code"] == "unauthorized"
        # the schema header changes the meaning of the text: the route answers it
        other = client.post(
            "/v1/statement", content=PROMPTS, headers={**auth("ana"), "X-Trino-Schema": "x"}
        )
        assert other.json()["stats"]["state"] == "FAILED"
        assert routed[-1] == PROMPTS and len(routed) == 4
        assert _events(client) == events
