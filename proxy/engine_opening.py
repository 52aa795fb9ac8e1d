"""An :class:`proxy.engine.Engine` whose executor, ledger and post-processing database
open on a thread of their own while the calling thread imports the rest of the engine
(for a one-shot `dpsql` command: proxy/cli.py).

A cold `dpsql query` is almost all start-up, in two long halves: importing the planner
(sqlglot, the rewrite, the accounting: Python code, which holds the GIL) and opening what
the engine reads and writes (DuckDB: the CSV copy built on first use, the read-only
executor and its start-up checks, the post-processing database; SQLite: the ledger, with
its syncs). The second half runs mostly inside DuckDB and SQLite, which release the GIL,
so with a core free the two overlap (BENCHMARKS.md §5a). Nothing else changes: the same
functions open the same things in the engine's order (executor, then ledger; then the
post-processing database, which the engine would open at its first query), the engine
gets them through its constructor, and an error raised while opening reaches the caller
of :meth:`Opening.engine` before any engine exists, so before any charge. If the import
fails instead, what was opened is closed.

Only a DuckDB executor and a SQLite ledger are opened here; the engine opens any other
(PostgreSQL, Spark) itself, as before. The release cache too: it keeps one SQLite
connection per thread (proxy/sqlite_files.py), so one opened here would stay with this
thread while the engine's thread opened another. The modules the thread runs are
imported before it starts, so the two threads do not import the same modules at once
(the per-module import locks keep that safe, but a circular import split between two
threads can see a module half made).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    queries) post-processing database on a new thread (see above)."""

    def __init__(self, policy: Policy, *, post: bool = True) -> None:
        self._policy = policy
        self._duckdb = policy.database.engine is EngineKind.DUCKDB
        self._sqlite = policy.ledger_url is None
        self._post = post
        # The thread's modules (DuckDB, pyarrow and sqlglot among them: the engine
        # imports all of them anyway).
        if self._duckdb:
            import proxy.engines
            import proxy.execute
        if self._sqlite:
            import accounting.store_sqlite  # noqa: F401
            import proxy.ledger_store
        import proxy.release  # noqa: F401

        self._opened: Opened | None = None
        self._error: BaseException | None = None
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._interval, _SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._open, name="dpsql-opening")
        try:
            self._thread.start()
        except BaseException:
            sys.setswitchinterval(self._interval)
            raise

    def _open(self) -> None:
        from proxy.release import PostProcessor

        executor: Executor | None = None
        ledger: Ledger | None = None
        post: PostProcessor | None = None
        try:
            if self._duckdb:
                from proxy.engines import open_executor

                executor = open_executor(self._policy)
            if self._sqlite:
                from proxy.ledger_store import open_ledger

                ledger = open_ledger(self._policy)
            if self._post:
                post = PostProcessor()
                post.open()
            self._opened = Opened(executor, ledger, post)
        except BaseException as error:  # raised to the caller by result()
            self._error = error
            for part in (post, ledger, executor):
                if part is not None:
                    part.close()

    def _join(self) -> None:
        try:
            self._thread.join()
        finally:
            sys.setswitchinterval(self._interval)

    def result(self) -> Opened:
        """What was opened, once it is; raises the thread's error instead, if any."""
        self._join()
        if self._error is not None:
            raise self._error
        assert self._opened is not None
        return self._opened

    def discard(self) -> None:
        """Wait for the thread and close what it opened (for a caller that failed)."""
        self._join()
        if self._opened is not None:
            self._opened.close()

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
