"""The writers' turn of the SQLite ledger (``accounting/writer_gate.py``): an flock on a
file beside the store, so that a process waiting to write is woken when another lets
go instead of polling SQLite's lock (issue 18).

flock locks belong to an open file, so two gates on one path exclude each other inside
one process too; the tests use that, and a forked child for the one claim about
processes. No assertion is timed: a wait that must block is released by the test, and a
wait that must end does so by its time limit.
"""

from __future__ import annotations

import fcntl
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from accounting import store_sqlite, writer_gate
from accounting.ledger import LedgerUnavailable, PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
from accounting.writer_gate import SUFFIX, GateTimeout, WriterGate
from tests.accounting.stores import StoreTarget
from tests.accounting.test_ledger_concurrency import (
    RHO,
    _processes_charge_until_refused,
    charge_until_refused,
)


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[Callable[[int], list[WriterGate]]]:
    """``gates(n)``: n gates on one store path, closed after the test."""
    made: list[WriterGate] = []

    def make(n: int) -> list[WriterGate]:
        new = [WriterGate(str(tmp_path / "s")) for _ in range(n)]
        made.extend(new)
        return new

    yield make
    for gate in made:
        gate.close()


def _charges(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM events WHERE kind = 'charge'").fetchone()[0])


def test_one_turn_at_a_time(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    a, b = gates(2)
    assert a.enter(1.0)
    # The message gives the caller's whole limit, not what was left after asking.
    with pytest.raises(GateTimeout, match=r"held the ledger's write turn for 0\.2 s"):
        b.enter(0.2)
    a.leave()
    assert b.enter(1.0)
    with pytest.raises(GateTimeout):
        a.enter(0.2)
    b.leave()


def test_a_waiter_gets_the_turn_when_the_holder_lets_go(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    a, b, c = gates(3)
    assert a.enter(1.0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(b.enter(30.0)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got  # blocked while a holds the turn
    a.leave()
    waiter.join(30)
    assert got == [True]
    with pytest.raises(GateTimeout):
        c.enter(0.2)  # b holds it now
    b.leave()
    assert c.enter(1.0)
    c.leave()


def test_an_abandoned_wait_hands_the_turn_back(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    a, b, c = gates(3)
    assert a.enter(1.0)
    with pytest.raises(GateTimeout):
        b.enter(0.1)  # b's waiting thread is still blocked in flock
    with pytest.raises(GateTimeout):
        b.enter(0.1)  # a second abandoned wait replaces the first
    a.leave()
    # b's thread takes the turn for the abandoned wait and lets it go at once.
    assert c.enter(30.0)
    c.leave()
    # And b itself waits normally again.
    assert b.enter(30.0)
    b.leave()


def test_close_during_an_abandoned_wait(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    a, b = gates(2)
    assert a.enter(1.0)
    with pytest.raises(GateTimeout):
        b.enter(0.1)
    b.close()
    b.close()  # twice is harmless
    a.leave()
    assert b.enter(1.0) is False  # a closed gate takes no turns
    assert a.enter(1.0)
    a.leave()


def test_a_forked_child_takes_its_own_turn(tmp_path: Path) -> None:
    """The child must not share the parent's open file: with it, flock would hand the
    child the turn the parent holds."""
    gate = WriterGate(str(tmp_path / "s"))
    assert gate.enter(1.0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it could take the turn, then exit
        os.close(read)
        try:
            took = gate.enter(0.3)
            verdict = b"took" if took else b"none"
        except GateTimeout:
            verdict = b"wait"
        os.write(write, verdict)
        os._exit(0)
    os.close(write)
    verdict = os.read(read, 4)
    os.close(read)
    os.waitpid(pid, 0)
    assert verdict == b"wait"
    gate.leave()
    gate.close()


def test_without_a_turn_file_the_store_still_works(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    (tmp_path / ("ledger.sqlite" + SUFFIX)).mkdir()  # the name is taken by a folder
    assert WriterGate(str(path)).enter(1.0) is False
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", 10.0, 1e-6))
    lg.charge("users", zcdp_curve(0.01), analyst="a", fingerprint="q")
    assert lg.verify().ok
    lg.close()
    assert _charges(path) == 1


def test_the_store_writes_only_in_its_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A charge waits for the turn another process holds, is refused before writing
    anything when the turn does not come within the store's time limit, and goes
    through once the turn is free."""
    monkeypatch.setattr(store_sqlite, "_TURNS_ABOVE_SYNC_S", 0.0)  # every sync is slow
    path = tmp_path / "ledger.sqlite"
    lg = SQLiteLedger(path, timeout_s=0.3)
    lg.register(PopulationSpec("users", 10.0, 1e-6))
    other = WriterGate(str(path))
    assert other.enter(1.0)
    with pytest.raises(LedgerUnavailable, match="cannot lock the ledger store"):
        lg.charge("users", zcdp_curve(0.01), analyst="a", fingerprint="refused")
    assert _charges(path) == 0

    slow = SQLiteLedger(path, timeout_s=30.0)
    done: list[int] = []
    charging = threading.Thread(
        target=lambda: done.append(
            slow.charge("users", zcdp_curve(0.01), analyst="a", fingerprint="q").event_id
        )
    )
    charging.start()
    charging.join(0.3)
    assert charging.is_alive() and not done  # waiting for the turn
    assert _charges(path) == 0
    other.leave()
    charging.join(30)
    assert len(done) == 1 and _charges(path) == 1
    assert slow.verify().ok
    for closing in (slow, lg, other):
        closing.close()


def test_a_wait_abandoned_before_the_thread_took_it(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    """A wait given up at once leaves no request behind for the thread to take later
    (it would let go of the turn its caller has taken since)."""
    a, b, c = gates(3)
    for _ in range(20):
        assert a.enter(1.0)
        with pytest.raises(GateTimeout):
            b.enter(0.0)
        a.leave()
        assert b.enter(30.0)
        with pytest.raises(GateTimeout):
            c.enter(0.05)  # b holds the turn, whatever b's thread did meanwhile
        b.leave()


def test_turns_are_taken_only_while_syncs_are_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns make writers alternate, which pays only when it overlaps a slow sync: a
    store whose syncs are fast writes without one (SQLite's lock alone), and starts
    taking turns once its syncs have become slow."""
    path = tmp_path / "ledger.sqlite"
    lg = SQLiteLedger(path, timeout_s=0.3)
    lg.register(PopulationSpec("users", 10.0, 1e-6))
    other = WriterGate(str(path))
    assert other.enter(1.0)
    monkeypatch.setattr(store_sqlite, "_TURNS_ABOVE_SYNC_S", math.inf)
    for i in range(3):  # no sync is that slow: the turn another holds does not matter
        lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint=f"fast {i}")
    assert _charges(path) == 3

    monkeypatch.setattr(store_sqlite, "_TURNS_ABOVE_SYNC_S", 1e-3)
    real = os.fdatasync

    def slow(fd: int) -> None:
        time.sleep(5e-3)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow)
    written = 3
    with pytest.raises(LedgerUnavailable, match="cannot lock the ledger store"):
        # The moving mean of the syncs passes 1 ms within a few charges of 5 ms each.
        for i in range(10):
            lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint=f"slow {i}")
            written += 1
    # At most three more went through (none if the real syncs so far were slow already).
    assert written - 3 <= 3
    assert _charges(path) == written  # the refused charge wrote nothing
    other.leave()
    lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="in turn")
    assert _charges(path) == written + 1
    assert lg.verify().ok
    lg.close()
    other.close()


def _charging_in_turns(*args: Any) -> None:
    """charge_until_refused in a process that takes a turn for every write (module
    level, for spawn): whatever this disk's syncs cost, the turns are exercised."""
    store_sqlite._TURNS_ABOVE_SYNC_S = 0.0
    charge_until_refused(*args)


def test_eight_processes_taking_turns_never_overspend(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    _processes_charge_until_refused(
        StoreTarget("sqlite", str(path)), RHO, worker=_charging_in_turns
    )
    assert (tmp_path / ("ledger.sqlite" + SUFFIX)).exists()  # the turns were taken


# --- faults found in review (2026-12-02) ---------------------------------------------------


def test_a_forked_childs_copy_does_not_keep_its_parents_turn(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    """flock belongs to the open file, which fork shares: a child that kept its copy kept
    the turn alive after the parent let go of its own descriptor (by dying, or here by
    closing the gate), and every writer waited for the child to exit."""
    holder, other = gates(2)
    assert holder.enter(1.0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child lives on without touching the ledger
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        holder.close()  # as a parent's death would: its descriptor is gone
        assert other.enter(5.0)  # the child's copy was closed at the fork
        other.leave()
    finally:
        os.write(write, b"x")
        os.close(write)
        os.waitpid(pid, 0)


class _Interrupted(BaseException):
    """As KeyboardInterrupt: not an Exception, so ``except Exception`` misses it."""


def test_an_interrupted_wait_gives_its_turn_back(
    gates: Callable[[int], list[WriterGate]],
) -> None:
    """A wait ended by an exception (a signal handler's, KeyboardInterrupt) is given up
    like one that timed out: the turn its thread takes later goes back, rather than
    staying with a caller that will never leave it."""
    import signal

    holder, waiting, third = gates(3)
    assert holder.enter(1.0)

    def interrupt(signum: int, frame: Any) -> None:
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(_Interrupted):
            waiting.enter(30.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    holder.leave()
    assert third.enter(10.0)  # the interrupted wait's thread let the turn go
    third.leave()
    assert waiting.enter(10.0)  # and the interrupted gate still waits normally
    waiting.leave()


@pytest.mark.parametrize(("spin_s", "by_thread"), [(60.0, False), (0.05, True)])
def test_a_writer_asks_for_spin_s_then_waits_on_its_thread(
    gates: Callable[[int], list[WriterGate]],
    monkeypatch: pytest.MonkeyPatch,
    spin_s: float,
    by_thread: bool,
) -> None:
    """A writer that finds the turn taken asks again for ``SPIN_S`` before it hands the
    wait to the waiting thread: a turn let go meanwhile is taken by the asking loop with
    no thread started (two wake-ups saved per hand-over); past ``SPIN_S`` the thread
    waits in flock and takes it."""
    monkeypatch.setattr(writer_gate, "SPIN_S", spin_s)  # 60 s: asks for the whole test
    holder, waiting = gates(2)
    assert holder.enter(1.0)
    got: list[bool] = []
    caller = threading.Thread(target=lambda: got.append(waiting.enter(30.0)))
    caller.start()
    caller.join(0.5)
    assert caller.is_alive() and not got  # still waiting while the holder holds it
    if by_thread:  # past SPIN_S: wait for the thread rather than for a fixed time
        deadline = time.monotonic() + 20
        while waiting._waiter is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert (waiting._waiter is not None) == by_thread
    holder.leave()
    caller.join(30)
    assert got == [True]
    assert (waiting._waiter is not None) == by_thread
    with pytest.raises(GateTimeout):
        holder.enter(0.0)
    waiting.leave()
    assert holder.enter(1.0)
    holder.leave()


@pytest.mark.parametrize("when", ["while asking", "just after the turn was taken"])
def test_an_exception_while_asking_lets_the_turn_go(
    gates: Callable[[int], list[WriterGate]], monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A signal handler's exception can come at any point of the asking loop, also right
    after ``flock`` gave the turn and before ``enter`` returned: the turn goes back, or
    every writer would wait for a caller that never leaves it."""
    monkeypatch.setattr(writer_gate, "SPIN_S", 60.0)
    holder, asking, third = gates(3)
    assert holder.enter(1.0)
    real_flock = fcntl.flock
    yields = 0

    def yield_cpu() -> None:
        nonlocal yields
        yields += 1
        if yields == 3:
            if when == "while asking":
                raise _Interrupted
            holder.leave()  # the next ask takes the turn

    def flock(fd: int, operation: int) -> None:
        real_flock(fd, operation)  # BlockingIOError while the holder holds the turn
        if operation & fcntl.LOCK_NB:
            raise _Interrupted  # the turn was just taken

    monkeypatch.setattr(writer_gate.os, "sched_yield", yield_cpu)
    if when != "while asking":
        monkeypatch.setattr(writer_gate.fcntl, "flock", flock)
    with pytest.raises(_Interrupted):
        asking.enter(30.0)
    monkeypatch.undo()
    if when == "while asking":
        holder.leave()
    assert third.enter(1.0)  # nobody kept the turn
    third.leave()
    assert asking.enter(1.0)  # and the interrupted gate takes turns normally
    asking.leave()


def test_a_writer_does_not_ask_while_its_thread_is_in_an_abandoned_wait(
    gates: Callable[[int], list[WriterGate]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The abandoned wait's thread may get the turn of the same open file at any moment
    and let it go: asking meanwhile could return a turn that is then let go under the
    caller. Such a writer waits for the thread only."""
    holder, waiting = gates(2)
    assert holder.enter(1.0)
    with pytest.raises(GateTimeout):
        waiting.enter(0.5)  # its thread is still blocked in flock
    assert waiting._busy
    asked: list[float] = []
    ask = WriterGate._ask
    monkeypatch.setattr(
        WriterGate, "_ask", staticmethod(lambda fd, s: asked.append(s) or ask(fd, s))
    )
    with pytest.raises(GateTimeout):
        waiting.enter(0.1)
    assert asked == []
    holder.leave()
    assert waiting.enter(10.0)
    waiting.leave()


def test_the_wait_after_asking_gets_only_the_time_left(
    gates: Callable[[int], list[WriterGate]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_gate, "SPIN_S", 0.2)
    holder, waiting = gates(2)
    assert holder.enter(1.0)
    limits: list[float] = []
    wait = WriterGate._wait
    monkeypatch.setattr(
        WriterGate,
        "_wait",
        lambda self, fd, t, whole: limits.append(t) or wait(self, fd, t, whole),
    )
    with pytest.raises(GateTimeout, match=r"for 0\.5 s"):
        waiting.enter(0.5)
    assert len(limits) == 1 and limits[0] <= 0.5 - 0.2
    holder.leave()


@pytest.mark.parametrize("limit", [-1.0, -0.5, 0.0, math.nan])
def test_a_wait_with_no_time_left_ends_at_once_and_leaks_nothing(
    gates: Callable[[int], list[WriterGate]], limit: float
) -> None:
    holder, waiting, third = gates(3)
    assert holder.enter(1.0)
    with pytest.raises(GateTimeout):
        waiting.enter(limit)
    holder.leave()
    assert third.enter(10.0)
    third.leave()


@pytest.mark.parametrize("limit", [0.0, -1.0, math.inf, math.nan, 1e10])
def test_a_store_refuses_a_time_limit_it_cannot_keep(tmp_path: Path, limit: float) -> None:
    from accounting.ledger import InvalidRequest

    with pytest.raises(InvalidRequest, match="timeout_s"):
        SQLiteLedger(tmp_path / "ledger.sqlite", timeout_s=limit)


def test_the_turn_and_sqlites_lock_share_one_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for SQLite's lock ends when the store's limit, counted from before the
    wait for the turn, does: not a second full limit after the turn came."""
    monkeypatch.setattr(store_sqlite, "_TURNS_ABOVE_SYNC_S", 0.0)
    path = tmp_path / "ledger.sqlite"
    lg = SQLiteLedger(path, timeout_s=5.0)
    lg.register(PopulationSpec("users", 10.0, 1e-6))
    gate_enter = WriterGate.enter
    began: list[float] = []
    deadlines: list[float] = []

    def slow_turn(self: WriterGate, timeout: float) -> bool:
        began.append(time.monotonic())
        time.sleep(0.2)  # the turn came late
        return gate_enter(self, timeout)

    begin = SQLiteLedger._begin_write

    def seen(self: SQLiteLedger, conn: sqlite3.Connection, deadline: float) -> None:
        deadlines.append(deadline)
        begin(self, conn, deadline)

    monkeypatch.setattr(WriterGate, "enter", slow_turn)
    monkeypatch.setattr(SQLiteLedger, "_begin_write", seen)
    lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="q")
    assert len(began) == 1 and len(deadlines) == 1
    assert deadlines[0] <= began[0] + 5.0  # counted from before the turn's wait
    lg.close()


def test_a_child_forked_while_a_thread_waits_for_the_turn_does_not_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread waiting for the turn holds the store's lock; a child forked meanwhile
    has no such thread, and must not wait for that lock forever (it gets a new one)."""
    monkeypatch.setattr(store_sqlite, "_TURNS_ABOVE_SYNC_S", 0.0)
    path = tmp_path / "ledger.sqlite"
    lg = SQLiteLedger(path, timeout_s=0.5)
    lg.register(PopulationSpec("users", 10.0, 1e-6))
    other = WriterGate(str(path))
    assert other.enter(1.0)

    def charge_refused() -> None:
        with pytest.raises(LedgerUnavailable):
            lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="w")

    waiting = threading.Thread(target=charge_refused)
    waiting.start()
    time.sleep(0.1)  # the thread now holds the store's lock, waiting for the turn
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a charge ends (refused: the parent's gate holds the turn)
        os.close(read)
        try:
            lg.charge("users", zcdp_curve(1e-4), analyst="c", fingerprint="child")
            verdict = b"ok"
        except LedgerUnavailable:
            verdict = b"no"
        os.write(write, verdict)
        os._exit(0)
    os.close(write)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child hung on its parent's store lock")
        assert os.read(read, 2) == b"no"
    finally:
        os.close(read)
        waiting.join(30)
        other.leave()
        other.close()
        lg.close()
