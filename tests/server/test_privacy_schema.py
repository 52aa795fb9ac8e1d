"""Issue #12 (finding 6): the OpenAPI `Privacy` schema describes exactly what answers
carry — every key of `PrivacyInfo.to_dict`, nested ones included — checked on real
answers of a real `dpsql serve` (a counted answer with its clipping estimate, a
quantile, a public one, a replay) and against the served /openapi.json."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from proxy.server.schemas import Clipping, Privacy, QuantileColumn
from tests.server.conftest import Server
from tests.server.test_http import ask

QUERIES = [
    "SELECT region, COUNT(*) AS n, AVG(tokens_out) AS a FROM prompts JOIN users "
    "USING (user_id) GROUP BY region",
    "SELECT plan, MEDIAN(age) AS m FROM users GROUP BY plan",
    "SELECT region FROM regions",
]


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


def _keys(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


@pytest.mark.parametrize("sql", QUERIES, ids=["counted", "quantile", "public"])
def test_answers_match_the_schema_exactly(c: httpx.Client, sql: str) -> None:
    for _ in range(2):  # the second is a replay of the first (or public again)
        r = ask(c, {"sql": sql, "epsilon": 1.0})
        assert r.status_code == 200, r.text
        privacy: dict[str, Any] = r.json()["privacy"]
        assert set(privacy) == _keys(Privacy)
        Privacy.model_validate(privacy)  # extra keys are forbidden: a drift fails here
        if privacy["clipping"] is not None:
            assert set(privacy["clipping"]) == _keys(Clipping)
        for q in privacy["quantiles"]:
            assert set(q) == _keys(QuantileColumn)
    if "COUNT" in sql:
        assert privacy["clipping"] is not None and privacy["cached"] is True
    if "MEDIAN" in sql:
        assert privacy["quantiles"]
    if "regions" in sql:
        assert privacy["exact"]


def test_the_served_openapi_lists_every_field(c: httpx.Client) -> None:
    spec = c.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert set(schemas["Privacy"]["properties"]) == _keys(Privacy)
    assert set(schemas["Clipping"]["properties"]) == _keys(Clipping)
    assert set(schemas["QuantileColumn"]["properties"]) == _keys(QuantileColumn)
