"""Review of the Trino door (proxy/trino/): reproductions of the defects found.

Each test fails on the reviewed code and passes once its defect is fixed. They run the
app in process (FastAPI's TestClient, as test_hit_door_review.py does) or the shadow
catalog directly; none needs the TLS server.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from proxy.errors import DPSQLError
from proxy.trino.shadow import ShadowCatalog
from tests.server.conftest import auth

GROUPED = "SELECT region, COUNT(*) AS n FROM users GROUP BY region"


# --- 1. crash: a non-ASCII Basic credential is an unauthenticated HTTP 500 ---------------
# routes.bearer() calls base64.b64decode(str, validate=True), which raises ValueError (not
# binascii.Error) for a str holding non-ASCII characters; neither the route (_caller) nor
# the cache-hit middleware (hits.py, which calls bearer() outside its try) catches it.


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_non_ascii_basic_credentials_are_a_401_not_a_500(client: TestClient, method: str) -> None:
    headers = {"Authorization": b"Basic \xe9\xe9\xe9\xe9"}  # latin-1 bytes, as a client may send
    if method == "POST":
        r = client.post("/v1/statement", content=b"SELECT 1", headers=headers)
    else:
        r = client.request(method, "/v1/statement/executing/x/y/1", headers=headers)
    assert r.status_code == 401, (r.status_code, r.text)


# --- 2. crash: a Unicode prepared-statement or session name is an HTTP 500 --------------
# statements.py matches names with \w, which accepts any Unicode letter; door.py echoes
# the name unencoded in X-Trino-Added-Prepare / -Deallocated-Prepare / -Set-Session /
# -Clear-Session, and Starlette cannot encode a non-latin-1 header value.


@pytest.mark.parametrize(
    "sql",
    [
        "PREPARE Ж FROM SELECT 1",
        "DEALLOCATE PREPARE Ж",
        "SET SESSION Ж = 1",
        "RESET SESSION Ж",
    ],
)
def test_unicode_statement_names_are_answered_not_a_500(client: TestClient, sql: str) -> None:
    r = client.post("/v1/statement", content=sql.encode(), headers=auth("ana"))
    assert r.status_code == 200, (r.status_code, r.text)
    doc = r.json()
    assert doc["stats"]["state"] in ("FINISHED", "FAILED")


# --- 3. crash / wedge: a scalar that builds a value of any size --------------------------
# ShadowCatalog set memory_limit=256MB and interrupted after 10 s, but one scalar call
# that builds a huge value is neither interrupted nor limited: through the door
# `SELECT length(repeat('a', 2000000000))` (a free, uncharged "catalog query": no FROM)
# ran 118 s and took the server to 3.8 GB RSS. proxy/catalog_limits.py now refuses such
# calls before the shadow runs anything.

SIZED = (
    "SELECT length(repeat('a', 400000000)) AS n",
    "SELECT length(lpad('a', 400000000, 'x')) AS n",
    "SELECT length(rpad('a', 400000000)) AS n",
    "SELECT cardinality(sequence(1, 100000000)) AS n",
    "SELECT length(format('%0400000000d', 1)) AS n",
    "SELECT length(replace('" + "a" * 2000 + "', 'a', '" + "b" * 2000 + "')) AS n",
)


@pytest.mark.parametrize("sql", SIZED, ids=["repeat", "lpad", "rpad", "sequence", "format", "replace"])
def test_a_catalog_query_cannot_build_a_value_of_any_size(client: TestClient, sql: str) -> None:
    before = _spent(client)
    r = client.post("/v1/statement", content=sql.encode(), headers=auth("ana"))
    doc = r.json()
    assert doc["stats"]["state"] == "FAILED", doc
    assert doc["error"]["errorName"] == "UNSUPPORTED_SQL", doc["error"]
    assert _spent(client) == before


def test_the_shadow_refuses_sized_values_and_stops_at_its_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sqlglot

    from proxy import catalog_limits

    shadow = ShadowCatalog([])
    try:
        with pytest.raises(DPSQLError) as info:
            shadow.run(sqlglot.parse_one(SIZED[0], read="trino"))
        assert "repeat() builds a value" in info.value.message
        # A join the limits allow but that runs long is interrupted at the time limit.
        monkeypatch.setattr(catalog_limits, "TIMEOUT_S", 0.2)
        slow = "SELECT COUNT(*) AS n FROM generate_series(1, 100000) a(x), generate_series(1, 100000) b(y) WHERE x <> y"
        with pytest.raises(DPSQLError) as info:
            shadow.run(sqlglot.parse_one(slow, read="duckdb"))
        assert info.value.code == "timeout", info.value
    finally:
        shadow.close()


# --- 4. wrong error: a non-UTF-8 body is reported as "no SQL statement was sent" --------


def test_a_non_utf8_body_is_named_as_such(client: TestClient) -> None:
    r = client.post("/v1/statement", content=b"SELECT '\xff'", headers=auth("ana"))
    error = r.json()["error"]
    assert "no SQL statement was sent" not in error["message"], error
    assert "utf-8" in error["message"].lower(), error


def test_the_info_uri_opens_a_page(client: TestClient) -> None:
    """A client that follows a result's infoUri (the trino CLI prints it) gets dpsql's
    console, not a 404 (it pointed at Trino's /ui/query.html, which dpsql does not serve)."""
    info = client.post("/v1/statement", content=b"SELECT 1", headers=auth("ana")).json()["infoUri"]
    page = client.get(info)
    assert page.status_code == 200, info
    assert page.headers["content-type"].startswith("text/html")


# --- 5. budget: a series-limit chart refused for its text is charged its ranking ---------
# door._private_query runs (and charges) the ranking subquery first and only then sends
# the chart; a chart the engine refuses for its text alone (an unknown function here) is
# a refusal *after* a charge, which every other door and /v1/query refuse before any.


def _spent(client: TestClient) -> float:
    r = client.get("/v1/budget", headers=auth("adm"))
    r.raise_for_status()
    return float(r.json()["populations"][0]["epsilon_spent"])


SERIES = (
    "SELECT model AS model, {item} FROM prompts "
    "JOIN (SELECT model AS model__, COUNT(*) AS c FROM prompts WHERE tokens_in > 23 "
    "GROUP BY model ORDER BY 2 DESC LIMIT {limit}) AS series_limit ON model = model__ "
    "GROUP BY model"
)


def _refused_free(client: TestClient, sql: str) -> dict[str, object]:
    """The Trino error of ``sql``, asserting that nothing was charged for it."""
    before = _spent(client)
    r = client.post("/v1/statement", content=sql.encode(), headers=auth("ana"))
    doc = r.json()
    assert doc["stats"]["state"] == "FAILED", doc
    assert _spent(client) == before
    return dict(doc["error"])


def test_a_series_limit_chart_refused_for_its_text_charges_nothing(client: TestClient) -> None:
    """The ranking was charged before the chart was refused for its own text."""
    error = _refused_free(client, SERIES.format(item="nosuchfn(tokens_in) AS x", limit=2))
    assert error["errorName"] == "UNSUPPORTED_SQL", error


def test_a_series_limit_too_long_for_its_chart_is_refused_before_the_ranking(
    client: TestClient,
) -> None:
    """A ranking of up to 5,000 keys makes a chart whose IN list passes the engine's
    limits (2,000 syntax nodes, 20,000 characters): refused before the ranking is
    charged, not after."""
    sql = SERIES.format(item="COUNT(*) AS n", limit=5000)
    error = _refused_free(client, sql)
    assert error["errorName"] == "TOO_LARGE", error
    before = _spent(client)
    # a series limit that fits is answered: ranking and chart charged, keys released
    small = sql.replace("LIMIT 5000", "LIMIT 3")
    r = client.post("/v1/statement", content=small.encode(), headers=auth("ana"))
    assert r.json()["stats"]["state"] in ("FINISHED", "QUEUED", "RUNNING"), r.json()
    assert _spent(client) > before


# --- 3b. the same: a free catalog answer was stored whole, with no byte limit -----------
# MAX_ROWS capped rows, not bytes: one uncharged request wrote ~100 MB into the results
# store beside the ledger (ledger-trino.sqlite, kept 24 h), in about a second. Answers
# are now fetched within catalog_limits.MAX_BYTES.


def test_a_catalog_answer_has_a_size_limit(client: TestClient) -> None:
    wide = "x" * 15_000
    sql = (
        f"SELECT '{wide}' AS s FROM information_schema.columns a, "
        "information_schema.columns b, information_schema.columns c"
    )
    r = client.post("/v1/statement", content=sql.encode(), headers=auth("ana"))
    doc = r.json()
    assert doc["stats"]["state"] == "FAILED", (doc["stats"], doc.get("nextUri"))
    assert doc["error"]["errorName"] == "TOO_LARGE", doc["error"]
    assert "larger than 16 MB" in doc["error"]["message"]


# --- 6. budget / wrong answer: a repeated X-Trino-Session header is silently dropped ----
# HTTP lets a list header be sent as several lines (Trino's JDBC driver sends one
# X-Trino-Session line per property); routes.client_session reads only the first line
# (headers.get), so `dpsql.epsilon=0.11` on a second line is ignored and the policy's
# default ε=0.5 is charged instead, with no error. X-Trino-Prepared-Statement likewise.


def test_every_x_trino_session_line_is_honoured(client: TestClient) -> None:
    headers = [
        ("Authorization", auth("ana")["Authorization"]),
        ("X-Trino-Session", "dpsql.intervals=true"),
        ("X-Trino-Session", "dpsql.epsilon=0.11"),
    ]
    sql = b"SELECT plan, COUNT(*) AS n FROM users WHERE age > 47 GROUP BY plan"
    r = client.post("/v1/statement", content=sql, headers=headers)
    doc = r.json()
    assert [c["name"] for c in doc["columns"]] == ["plan", "n", "n_ci95"], doc
    assert abs(float(r.headers["X-DPSQL-Epsilon"]) - 0.11) < 1e-9  # fails: 0.5 charged


def test_every_prepared_statement_line_is_honoured(client: TestClient) -> None:
    headers = [
        ("Authorization", auth("ana")["Authorization"]),
        ("X-Trino-Prepared-Statement", "a=SELECT+1"),
        ("X-Trino-Prepared-Statement", "b=SELECT+2"),
    ]
    r = client.post("/v1/statement", content=b"EXECUTE b", headers=headers)
    doc = r.json()
    assert doc["stats"]["state"] == "FINISHED" and doc["data"] == [[2]], doc


def test_a_catalog_query_does_not_read_the_servers_settings(client: TestClient) -> None:
    """current_setting('secret_directory') told an analyst the server's paths."""
    r = client.post(
        "/v1/statement", content=b"SELECT current_setting('secret_directory')", headers=auth("ana")
    )
    error = r.json()["error"]
    assert "reads the server's own settings" in error["message"], error
    assert "/root" not in error["message"] and "duckdb" not in error["message"].lower(), error
