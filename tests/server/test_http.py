"""End to end against a real `dpsql serve` process, with httpx."""

from __future__ import annotations

import csv
import io
import json
import math
import threading

import httpx
import pyarrow as pa
import pytest

from accounting.ledger import epsilon_at
from accounting.rdp import ORDERS, ZERO, Curve, zcdp_curve
from proxy.errors import CODES
from tests.server.conftest import SQL, Server, auth

ARROW = "application/vnd.apache.arrow.stream"


def ask(c: httpx.Client, body: dict, who: str = "ana", **kwargs) -> httpx.Response:
    return c.post(
        "/v1/query", json=body, headers={**auth(who), **kwargs.pop("headers", {})}, **kwargs
    )


def events(c: httpx.Client, kind: str | None = None) -> list[dict]:
    out: list[dict] = []
    after = 0
    while True:
        r = c.get("/v1/ledger", params={"limit": 1000, "after_id": after}, headers=auth("adm"))
        assert r.status_code == 200, r.text
        body = r.json()
        out += body["events"]
        if body["next_after_id"] is None:
            break
        after = body["next_after_id"]
    return [e for e in out if kind is None or e["kind"] == kind]


def spent(c: httpx.Client, population: str = "users") -> dict:
    r = c.get("/v1/budget", headers=auth("adm"))
    assert r.status_code == 200
    return next(p for p in r.json()["populations"] if p["name"] == population)


def assert_error(r: httpx.Response, code: str) -> dict:
    assert r.status_code == CODES[code], r.text
    body = r.json()["error"]
    assert body["code"] == code
    assert body["message"] and isinstance(body["hint"], str)
    return body


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


# --- answers and their metadata ---------------------------------------------------------


def test_query_answers_with_privacy_metadata(c: httpx.Client) -> None:
    r = ask(c, {"sql": SQL, "epsilon": 0.41})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["columns"] == ["region", "n"]
    assert sorted(row[0] for row in body["rows"]) == ["east", "north", "south", "west"]
    assert all(isinstance(row[1], int) for row in body["rows"])
    p = body["privacy"]
    assert p["cached"] is False and 0 < p["epsilon"] <= 0.41 and p["epsilon"] == p["query_epsilon"]
    assert p["delta"] == pytest.approx(1e-9) and p["rho"] > 0
    assert p["mechanism"] == "gaussian" and p["populations"] == ["users"]
    assert p["partition"] == {"strategy": "public_domain", "groups": 4}
    noise = {col["name"]: col for col in p["columns"]}
    assert noise["region"]["noise_scale"] is None
    assert noise["n"]["half_width_95"] == pytest.approx(
        1.959964 * noise["n"]["noise_scale"], rel=1e-5
    )
    assert isinstance(p["charge_id"], int)
    assert p["remaining"]["users"] == pytest.approx(spent(c)["remaining"])
    assert body["next"] is None and body["page"] == {"offset": 0, "size": 4, "total_rows": 4}
    assert r.headers["X-DPSQL-Cached"] == "false"
    assert float(r.headers["X-DPSQL-Epsilon"]) == p["epsilon"]


def test_repeat_is_cached_and_free(c: httpx.Client) -> None:
    first = ask(c, {"sql": SQL, "epsilon": 0.42}).json()
    before = spent(c)
    charges = len(events(c, "charge"))
    again = ask(c, {"sql": SQL, "epsilon": 0.42}, who="bob").json()
    assert again["rows"] == first["rows"]
    assert again["privacy"]["cached"] is True
    assert again["privacy"]["epsilon"] == 0 and again["privacy"]["delta"] == 0
    assert again["privacy"]["charge_id"] == first["privacy"]["charge_id"]
    assert again["privacy"]["query_epsilon"] == first["privacy"]["epsilon"]
    assert spent(c)["epsilon_spent"] == before["epsilon_spent"]
    assert len(events(c, "charge")) == charges
    replays = events(c, "replay")
    assert replays[-1]["parent_id"] == first["privacy"]["charge_id"]
    assert replays[-1]["analyst"] == "bob"


