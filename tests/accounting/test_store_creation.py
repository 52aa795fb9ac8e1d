"""A new SQLite ledger is created with three syncs instead of SQLite's six: its switch to
WAL and its schema are written under synchronous=OFF, then the log, the file and the
folder are synced once (accounting/store_sqlite.py, SQLiteLedger._sync_new_store). What
that must not change: every later write runs under synchronous=NORMAL, and a store whose
creator is killed right after its first charge opens whole, with the charge."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path

from accounting.ledger import PopulationSpec
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
