"""Issue 13 §8: queries over public tables only, or over no table, are answered exactly
and free, on their own path: no ledger event, no ε, metadata ``exact``. They run in a
sandbox that holds only the public tables, so a query that reaches for a private table
fails there rather than reading it. Through the engine, the CLI and a real HTTP server.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.public_queries import EXACT
from proxy.request import QueryRequest
from tests.server.conftest import DPSQL, SQL, Server, auth, start_server, stop_server, write_policy


def events(engine: Engine) -> int:
    return len(engine.ledger.history(limit=100000))


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("SELECT 1", [(1,)]),
        ("SELECT 2 * 3 AS six, LN(1) AS zero, UPPER('a') AS a", [(6, 0.0, "A")]),
        (
            "SELECT region, name FROM regions ORDER BY region",
            [("east", "East"), ("north", "North"), ("south", "South"), ("west", "West")],
        ),
        ("SELECT COUNT(*) AS n FROM regions", [(4,)]),
        ("SELECT DISTINCT LENGTH(region) AS l FROM regions ORDER BY l", [(4,), (5,)]),
        ("SELECT region FROM dpsql.main.regions WHERE region LIKE 'n%'", [("north",)]),
        ("WITH r AS (SELECT region FROM regions) SELECT COUNT(*) FROM r", [(4,)]),
        (
            "SELECT region, ROW_NUMBER() OVER (ORDER BY region DESC) AS k FROM regions "
            "ORDER BY k LIMIT 2",
            [("west", 1), ("south", 2)],
        ),
        ("SELECT region FROM regions UNION ALL SELECT 'x' ORDER BY 1 LIMIT 1", [("east",)]),
    ],
    ids=["one", "constants", "table", "count", "distinct", "three-part", "cte", "window", "union"],
)
def test_public_queries_are_exact_and_free(
    demo_engine: Engine, sql: str, rows: list[tuple[object, ...]]
) -> None:
    before = events(demo_engine)
    result = demo_engine.run(QueryRequest(sql))
    assert result.rows == rows
    p = result.privacy
    assert p.exact == EXACT == "public data, no privacy cost"
    assert (p.epsilon, p.delta, p.charge_id, p.populations) == (0.0, 0.0, None, ())
    assert p.to_dict()["exact"] == EXACT
    # Numbers are exact: a 95% half-width of 0; text has none.
    for row, widths in zip(result.rows, result.intervals, strict=True):
        for value, width in zip(row, widths, strict=True):
            assert width == (0.0 if isinstance(value, (int, float)) else None)
    assert events(demo_engine) == before


def test_explain_of_a_public_query(demo_engine: Engine) -> None:
    body = demo_engine.explain(QueryRequest("SELECT COUNT(*) FROM regions")).to_dict()
    assert body["cache"] == "exact" and body["exact"] == EXACT
    assert body["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": None} and body["charges"] == []


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELECT version()", "unsupported_sql"),
        ("SELECT current_setting('threads')", "unsupported_sql"),
        ("SELECT getenv('HOME')", "unsupported_sql"),
        ("SELECT * FROM read_csv('/etc/passwd')", "unsupported_sql"),
        ("SELECT random() FROM regions WHERE current_time > TIME '00:00:00'", "unsupported_sql"),
        # A CTE's name is in scope inside its own query only (the second `users` is the
        # private table): a WITH below the top is refused (proxy/cte_scope.py).
        (
            "SELECT * FROM (WITH users AS (SELECT 1 AS x) SELECT * FROM users) a, users",
            "unsupported_sql",
        ),
        ("SELECT region FROM nosuch", "not_found"),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
            "unsupported_sql",
        ),
    ],
    ids=["version", "setting", "getenv", "file", "now", "cte-scope", "unknown", "recursive"],
)
def test_what_is_not_answered_on_the_public_path(demo_engine: Engine, sql: str, code: str) -> None:
    before = events(demo_engine)
    with pytest.raises(DPSQLError) as error:
        demo_engine.run(QueryRequest(sql))
    assert error.value.code == code
    assert error.value.hint
    assert "user_id" not in error.value.message
    assert events(demo_engine) == before


def test_grants_apply_to_public_tables(demo_engine: Engine) -> None:
    with pytest.raises(DPSQLError) as error:
        demo_engine.run(QueryRequest("SELECT * FROM regions", tables=frozenset({"users"})))
    assert error.value.code == "not_found"


def test_a_public_join_to_a_private_table_stays_private(demo_engine: Engine) -> None:
    result = demo_engine.run(
        QueryRequest(
            "SELECT r.name, COUNT(*) FROM users u JOIN regions r ON u.region = r.region "
            "GROUP BY r.name",
            epsilon=0.3,
        )
    )
    assert result.privacy.exact is None and result.privacy.epsilon > 0


# --- the doors ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("public-server")
    srv = start_server(write_policy(folder, demo_db))
    try:
        yield srv
    finally:
        stop_server(srv)


def test_http(server: Server) -> None:
    with server.client() as client:
        before = client.get("/v1/budget", headers=auth("ana")).json()
        response = client.post(
            "/v1/query", json={"sql": "SELECT region, name FROM regions"}, headers=auth("ana")
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["rows"]) == 4
        assert body["privacy"]["exact"] == EXACT and body["privacy"]["epsilon"] == 0.0
        assert response.headers["X-DPSQL-Epsilon"] == "0.0"
        paged = client.post(
            "/v1/query?page_size=1",
            json={"sql": "SELECT region FROM regions ORDER BY 1"},
            headers=auth("ana"),
        ).json()
        assert paged["rows"] == [["east"]] and paged["next"]
        following = client.get(f"/v1/pages/{paged['next']}", headers=auth("ana"))
        assert following.status_code == 200 and following.json()["rows"] == [["north"]]
        explained = client.post("/v1/explain", json={"sql": "SELECT 1"}, headers=auth("ana")).json()
        assert explained["cache"] == "exact"
        forbidden = client.post(
            "/v1/query", json={"sql": "SELECT * FROM regions"}, headers=auth("narrow")
        )
        assert forbidden.status_code == 200  # narrow may read regions
        assert client.get("/v1/budget", headers=auth("ana")).json() == before
        # A private query still charges.
        charged = client.post("/v1/query", json={"sql": SQL, "epsilon": 0.2}, headers=auth("ana"))
        assert charged.json()["privacy"]["exact"] is None


def test_cli(tmp_path: Path, demo_db: Path) -> None:
    policy = write_policy(tmp_path, demo_db)
    out = subprocess.run(
        [
            str(DPSQL),
            "--policy",
            str(policy),
            "query",
            "SELECT COUNT(*) AS n FROM regions",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["rows"] == [[4]] and body["privacy"]["exact"] == EXACT
    table = subprocess.run(
        [str(DPSQL), "--policy", str(policy), "query", "SELECT 1 + 1 AS two"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert table.returncode == 0 and "exact: public data, no privacy cost" in table.stdout
