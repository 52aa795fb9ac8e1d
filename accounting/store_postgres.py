"""The shared ledger store: PostgreSQL, for several proxy hosts spending one budget.

The same log as the SQLite store (``store_sqlite.py``): tables ``events`` (raw,
hash-chained), ``totals`` (one row per named population after each cost-bearing event,
never updated) and ``populations``, in the schema ``dpsql_ledger``; the same hash chain,
admission (``ledger_records.admit_spend``) and recomputation (``verify``), so a log
verifies identically in either store. Curves are stored as the same JSON text, which the
hash chain covers (packing them as ``float8[]`` would save nothing measurable: a charge
parses three curves, ~30 µs, next to a ~1 ms transaction; see README).

**Append-only, enforced by the database.** Row triggers refuse UPDATE and DELETE,
statement triggers refuse TRUNCATE, insert guards refuse an event that is not the next
id or a total that is not the newest for its population. The role the proxy connects as
must not be able to get around them: on every (re)connection the store checks that the
role is not a superuser (a superuser ignores privileges and may disable triggers), that
triggers are not disabled for the session (``session_replication_role``), that it holds
no UPDATE, DELETE or TRUNCATE privilege on the ledger tables, and that every trigger is
present, enabled and runs the expected function body. If any of this fails, the ledger
is unavailable. When the store creates its schema itself, it revokes those privileges
from its own role (the owner); :func:`install` lets an administrator create the schema
under another owner and grant a writer role only SELECT and INSERT.

**Admission is serialised across processes and hosts** with a transaction-scoped
advisory lock, ``pg_advisory_xact_lock``, taken first in a READ COMMITTED transaction:

* a lock row read ``FOR UPDATE`` and ``LOCK TABLE ... EXCLUSIVE`` both need UPDATE (or
  DELETE/TRUNCATE) privilege on the table, which the writer role must not have; an
  advisory lock needs no privilege;
* SERIALIZABLE alone would be correct but, with every writer reading and appending the
  same rows, it aborts most concurrent charges, which must then be retried;
* READ COMMITTED takes a new snapshot per statement, so every read after the lock sees
  every charge committed before it (REPEATABLE READ would keep the snapshot taken by
  the locking statement itself, before the wait);
* the server releases the lock at commit or rollback, and when the client's connection
  ends, so a killed proxy never holds the ledger;
* backstop: the events primary key and the insert guard mean that even a writer that
  skipped the lock could not append a second event with the same id (a fork of the
  chain); verify re-checks every admission.

Each commit is durable (``synchronous_commit`` is forced to ``on`` for the session)
before ``charge`` returns. **Fail closed:** a connection, lock-timeout or consistency
problem raises LedgerUnavailable and appends nothing; an inconsistency closes the
instance for good, a lost connection is reopened (and re-checked) on the next call.
"""

from __future__ import annotations

import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from accounting.ledger import (
    EMPTY_TOTAL,
    SEPARATOR,
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
    SCHEMA_VERSION,
    Admission,
    Inconsistent,
    admit_spend,
    check_cap,
    check_head,
    check_registration,
    check_target,
    curve_json,
    digest,
    event_from_row,
    event_row,
    fold_analyst_events,
    names_json,
    parse_names,
    recompute,
    total_step,
)
from accounting.rdp import Curve

DEFAULT_SCHEMA = "dpsql_ledger"
TABLES = ("meta", "events", "totals", "populations")
# Namespace of the two-integer advisory locks (ASCII "dpsq"); the second integer names
# the schema. The one-bigint lock space, used by the release cache, never overlaps it.
LOCK_CLASS = 0x64707371
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# PL/pgSQL bodies, compared verbatim with pg_proc.prosrc on every connection.
_REFUSE = "BEGIN RAISE EXCEPTION '% are append-only', TG_TABLE_NAME; END"
_EVENTS_GUARD = (
    "BEGIN IF NEW.id <> COALESCE((SELECT max(id) FROM {s}.events), 0) + 1 THEN "
    "RAISE EXCEPTION 'events are append-only'; END IF; RETURN NEW; END"
)
_TOTALS_GUARD = (
    "BEGIN IF EXISTS (SELECT 1 FROM {s}.totals WHERE population = NEW.population "
    "AND event_id >= NEW.event_id) OR NOT EXISTS (SELECT 1 FROM {s}.events "
    "WHERE id = NEW.event_id) THEN RAISE EXCEPTION 'totals are append-only'; END IF; "
    "RETURN NEW; END"
)
_COLUMNS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "meta": (("key", "text", "NO"), ("value", "text", "NO")),
    "events": (
        ("id", "bigint", "NO"),
        ("ts", "double precision", "NO"),
        ("kind", "text", "NO"),
        ("populations", "text", "NO"),
        ("curve", "text", "YES"),
        ("delta_extra", "double precision", "NO"),
        ("analyst", "text", "NO"),
        ("fingerprint", "text", "NO"),
        ("note", "text", "NO"),
        ("parent_id", "bigint", "YES"),
        ("cap", "double precision", "YES"),
        ("delta", "double precision", "YES"),
        ("hash", "text", "NO"),
    ),
    "totals": (
        ("population", "text", "NO"),
        ("event_id", "bigint", "NO"),
        ("curve", "text", "NO"),
        ("delta_extra", "double precision", "NO"),
        ("events", "bigint", "NO"),
    ),
    "populations": (
        ("name", "text", "NO"),
        ("root", "text", "NO"),
        ("delta", "double precision", "YES"),
        ("created_event", "bigint", "NO"),
    ),
}


