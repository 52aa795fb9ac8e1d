"""The ledger accepts only partitions the policy defines (issue #19 §2), through the real
HTTP app and the CLI.

The ledger composes sibling partitions in parallel, as if they held disjoint people.
That is sound only for values of the population's declared partition column (each
person has exactly one): ``users/plan=free`` and ``users/region=north`` share people, so
charges on both let one person spend more than the cap. So ``POST /v1/charges`` must
refuse, with a 4xx and no ledger change, any partition that is not the declared column
(spelled canonically) with a value in its domain; and ``verify`` — over HTTP and as
``dpsql ledger verify`` — must fail on a ledger that already holds such an event, naming
it. The tainted ledger is written with ``SQLiteLedger.external`` directly (the ledger
knows no policy), as an older version of dpsql would have written it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from accounting.ledger import Partitioning, PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
from sample_data.generate import generate
from tests.reliability.server_harness import (
    Key,
    Server,
    cli_verify,
    error_code,
    fresh_keys,
    ledger_path,
    running_server,
    write_keyed_policy,
)

REASON = "issue #19 §2: the ledger accepts partitions the policy does not define"
UNDEFINED = (
    "users/plan=free",  # another column: shares people with every region
    "users/REGION=north",  # the declared column, not spelled canonically
    "users/region=nowhere",  # a value outside the column's domain
    "users/region=north/plan=free",  # a partition of a partition
)
TAINT = "users/plan=free"


class UndefinedPartitionAccepted(Exception):
    """The door or verify accepted a partition the policy does not define."""


@pytest.fixture(scope="module")
def pl_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(
        tmp_path_factory.mktemp("pl-data") / "usage.duckdb", people=300, prompts=3000, seed=5
    )


@pytest.fixture(scope="module")
def pl_server(
    tmp_path_factory: pytest.TempPathFactory, pl_data: Path
) -> Iterator[tuple[Server, dict[str, Key]]]:
    keys = fresh_keys()
    policy = write_keyed_policy(tmp_path_factory.mktemp("pl"), pl_data, keys, cap=4.0)
    with running_server(policy) as server:
        yield server, keys


def ledger_state(client: httpx.Client, admin: Key) -> tuple[list[int], Any]:
    """Every event id and the whole budget, as an admin sees them."""
    events = client.get("/v1/ledger", params={"limit": 1000}, headers=admin.headers())
    budget = client.get("/v1/budget", headers=admin.headers())
    assert events.status_code == 200 and budget.status_code == 200, (events.text, budget.text)
    return [e["id"] for e in events.json()["events"]], budget.json()


def charge(client: httpx.Client, admin: Key, population: str) -> httpx.Response:
    body = {"population": population, "rho": 1e-4, "note": "neighbour-suite partition test"}
    return client.post("/v1/charges", json=body, headers=admin.headers())


def test_a_defined_partition_is_accepted(pl_server: tuple[Server, dict[str, Key]]):
    server, keys = pl_server
    with server.client() as client:
        before_ids, before = ledger_state(client, keys["admin"])
        response = charge(client, keys["admin"], "users/region=north")
        assert response.status_code == 200, response.text
        after_ids, after = ledger_state(client, keys["admin"])
    assert after_ids == [*before_ids, response.json()["event_id"]]
    assert after != before


@pytest.mark.parametrize("population", UNDEFINED)
def test_an_undefined_partition_is_refused(
    population: str, pl_server: tuple[Server, dict[str, Key]]
):
    server, keys = pl_server
    with server.client() as client:
        before = ledger_state(client, keys["admin"])
        response = charge(client, keys["admin"], population)
        after = ledger_state(client, keys["admin"])
    if response.status_code == 200:
        raise UndefinedPartitionAccepted(f"{population}: {response.text[:300]}")
    assert 400 <= response.status_code < 500, response.text
    assert not error_code(response).startswith("!"), response.text
    assert after == before


@pytest.fixture(scope="module")
def pl_tainted(
    tmp_path_factory: pytest.TempPathFactory, pl_data: Path
) -> tuple[Path, dict[str, Key]]:
    """A policy whose ledger already holds an external event on ``users/plan=free``."""
    keys = fresh_keys()
    policy = write_keyed_policy(tmp_path_factory.mktemp("pl-taint"), pl_data, keys, cap=4.0)
    ledger = SQLiteLedger(ledger_path(policy))
    try:
        # An older policy that partitioned users by plan wrote this event; the demo
        # policy partitions by region, so the event names an undefined partition now.
        ledger.register(
            PopulationSpec("users", 4.0, 1e-6, Partitioning("plan", frozenset({"free"})))
        )
        ledger.external(TAINT, zcdp_curve(1e-4), analyst="old-version", note="undefined partition")
        assert ledger.verify().ok  # under the policy that wrote it
    finally:
        ledger.close()
    return policy, keys


def test_http_verify_names_an_undefined_partition(pl_tainted: tuple[Path, dict[str, Key]]):
    policy, keys = pl_tainted
    try:
        with running_server(policy) as server, server.client() as client:
            response = client.post("/v1/ledger/verify", headers=keys["admin"].headers())
    except RuntimeError as error:  # refusing to start, naming the event, also holds
        assert TAINT in str(error), error
        return
    if response.status_code == 200 and response.json()["ok"]:
        raise UndefinedPartitionAccepted(f"verify passed: {response.text[:300]}")
    assert TAINT in response.text, response.text


def test_cli_verify_names_an_undefined_partition(pl_tainted: tuple[Path, dict[str, Key]]):
    policy, _ = pl_tainted
    done = cli_verify(policy)
    if done.returncode == 0:
        raise UndefinedPartitionAccepted(f"dpsql ledger verify passed: {done.stdout[:300]}")
    assert TAINT in done.stdout + done.stderr, (done.stdout, done.stderr)