def test_order_by_limit_variant_is_cached(c: httpx.Client) -> None:
    full = ask(c, {"sql": SQL, "epsilon": 0.43}).json()
    top = ask(c, {"sql": SQL + " ORDER BY n DESC, region LIMIT 2", "epsilon": 0.43}).json()
    assert top["privacy"]["cached"] is True and top["privacy"]["epsilon"] == 0
    expected = sorted(full["rows"], key=lambda row: (-row[1], row[0]))[:2]
    assert top["rows"] == expected


def test_budget_decreases_exactly_by_the_charges(c: httpx.Client) -> None:
    before = spent(c)
    old = {e["id"] for e in events(c, "charge")}
    rhos = []
    for k, rho in enumerate((0.0021, 0.0034)):
        r = ask(
            c,
            {
                "sql": f"SELECT plan, COUNT(*) AS n FROM users WHERE age > {20 + k} GROUP BY plan",
                "rho": rho,
            },
        )
        assert r.status_code == 200, r.text
        assert r.json()["privacy"]["rho"] == pytest.approx(rho, rel=1e-12)
        rhos.append(rho)
    after = spent(c)
    new = [e for e in events(c, "charge") if e["id"] not in old]
    assert len(new) == 2
    # Each charge is the zCDP curve of its ρ (integer counts: exact discrete Gaussian).
    for e, rho in zip(new, rhos, strict=True):
        assert e["rdp"] == pytest.approx(list(zcdp_curve(rho).values), rel=1e-9)
    # The spend composes every cost event of the population; ε is recomputed from it.
    total = ZERO
    dx = 0.0
    for e in events(c):
        if e["kind"] in ("charge", "external"):
            total = total + Curve(tuple(math.inf if v is None else v for v in e["rdp"]))
            dx += e["delta_extra"]
    assert after["epsilon_spent"] == pytest.approx(epsilon_at(total, 1e-6, dx), rel=1e-12)
    assert after["epsilon_spent"] > before["epsilon_spent"]
    assert after["remaining"] == pytest.approx(after["epsilon_cap"] - after["epsilon_spent"])


# --- refusals ----------------------------------------------------------------------------


def test_exhaustion_is_402_with_numbers_and_charges_nothing(c: httpx.Client) -> None:
    cached = ask(c, {"sql": SQL, "epsilon": 0.44})
    assert cached.status_code == 200
    now = spent(c)
    new_cap = round(now["epsilon_spent"] + 0.05, 6)
    r = c.put(
        "/v1/populations/users/cap",
        json={"epsilon_cap": new_cap, "reason": "test"},
        headers=auth("adm"),
    )
    assert r.status_code == 200, r.text
    assert r.json()["epsilon_cap"] == new_cap
    charges = len(events(c, "charge"))
    refused = ask(c, {"sql": "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan", "epsilon": 0.5})
    err = assert_error(refused, "budget_exhausted")
    assert err["population"] == "users"
    assert err["cap"] == pytest.approx(new_cap)
    assert err["spent"] == pytest.approx(now["epsilon_spent"])
    assert err["needed"] > 0.05
    assert len(events(c, "charge")) == charges
    # A cached answer is still free to read, exhausted or not.
    assert ask(c, {"sql": SQL, "epsilon": 0.44}).json()["privacy"]["cached"] is True
    caps = [e for e in events(c, "cap_change")]
    assert (
        caps[-1]["cap"] == new_cap and caps[-1]["note"] == "test" and caps[-1]["analyst"] == "adm"
    )
    r = c.put(
        "/v1/populations/users/cap",
        json={"epsilon_cap": 4.0, "reason": "restore"},
        headers=auth("adm"),
    )
    assert r.status_code == 200
    assert (
        ask(
            c, {"sql": "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan", "epsilon": 0.5}
        ).status_code
        == 200
    )


def test_401_without_a_valid_key(c: httpx.Client) -> None:
    for headers in (
        {},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Bearer"},
    ):
        r = c.post("/v1/query", json={"sql": SQL}, headers=headers)
        assert_error(r, "unauthorized")
        assert r.headers["WWW-Authenticate"] == "Bearer"
    assert_error(c.get("/v1/budget"), "unauthorized")
    assert_error(c.get("/v1/ledger"), "unauthorized")