def _ddl(s: str) -> list[str]:
    cols = {
        t: ", ".join(f"{n} {ty}{' NOT NULL' if nn == 'NO' else ''}" for n, ty, nn in c)
        for t, c in _COLUMNS.items()
    }
    out = [
        f"CREATE SCHEMA {s}",
        f"CREATE TABLE {s}.meta ({cols['meta']}, PRIMARY KEY (key))",
        f"CREATE TABLE {s}.events ({cols['events']}, PRIMARY KEY (id), CHECK (kind IN "
        "('charge','replay','external','cap_change','register')))",
        f"CREATE INDEX events_caps ON {s}.events (populations, id) WHERE cap IS NOT NULL",
        f"CREATE INDEX events_by_analyst ON {s}.events (analyst, id) "
        "WHERE kind IN ('charge', 'external')",
        f"CREATE TABLE {s}.totals ({cols['totals']}, PRIMARY KEY (population, event_id))",
        f"CREATE INDEX totals_by_event ON {s}.totals (event_id, population)",
        f"CREATE TABLE {s}.populations ({cols['populations']}, PRIMARY KEY (name))",
        f"CREATE INDEX populations_by_root ON {s}.populations (root)",
    ]
    for name, body in _functions(s).items():
        out.append(
            f"CREATE FUNCTION {s}.{name}() RETURNS trigger LANGUAGE plpgsql AS $body${body}$body$"
        )
    for table, trigger, timing, function in _triggers():
        level = "STATEMENT" if "TRUNCATE" in timing else "ROW"
        out.append(
            f"CREATE TRIGGER {trigger} {timing} ON {s}.{table} "
            f"FOR EACH {level} EXECUTE FUNCTION {s}.{function}()"
        )
    return out


def _functions(s: str) -> dict[str, str]:
    return {
        "refuse_edit": _REFUSE,
        "events_guard": _EVENTS_GUARD.format(s=s),
        "totals_guard": _TOTALS_GUARD.format(s=s),
    }


def _triggers() -> list[tuple[str, str, str, str]]:
    """(table, trigger, timing, function) of every guard."""
    out = []
    for t in TABLES:
        out.append((t, f"{t}_no_update_delete", "BEFORE UPDATE OR DELETE", "refuse_edit"))
        out.append((t, f"{t}_no_truncate", "BEFORE TRUNCATE", "refuse_edit"))
    out.append(("events", "events_append_only", "BEFORE INSERT", "events_guard"))
    out.append(("totals", "totals_append_only", "BEFORE INSERT", "totals_guard"))
    return out


def check_schema_name(schema: str) -> str:
    if not _SCHEMA_NAME.match(schema):
        raise InvalidRequest(f"schema must be a lower-case SQL identifier, got {schema!r}")
    return schema


