"""Superset's "top N series" chart is a noisy ORDER BY … LIMIT (the ranking) and a chart
filtered by it: the ranking's words on the rows it chose by noisy values
(proxy/unsettled.py) reach the chart's warnings (a review, 2026-12-06: only the
ranking's privacy line did)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.server.conftest import auth

ALL = "SELECT model AS model__, COUNT(*) AS c FROM prompts GROUP BY model ORDER BY 2 DESC"
EPSILON = "0.01"  # a count's σ in the thousands here: every model's rank is within noise


def _run(client: TestClient, sql: str) -> dict[str, Any]:
    headers = {**auth("ana"), "X-Trino-Session": f"epsilon={EPSILON}"}
    doc = client.post("/v1/statement", content=sql.encode(), headers=headers).json()
    warnings = [w["message"] for w in doc.get("warnings", [])]
    data = list(doc.get("data") or [])
    while doc.get("nextUri"):
        doc = client.get(doc["nextUri"], headers=headers).json()
        warnings += [w["message"] for w in doc.get("warnings", [])]
        data += doc.get("data") or []
    assert doc["stats"]["state"] == "FINISHED", doc.get("error")
    return {"warnings": warnings, "data": data}


def test_the_series_chart_carries_the_ranking_s_doubts(client: TestClient) -> None:
    # The ranking's own release, read whole (free after the first): the cut between the
    # two closest counts is where the noise decides most.
    counts = [row[1] for row in _run(client, ALL)["data"]]
    assert len(counts) >= 3
    k = 1 + min(range(len(counts) - 1), key=lambda i: counts[i] - counts[i + 1])
    rank = f"{ALL} LIMIT {k}"
    ranking = _run(client, rank)["warnings"]
    chart = _run(
        client,
        "SELECT model AS model, COUNT(*) AS n FROM prompts "
        f"JOIN ({rank}) AS series_limit ON model = model__ GROUP BY model",
    )["warnings"]
    said = [w for w in ranking if "chosen by noisy values (ORDER BY … LIMIT)" in w]
    assert said, (counts, ranking)
    assert any(w.startswith("dpsql: series ranking: ") and said[0] in w for w in chart)
