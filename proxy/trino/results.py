"""Answers waiting to be fetched page by page through ``nextUri``.

Stored already encoded (Trino JSON values) in a SQLite file beside the ledger, so every
worker process can serve any page, and a page is served from what was released — never
by asking again; with ``[ledger] url`` in PostgreSQL (results_postgres.py), so that any
host serves any page. A query belongs to the analyst who asked it; its URI carries a
random slug; DELETE marks it cancelled; entries expire after a day.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

from proxy.policy import Policy
from proxy.sqlite_files import ThreadConnections

SCHEMA = """
CREATE TABLE IF NOT EXISTS trino_results (
    id TEXT PRIMARY KEY,
    slug TEXT NOT NULL,
    analyst TEXT NOT NULL,
    created REAL NOT NULL,
    cancelled INTEGER NOT NULL DEFAULT 0,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trino_results_created ON trino_results(created);
"""
TTL_S = 24 * 3600.0
# What one analyst's waiting answers may take, encoded: past it the oldest are dropped
# (their next page is then "not found"). A free catalog answer of 100,000 rows is about
# 15 MB, and unfetched ones filled the disk beside the ledger at the rate limit's pace
# (a probe of the doors, 2026-12-06).
MAX_ANALYST_BYTES = 32 << 20


@dataclass(frozen=True)
class Stored:
    columns: list[dict[str, Any]]
    data: list[list[Any]]
    warnings: list[dict[str, Any]]
    update_type: str | None
    cancelled: bool


def encode(
    columns: list[dict[str, Any]],
    data: list[list[Any]],
    warnings: list[dict[str, Any]],
    update_type: str | None,
) -> str:
    return json.dumps(
        {"columns": columns, "data": data, "warnings": warnings, "update_type": update_type},
        separators=(",", ":"),
    )


def decode(document: str, cancelled: bool) -> Stored:
    doc = json.loads(document)
    return Stored(doc["columns"], doc["data"], doc["warnings"], doc["update_type"], cancelled)


def over_budget(held: list[tuple[str, int]], incoming: int) -> list[str]:
    """The ids to drop (``held``: an analyst's stored answers, newest first, with their
    sizes) so that they and one more of ``incoming`` bytes stay within
    :data:`MAX_ANALYST_BYTES`."""
    total, out = incoming, []
    for query_id, size in held:
        total += int(size)
        if total > MAX_ANALYST_BYTES:
            out.append(query_id)
    return out


class ResultStore(Protocol):
    def put(
        self,
        query_id: str,
        slug: str,
        analyst: str,
        *,
        columns: list[dict[str, Any]],
        data: list[list[Any]],
        warnings: list[dict[str, Any]],
        update_type: str | None,
    ) -> None: ...

    def get(self, query_id: str, slug: str, analyst: str) -> Stored | None:
        """The stored answer, if it exists, the slug matches and it is the analyst's."""
        ...

    def cancel(self, query_id: str, slug: str, analyst: str) -> bool: ...

    def close(self) -> None: ...


def open_result_store(policy: Policy) -> ResultStore:
    """The policy's store of Trino answers: PostgreSQL with ``[ledger] url``, else a
    SQLite file beside the ledger."""
    if policy.ledger_url is not None:
        from proxy.trino.results_postgres import PostgresResultStore

        return PostgresResultStore(policy.ledger_url)
    path = policy.ledger_path
    return SQLiteResultStore(str(path.with_name(path.stem + "-trino.sqlite")))


class SQLiteResultStore:
    def __init__(self, path: str):
        self._connections = ThreadConnections(path)
        self._connections.get().executescript(SCHEMA)

    def put(
        self,
        query_id: str,
        slug: str,
        analyst: str,
        *,
        columns: list[dict[str, Any]],
        data: list[list[Any]],
        warnings: list[dict[str, Any]],
        update_type: str | None,
    ) -> None:
        now = time.time()
        conn = self._connections.get()
        conn.execute("DELETE FROM trino_results WHERE created < ?", (now - TTL_S,))
        document = encode(columns, data, warnings, update_type)
        held = conn.execute(
            "SELECT id, length(document) FROM trino_results WHERE analyst = ? "
            "ORDER BY created DESC",
            (analyst,),
        ).fetchall()
        for stale in over_budget(held, len(document)):
            conn.execute("DELETE FROM trino_results WHERE id = ?", (stale,))
        conn.execute(
            "INSERT INTO trino_results(id, slug, analyst, created, document) VALUES (?,?,?,?,?)",
            (query_id, slug, analyst, now, document),
        )

    def get(self, query_id: str, slug: str, analyst: str) -> Stored | None:
        row = (
            self._connections.get()
            .execute(
                "SELECT cancelled, document FROM trino_results "
                "WHERE id = ? AND slug = ? AND analyst = ? AND created >= ?",
                (query_id, slug, analyst, time.time() - TTL_S),
            )
            .fetchone()
        )
        if row is None:
            return None
        return decode(row[1], bool(row[0]))

    def cancel(self, query_id: str, slug: str, analyst: str) -> bool:
        cursor = self._connections.get().execute(
            "UPDATE trino_results SET cancelled = 1 WHERE id = ? AND slug = ? AND analyst = ?",
            (query_id, slug, analyst),
        )
        return cursor.rowcount > 0

    def close(self) -> None:
        self._connections.close()