def test_403_for_wrong_role_or_table(c: httpx.Client) -> None:
    for method, path, body in (
        ("GET", "/v1/ledger", None),
        ("POST", "/v1/ledger/verify", None),
        ("POST", "/v1/charges", {"population": "users", "rho": 0.001, "note": "x"}),
        ("PUT", "/v1/populations/users/cap", {"epsilon_cap": 100, "reason": "x"}),
    ):
        r = c.request(method, path, json=body, headers=auth("ana"))
        assert_error(r, "forbidden")
    r = ask(c, {"sql": "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"}, who="narrow")
    err = assert_error(r, "not_found")
    # Exactly the refusal of a table that does not exist (issue #19 §3).
    other = assert_error(
        ask(c, {"sql": "SELECT COUNT(*) AS n FROM nosuch"}, who="narrow"), "not_found"
    )
    assert err["message"].replace("prompts", "nosuch") == other["message"]
    assert err["hint"] == other["hint"]
    tables = {t["name"] for t in c.get("/v1/schema", headers=auth("narrow")).json()["tables"]}
    assert tables == {"users", "regions"}
    assert ask(c, {"sql": SQL, "epsilon": 0.42}, who="narrow").status_code == 200


def test_sql_errors_have_the_one_shape(c: httpx.Client) -> None:
    err = assert_error(ask(c, {"sql": "SELECT region, COUNT(* FROM users"}), "parse_error")
    assert set(err["position"]) >= {"line", "column"}
    assert_error(ask(c, {"sql": "SELECT user_id, age FROM users"}), "unsupported_sql")
    assert_error(ask(c, {"sql": "SELECT COUNT(*) FROM nowhere"}), "not_found")
    assert_error(ask(c, {"sql": SQL, "epsilon": 0.3, "rho": 0.1}), "bad_request")
    assert_error(ask(c, {"sql": SQL, "epsilon": -1}), "validation_error")
    assert_error(ask(c, {"sql": SQL, "bogus": 1}), "validation_error")
    assert_error(
        c.post(
            "/v1/query", content=b"{", headers={**auth("ana"), "Content-Type": "application/json"}
        ),
        "validation_error",
    )
    assert_error(c.get("/v1/nowhere"), "not_found")
    r = c.get("/v1/query", headers=auth("ana"))
    assert r.status_code == 405 and r.json()["error"]["code"] == "bad_request"


def test_size_limits_are_413(c: httpx.Client) -> None:
    err = assert_error(
        ask(c, {"sql": "SELECT COUNT(*) AS n FROM users WHERE " + " OR ".join(["age = 30"] * 400)}),
        "too_large",
    )
    assert "limit is 3000" in err["message"]
    big = json.dumps({"sql": "x" * 300_000}).encode()
    assert_error(
        c.post(
            "/v1/query", content=big, headers={**auth("ana"), "Content-Type": "application/json"}
        ),
        "too_large",
    )

    def chunks():
        for _ in range(300):
            yield b" " * 1024

    r = c.post(
        "/v1/query", content=chunks(), headers={**auth("ana"), "Content-Type": "application/json"}
    )
    assert_error(r, "too_large")


# --- formats and paging ------------------------------------------------------------------

FORMAT_SQL = (
    "SELECT model, COUNT(*) AS n, AVG(latency_ms) AS ms, SUM(tokens_in) AS t "
    "FROM prompts GROUP BY model ORDER BY model"
)


def test_csv_text_that_a_spreadsheet_would_run_is_written_as_text(c: httpx.Client) -> None:
    """Text starting with = + - @ TAB or CR gets a leading apostrophe in CSV (a released
    key is text people wrote); numbers keep their sign, and JSON keeps the text as is."""
    sql = (
        "SELECT '=HYPERLINK(1)' AS \"=a\", '@SUM(1)' AS b, '+1' AS c, '-x' AS d, "
        "'\tt' AS e, 'plain' AS f, -3 AS g, -1.5 AS h"
    )
    js = ask(c, {"sql": sql})
    assert js.status_code == 200, js.text
    assert js.json()["rows"] == [["=HYPERLINK(1)", "@SUM(1)", "+1", "-x", "\tt", "plain", -3, -1.5]]
    r = ask(c, {"sql": sql}, params={"format": "csv"})
    assert r.status_code == 200, r.text
    header, row = list(csv.reader(io.StringIO(r.text)))
    assert header[:8] == ["'=a", "b", "c", "d", "e", "f", "g", "h"]  # then any _ci95 columns
    assert row[:8] == ["'=HYPERLINK(1)", "'@SUM(1)", "'+1", "'-x", "'\tt", "plain", "-3", "-1.5"]


