"""Server-side state shared by every worker: Idempotency-Key answers, paged results and
the secret that signs page cursors. ``ServerStore`` is the interface (cursor signing is
common); ``SQLiteServerStore`` keeps one SQLite file beside the ledger, and with
``[ledger] url`` ``store_postgres.PostgresServerStore`` shares it between hosts.

Nothing here is privacy-critical on its own: a lost idempotency record makes a retry an
ordinary repeat, which the release cache answers for free.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxy.policy import Policy
from proxy.sqlite_files import ThreadConnections

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency (
    analyst TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created REAL NOT NULL,
    status INTEGER,            -- NULL while the first request is still running
    media_type TEXT,
    headers TEXT,
    body BLOB,
    PRIMARY KEY (analyst, key)
);
CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency(created);
CREATE TABLE IF NOT EXISTS pages (
    id TEXT PRIMARY KEY,
    cache_key TEXT NOT NULL,
    request TEXT NOT NULL,     -- the query body, to re-plan and replay from the cache
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS pages_created ON pages(created);
"""


@dataclass(frozen=True)
class StoredResponse:
    status: int
    media_type: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class StoredResult:
    id: str
    cache_key: str
    request: dict[str, Any]


@dataclass(frozen=True)
class Cursor:
    result_id: str
    offset: int
    page_size: int
    analyst: str
    issued: float


class CursorError(ValueError):
    """The cursor is malformed, forged, expired or someone else's."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def open_server_store(policy: Policy, *, pending_stale_s: float) -> ServerStore:
    """The policy's server store: PostgreSQL with ``[ledger] url``, else a SQLite file
    beside the ledger."""
    if policy.ledger_url is not None:
        from proxy.server.store_postgres import PostgresServerStore

        return PostgresServerStore(policy.ledger_url, pending_stale_s=pending_stale_s)
    path = policy.ledger_path
    return SQLiteServerStore(
        path.with_name(path.stem + "-server.sqlite"), pending_stale_s=pending_stale_s
    )


def result_id(cache_key: str, request_text: str) -> str:
    """A paged answer's id: the same query on the same release gets the same id."""
    return hashlib.sha256(f"{cache_key}\n{request_text}".encode()).hexdigest()[:32]


class ServerStore(ABC):
    """Idempotency records and paged results, and the cursors that point into them
    (signed with a secret every worker and host of one deployment shares)."""

    _secret: bytes

    # --- Idempotency-Key ----------------------------------------------------------------
    @abstractmethod
    def begin(
        self, analyst: str, key: str, fingerprint: str, *, ttl_s: float
    ) -> StoredResponse | str:
        """Claim (analyst, key) for a new request, or return what is known about it.

        Returns "new" when the caller must answer and then call :meth:`finish`,
        "pending" while another request holds the key, "mismatch" when the key was used
        for a different request, or the stored first answer.
        """

    @abstractmethod
    def finish(self, analyst: str, key: str, response: StoredResponse) -> None:
        """Store the first answer to (analyst, key)."""

    @abstractmethod
    def abandon(self, analyst: str, key: str) -> None:
        """Forget a claim whose request failed for a reason a retry might not meet."""

    # --- paged results --------------------------------------------------------------------
    @abstractmethod
    def save_result(self, cache_key: str, request: dict[str, Any], *, ttl_s: float) -> str:
        """Remember which cached release and which query a paged answer came from."""

    @abstractmethod
    def result(self, result_id: str) -> StoredResult | None: ...

    @abstractmethod
    def close(self) -> None: ...

    # --- cursors ---------------------------------------------------------------------------
    def sign(self, cursor: Cursor) -> str:
        payload = json.dumps(
            [cursor.result_id, cursor.offset, cursor.page_size, cursor.analyst, cursor.issued],
            separators=(",", ":"),
        ).encode()
        tag = hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]
        return f"{_b64(payload)}.{_b64(tag)}"

    def open(self, token: str, *, analyst: str, ttl_s: float) -> Cursor:
        """The cursor ``token`` encodes, if this server signed it for ``analyst``."""
        try:
            body, _, tag = token.partition(".")
            payload = _unb64(body)
            given = _unb64(tag)
        except (ValueError, UnicodeEncodeError):
            raise CursorError("malformed cursor") from None
        expected = hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]
        if not hmac.compare_digest(expected, given):
            raise CursorError("the cursor was not issued by this server")
        result_id, offset, size, owner, issued = json.loads(payload)
        if not hmac.compare_digest(str(owner).encode(), analyst.encode()):
            raise CursorError("the cursor belongs to another API key")
        if time.time() - float(issued) > ttl_s:
            raise CursorError("the cursor has expired")
        return Cursor(str(result_id), int(offset), int(size), str(owner), float(issued))


class SQLiteServerStore(ServerStore):
    """The server store in one SQLite file, shared by the workers of one host."""

    def __init__(self, path: str | os.PathLike[str], *, pending_stale_s: float = 300.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.pending_stale_s = pending_stale_s
        self._connections = ThreadConnections(self.path)
        conn = self._conn()
        conn.executescript(SCHEMA)
        # The first worker to start picks the secret; the others read the same one.
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('cursor_secret', ?)",
            (secrets.token_bytes(32),),
        )
        self._secret = bytes(
            conn.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()[0]
        )

    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    # --- Idempotency-Key ----------------------------------------------------------------
    def begin(
        self, analyst: str, key: str, fingerprint: str, *, ttl_s: float
    ) -> StoredResponse | str:
        conn = self._conn()
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM idempotency WHERE created < ?", (now - ttl_s,))
            row = conn.execute(
                "SELECT fingerprint, created, status, media_type, headers, body "
                "FROM idempotency WHERE analyst = ? AND key = ?",
                (analyst, key),
            ).fetchone()
            if row is None or (row[2] is None and now - float(row[1]) > self.pending_stale_s):
                conn.execute(
                    "INSERT OR REPLACE INTO idempotency(analyst, key, fingerprint, created) "
                    "VALUES (?, ?, ?, ?)",
                    (analyst, key, fingerprint, now),
                )
                return "new"
            if row[0] != fingerprint:
                return "mismatch"
            if row[2] is None:
                return "pending"
            return StoredResponse(int(row[2]), str(row[3]), json.loads(row[4]), bytes(row[5]))
        finally:
            conn.execute("COMMIT")

    def finish(self, analyst: str, key: str, response: StoredResponse) -> None:
        self._conn().execute(
            "UPDATE idempotency SET status = ?, media_type = ?, headers = ?, body = ? "
            "WHERE analyst = ? AND key = ?",
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
        self._conn().execute(
            "DELETE FROM idempotency WHERE analyst = ? AND key = ? AND status IS NULL",
            (analyst, key),
        )

    # --- paged results --------------------------------------------------------------------
    def save_result(self, cache_key: str, request: dict[str, Any], *, ttl_s: float) -> str:
        text = json.dumps(request, sort_keys=True)
        rid = result_id(cache_key, text)
        now = time.time()
        conn = self._conn()
        conn.execute("DELETE FROM pages WHERE created < ?", (now - ttl_s,))
        conn.execute(
            "INSERT INTO pages(id, cache_key, request, created) VALUES (?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET created = excluded.created",
            (rid, cache_key, text, now),
        )
        return rid

    def result(self, result_id: str) -> StoredResult | None:
        row = (
            self._conn()
            .execute("SELECT cache_key, request FROM pages WHERE id = ?", (result_id,))
            .fetchone()
        )
        if row is None:
            return None
        return StoredResult(result_id, str(row[0]), json.loads(row[1]))

    def close(self) -> None:
        self._connections.close()
