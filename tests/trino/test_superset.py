"""Apache Superset 6.1 against dpsql's Trino door, driven through Superset's REST API.

Superset runs in its own venv (``build/superset-venv``, built on first use) with SQLite
metadata; it registers dpsql as a Trino database over HTTPS (the test certificate as the
database's root certificate), creates a dataset on the private table ``prompts`` and
asks chart data. A recording relay between the two lists every statement Superset sent
and its outcome (printed with ``-s``; README's BI section quotes the list).

Slow (Superset's install and start-up take about a minute): ``make bi-check``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sample_data.generate import generate
from tests.server.conftest import KEYS, write_policy
from tests.trino.conftest import TlsServer, make_certificate, start_tls_server, stop
from tests.trino.recorder import Exchange, Recorder
from tests.trino.superset_harness import SupersetApi, start_superset, stop_superset

pytestmark = pytest.mark.slow

YEARS = "2022-01-01 : 2026-01-01"


@dataclass
class Setup:
    dpsql: TlsServer
    recorder: Recorder
    api: SupersetApi
    database_id: int
    dataset_id: int
    artifacts: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("superset")
    db = generate(folder / "usage.duckdb", people=2000, prompts=20000, seed=3)
    policy = write_policy(folder, db, cap=100.0)
    cert = make_certificate(folder)
    dpsql = start_tls_server(policy, cert)
    superset = None
    api = None
    try:
        with Recorder(dpsql.url, cert, cert.with_name("key.pem")) as recorder:
            # requests lets REQUESTS_CA_BUNDLE override the trino client's own `verify`.
            env = {"REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": ""}
            superset = start_superset(folder, extra_env=env)
            api = SupersetApi(superset.url)
            uri = f"trino://ana:{KEYS['ana'][1]}@127.0.0.1:{recorder.port}/dpsql/main"
            r = api.post(
                "/api/v1/database/test_connection/",
                {"database_name": "dpsql", "sqlalchemy_uri": uri, "server_cert": cert.read_text()},
            )
            assert r.status_code == 200, r.text
            r = api.post(
                "/api/v1/database/",
                {
                    "database_name": "dpsql",
                    "sqlalchemy_uri": uri,
                    "server_cert": cert.read_text(),
                    "expose_in_sqllab": True,
                },
            )
            assert r.status_code == 201, r.text
            database_id = int(r.json()["id"])
            # what the dataset editor asks before a dataset exists
            for path in (
                f"/api/v1/database/{database_id}/catalogs/",
                f"/api/v1/database/{database_id}/schemas/?q=(force:!t)",
                f"/api/v1/database/{database_id}/tables/?q=(force:!t,schema_name:main)",
                f"/api/v1/database/{database_id}/table_metadata/?name=prompts&schema=main",
            ):
                r = api.get(path)
                assert r.status_code == 200, (path, r.text)
            r = api.post(
                "/api/v1/dataset/",
                {"database": database_id, "schema": "main", "table_name": "prompts"},
            )
            assert r.status_code == 201, r.text
            yield Setup(dpsql, recorder, api, database_id, int(r.json()["id"]), folder)
    finally:
        if api is not None:
            api.close()
        if superset is not None:
            stop_superset(superset)
        stop(dpsql)


def chart(setup: Setup, *queries: dict[str, Any], result_type: str = "full") -> Any:
    body = {
        "datasource": {"id": setup.dataset_id, "type": "table"},
        "force": True,
        "queries": list(queries),
        "result_format": "json",
        "result_type": result_type,
    }
    return setup.api.post("/api/v1/chart/data", body)


def last(setup: Setup) -> Exchange:
    return setup.recorder.exchanges[-1]


BAR = {"columns": ["model"], "metrics": ["count"], "orderby": [["count", False]], "row_limit": 1000}


def axis(grain: str) -> dict[str, Any]:
    return {
        "columnType": "BASE_AXIS",
        "sqlExpression": "ts",
        "label": "ts",
        "expressionType": "SQL",
        "timeGrain": grain,
    }


TIME_SERIES = {
    "columns": [axis("P1Y")],
    "metrics": ["count"],
    "filters": [{"col": "ts", "op": "TEMPORAL_RANGE", "val": YEARS}],
    "orderby": [["count", False]],
    "row_limit": 10000,
}


def rows_of(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    result = response.json()["result"][0]
    assert not result.get("error"), result
    return list(result["data"])


def test_bar_chart_is_answered_by_dpsql_with_a_charge_then_from_its_cache(setup: Setup):
    before = setup.dpsql.spent()
    first = rows_of(chart(setup, BAR))
    assert {r["model"] for r in first} == {"small", "medium", "large"}
    assert all(isinstance(r["count"], int) for r in first)
    assert last(setup).outcome == "answered (charged)"
    charged = setup.dpsql.spent()
    assert charged > before
    second = rows_of(chart(setup, BAR))
    assert second == first  # the same released numbers
    assert last(setup).outcome == "answered (cached)"
    assert setup.dpsql.spent() == charged


def test_time_series_with_a_time_range_is_answered_then_cached(setup: Setup):
    before = setup.dpsql.spent()
    first = rows_of(chart(setup, TIME_SERIES))
    assert first and all(isinstance(r["count"], int) for r in first)
    assert "CAST(" in last(setup).sql and last(setup).outcome == "answered (charged)"
    charged = setup.dpsql.spent()
    assert charged > before
    assert rows_of(chart(setup, TIME_SERIES)) == first
    assert last(setup).outcome == "answered (cached)"
    assert setup.dpsql.spent() == charged


def test_series_limit_time_series_is_answered(setup: Setup):
    query = {
        **TIME_SERIES,
        "columns": [axis("P1Y"), "model"],
        "series_columns": ["model"],
        "series_limit": 2,
        "series_limit_metric": "count",
    }
    rows = rows_of(chart(setup, query))
    assert rows and len({r["model"] for r in rows}) <= 2
    assert "series_limit" in last(setup).sql and last(setup).outcome.startswith("answered")


def test_other_chart_requests_answer_or_fail_with_dpsqls_message(setup: Setup):
    """Every other request a dashboard makes; what dpsql refuses is listed (the test
    asserts only that each refusal is a Trino error carrying dpsql's code)."""
    requests = {
        "big number": {"metrics": ["count"], "row_limit": 10000},
        "big number with filters": {
            "columns": [axis("P1D")],
            "metrics": [
                {"expressionType": "SQL", "sqlExpression": "SUM(tokens_out)", "label": "SUM(tokens_out)"}
            ],
            "filters": [
                {"col": "flagged", "op": "==", "val": False},
                {"col": "model", "op": "IN", "val": ["small", "large"]},
            ],
            "extras": {"where": "(latency_ms < 4000)"},
            "row_limit": 10000,
        },
        "filter values": {
            "columns": ["model"],
            "metrics": [],
            "orderby": [["model", True]],
            "row_limit": 1000,
        },
        "range filter": {
            "metrics": [
                {"expressionType": "SQL", "sqlExpression": "MIN(tokens_in)", "label": "min"},
                {"expressionType": "SQL", "sqlExpression": "MAX(tokens_in)", "label": "max"},
            ],
            "row_limit": 1000,
        },
        "raw records": {"columns": ["prompt_id", "ts", "model"], "orderby": [["ts", False]],
                        "row_limit": 100},
    }  # fmt: skip
    outcomes = {}
    for name, query in requests.items():
        response = chart(setup, query)
        outcomes[name] = (response.status_code, last(setup))
    samples = chart(setup, {"row_limit": 50}, result_type="samples")
    outcomes["samples"] = (samples.status_code, last(setup))
    values = setup.api.get(f"/api/v1/datasource/table/{setup.dataset_id}/column/model/values/")
    outcomes["column values"] = (values.status_code, last(setup))
    for name, (status, exchange) in outcomes.items():
        print(f"\n[{name}] HTTP {status}: {exchange.outcome} {exchange.error_name}")
        if exchange.outcome == "refused":
            assert "[dpsql " in exchange.message, exchange
        else:
            assert status == 200, (name, exchange)
    assert outcomes["big number"][1].outcome.startswith("answered")
    assert outcomes["raw records"][1].error_name == "UNSUPPORTED_SQL"


def test_zz_every_statement_superset_sent_is_listed(setup: Setup):
    """Runs last: the full list of statements and outcomes, saved and printed."""
    exchanges = setup.recorder.exchanges
    assert exchanges
    lines = []
    for e in exchanges:
        sql = " ".join(e.sql.split())
        detail = (
            f"{e.error_name}: {e.message[:160]}" if e.outcome == "refused" else f"{e.rows} rows"
        )
        lines.append(f"- {e.outcome} ({detail}): {sql}")
    refused = [line for line in lines if line.startswith("- refused")]
    (setup.artifacts / "superset-statements.md").write_text("\n".join(lines) + "\n")
    print(
        f"\n{len(exchanges)} statements from Superset, {len(refused)} refused:\n" + "\n".join(lines)
    )
    print(json.dumps({"statements": len(exchanges), "refused": len(refused)}))