def test_csv_and_arrow_parse_back_to_the_json_values(c: httpx.Client) -> None:
    body = {"sql": FORMAT_SQL, "epsilon": 0.45}
    js = ask(c, body).json()
    r_csv = ask(c, body, params={"format": "csv"})
    assert r_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(r_csv.text)))
    # Values first, then a "<name>_ci95" column per column with intervals: COUNT and SUM
    # always; the AVG unless every one of its noisy counts is within its noise of 0 (at
    # this data size about one run in three: it has no interval then, with a warning).
    cols = js["columns"]
    with_width = [i for i in range(len(cols)) if any(w[i] is not None for w in js["intervals_95"])]
    assert {1, 3} <= set(with_width) <= {1, 2, 3}
    assert rows[0] == [*cols, *(f"{cols[i]}_ci95" for i in with_width)]
    parsed = [[m, int(n), float(ms), int(t)] for m, n, ms, t, *_ in rows[1:]]
    assert parsed == js["rows"]
    widths = [[float(w) if w else None for w in r[4:]] for r in rows[1:]]
    assert widths == [[w[i] for i in with_width] for w in js["intervals_95"]]
    privacy = json.loads(r_csv.headers["X-DPSQL-Privacy"])
    assert privacy["cached"] is True and privacy["charge_id"] == js["privacy"]["charge_id"]
    assert r_csv.headers["X-DPSQL-Cached"] == "true" and r_csv.headers["X-DPSQL-Epsilon"] == "0.0"

    r_arrow = ask(c, body, headers={"Accept": ARROW})
    assert r_arrow.headers["content-type"] == ARROW
    table = pa.ipc.open_stream(r_arrow.content).read_all()
    assert table.column_names == js["columns"]
    assert [list(row.values()) for row in table.to_pylist()] == js["rows"]
    meta = json.loads(table.schema.metadata[b"dpsql.privacy"])
    assert meta["charge_id"] == js["privacy"]["charge_id"]
    objects = ask(c, body, params={"shape": "objects"}).json()["rows"]
    assert objects == [dict(zip(js["columns"], row, strict=True)) for row in js["rows"]]


