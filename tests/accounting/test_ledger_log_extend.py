"""The SQLite ledger extends its write-ahead log with zeros ahead of SQLite's frames
(issue 18, ``SQLiteLedger._extend_log``): a log that grows with every commit makes every
fsync commit the file system's journal too. The zeros must never cost a commit: a log
whose tail is zeros recovers every committed event."""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
from pathlib import Path

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
