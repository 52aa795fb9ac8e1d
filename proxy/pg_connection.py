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

from accounting.store_postgres import LOCK_CLASS, connect, lock_key, redact
from proxy.errors import DPSQLError

STATE_SCHEMA = "dpsql_state"


class SharedConnection:
    """A lazily opened autocommit connection shared by the threads of one process (one
    statement or transaction at a time), reopened after fork or when it broke."""

    def __init__(
        self, dsn: str, *, application: str, ddl: Sequence[str], timeout_s: float = 30.0
    ) -> None:
        self._dsn = dsn
        self._where = redact(dsn)
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
        """The connection, for one statement or transaction, under the process's lock.
        A database error is answered as ``ledger_unavailable`` (nothing is served from
        doubtful state); a broken connection is replaced on the next call."""
        with self._lock:
            if self._conn is not None and os.getpid() != self._pid:
                self._inherited.append(self._conn)  # never closed here: it is the parent's
                self._conn = None
            self._pid = os.getpid()
            if self._conn is not None and self._conn.broken:
                self._drop()
            try:
                if self._conn is None:
                    self._conn = self._open()
                yield self._conn
            except psycopg.Error as exc:
                if self._conn is not None and self._conn.broken:
                    self._drop()
                raise DPSQLError(
                    "ledger_unavailable",
                    f"the shared state store ({self._where}) failed: {type(exc).__name__}",
                    "the operator must check the PostgreSQL database of [ledger] url",
                ) from exc

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
