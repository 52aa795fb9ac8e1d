"""The server store on PostgreSQL (``[ledger] url``): idempotency records, paged results
and the cursor secret, shared by every worker of every proxy host, so that a retry or
the next page may reach any host."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

from proxy.pg_connection import LOCK_CLASS, STATE_SCHEMA, SharedConnection
from proxy.server.store import ServerStore, StoredResponse, StoredResult, result_id

S = STATE_SCHEMA
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {S}.server_meta (key text PRIMARY KEY, value bytea NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {S}.idempotency (analyst text NOT NULL, key text NOT NULL, "
    "fingerprint text NOT NULL, created double precision NOT NULL, status integer, "
    "media_type text, headers text, body bytea, PRIMARY KEY (analyst, key))",
    f"CREATE INDEX IF NOT EXISTS idempotency_created ON {S}.idempotency (created)",
    f"CREATE TABLE IF NOT EXISTS {S}.pages (id text PRIMARY KEY, cache_key text NOT NULL, "
    "request text NOT NULL, created double precision NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS pages_created ON {S}.pages (created)",
)
# Namespace (first integer) of the two-integer advisory locks taken per Idempotency-Key,
# next to the ledger's.
_KEY_CLASS = LOCK_CLASS + 1


def _key_lock(analyst: str, key: str) -> int:
    digest = hashlib.sha256(f"{analyst}\n{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


class PostgresServerStore(ServerStore):
    def __init__(self, dsn: str, *, pending_stale_s: float = 300.0) -> None:
        self.pending_stale_s = pending_stale_s
        self._db = SharedConnection(dsn, application="dpsql-server", ddl=SCHEMA)
        with self._db.session() as conn:
            # The first worker of any host picks the secret; all others read it.
            conn.execute(
                f"INSERT INTO {S}.server_meta (key, value) VALUES ('cursor_secret', %s) "
                "ON CONFLICT (key) DO NOTHING",
                (secrets.token_bytes(32),),
            )
            row = conn.execute(
                f"SELECT value FROM {S}.server_meta WHERE key = 'cursor_secret'"
            ).fetchone()
        assert row is not None
        self._secret = bytes(row[0])

    def begin(
        self, analyst: str, key: str, fingerprint: str, *, ttl_s: float
    ) -> StoredResponse | str:
        now = time.time()
        with self._db.transaction() as conn:
            # One decision per (analyst, key) at a time, across hosts.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", (_KEY_CLASS, _key_lock(analyst, key))
            )
            conn.execute(f"DELETE FROM {S}.idempotency WHERE created < %s", (now - ttl_s,))
            row = conn.execute(
                "SELECT fingerprint, created, status, media_type, headers, body "
                f"FROM {S}.idempotency WHERE analyst = %s AND key = %s",
                (analyst, key),
            ).fetchone()
            if row is None or (row[2] is None and now - float(row[1]) > self.pending_stale_s):
                conn.execute(
                    f"INSERT INTO {S}.idempotency (analyst, key, fingerprint, created) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (analyst, key) DO UPDATE SET "
                    "fingerprint = excluded.fingerprint, created = excluded.created, "
                    "status = NULL, media_type = NULL, headers = NULL, body = NULL",
                    (analyst, key, fingerprint, now),
                )
                return "new"
            if row[0] != fingerprint:
                return "mismatch"
            if row[2] is None:
                return "pending"
            return StoredResponse(int(row[2]), str(row[3]), json.loads(row[4]), bytes(row[5]))

    def finish(self, analyst: str, key: str, response: StoredResponse) -> None:
        with self._db.session() as conn:
            conn.execute(
                f"UPDATE {S}.idempotency SET status = %s, media_type = %s, headers = %s, "
                "body = %s WHERE analyst = %s AND key = %s",
                (
                    response.status,
                    response.media_type,
                    json.dumps(response.headers),
                    response.body,
                    analyst,
                    key,
                ),
            )

    def abandon(self, analyst: str, key: str) -> None:
        with self._db.session() as conn:
            conn.execute(
                f"DELETE FROM {S}.idempotency WHERE analyst = %s AND key = %s AND status IS NULL",
                (analyst, key),
            )

    def save_result(self, cache_key: str, request: dict[str, Any], *, ttl_s: float) -> str:
        text = json.dumps(request, sort_keys=True)
        rid = result_id(cache_key, text)
        now = time.time()
        with self._db.transaction() as conn:
            conn.execute(f"DELETE FROM {S}.pages WHERE created < %s", (now - ttl_s,))
            conn.execute(
                f"INSERT INTO {S}.pages (id, cache_key, request, created) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET created = excluded.created",
                (rid, cache_key, text, now),
            )
        return rid

    def result(self, result_id: str) -> StoredResult | None:
        with self._db.session() as conn:
            row = conn.execute(
                f"SELECT cache_key, request FROM {S}.pages WHERE id = %s", (result_id,)
            ).fetchone()
        if row is None:
            return None
        return StoredResult(result_id, str(row[0]), json.loads(row[1]))

    def close(self) -> None:
        self._db.close()
