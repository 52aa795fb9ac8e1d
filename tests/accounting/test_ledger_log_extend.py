"""The SQLite ledger extends its write-ahead log with zeros ahead of SQLite's frames
(issue 18, ``SQLiteLedger._extend_log``): a log that grows with every commit makes every
fsync commit the file system's journal too. The zeros must never cost a commit: a log
whose tail is zeros recovers every committed event."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import shutil
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from accounting.ledger import PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger

CAP, DELTA, RHO = 1e6, 1e-6, 1e-9
FRAME = 4096 + 24


def _fingerprints(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT fingerprint FROM events WHERE kind = 'charge' ORDER BY id")
        return [str(f) for (f,) in rows]


def test_the_log_grows_in_steps_not_with_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.sqlite"
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA))
    real = os.fdatasync
    sizes: list[int] = []

    def recording(fd: int) -> None:
        sizes.append(os.fstat(fd).st_size)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    for i in range(300):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint=str(i))
    monkeypatch.setattr(os, "fdatasync", real)
    assert len(sizes) == 300
    # Each charge writes about four pages, and no checkpoint comes before 4,000: SQLite
    # alone would grow the log at every one of these commits.
    growths = sum(1 for a, b in itertools.pairwise(sizes) if b != a)
    assert growths <= 20, growths
    assert max(sizes) >= 1000 * FRAME
    assert lg.verify().ok
    lg.close()
    assert _fingerprints(path) == [str(i) for i in range(300)]


def test_a_log_ending_in_zeros_recovers_every_commit(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA))
    for i in range(40):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint=str(i))
    wal = Path(str(path) + "-wal")
    size = wal.stat().st_size
    assert (size - 32) % FRAME != 0  # a step's size, not SQLite's
    with wal.open("rb") as f:
        f.seek(size - FRAME)
        assert f.read() == bytes(FRAME)  # the tail is zeros, past the last frame
    # The files as a crash leaves them, without the shared index: opening them must
    # rebuild the index from the log, stop at the zeros and find every commit.
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(path, copy / "l.sqlite")
    shutil.copy(wal, copy / "l.sqlite-wal")
    lg.close()
    again = SQLiteLedger(copy / "l.sqlite")
    again.register(PopulationSpec("users", CAP, DELTA))
    assert again.verify().ok
    again.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="after")
    assert again.verify().ok
    again.close()
    assert _fingerprints(copy / "l.sqlite") == [str(i) for i in range(40)] + ["after"]


def _charge_then_die_after_a_step(path: str, acked: Any, round_: int) -> None:
    """Charge until the log is extended inside a write transaction, and die there:
    after the zeros, before SQLite's frames and the commit."""
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA))
    extend = lg._extend_log
    done = 0

    def extend_then_die() -> None:
        before = os.path.getsize(path + "-wal")
        extend()
        if os.path.getsize(path + "-wal") != before and done > 5:
            os.kill(os.getpid(), signal.SIGKILL)

    lg._extend_log = extend_then_die  # type: ignore[method-assign]
    for i in itertools.count():
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint=f"{round_}.{i}")
        acked.put(f"{round_}.{i}")  # acknowledged (written to the pipe before the next)
        done += 1


def test_a_kill_between_a_step_and_its_commit_loses_no_acknowledged_charge(
    tmp_path: Path,
) -> None:
    # Review 5: SIGKILL right after _extend_log wrote its zeros, inside the write
    # transaction, three times over one store; every acknowledged charge is there after
    # each, and the store goes on charging and verifying.
    path = str(tmp_path / "l.sqlite")
    ctx = mp.get_context("fork")
    acked_all: list[str] = []
    for round_ in range(3):
        acked = ctx.SimpleQueue()
        child = ctx.Process(target=_charge_then_die_after_a_step, args=(path, acked, round_))
        child.start()
        child.join(60)
        assert child.exitcode == -signal.SIGKILL
        while not acked.empty():
            acked_all.append(acked.get())
        found = _fingerprints(Path(path))
        assert set(acked_all) <= set(found)
        assert len(found) == len(set(found)) == len(acked_all)  # nothing half-committed
        lg = SQLiteLedger(path)
        assert lg.verify().ok
        lg.close()
