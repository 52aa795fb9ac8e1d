"""Per-thread SQLite connections to the proxy's own state files (release cache, server
store). WAL + synchronous=NORMAL: durable against a crash of the process; a power loss
may drop the newest entries, which then cost a new charge or a retry — never a privacy
loss. The budget ledger keeps its own, synchronous=FULL, connection handling.
"""

from __future__ import annotations

import os
import sqlite3
import threading


class ThreadConnections:
    """One autocommit connection per thread to one SQLite file."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            new = _new_file(self.path)
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            if new:
                # SQLite switches a new file to WAL through a rollback journal, with
                # four syncs (journal, folder, journal, file); one of the file after the
                # switch keeps what they protect: a whole first page, which says WAL.
                conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA journal_mode=WAL")
            if new:
                _sync_file(self.path)
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection, if it has one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _new_file(path: str | os.PathLike[str]) -> bool:
    try:
        return os.path.getsize(path) == 0
    except (FileNotFoundError, ValueError):
        return True


def _sync_file(path: str | os.PathLike[str]) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # not a file (":memory:")
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
