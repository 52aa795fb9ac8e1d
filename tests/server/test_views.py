"""GET /v1/history and GET /v1/usage (issue 17) against a real `dpsql serve`: a key is
required; an analyst sees only its own history and sums everybody else up; an admin sees
every analyst, the cap changes and the external charges; the figures agree with
/v1/budget and /v1/ledger; and reading them never changes the ledger."""

from __future__ import annotations

import httpx
import pytest

from accounting.ledger import epsilon_at
from accounting.rdp import Curve
from tests.server.conftest import Server, auth
from tests.server.test_http import assert_error, events

OTHERS = "(other analysts)"
EXTERNAL = "(external charges)"


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


def ask(c: httpx.Client, who: str, sql: str, epsilon: float = 0.2) -> dict:
    r = c.post("/v1/query", json={"sql": sql, "epsilon": epsilon}, headers=auth(who))
    assert r.status_code == 200, r.text
    body: dict = r.json()
    return body


def get(c: httpx.Client, path: str, who: str, **params: object) -> dict:
    r = c.get(path, params=params, headers=auth(who))
    assert r.status_code == 200, r.text
    body: dict = r.json()
    return body


@pytest.fixture(scope="module")
def asked(c: httpx.Client) -> dict[str, dict]:
    """ana pays for two releases and asks one again; bob replays one of ana's and pays
    for a partition query of his own; the admin records an external charge."""
    out = {
        "ana_a": ask(c, "ana", "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"),
        "ana_b": ask(c, "ana", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"),
        "ana_a2": ask(c, "ana", "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"),
        "bob_a": ask(c, "bob", "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan ORDER BY n"),
        "bob_c": ask(
            c, "bob", "SELECT plan, COUNT(*) AS n FROM users WHERE region = 'north' GROUP BY plan"
        ),
    }
    r = c.post(
        "/v1/charges",
        json={"population": "users", "note": "views test", "rho": 0.001},
        headers=auth("adm"),
    )
    assert r.status_code == 200, r.text
    return out


def test_a_key_is_required(c: httpx.Client) -> None:
    for path in ("/v1/history", "/v1/usage"):
        assert_error(c.get(path), "unauthorized")
        assert_error(c.get(path, headers={"Authorization": "Bearer not-a-key"}), "unauthorized")
    assert_error(c.get("/v1/history", params={"limit": 0}, headers=auth("ana")), "validation_error")
    assert_error(c.get("/v1/usage", params={"top": 1000}, headers=auth("ana")), "validation_error")


def test_history_is_the_callers_own(c: httpx.Client, asked: dict[str, dict]) -> None:
    charges = {e["id"]: e for e in events(c, "charge")}
    mine = get(c, "/v1/history", "ana")
    assert mine["analyst"] == "ana"
    by_charge = {q["charge_id"]: q for q in mine["queries"]}
    a, b = asked["ana_a"]["privacy"]["charge_id"], asked["ana_b"]["privacy"]["charge_id"]
    assert set(by_charge) == {a, b}
    assert [q["charge_id"] for q in mine["queries"]] == [a, b]  # most recently asked first
    assert by_charge[a]["asks"] == 2 and by_charge[b]["asks"] == 1
    assert by_charge[a]["cached"] and by_charge[b]["cached"]
    assert by_charge[a]["epsilon"] == pytest.approx(charges[a]["epsilon"])
    assert by_charge[a]["fingerprint"] == charges[a]["fingerprint"]
    assert by_charge[a]["populations"] == ["users"]
    # the analyst's own queries; dpsql's own releases would name themselves here
    assert by_charge[a]["automatic"] is None and by_charge[b]["automatic"] is None

    # bob's replay of ana's release is free for bob; his partition query is his own.
    his = {q["charge_id"]: q for q in get(c, "/v1/history", "bob")["queries"]}
    c_id = asked["bob_c"]["privacy"]["charge_id"]
    assert set(his) == {a, c_id}
    assert his[a]["epsilon"] == 0.0 and his[a]["asks"] == 1
    assert his[c_id]["populations"] == ["users/region=north"]
    assert get(c, "/v1/history", "adm")["queries"] == []
    assert len(get(c, "/v1/history", "ana", limit=1)["queries"]) == 1


def test_an_analyst_sees_its_own_rows_and_one_sum_for_the_others(
    c: httpx.Client, asked: dict[str, dict]
) -> None:
    usage = get(c, "/v1/usage", "ana")
    assert (usage["viewer"], usage["role"], usage["populations"]) == ("ana", "analyst", ["users"])
    names = {row["analyst"] for row in usage["consumers"]}
    assert names == {"ana", OTHERS, EXTERNAL}
    others = next(row for row in usage["consumers"] if row["analyst"] == OTHERS)
    assert others["fingerprint"] == "" and others["charges"] >= 1 and others["replays"] >= 1
    assert not usage["cap_changes"] and not usage["externals"]
    assert usage["own_cache"] == {"charges": 2, "replays": 1, "hit_rate": pytest.approx(1 / 3)}
    assert usage["cache"]["replays"] >= 2 and 0 < usage["cache"]["hit_rate"] < 1


def test_an_admin_sees_everyone_and_the_admin_events(
    c: httpx.Client, asked: dict[str, dict]
) -> None:
    usage = get(c, "/v1/usage", "adm")
    assert usage["role"] == "admin"
    rows = {(row["analyst"], row["kind"]) for row in usage["consumers"]}
    assert {("ana", "query"), ("bob", "query"), ("adm", "external")} <= rows
    assert OTHERS not in {row["analyst"] for row in usage["consumers"]}
    assert usage["cap_changes"][0]["kind"] == "register"
    assert usage["cap_changes"][0]["cap"] == pytest.approx(4.0)
    external = usage["externals"][-1]
    assert (external["note"], external["analyst"]) == ("views test", "adm")
    ledger_event = next(e for e in events(c, "external") if e["id"] == external["id"])
    assert external["epsilon"] == pytest.approx(ledger_event["epsilon"])
    # Consumers are ordered by ε charged, largest first.
    eps = [row["epsilon"] for row in usage["consumers"]]
    assert eps == sorted(eps, reverse=True)


def test_the_series_ends_at_what_the_budget_says(c: httpx.Client, asked: dict[str, dict]) -> None:
    usage = get(c, "/v1/usage", "adm")
    series = {s["population"]: s for s in usage["series"]}
    budget = get(c, "/v1/budget", "adm")["populations"][0]
    assert series["users"]["epsilon"][-1]["value"] == pytest.approx(budget["epsilon_spent"])
    north = next(p for p in budget["partitions"] if p["name"] == "users/region=north")
    assert series["users/region=north"]["epsilon"][-1]["value"] == pytest.approx(
        north["epsilon_spent"]
    )
    assert series["users"]["caps"][0]["value"] == pytest.approx(4.0)
    values = [p["value"] for p in series["users"]["epsilon"]]
    # One point per cost event reaching the root's persons (a partition's too: its
    # persons are the root's, and the root's spent is theirs when they spent the most).
    assert values == sorted(values) and len(values) == len(
        [e for e in events(c) if e["kind"] in ("charge", "external")]
    )
    # The first point is the first charge alone, as the ledger states it.
    first = next(e for e in events(c) if e["kind"] == "charge" and e["populations"] == ["users"])
    orders = c.get("/v1/ledger", params={"limit": 1}, headers=auth("adm")).json()["orders"]
    assert len(orders) == len(first["rdp"])
    alone = epsilon_at(Curve(tuple(first["rdp"])), budget["delta"], first["delta_extra"])
    assert values[0] == pytest.approx(alone)


def test_reading_the_views_changes_nothing(c: httpx.Client, asked: dict[str, dict]) -> None:
    before = events(c)
    for who in ("ana", "bob", "narrow", "adm"):
        get(c, "/v1/history", who)
        get(c, "/v1/usage", who)
    assert events(c) == before
