"""The release store on PostgreSQL (``[ledger] url``): every proxy host replays what any
host released, and identical misses are charged once across hosts.

Single flight is a session-level advisory lock per cache key (``pg_try_advisory_lock``
on a 64-bit hash of the key): the server gives it to one session at a time and releases
it when that session ends, so a host that dies mid-query never blocks the key (no
owner liveness check or staleness timer is needed, unlike the SQLite store). A hash
collision between two keys only makes one wait for the other.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from typing import Any

import psycopg
import pyarrow as pa

from proxy.cache import from_ipc, to_ipc
from proxy.data_version import KEY_BYTES
from proxy.pg_connection import STATE_SCHEMA, SharedConnection

S = STATE_SCHEMA
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {S}.released (key text PRIMARY KEY, "
    "charge_id bigint NOT NULL, created double precision NOT NULL, rows bigint NOT NULL, "
    "ipc bytea NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {S}.release_secrets (name text PRIMARY KEY, "
    "value bytea NOT NULL)",
)


def flight_lock(key: str) -> int:
    """The advisory lock id of a cache key: the first 8 bytes of its SHA-256, signed.
    (One-bigint advisory locks; the ledger's two-integer locks never collide with them.)"""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class PostgresReleaseCache:
    def __init__(self, dsn: str) -> None:
        self._db = SharedConnection(dsn, application="dpsql-cache", ddl=SCHEMA)
        # Flights this process holds: key -> connection generation that took the lock
        # (a lock dies with its connection; a new one must not try to release it).
        self._held: dict[str, int] = {}
        self._guard = threading.Lock()

    def version_key(self) -> bytes:
        read = f"SELECT value FROM {S}.release_secrets WHERE name = 'data_version'"
        with self._db.session() as conn:
            row = conn.execute(read).fetchone()
            if row is None:  # made once, by the first host (its key stays)
                conn.execute(
                    f"INSERT INTO {S}.release_secrets (name, value) VALUES "
                    "('data_version', %s) ON CONFLICT (name) DO NOTHING",
                    (secrets.token_bytes(KEY_BYTES),),
                )
                row = conn.execute(read).fetchone()
        assert row is not None
        return bytes(row[0])

    def get(self, key: str) -> tuple[int, pa.Table] | None:
        with self._db.session() as conn:
            row = conn.execute(
                f"SELECT charge_id, ipc FROM {S}.released WHERE key = %s", (key,)
            ).fetchone()
        if row is None:
            return None
        return int(row[0]), from_ipc(bytes(row[1]))

    def has(self, key: str) -> bool:
        with self._db.session() as conn:
            return self._cached(conn, key)

    def claim(self, key: str) -> bool:
        with self._guard:
            if key in self._held:  # session locks nest: this process already flies it
                return False
        with self._db.session() as conn:
            if self._cached(conn, key):
                return False
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (flight_lock(key),)).fetchone()
            if not (got and got[0]):
                return False
            # The flight that just ended may have stored the release: look again.
            if self._cached(conn, key):
                conn.execute("SELECT pg_advisory_unlock(%s)", (flight_lock(key),))
                return False
            with self._guard:
                self._held[key] = self._db.generation
        return True

    @staticmethod
    def _cached(conn: psycopg.Connection[Any], key: str) -> bool:
        row = conn.execute(f"SELECT 1 FROM {S}.released WHERE key = %s", (key,)).fetchone()
        return row is not None

    def finish(self, key: str) -> None:
        with self._guard:
            generation = self._held.pop(key, None)
        if generation is None:
            return
        with self._db.session() as conn:
            if self._db.generation == generation:
                conn.execute("SELECT pg_advisory_unlock(%s)", (flight_lock(key),))

    def put(self, key: str, charge_id: int, table: pa.Table) -> None:
        with self._db.session() as conn:
            conn.execute(
                f"INSERT INTO {S}.released (key, charge_id, created, rows, ipc) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                (key, charge_id, time.time(), table.num_rows, to_ipc(table)),
            )
        self.finish(key)

    def close(self) -> None:
        self._db.close()
