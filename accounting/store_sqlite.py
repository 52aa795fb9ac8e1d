"""The embedded ledger store: one SQLite file, append-only, WAL, each durable write's
log fsynced before the call returns.

Tables: ``events`` (the raw, hash-chained log), ``totals`` (after each cost-bearing
event, one row per named population holding its new *own* total; never updated; see
``_SCHEMAS`` for its two layouts) and ``populations`` (roots and partitions with the
event that created them). Triggers
refuse UPDATE and DELETE on all three and any insert that is not a true append. Each
write is one ``BEGIN IMMEDIATE`` transaction, so admission is serialised across threads
and processes. The store fails closed: any doubt about its integrity makes every
operation that could lead to a release raise LedgerUnavailable.

Three things keep the store off the hot path without weakening any of that (issue 18):

* **The fsync after the lock**: commits run under ``synchronous=NORMAL`` and a durable
  one is followed by an fsync of the log once the write lock is released, before the
  call returns (see :meth:`SQLiteLedger._transaction`; RELIABILITY.md, "Charges: commit,
  then fsync"), so another process can commit while this one's disk syncs.
* **A mirror of the committed state** (:class:`_Mirror`): the latest own total of each
  population, caps, known partitions, the head of the hash chain and the charges that
  replays may point at, as this process last read or wrote them. It is trusted only
  inside a write transaction (which holds the store's write lock, so nothing can commit
  meanwhile) and only while ``PRAGMA data_version`` says no other connection has
  committed since it was filled; otherwise it is refilled by exactly the reads and
  checks the store made before (a stored row that is byte-for-byte the one already
  step-checked is not parsed again). A charge on an unchanged store is then admitted
  from memory and appends under the lock: event, totals, commit.
* **Group commit**: concurrent charges, external charges and replays of one process
  queue up and one of the callers appends the whole queue in one transaction (one fsync),
  admitting each charge in queue order against the totals the earlier ones of the batch
  left, exactly as if they had come one by one. A charge the budget refuses appends
  nothing and leaves the others alone; any store error rolls the whole batch back and
  every caller in it gets an error. Each call returns only after the commit that holds
  its event is durable (a charge before its noise is drawn).

Cache hits go through :meth:`SQLiteLedger.record_replay`: the first receipt of a release
by an analyst is a durable replay as above; a later repeat to the same analyst is
group-committed the same way but not followed by the fsync (in WAL mode: written to
the log, visible to every reader and kept if the process dies), and the log is fsynced
within ``SYNC_DELAY_S`` (:mod:`accounting.replay_records`, RELIABILITY.md
"Replay records"). A repeat hit thus never waits for the disk.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accounting.ledger import (
    EMPTY_TOTAL,
    SEPARATOR,
    BudgetExhausted,
    Event,
    InvalidRequest,
    Ledger,
    LedgerUnavailable,
    Partitioning,
    PopulationSpec,
    Receipt,
    Spend,
    Total,
    UnknownPopulation,
    VerifyReport,
    ancestors_or_self,
    check_population_name,
    check_request,
    composed_total,
    normalize_targets,
    root_of,
)
from accounting.ledger_records import (
    EVENT_COLS,
    GENESIS,
    MAX_PROBLEMS,
    ORDERS_JSON,
    Admission,
    EventTail,
    Inconsistent,
    admit_spend,
    check_cap,
    check_head,
    check_registration,
    check_target,
    check_text,
    curve_blob,
    digest,
    event_from_row,
    event_row,
    fold_analyst_events,
    names_json,
    parse_names,
    recompute,
    total_step,
)
from accounting.new_sqlite import create_wal_file
from accounting.rdp import Curve
from accounting.replay_records import ReplayRecords
from accounting.writer_gate import GateTimeout, WriterGate

_log = logging.getLogger(__name__)


def _append_only(table: str, guard: str) -> tuple[str, ...]:
    return (
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END",
        # INSERT OR REPLACE would delete silently (delete triggers do not fire for it).
        f"CREATE TRIGGER {table}_append_only BEFORE INSERT ON {table} WHEN {guard} "
        f"BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END",
    )


def _schema(totals: tuple[str, ...]) -> tuple[str, ...]:
    return (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL NOT NULL, kind TEXT NOT NULL "
        "CHECK (kind IN ('charge','replay','external','cap_change','register')), "
        "populations TEXT NOT NULL, curve TEXT, delta_extra REAL NOT NULL, "
        "analyst TEXT NOT NULL, fingerprint TEXT NOT NULL, note TEXT NOT NULL, "
        "parent_id INTEGER, cap REAL, delta REAL, hash TEXT NOT NULL)",
        "CREATE INDEX events_caps ON events (populations, id) WHERE cap IS NOT NULL",
        *totals,
        "CREATE TABLE populations (name TEXT PRIMARY KEY, root TEXT NOT NULL, delta REAL, "
        "created_event INTEGER NOT NULL)",
        *_append_only("events", "NEW.id <= COALESCE((SELECT MAX(id) FROM events), 0)"),
        *_append_only(
            "totals",
            "EXISTS (SELECT 1 FROM totals WHERE population = NEW.population "
            "AND event_id >= NEW.event_id) "
            "OR NOT EXISTS (SELECT 1 FROM events WHERE id = NEW.event_id)",
        ),
        *_append_only("populations", "EXISTS (SELECT 1 FROM populations WHERE name = NEW.name)"),
    )


# The schema of each version of the store; stores are created at the newest and keep the
# version they were created with. Version 1 keeps totals rows in a WITHOUT ROWID table
# keyed by (population, event): a b-tree of whole rows (~900 bytes), four to a page,
# that re-balanced two or three pages per charge, plus a second index by event.
# Version 2 (issue 18) appends them to a rowid table (the last page fills up, then a new
# one starts) with a unique index on (population, event), and reads them in insertion
# order, which is event order, for verify: about two fewer pages written, and fsynced,
# per charge. Both are read and written by the same code (see _Queries).
_SCHEMAS: dict[str, tuple[str, ...]] = {
    "1": _schema(
        (
            "CREATE TABLE totals (population TEXT NOT NULL, event_id INTEGER NOT NULL, "
            "curve TEXT NOT NULL, delta_extra REAL NOT NULL, events INTEGER NOT NULL, "
            "PRIMARY KEY (population, event_id)) WITHOUT ROWID",
            "CREATE INDEX totals_by_event ON totals (event_id, population)",
        )
    ),
    "2": _schema(
        (
            "CREATE TABLE totals (population TEXT NOT NULL, event_id INTEGER NOT NULL, "
            "curve TEXT NOT NULL, delta_extra REAL NOT NULL, events INTEGER NOT NULL)",
            "CREATE UNIQUE INDEX totals_key ON totals (population, event_id)",
        )
    ),
}
_NEW_STORE_VERSION = "2"


@dataclass(frozen=True)
class _Queries:
    """The statements that differ between schema versions."""

    newest_total: str  # the event id of the newest totals row
    totals_in_order: str  # every totals row, by event (verify)

    @classmethod
    def of(cls, version: str) -> _Queries:
        if version == "1":
            return cls(
                "SELECT max(event_id) FROM totals",
                "SELECT population, event_id, curve, delta_extra, events FROM totals "
                "ORDER BY event_id, population",
            )
        # Rows are appended with their event, so rowid order is event order; a row
        # slipped in out of order is reported by verify like any other misplaced row.
        return cls(
            "SELECT event_id FROM totals ORDER BY rowid DESC LIMIT 1",
            "SELECT population, event_id, curve, delta_extra, events FROM totals ORDER BY rowid",
        )


_Opened = TypeVar("_Opened")

# A totals row as stored (event_id, curve, delta_extra, events), the row before it (None
# for the first) and the event it follows (kind, populations, curve, delta_extra): what
# one step check of an own total reads.
_TotalRows = tuple[tuple[Any, ...], tuple[Any, ...] | None, tuple[Any, ...] | None]


def _write_schema(conn: sqlite3.Connection) -> None:
    """A new store's tables and meta rows (inside the caller's transaction)."""
    for stmt in _SCHEMAS[_NEW_STORE_VERSION]:
        conn.execute(stmt)
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [("schema_version", _NEW_STORE_VERSION), ("orders", ORDERS_JSON)],
    )


# The write-ahead log's layout in SQLite's file format: a 32-byte header, then frames
# of a 24-byte header and one page.
_LOG_HEADER, _FRAME_HEADER = 32, 24
# How far ahead of SQLite's frames the log is extended with zeros (see _extend_log):
# the size of the log so far, within these bounds.
_LOG_STEP_MIN, _LOG_STEP_MAX = 64 * 1024, 1024 * 1024


# Pages in the log before a commit checkpoints it (see SQLiteLedger._connect).
_CHECKPOINT_PAGES = 4000
# Writers take turns through the gate (accounting/writer_gate.py) only while this
# process's syncs of the log take longer than this on average. Turns make two writing
# processes alternate: each charge then re-reads what the other committed and waits for
# a hand-over (43-91 µs here; the gate asks before it waits), which pays only when it
# overlaps a sync that long. With the ledger in RAM, turns always taken halved two
# processes' charges (8,900 -> 3,800/s, measured before asking).
_TURNS_ABOVE_SYNC_S = 100e-6


def open_retrying(open_once: Callable[[], _Opened], timeout: float) -> _Opened:
    """``open_once()``, called again while it meets a lock that SQLite's busy timeout
    does not cover (another process switching a new file to WAL or creating its schema)
    until ``timeout`` seconds have passed. ``open_once`` closes what it opened when it
    raises."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return open_once()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text


