"""Replay records on cache hits (issue 18, RELIABILITY.md "Replay records"): an
analyst's first receipt of a release is a replay event fsynced before the answer, and it
survives SIGKILL right after; later repeats are appended without waiting for the disk
but are in the store (and counted exactly) when the call returns, fsynced within the
delay and at close; verify passes with them; a fresh process learns who has what from
the store, and a paying analyst's own hits are repeats."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from accounting.ledger import InvalidRequest, LedgerUnavailable, PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.replay_records import DEFER_DELAY_S, SYNC_DELAY_S
from accounting.store_sqlite import SQLiteLedger
from tests.accounting.stores import StoreTarget

ROOT = Path(__file__).resolve().parents[2]


def _open(path: Path) -> SQLiteLedger:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", 10.0, 1e-6))
    return lg


def _replays(path: Path) -> list[tuple[int, str, int]]:
    """(id, analyst, parent) of every stored replay, read behind the ledger's back."""
    rows = StoreTarget("sqlite", str(path)).query(
        "SELECT id, analyst, parent_id FROM events WHERE kind = 'replay' ORDER BY id"
    )
    return [(int(i), str(a), int(p)) for i, a, p in rows]


def _wal_syncs(lg: SQLiteLedger, calls: list[float]) -> None:
    """Count the ledger's deferred syncs (the real fsync still runs)."""
    sync = lg._sync_log

    def counted() -> None:
        calls.append(time.monotonic())
        sync()

    lg._replays._sync = counted


