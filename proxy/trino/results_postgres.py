"""The Trino door's answers on PostgreSQL (``[ledger] url``): any host serves any page."""

from __future__ import annotations

import time
from typing import Any

from proxy.pg_connection import STATE_SCHEMA, SharedConnection
from proxy.trino.results import TTL_S, Stored, decode, encode, over_budget

S = STATE_SCHEMA
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {S}.trino_results (id text PRIMARY KEY, slug text NOT NULL, "
    "analyst text NOT NULL, created double precision NOT NULL, "
    "cancelled boolean NOT NULL DEFAULT false, document text NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS trino_results_created ON {S}.trino_results (created)",
)


class PostgresResultStore:
    def __init__(self, dsn: str) -> None:
        self._db = SharedConnection(dsn, application="dpsql-trino", ddl=SCHEMA)

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
        document = encode(columns, data, warnings, update_type)
        with self._db.transaction() as conn:
            conn.execute(f"DELETE FROM {S}.trino_results WHERE created < %s", (now - TTL_S,))
            held = conn.execute(
                f"SELECT id, length(document) FROM {S}.trino_results WHERE analyst = %s "
                "ORDER BY created DESC",
                (analyst,),
            ).fetchall()
            for stale in over_budget([(str(i), int(n)) for i, n in held], len(document)):
                conn.execute(f"DELETE FROM {S}.trino_results WHERE id = %s", (stale,))
            conn.execute(
                f"INSERT INTO {S}.trino_results (id, slug, analyst, created, document) "
                "VALUES (%s, %s, %s, %s, %s)",
                (query_id, slug, analyst, now, document),
            )

    def get(self, query_id: str, slug: str, analyst: str) -> Stored | None:
        with self._db.session() as conn:
            row = conn.execute(
                f"SELECT cancelled, document FROM {S}.trino_results "
                "WHERE id = %s AND slug = %s AND analyst = %s AND created >= %s",
                (query_id, slug, analyst, time.time() - TTL_S),
            ).fetchone()
        return None if row is None else decode(row[1], bool(row[0]))

    def cancel(self, query_id: str, slug: str, analyst: str) -> bool:
        with self._db.session() as conn:
            cur = conn.execute(
                f"UPDATE {S}.trino_results SET cancelled = true "
                "WHERE id = %s AND slug = %s AND analyst = %s",
                (query_id, slug, analyst),
            )
            return cur.rowcount > 0

    def close(self) -> None:
        self._db.close()