@dataclass
class _Mirror:
    """What this process knows of the committed store (see the module docstring), as of
    ``data_version``. Entries are filled by reads and writes inside write transactions;
    a missing entry is read from the store."""

    data_version: int
    head: tuple[int, str] | None = None  # the last event (id, hash), once known
    head_known: bool = False
    caps: dict[str, float] = field(default_factory=dict)  # root -> cap in force
    known: dict[str, list[str]] = field(default_factory=dict)  # root -> populations
    totals: dict[str, tuple[_TotalRows, Total]] = field(default_factory=dict)
    charges: dict[int, str] = field(default_factory=dict)  # charge id -> populations json
    # Rows step-checked under an earlier data_version: a re-read that finds them
    # unchanged, byte for byte, needs no new parse (the check would repeat itself).
    checked: dict[str, tuple[_TotalRows, Total]] = field(default_factory=dict)

    def refreshed(self, data_version: int) -> _Mirror:
        """Another connection committed: keep only what lets re-reads skip re-parsing."""
        return _Mirror(data_version, checked={**self.checked, **self.totals})


@dataclass
class _Replay:
    """One queued replay: its arguments, then its event id or the error that refused it."""

    parent_id: int
    analyst: str
    fingerprint: str
    note: str
    event_id: int | None = None
    error: BaseException | None = None
    done: bool = False
    # False for a repeat (see record_replay): its commit need not wait for the fsync.
    durable: bool = True
    # True when nobody waits for its commit (see defer_repeat).
    deferred: bool = False


def _repeat(
    parent_id: int, analyst: str, fingerprint: str, note: str, *, deferred: bool
) -> _Replay:
    """A checked repeat ticket (committed without waiting for the fsync)."""
    if isinstance(parent_id, bool) or not isinstance(parent_id, int):
        raise InvalidRequest(f"parent_id must be an event id, got {parent_id!r}")
    return _Replay(
        parent_id,
        check_text("analyst", analyst),
        check_text("fingerprint", fingerprint),
        check_text("note", note),
        durable=False,
        deferred=deferred,
    )


@dataclass
class _Spend:
    """One queued charge or external charge: its arguments, then its admission and event
    id or the error that refused it."""

    kind: str
    targets: tuple[str, ...]
    curve: Curve
    delta_extra: float
    analyst: str
    fingerprint: str
    note: str
    admitted: Admission | None = None
    event_id: int | None = None
    error: BaseException | None = None
    done: bool = False
    # The event's columns after its time, as stored and as hashed into the chain,
    # encoded before the write lock is taken (they depend on the request alone).
    tail: EventTail = field(init=False)

    def __post_init__(self) -> None:
        self.tail = EventTail.of_spend(
            self.kind,
            self.targets,
            self.curve,
            self.delta_extra,
            self.analyst,
            self.fingerprint,
            self.note,
        )


# What admission may refuse a single spend with: the batch goes on without it. Anything
# else (a store error, an inconsistency) fails the whole batch.
_REFUSALS = (BudgetExhausted, UnknownPopulation, InvalidRequest)


# The longest wait for the store's locks a caller may ask for (a day): beyond it, time
# limits overflow the platform's timed waits instead of meaning "wait that long".
_MAX_TIMEOUT_S = 86_400.0

