"""The HTTP API carries what another draw of the noise could have answered otherwise
(proxy/unsettled.py): ``unsettled_cells`` as (row on the page, column) and
``unsettled_rows`` as rows on the page, both counted from the page's first row."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import Server, auth

COUNTS = "SELECT region, COUNT(*) AS n FROM users GROUP BY region ORDER BY region"


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


def test_pages_carry_unsettled_cells(c: httpx.Client) -> None:
    first = c.post("/v1/query", json={"sql": COUNTS, "epsilon": 0.4}, headers=auth("ana"))
    assert first.status_code == 200, first.text
    counts = {row[0]: row[1] for row in first.json()["rows"]}
    sigma = first.json()["privacy"]["columns"][1]["noise_scale"]
    last = sorted(counts)[-1]  # on the second page of two rows
    cut = counts[last] + 0.2 * sigma
    sql = COUNTS.replace("COUNT(*) AS n", f"COUNT(*) AS n, COUNT(*) > {cut} AS big")
    seen: list[list[int]] = []
    r = c.post(
        "/v1/query", json={"sql": sql, "epsilon": 0.4}, params={"page_size": 2},
        headers=auth("ana"),
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["privacy"]["cached"]
    offset = 0
    while True:
        for row, col in body["unsettled_cells"]:
            assert 0 <= row < len(body["rows"]) and col == 2
            seen.append([offset + row, col])
        assert body["unsettled_rows"] == []
        if not body["next"]:
            break
        offset += len(body["rows"])
        body = c.get(f"/v1/pages/{body['next']}", headers=auth("ana")).json()
    regions = sorted(counts)
    assert [regions.index(last), 2] in seen
    assert any("'big' could be otherwise" in w for w in body["warnings"])


def test_the_openapi_schema_declares_them(c: httpx.Client) -> None:
    schema = c.get("/openapi.json").json()["components"]["schemas"]["QueryResponse"]
    assert {"unsettled_cells", "unsettled_rows"} <= set(schema["properties"])
