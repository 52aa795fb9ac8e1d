"""The executor's time limit interrupts a long query, and only that query."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.errors import DPSQLError
from proxy.execute import DuckDBExecutor
from proxy.policy import parse_policy

PUMS_DIR = Path(__file__).resolve().parents[2] / "sample_data" / "pums"
SLOW = "SELECT SUM(HASH(i)) AS s FROM range(100000000000) AS t(i)"
FAST = "SELECT COUNT(*) AS n FROM pums.pums"


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBExecutor]:
    tmp = tmp_path_factory.mktemp("timeout")
    text = (PUMS_DIR / "policy.toml").read_text()
    text = text.replace('"PUMS_pid.csv"', f'"{PUMS_DIR / "PUMS_pid.csv"}"')
    text = text.replace("[proxy]\n", "[proxy]\nquery_timeout_s = 0.3\n", 1)
    ex = DuckDBExecutor(parse_policy(text, base_dir=tmp))
    yield ex
    ex.close()


def test_a_long_query_is_stopped_at_the_limit(executor: DuckDBExecutor) -> None:
    for _ in range(2):  # the watchdog keeps working after it has fired once
        start = time.monotonic()
        with pytest.raises(DPSQLError) as caught:
            executor.run(SLOW)
        assert caught.value.code == "timeout"
        assert time.monotonic() - start < 5.0


def test_fast_queries_are_not_interrupted_by_an_expired_neighbour(
    executor: DuckDBExecutor,
) -> None:
    errors: list[str] = []

    def slow() -> None:
        try:
            executor.run(SLOW)
        except DPSQLError as error:
            errors.append(error.code)

    thread = threading.Thread(target=slow)
    thread.start()
    answered = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        assert int(executor.run(FAST)["n"][0]) == 1000
        answered += 1
    thread.join(10)
    assert errors == ["timeout"]
    assert answered > 10


def test_the_watchdog_wakes_only_for_a_sooner_deadline() -> None:
    """Equal timeouts arm later deadlines, which never wake the watchdog's thread (each
    wake-up costs a query a thread switch); a sooner deadline still fires on time."""
    from proxy.execute import _Watchdog

    dog = _Watchdog()
    wakes = 0
    notify = dog._wake.notify

    def counted(n: int = 1) -> None:
        nonlocal wakes
        wakes += 1
        notify(n)

    dog._wake.notify = counted  # type: ignore[method-assign]
    first = dog.arm(60.0, lambda: None)
    deadline = time.monotonic() + 5.0
    while dog._wakes_at == -float("inf") and time.monotonic() < deadline:
        time.sleep(0.01)  # the thread is now waiting for the first deadline
    before = wakes
    tokens = [dog.arm(60.0, lambda: None) for _ in range(50)]
    assert wakes == before
    fired = threading.Event()
    start = time.monotonic()
    dog.arm(0.05, fired.set)
    assert fired.wait(5.0)
    assert time.monotonic() - start < 5.0
    for token in (first, *tokens):
        dog.disarm(token)