# Every store of this process, for the fork hook below.
_STORES: weakref.WeakSet[SQLiteLedger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child gets a new store lock: the parent's may be held by one of its
    threads (e.g. waiting for the write turn), which the child does not have, and the
    child's first ledger call would then wait for it forever, past every time limit.
    (The connection, the queue and the sync lock are replaced on that first call: see
    ``_connection``.)"""
    for store in list(_STORES):
        store._lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class SQLiteLedger(Ledger):
    """The ledger on one SQLite file, shared by any number of threads and processes.

    Preconditions: ``path`` is a file on a local file system (WAL needs shared memory;
    never a network share). A connection is never carried across ``fork``: a child
    process transparently opens its own. Opening never raises for a bad store; the
    ledger is then unavailable and says why.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout_s: float = 30.0) -> None:
        self._path = os.fspath(path)
        self._timeout = float(timeout_s)
        if not 0 < self._timeout <= _MAX_TIMEOUT_S:
            raise InvalidRequest(
                f"timeout_s must lie in (0, {_MAX_TIMEOUT_S:g}] seconds, got {timeout_s!r}"
            )
        self._lock = threading.RLock()
        _STORES.add(self)
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._inherited: list[sqlite3.Connection] = []
        self._broken: str | None = None
        self._closed = False
        # The statements of the store's schema version (set when the store is checked).
        self._queries = _Queries.of(_NEW_STORE_VERSION)
        self._deltas: dict[str, float] = {}
        # The last spec built per root (immutable; rebuilt when its cap differs).
        self._specs: dict[str, PopulationSpec] = {}
        # Partitionings of the roots registered by this process (from the policy):
        # charges and verify accept only the partitions they define.
        self._partitionings: dict[str, Partitioning | None] = {}
        # Roots registered by this process, with the analysts' shares of each.
        self._registered: dict[str, PopulationSpec] = {}
        # analyst -> (last event id read, own totals of their cost events): read forward
        # from the committed events on each charge, so it is never ahead of the store.
        self._analyst_totals: dict[str, tuple[int, dict[str, Total]]] = {}
        # The mirror of the committed state (None: read everything from the store), and
        # whether the transaction in progress may use it (write transactions only).
        self._mirror: _Mirror | None = None
        self._writing = False
        # Budget-changing commits made by this process, and what the store said of other
        # processes' ones at the last data_version seen (see :meth:`version`).
        self._cost_commits = 0
        self._foreign: tuple[int, tuple[Any, ...]] | None = None
        # Appends waiting for the next group commit, and whether one is under way.
        self._queue: list[_Replay | _Spend] = []
        self._queue_cv = threading.Condition(threading.Lock())
        self._leader = False
        # Callers waiting on _queue_cv (counted under it), so that a leader with none
        # skips notify_all.
        self._waiting = 0
        # This process's descriptor of the log, kept for its syncs (see _sync_log).
        self._wal: tuple[int, int] | None = None
        self._sync_lock = threading.Lock()
        # Writers of other processes hand this one the turn as they commit (see _take_turn).
        self._gate = WriterGate(self._path)
        self._sync_s = 0.0
        # Whether the connection's busy timeout is 0, as _begin_write leaves it.
        self._no_busy_wait = False
        # Bytes per frame of the log (set when the store is opened; see _extend_log).
        self._frame = 4096 + _FRAME_HEADER
        self._sync_failed: str | None = None
        # Which analyst has a durable record of which release, and the fsync owed to
        # repeats committed without one (see record_replay).
        self._replays = ReplayRecords(self._replay_pairs, self._sync_log, self._flush_deferred)
        try:
            self._conn = self._open()
        except (sqlite3.Error, OSError) as exc:
            self._broken = f"cannot open ledger store {self._path!r}: {exc}"
        except Inconsistent as exc:
            self._broken = f"ledger store {self._path!r} is inconsistent: {exc}"

    def _open(self) -> sqlite3.Connection:
        """Connect and check the store, retrying while another process holds a lock
        that SQLite does not wait for here (switching a new file to WAL, creating the
        schema): server workers open one store at the same moment, and a worker that
        gave up at once would stay unavailable until restarted."""
        return open_retrying(self._open_once, self._timeout)

    def _open_once(self) -> sqlite3.Connection:
        # A new store is made whole with two syncs (SQLite's switch to WAL took four,
        # before the schema's): accounting/new_sqlite.py.
        create_wal_file(self._path, _write_schema)
        conn = self._connect()
        try:
            self._open_store(conn)
            self._frame = int(conn.execute("PRAGMA page_size").fetchone()[0]) + _FRAME_HEADER
            with self._sync_lock:
                self._log_fd()  # open from the start: see _sync_log
        except BaseException:
            conn.close()
            raise
        return conn

    # --- connection and transactions ---------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise Inconsistent(f"cannot use WAL journal (got {mode!r})")
            # NORMAL: SQLite writes each commit to the log without syncing it; a durable
            # write then fsyncs the log itself, after the commit has released the write
            # lock and before the call returns (see _transaction). A checkpoint still
            # syncs the log before copying it and the file after.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
            # The commit that fills the log past this many pages checkpoints it, inside
            # its call: two fsyncs, the database file's growing (a file system journal
            # commit). SQLite's default of 1,000 pages is about 250 charges; at 4,000
            # (a log of about 16 MiB) a checkpoint costs about the same and comes four
            # times less often (measured under load: 54-75 µs a charge → 13-17 µs).
            conn.execute(f"PRAGMA wal_autocheckpoint={_CHECKPOINT_PAGES}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_store(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")
        try:
            empty = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        finally:
            conn.execute("ROLLBACK")
        if empty:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                    _write_schema(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        conn.execute("BEGIN")
        try:
            self._quick_check(conn)
        finally:
            conn.execute("ROLLBACK")

    def _quick_check(self, conn: sqlite3.Connection) -> None:
        """Cheap integrity check on open: schema, version, orders, triggers, the head of
        the hash chain, and the last step of every population's stored total."""
        objects = {
            (r[0], r[1]): r[2]
            for r in conn.execute("SELECT type, name, sql FROM sqlite_master")
            if not str(r[1]).startswith("sqlite_autoindex")
        }
        meta: dict[str, str] = {}
        if ("table", "meta") in objects:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        version = meta.get("schema_version")
        if version not in _SCHEMAS:
            raise Inconsistent(f"schema version {version!r}, expected one of {sorted(_SCHEMAS)!r}")
        expected: dict[tuple[str, str], str] = {}
        for stmt in _SCHEMAS[version]:
            words = [w for w in stmt.split() if w != "UNIQUE"]
            expected[(words[1].lower(), words[2])] = stmt
        if objects != expected:
            missing = sorted(k[1] for k in expected if objects.get(k) != expected[k])
            extra = sorted(k[1] for k in objects if k not in expected)
            raise Inconsistent(
                f"unexpected schema (missing or altered: {missing}, unexpected: {extra})"
            )
        self._queries = _Queries.of(version)
        if meta.get("orders") != ORDERS_JSON:
            raise Inconsistent("the store was written with a different RDP order grid")
        check_head(
            conn.execute(f"SELECT {EVENT_COLS} FROM events ORDER BY id DESC LIMIT 2").fetchall()
        )
        for (name,) in conn.execute("SELECT name FROM populations").fetchall():
            self._own_total(conn, name)

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise LedgerUnavailable("the ledger is closed")
        if self._conn is not None and os.getpid() != self._pid:
            # SQLite connections must not cross fork; keep the inherited one referenced
            # so that garbage collection never closes it under the parent's feet.
            self._inherited.append(self._conn)
            self._conn = None
            self._no_busy_wait = False
            self._pid = os.getpid()
            self._mirror = None
            self._foreign = None
            self._queue = []
            self._queue_cv = threading.Condition(threading.Lock())
            self._leader = False
            self._waiting = 0
            # The parent's lock may be held by one of its threads, absent here.
            self._sync_lock = threading.Lock()
            try:
                self._conn = self._connect()
                with self._sync_lock:
                    self._log_fd()  # opened with the connection, as in _open
            except (sqlite3.Error, Inconsistent, OSError) as exc:
                self._broken = f"cannot reopen ledger store after fork: {exc}"
        if self._conn is None:
            raise LedgerUnavailable(self._broken or "the ledger store is not open")
        return self._conn

    def _usable(self) -> sqlite3.Connection:
        conn = self._connection()
        if self._broken is not None:
            raise LedgerUnavailable(self._broken)
        return conn

    @contextmanager
    def _transaction(
        self, *, write: bool, gated: bool = True, durable: bool = True
    ) -> Iterator[sqlite3.Connection]:
        """A transaction on the connection. A write one is fsynced before this returns
        unless ``durable`` is False (repeats only: written to the log, not fsynced).

        The fsync of a durable write follows the commit, outside the store's write lock:
        SQLite's synchronous=FULL would hold the lock through it, so that a second
        process could not even begin its transaction while the disk syncs. The commit's
        frames are in the log (the page cache) when the lock is released; a reader that
        sees them and commits after them syncs them with its own (one file, appended in
        order), so nothing anyone returns rests on a commit that a power loss could
        undo without undoing it too. A killed process loses nothing it committed."""
        with self._lock:
            conn = self._usable() if gated else self._connection()
            # One time limit for the turn and SQLite's lock together.
            deadline = time.monotonic() + self._timeout
            turn = False
            try:
                turn = write and self._take_turn()
                yield from self._in_transaction(conn, write=write, deadline=deadline)
            finally:
                if turn:
                    self._gate.leave()
        if write and durable:
            self._sync_wal()

    def _in_transaction(
        self, conn: sqlite3.Connection, *, write: bool, deadline: float
    ) -> Iterator[sqlite3.Connection]:
        """The body of :meth:`_transaction`, under the store's lock (and this process's
        writer turn, for a write): begin (a write by ``deadline``, on time.monotonic),
        yield, commit or roll back."""
        try:
            if write:
                self._begin_write(conn, deadline)
                self._extend_log()
            else:
                self._wait_when_busy(conn)
                conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot lock the ledger store: {exc}") from exc
        ok = False
        try:
            if write:
                # The write lock is held from here to the commit: no other connection
                # can commit meanwhile, so data_version tells whether the mirror is
                # the store's current state.
                version = int(conn.execute("PRAGMA data_version").fetchone()[0])
                if self._mirror is None:
                    self._mirror = _Mirror(version)
                elif self._mirror.data_version != version:
                    self._mirror = self._mirror.refreshed(version)
                self._writing = True
            yield conn
            ok = True
        except Inconsistent as exc:
            self._rollback(conn)
            self._broken = f"ledger store is inconsistent: {exc}"
            raise LedgerUnavailable(self._broken) from exc
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise LedgerUnavailable(f"ledger store error: {exc}") from exc
        except BaseException:
            self._rollback(conn)
            raise
        finally:
            if write and not ok:
                # Rolled back: what the mirror learnt meanwhile is not in the store.
                self._mirror = None
            self._writing = False
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._mirror = None
            self._rollback(conn)
            raise LedgerUnavailable(f"ledger commit failed: {exc}") from exc

    def _take_turn(self) -> bool:
        """This process's turn among the store's writers (accounting/writer_gate.py):
        True when taken, False when SQLite's lock alone decides (syncs are fast here,
        see ``_TURNS_ABOVE_SYNC_S``, or there is no gate)."""
        if self._sync_s < _TURNS_ABOVE_SYNC_S:
            return False
        try:
            return self._gate.enter(self._timeout)
        except GateTimeout as exc:
            raise LedgerUnavailable(f"cannot lock the ledger store: {exc}") from exc

    def _sync_wal(self) -> None:
        """Make every commit so far durable before a write returns. A failed fsync
        leaves the committed events' durability in doubt (the kernel may have dropped
        the pages it could not write): the store then fails closed."""
        start = time.perf_counter()
        try:
            self._sync_log()
        except OSError as exc:
            self._broken = f"cannot sync the ledger's log: {exc}"
            raise LedgerUnavailable(self._broken) from exc
        # A moving mean of this process's syncs (see _TURNS_ABOVE_SYNC_S).
        self._sync_s += (time.perf_counter() - start - self._sync_s) / 8

    def _begin_write(self, conn: sqlite3.Connection, deadline: float) -> None:
        """BEGIN IMMEDIATE, waiting for another process's write transaction in steps of
        tens of microseconds: SQLite's own busy handler sleeps 1, 2, 5, 10 ... ms, longer
        than a whole commit, which left a second process idle most of the time.

        The connection's busy timeout is set to 0 for this and left there for the
        transaction (whose statements wait for no lock: it holds the write lock) and the
        next ones: a run of write transactions pays no PRAGMA per charge. Any other use
        of the connection restores SQLite's handler first (:meth:`_wait_when_busy`;
        readers of a WAL store rarely wait, but may, e.g. while a log is recovered)."""
        if not self._no_busy_wait:
            conn.execute("PRAGMA busy_timeout=0")
            self._no_busy_wait = True
        pause = 20e-6
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 1.5, 1e-3)

    def _wait_when_busy(self, conn: sqlite3.Connection) -> None:
        """Give the connection SQLite's busy handler back (see :meth:`_begin_write`)
        before it is used outside a write transaction."""
        if self._no_busy_wait:
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
            self._no_busy_wait = False

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    # --- reading state inside a transaction ------------------------------------------------

    def _own_total(self, conn: sqlite3.Connection, name: str) -> Total:
        """The latest own total of ``name``, after checking that it is the previous one
        plus the event it claims to follow (one step of verify, per charge)."""
        mirror = self._mirror if self._writing else None
        if mirror is not None and (found := mirror.totals.get(name)) is not None:
            return found[1]
        rows = conn.execute(
            "SELECT event_id, curve, delta_extra, events FROM totals "
            "WHERE population = ? ORDER BY event_id DESC LIMIT 2",
            (name,),
        ).fetchall()
        if not rows:
            if mirror is not None:
                mirror.totals[name] = (((), None, None), EMPTY_TOTAL)
            return EMPTY_TOTAL
        ev = conn.execute(
            "SELECT kind, populations, curve, delta_extra FROM events WHERE id = ?", (rows[0][0],)
        ).fetchone()
        raw: _TotalRows = (tuple(rows[0]), tuple(rows[1]) if len(rows) > 1 else None, ev)
        seen = None if mirror is None else mirror.checked.get(name)
        if seen is not None and seen[0] == raw:
            total = seen[1]  # the very rows already step-checked: the check would repeat
        else:
            # Another process appended after the row this one last checked (the usual
            # case with two writers): that row's total is known, only the new one is read.
            known = seen[1] if seen is not None and seen[0][0] == raw[1] else None
            total = total_step(name, rows[0], raw[1], ev, known)
        if mirror is not None:
            mirror.totals[name] = (raw, total)
        return total

    def _spec(self, conn: sqlite3.Connection, root: str) -> PopulationSpec:
        delta = self._deltas.get(root)
        if delta is None:
            row = conn.execute(
                "SELECT delta FROM populations WHERE name = ? AND root = name", (root,)
            ).fetchone()
            if row is None:
                raise UnknownPopulation(f"population {root!r} is not registered")
            if row[0] is None:
                raise Inconsistent(f"root {root!r} has no delta")
            delta = float(row[0])
            self._deltas[root] = delta
        mirror = self._mirror if self._writing else None
        cap = None if mirror is None else mirror.caps.get(root)
        if cap is None:
            found = conn.execute(
                "SELECT cap FROM events WHERE cap IS NOT NULL AND populations = ? "
                "ORDER BY id DESC LIMIT 1",
                (names_json([root]),),
            ).fetchone()
            if found is None:
                raise Inconsistent(f"root {root!r} has no register event")
            cap = float(found[0])
            if mirror is not None:
                mirror.caps[root] = cap
        spec = self._specs.get(root)
        if spec is None or spec.epsilon_cap != cap or spec.delta != delta:
            spec = self._specs[root] = PopulationSpec(root, cap, delta)
        return spec

    def _known(self, conn: sqlite3.Connection, roots: Sequence[str]) -> list[str]:
        mirror = self._mirror if self._writing else None
        out: list[str] = []
        for r in roots:
            names = None if mirror is None else mirror.known.get(r)
            if names is None:
                names = [
                    n for (n,) in conn.execute("SELECT name FROM populations WHERE root = ?", (r,))
                ]
                if mirror is not None:
                    mirror.known[r] = names
            out.extend(names)
        return out

    def _head(self, conn: sqlite3.Connection) -> tuple[int, str] | None:
        """The last event's (id, hash), None for an empty log."""
        mirror = self._mirror if self._writing else None
        if mirror is not None and mirror.head_known:
            return mirror.head
        last = conn.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        head = None if last is None else (int(last[0]), str(last[1]))
        if mirror is not None:
            mirror.head, mirror.head_known = head, True
        return head

    def _append_event(
        self,
        conn: sqlite3.Connection,
        kind: str,
        names: Sequence[str],
        *,
        curve: Curve | None = None,
        delta_extra: float = 0.0,
        analyst: str = "",
        fingerprint: str = "",
        note: str = "",
        parent_id: int | None = None,
        cap: float | None = None,
        delta: float | None = None,
        tail: EventTail | None = None,
    ) -> int:
        """Append one event after the head of the chain; ``tail`` holds its columns
        after the time, encoded by the caller (then ``kind`` … ``delta`` are ignored)."""
        last = self._head(conn)
        event_id, prev = (1, GENESIS) if last is None else (last[0] + 1, last[1])
        ts = time.time()
        if tail is not None:
            row = (event_id, ts, *tail.columns)
            hashed = tail.digest(prev, event_id, ts)
        else:
            row = event_row(
                event_id,
                ts,
                kind,
                names,
                curve=curve,
                delta_extra=delta_extra,
                analyst=analyst,
                fingerprint=fingerprint,
                note=note,
                parent_id=parent_id,
                cap=cap,
                delta=delta,
            )
            hashed = digest(prev, row)
        conn.execute(
            f"INSERT INTO events ({EVENT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*row, hashed),
        )
        mirror = self._mirror if self._writing else None
        if mirror is not None:
            mirror.head, mirror.head_known = (event_id, hashed), True
            if kind == "charge":
                mirror.charges[event_id] = row[3]
            if cap is not None:
                mirror.caps[names[0]] = float(cap)
        return event_id

    # --- the interface ---------------------------------------------------------------------

    def _own_totals_of(self, conn: sqlite3.Connection, analyst: str) -> dict[str, Total]:
        """Own totals of one analyst's cost events, brought up to the committed store."""
        last, totals = self._analyst_totals.get(analyst, (0, {}))
        rows = conn.execute(
            "SELECT id, populations, curve, delta_extra FROM events WHERE id > ? "
            "AND analyst = ? AND kind IN ('charge', 'external') ORDER BY id",
            (last, analyst),
        ).fetchall()
        read, totals = fold_analyst_events(totals, rows)
        self._analyst_totals[analyst] = (last if read is None else read, totals)
        return totals

    def share_spent(self, population: str, analyst: str) -> Spend | None:
        """What ``analyst``'s own events cost the persons of ``population``, against
        their share (None when the analyst has no share of its root)."""
        registered = self._registered.get(root_of(population))
        share = None if registered is None else registered.share_of(analyst)
        if registered is None or share is None:
            return None
        with self._transaction(write=False) as conn:
            mine = self._own_totals_of(conn, analyst)
        total = composed_total(population, mine)
        return Spend.of(population, total, registered.epsilon_cap * share, registered.delta * share)

    def register(self, spec: PopulationSpec) -> None:
        name, cap, delta = check_registration(spec)
        self._partitionings[name] = spec.partitioning
        self._registered[name] = spec
        with self._transaction(write=True) as conn:
            row = conn.execute("SELECT root, delta FROM populations WHERE name = ?", (name,))
            found = row.fetchone()
            if found is None:
                eid = self._append_event(
                    conn,
                    "register",
                    [name],
                    analyst="policy",
                    cap=cap,
                    delta=delta,
                    note="registered from policy",
                )
                conn.execute(
                    "INSERT INTO populations (name, root, delta, created_event) VALUES (?,?,?,?)",
                    (name, name, delta, eid),
                )
                if self._mirror is not None:
                    self._mirror.known.pop(name, None)
                self._cost_commits += 1
                return
            if found[1] is None or float(found[1]) != delta:
                raise InvalidRequest(
                    f"population {name!r} is registered with delta {found[1]!r}; "
                    "its delta cannot change"
                )
            last = conn.execute(
                "SELECT cap FROM events WHERE cap IS NOT NULL AND populations = ? "
                "AND kind = 'register' ORDER BY id DESC LIMIT 1",
                (names_json([name]),),
            ).fetchone()
            if last is None:
                raise Inconsistent(f"root {name!r} has no register event")
            if float(last[0]) != cap:
                self._append_event(
                    conn,
                    "register",
                    [name],
                    analyst="policy",
                    cap=cap,
                    delta=delta,
                    note=f"policy cap changed from {float(last[0])!r} to {cap!r}",
                )
                self._cost_commits += 1

    def _spend(
        self,
        kind: str,
        population: str | Sequence[str],
        curve: Curve,
        delta_extra: float,
        analyst: str,
        fingerprint: str,
        note: str,
    ) -> Receipt:
        targets = normalize_targets(population)
        dx = check_request(curve, delta_extra)
        ticket = _Spend(kind, targets, curve, dx, analyst, fingerprint, note)
        self._group_commit(ticket)
        assert ticket.admitted is not None and ticket.event_id is not None
        if kind == "charge":
            # The payer has received this release: their later hits are repeats.
            self._replays.learn(analyst, ticket.event_id)
        # Built after the commit: the requested ε is the request's alone (no lock needed).
        return ticket.admitted.receipt(ticket.event_id, kind)

    def _append_spend(self, conn: sqlite3.Connection, t: _Spend) -> None:
        """Admit and append one queued spend inside the batch's transaction."""
        try:
            admitted = admit_spend(
                _State(self, conn),
                t.targets,
                t.curve,
                t.delta_extra,
                t.analyst,
                self._registered,
                lambda name: check_target(name, self._partitionings),
            )
        except _REFUSALS as exc:
            t.error = exc  # refused before anything was written
            return
        event_id = self._append_event(
            conn,
            t.kind,
            t.targets,
            curve=t.curve,
            delta_extra=t.delta_extra,
            analyst=t.analyst,
            fingerprint=t.fingerprint,
            note=t.note,
            tail=t.tail,
        )
        # The stored kind, populations and curve (what a re-read would step-check).
        self._insert_admitted(conn, admitted, event_id, t.tail.columns[:3])
        self._cost_commits += 1
        t.admitted, t.event_id = admitted, event_id

    def _insert_admitted(
        self,
        conn: sqlite3.Connection,
        admitted: Admission,
        event_id: int,
        stored: tuple[str, str, str],
    ) -> None:
        """Append the admitted totals (and new partitions) of event ``event_id``, whose
        stored (kind, populations, curve) is ``stored``."""
        rows = [
            (t, event_id, curve_blob(new.curve), new.delta_extra, new.events)
            for t, new in admitted.totals
        ]
        insert = "INSERT INTO totals (population, event_id, curve, delta_extra, events) VALUES (?,?,?,?,?)"
        if len(rows) == 1:
            conn.execute(insert, rows[0])
        else:
            conn.executemany(insert, rows)
        if admitted.created:
            conn.executemany(
                "INSERT INTO populations (name, root, delta, created_event) VALUES (?,?,NULL,?)",
                [(t, root_of(t), event_id) for t in admitted.created],
            )
        mirror = self._mirror if self._writing else None
        if mirror is None:
            return
        # What a re-read of these rows would find and step-check: the new total, the one
        # before it and this event.
        event = (*stored, float(admitted.delta_extra))
        for (t, new), row in zip(admitted.totals, rows, strict=True):
            before = mirror.totals.get(t)
            if before is None:
                mirror.totals.pop(t, None)
                continue
            previous = before[0][0] or None
            mirror.totals[t] = ((row[1:], previous, event), new)
        for t in admitted.created:
            names = mirror.known.get(root_of(t))
            if names is not None and t not in names:
                names.append(t)

    def replay(self, parent_id: int, *, analyst: str, fingerprint: str, note: str = "") -> int:
        """Append a replay event, committed together with what other threads of this
        process asked for meanwhile (one transaction, one fsync); returns once the commit
        holding this event is durable, and raises if it failed."""
        if isinstance(parent_id, bool) or not isinstance(parent_id, int):
            raise InvalidRequest(f"parent_id must be an event id, got {parent_id!r}")
        ticket = _Replay(
            parent_id,
            check_text("analyst", analyst),
            check_text("fingerprint", fingerprint),
            check_text("note", note),
        )
        self._group_commit(ticket)
        assert ticket.event_id is not None
        self._replays.learn(ticket.analyst, parent_id)
        return ticket.event_id

    def record_repeat(
        self, parent_id: int, *, analyst: str, fingerprint: str, note: str = ""
    ) -> int | None:
        """See :meth:`Ledger.record_repeat` (and :meth:`Ledger.record_replay`, which uses
        it). A repeat is :meth:`replay`'s event, group-committed without waiting for the
        fsync, which follows within ``SYNC_DELAY_S``: the event is in the store, visible
        to every reader, when this returns. Whether the analyst already has a durable
        record of the release is known from the pairs this process read (once) or
        committed."""
        ticket = _repeat(parent_id, analyst, fingerprint, note, deferred=False)
        if not self._replays.known(ticket.analyst, parent_id):
            return None
        self._group_commit(ticket)
        assert ticket.event_id is not None
        return ticket.event_id

    def defer_repeat(
        self, parent_id: int, *, analyst: str, fingerprint: str, note: str = ""
    ) -> bool:
        """See :meth:`Ledger.defer_repeat`. The repeat's event joins the group-commit
        queue and this returns at once: the next commit of this process (anyone's
        charge or replay) or a flush within ``DEFER_DELAY_S`` appends it, without an
        fsync (which follows within ``SYNC_DELAY_S``). A door answering on an event
        loop thus never waits for the write lock another process holds, and several
        processes' repeats share a few commits a second instead of one each."""
        ticket = _repeat(parent_id, analyst, fingerprint, note, deferred=True)
        if not self._replays.known(ticket.analyst, parent_id):
            return False
        if os.getpid() != self._pid:
            with self._lock:
                self._connection()  # a forked child starts its own queue
        with self._queue_cv:
            self._queue.append(ticket)
        self._replays.deferred()
        return True

    def _flush_deferred(self) -> None:
        """Commit what is queued (deferred repeats, and any caller's ticket that joined
        them) as the group commit's leader; no-op when the queue is empty."""
        cv = self._queue_cv
        with cv:
            self._waiting += 1
            try:
                while self._leader:
                    cv.wait()
            finally:
                self._waiting -= 1
            if not self._queue:
                return
            self._leader = True
            batch, self._queue = self._queue, []
        self._lead(batch)
        lost = sum(1 for t in batch if isinstance(t, _Replay) and t.deferred and t.error)
        if lost:
            # Nobody waits for these: the answers are out, only the counts are short.
            _log.warning("%d deferred replay repeat(s) could not be recorded", lost)

    def _settle(self) -> None:
        """Commit this process's deferred repeats before it reads the events, so that a
        process reads its own answers (other processes see them within DEFER_DELAY_S)."""
        with self._queue_cv:
            pending = any(isinstance(t, _Replay) and t.deferred for t in self._queue)
        if pending:
            self._flush_deferred()

    def _replay_pairs(self) -> list[tuple[str, int]]:
        """Every (analyst, charge id) with a durable charge or replay: the seed of
        :class:`ReplayRecords` (one scan of the events, once per process)."""
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT analyst, id FROM events WHERE kind = 'charge' "
                "UNION SELECT analyst, parent_id FROM events WHERE kind = 'replay'"
            ).fetchall()
        return [(str(a), int(i)) for a, i in rows]

    def _sync_log(self) -> None:
        """Make every commit so far durable: fsync the write-ahead log (a commit under
        synchronous=NORMAL is written there, not synced; a checkpoint syncs the log
        before copying it, so a missing log file means nothing is owed).

        One descriptor of the log per process, opened with the connection and kept: the
        kernel reports a failed write-back of the file to every descriptor open when it
        happened, once each, so a process syncing after another process's (or its own
        timer's) failed sync is told too, and the failure is kept here, since the same
        descriptor would not report it twice. Syncs of one process take turns."""
        with self._sync_lock:
            if self._sync_failed is not None:
                raise OSError(f"an earlier sync of the ledger's log failed: {self._sync_failed}")
            fd = self._log_fd()
            if fd is None:
                return
            try:
                # fdatasync, as SQLite itself syncs: the data and the file's size, not
                # its modification time (which would cost a journal commit).
                os.fdatasync(fd)
            except OSError as exc:
                self._sync_failed = str(exc)
                raise

    def _extend_log(self) -> None:
        """Extend the log with zeros ahead of SQLite's frames. Called inside a write
        transaction (the store's write lock: no frame can be written meanwhile).

        SQLite appends a commit's frames at the end of the log until a checkpoint lets
        it start over from the beginning (``_CHECKPOINT_PAGES``), so a new log grows
        with every commit, and an fdatasync of a file that grew must also commit the
        file system's journal (its new size and blocks): on this
        machine's disk several milliseconds, against about 0.15 ms to sync frames
        written over existing bytes. Extending the log in steps (64 KiB, then the
        log's size, at most 1 MiB) makes the commits that follow write within the
        file; once the log is as long as a checkpoint cycle needs, nothing is added.

        Safe for the store: the zeros lie past every frame SQLite has written, and a
        frame of zeros is no valid frame (its salt and checksum do not match the log's
        header), so recovery stops there, as it does at the stale frames of an earlier
        cycle. A size SQLite sets is a header plus whole frames; the size a step sets is
        never one, which tells every process that the log's end is still zeros (no
        step is needed) until SQLite's frames run past it. A failed write only leaves
        the log growing as before.

        Not under ``_sync_lock``: another thread's fsync of the log may be running, and
        the next commit need not wait for it (the descriptor cannot be closed meanwhile:
        ``close`` takes the store's lock, held here)."""
        fd = self._open_log_fd()
        if fd is None:
            return
        try:
            # The size by seeking, not fstat: a stat reads the file's times, and
            # Linux then stamps the next write with a fine-grained time (a change
            # to the inode), which made every fdatasync after it about 60 µs
            # slower here (170 → 230 µs).
            size = os.lseek(fd, 0, os.SEEK_END)
            if size >= _LOG_HEADER and (size - _LOG_HEADER) % self._frame != 0:
                return
            end = size + min(_LOG_STEP_MAX, max(_LOG_STEP_MIN, size))
            if (end - _LOG_HEADER) % self._frame == 0:
                end += 1
            os.pwrite(fd, bytes(end - size), size)
        except OSError as exc:
            _log.debug("could not extend the ledger's log: %s", exc)

    def _open_log_fd(self) -> int | None:
        """:meth:`_log_fd` for a caller holding the store's lock (``_lock``), which
        ``close`` takes before closing the descriptor: the sync lock is taken only to
        open it, so a transaction never waits for another thread's fsync to end."""
        wal = self._wal
        if wal is not None and wal[0] == os.getpid():
            return wal[1]
        with self._sync_lock:
            return self._log_fd()

    def _log_fd(self) -> int | None:
        """This process's descriptor of the log, opened on first use (None: no log
        file, so nothing to sync). Called with ``_sync_lock`` held, or while opening."""
        if self._wal is not None and self._wal[0] == os.getpid():
            return self._wal[1]
        try:
            # Writable: _extend_log writes through it too.
            fd = os.open(self._path + "-wal", os.O_RDWR)
        except FileNotFoundError:
            return None
        # A forked child never syncs through the parent's descriptor (errors are
        # reported once per open file, which the two would share).
        self._wal = (os.getpid(), fd)
        return fd

    def _group_commit(self, ticket: _Replay | _Spend) -> None:
        """Queue ``ticket``; the first caller to find no commit under way appends the
        whole queue in one transaction, the others wait for it. Returns once the commit
        holding the ticket's event is durable (a repeat's: written, see record_replay);
        raises the ticket's own error."""
        if os.getpid() != self._pid:
            with self._lock:
                self._connection()  # a forked child starts its own queue
        cv = self._queue_cv
        with cv:
            if not self._leader and not self._queue:
                # One caller at a time (the usual case): no commit under way and nobody
                # queued, so this ticket alone is the batch — what the hand-off below
                # decides too, without queueing it.
                self._leader = lead = True
                batch = [ticket]
            else:
                self._queue.append(ticket)
                self._waiting += 1
                try:
                    while not ticket.done and self._leader:
                        cv.wait()
                finally:
                    self._waiting -= 1
                lead = not ticket.done
                if lead:
                    self._leader = True
                    batch, self._queue = self._queue, []
        if lead:
            self._lead(batch)
        if ticket.error is not None:
            raise ticket.error

    def _lead(self, batch: list[_Replay | _Spend]) -> None:
        """Commit ``batch`` as the leader, then mark its tickets done and hand the lead
        back (the waiting callers wake, and the next of them commits what queued since)."""
        try:
            self._commit_batch(batch)
        finally:
            with self._queue_cv:
                for t in batch:
                    t.done = True
                self._leader = False
                # Waiters count themselves under this lock before they wait: none
                # counted, none to wake (a lone caller skips the notification).
                if self._waiting:
                    self._queue_cv.notify_all()

    def _commit_batch(self, batch: list[_Replay | _Spend]) -> None:
        """Append every queued ticket that is admitted, in order, in one transaction:
        fsynced unless the batch holds only repeats (see record_replay)."""
        durable = any(isinstance(t, _Spend) or t.durable for t in batch)
        try:
            with self._transaction(write=True, durable=durable) as conn:
                for t in batch:
                    if isinstance(t, _Spend):
                        self._append_spend(conn, t)
                    else:
                        self._append_replay(conn, t)
            if durable:
                # This fsync also covered the repeats committed before it.
                self._replays.synced()
            else:
                self._replays.committed_unsynced()
        except Exception as exc:
            self._batch_failed(batch)
            # Nothing of the batch was committed: every caller in it gets an error of
            # its own (one exception object must not be raised in several threads).
            for t in batch:
                if isinstance(exc, LedgerUnavailable):
                    t.error = LedgerUnavailable(str(exc))
                else:
                    t.error = LedgerUnavailable(f"the ledger could not record an event: {exc}")
        except BaseException:
            self._batch_failed(batch)
            for t in batch:
                t.error = LedgerUnavailable("the ledger could not record an event: interrupted")
            raise

    def _batch_failed(self, batch: list[_Replay | _Spend]) -> None:
        """Forget what the rolled-back batch taught: its receipts and event ids, and the
        analysts' totals, which may have read its uncommitted events."""
        self._analyst_totals.clear()
        for t in batch:
            if isinstance(t, _Spend):
                t.admitted = t.event_id = None
            else:
                t.event_id = None

    def _append_replay(self, conn: sqlite3.Connection, t: _Replay) -> None:
        names = self._charge_populations(conn, t.parent_id)
        if names is None:
            t.error = InvalidRequest(f"event {t.parent_id} is not a charge that could be replayed")
            return
        t.event_id = self._append_event(
            conn,
            "replay",
            parse_names(names),
            analyst=t.analyst,
            fingerprint=t.fingerprint,
            note=t.note,
            parent_id=t.parent_id,
        )

    def _charge_populations(self, conn: sqlite3.Connection, event_id: int) -> str | None:
        """The stored population list of charge ``event_id``; None if it is no charge."""
        mirror = self._mirror if self._writing else None
        if mirror is not None and (found := mirror.charges.get(event_id)) is not None:
            return found
        parent = conn.execute(
            "SELECT kind, populations FROM events WHERE id = ?", (event_id,)
        ).fetchone()
        if parent is None or parent[0] != "charge":
            return None
        if mirror is not None:
            mirror.charges[event_id] = str(parent[1])
        return str(parent[1])

    def set_cap(self, population: str, epsilon_cap: float, *, reason: str, analyst: str) -> int:
        name = check_population_name(population)
        if SEPARATOR in name:
            raise InvalidRequest(f"caps are set on roots; {name!r} inherits its root's cap")
        cap = check_cap(epsilon_cap)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidRequest("a cap change needs a reason")
        with self._transaction(write=True) as conn:
            self._spec(conn, name)
            self._cost_commits += 1
            return self._append_event(
                conn, "cap_change", [name], analyst=analyst, note=reason, cap=cap
            )

    def version(self) -> tuple[int, tuple[Any, ...]]:
        """A token that changes whenever a charge, external charge, cap change or
        registration commits, in any process; replays leave it alone. This process's
        own commits are counted; other processes' are seen through ``PRAGMA
        data_version`` and then read off the store (the newest totals row, the newest
        cap and the number of populations, each from an index)."""
        with self._lock:
            conn = self._usable()
            try:
                try:
                    seen = int(conn.execute("PRAGMA data_version").fetchone()[0])
                except sqlite3.OperationalError as exc:
                    # A write left the connection without its busy handler (see
                    # _begin_write); this read waits, as every other read does (e.g.
                    # while another process recovers the log), only when it must.
                    if not (is_busy(exc) and self._no_busy_wait):
                        raise
                    self._wait_when_busy(conn)
                    seen = int(conn.execute("PRAGMA data_version").fetchone()[0])
                if self._foreign is None or self._foreign[0] != seen:
                    self._wait_when_busy(conn)
                    row = conn.execute(
                        f"SELECT ({self._queries.newest_total}), "
                        # (the partial index holds only the cap-setting events;
                        # without INDEXED BY, SQLite walked back through every event,
                        # 22 ms at 200,000 events, read again after each commit of
                        # another process: BENCHMARKS.md, "Cache hits in two processes")
                        "(SELECT max(id) FROM events INDEXED BY events_caps "
                        "WHERE cap IS NOT NULL), "
                        "(SELECT count(*) FROM populations)"
                    ).fetchone()
                    self._foreign = (seen, tuple(row))
            except sqlite3.Error as exc:
                raise LedgerUnavailable(f"cannot read the ledger store: {exc}") from exc
            return (self._cost_commits, self._foreign[1])

    def spent(self, population: str) -> Spend:
        name = check_population_name(population)
        with self._transaction(write=False) as conn:
            spec = self._spec(conn, root_of(name))
            known = set(self._known(conn, [spec.name]))
            own = {a: self._own_total(conn, a) for a in ancestors_or_self(name) if a in known}
        return Spend.of(name, composed_total(name, own), spec.epsilon_cap, spec.delta)

    def populations(self) -> tuple[str, ...]:
        with self._transaction(write=False, gated=False) as conn:
            rows = conn.execute("SELECT name FROM populations ORDER BY name").fetchall()
        return tuple(r[0] for r in rows)

    def history(
        self, population: str | None = None, limit: int = 100, after_id: int = 0
    ) -> list[Event]:
        params: list[Any] = [int(after_id)]
        where = ""
        if population is not None:
            name = check_population_name(population)
            where = (
                " AND EXISTS (SELECT 1 FROM json_each(events.populations) j WHERE j.value = ?1"
                " OR substr(j.value, 1, length(?1) + 1) = ?1 || '/'"
                " OR substr(?1, 1, length(j.value) + 1) = j.value || '/')"
            )
            params = [name, int(after_id)]
        params.append(int(limit))
        first, second = ("?2", "?3") if population is not None else ("?1", "?2")
        self._settle()
        sql = (
            f"SELECT {EVENT_COLS} FROM events WHERE id > {first}{where} ORDER BY id LIMIT {second}"
        )
        with self._transaction(write=False, gated=False) as conn:
            if (
                population is not None
                and conn.execute(
                    "SELECT 1 FROM populations WHERE name = ?", (root_of(population),)
                ).fetchone()
                is None
            ):
                raise UnknownPopulation(f"population {root_of(population)!r} is not registered")
            rows = conn.execute(sql, params).fetchall()
            return [event_from_row(r) for r in rows]

    def verify(self) -> VerifyReport:
        self._settle()
        with self._lock:
            try:
                conn = self._connection()
            except LedgerUnavailable as exc:
                return VerifyReport(False, 0, 0, (str(exc),))
            problems: list[str] = []
            try:
                self._wait_when_busy(conn)
                conn.execute("BEGIN")
                try:
                    self._quick_check(conn)
                except Inconsistent as exc:
                    problems.append(str(exc))
                n_events, n_pops = recompute(
                    conn.execute(f"SELECT {EVENT_COLS} FROM events ORDER BY id"),
                    conn.execute(self._queries.totals_in_order),
                    lambda: conn.execute(
                        "SELECT name, root, delta, created_event FROM populations"
                    ),
                    problems,
                    self._partitionings,
                )
            except sqlite3.Error as exc:
                problems.append(f"cannot read the store: {exc}")
                n_events = n_pops = 0
            finally:
                self._rollback(conn)
            if problems and self._broken is None:
                self._broken = f"verify failed: {problems[0]}"
            return VerifyReport(not problems, n_events, n_pops, tuple(problems[:MAX_PROBLEMS]))

    def close(self) -> None:
        if not self._closed:
            # A clean stop: repeats committed without fsync are synced first.
            self._replays.close()
        with self._lock:
            self._closed = True
            # Connections inherited across fork stay open: closing their descriptors
            # would drop this process's own POSIX locks on the file.
            if self._conn is not None and os.getpid() == self._pid:
                self._conn.close()
            self._conn = None
            self._gate.close()
        with self._sync_lock:
            if self._wal is not None and self._wal[0] == os.getpid():
                os.close(self._wal[1])
            self._wal = None


class _State:
    """What admission reads, inside one of the ledger's write transactions."""

    def __init__(self, ledger: SQLiteLedger, conn: sqlite3.Connection) -> None:
        self._ledger, self._conn = ledger, conn

    def spec(self, root: str) -> PopulationSpec:
        return self._ledger._spec(self._conn, root)

    def known(self, roots: Sequence[str]) -> list[str]:
        return self._ledger._known(self._conn, roots)

    def own_totals(self, names: Sequence[str]) -> dict[str, Total]:
        return {n: self._ledger._own_total(self._conn, n) for n in names}

    def analyst_totals(self, analyst: str) -> dict[str, Total]:
        return self._ledger._own_totals_of(self._conn, analyst)
