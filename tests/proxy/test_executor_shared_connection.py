"""The DuckDB executor never calls its shared connection from a request thread.

DuckDB 2.0 refuses a call on a connection another thread is using ("Resource In Use
Error: connection is busy with another call"). The executor read the catalog's column
types for its TRY guards on the shared connection, lazily, on the first core with a TRY:
two fresh-server requests doing that at once answered one of them 500 (or a misleading
400 "the query cannot run"), a failure that depended on timing (a stress hunt,
2026-12-05)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb
import pytest

from proxy.execute import DuckDBExecutor
from proxy.policy import Policy, load_policy
from tests.server.conftest import write_policy


@pytest.fixture
def policy(tmp_path: Path, dataset: Path) -> Policy:
    return load_policy(write_policy(tmp_path, dataset, cap=100.0))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sample_data.generate import generate

    return generate(
        tmp_path_factory.mktemp("data") / "usage.duckdb", people=50, prompts=200, seed=5
    )


def test_column_types_while_the_shared_connection_is_busy(policy: Policy) -> None:
    executor = DuckDBExecutor(policy)
    started = threading.Event()
    ended: list[BaseException] = []

    def busy() -> None:
        started.set()
        try:
            executor._db.execute(
                "SELECT COUNT(*) FROM range(2000000000) a WHERE a.range % 7 = 3"
            ).fetchall()
        except BaseException as error:
            ended.append(error)

    thread = threading.Thread(target=busy)
    thread.start()
    started.wait()
    time.sleep(0.2)
    try:
        assert ("main", "users") in executor.column_types()
    finally:
        executor._db.interrupt()
        thread.join()
        executor.close()
    # The long query was still running when the types were read, and was interrupted.
    assert len(ended) == 1 and isinstance(ended[0], duckdb.InterruptException), ended


def _first_guards_at_once(policy: Policy, n: int) -> list[BaseException]:
    """``n`` threads write their first TRY cores on a fresh executor (a fresh worker's:
    no types read yet) at the same moment; what they raised."""
    executor = DuckDBExecutor(policy)
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def guard(i: int) -> None:
        barrier.wait()
        try:
            executor.guard(f"SELECT SUM(TRY(age * {i + 2})) AS s FROM users")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guard, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    executor.close()
    return errors


def test_first_guards_on_many_threads_at_once(policy: Policy) -> None:
    for _ in range(10):
        errors = _first_guards_at_once(policy, 8)
        assert not errors, errors
