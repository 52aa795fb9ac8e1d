"""An :class:`proxy.engine.Engine` whose executor, ledger and post-processing database
open on threads of their own while the calling thread imports the rest of the engine
(for a one-shot `dpsql` command: proxy/cli.py).

A cold `dpsql query` is almost all start-up, in two long halves: importing the planner
(sqlglot, the rewrite, the accounting: Python code, which holds the GIL) and opening what
the engine reads and writes (DuckDB: the CSV copy built on first use, the read-only
executor and its start-up checks, the post-processing database and the function catalog
the parser's arity check reads; SQLite: the ledger, with its syncs). The second half runs
mostly inside DuckDB and SQLite, which release the GIL, so with a core free the two
overlap (BENCHMARKS.md §5a). Nothing else changes: the same functions open the same
things (the executor, then the ledger, in the engine's order), the engine gets them
through its constructor, and an error raised while opening reaches the caller of
:meth:`Opening.engine` before any engine exists, so before any charge. If the import
fails instead, what was opened is closed.

Two threads. The kept copy of the policy's CSV sources, the post-processing database and
DuckDB's function catalog need only DuckDB and the parsed policy (proxy/csv_copies.py,
proxy/post_database.py, proxy/duckdb_functions.py), so the first thread starts as soon as
those modules are imported, in that order. The executor (which then finds the copy
built) and the ledger need the planner's modules, so the second thread starts once they
are imported, and waits for the copy. Each thread's modules are imported before it
starts, so that the threads never import the same modules at once (the per-module
import locks keep that safe, but a circular import split between two threads can see a
module half made); DuckDB imports only the standard library, none of which imports it.

Only a DuckDB executor and a SQLite ledger are opened here; the engine opens any other
(PostgreSQL, Spark) itself, as before. The release cache too: it keeps one SQLite
connection per thread (proxy/sqlite_files.py), so one opened here would stay with this
thread while the engine's thread opened another.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.policy import EngineKind, Policy

if TYPE_CHECKING:
    from accounting.ledger import Ledger
    from proxy.engine import Engine
    from proxy.engines.executor import Executor
    from proxy.release import PostProcessor

# The GIL's switch interval while both threads run. The opening thread returns to Python
# briefly between its many DuckDB and SQLite calls, and each return waits for the GIL:
# up to the default 5 ms while the importing thread holds it, which made the opening
# finish after the imports (both threads timed). At 0.5 ms it finishes first; the
# default is restored once it is done.
_SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True)
class Opened:
    """What the thread opened; None where the engine opens it itself."""

    executor: Executor | None
    ledger: Ledger | None
    post: PostProcessor | None

    def close(self) -> None:
        for part in (self.post, self.ledger, self.executor):
            if part is not None:
                part.close()


class Opening:
    """Opens ``policy``'s executor, ledger and (with ``post``, for commands that answer
    queries) post-processing database on new threads (see above)."""

    def __init__(self, policy: Policy, *, post: bool = True) -> None:
        self._policy = policy
        self._duckdb = policy.database.engine is EngineKind.DUCKDB
        self._sqlite = policy.ledger_url is None
        self._opened: Opened | None = None
        self._error: BaseException | None = None
        self._post = post
        self._post_db: Any = None
        # The first thread's error (the CSV copy's, or the post-processing database's).
        self._early_error: BaseException | None = None
        self._copy_done = threading.Event()
        self._early: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._interval, _SWITCH_INTERVAL_S))
        try:
            import proxy.csv_copies
            import proxy.duckdb_functions
            import proxy.duckdb_sandbox
            import proxy.post_database

            self._early = threading.Thread(target=self._open_early, name="dpsql-early")
            self._early.start()
            # The opening thread's modules (pyarrow and sqlglot among them: the engine
            # imports all of them anyway).
            if self._duckdb:
                import proxy.engines
                import proxy.execute
            if self._sqlite:
                import accounting.store_sqlite  # noqa: F401
                import proxy.ledger_store
            import proxy.release  # noqa: F401

            self._thread = threading.Thread(target=self._open, name="dpsql-opening")
            self._thread.start()
        except BaseException:
            self.discard()
            raise

    def _open_early(self) -> None:
        from proxy.csv_copies import kept_copy
        from proxy.duckdb_functions import learn_arities
        from proxy.duckdb_sandbox import sandbox_settings
        from proxy.post_database import open_post_database

        db = None
        try:
            try:
                if self._duckdb and self._policy.csv_tables:
                    kept_copy(self._policy, sandbox_settings(self._policy))
            except BaseException as error:
                # recorded before the other thread is woken, which then opens nothing
                self._early_error = error
                raise
            finally:
                self._copy_done.set()
            if self._post:
                db = open_post_database()
                # DuckDB's own functions only: the database is new and dpsql's.
                learn_arities(db)
                self._post_db = db
        except BaseException as error:  # raised to the caller by result()
            self._early_error = error
            if db is not None:
                db.close()

    def _open(self) -> None:
        executor: Executor | None = None
        ledger: Ledger | None = None
        # The executor reads the copy the first thread builds (one builder at a time);
        # if that failed, nothing more is opened, as when the executor fails.
        self._copy_done.wait()
        if self._early_error is not None:
            return
        try:
            if self._duckdb:
                from proxy.engines import open_executor

                executor = open_executor(self._policy)
            if self._sqlite:
                from proxy.ledger_store import open_ledger

                ledger = open_ledger(self._policy)
            self._opened = Opened(executor, ledger, None)
        except BaseException as error:  # raised to the caller by result()
            self._error = error
            for part in (ledger, executor):
                if part is not None:
                    part.close()

    def _join(self) -> None:
        try:
            for thread in (self._thread, self._early):
                # ident: started (a thread that failed to start cannot be joined)
                if thread is not None and thread.ident is not None:
                    thread.join()
        finally:
            sys.setswitchinterval(self._interval)

    def result(self) -> Opened:
        """What was opened, once it is; raises a thread's error instead, if any (and
        closes what the other thread opened)."""
        self._join()
        error = self._early_error or self._error
        if error is not None:
            self._close()
            raise error
        assert self._opened is not None
        post = None
        if self._post_db is not None:
            from proxy.release import PostProcessor

            post = PostProcessor(database=self._post_db)
        return Opened(self._opened.executor, self._opened.ledger, post)

    def _close(self) -> None:
        if self._opened is not None:
            self._opened.close()
        if self._post_db is not None:
            self._post_db.close()

    def discard(self) -> None:
        """Wait for the threads and close what they opened (for a caller that failed)."""
        self._join()
        self._close()

    def engine(self) -> Engine:
        """Import the engine on this thread while the opening goes on, then build it on
        what was opened."""
        try:
            from proxy.engine import Engine
        except BaseException:
            self.discard()
            raise
        opened = self.result()
        try:
            return Engine(
                self._policy, executor=opened.executor, ledger=opened.ledger, post=opened.post
            )
        except BaseException:
            opened.close()
            raise