def test_paging_replays_the_stored_release(c: httpx.Client) -> None:
    sql = (
        "SELECT region, plan, COUNT(*) AS n, AVG(age) AS a FROM users "
        "GROUP BY region, plan ORDER BY region, plan"
    )
    full = ask(c, {"sql": sql, "epsilon": 0.46}).json()
    assert len(full["rows"]) == 12 and full["columns"] == ["region", "plan", "n", "a"]
    assert len(full["intervals_95"]) == 12
    assert all(w[0] is None and w[2] > 0 for w in full["intervals_95"])
    # An AVG over a noisy count within its own noise of 0 has no interval, and says so.
    assert all(w[3] is None or w[3] > 0 for w in full["intervals_95"])
    if any(w[3] is None for w in full["intervals_95"]):
        assert any("'a'" in w and "unreliable" in w for w in full["warnings"])
    charges = len(events(c, "charge"))
    first = ask(c, {"sql": sql, "epsilon": 0.46}, params={"page_size": 5}).json()
    pages = [first]
    while pages[-1]["next"]:
        r = c.get(f"/v1/pages/{pages[-1]['next']}", headers=auth("ana"))
        assert r.status_code == 200, r.text
        pages.append(r.json())
    assert [len(p["rows"]) for p in pages] == [5, 5, 2]
    assert [p["page"]["offset"] for p in pages] == [0, 5, 10]
    assert [row for p in pages for row in p["rows"]] == full["rows"]
    assert [w for p in pages for w in p["intervals_95"]] == full["intervals_95"]
    assert all(p["columns"] == full["columns"] for p in pages)
    assert all(p["privacy"]["epsilon"] == 0 and p["privacy"]["cached"] for p in pages)
    assert len(events(c, "charge")) == charges
    # CSV pages carry the cursor in headers.
    r = ask(c, {"sql": sql, "epsilon": 0.46}, params={"page_size": 10, "format": "csv"})
    cursor = r.headers["X-DPSQL-Next"]
    assert r.headers["Link"] == f'</v1/pages/{cursor}>; rel="next"'
    tail = c.get(f"/v1/pages/{cursor}", params={"format": "csv"}, headers=auth("ana"))
    tail_rows = list(csv.reader(io.StringIO(tail.text)))
    assert tail_rows[0][: len(full["columns"])] == full["columns"] and len(tail_rows) == 1 + 2
    assert all(name.endswith("_ci95") for name in tail_rows[0][len(full["columns"]) :])
    assert "X-DPSQL-Next" not in tail.headers
    # A cursor is bound to its key and cannot be forged.
    assert_error(c.get(f"/v1/pages/{cursor}", headers=auth("bob")), "not_found")
    payload, _, tag = cursor.partition(".")
    forged = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB") + "." + tag
    assert_error(c.get(f"/v1/pages/{forged}", headers=auth("ana")), "not_found")
    assert_error(c.get("/v1/pages/garbage", headers=auth("ana")), "not_found")


def test_idempotency_key_returns_the_first_answer_uncharged(c: httpx.Client) -> None:
    body = {
        "sql": "SELECT plan, COUNT(*) AS n FROM users WHERE age < 60 GROUP BY plan",
        "epsilon": 0.47,
    }
    charges = len(events(c, "charge"))
    key = {"Idempotency-Key": "retry-me-1"}
    results: list[httpx.Response] = []

    def send() -> None:
        with httpx.Client(base_url=str(c.base_url), timeout=60) as own:
            results.append(ask(own, body, headers=key))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200] * 4
    assert len({r.content for r in results}) == 1  # byte-identical, "cached": false in each
    assert json.loads(results[0].content)["privacy"]["cached"] is False
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in results) == 3
    assert len(events(c, "charge")) == charges + 1
    later = ask(c, body, headers=key)
    assert later.content == results[0].content
    assert_error(ask(c, {**body, "epsilon": 0.48}, headers=key), "bad_request")
    # Keys are per analyst: bob's same key is his own (a cache hit for him).
    assert ask(c, body, who="bob", headers=key).json()["privacy"]["cached"] is True


# --- other routes --------------------------------------------------------------------------


def test_explain_is_a_dry_run(c: httpx.Client) -> None:
    charges = len(events(c))
    body = {"sql": "SELECT plan, AVG(age) AS a FROM users GROUP BY plan", "epsilon": 0.49}
    ex = c.post("/v1/explain", json=body, headers=auth("ana")).json()
    assert ex["cache"] == "miss" and 0 < ex["cost"]["epsilon"] <= 0.49
    assert ex["charges"] == ["users"] and ex["public_domain_size"] == 3
    assert {s["kind"] for s in ex["statistics"]} >= {"count"}
    assert len(events(c)) == charges
    assert ask(c, body).status_code == 200
    assert c.post("/v1/explain", json=body, headers=auth("ana")).json()["cache"] == "hit"


def test_schema_lists_bounds_and_domains(c: httpx.Client) -> None:
    tables = {t["name"]: t for t in c.get("/v1/schema", headers=auth("ana")).json()["tables"]}
    assert set(tables) == {"users", "prompts", "tickets", "regions"}
    cols = {col["name"]: col for col in tables["users"]["columns"]}
    assert cols["age"]["lower"] == 18 and cols["age"]["upper"] == 100
    assert cols["region"]["values"] == ["north", "south", "east", "west"]
    assert cols["user_id"]["unit"] is True and tables["regions"]["public"] is True
    assert tables["prompts"]["max_rows_per_group"] == 10


