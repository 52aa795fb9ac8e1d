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
from accounting.store_sqlite import open_retrying

# How long a first connection retries a lock SQLite does not wait for (as the ledger's
# SQLiteLedger._open): server workers open one new file at the same moment.
OPEN_TIMEOUT_S = 30.0


class ThreadConnections:
    """One autocommit connection per thread to one SQLite file."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = path
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        """Connect, retrying while another process holds a lock that SQLite's busy
        timeout does not cover (the switch to WAL while another worker opens the same new
        file): a worker that gave up at once answered 500s until restarted."""
        return open_retrying(self._open_once, OPEN_TIMEOUT_S)

    def _open_once(self) -> sqlite3.Connection:
        # A new file with two syncs, where SQLite's switch to WAL took four
        # (accounting/new_sqlite.py); its callers create their tables.
        create_wal_file(self.path)
        conn = sqlite3.connect(self.path, timeout=OPEN_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close this thread's connection, if it has one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

