"""The SQLite ledger syncs its log itself (issue 18): a durable write is committed under
synchronous=NORMAL, the write lock is released, and the log is fsynced before the call
returns; a failed fsync fails the store closed. New stores keep totals rows in a rowid
table (schema 2) with curves as raw float64, which fit in their b-tree page; stores
created with schema 1 keep working."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from accounting.ledger import LedgerUnavailable, PopulationSpec
from accounting.ledger_records import ORDERS_JSON
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import _SCHEMAS, SQLiteLedger

CAP, DELTA, RHO = 10.0, 1e-6, 1e-4


def _open(path: Path) -> SQLiteLedger:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA))
    return lg


def _charges(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT fingerprint FROM events WHERE kind = 'charge' ORDER BY id")
        return [str(f) for (f,) in rows]


def test_a_charge_is_committed_then_synced_outside_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    real = os.fdatasync
    seen: list[tuple[list[str], bool]] = []

    def watching(fd: int) -> None:
        # At the fsync: the charge is already committed (another connection reads it)
        # and the write lock is free (another connection can begin a write at once).
        other = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            committed = _charges(path)
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            seen.append((committed, True))
        except sqlite3.OperationalError:
            seen.append((_charges(path), False))
        finally:
            other.close()
        real(fd)

    monkeypatch.setattr(os, "fdatasync", watching)
    lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="first")
    assert seen == [(["first"], True)]
    lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="second")
    assert seen[1] == (["first", "second"], True)
    monkeypatch.setattr(os, "fdatasync", real)
    assert lg.verify().ok
    lg.close()


def test_a_failed_log_sync_fails_the_store_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="ok")
    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(LedgerUnavailable, match="sync"):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="in doubt")
    monkeypatch.setattr(os, "fdatasync", real)
    # In doubt, this instance answers nothing more ...
    with pytest.raises(LedgerUnavailable):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="after")
    with pytest.raises(LedgerUnavailable):
        lg.spent("users")
    lg.close()
    # ... and the charge it could not confirm stands (spent, never refunded).
    assert _charges(path) == ["ok", "in doubt"]
    fresh = _open(path)
    assert fresh.verify().ok
    assert fresh.spent("users").curve == zcdp_curve(RHO) + zcdp_curve(RHO)
    fresh.close()


def test_a_failed_sync_of_repeats_fails_the_next_charge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deferred sync of repeats consumes the kernel's one report of the error on the
    # process's descriptor; the next durable write must still not be acknowledged.
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    paid = lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="paid").event_id
    assert lg.record_replay(paid, analyst="a", fingerprint="again") > paid  # a repeat
    assert lg._replays.unsynced
    real = os.fdatasync
    calls: list[int] = []

    def failing(fd: int) -> None:
        calls.append(fd)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    lg._replays.sync_now()  # what the timer does: logs the failure, answers are out
    assert len(calls) == 1
    monkeypatch.setattr(os, "fdatasync", real)
    with pytest.raises(LedgerUnavailable, match="sync"):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="after")
    with pytest.raises(LedgerUnavailable):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="later")
    lg.close()


def _pages(path: Path, table: str, kind: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM dbstat WHERE name = ? AND pagetype = ?", (table, kind)
            ).fetchone()[0]
        )


def test_new_stores_keep_totals_rows_within_their_pages(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    for i in range(40):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint=str(i))
    lg.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        (curve,) = conn.execute("SELECT curve FROM totals ORDER BY rowid DESC LIMIT 1").fetchone()
    assert version == ("2",)
    assert isinstance(curve, bytes) and len(curve) == 8 * len(zcdp_curve(RHO).values)
    assert _pages(path, "totals", "overflow") == 0
    assert _pages(path, "totals", "leaf") >= 10  # the rows are there, ~4 to a page


def _schema_1_store(path: Path) -> None:
    """A store as created before schema 2 (the statements it was created with)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for stmt in _SCHEMAS["1"]:
        conn.execute(stmt)
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [("schema_version", "1"), ("orders", ORDERS_JSON)],
    )
    conn.close()


def test_a_schema_1_store_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    _schema_1_store(path)
    lg = _open(path)
    receipts = [
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint=str(i)) for i in range(5)
    ]
    lg.close()
    again = _open(path)
    # The version token reads the newest totals row, the newest cap and the populations.
    assert again.version() == (0, (6, 1, 1))
    assert again.spent("users").curve == zcdp_curve(RHO) * 5
    assert again.verify().ok
    again.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="more")
    report = again.verify()
    assert report.ok and report.events == 7  # register + 6 charges
    assert receipts[-1].event_id == 6
    again.close()
    third = SQLiteLedger(path)
    assert third.version() == (0, (7, 1, 1))
    third.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "1",
        )


def test_verify_finds_a_totals_row_out_of_event_order(tmp_path: Path) -> None:
    # Schema 2 reads totals in insertion order for verify: a row appended behind the
    # store's guards for an earlier event is still reported.
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    for i in range(3):
        lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint=str(i))
    lg.close()
    conn: Any = sqlite3.connect(path, isolation_level=None)
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'totals'"
    ).fetchall()
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(
        "INSERT INTO totals SELECT 'users/x', 2, curve, delta_extra, events FROM totals "
        "WHERE event_id = 2"
    )
    for _, sql in triggers:
        conn.execute(sql)
    conn.close()
    fresh = SQLiteLedger(path)
    report = fresh.verify()
    assert not report.ok
    assert "totals row ('users/x', 2) follows no cost event" in report.problems
    fresh.close()


def test_a_forked_child_syncs_through_its_own_descriptor_opened_with_its_connection(
    tmp_path: Path,
) -> None:
    # Review 4. A forked child reopens its connection; its descriptor of the log must be
    # opened then, as _open does (a failed write-back between its reconnect and its
    # first sync would otherwise go unreported to it), and the sync lock must be its
    # own: the parent's may be held by a thread that does not exist in the child.
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="parent")
    lg._sync_lock.acquire()  # another thread of the parent is syncing at the fork
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 3
        try:
            # A deadlocked child dies instead of hanging the suite (pytest-timeout's
            # handler of SIGALRM would raise in it instead).
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(10)
            lg.spent("users")  # a read: the child reconnects
            opened = lg._wal is not None and lg._wal[0] == os.getpid()
            lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="child")
            code = 0 if opened else 2
        finally:
            os._exit(code)
    lg._sync_lock.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "the child's first charge deadlocked on the sync lock"
    assert os.WEXITSTATUS(status) == 0, "the child opened its log descriptor only to sync"
    assert _charges(path) == ["parent", "child"]
    assert lg.verify().ok
    lg.close()