def test_external_curve_charge_and_verify(c: httpx.Client) -> None:
    orders = c.get("/v1/ledger", params={"limit": 1}, headers=auth("adm")).json()["orders"]
    assert orders == list(ORDERS)
    before = spent(c)
    curve = zcdp_curve(0.0015)
    r = c.post(
        "/v1/charges",
        headers=auth("adm"),
        json={
            "population": "users",
            "note": "dp-sgd run 7",
            "curve": {"orders": orders, "values": list(curve.values)},
        },
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["epsilon"] == pytest.approx(epsilon_at(curve, 1e-6, 0.0), rel=1e-12)
    ext = events(c, "external")[-1]
    assert (
        ext["id"] == out["event_id"] and ext["note"] == "dp-sgd run 7" and ext["analyst"] == "adm"
    )
    assert spent(c)["epsilon_spent"] > before["epsilon_spent"]
    assert (
        c.post(
            "/v1/charges",
            headers=auth("adm"),
            json={"population": "users/region=north", "note": "per-region job", "rho": 0.001},
        ).status_code
        == 200
    )
    budget = spent(c)
    assert [p["name"] for p in budget["partitions"]] == ["users/region=north"]
    assert budget["remaining"] == pytest.approx(budget["partitions"][0]["remaining"])
    assert_error(
        c.post(
            "/v1/charges",
            headers=auth("adm"),
            json={"population": "users", "note": "x", "curve": {"orders": [2.0], "values": [0.1]}},
        ),
        "bad_request",
    )
    assert_error(
        c.post(
            "/v1/charges",
            headers=auth("adm"),
            json={
                "population": "users",
                "note": "x",
                "rho": 0.1,
                "curve": {"orders": orders, "values": list(curve.values)},
            },
        ),
        "bad_request",
    )
    assert_error(
        c.post(
            "/v1/charges",
            headers=auth("adm"),
            json={"population": "nobody", "note": "x", "rho": 0.1},
        ),
        "not_found",
    )
    err = assert_error(
        c.post(
            "/v1/charges",
            headers=auth("adm"),
            json={"population": "users", "note": "too much", "rho": 50.0},
        ),
        "budget_exhausted",
    )
    assert err["cap"] == 4.0
    v = c.post("/v1/ledger/verify", headers=auth("adm"))
    assert v.status_code == 200 and v.json()["ok"] is True and v.json()["problems"] == []


def test_health_and_metrics(c: httpx.Client) -> None:
    assert c.get("/healthz").json() == {"status": "ok"}
    ask(c, {"sql": SQL, "epsilon": 0.41})
    # ε charged per population says how much each is studied: admins only (#19 §3).
    assert_error(c.get("/metrics"), "unauthorized")
    assert_error(c.get("/metrics", headers=auth("ana")), "forbidden")
    text = c.get("/metrics", headers=auth("adm")).text
    assert 'dpsql_queries_total{outcome="cached"}' in text
    assert 'dpsql_queries_total{outcome="charged"}' in text
    assert 'dpsql_refusals_total{code="unauthorized"}' in text
    assert 'dpsql_query_epsilon_total{population="users"}' in text
    assert 'dpsql_population_epsilon_spent{population="users"}' in text
    assert "dpsql_cache_hits_total" in text
    assert 'dpsql_request_seconds_bucket{le="0.005",method="POST",route="/v1/query"}' in text


def test_logs_are_json_without_sql_or_values(server: Server, c: httpx.Client) -> None:
    r = ask(
        c, {"sql": "SELECT plan, COUNT(*) AS secret_alias FROM users GROUP BY plan", "epsilon": 0.5}
    )
    assert r.status_code == 200
    text = server.log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    requests = [line for line in lines if line["event"] == "request"]
    assert len(requests) > 20
    assert "secret_alias" not in text and "GROUP BY" not in text and "key-ana" not in text
    allowed = {
        "ts",
        "level",
        "logger",
        "event",
        "method",
        "route",
        "status",
        "ms",
        "analyst",
        "code",
        "query",
        "cached",
        "epsilon",
        "page",
        "event_id",
        "idempotent_replay",
    }
    assert set().union(*(line.keys() for line in requests)) <= allowed