def lock_key(schema: str) -> int:
    """Second integer of the ledger's advisory lock: the schema's CRC-32, signed."""
    crc = zlib.crc32(schema.encode())
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def redact(dsn: str) -> str:
    """A DSN without its password, for messages."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable dsn>"
    shown = {k: v for k, v in parts.items() if k in ("host", "hostaddr", "port", "dbname", "user")}
    return " ".join(f"{k}={v}" for k, v in shown.items()) or "<default connection>"


def connect(dsn: str, *, timeout_s: float, application: str) -> psycopg.Connection[Any]:
    """An autocommit connection with time limits and keepalives, durable commits."""
    ms = int(timeout_s * 1000)
    return psycopg.connect(
        dsn,
        autocommit=True,
        connect_timeout=max(1, int(timeout_s)),
        application_name=application,
        keepalives=1,
        keepalives_idle=30,
        keepalives_interval=10,
        keepalives_count=3,
        options=(
            f"-c lock_timeout={ms} -c statement_timeout={ms * 2} "
            f"-c idle_in_transaction_session_timeout={ms * 2} -c synchronous_commit=on"
        ),
    )


def install(
    conn: psycopg.Connection[Any], *, writer: str | None = None, schema: str = DEFAULT_SCHEMA
) -> bool:
    """Create the ledger schema if it does not exist; True if it was created.

    Run by the schema's owner (an administrator, or the proxy's own role on first use):
    privileges on the tables are revoked from PUBLIC and UPDATE, DELETE, TRUNCATE from
    the owner itself; ``writer``, if given, gets USAGE and SELECT, INSERT only.
    Preconditions: ``conn`` is in autocommit mode.
    """
    s = check_schema_name(schema)
    exists = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
    if conn.execute(exists, (s,)).fetchone():
        return False
    with conn.transaction():
        # Two hosts starting at once: the second waits, then finds the schema.
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, lock_key(s)))
        if conn.execute(exists, (s,)).fetchone():
            return False
        for stmt in _ddl(s):
            conn.execute(stmt)
        conn.execute(
            f"INSERT INTO {s}.meta (key, value) VALUES (%s, %s), (%s, %s)",
            ("schema_version", SCHEMA_VERSION, "orders", ORDERS_JSON),
        )
        tables = ", ".join(f"{s}.{t}" for t in TABLES)
        conn.execute(f"REVOKE ALL ON {tables} FROM PUBLIC")
        conn.execute(f"REVOKE UPDATE, DELETE, TRUNCATE ON {tables} FROM CURRENT_USER")
        if writer is not None:
            role = psycopg.sql.Identifier(writer).as_string(conn)
            conn.execute(f"GRANT USAGE ON SCHEMA {s} TO {role}")
            conn.execute(f"GRANT SELECT, INSERT ON {tables} TO {role}")
    return True


def _check_role(conn: psycopg.Connection[Any]) -> str:
    """The connected role, if it cannot bypass the ledger's triggers; else Inconsistent."""
    role, superuser, replication = conn.execute(
        "SELECT current_user, rolsuper, current_setting('session_replication_role') "
        "FROM pg_roles WHERE rolname = current_user"
    ).fetchone() or ("?", True, "?")
    if superuser:
        raise Inconsistent(
            f"role {role!r} is a superuser, which ignores the ledger's append-only rules; "
            "connect as a role without UPDATE/DELETE on the ledger (see README)"
        )
    if replication != "origin":
        raise Inconsistent(f"session_replication_role is {replication!r}: triggers are off")
    return str(role)


def _step(name: str, rows: Sequence[Sequence[Any]]) -> Total:
    """``total_step`` on rows (name, event_id, curve, delta_extra, events, kind,
    populations, curve, delta_extra), newest first, of one population."""
    latest = rows[0]
    previous = rows[1][1:5] if len(rows) > 1 else None
    event = None if latest[5] is None else latest[5:9]
    return total_step(name, latest[1:5], previous, event)


