"""Issue #11 §3: numbers that reconcile. After a sequence of root and partition-pinned
queries, `dpsql budget`, GET /v1/budget, /metrics and the answers themselves report the
same spent and remaining for the same ledger (spent by the persons who have spent the
most; spent + remaining = cap), and every answer says both its own ε and how much the
population's composed total moved.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import DPSQL, Server, auth, start_server, stop_server, write_policy

QUERIES = (
    ("SELECT region, COUNT(*) AS n FROM users GROUP BY region", 0.5),
    ("SELECT plan, COUNT(*) AS n FROM users WHERE region = 'north' GROUP BY plan", 0.7),
    ("SELECT COUNT(*) AS n FROM prompts JOIN users USING (user_id) WHERE region = 'north'", 0.6),
    ("SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", 0.4),
    ("SELECT COUNT(*) AS n FROM users WHERE region IN ('south', 'east')", 0.3),
)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Server]:
    srv = start_server(write_policy(tmp_path_factory.mktemp("reconcile"), dataset, cap=8.0))
    try:
        yield srv
    finally:
        stop_server(srv)


def _cli_budget(policy: Path) -> dict[str, tuple[float, float, float]]:
    """name -> (spent, cap, remaining) as `dpsql budget` prints them."""
    out = subprocess.run(
        [str(DPSQL), "--policy", str(policy), "budget"],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^│\s*(\S+)\s*│\s*([\d.]+)\s*│\s*([\d.]+)\s*│\s*([\d.]+)\s*│", line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
    return rows


def _metrics(c: httpx.Client) -> dict[tuple[str, str], float]:
    text = c.get("/metrics", headers=auth("adm")).text
    found = {}
    for name in ("spent", "remaining"):
        for pop, value in re.findall(
            rf'^dpsql_population_epsilon_{name}{{population="([^"]+)"}} (\S+)$', text, re.M
        ):
            found[(name, pop)] = float(value)
    return found


def test_every_view_reports_the_same_spent_and_remaining(srv: Server) -> None:
    with srv.client() as c:
        answers = []
        for sql, eps in QUERIES:
            r = c.post("/v1/query", json={"sql": sql, "epsilon": eps}, headers=auth("ana"))
            assert r.status_code == 200, r.text
            answers.append(r.json()["privacy"])
        budget = c.get("/v1/budget", headers=auth("adm")).json()["populations"]
        metrics = _metrics(c)
    cli = _cli_budget(srv.policy)
    [users] = [p for p in budget if p["name"] == "users"]
    views = {users["name"]: users, **{p["name"]: p for p in users["partitions"]}}
    assert {"users/region=north", "users/region=south", "users/region=east"} <= set(views)
    for name, v in views.items():
        spent, remaining = v["epsilon_spent"], v["remaining"]
        cap = users["epsilon_cap"]
        assert spent + remaining == pytest.approx(cap, abs=1e-9), name
        assert metrics[("spent", name)] == pytest.approx(spent, abs=1e-9), name
        assert metrics[("remaining", name)] == pytest.approx(remaining, abs=1e-9), name
        c_spent, c_cap, c_remaining = cli[name]
        assert (c_spent, c_cap, c_remaining) == pytest.approx((spent, cap, remaining), abs=1e-4)
    # The root's spent is that of its persons who have spent the most: north's.
    assert users["epsilon_spent"] == pytest.approx(
        max(p["epsilon_spent"] for p in views.values()), abs=1e-12
    )
    assert users["epsilon_spent"] > min(p["epsilon_spent"] for p in views.values())
    # The last answer's remaining is the ledger's now; each answer names both its own ε
    # and how much the population's composed total moved (less, by composition).
    last = answers[-1]
    for target, left in last["remaining"].items():
        assert left == pytest.approx(views[target]["remaining"], abs=1e-9)
    for a in answers:
        assert a["query_epsilon"] > 0
        for target, moved in a["population_epsilon_moved"].items():
            assert 0 < moved <= a["query_epsilon"] + 1e-9, (target, moved, a)
    assert any(
        moved < a["query_epsilon"] * 0.99
        for a in answers[1:]
        for moved in a["population_epsilon_moved"].values()
    )