def test_first_receipt_is_synced_repeats_are_synced_later(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    syncs: list[float] = []
    _wal_syncs(lg, syncs)
    paid = lg.charge("users", zcdp_curve(1e-4), analyst="ana", fingerprint="f").event_id
    first = lg.record_replay(paid, analyst="bob", fingerprint="f")
    assert not lg._replays.unsynced  # a first receipt waits for its fsync
    assert _replays(path) == [(first, "bob", paid)]
    # The payer's own hit and bob's second one are repeats: in the store at once ...
    again = [
        lg.record_replay(paid, analyst="ana", fingerprint="f"),
        lg.record_replay(paid, analyst="bob", fingerprint="f"),
    ]
    assert _replays(path) == [
        (first, "bob", paid),
        (again[0], "ana", paid),
        (again[1], "bob", paid),
    ]
    # ... and fsynced by the timer, not by the caller.
    assert lg._replays.unsynced and syncs == []
    deadline = time.monotonic() + 30
    while lg._replays.unsynced and time.monotonic() < deadline:
        time.sleep(SYNC_DELAY_S / 4)
    assert not lg._replays.unsynced and len(syncs) == 1
    # A durable commit covers repeats before it: no further sync is owed.
    lg.record_replay(paid, analyst="bob", fingerprint="f")
    lg.record_replay(paid, analyst="carl", fingerprint="f")  # carl's first: fsynced
    assert not lg._replays.unsynced
    # Repeats refuse what replay refuses; a closed ledger answers nothing.
    with pytest.raises(InvalidRequest):
        lg.record_replay(1, analyst="carl", fingerprint="f")  # the registration
    lg.record_replay(paid, analyst="ana", fingerprint="f")
    lg.close()
    assert not lg._replays.unsynced  # close synced the last repeat
    with pytest.raises(LedgerUnavailable):
        lg.record_replay(paid, analyst="bob", fingerprint="f")
    fresh = SQLiteLedger(path)
    report = fresh.verify()
    assert report.ok, report.problems
    assert report.events == 2 + 6
    fresh.close()


def test_concurrent_repeats_are_counted_exactly_and_verify(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    ids = [
        lg.charge("users", zcdp_curve(1e-4), analyst="ana", fingerprint=str(k)).event_id
        for k in range(3)
    ]

    def work(who: str) -> None:
        for i in range(30):
            lg.record_replay(ids[i % 3], analyst=who, fingerprint=str(i % 3))

    threads = [threading.Thread(target=work, args=(w,)) for w in ("ana", "bob", "cy", "di")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stored = _replays(path)
    assert sorted((a, p) for _, a, p in stored) == sorted(
        (who, ids[i % 3]) for i in range(30) for who in ("ana", "bob", "cy", "di")
    )
    report = lg.verify()
    assert report.ok and report.events == 1 + 3 + 120, report
    lg.close()


def test_a_fresh_process_knows_who_has_what_from_the_store(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    paid = lg.charge("users", zcdp_curve(1e-4), analyst="ana", fingerprint="f").event_id
    lg.record_replay(paid, analyst="bob", fingerprint="f")
    lg.close()
    again = _open(path)
    for who in ("bob", "ana"):
        again.record_replay(paid, analyst=who, fingerprint="f")
        assert again._replays.unsynced, who  # a repeat: no fsync waited for
        again._replays.sync_now()
    again.record_replay(paid, analyst="carl", fingerprint="f")
    assert not again._replays.unsynced  # carl's first receipt
    again.close()
    assert [a for _, a, _ in _replays(path)] == ["bob", "bob", "ana", "carl"]


_KILLED = """
import os, sys
from accounting.ledger import PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
lg = SQLiteLedger(sys.argv[1])
lg.register(PopulationSpec("users", 10.0, 1e-6))
paid = lg.charge("users", zcdp_curve(1e-4), analyst="ana", fingerprint="f").event_id
for k in range(int(sys.argv[2])):
    who = f"a{k}"
    first = lg.record_replay(paid, analyst=who, fingerprint="f")
    repeats = [lg.record_replay(paid, analyst=who, fingerprint="f") for _ in range(3)]
    # The answers leave only now.
    sys.stdout.write(" ".join(map(str, [who, paid, first, *repeats])) + "\\n")
    sys.stdout.flush()
os.kill(os.getpid(), 9)  # no close, no atexit, no sync of the last repeats
"""


def test_replays_survive_sigkill_right_after_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(path), "20"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    answered = [line.split() for line in proc.stdout.splitlines()]
    assert len(answered) == 20
    # A killed process loses nothing it committed: firsts were fsynced, repeats are in
    # the log (only a machine crash could lose a repeat's unsynced write).
    stored = set(_replays(path))
    expected = {(int(i), who, int(paid)) for who, paid, *ids in answered for i in ids}
    assert stored == expected
    lg = SQLiteLedger(path)
    report = lg.verify()
    assert report.ok, report.problems
    lg.close()



def test_a_deferred_repeat_is_committed_without_the_caller_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """defer_repeat (the HTTP cache-hit door's call) records nothing for a first
    receipt, queues a repeat without committing it, and the flush commits it within
    DEFER_DELAY_S with no other call; the process's own reads see it at once."""
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    paid = lg.charge("users", zcdp_curve(1e-4), analyst="ana", fingerprint="f").event_id
    assert lg.defer_repeat(paid, analyst="bob", fingerprint="f") is False  # bob's first
    assert _replays(path) == []
    assert lg.defer_repeat(paid, analyst="ana", fingerprint="f") is True
    deadline = time.monotonic() + 30
    while not _replays(path) and time.monotonic() < deadline:
        time.sleep(DEFER_DELAY_S / 4)
    assert [(a, p) for _, a, p in _replays(path)] == [("ana", paid)]
    # With the flush held back, the repeat waits in the queue, not in the store ...
    monkeypatch.setattr(lg._replays, "deferred", lambda: None)
    assert lg.defer_repeat(paid, analyst="ana", fingerprint="f") is True
    time.sleep(DEFER_DELAY_S * 5)
    assert len(_replays(path)) == 1
    # ... until the process reads the events: history commits it first.
    assert sum(e.kind == "replay" for e in lg.history(limit=100)) == 2
    assert len(_replays(path)) == 2
    assert lg.verify().ok
    lg.close()


def test_close_commits_deferred_repeats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    paid = lg.charge("users", zcdp_curve(1e-4), analyst="ana", fingerprint="f").event_id
    monkeypatch.setattr(lg._replays, "deferred", lambda: None)  # no timed flush
    for _ in range(5):
        assert lg.defer_repeat(paid, analyst="ana", fingerprint="f")
    assert _replays(path) == []
    lg.close()
    assert [(a, p) for _, a, p in _replays(path)] == [("ana", paid)] * 5
    reopened = SQLiteLedger(path)
    assert reopened.verify().ok
    reopened.close()


@pytest.mark.parametrize("timer", ["flush", "sync"])
def test_close_waits_for_a_timer_already_under_way(
    timer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean close must leave every committed repeat synced, even when a timer's
    commit or sync is running as it is called: close waits for that timer instead of
    finding nothing to do and returning while the commit still lands unsynced."""
    import accounting.replay_records as rr

    monkeypatch.setattr(rr, "DEFER_DELAY_S", 0.01)
    monkeypatch.setattr(rr, "SYNC_DELAY_S", 0.01)
    started, release = threading.Event(), threading.Event()
    synced: list[str] = []
    flushes: list[str] = []

    def flush() -> None:  # the store's commit of queued repeats
        flushes.append(threading.current_thread().name)
        if timer == "flush" and len(flushes) == 1:
            started.set()
            release.wait(5)
            records.committed_unsynced()  # the store reports the commit it just made

    def sync() -> None:  # the store's fsync
        if timer == "sync" and not synced:
            started.set()
            release.wait(5)
        synced.append(threading.current_thread().name)

    records = rr.ReplayRecords(lambda: [], sync, flush)
    if timer == "flush":
        records.deferred()
    else:
        records.committed_unsynced()
    assert started.wait(5)
    closer = threading.Thread(target=records.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waiting for the timer, not done without it
    release.set()
    closer.join(5)
    assert not closer.is_alive()
    assert synced  # the commit the timer was making is durable once close returns
    if timer == "flush":
        assert len(synced) == 1  # synced by close, after the timer's commit
