"""The ledger under many processes, many threads, and SIGKILL in the middle of charging,
on each store (``store``: SQLite and PostgreSQL; see tests/accounting/conftest.py)."""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accounting.ledger import BudgetExhausted, Partitioning, PopulationSpec
from accounting.rdp import ZERO, zcdp_curve
from tests.accounting.stores import StoreTarget

ROOT = Path(__file__).resolve().parents[2]
DELTA = 1e-6
CAP = 1.0
RHO = 0.0002  # about 120 charges fit under ε = 1 at δ = 1e-6
NORTH, SOUTH = "users/region=north", "users/region=south"
REGIONS = Partitioning("region", frozenset({"north", "south"}))


def expected_admissions(rho: float = RHO, cap: float = CAP) -> int:
    """How many equal charges a single sequential ledger admits (same float arithmetic)."""
    total, n, c = ZERO, 0, zcdp_curve(rho)
    while (total + c).epsilon(DELTA) <= cap:
        total, n = total + c, n + 1
    return n


def charge_until_refused(
    store: StoreTarget, rho: float, start: Any, out: Any, ready: Any, turn: Any
) -> None:
    """Worker (module level so that spawn can import it)."""
    lg = store.open()
    ready.put(os.getpid())
    start.wait(60)
    ids: list[int] = []
    fp = str(os.getpid())
    try:
        try:
            ids.append(lg.charge("users", zcdp_curve(rho), analyst="w", fingerprint=fp).event_id)
        finally:
            # Every worker has charged once before any goes on: on a loaded machine the
            # first one scheduled could otherwise spend the whole budget alone.
            turn.wait(120)
        while True:
            ids.append(lg.charge("users", zcdp_curve(rho), analyst="w", fingerprint=fp).event_id)
    except BudgetExhausted:
        pass
    finally:
        lg.close()
        out.put(ids)


def _store_facts(path: Path | StoreTarget) -> tuple[int, int]:
    """(charge events, charges counted by the latest totals rows); asserts that no charge
    lacks its totals rows."""
    store = path if isinstance(path, StoreTarget) else StoreTarget("sqlite", str(path))
    charges, counted, _ = store.facts()
    return charges, counted


def _processes_charge_until_refused(
    store: StoreTarget, rho: float, worker: Callable[..., None] = charge_until_refused
) -> None:
    """Eight processes running ``worker`` (charge_until_refused's arguments) admit exactly
    what one sequential ledger would, and the store verifies."""
    lg = store.open()
    lg.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    ctx = mp.get_context("spawn")
    start, out, ready, turn = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Barrier(8)
    procs = [
        ctx.Process(target=worker, args=(store, rho, start, out, ready, turn)) for _ in range(8)
    ]
    for p in procs:
        p.start()
    # Start together only once every worker has imported and opened the store: under
    # load a fixed sleep let the first worker spend the whole budget alone.
    for _ in procs:
        ready.get(timeout=120)
    start.set()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    ids = [i for r in results for i in r]
    assert len(ids) == len(set(ids)) == expected_admissions(rho)
    assert all(results)  # the processes really did interleave
    assert lg.spent("users").epsilon <= CAP
    charges, counted = _store_facts(store)
    assert charges == counted == len(ids)
    report = lg.verify()
    assert report.ok, report.problems
    with pytest.raises(BudgetExhausted):
        lg.charge("users", zcdp_curve(rho), analyst="a", fingerprint="f")
    lg.close()


def test_eight_processes_never_overspend(store: StoreTarget):
    _processes_charge_until_refused(store, RHO)


@pytest.mark.slow
def test_eight_processes_larger_run(store: StoreTarget):
    _processes_charge_until_refused(store, RHO / 10)


def test_threads_mixing_root_and_partitions(store: StoreTarget):
    lg = store.open()
    lg.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    targets: list[Any] = ["users", NORTH, SOUTH, (NORTH, SOUTH)] * 2
    receipts: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(targets))

    def work(pop: Any) -> None:
        barrier.wait()
        mine: list[int] = []
        try:
            while True:
                mine.append(lg.charge(pop, zcdp_curve(RHO), analyst="t", fingerprint="f").event_id)
        except BudgetExhausted:
            pass
        with lock:
            receipts.extend(mine)

    threads = [threading.Thread(target=work, args=(p,)) for p in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(receipts) == len(set(receipts))
    for pop in ("users", NORTH, SOUTH):
        assert lg.spent(pop).epsilon <= CAP
    # Every partition ends up full: the last admissible charge of a sequential run.
    for pop in (NORTH, SOUTH):
        assert lg.spent(pop).curve.values[0] == pytest.approx(
            expected_admissions() * RHO * 1.1, rel=1e-9
        )
    charges, _, _ = store.facts()
    assert charges == len(receipts)
    report = lg.verify()
    assert report.ok, report.problems
    lg.close()


# --- crash safety --------------------------------------------------------------------------

_CHILD = """
import sys
from accounting.ledger import Partitioning, PopulationSpec
from accounting.rdp import zcdp_curve
from tests.accounting.stores import StoreTarget
lg = StoreTarget(sys.argv[1], sys.argv[2]).open()
lg.register(PopulationSpec("users", 1e6, 1e-6, Partitioning("region", frozenset({"north", "south"}))))
targets = ["users", "users/region=north", ("users/region=north", "users/region=south")]
print("ready", flush=True)
i = 0
while True:
    lg.charge(targets[i % 3], zcdp_curve(1e-7), 1e-12 * (i % 2), analyst="c", fingerprint=str(i))
    i += 1
"""


def _kill_mid_charge(store: StoreTarget) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, store.kind, store.location],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.02 + secrets.randbelow(300) / 1000)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL


def _crash_rounds(store: StoreTarget, rounds: int) -> None:
    lg = store.open()
    lg.register(PopulationSpec("users", 1e6, DELTA, REGIONS))
    lg.close()
    last = 0
    for _ in range(rounds):
        _kill_mid_charge(store)
        again = store.open()
        report = again.verify()
        assert report.ok, report.problems
        charges, counted, named = store.facts()
        # Root charges count in the root's total, the others in each partition named.
        assert counted == named
        assert charges >= last
        last = charges
        # The store still takes charges after the crash.
        again.charge("users", zcdp_curve(1e-7), analyst="a", fingerprint="after")
        again.close()
    assert last > rounds  # the child did write between kills


def test_sigkill_during_charges_leaves_a_consistent_store(store: StoreTarget):
    _crash_rounds(store, 3)


@pytest.mark.slow
def test_sigkill_during_charges_many_times(store: StoreTarget):
    _crash_rounds(store, 25)
