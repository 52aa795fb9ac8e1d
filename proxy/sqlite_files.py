"""Per-thread SQLite connections to the proxy's own state files (release cache, server
store). WAL + synchronous=NORMAL: durable against a crash of the process; a power loss
may drop the newest entries, which then cost a new charge or a retry — never a privacy
loss. The budget ledger keeps its own, synchronous=FULL, connection handling.
"""

from __future__ import annotations

import os
import sqlite3
import threading

from accounting.new_sqlite import create_wal_file


class ThreadConnections:
    """One autocommit connection per thread to one SQLite file."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # A new file with two syncs, where SQLite's switch to WAL took four
            # (accounting/new_sqlite.py); its callers create their tables.
            create_wal_file(self.path)
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection, if it has one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
