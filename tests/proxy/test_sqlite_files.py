"""The proxy's own SQLite state files (proxy/sqlite_files.py): a new file is switched to
WAL without SQLite's four syncs and synced once; its connections then run as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from proxy import sqlite_files
from proxy.sqlite_files import ThreadConnections


def test_a_new_state_file_is_a_wal_file_with_normal_syncs(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    for _ in range(2):  # new, then existing
        connections = ThreadConnections(path)
        conn = connections.get()
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL, never OFF
        conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        connections.close()
        assert path.stat().st_size > 0  # the first page, which says WAL, is written
    connections = ThreadConnections(path)
    assert connections.get().execute("SELECT count(*) FROM t").fetchone() == (2,)
    connections.close()


class _LockedOnce:
    """A real connection whose first statement meets a lock SQLite did not wait for
    (what server workers opening one new file at once saw: test_load_ci_size)."""

    def __init__(self, conn: sqlite3.Connection, failures: list[int]):
        self._conn, self._failures = conn, failures

    def execute(self, sql: str) -> sqlite3.Cursor:
        if self._failures:
            self._failures.pop()
            raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql)

    def close(self) -> None:
        self._conn.close()


def test_a_lock_met_while_opening_is_waited_out(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = sqlite3.connect
    failures = [1, 1]
    opened: list[_LockedOnce] = []

    path = tmp_path / "state.sqlite"

    def connect(target, *args, **kwargs):  # type: ignore[no-untyped-def]
        if target != path:  # the new file's own making (accounting/new_sqlite.py)
            return real(target, *args, **kwargs)
        opened.append(_LockedOnce(real(target, *args, **kwargs), failures))
        return opened[-1]

    monkeypatch.setattr(sqlite_files.sqlite3, "connect", connect)
    conn = ThreadConnections(path).get()
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert len(opened) == 3 and not failures  # two locked attempts, then the third


def test_other_errors_are_not_retried(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        ThreadConnections(tmp_path / "missing" / "state.sqlite").get()
