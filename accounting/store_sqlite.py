"""The embedded ledger store: one SQLite file, append-only, WAL, synchronous=FULL.

Tables: ``events`` (the raw, hash-chained log), ``totals`` (after each cost-bearing
event, one row per named population holding its new *own* total; never updated) and
``populations`` (roots and partitions with the event that created them). Triggers
refuse UPDATE and DELETE on all three and any insert that is not a true append. Each
write is one ``BEGIN IMMEDIATE`` transaction, so admission is serialised across threads
and processes. The store fails closed: any doubt about its integrity makes every
operation that could lead to a release raise LedgerUnavailable.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from accounting.ledger import (
    COST_KINDS,
    EMPTY_TOTAL,
    EVENT_KINDS,
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
    admit,
    admit_share,
    affected_populations,
    ancestors_or_self,
    check_partition,
    check_population_name,
    check_request,
    composed_total,
    epsilon_at,
    normalize_targets,
    root_of,
)
from accounting.rdp import ORDERS, ZERO, Curve, CurveError

SCHEMA_VERSION = "1"
GENESIS = "0" * 64
_MAX_PROBLEMS = 200


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


_SCHEMA: tuple[str, ...] = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL NOT NULL, kind TEXT NOT NULL "
    "CHECK (kind IN ('charge','replay','external','cap_change','register')), "
    "populations TEXT NOT NULL, curve TEXT, delta_extra REAL NOT NULL, analyst TEXT NOT NULL, "
    "fingerprint TEXT NOT NULL, note TEXT NOT NULL, parent_id INTEGER, cap REAL, delta REAL, "
    "hash TEXT NOT NULL)",
    "CREATE INDEX events_caps ON events (populations, id) WHERE cap IS NOT NULL",
    "CREATE TABLE totals (population TEXT NOT NULL, event_id INTEGER NOT NULL, "
    "curve TEXT NOT NULL, delta_extra REAL NOT NULL, events INTEGER NOT NULL, "
    "PRIMARY KEY (population, event_id)) WITHOUT ROWID",
    "CREATE INDEX totals_by_event ON totals (event_id, population)",
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
_ORDERS_JSON = json.dumps(list(ORDERS))
_EVENT_COLS = (
    "id, ts, kind, populations, curve, delta_extra, analyst, fingerprint, note, parent_id, "
    "cap, delta, hash"
)


class _Inconsistent(Exception):
    """The store contradicts itself; the ledger must stop answering."""


def _names_json(names: Sequence[str]) -> str:
    return json.dumps(list(names), separators=(",", ":"))


def _curve_json(curve: Curve) -> str:
    # json writes floats with repr, which round-trips exactly (inf as Infinity).
    return json.dumps(list(curve.values), separators=(",", ":"))


def _parse_curve(text: str | None) -> Curve:
    if text is None:
        return ZERO
    try:
        values = json.loads(text)
        if not isinstance(values, list):
            raise _Inconsistent(f"stored curve is not a list: {text[:40]!r}")
        return Curve.from_array(values)
    except (ValueError, TypeError, CurveError) as exc:
        raise _Inconsistent(f"unreadable stored curve: {exc}") from exc


def _parse_names(text: str) -> tuple[str, ...]:
    try:
        names = json.loads(text)
    except ValueError as exc:
        raise _Inconsistent(f"unreadable population list {text[:40]!r}") from exc
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise _Inconsistent(f"malformed population list {text[:40]!r}")
    return tuple(names)


def _digest(prev: str, row: Sequence[Any]) -> str:
    """Hash chaining an event (all columns but ``hash``, exactly as stored) to its
    predecessor, so that an edit that slips past the triggers is still detected."""
    payload = json.dumps([prev, *row], separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _check_text(name: str, value: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string, got {type(value).__name__}")
    return value


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
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._inherited: list[sqlite3.Connection] = []
        self._broken: str | None = None
        self._closed = False
        self._deltas: dict[str, float] = {}
        # Partitionings of the roots registered by this process (from the policy):
        # charges and verify accept only the partitions they define.
        self._partitionings: dict[str, Partitioning | None] = {}
        # Roots registered by this process, with the analysts' shares of each.
        self._registered: dict[str, PopulationSpec] = {}
        # analyst -> (last event id read, own totals of their cost events): read forward
        # from the committed events on each charge, so it is never ahead of the store.
        self._analyst_totals: dict[str, tuple[int, dict[str, Total]]] = {}
        try:
            self._conn = self._connect()
            self._open_store(self._conn)
        except (sqlite3.Error, OSError) as exc:
            self._broken = f"cannot open ledger store {self._path!r}: {exc}"
        except _Inconsistent as exc:
            self._broken = f"ledger store {self._path!r} is inconsistent: {exc}"

    # --- connection and transactions ---------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise _Inconsistent(f"cannot use WAL journal (got {mode!r})")
            # FULL: each commit is fsynced before charge() returns (charge before noise).
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
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
                    for stmt in _SCHEMA:
                        conn.execute(stmt)
                    conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?)",
                        [("schema_version", SCHEMA_VERSION), ("orders", _ORDERS_JSON)],
                    )
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
        expected: dict[tuple[str, str], str] = {}
        for stmt in _SCHEMA:
            words = stmt.split()
            kind = words[1].lower()
            expected[(kind, words[2])] = stmt
        if objects != expected:
            missing = sorted(k[1] for k in expected if objects.get(k) != expected[k])
            extra = sorted(k[1] for k in objects if k not in expected)
            raise _Inconsistent(
                f"unexpected schema (missing or altered: {missing}, unexpected: {extra})"
            )
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise _Inconsistent(
                f"schema version {meta.get('schema_version')!r}, expected {SCHEMA_VERSION!r}"
            )
        if meta.get("orders") != _ORDERS_JSON:
            raise _Inconsistent("the store was written with a different RDP order grid")
        head = conn.execute(f"SELECT {_EVENT_COLS} FROM events ORDER BY id DESC LIMIT 2").fetchall()
        if head:
            prev = head[1][-1] if len(head) > 1 else GENESIS
            if len(head) == 1 and head[0][0] != 1:
                raise _Inconsistent("the first event is missing")
            if _digest(prev, head[0][:-1]) != head[0][-1]:
                raise _Inconsistent(f"hash chain broken at event {head[0][0]}")
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
            self._pid = os.getpid()
            try:
                self._conn = self._connect()
            except (sqlite3.Error, _Inconsistent) as exc:
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
    def _transaction(self, *, write: bool, gated: bool = True) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._usable() if gated else self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise LedgerUnavailable(f"cannot lock the ledger store: {exc}") from exc
            try:
                yield conn
            except _Inconsistent as exc:
                self._rollback(conn)
                self._broken = f"ledger store is inconsistent: {exc}"
                raise LedgerUnavailable(self._broken) from exc
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise LedgerUnavailable(f"ledger store error: {exc}") from exc
            except BaseException:
                self._rollback(conn)
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise LedgerUnavailable(f"ledger commit failed: {exc}") from exc

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    # --- reading state inside a transaction ------------------------------------------------

    def _own_total(self, conn: sqlite3.Connection, name: str) -> Total:
        """The latest own total of ``name``, after checking that it is the previous one
        plus the event it claims to follow (one step of verify, per charge)."""
        rows = conn.execute(
            "SELECT event_id, curve, delta_extra, events FROM totals "
            "WHERE population = ? ORDER BY event_id DESC LIMIT 2",
            (name,),
        ).fetchall()
        if not rows:
            return EMPTY_TOTAL
        latest = Total(_parse_curve(rows[0][1]), float(rows[0][2]), int(rows[0][3]))
        prev = (
            Total(_parse_curve(rows[1][1]), float(rows[1][2]), int(rows[1][3]))
            if len(rows) > 1
            else EMPTY_TOTAL
        )
        ev = conn.execute(
            "SELECT kind, populations, curve, delta_extra FROM events WHERE id = ?", (rows[0][0],)
        ).fetchone()
        if (
            ev is None
            or ev[0] not in COST_KINDS
            or name not in _parse_names(ev[1])
            or prev.plus(_parse_curve(ev[2]), float(ev[3])) != latest
        ):
            raise _Inconsistent(
                f"stored total of {name!r} at event {rows[0][0]} does not follow from the events"
            )
        return latest

    def _spec(self, conn: sqlite3.Connection, root: str) -> PopulationSpec:
        delta = self._deltas.get(root)
        if delta is None:
            row = conn.execute(
                "SELECT delta FROM populations WHERE name = ? AND root = name", (root,)
            ).fetchone()
            if row is None:
                raise UnknownPopulation(f"population {root!r} is not registered")
            if row[0] is None:
                raise _Inconsistent(f"root {root!r} has no delta")
            delta = float(row[0])
            self._deltas[root] = delta
        cap = conn.execute(
            "SELECT cap FROM events WHERE cap IS NOT NULL AND populations = ? "
            "ORDER BY id DESC LIMIT 1",
            (_names_json([root]),),
        ).fetchone()
        if cap is None:
            raise _Inconsistent(f"root {root!r} has no register event")
        return PopulationSpec(root, float(cap[0]), delta)

    def _known(self, conn: sqlite3.Connection, roots: Sequence[str]) -> list[str]:
        out: list[str] = []
        for r in roots:
            out.extend(
                n for (n,) in conn.execute("SELECT name FROM populations WHERE root = ?", (r,))
            )
        return out

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
    ) -> int:
        last = conn.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        event_id, prev = (1, GENESIS) if last is None else (int(last[0]) + 1, str(last[1]))
        row = (
            event_id,
            time.time(),
            kind,
            _names_json(names),
            None if curve is None else _curve_json(curve),
            float(delta_extra),
            _check_text("analyst", analyst),
            _check_text("fingerprint", fingerprint),
            _check_text("note", note),
            parent_id,
            cap,
            delta,
        )
        conn.execute(
            f"INSERT INTO events ({_EVENT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*row, _digest(prev, row)),
        )
        return event_id

    # --- the interface ---------------------------------------------------------------------

    def _own_totals_of(self, conn: sqlite3.Connection, analyst: str) -> dict[str, Total]:
        """Own totals of one analyst's cost events, brought up to the committed store."""
        last, totals = self._analyst_totals.get(analyst, (0, {}))
        totals = dict(totals)
        rows = conn.execute(
            "SELECT id, populations, curve, delta_extra FROM events WHERE id > ? "
            "AND analyst = ? AND kind IN ('charge', 'external') ORDER BY id",
            (last, analyst),
        ).fetchall()
        for eid, names, curve, dx in rows:
            for name in _parse_names(names):
                totals[name] = totals.get(name, EMPTY_TOTAL).plus(_parse_curve(curve), float(dx))
            last = int(eid)
        self._analyst_totals[analyst] = (last, totals)
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

    def _check_partition(self, name: str) -> None:
        root = root_of(name)
        if SEPARATOR in name and root not in self._partitionings:
            raise InvalidRequest(
                f"{name!r}: population {root!r} was not registered with its partitioning "
                "by this process"
            )
        check_partition(name, self._partitionings.get(root))

    def register(self, spec: PopulationSpec) -> None:
        name = check_population_name(spec.name)
        if SEPARATOR in name:
            raise InvalidRequest(f"only roots are registered; {name!r} is a partition")
        cap = _check_cap(spec.epsilon_cap)
        delta = float(spec.delta)
        if not 0.0 < delta < 1.0:
            raise InvalidRequest(f"delta must lie in (0, 1), got {spec.delta!r}")
        self._partitionings[name] = spec.partitioning
        for s in spec.shares:
            if not (isinstance(s.share, float | int) and 0 < s.share <= 1):
                raise InvalidRequest(f"share of {s.analyst!r} must lie in (0, 1], got {s.share!r}")
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
                return
            if found[1] is None or float(found[1]) != delta:
                raise InvalidRequest(
                    f"population {name!r} is registered with delta {found[1]!r}; "
                    "its delta cannot change"
                )
            last = conn.execute(
                "SELECT cap FROM events WHERE cap IS NOT NULL AND populations = ? "
                "AND kind = 'register' ORDER BY id DESC LIMIT 1",
                (_names_json([name]),),
            ).fetchone()
            if last is None:
                raise _Inconsistent(f"root {name!r} has no register event")
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

    def charge(
        self,
        population: str | Sequence[str],
        curve: Curve,
        delta_extra: float = 0.0,
        *,
        analyst: str,
        fingerprint: str,
        note: str = "",
    ) -> Receipt:
        return self._spend("charge", population, curve, delta_extra, analyst, fingerprint, note)

    def external(
        self,
        population: str,
        curve: Curve,
        delta_extra: float = 0.0,
        *,
        analyst: str,
        note: str,
    ) -> Receipt:
        if not isinstance(population, str):
            raise InvalidRequest("an external charge names exactly one population")
        return self._spend("external", population, curve, delta_extra, analyst, "", note)

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
        roots = sorted({root_of(t) for t in targets})
        with self._transaction(write=True) as conn:
            specs = {r: self._spec(conn, r) for r in roots}
            for t in targets:
                self._check_partition(t)
            known = self._known(conn, roots)
            known_set = set(known)
            affected = affected_populations(targets, known)
            needed = {a for p in affected for a in ancestors_or_self(p)} & (
                known_set | set(targets)
            )
            own = {n: self._own_total(conn, n) for n in sorted(needed)}
            spends = admit(targets, curve, dx, own, specs, known)
            for root in roots:
                registered = self._registered.get(root)
                share = None if registered is None else registered.share_of(analyst)
                if registered is not None and share is not None:
                    mine = self._own_totals_of(conn, analyst)
                    under = [t for t in targets if root_of(t) == root]
                    admit_share(analyst, under, curve, dx, mine, registered, share, known)
            event_id = self._append_event(
                conn,
                kind,
                targets,
                curve=curve,
                delta_extra=dx,
                analyst=analyst,
                fingerprint=fingerprint,
                note=note,
            )
            conn.executemany(
                "INSERT INTO totals (population, event_id, curve, delta_extra, events) "
                "VALUES (?,?,?,?,?)",
                [
                    (t, event_id, _curve_json(new.curve), new.delta_extra, new.events)
                    for t in targets
                    for new in (own.get(t, EMPTY_TOTAL).plus(curve, dx),)
                ],
            )
            conn.executemany(
                "INSERT INTO populations (name, root, delta, created_event) VALUES (?,?,NULL,?)",
                [(t, root_of(t), event_id) for t in targets if t not in known_set],
            )
        first = specs[root_of(targets[0])]
        return Receipt(
            event_id=event_id,
            kind=kind,
            populations=targets,
            curve=curve,
            delta_extra=dx,
            epsilon_requested=epsilon_at(curve, first.delta, dx),
            spends=spends,
        )

    def replay(self, parent_id: int, *, analyst: str, fingerprint: str, note: str = "") -> int:
        if isinstance(parent_id, bool) or not isinstance(parent_id, int):
            raise InvalidRequest(f"parent_id must be an event id, got {parent_id!r}")
        with self._transaction(write=True) as conn:
            parent = conn.execute(
                "SELECT kind, populations FROM events WHERE id = ?", (parent_id,)
            ).fetchone()
            if parent is None or parent[0] != "charge":
                raise InvalidRequest(f"event {parent_id} is not a charge that could be replayed")
            return self._append_event(
                conn,
                "replay",
                _parse_names(parent[1]),
                analyst=analyst,
                fingerprint=fingerprint,
                note=note,
                parent_id=parent_id,
            )

    def set_cap(self, population: str, epsilon_cap: float, *, reason: str, analyst: str) -> int:
        name = check_population_name(population)
        if SEPARATOR in name:
            raise InvalidRequest(f"caps are set on roots; {name!r} inherits its root's cap")
        cap = _check_cap(epsilon_cap)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidRequest("a cap change needs a reason")
        with self._transaction(write=True) as conn:
            self._spec(conn, name)
            return self._append_event(
                conn, "cap_change", [name], analyst=analyst, note=reason, cap=cap
            )

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
        sql = (
            f"SELECT {_EVENT_COLS} FROM events WHERE id > {first}{where} ORDER BY id LIMIT {second}"
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
            return [_event_from_row(r) for r in rows]

    def verify(self) -> VerifyReport:
        with self._lock:
            try:
                conn = self._connection()
            except LedgerUnavailable as exc:
                return VerifyReport(False, 0, 0, (str(exc),))
            problems: list[str] = []
            try:
                conn.execute("BEGIN")
                try:
                    self._quick_check(conn)
                except _Inconsistent as exc:
                    problems.append(str(exc))
                n_events, n_pops = _recompute(conn, problems, self._partitionings)
            except sqlite3.Error as exc:
                problems.append(f"cannot read the store: {exc}")
                n_events = n_pops = 0
            finally:
                self._rollback(conn)
            if problems and self._broken is None:
                self._broken = f"verify failed: {problems[0]}"
            return VerifyReport(not problems, n_events, n_pops, tuple(problems[:_MAX_PROBLEMS]))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            # Connections inherited across fork stay open: closing their descriptors
            # would drop this process's own POSIX locks on the file.
            if self._conn is not None and os.getpid() == self._pid:
                self._conn.close()
            self._conn = None


def _check_cap(epsilon_cap: float) -> float:
    cap = float(epsilon_cap)
    if math.isnan(cap) or math.isinf(cap) or cap < 0:
        raise InvalidRequest(f"epsilon_cap must be finite and >= 0, got {epsilon_cap!r}")
    return cap


def _event_from_row(r: Sequence[Any]) -> Event:
    return Event(
        id=int(r[0]),
        ts=float(r[1]),
        kind=str(r[2]),
        populations=_parse_names(r[3]),
        curve=_parse_curve(r[4]),
        delta_extra=float(r[5]),
        analyst=str(r[6]),
        fingerprint=str(r[7]),
        note=str(r[8]),
        parent_id=None if r[9] is None else int(r[9]),
        cap=None if r[10] is None else float(r[10]),
        delta=None if r[11] is None else float(r[11]),
    )


def _recompute(
    conn: sqlite3.Connection,
    problems: list[str],
    partitionings: Mapping[str, Partitioning | None],
) -> tuple[int, int]:
    """Replay every event from the start: hash chain, kinds, admission under the caps in
    force at the time, own totals (bit-exact), the populations they created, and — for
    the roots whose partitioning this process registered — that every partition named
    is one the policy defines. Appends a message per problem; returns (events,
    populations) seen."""
    prev_hash, prev_id = GENESIS, 0
    own: dict[str, Total] = {}
    caps: dict[str, float] = {}
    deltas: dict[str, float] = {}
    created: dict[str, tuple[str, float | None, int]] = {}
    charges: set[int] = set()
    totals = conn.execute(
        "SELECT population, event_id, curve, delta_extra, events FROM totals "
        "ORDER BY event_id, population"
    )
    pending = totals.fetchone()
    n_events = 0

    def problem(msg: str) -> None:
        if len(problems) < _MAX_PROBLEMS:
            problems.append(msg)

    for r in conn.execute(f"SELECT {_EVENT_COLS} FROM events ORDER BY id"):
        n_events += 1
        eid, kind = int(r[0]), str(r[2])
        if eid != prev_id + 1:
            problem(f"event ids jump from {prev_id} to {eid}")
        if _digest(prev_hash, r[:-1]) != r[-1]:
            problem(f"hash chain broken at event {eid}")
        prev_hash, prev_id = str(r[-1]), eid
        stored: dict[str, Total] = {}
        while pending is not None and int(pending[1]) <= eid:
            if int(pending[1]) < eid:
                problem(f"totals row ({pending[0]!r}, {pending[1]}) follows no cost event")
            else:
                try:
                    stored[str(pending[0])] = Total(
                        _parse_curve(pending[2]), float(pending[3]), int(pending[4])
                    )
                except _Inconsistent as exc:
                    problem(f"totals row ({pending[0]!r}, {eid}): {exc}")
            pending = totals.fetchone()
        try:
            ev = _event_from_row(r)
        except (_Inconsistent, ValueError, TypeError) as exc:
            problem(f"event {eid} is unreadable: {exc}")
            continue
        expected: dict[str, Total] = {}
        if kind not in EVENT_KINDS:
            problem(f"event {eid} has unknown kind {kind!r}")
        elif kind in ("register", "cap_change"):
            root = ev.populations[0]
            if len(ev.populations) != 1 or SEPARATOR in root or ev.cap is None:
                problem(f"{kind} event {eid} is malformed")
            elif kind == "register":
                if ev.delta is None:
                    problem(f"register event {eid} has no delta")
                elif root not in created:
                    created[root] = (root, ev.delta, eid)
                    deltas[root] = ev.delta
                elif deltas[root] != ev.delta:
                    problem(f"register event {eid} changes the delta of {root!r}")
                caps[root] = ev.cap
            elif root not in caps:
                problem(f"cap_change event {eid} names unregistered {root!r}")
            else:
                caps[root] = ev.cap
        elif kind == "replay":
            if ev.parent_id not in charges or not ev.curve.is_zero():
                problem(f"replay event {eid} does not point at an earlier charge")
        else:
            roots = sorted({root_of(p) for p in ev.populations})
            unknown = [x for x in roots if x not in caps]
            if unknown:
                problem(f"event {eid} charges unregistered populations {unknown}")
                continue
            try:
                targets = normalize_targets(ev.populations)
            except InvalidRequest as exc:
                problem(f"event {eid}: {exc}")
                continue
            if targets != ev.populations:
                problem(f"event {eid} names populations that are not normalized")
            for t in targets:
                if root_of(t) in partitionings:
                    try:
                        check_partition(t, partitionings[root_of(t)])
                    except InvalidRequest as exc:
                        problem(f"event {eid}: {exc}")
            known = [n for n, c in created.items() if c[0] in roots]
            specs = {x: PopulationSpec(x, caps[x], deltas[x]) for x in roots}
            try:
                admit(targets, ev.curve, ev.delta_extra, own, specs, known)
            except BudgetExhausted as exc:
                problem(f"event {eid} was admitted over the cap: {exc}")
            for t in targets:
                own[t] = own.get(t, EMPTY_TOTAL).plus(ev.curve, ev.delta_extra)
                expected[t] = own[t]
                created.setdefault(t, (root_of(t), None, eid))
            if kind == "charge":
                charges.add(eid)
        if stored != expected:
            for p in sorted(set(stored) | set(expected)):
                if stored.get(p) != expected.get(p):
                    problem(f"stored total of {p!r} at event {eid} differs from recomputation")
    while pending is not None:
        problem(f"totals row ({pending[0]!r}, {pending[1]}) follows no event")
        pending = totals.fetchone()
    table = {
        str(n): (str(root), None if d is None else float(d), int(c))
        for n, root, d, c in conn.execute(
            "SELECT name, root, delta, created_event FROM populations"
        )
    }
    for name in sorted(set(table) | set(created)):
        if table.get(name) != created.get(name):
            problem(f"population {name!r} in the store differs from its events")
    return n_events, len(created)