class PostgresLedger(Ledger):
    """The ledger in one PostgreSQL database, shared by any number of threads, processes
    and hosts.

    Preconditions: ``dsn`` names a role that is not a superuser and has CREATE on the
    database (first use) or was granted the schema by :func:`install`. A connection is
    never carried across ``fork``: a child process opens its own. Opening never raises
    for a bad store; the ledger is then unavailable and says why.
    """

    def __init__(self, dsn: str, *, schema: str = DEFAULT_SCHEMA, timeout_s: float = 30.0) -> None:
        self._dsn = dsn
        self._where = redact(dsn)
        self._schema = check_schema_name(schema)
        self._lock_key = lock_key(self._schema)
        self._timeout = float(timeout_s)
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = os.getpid()
        self._inherited: list[psycopg.Connection[Any]] = []
        self._broken: str | None = None
        self._closed = False
        self._deltas: dict[str, float] = {}
        self._partitionings: dict[str, Partitioning | None] = {}
        self._registered: dict[str, PopulationSpec] = {}
        self._analyst_totals: dict[str, tuple[int, dict[str, Total]]] = {}
        with self._lock, suppress(LedgerUnavailable):
            self._connection(gated=False)

    # --- connection and transactions ---------------------------------------------------

    def _open(self) -> psycopg.Connection[Any]:
        """A new connection, checked: raises LedgerUnavailable if it cannot be opened;
        marks the instance broken (reads of the raw log still work) if the store or the
        role is unsafe or inconsistent."""
        try:
            conn = connect(self._dsn, timeout_s=self._timeout, application="dpsql-ledger")
        except psycopg.Error as exc:
            raise LedgerUnavailable(
                f"cannot connect to the ledger store ({self._where}): {exc}"
            ) from None
        try:
            try:
                _check_role(conn)
                install(conn, schema=self._schema)
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                self._quick_check(conn)
            finally:
                self._rollback(conn)
        except Inconsistent as exc:
            self._broken = f"ledger store ({self._where}) is unsafe or inconsistent: {exc}"
        except psycopg.Error as exc:
            with suppress(Exception):
                conn.close()
            raise LedgerUnavailable(
                f"cannot open the ledger store ({self._where}): {exc}"
            ) from None
        return conn

    def _quick_check(self, conn: psycopg.Connection[Any]) -> None:
        """Cheap check on every new connection: the role cannot edit the log, every guard
        is in place, schema, version, orders, the head of the hash chain, and the last
        step of every population's stored total."""
        s = self._schema
        role = _check_role(conn)
        columns: dict[str, list[tuple[str, str, str]]] = {}
        for t, c, ty, nn in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable "
            "FROM information_schema.columns WHERE table_schema = %s "
            "ORDER BY table_name, ordinal_position",
            (s,),
        ):
            columns.setdefault(t, []).append((c, ty, nn))
        if {t: tuple(c) for t, c in columns.items()} != _COLUMNS:
            raise Inconsistent(f"unexpected tables or columns in schema {s!r}")
        editable = conn.execute(
            "SELECT t, p FROM unnest(%s::text[]) t, unnest(%s::text[]) p "
            "WHERE has_table_privilege(%s || '.' || t, p)",
            (list(TABLES), ["UPDATE", "DELETE", "TRUNCATE"], s),
        ).fetchall()
        if editable:
            raise Inconsistent(
                f"role {role!r} may {', '.join(sorted({p for _, p in editable}))} the ledger "
                f"tables {sorted({t for t, _ in editable})}; revoke it (see README)"
            )
        found = {
            (str(table), str(name)): (str(enabled), str(fn), str(src))
            for table, name, enabled, fn, src in conn.execute(
                "SELECT c.relname, t.tgname, t.tgenabled, p.proname, p.prosrc "
                "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_proc p ON p.oid = t.tgfoid "
                "WHERE n.nspname = %s AND NOT t.tgisinternal",
                (s,),
            )
        }
        bodies = _functions(s)
        expected = {(table, trig): ("O", fn, bodies[fn]) for table, trig, _, fn in _triggers()}
        if found != expected:
            bad = sorted(k[1] for k in expected if found.get(k) != expected[k])
            extra = sorted(k[1] for k in found if k not in expected)
            raise Inconsistent(
                f"append-only triggers missing, disabled or altered: {bad}, unexpected: {extra}"
            )
        meta = dict(conn.execute(f"SELECT key, value FROM {s}.meta").fetchall())
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise Inconsistent(
                f"schema version {meta.get('schema_version')!r}, expected {SCHEMA_VERSION!r}"
            )
        if meta.get("orders") != ORDERS_JSON:
            raise Inconsistent("the store was written with a different RDP order grid")
        check_head(
            conn.execute(f"SELECT {EVENT_COLS} FROM {s}.events ORDER BY id DESC LIMIT 2").fetchall()
        )
        self._own_totals(
            conn, [str(r[0]) for r in conn.execute(f"SELECT name FROM {s}.populations")]
        )

    def _connection(self, *, gated: bool = True) -> psycopg.Connection[Any]:
        """The open connection (reopened if it was lost); ``gated`` refuses while the
        store is in doubt, ungated reads of the raw log go on."""
        if self._closed:
            raise LedgerUnavailable("the ledger is closed")
        if self._conn is not None and os.getpid() != self._pid:
            # Never use (or close: that would end the parent's session) a connection
            # inherited across fork.
            self._inherited.append(self._conn)
            self._conn = None
        self._pid = os.getpid()
        if self._conn is not None and self._conn.broken:
            self._drop()
        if self._conn is None:
            self._conn = self._open()
        if gated and self._broken is not None:
            raise LedgerUnavailable(self._broken)
        return self._conn

    def _drop(self) -> None:
        """Forget a connection that failed: the next call opens (and checks) a new one."""
        if self._conn is not None:
            with suppress(Exception):
                self._conn.close()
        self._conn = None

    def _begin(
        self,
        conn: psycopg.Connection[Any],
        write: bool,
        then: Callable[[psycopg.Connection[Any]], None] | None,
    ) -> None:
        """Open the transaction (a writer takes the admission lock) and queue ``then``'s
        reads behind it: one round trip."""
        if not write:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return
        with conn.pipeline():
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, self._lock_key))
            if then is not None:
                then(conn)

    @contextmanager
    def _transaction(
        self,
        *,
        write: bool,
        gated: bool = True,
        then: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> Iterator[psycopg.Connection[Any]]:
        """One transaction; the body may end it with its own COMMIT (sent with its last
        statements), else it is committed here."""
        with self._lock:
            conn = self._connection(gated=gated)
            try:
                try:
                    self._begin(conn, write, then)
                except psycopg.OperationalError:
                    if not conn.broken:
                        raise
                    # The connection died while idle (server restart, idle timeout):
                    # nothing was done on it, so open a new one, checked, and go on.
                    self._drop()
                    conn = self._connection(gated=gated)
                    self._begin(conn, write, then)
            except psycopg.Error as exc:
                self._rollback(conn)
                raise LedgerUnavailable(f"cannot lock the ledger store: {exc}") from None
            try:
                yield conn
            except Inconsistent as exc:
                self._rollback(conn)
                self._broken = f"ledger store is inconsistent: {exc}"
                raise LedgerUnavailable(self._broken) from None
            except psycopg.Error as exc:
                # A failed COMMIT leaves the outcome unknown (it may have reached the
                # disk): the caller answers nothing, and a charge that did commit stands.
                self._rollback(conn)
                raise LedgerUnavailable(f"ledger store error: {exc}") from None
            except BaseException:
                self._rollback(conn)
                raise
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                return  # the body committed
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                self._rollback(conn)
                raise LedgerUnavailable(f"ledger commit failed: {exc}") from None

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        try:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            self._drop()
        if conn.broken:
            self._drop()

    # --- reading state inside a transaction ------------------------------------------------

    def _own_total(self, conn: psycopg.Connection[Any], name: str) -> Total:
        return self._own_totals(conn, [name])[name]

    def _own_totals(self, conn: psycopg.Connection[Any], names: Sequence[str]) -> dict[str, Total]:
        """The latest own total of each name, after checking that it is the previous one
        plus the event it claims to follow (one step of verify per name; one query)."""
        s = self._schema
        rows = conn.execute(
            "SELECT n.name, t.event_id, t.curve, t.delta_extra, t.events, "
            "e.kind, e.populations, e.curve, e.delta_extra "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS n(name, i) "
            "CROSS JOIN LATERAL (SELECT event_id, curve, delta_extra, events "
            f"FROM {s}.totals WHERE population = n.name ORDER BY event_id DESC LIMIT 2) t "
            f"LEFT JOIN {s}.events e ON e.id = t.event_id ORDER BY n.i, t.event_id DESC",
            (list(names),),
        ).fetchall()
        found: dict[str, list[Sequence[Any]]] = {}
        for r in rows:
            found.setdefault(str(r[0]), []).append(r)
        return {n: _step(n, found[n]) if n in found else EMPTY_TOTAL for n in names}

    def _spec(self, conn: psycopg.Connection[Any], root: str) -> PopulationSpec:
        s = self._schema
        delta = self._deltas.get(root)
        if delta is None:
            row = conn.execute(
                f"SELECT delta FROM {s}.populations WHERE name = %s AND root = name", (root,)
            ).fetchone()
            if row is None:
                raise UnknownPopulation(f"population {root!r} is not registered")
            if row[0] is None:
                raise Inconsistent(f"root {root!r} has no delta")
            delta = float(row[0])
            self._deltas[root] = delta
        cap = conn.execute(
            f"SELECT cap FROM {s}.events WHERE cap IS NOT NULL AND populations = %s "
            "ORDER BY id DESC LIMIT 1",
            (names_json([root]),),
        ).fetchone()
        if cap is None:
            raise Inconsistent(f"root {root!r} has no register event")
        return PopulationSpec(root, float(cap[0]), delta)

    def _known(self, conn: psycopg.Connection[Any], roots: Sequence[str]) -> list[str]:
        rows = conn.execute(
            f"SELECT name FROM {self._schema}.populations WHERE root = ANY(%s) ORDER BY root",
            (list(roots),),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def _own_totals_of(self, conn: psycopg.Connection[Any], analyst: str) -> dict[str, Total]:
        last, totals = self._analyst_totals.get(analyst, (0, {}))
        rows = conn.execute(
            f"SELECT id, populations, curve, delta_extra FROM {self._schema}.events "
            "WHERE id > %s AND analyst = %s AND kind IN ('charge', 'external') ORDER BY id",
            (last, analyst),
        ).fetchall()
        read, totals = fold_analyst_events(totals, rows)
        self._analyst_totals[analyst] = (last if read is None else read, totals)
        return totals

    def _append_event(
        self,
        conn: psycopg.Connection[Any],
        kind: str,
        names: Sequence[str],
        **columns: Any,
    ) -> int:
        last = conn.execute(
            f"SELECT id, hash FROM {self._schema}.events ORDER BY id DESC LIMIT 1"
        ).fetchone()
        event_id, values = self._new_event(
            None if last is None else (int(last[0]), str(last[1])), kind, names, **columns
        )
        conn.execute(self._insert_event_sql, values)
        return event_id

    @property
    def _insert_event_sql(self) -> str:
        return (
            f"INSERT INTO {self._schema}.events ({EVENT_COLS}) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
        )

    @staticmethod
    def _new_event(
        head: tuple[int, str] | None,
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
    ) -> tuple[int, tuple[Any, ...]]:
        """The next event's id and its stored values, hash last, after ``head``."""
        event_id, prev = (1, GENESIS) if head is None else (head[0] + 1, head[1])
        row = event_row(
            event_id,
            time.time(),
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
        if any(isinstance(v, str) and "\x00" in v for v in row):
            # PostgreSQL text cannot hold NUL; refuse it as a bad argument, not a failure.
            raise InvalidRequest("analyst, fingerprint and note must not contain NUL")
        return event_id, (*row, digest(prev, row))

    def _append_admitted(
        self,
        conn: psycopg.Connection[Any],
        admitted: Admission,
        event_id: int,
        event: tuple[Any, ...],
    ) -> None:
        """Insert the event, its totals and the partitions it creates, and commit: one
        round trip (and the disk)."""
        s = self._schema
        with conn.pipeline(), conn.cursor() as cur:
            cur.execute(self._insert_event_sql, event)
            cur.executemany(
                f"INSERT INTO {s}.totals (population, event_id, curve, delta_extra, events) "
                "VALUES (%s,%s,%s,%s,%s)",
                [
                    (t, event_id, curve_json(new.curve), new.delta_extra, new.events)
                    for t, new in admitted.totals
                ],
            )
            if admitted.created:
                cur.executemany(
                    f"INSERT INTO {s}.populations (name, root, delta, created_event) "
                    "VALUES (%s,%s,NULL,%s)",
                    [(t, root_of(t), event_id) for t in admitted.created],
                )
            cur.execute("COMMIT")

    # --- the interface ---------------------------------------------------------------------

    def share_spent(self, population: str, analyst: str) -> Spend | None:
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
        s = self._schema
        with self._transaction(write=True) as conn:
            found = conn.execute(
                f"SELECT root, delta FROM {s}.populations WHERE name = %s", (name,)
            ).fetchone()
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
                    f"INSERT INTO {s}.populations (name, root, delta, created_event) "
                    "VALUES (%s,%s,%s,%s)",
                    (name, name, delta, eid),
                )
                return
            if found[1] is None or float(found[1]) != delta:
                raise InvalidRequest(
                    f"population {name!r} is registered with delta {found[1]!r}; "
                    "its delta cannot change"
                )
            last = conn.execute(
                f"SELECT cap FROM {s}.events WHERE cap IS NOT NULL AND populations = %s "
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
        state = _State(self._schema, targets)
        with self._transaction(write=True, then=state.queue) as conn:
            state.load(self, conn)
            admitted = admit_spend(
                state,
                targets,
                curve,
                dx,
                analyst,
                self._registered,
                lambda name: check_target(name, self._partitionings),
            )
            event_id, event = self._new_event(
                state.head,
                kind,
                targets,
                curve=curve,
                delta_extra=dx,
                analyst=analyst,
                fingerprint=fingerprint,
                note=note,
            )
            self._append_admitted(conn, admitted, event_id, event)
        return admitted.receipt(event_id, kind)

    def replay(self, parent_id: int, *, analyst: str, fingerprint: str, note: str = "") -> int:
        if isinstance(parent_id, bool) or not isinstance(parent_id, int):
            raise InvalidRequest(f"parent_id must be an event id, got {parent_id!r}")
        s = self._schema
        reads: list[Any] = []

        def queue(conn: psycopg.Connection[Any]) -> None:
            reads[:] = [
                conn.execute(
                    f"SELECT kind, populations FROM {s}.events WHERE id = %s", (parent_id,)
                ),
                conn.execute(f"SELECT id, hash FROM {s}.events ORDER BY id DESC LIMIT 1"),
            ]

        # A replay is appended on every cache hit: two round trips, like a charge.
        with self._transaction(write=True, then=queue) as conn:
            parent, last = reads[0].fetchone(), reads[1].fetchone()
            if parent is None or parent[0] != "charge":
                raise InvalidRequest(f"event {parent_id} is not a charge that could be replayed")
            event_id, event = self._new_event(
                None if last is None else (int(last[0]), str(last[1])),
                "replay",
                parse_names(parent[1]),
                analyst=analyst,
                fingerprint=fingerprint,
                note=note,
                parent_id=parent_id,
            )
            with conn.pipeline():
                conn.execute(self._insert_event_sql, event)
                conn.execute("COMMIT")
            return event_id

    def set_cap(self, population: str, epsilon_cap: float, *, reason: str, analyst: str) -> int:
        name = check_population_name(population)
        if SEPARATOR in name:
            raise InvalidRequest(f"caps are set on roots; {name!r} inherits its root's cap")
        cap = check_cap(epsilon_cap)
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
            own = self._own_totals(conn, [a for a in ancestors_or_self(name) if a in known])
        return Spend.of(name, composed_total(name, own), spec.epsilon_cap, spec.delta)

    def populations(self) -> tuple[str, ...]:
        with self._transaction(write=False, gated=False) as conn:
            rows = conn.execute(
                f'SELECT name FROM {self._schema}.populations ORDER BY name COLLATE "C"'
            ).fetchall()
        return tuple(str(r[0]) for r in rows)

    def history(
        self, population: str | None = None, limit: int = 100, after_id: int = 0
    ) -> list[Event]:
        s = self._schema
        params: dict[str, Any] = {"after": int(after_id), "limit": int(limit)}
        where = ""
        if population is not None:
            params["name"] = check_population_name(population)
            where = (
                " AND EXISTS (SELECT 1 FROM json_array_elements_text(populations::json) j(v) "
                "WHERE v = %(name)s OR left(v, length(%(name)s) + 1) = %(name)s || '/' "
                "OR left(%(name)s, length(v) + 1) = v || '/')"
            )
        sql = (
            f"SELECT {EVENT_COLS} FROM {s}.events WHERE id > %(after)s{where} "
            "ORDER BY id LIMIT %(limit)s"
        )
        with self._transaction(write=False, gated=False) as conn:
            if (
                population is not None
                and conn.execute(
                    f"SELECT 1 FROM {s}.populations WHERE name = %s", (root_of(population),)
                ).fetchone()
                is None
            ):
                raise UnknownPopulation(f"population {root_of(population)!r} is not registered")
            rows = conn.execute(sql, params).fetchall()
            return [event_from_row(r) for r in rows]

    def verify(self) -> VerifyReport:
        s = self._schema
        with self._lock:
            try:
                conn = self._connection(gated=False)
            except LedgerUnavailable as exc:
                return VerifyReport(False, 0, 0, (str(exc),))
            problems: list[str] = []
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    self._quick_check(conn)
                except Inconsistent as exc:
                    problems.append(str(exc))
                # Server-side cursors stream the log; both read the same snapshot.
                with (
                    conn.cursor(name="dpsql_verify_events") as events,
                    conn.cursor(name="dpsql_verify_totals") as totals,
                ):
                    events.itersize = totals.itersize = 2000
                    events.execute(f"SELECT {EVENT_COLS} FROM {s}.events ORDER BY id")
                    totals.execute(
                        "SELECT population, event_id, curve, delta_extra, events "
                        f'FROM {s}.totals ORDER BY event_id, population COLLATE "C"'
                    )
                    n_events, n_pops = recompute(
                        iter(events),
                        iter(totals),
                        lambda: conn.execute(
                            f"SELECT name, root, delta, created_event FROM {s}.populations"
                        ).fetchall(),
                        problems,
                        self._partitionings,
                    )
            except psycopg.Error as exc:
                problems.append(f"cannot read the store: {exc}")
                n_events = n_pops = 0
            finally:
                self._rollback(conn)
            if problems and self._broken is None:
                self._broken = f"verify failed: {problems[0]}"
            return VerifyReport(not problems, n_events, n_pops, tuple(problems[:MAX_PROBLEMS]))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None and os.getpid() == self._pid:
                with suppress(Exception):
                    self._conn.close()
            self._conn = None


class _State:
    """What admission reads, inside one of the ledger's write transactions, sent in the
    round trip that opens it (see :meth:`PostgresLedger._begin`): each root's facts,
    the head of the log, and the latest totals of every population the spend could
    need (the targets' ancestors and everything below a target)."""

    def __init__(self, schema: str, targets: Sequence[str]) -> None:
        self._schema = schema
        self._roots = sorted({root_of(t) for t in targets})
        self._targets = list(targets)
        self._lineage = sorted({a for t in targets for a in ancestors_or_self(t)})
        self._cursors: tuple[Any, Any, Any] | None = None
        self.head: tuple[int, str] | None = None
        self._facts: dict[str, tuple[bool, Any, Any, list[str]]] = {}
        self._totals: dict[str, list[Sequence[Any]]] = {}
        self._ledger: PostgresLedger | None = None
        self._conn: psycopg.Connection[Any] | None = None

    def queue(self, conn: psycopg.Connection[Any]) -> None:
        s = self._schema
        facts = conn.execute(
            "SELECT r.root, "
            f"EXISTS (SELECT 1 FROM {s}.populations p WHERE p.name = r.root AND p.root = p.name), "
            f"(SELECT p.delta FROM {s}.populations p WHERE p.name = r.root AND p.root = p.name), "
            f"(SELECT e.cap FROM {s}.events e WHERE e.cap IS NOT NULL AND e.populations = r.j "
            "ORDER BY e.id DESC LIMIT 1), "
            f"ARRAY(SELECT p.name FROM {s}.populations p WHERE p.root = r.root) "
            "FROM unnest(%s::text[], %s::text[]) AS r(root, j)",
            (self._roots, [names_json([r]) for r in self._roots]),
        )
        head = conn.execute(f"SELECT id, hash FROM {s}.events ORDER BY id DESC LIMIT 1")
        totals = conn.execute(
            "WITH n(name) AS (SELECT unnest(%(lineage)s::text[]) UNION "
            f"SELECT p.name FROM {s}.populations p WHERE p.root = ANY(%(roots)s) AND EXISTS "
            "(SELECT 1 FROM unnest(%(targets)s::text[]) g(t) "
            "WHERE left(p.name, length(g.t) + 1) = g.t || '/')) "
            "SELECT n.name, t.event_id, t.curve, t.delta_extra, t.events, "
            "e.kind, e.populations, e.curve, e.delta_extra FROM n "
            "LEFT JOIN LATERAL (SELECT event_id, curve, delta_extra, events "
            f"FROM {s}.totals WHERE population = n.name ORDER BY event_id DESC LIMIT 2) t "
            f"ON true LEFT JOIN {s}.events e ON e.id = t.event_id "
            "ORDER BY n.name, t.event_id DESC",
            {"lineage": self._lineage, "roots": self._roots, "targets": self._targets},
        )
        self._cursors = (facts, head, totals)

    def load(self, ledger: PostgresLedger, conn: psycopg.Connection[Any]) -> None:
        assert self._cursors is not None
        facts, head, totals = self._cursors
        self._ledger, self._conn = ledger, conn
        self._facts = {str(r[0]): (bool(r[1]), r[2], r[3], [str(n) for n in r[4]]) for r in facts}
        last = head.fetchone()
        self.head = None if last is None else (int(last[0]), str(last[1]))
        for r in totals:
            rows = self._totals.setdefault(str(r[0]), [])
            if r[1] is not None:
                rows.append(r)

    def spec(self, root: str) -> PopulationSpec:
        registered, delta, cap, _ = self._facts[root]
        if not registered:
            raise UnknownPopulation(f"population {root!r} is not registered")
        if delta is None:
            raise Inconsistent(f"root {root!r} has no delta")
        if cap is None:
            raise Inconsistent(f"root {root!r} has no register event")
        return PopulationSpec(root, float(cap), float(delta))

    def known(self, roots: Sequence[str]) -> list[str]:
        return [n for r in roots for n in self._facts[r][3]]

    def own_totals(self, names: Sequence[str]) -> dict[str, Total]:
        missing = [n for n in names if n not in self._totals]
        out = {} if not missing else self._ledger_()._own_totals(self._conn_(), missing)
        for name in names:
            if name in out:
                continue
            rows = self._totals[name]
            out[name] = EMPTY_TOTAL if not rows else _step(name, rows)
        return out

    def analyst_totals(self, analyst: str) -> dict[str, Total]:
        return self._ledger_()._own_totals_of(self._conn_(), analyst)

    def _ledger_(self) -> PostgresLedger:
        assert self._ledger is not None
        return self._ledger

    def _conn_(self) -> psycopg.Connection[Any]:
        assert self._conn is not None
        return self._conn
