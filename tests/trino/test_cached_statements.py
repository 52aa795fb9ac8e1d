"""A cached query through the Trino door in as few round trips as the protocol allows
(issue 18): the real `trino` client against a real `dpsql serve` over HTTPS. A repeat
is one POST whose reply carries the columns, the rows and the final state; it is the
same answer as the first, replayed without a charge; refusals are still Trino errors,
refused before any charge and without a ledger record; the rate limit counts each
request once, whichever way it is answered."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from fastapi.testclient import TestClient
from trino.exceptions import TrinoUserError

from proxy.server.app import create_app
from proxy.server.settings import Settings
from tests.server.conftest import KEYS, auth, write_policy
from tests.trino.conftest import PAGE_ROWS, TlsServer, make_certificate, start_tls_server, stop
from tests.trino.test_trino_client import basic

# Three plans: one page of PAGE_ROWS rows. Four regions: two pages.
ONE_PAGE = "SELECT plan, AVG(age) AS a, COUNT(*) AS n FROM users GROUP BY plan ORDER BY plan"
TWO_PAGES = "SELECT region, COUNT(*) AS n FROM users WHERE age > 30 GROUP BY region"


@dataclass
class Counted:
    """What the trino client sent: (method, path) of every HTTP request."""

    session: requests.Session
    sent: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.session.hooks["response"].append(self._record)

    def _record(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self.sent.append((response.request.method or "", response.request.path_url))


def counted_cursor(server: TlsServer, name: str = "ana") -> tuple[Any, Counted]:
    session = requests.Session()
    session.verify = str(server.cert)
    counted = Counted(session)
    return server.connect(name, http_session=session).cursor(), counted


def ledger_events(server: TlsServer) -> list[dict[str, Any]]:
    with server.client() as c:
        r = c.get("/v1/ledger", params={"limit": 1000}, headers=auth("adm"))
        r.raise_for_status()
        return list(r.json()["events"])


def test_a_cached_query_is_one_post_with_columns_rows_and_final_state(tls_server: TlsServer):
    cursor, counted = counted_cursor(tls_server)
    cursor.execute(ONE_PAGE)
    first = cursor.fetchall()
    first_columns = [(d[0], d[1]) for d in cursor.description]
    assert [(r[0]) for r in first] == ["free", "pro", "team"]
    assert first_columns == [("plan", "varchar"), ("a", "double"), ("n", "bigint")]
    charged = tls_server.spent()
    events = ledger_events(tls_server)
    for _ in range(3):
        counted.sent.clear()
        cursor.execute(ONE_PAGE)
        again = cursor.fetchall()
        assert counted.sent == [("POST", "/v1/statement")]  # no nextUri to follow
        assert again == first  # the same released numbers
        assert [(d[0], d[1]) for d in cursor.description] == first_columns
        assert cursor.stats["state"] == "FINISHED"
        messages = [w["message"] for w in cursor.warnings]
        assert any("replayed from the cache" in m for m in messages), messages
    assert tls_server.spent() == charged  # nothing charged for the repeats
    # each repeat is recorded (a zero-cost replay event), never a charge
    added = ledger_events(tls_server)[len(events) :]
    assert all(e["epsilon"] in (0, 0.0, None) for e in added), added


def test_the_first_post_of_a_repeat_is_the_whole_trino_reply(tls_server: TlsServer):
    """What the client reads: the reply of the POST itself is final."""
    cursor = tls_server.connect().cursor()
    cursor.execute(ONE_PAGE)
    cursor.fetchall()
    with tls_server.client() as c:
        r = c.post("/v1/statement", content=ONE_PAGE, headers=basic("ana"))
    doc = r.json()
    assert r.status_code == 200 and doc["stats"]["state"] == "FINISHED"
    assert "nextUri" not in doc and "error" not in doc
    assert [col["name"] for col in doc["columns"]] == ["plan", "a", "n"]
    assert [row[0] for row in doc["data"]] == ["free", "pro", "team"]
    assert r.headers["X-DPSQL-Cached"] == "true" and float(r.headers["X-DPSQL-Epsilon"]) == 0.0


def test_a_cached_answer_longer_than_a_page_still_pages(tls_server: TlsServer):
    cursor, counted = counted_cursor(tls_server)
    cursor.execute(TWO_PAGES)
    first = cursor.fetchall()
    assert len(first) == 4 > PAGE_ROWS
    charged = tls_server.spent()
    counted.sent.clear()
    cursor.execute(TWO_PAGES)
    assert cursor.fetchall() == first
    assert [m for m, _ in counted.sent] == ["POST", "GET"]
    assert counted.sent[1][1].startswith("/v1/statement/executing/")
    assert tls_server.spent() == charged


def test_session_properties_still_choose_the_answer_of_a_repeat(tls_server: TlsServer):
    sql = "SELECT plan, COUNT(*) AS n FROM users WHERE age > 40 GROUP BY plan"
    plain = tls_server.connect().cursor()
    plain.execute(sql)
    rows = plain.fetchall()
    charged = tls_server.spent()
    wide = tls_server.connect(session_properties={"dpsql.intervals": "true"}).cursor()
    wide.execute(sql)
    assert [d[0] for d in wide.description] == ["plan", "n", "n_ci95"]
    assert [r[:2] for r in wide.fetchall()] == rows  # the same release, with its widths
    plain.execute(sql)
    assert [d[0] for d in plain.description] == ["plan", "n"] and plain.fetchall() == rows
    assert tls_server.spent() == charged
    # another ε is another release: charged, not served from the first one
    other = tls_server.connect(session_properties={"dpsql.epsilon": "0.3"}).cursor()
    other.execute(sql)
    other.fetchall()
    assert any("charged ε=0.3" in w["message"] for w in other.warnings), other.warnings
    assert tls_server.spent() > charged


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("SELECT prompt_id FROM prompts ORDER BY prompt_id LIMIT 5", "UNSUPPORTED_SQL"),
        ("SELECT COUNT(*) AS n FROM nowhere.main.users", "NOT_FOUND"),
        ("SELEC COUNT(*) AS n FROM users", "PARSE_ERROR"),
    ],
)
def test_refusals_are_one_post_trino_errors_without_a_charge_or_record(
    tls_server: TlsServer, sql: str, name: str
):
    cursor, counted = counted_cursor(tls_server)
    spent = tls_server.spent()
    events = ledger_events(tls_server)
    for _ in range(2):  # the second time too, after the door has seen the text
        counted.sent.clear()
        with pytest.raises(TrinoUserError) as info:
            cursor.execute(sql)
        assert info.value.error_name == name
        assert counted.sent == [("POST", "/v1/statement")]
    assert tls_server.spent() == spent
    assert ledger_events(tls_server) == events


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[TlsServer]:
    folder = tmp_path_factory.mktemp("trino-limited")
    policy = write_policy(folder, dataset, cap=50.0)
    server = start_tls_server(policy, make_certificate(folder), env={"DPSQL_RATE_LIMIT": "4/hour"})
    try:
        yield server
    finally:
        stop(server)


def test_each_statement_counts_once_against_the_rate_limit(limited_server: TlsServer):
    cursor, counted = counted_cursor(limited_server, "bob")
    # two misses (answered by the route) and two repeats (answered before it): four
    cursor.execute(ONE_PAGE)
    first = cursor.fetchall()
    cursor.execute(TWO_PAGES.replace("30", "50"))
    cursor.fetchall()
    counted.sent.clear()
    cursor.execute(ONE_PAGE)
    assert cursor.fetchall() == first
    cursor.execute(ONE_PAGE)
    assert cursor.fetchall() == first
    assert len(counted.sent) == 2
    with limited_server.client() as c:
        refused = c.post("/v1/statement", content=ONE_PAGE, headers=basic("bob"))
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "rate_limited"
        # another analyst has their own allowance
        other = c.post("/v1/statement", content=ONE_PAGE, headers=basic("ana"))
        assert other.status_code == 200 and other.json()["stats"]["state"] == "FINISHED"


def test_a_repeat_is_answered_before_the_route_and_its_thread_pool(
    tmp_path: Path, dataset: Path, caplog: pytest.LogCaptureFixture
):
    """In process: once the engine answers a text from memory, the route's
    ``door.execute`` (run in the thread pool) is no longer called for it."""
    app = create_app(Settings(policy=write_policy(tmp_path, dataset), rate_limit="off"))
    with TestClient(app, base_url="https://127.0.0.1") as client:
        replies = [
            client.post("/v1/statement", content=ONE_PAGE, headers=basic("ana")) for _ in range(2)
        ]
        door = app.state.trino.door
        routed: list[str] = []
        execute = door.execute

        def spy(text: str, *args: Any) -> Any:
            routed.append(text)
            return execute(text, *args)

        door.execute = spy
        with caplog.at_level(logging.INFO, logger="dpsql.server"):
            hit = client.post("/v1/statement", content=ONE_PAGE, headers=basic("ana"))
        assert routed == []
        # logged and timed as the route's: its path, the analyst, the door, a free replay
        line = [r for r in caplog.records if r.getMessage() == "request"][-1].fields  # type: ignore[attr-defined]
        assert (line["route"], line["status"], line["analyst"]) == ("/v1/statement", 200, "ana")
        assert (line["door"], line["cached"], line["epsilon"]) == ("trino", True, 0.0)
        metrics = client.get("/metrics", headers=auth("adm")).text
        assert 'dpsql_request_seconds_count{method="POST",route="/v1/statement"} 3.0' in metrics
        assert "dpsql_cache_hits_total 2.0" in metrics
        doc, second = hit.json(), replies[1].json()
        assert doc["data"] == second["data"] and doc["columns"] == second["columns"]
        assert doc["warnings"] == second["warnings"] and "nextUri" not in doc
        assert hit.headers["X-DPSQL-Cached"] == "true"
        assert doc["id"] != second["id"]
        # anything else still goes through the route
        client.post("/v1/statement", content="SHOW TABLES", headers=basic("ana"))
        client.post(
            "/v1/statement", content=ONE_PAGE.replace("plan", "region"), headers=basic("ana")
        )
        assert routed == ["SHOW TABLES", ONE_PAGE.replace("plan", "region")]
        # a key the authenticator refuses is the route's 401, as before
        wrong = {"Authorization": "Basic " + base64.b64encode(b"ana:not-a-key").decode()}
        refused = client.post("/v1/statement", content=ONE_PAGE, headers=wrong)
        assert refused.status_code == 401


def test_through_sqlalchemy_and_pandas_a_cached_query_is_one_post(tls_server: TlsServer):
    sa = pytest.importorskip("sqlalchemy")
    pd = pytest.importorskip("pandas", reason="pandas is in the [bi] extra")
    session = requests.Session()
    session.verify = str(tls_server.cert)
    counted = Counted(session)
    engine = sa.create_engine(
        f"trino://ana:{KEYS['ana'][1]}@127.0.0.1:{tls_server.port}/dpsql/main",
        connect_args={
            "http_scheme": "https",
            "verify": str(tls_server.cert),
            "http_session": session,
        },
    )
    with engine.connect() as conn:  # the dialect's first connection asks one handshake
        first = pd.read_sql(sa.text(ONE_PAGE), conn)
    spent = tls_server.spent()
    for _ in range(2):
        counted.sent.clear()
        with engine.connect() as conn:
            again = pd.read_sql(sa.text(ONE_PAGE), conn)
        assert counted.sent == [("POST", "/v1/statement")]
        assert again.equals(first)
    assert tls_server.spent() == spent


def test_a_cached_parameterised_query_is_one_post_too(tls_server: TlsServer):
    sql = "SELECT plan, COUNT(*) AS n FROM users WHERE age > ? GROUP BY plan"
    cursor, counted = counted_cursor(tls_server)
    cursor.execute(sql, [35])
    first = cursor.fetchall()
    spent = tls_server.spent()
    for _ in range(3):
        counted.sent.clear()
        cursor.execute(sql, [35])
        assert cursor.fetchall() == first
        assert counted.sent == [("POST", "/v1/statement")]  # EXECUTE IMMEDIATE ... USING 35
    assert tls_server.spent() == spent
    cursor.execute(sql, [36])  # other values: another release, charged
    cursor.fetchall()
    assert tls_server.spent() > spent
