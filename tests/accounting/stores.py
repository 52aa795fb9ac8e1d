"""The ledger stores under test, behind one picklable handle: how to open a store (in this
process or a spawned one), count its events, read it as the administrator and edit it
behind the store's back (what the tamper tests need)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from accounting.ledger import Ledger

KINDS = ("sqlite", "postgres")
PG_SCHEMA = "dpsql_ledger"


@dataclass(frozen=True)
class StoreTarget:
    kind: str  # "sqlite" | "postgres"
    location: str  # file path, or the DSN of the (non-superuser) role the store uses
    admin: str = ""  # postgres: a superuser's DSN in the same database

    def open(self) -> Ledger:
        if self.kind == "sqlite":
            from accounting.store_sqlite import SQLiteLedger

            return SQLiteLedger(self.location)
        from accounting.store_postgres import PostgresLedger

        return PostgresLedger(self.location)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Read as the administrator (PostgreSQL: tables unqualified, in the ledger's
        schema)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.location) as c:
                return list(c.execute(sql, params).fetchall())
        with self._admin() as c:
            return list(c.execute(sql, params or None).fetchall())

    def execute(self, *sql: str) -> None:
        """Run statements as the administrator, guards in force."""
        if self.kind == "sqlite":
            c = sqlite3.connect(self.location, isolation_level=None)
            try:
                for s in sql:
                    c.execute(s)
            finally:
                c.close()
            return
        with self._admin() as c:
            for s in sql:
                c.execute(s)

    def bypassing_guards(self, table: str, *sql: str) -> None:
        """Run statements with ``table``'s append-only guards out of the way, then put
        them back exactly as they were (what someone with the file or a superuser can
        do)."""
        if self.kind == "sqlite":
            triggers = self.query(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                (table,),
            )
            self.execute(
                *(f"DROP TRIGGER {name}" for name, _ in triggers),
                *sql,
                *(text for _, text in triggers),
            )
            return
        self.execute("SET session_replication_role = replica", *sql)

    def n_events(self) -> int:
        return int(self.query("SELECT count(*) FROM events")[0][0])

    def facts(self) -> tuple[int, int, int]:
        """(charge events, charges counted by the latest totals rows, populations named
        by charge events); asserts every charge has its totals rows."""
        counted = (
            "SELECT coalesce(sum(events), 0) FROM totals t WHERE event_id = "
            "(SELECT max(event_id) FROM totals u WHERE u.population = t.population)"
        )
        length = (
            "json_array_length(populations)"
            if self.kind == "sqlite"
            else "json_array_length(populations::json)"
        )
        orphans = self.query(
            "SELECT count(*) FROM events e WHERE kind = 'charge' "
            "AND NOT EXISTS (SELECT 1 FROM totals t WHERE t.event_id = e.id)"
        )[0][0]
        assert orphans == 0
        charges = self.query("SELECT count(*) FROM events WHERE kind = 'charge'")[0][0]
        named = self.query(f"SELECT coalesce(sum({length}), 0) FROM events WHERE kind = 'charge'")[
            0
        ][0]
        return int(charges), int(self.query(counted)[0][0]), int(named)

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.admin, autocommit=True, options=f"-c search_path={PG_SCHEMA}")
