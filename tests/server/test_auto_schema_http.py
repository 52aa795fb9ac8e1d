"""Issue #12 §3: "auto" bounds as a real server and the CLI show them — /v1/schema and
`dpsql schema` say "auto" with the limit (not null), /v1/explain lists the release the
first query pays for and then each chosen bound with its candidates' estimated errors."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import DPSQL, Server, auth, start_server, stop_server, write_policy

FIXED_K = "max_groups = 4                 #"
LATENCY = "columns.latency_ms = { lower = 0, upper = 60000 }"
BOTH = (
    'columns.latency_ms = { lower = "auto", lower_limit = -1000, upper = "auto", '
    "upper_limit = 600000 }"
)
DAILY = "SELECT CAST(ts AS DATE) AS d, COUNT(*) AS n FROM prompts GROUP BY d"


@pytest.fixture(scope="module")
def auto_k(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("auto-k")
    policy = write_policy(folder, dataset, cap=100.0)
    text = policy.read_text()
    assert text.count(FIXED_K) == 1 and text.count(LATENCY) == 1
    text = text.replace(LATENCY, BOTH)
    policy.write_text(text.replace(FIXED_K, 'max_groups = "auto"\nmax_groups_limit = 64 #'))
    srv = start_server(policy)
    try:
        yield srv
    finally:
        stop_server(srv)


def test_schema_says_auto_with_its_limit(auto_k: Server) -> None:
    with auto_k.client() as c:
        r = c.get("/v1/schema", headers=auth("ana"))
    assert r.status_code == 200
    tables = {t["name"]: t for t in r.json()["tables"]}
    prompts = tables["prompts"]
    assert prompts["max_groups"] == "auto" and prompts["max_groups_limit"] == 64
    assert prompts["max_rows_per_group"] == 10 and prompts["max_rows_per_group_limit"] is None
    assert tables["tickets"]["max_groups"] == 2 and tables["tickets"]["max_groups_limit"] is None
    assert tables["regions"]["max_groups"] is None  # public: no bound at all


def test_cli_schema_says_auto_with_its_limit(auto_k: Server) -> None:
    out = subprocess.run(
        [str(DPSQL), "schema", "--policy", str(auto_k.policy)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "max_groups auto (chosen from the data, up to 64)" in out
    assert "max_rows_per_group 10" in out


def test_explain_lists_the_pending_release_then_the_chosen_k(auto_k: Server) -> None:
    body = {"sql": DAILY, "epsilon": 4.0}
    with auto_k.client() as c:
        before = c.post("/v1/explain", json=body, headers=auth("ana"))
        assert before.status_code == 200, before.text
        pending = before.json()["auto_bounds"]
        assert [(p["keys"], p["limit"]) for p in pending] == [(["CAST(t0.ts AS DATE)"], 64)]
        assert before.json()["chosen_bounds"] == []
        assert c.post("/v1/query", json=body, headers=auth("ana")).status_code == 200
        after = c.post("/v1/explain", json=body, headers=auth("ana")).json()
    assert after["auto_bounds"] == []
    (k,) = after["chosen_bounds"]
    assert k["bound"] == "max_groups" and k["limit"] == 64
    errors = {e["value"]: e["estimated_relative_error"] for e in k["candidates"]}
    assert sorted(errors) == [1, 2, 4, 8, 16, 32, 64]
    peak = k["release_peak"]  # private keys: no K above the release peak is chosen
    assert peak is not None and k["chosen"] <= peak
    assert errors[k["chosen"]] == min(e for v, e in errors.items() if v <= peak)
    assert after["limits"]["max_groups"] == k["chosen"]


def test_explain_shows_the_lower_and_upper_bounds_each_query_chose(auto_k: Server) -> None:
    body = {"sql": "SELECT AVG(latency_ms) AS a FROM prompts", "epsilon": 1.0}
    with auto_k.client() as c:
        before = c.post("/v1/explain", json=body, headers=auth("ana")).json()
        assert sorted(p["side"] for p in before["auto_bounds"]) == ["lower", "upper"]
        assert c.post("/v1/query", json=body, headers=auth("ana")).status_code == 200
        after = c.post("/v1/explain", json=body, headers=auth("ana"))
    assert after.status_code == 200, after.text
    chosen = {b["bound"]: b for b in after.json()["chosen_bounds"]}
    assert sorted(chosen) == ["lower", "upper"]
    assert chosen["lower"]["limit"] == -1000.0 and chosen["upper"]["limit"] == 600000.0
    assert -1000.0 <= chosen["lower"]["chosen"] < chosen["upper"]["chosen"] <= 600000.0


def test_the_fixed_demo_server_shows_fixed_bounds(server: Server) -> None:
    with server.client() as c:
        tables = {t["name"]: t for t in c.get("/v1/schema", headers=auth("ana")).json()["tables"]}
    assert tables["prompts"]["max_groups"] == 4 and tables["prompts"]["max_groups_limit"] is None
