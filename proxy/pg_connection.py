"""One PostgreSQL connection per process and store for the proxy's shared state (release
cache, idempotency records, pages, Trino answers), in the schema ``dpsql_state``: the
PostgreSQL counterpart of sqlite_files.py, used with ``[ledger] url``.

The budget ledger keeps its own connection and rules (accounting/store_postgres.py).
Commits here do not wait for the disk (``synchronous_commit=off``, like the SQLite
state files' ``synchronous=NORMAL``): a crash of the database server may drop the newest
entries, which then cost a new charge or a retry — never a privacy loss, since the
ledger's charge is durable before any private row is read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg

from accounting.store_postgres import LOCK_CLASS, connect, lock_key

STATE_SCHEMA = "dpsql_state"


class SharedConnection:
    """A lazily opened autocommit connection shared by the threads of one process (one
    statement or transaction at a time), reopened after fork or when it broke."""

    def __init__(
        self, dsn: str, *, application: str, ddl: Sequence[str], timeout_s: float = 30.0
    ) -> None:
        self._dsn = dsn
        self._application = application
        self._ddl = tuple(ddl)
        self._timeout = timeout_s
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = os.getpid()
        self._inherited: list[psycopg.Connection[Any]] = []
        # Bumped on every new connection: session-level state (advisory locks) belongs
        # to one generation.
        self.generation = 0
        with self.session():
            pass  # create the tables now, so that a bad URL fails at start-up

    def _open(self) -> psycopg.Connection[Any]:
        conn = connect(self._dsn, timeout_s=self._timeout, application=self._application)
        try:
            conn.execute("SET synchronous_commit = off")
            with conn.transaction():
                # IF NOT EXISTS is not safe against a concurrent creator: hosts starting
                # together take turns.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, lock_key(STATE_SCHEMA))
                )
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {STATE_SCHEMA}")
                for stmt in self._ddl:
                    conn.execute(stmt)
        except BaseException:
            conn.close()
            raise
        self.generation += 1
        return conn

    @contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection, for one statement or transaction, under the process's lock."""
        with self._lock:
            if self._conn is not None and os.getpid() != self._pid:
                self._inherited.append(self._conn)  # never closed here: it is the parent's
                self._conn = None
            self._pid = os.getpid()
            if self._conn is not None and self._conn.broken:
                self._drop()
            if self._conn is None:
                self._conn = self._open()
            try:
                yield self._conn
            except psycopg.Error:
                if self._conn.broken:
                    self._drop()
                raise

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self.session() as conn, conn.transaction():
            yield conn

    def _drop(self) -> None:
        if self._conn is not None:
            with suppress(Exception):
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                self._drop()
            self._conn = None
