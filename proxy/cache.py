"""Released tables, stored durably under the plan's canonical key.

A hit re-runs only the outer layer and charges nothing. ``ReleaseStore`` is what the
engine needs of the store; ``ReleaseCache`` keeps it in a SQLite file beside the ledger,
shared by every process, where a claim row gives single flight per key across threads
and processes, so two identical misses are charged once. With ``[ledger] url`` the
store is PostgreSQL (cache_postgres.py), shared by every host.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from proxy.data_version import KEY_BYTES
from proxy.policy import Policy
from proxy.sqlite_files import ThreadConnections

SCHEMA = """
CREATE TABLE IF NOT EXISTS released (
    key TEXT PRIMARY KEY,
    charge_id INTEGER NOT NULL,
    created REAL NOT NULL,
    rows INTEGER NOT NULL,
    ipc BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS flights (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    started REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
"""


class ReleaseStore(Protocol):
    """Released tables by cache key, and single flight of misses per key."""

    def get(self, key: str) -> tuple[int, pa.Table] | None:
        """(charge id that paid, released table), or None."""
        ...

    def has(self, key: str) -> bool:
        """Whether a release is stored under ``key``, without loading it."""
        ...

    def claim(self, key: str) -> bool:
        """Take the flight for ``key``; False if it is cached or another caller (thread,
        process or host) flies it. A claim dies with the process that holds it."""
        ...

    def finish(self, key: str) -> None:
        """End this caller's flight for ``key`` (nothing if it holds none)."""
        ...

    def put(self, key: str, charge_id: int, table: pa.Table) -> None:
        """Store a release (the first one stored under ``key`` stays) and end the flight."""
        ...

    def version_key(self) -> bytes:
        """The store's key of released data versions (proxy/data_version.py): random,
        made with the store, the same for every process and host using it."""
        ...

    def close(self) -> None: ...


def open_release_cache(policy: Policy) -> ReleaseStore:
    """The policy's release store: PostgreSQL with ``[ledger] url``, else a SQLite file
    beside the ledger."""
    if policy.ledger_url is not None:
        from proxy.cache_postgres import PostgresReleaseCache

        return PostgresReleaseCache(policy.ledger_url)
    path = policy.ledger_path
    return ReleaseCache(path.with_name(path.stem + "-cache.sqlite"))


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def _owner_alive(owner: str) -> bool:
    """Whether the process that claimed a flight still runs: a worker killed mid-query
    leaves its claim behind, and a retry must not wait for it to time out."""
    pid_text = owner.split("-", 1)[0]
    if not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


class ReleaseCache:
    """The release store in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, stale_after_s: float = 120.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stale_after_s = stale_after_s
        self._connections = ThreadConnections(self.path)
        self._owner = f"{os.getpid()}-{id(self)}"
        with self._conn() as conn:
            conn.executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    def version_key(self) -> bytes:
        conn = self._conn()
        read = "SELECT value FROM secrets WHERE name = 'data_version'"
        row = conn.execute(read).fetchone()
        if row is None:  # made once, by the first process (its key stays)
            with conn:
                conn.execute(
                    "INSERT OR IGNORE INTO secrets(name, value) VALUES ('data_version', ?)",
                    (secrets.token_bytes(KEY_BYTES),),
                )
            row = conn.execute(read).fetchone()
        return bytes(row[0])

    def get(self, key: str) -> tuple[int, pa.Table] | None:
        row = (
            self._conn()
            .execute("SELECT charge_id, ipc FROM released WHERE key = ?", (key,))
            .fetchone()
        )
        if row is None:
            return None
        return int(row[0]), from_ipc(row[1])

    def has(self, key: str) -> bool:
        """Whether a release is stored under ``key``, without loading it."""
        found = self._conn().execute("SELECT 1 FROM released WHERE key = ?", (key,)).fetchone()
        return found is not None

    def claim(self, key: str) -> bool:
        """Take the flight for ``key``; False if it is cached or another caller flies it."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM released WHERE key = ?", (key,)).fetchone():
                return False
            row = conn.execute(
                "SELECT started, owner FROM flights WHERE key = ?", (key,)
            ).fetchone()
            now = time.time()
            if (
                row is not None
                and now - float(row[0]) < self.stale_after_s
                and _owner_alive(str(row[1]))
            ):
                return False
            conn.execute(
                "INSERT OR REPLACE INTO flights(key, owner, started) VALUES (?, ?, ?)",
                (key, self._owner, now),
            )
            return True
        finally:
            conn.execute("COMMIT")

    def finish(self, key: str) -> None:
        self._conn().execute("DELETE FROM flights WHERE key = ? AND owner = ?", (key, self._owner))

    def put(self, key: str, charge_id: int, table: pa.Table) -> None:
        """Store a release and end its flight, in one transaction."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT OR IGNORE INTO released(key, charge_id, created, rows, ipc) "
                "VALUES (?,?,?,?,?)",
                (key, charge_id, time.time(), table.num_rows, to_ipc(table)),
            )
            conn.execute("DELETE FROM flights WHERE key = ? AND owner = ?", (key, self._owner))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        self._connections.close()
