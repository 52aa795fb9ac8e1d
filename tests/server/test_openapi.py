"""schemathesis against /openapi.json: generated requests on every operation never get a
500, and every response matches its documented status, content type and schema.

The number of examples per operation is bounded for CI; the server runs on its own
ledger, as an admin, so the admin routes are exercised too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import Server, auth, start_server, stop_server, write_policy

MAX_EXAMPLES = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("fuzz")
    srv = start_server(write_policy(folder, dataset), env={"DPSQL_RATE_LIMIT": "off"})
    try:
        yield srv
    finally:
        stop_server(srv)


def test_generated_requests_match_the_schema(fuzz_server: Server) -> None:
    schema = schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {op.label for op in operations}
    assert {
        "POST /v1/query",
        "POST /v1/explain",
        "GET /v1/budget",
        "GET /v1/schema",
        "GET /v1/ledger",
        "POST /v1/ledger/verify",
        "POST /v1/charges",
        "PUT /v1/populations/{name}/cap",
        "GET /v1/pages/{cursor}",
        "GET /healthz",
        "GET /metrics",
    } <= labels
    headers = auth("adm")
    for op in operations:

        @given(case=op.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            response = case.call(base_url=fuzz_server.url, headers=headers, timeout=30)
            case.validate_response(response, checks=CHECKS, headers=headers)

        run()
