"""The HTTP API's later pages of an answer whose text reads the clock (a review,
2026-12-06): the next page planned the stored text again, which read the clock again,
keyed another release and answered 404. The door now stores the text as answered
(``Result.answered_sql``)."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import Server, auth


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


def test_later_pages_of_a_clock_query_are_served(c: httpx.Client) -> None:
    sql = (
        "SELECT region, plan, COUNT(*) AS n FROM users WHERE signup_month < now() "
        "GROUP BY region, plan ORDER BY region, plan"
    )
    first = c.post(
        "/v1/query", json={"sql": sql, "epsilon": 0.3}, params={"page_size": 5}, headers=auth("ana")
    )
    assert first.status_code == 200, first.text
    body = first.json()
    assert any("read as" in w for w in body["warnings"])
    cursor = body["next"]
    assert cursor
    rows = list(body["rows"])
    while cursor:
        r = c.get(f"/v1/pages/{cursor}", headers=auth("ana"))
        assert r.status_code == 200, r.text
        rows += r.json()["rows"]
        cursor = r.json()["next"]
    assert len(rows) > 5 and rows == sorted(rows, key=lambda row: (row[0], row[1]))
