"""A new SQLite ledger is made whole under a temporary name with SQLite's syncs off, synced
once and linked into place (accounting/new_sqlite.py): two syncs where SQLite's switch to
WAL and first commit took six. What that must not change: the store runs under
synchronous=NORMAL, racing creators all get the one store, a store whose creator is
killed right after its first charge opens whole with the charge, and the file is never
synced through a descriptor of an open store (closing it would drop SQLite's lock, and
another process's close would then delete the log under this one)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import threading
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from accounting.ledger import PopulationSpec
from accounting.new_sqlite import create_wal_file
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger


def _create_charge_and_die(path: str) -> None:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", 100.0, 1e-6))
    lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="f")
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint


def test_a_new_store_goes_back_to_normal_syncs_once_created(tmp_path: Path) -> None:
    for path in (tmp_path / "new.sqlite", tmp_path / "empty.sqlite"):
        if path.name == "empty.sqlite":
            path.touch()  # an empty file is a new store too
        lg = SQLiteLedger(path)
        conn = lg._connection()
        assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL, never OFF
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        lg.register(PopulationSpec("users", 100.0, 1e-6))
        lg.close()
        again = SQLiteLedger(path)  # an existing store is opened as before
        assert again._connection().execute("PRAGMA synchronous").fetchone() == (1,)
        assert again.verify().ok and again.populations() == ("users",)
        again.close()


def test_a_store_whose_creator_is_killed_after_a_charge_keeps_it(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    child = mp.get_context("fork").Process(target=_create_charge_and_die, args=(path,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert Path(path + "-wal").exists()  # left as a crash leaves it
    lg = SQLiteLedger(path)
    assert lg.verify().ok
    assert [e.kind for e in lg.history(limit=10) if e.kind == "charge"] == ["charge"]
    lg.close()


def _table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")


def test_a_wal_file_is_linked_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    assert create_wal_file(path, _table)
    assert not create_wal_file(path, _table)  # never over an existing file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.sqlite"]  # nothing left over
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # from its header
    assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()

    def fails(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE u (x)")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        create_wal_file(tmp_path / "g.sqlite", fails)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.sqlite"]  # no part linked
    (tmp_path / "empty.sqlite").touch()
    assert not create_wal_file(tmp_path / "empty.sqlite", _table)  # SQLite's own way


def _open_and_charge(path: str, start: Barrier) -> None:
    start.wait()
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", 100.0, 1e-6))
    lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="f")
    lg.close()


def test_another_process_closing_never_deletes_the_log_of_an_open_new_store(
    tmp_path: Path,
) -> None:
    # This process creates the store and keeps it open; others open, charge and close.
    # Had the creator dropped its lock on the file, the last of them to close would take
    # itself for the last connection and delete the log this one still writes to.
    path = str(tmp_path / "ledger.sqlite")
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", 100.0, 1e-6))
    # Spawned, not forked: a forked child inherits SQLite's memory of this process's
    # locks and would never try to take the file for itself.
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(3)
    procs = [ctx.Process(target=_open_and_charge, args=(path, start)) for _ in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert Path(path + "-wal").exists()
    lg.charge("users", zcdp_curve(1e-4), analyst="b", fingerprint="g")
    lg.close()
    check = SQLiteLedger(path)  # what a fresh process reads: every charge
    assert check.verify().ok
    assert len([e for e in check.history(limit=100) if e.kind == "charge"]) == 4
    check.close()


def test_a_leftover_of_a_killed_creator_is_never_reused(tmp_path: Path) -> None:
    # Review 5: a creator killed after filling its temporary file leaves it (and its
    # log) behind. The temporary name was only the pid and thread id, which a later
    # process can have again (a container's fixed pid, the same main thread): it then
    # opened the leftover, failed to write its schema over the one there, and its
    # ledger stayed unavailable until restarted. A leftover must never be opened.
    path = tmp_path / "ledger.sqlite"
    old_name = tmp_path / f".ledger.sqlite.{os.getpid()}.{threading.get_ident()}.new"
    stray = sqlite3.connect(old_name, isolation_level=None)
    stray.execute("PRAGMA journal_mode=WAL")
    stray.execute("CREATE TABLE meta (key, value)")  # the schema's first table, committed
    stray.close()
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", 100.0, 1e-6))
    lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="f")
    assert lg.verify().ok
    lg.close()
    assert old_name.exists()  # someone else's file: left alone


def _create_at_once(path: str, start: Barrier, won: Any) -> None:
    start.wait()
    won.put(create_wal_file(path, _table))
    lg = sqlite3.connect(path)
    assert lg.execute("SELECT x FROM t").fetchall() == [(1,)]
    lg.close()


def test_racing_creators_link_one_whole_file(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    for attempt in range(3):
        path = str(tmp_path / f"race{attempt}.sqlite")
        start, won = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_create_at_once, args=(path, start, won)) for _ in range(4)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        results = [won.get(timeout=5) for _ in procs]
        assert results.count(True) == 1  # one links; the others open its file
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".new")]
