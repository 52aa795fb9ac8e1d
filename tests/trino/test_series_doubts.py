"""Superset's "top N series" chart is a noisy ORDER BY … LIMIT (the ranking) and a chart
filtered by it: the ranking's words on the rows it chose by noisy values
(proxy/unsettled.py) reach the chart's warnings (a review, 2026-12-06: only the
ranking's privacy line did)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.server.conftest import auth

RANK = "SELECT model AS model__, COUNT(*) AS c FROM prompts GROUP BY model ORDER BY 2 DESC LIMIT 2"
SERIES = (
    "SELECT model AS model, COUNT(*) AS n FROM prompts "
    f"JOIN ({RANK}) AS series_limit ON model = model__ GROUP BY model"
)


def _run(client: TestClient, sql: str) -> dict[str, Any]:
    headers = {**auth("ana"), "X-Trino-Session": "epsilon=0.05"}
    doc = client.post("/v1/statement", content=sql.encode(), headers=headers).json()
    warnings = [w["message"] for w in doc.get("warnings", [])]
    while doc.get("nextUri"):
        doc = client.get(doc["nextUri"], headers=headers).json()
        warnings += [w["message"] for w in doc.get("warnings", [])]
    assert doc["stats"]["state"] == "FINISHED", doc.get("error")
    return {"warnings": warnings}


def test_the_series_chart_carries_the_ranking_s_doubts(client: TestClient) -> None:
    ranking = _run(client, RANK)["warnings"]
    chart = _run(client, SERIES)["warnings"]
    said = [w for w in ranking if "chosen by noisy values (ORDER BY … LIMIT)" in w]
    # Three models, ranked at ε = 0.05 (a count's σ in the hundreds): the second place is
    # within the noise of the third.
    assert said
    assert any(w.startswith("dpsql: series ranking: ") and said[0] in w for w in chart)
