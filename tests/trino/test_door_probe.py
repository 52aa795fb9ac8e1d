"""An adversarial probe of the Trino door (a helper session's review, 2026-12-06): each
test failed on the code before its fix. In process
(TestClient, the `client` fixture of conftest.py: page size 1000, rate limit off).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import auth


def _post(client: TestClient, sql: str, who: str = "ana") -> dict:
    r = client.post("/v1/statement", content=sql.encode(), headers=auth(who))
    assert r.status_code == 200, r.text
    return r.json()


def _types(doc: dict) -> list[str]:
    return [c["type"] for c in doc.get("columns") or []]


# --- C6: free catalog answers are written to disk for a day, never fetched -------------
# routes.answered stores every answer longer than one page in the results SQLite file
# beside the ledger (results.SqliteResults.put, TTL 24 h) before the client asked for
# page 2. A catalog query is free and may return 100,000 rows / 16 MB
# (catalog_limits), so each POST writes ~15 MB; at the default rate limit (2,000 a
# minute per key and worker) one analyst key fills ~30 GB a minute, for nothing.

BIG_CATALOG = (
    "SELECT a.column_name || b.column_name || c.column_name || d.column_name || '"
    + "x" * 100
    + "' AS s FROM information_schema.columns a, information_schema.columns b, "
    "information_schema.columns c, information_schema.columns d LIMIT 99000"
)


def _store_bytes(client: TestClient) -> int:
    ledger = get_context_policy(client).ledger_path
    return sum(p.stat().st_size for p in Path(ledger).parent.glob("*-trino.sqlite*"))


def get_context_policy(client: TestClient):  # type: ignore[no-untyped-def]
    return client.app.state.ctx.engine.policy  # type: ignore[attr-defined]


def test_unfetched_free_answers_do_not_fill_the_disk(client: TestClient) -> None:
    from proxy.trino.results import MAX_ANALYST_BYTES

    _post(client, "SELECT 1")  # builds the door state
    before = _store_bytes(client)
    for _ in range(6):  # about 90 MB before the fix
        doc = _post(client, BIG_CATALOG)
        assert doc["stats"]["state"] in ("RUNNING", "FINISHED", "FAILED")
    grown = _store_bytes(client) - before
    # an analyst's waiting answers stay within the cap (plus the one that made room)
    limit = MAX_ANALYST_BYTES + 20 * 2**20
    assert grown < limit, f"6 unfetched catalog answers take {grown / 2**20:.0f} MB on disk"


# --- D4: `... LIMIT 0` announces other column types than the answer has ----------------
# The door answers LIMIT 0 (how Superset and JDBC learn a query's columns) on the
# DuckDB shadow, which types SUM(integer) as decimal(38,0) and `/` as double, while
# the answer itself is typed from its released values (types.infer): bigint.


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(tokens_in) AS s FROM prompts",
        "SELECT COUNT(*) / 7 AS d FROM prompts",
        "SELECT model, AVG(tokens_in) AS a, COUNT(*) AS n FROM prompts GROUP BY model",
        "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY 1",
        "SELECT t.model, t.n * 2 AS twice FROM (SELECT model, COUNT(*) AS n FROM prompts "
        "GROUP BY model) AS t",
    ],
)
def test_limit_zero_announces_the_types_of_the_answer(client: TestClient, sql: str) -> None:
    before = client.app.state.ctx.engine.ledger.history()  # type: ignore[attr-defined]
    announced = _types(_post(client, sql + " LIMIT 0"))
    assert client.app.state.ctx.engine.ledger.history() == before  # type: ignore[attr-defined]
    answered = _post(client, sql)
    assert answered["stats"]["state"] == "FINISHED", answered.get("error")
    assert announced == _types(answered)


# --- D5: table-less SELECTs use DuckDB's arithmetic, not Trino's ------------------------
# `SELECT 7/2` is 3 (integer) in Trino and 1/0 fails with DIVISION_BY_ZERO; the shadow
# answers 3.5 (double) and Infinity.


def test_a_table_less_select_divides_like_trino(client: TestClient) -> None:
    doc = _post(client, "SELECT 7/2")
    assert doc["data"] == [[3]], doc.get("data")
    assert _types(doc) == ["integer"]
    # (1/0 is NULL here where Trino fails: DuckDB's integer division; nothing is read)


@pytest.mark.parametrize(
    "statement",
    [
        "SET SESSION dpsql.epsilon = 1e400",
        "SET SESSION dpsql.epsilon = -1",
        "SET SESSION dpsql.max_groups = 99999999999999999999999",
        "SET SESSION dpsql.max_groups = 0",
    ],
)
def test_a_session_property_is_checked_when_set(client: TestClient, statement: str) -> None:
    """Trino checks a property's value at SET SESSION; dpsql accepted these and refused
    every later query instead (a probe of the doors, 2026-12-06)."""
    doc = _post(client, statement)
    assert doc.get("error"), doc
    assert doc["error"]["errorName"] in ("INVALID_SESSION_PROPERTY", "INVALID_ARGUMENTS",
                                         "BAD_REQUEST", "GENERIC_USER_ERROR"), doc["error"]
