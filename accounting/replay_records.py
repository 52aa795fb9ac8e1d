"""Which analyst has received which release: the first receipt fsynced, repeats not waited on.

A ``replay`` event records that an analyst was served a release again. What matters
for privacy is *who has received what* (RELIABILITY.md, "Replay records"): the first
time an analyst receives a given release (the paying charge counts for its analyst),
the store appends a ``replay`` event and fsyncs it before the answer leaves. A later
repeat of the same release to the same analyst discloses nothing new: the store still
appends its ``replay`` event (group-committed, visible to every reader at once, and kept
if the process is killed) but does not wait for the disk; the fsync follows within
``SYNC_DELAY_S``, at clean close and at interpreter exit. An operating-system crash or
power loss may therefore lose the last repeats (counts under-stated), never a first
receipt.

:class:`ReplayRecords` holds that per-process state for one store: the (analyst, charge)
pairs known to have a durable record (seeded from the store on first use, then learnt
from this process's own commits) and whether committed repeats still await their fsync.
Repeats are ordinary ``replay`` events, so the hash chain, ``verify`` and the ledger
views need nothing new.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

# At most this long between a repeat's commit and the fsync that makes it durable.
SYNC_DELAY_S = 0.1
# At most this long between a deferred repeat (a door that does not wait for the store's
# write lock, see SQLiteLedger.defer_repeat) and its commit.
DEFER_DELAY_S = 0.02

_log = logging.getLogger(__name__)

# Every (analyst, charge id) with a durable charge or replay event in the store.
ReadPairs = Callable[[], Iterable[tuple[str, int]]]
# Makes every commit so far durable (for SQLite: fsync the write-ahead log).
Sync = Callable[[], None]
# Commits every repeat queued without waiting (deferred), logging what it cannot.
Flush = Callable[[], None]

# Every live instance: at interpreter exit each syncs what it committed without waiting.
_LIVE: weakref.WeakSet[ReplayRecords] = weakref.WeakSet()


@atexit.register
def _sync_all() -> None:
    for records in list(_LIVE):
        records.close()


class ReplayRecords:
    """Per-process memory of durable (analyst, charge) records, and the deferred fsync of
    repeats. Thread-safe. A forked child keeps the known pairs (they are durable) and
    starts with nothing to sync (the parent syncs its own commits)."""

    def __init__(self, read_pairs: ReadPairs, sync: Sync, flush: Flush | None = None) -> None:
        self._read_pairs = read_pairs
        self._sync = sync
        self._flush = flush
        self._pairs: set[tuple[str, int]] = set()
        self._seeded = False
        self._seed_lock = threading.Lock()
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._flush_timer: threading.Timer | None = None
        # Timers whose commit or sync is running (close waits for them).
        self._running: set[threading.Thread] = set()
        self._unsynced = False
        self._closed = False

    def _same_process(self) -> None:
        if os.getpid() != self._pid:
            self._reset()

    # --- who has received what -----------------------------------------------------------

    def known(self, analyst: str, charge_id: int) -> bool:
        """Whether ``analyst`` has a durable record of receiving charge ``charge_id``'s
        release. The first call reads every such pair from the store (raises what the
        store raises; nothing is remembered then)."""
        if not self._seeded:
            with self._seed_lock:
                if not self._seeded:
                    self._pairs.update(self._read_pairs())
                    self._seeded = True
        return (analyst, charge_id) in self._pairs

    def learn(self, analyst: str, charge_id: int) -> None:
        """A durable charge or replay of ``analyst`` for ``charge_id`` was committed."""
        self._pairs.add((analyst, charge_id))

    # --- the deferred fsync ----------------------------------------------------------------

    def committed_unsynced(self) -> None:
        """A repeat was committed without fsync: sync within SYNC_DELAY_S."""
        self._same_process()
        with self._lock:
            self._unsynced = True
            if self._timer is None and not self._closed:
                self._timer = threading.Timer(SYNC_DELAY_S, self._on_timer)
                self._timer.daemon = True
                self._timer.start()

    def deferred(self) -> None:
        """A repeat was queued without waiting for its commit: commit within
        DEFER_DELAY_S (then its fsync follows within SYNC_DELAY_S)."""
        self._same_process()
        with self._lock:
            if self._flush_timer is None and not self._closed and self._flush is not None:
                self._flush_timer = threading.Timer(DEFER_DELAY_S, self._on_flush_timer)
                self._flush_timer.daemon = True
                self._flush_timer.start()

    @contextmanager
    def _running_timer(self) -> Iterator[None]:
        """The calling timer counts as running, so that close waits for it, while the
        block runs. Entered before the timer frees its slot: close always sees it in
        one of the two."""
        me = threading.current_thread()
        with self._lock:
            self._running.add(me)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(me)

    def _on_flush_timer(self) -> None:
        with self._running_timer():
            with self._lock:
                self._flush_timer = None
            self._flush_now()

    def _flush_now(self) -> None:
        if self._flush is None:
            return
        try:
            self._flush()
        except Exception as exc:  # the answers are out; counts may be under-stated
            _log.warning("could not commit deferred replay repeats: %s", exc)

    def synced(self) -> None:
        """Everything committed so far is durable (a durable commit and its fsync just ran)."""
        with self._lock:
            self._unsynced = False

    @property
    def unsynced(self) -> bool:
        with self._lock:
            return self._unsynced

    def sync_now(self) -> None:
        with self._lock:
            pending, self._unsynced = self._unsynced, False
        if pending:
            try:
                self._sync()
            except Exception as exc:  # the answers are out; counts may be under-stated
                _log.warning("could not sync replay repeats: %s", exc)

    def close(self) -> None:
        """Cancel the timers (waiting for one whose commit or sync is under way), commit
        deferred repeats and sync now: a clean stop keeps the counts exact."""
        self._same_process()
        with self._lock:
            self._closed = True
            pending = [t for t in (self._timer, self._flush_timer) if t is not None]
            self._timer = self._flush_timer = None
            running = list(self._running)
        for timer in pending:
            timer.cancel()
        # A timer already running its commit or sync is waited for: its commit would
        # otherwise land after the sync below and stay unsynced.
        for thread in (*pending, *running):
            if thread is not threading.current_thread():
                thread.join()
        self._flush_now()
        self.sync_now()

    def _on_timer(self) -> None:
        with self._running_timer():
            with self._lock:
                self._timer = None
            self.sync_now()
