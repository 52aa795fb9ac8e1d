"""One authenticated client: the simple and extended query protocols.

Answers are materialised once per portal (the engine releases a whole noisy table at
a time), then streamed in the sizes the client asks for; a portal's Describe and its
Executes share that one answer, so describing and fetching in pages never runs (or
charges) a query twice. Engine and catalog work runs in the server's thread pool, so
a slow query holds up only its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from sqlglot.errors import SqlglotError

from proxy.errors import DPSQLError
from proxy.pgwire import codec, pgtypes
from proxy.pgwire.adapter import Ask
from proxy.pgwire.privacy_notes import Notice, notices, release_json
from proxy.pgwire.session_settings import (
    DISPLAY,
    PRIVACY,
    STANDARD,
    STARTUP,
    Privacy,
    SessionSettings,
    canonical,
    unknown,
)
from proxy.pgwire.shadow import SessionFacts
from proxy.pgwire.sqlstate import (
    FEATURE_NOT_SUPPORTED,
    IN_FAILED_TRANSACTION,
    INTERNAL_ERROR,
    INVALID_CURSOR_NAME,
    INVALID_STATEMENT_NAME,
    PROTOCOL_VIOLATION,
    QUERY_CANCELED,
    WireError,
    from_dpsql,
)
from proxy.pgwire.sqltext import parameter_numbers as outside_literals_numbers
from proxy.pgwire.sqltext import spaced_parameters, split_statements
from proxy.pgwire.statements import (
    Kind,
    Statement,
    catalog_params,
    classify,
    engine_sql,
)
from proxy.result import Result
from proxy.server.auth import Caller
from proxy.server.logs import PGWIRE_LOGGER

if TYPE_CHECKING:
    from proxy.pgwire.server import PgServer

log = logging.getLogger(PGWIRE_LOGGER)
T = TypeVar("T")


@dataclass(frozen=True)
class Column:
    name: str
    oid: int


@dataclass
class Answer:
    """A statement's complete answer: columns (None: no rows), rows, notices, tag."""

    columns: list[Column] | None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    tag: str = ""
    notices: list[Notice] = field(default_factory=list)
    formats: list[int] = field(default_factory=list)  # simple protocol: a binary cursor's


@dataclass
class Prepared:
    statement: Statement
    param_oids: list[int]
    described: list[Column] | None = None  # what a statement-level Describe told the client


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    formats: list[int]
    answer: Answer | None = None
    described: list[Column] | None = None
    sent: int = 0


# Replies are buffered (codec.PgStream) and sent where PostgreSQL sends its output: at the
# end of a simple query, at Sync and at Flush; a whole extended batch is one write.
_SENDS_OUTPUT = frozenset({codec.Tags.QUERY, codec.Tags.SYNC, codec.Tags.FLUSH})


# Messages after login may be this long whatever the statement limit (16 MiB: a longer
# statement is still told its length, as PostgreSQL's own limit is 1 GiB), and a
# simple-query batch holds up to this many statements' worth of text.
MAX_MESSAGE_FLOOR = 16 << 20
BATCH_LENGTHS = 4
# Rows one connection may hold in open cursors and portals, and named statements and
# portals it may keep (PostgreSQL bounds them by memory; the door by these).
MAX_HELD_ROWS = 200_000
MAX_NAMED = 1_000


def _duckdb_oid(type_name: str) -> int:
    return pgtypes.from_duckdb(type_name).oid


class Connection:
    def __init__(
        self,
        server: PgServer,
        stream: codec.PgStream,
        caller: Caller,
        startup: dict[str, str],
        pid: int,
        secret: int,
    ):
        self.server = server
        self.stream = stream
        self.caller = caller
        self.pid = pid
        self.secret = secret
        self.database = startup.get("database") or caller.name
        self.settings = SessionSettings()
        self.settings.set("application_name", startup.get("application_name", ""))
        # who authenticated, not a client's SET (SessionSettings refuses to change it)
        self.settings.values["session_authorization"] = caller.name
        for name, value in _startup_options(startup.get("options", "")):
            self.settings.set(name, value)
        self.tx = b"I"
        # The settings at BEGIN (restored at ROLLBACK), and each group's value before its
        # first SET LOCAL in the transaction (restored at COMMIT): as PostgreSQL, so that
        # a pooled connection's `SET LOCAL dpsql.epsilon` does not go on spending budget
        # after its transaction (a probe, 2026-12-06).
        self._tx_settings: tuple[dict[str, str], Privacy] | None = None
        self._local_settings: dict[str, object] = {}
        # (name, settings, SET LOCAL groups) at each SAVEPOINT of the transaction
        self._savepoints: list[tuple[str, tuple[dict[str, str], Privacy], dict[str, object]]] = []
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.skipping = False
        # the last answer, rendered as JSON only when SHOW dpsql.last_release asks
        self.last_result: Result | None = None
        self._task: asyncio.Task[None] | None = None
        self.user_tables = server.user_table_keys
        self.shadow = server.shadow_for(caller)

    # --- lifecycle ------------------------------------------------------------------
    async def greet(self) -> None:
        m = codec.m
        self.stream.write(m.make_authentication_ok())
        for name in STARTUP:
            value = self.settings.get(name)
            self.stream.write(m.make_parameter_status(DISPLAY.get(name, name), value or ""))
        self.stream.write(m.make_backend_key_data(self.pid, self.secret))
        self.stream.write(m.make_ready_for_query(self.tx))
        await self.stream.drain()

    async def serve(self) -> None:
        # A message longer than any statement the engine takes (UTF-8: up to 4 bytes a
        # character) is refused before its body is read: a length word alone made the
        # door buffer what a client kept sending (a probe, 2026-12-06).
        limit = max(4 * self.server.door.policy.proxy.max_sql_length + 65536, MAX_MESSAGE_FLOOR)
        while True:
            tag, payload = await self.stream.read_message(limit)
            if tag == codec.Tags.TERMINATE:
                return
            self._task = asyncio.ensure_future(self._handle(tag, payload))
            try:
                await self._task
            except asyncio.CancelledError:
                if self.server.closing:
                    raise
                self._error(WireError(QUERY_CANCELED, "canceling statement due to user request"))
                if tag == codec.Tags.QUERY:
                    self._ready()
                else:
                    self.skipping = True  # the rest of the extended batch, up to Sync
                await self.stream.drain()
            finally:
                self._task = None
            if tag in _SENDS_OUTPUT:
                await self.stream.drain()

    def cancel(self) -> None:
        """A CancelRequest for this connection: stop waiting for the current statement.
        A query already charged keeps its charge and its cached release (the engine
        finishes in its thread), so asking again costs nothing."""
        if self._task is not None:
            self._task.cancel()

    # --- dispatch -------------------------------------------------------------------
    async def _handle(self, tag: bytes, payload: bytes) -> None:
        t = codec.Tags
        if tag == t.QUERY:
            try:
                sql = codec.m.parse_query(payload)
            except Exception as error:  # malformed bytes: an error, never a dropped socket
                self._error(_malformed(error))
            else:
                await self._simple(sql)
            self._ready()
            return
        if tag == t.SYNC:
            self.skipping = False
            self._ready()
            return
        if self.skipping:
            return
        try:
            if tag == t.PARSE:
                await self._parse(codec.m.parse_parse(payload))
            elif tag == t.BIND:
                self._bind(codec.m.parse_bind(payload))
            elif tag == t.DESCRIBE:
                await self._describe(codec.m.parse_describe(payload))
            elif tag == t.EXECUTE:
                await self._execute(codec.m.parse_execute(payload))
            elif tag == t.CLOSE:
                self._close(codec.m.parse_close(payload))
            elif tag == t.FLUSH:
                await self.stream.drain()
            else:
                raise WireError(PROTOCOL_VIOLATION, f"unexpected message type {tag!r}")
        except WireError as error:
            self._error(error)
            self.skipping = True
        except (UnicodeDecodeError, struct.error, IndexError, ValueError, RecursionError) as error:
            self._error(_malformed(error))
            self.skipping = True
        except SqlglotError as error:  # text sqlglot cannot read: a syntax error
            self._error(_unreadable(error))
            self.skipping = True

    def _ready(self) -> None:
        self.stream.write(codec.m.make_ready_for_query(self.tx))

    def _error(self, error: WireError) -> None:
        if self.tx == b"T":
            self.tx = b"E"
        self.stream.write(codec.m.make_error_response(error.fields()))

    def _notice(self, notice: Notice) -> None:
        self.stream.write(codec.m.make_notice_response(notice.fields()))

    # --- simple query ---------------------------------------------------------------
    async def _simple(self, sql: str) -> None:
        # The batch as a whole first: splitting it runs over every character on the
        # event loop, and blanks or comments around one statement escaped the limit.
        limit = self.server.door.policy.proxy.max_sql_length
        if len(sql) > BATCH_LENGTHS * limit:
            self._error(
                WireError(
                    "54000",
                    f"the query message is {len(sql)} characters long; the limit is "
                    f"{BATCH_LENGTHS * limit} ({BATCH_LENGTHS} statements of {limit})",
                )
            )
            return
        parts = split_statements(sql)
        if not parts:
            self.stream.write(codec.m.make_empty_query_response())
            return
        for text in parts:
            try:
                self._check_length(text)
                statement = classify(text, self.user_tables)
                answer = await self._run(statement, [], [])
            except WireError as error:
                self._error(error)
                return
            except (UnicodeDecodeError, ValueError, RecursionError) as error:
                self._error(_malformed(error))
                return
            except SqlglotError as error:
                self._error(_unreadable(error))
                return
            self._send_answer(answer, Portal(Prepared(statement, []), [], []), 0)

    # --- extended query -------------------------------------------------------------
    def _check_length(self, sql: str) -> None:
        """Refuse oversized SQL before parsing it on the event loop (the engine would
        refuse it anyway, after every connection waited for sqlglot)."""
        limit = self.server.door.policy.proxy.max_sql_length
        if len(sql) > limit:
            raise WireError(
                "54000", f"the SQL text is {len(sql)} characters long; the limit is {limit}"
            )

    async def _parse(self, parsed: Any) -> None:
        self._check_length(parsed.sql)
        self._check_room(self.prepared, parsed.statement_name, "prepared statements")
        statement = classify(spaced_parameters(parsed.sql), self.user_tables)
        self.prepared[parsed.statement_name] = Prepared(statement, list(parsed.param_oids))
        self.stream.write(codec.m.make_parse_complete())

    def _bind(self, parsed: Any) -> None:
        prepared = self.prepared.get(parsed.statement_name)
        if prepared is None:
            raise WireError(
                INVALID_STATEMENT_NAME,
                f'prepared statement "{parsed.statement_name}" does not exist',
            )
        params = [
            self._param(value, parsed.param_format_codes, prepared.param_oids, i)
            for i, value in enumerate(parsed.params)
        ]
        # Bound values become literals of the engine's SQL: their text counts against
        # the statement's limit before anything renders them.
        written = sum(len(str(p)) for p in params if p is not None)
        limit = self.server.door.policy.proxy.max_sql_length
        if written > limit:
            raise WireError(
                "54000", f"the bound parameters are {written} characters long; the limit is {limit}"
            )
        self._check_room(self.portals, parsed.portal_name, "cursors and portals")
        self.portals[parsed.portal_name] = Portal(prepared, params, parsed.result_format_codes)
        self.stream.write(codec.m.make_bind_complete())

    @staticmethod
    def _param(value: bytes | None, formats: list[int], oids: list[int], index: int) -> Any:
        if value is None:
            return None
        code = formats[0] if len(formats) == 1 else (formats[index] if formats else 0)
        if code == 0:
            return value.decode("utf-8")
        oid = oids[index] if index < len(oids) else 0
        try:
            return codec.decode_binary_param(oid, value)
        except (ValueError, struct.error, IndexError) as error:
            raise WireError("22P03", f"binary parameter ${index + 1}: {error}") from None

    async def _describe(self, parsed: Any) -> None:
        if parsed.kind == codec.Tags.TARGET_STATEMENT:
            prepared = self.prepared.get(parsed.name)
            if prepared is None:
                raise WireError(
                    INVALID_STATEMENT_NAME, f'prepared statement "{parsed.name}" does not exist'
                )
            self.stream.write(codec.m.make_parameter_description(self._param_oids(prepared)))
            columns = await self._statement_columns(prepared)
            prepared.described = columns
            formats: list[int] = []
        else:
            portal = self._portal(parsed.name)
            if portal.prepared.statement.returns_rows:
                answer = await self._materialise(portal)
                columns = answer.columns
            else:
                columns = None
            portal.described = columns
            formats = portal.formats
        if columns is None:
            self.stream.write(codec.m.make_no_data())
        else:
            self.stream.write(codec.m.make_row_description(_fields(columns, formats)))

    @staticmethod
    def _param_oids(prepared: Prepared) -> list[int]:
        """The declared parameter types, text for those the client left open."""
        declared = list(prepared.param_oids)
        numbers = outside_literals_numbers(prepared.statement.sql)
        count = max(numbers, default=0)
        return declared + [codec.TEXT] * max(0, count - len(declared))

    async def _statement_columns(self, prepared: Prepared) -> list[Column] | None:
        statement = prepared.statement
        if not statement.returns_rows:
            return None
        if statement.kind == Kind.FETCH:
            cursor = self.portals.get(statement.name)
            return None if cursor is None or cursor.answer is None else cursor.answer.columns
        if statement.kind == Kind.ENGINE:
            # Describing must not run (or charge) the query: name the columns as text.
            # Clients that Bind then describe the portal get the exact types. A star's
            # columns are the plan's (planned, not run: nothing is charged).
            names = _projection_names(statement.sql)
            if names is None:
                ask = Ask(
                    statement.sql, self.settings.privacy, self.caller, self.settings.get("timezone")
                )
                planned = await self._off_loop(self.server.door.output_columns, ask)
                names = tuple(name for name, _ in planned or ())
            return [Column(name, codec.TEXT) for name in names or ("?column?",)]
        params = [None] * len(self._param_oids(prepared))
        answer = await self._run(statement, params, self._param_oids(prepared), notify=False)
        return answer.columns

    async def _execute(self, parsed: Any) -> None:
        portal = self._portal(parsed.portal_name)
        answer = await self._materialise(portal)
        self._send_answer(answer, portal, parsed.max_rows, described=True)

    def _close(self, parsed: Any) -> None:
        if parsed.kind == codec.Tags.TARGET_STATEMENT:
            self.prepared.pop(parsed.name, None)
        else:
            self.portals.pop(parsed.name, None)
        self.stream.write(codec.m.make_close_complete())

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise WireError(INVALID_CURSOR_NAME, f'portal "{name}" does not exist')
        return portal

    async def _materialise(self, portal: Portal) -> Answer:
        if portal.answer is None:
            answer = await self._run(
                portal.prepared.statement, portal.params, portal.prepared.param_oids
            )
            self._hold(answer, portal)
            portal.answer = answer
        return portal.answer

    def _hold(self, answer: Answer, portal: Portal | None) -> None:
        """Refuse to keep ``answer`` in a portal or cursor beyond :data:`MAX_HELD_ROWS`
        rows held by this connection: catalog answers are free and up to 100,000 rows
        each, and twenty cursors held 467 MB (a probe, 2026-12-06). A charged answer
        refused here stays in the release cache: asking again is free."""
        held = sum(
            len(p.answer.rows)
            for p in self.portals.values()
            if p.answer is not None and p is not portal
        )
        if held + len(answer.rows) > MAX_HELD_ROWS:
            raise WireError(
                "54000",
                f"this connection would hold {held + len(answer.rows)} rows in open cursors "
                f"and portals; the limit is {MAX_HELD_ROWS}",
                hint="CLOSE the cursors (or Close the portals) already read",
            )

    def _check_room(self, names: dict[str, Any], name: str, what: str) -> None:
        if name not in names and len(names) >= MAX_NAMED:
            raise WireError(
                "54000",
                f"this connection holds {len(names)} {what}; the limit is {MAX_NAMED}",
                hint=f"close (or DEALLOCATE) the {what} no longer used",
            )

    # --- sending --------------------------------------------------------------------
    def _send_answer(
        self, answer: Answer, portal: Portal, max_rows: int, *, described: bool = False
    ) -> None:
        m = codec.m
        for notice in answer.notices:
            self._notice(notice)
        answer.notices = []  # once per answer, however many Executes fetch it
        if answer.columns is None:
            if answer.tag:
                self.stream.write(m.make_command_complete(answer.tag))
            else:
                self.stream.write(m.make_empty_query_response())
            return
        # rows are encoded as the client was told: by the portal's Describe, else by the
        # statement's (a user query's statement Describe says text, without running it)
        columns = answer.columns
        if described:
            columns = portal.described or portal.prepared.described or answer.columns
            if len(columns) != len(answer.columns):
                # The statement's Describe named the columns from its text; rows of
                # another width would be read against it (asyncpg, pgx, pgjdbc's named
                # statements do not describe the portal: a probe, 2026-12-06).
                raise WireError(
                    FEATURE_NOT_SUPPORTED,
                    f"the statement was described with {len(columns)} columns and its "
                    f"answer has {len(answer.columns)}",
                    hint="name the columns in the select list, or describe the portal after Bind",
                )
        formats = portal.formats if described else answer.formats
        if not described:
            self.stream.write(m.make_row_description(_fields(columns, formats)))
        end = len(answer.rows) if max_rows <= 0 else min(len(answer.rows), portal.sent + max_rows)
        for row in answer.rows[portal.sent : end]:
            self.stream.write(m.make_data_row(_encode(row, columns, formats)))
        portal.sent = end
        if end < len(answer.rows):
            self.stream.write(m.make_portal_suspended())
        else:
            self.stream.write(m.make_command_complete(f"{answer.tag} {end}"))

    # --- running statements ---------------------------------------------------------
    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: Awaitable[T] = loop.run_in_executor(self.server.pool, fn, *args)
        return await future

    async def _run(
        self,
        statement: Statement,
        params: Sequence[Any],
        param_oids: Sequence[int],
        *,
        notify: bool = True,
    ) -> Answer:
        kind = statement.kind
        if self.tx == b"E" and kind not in (Kind.COMMIT, Kind.ROLLBACK, Kind.SAVEPOINT):
            raise WireError(
                IN_FAILED_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        if kind == Kind.EMPTY:
            return Answer(None)
        if kind in (Kind.BEGIN, Kind.COMMIT, Kind.ROLLBACK, Kind.SAVEPOINT):
            return self._transaction(statement)
        if kind in (Kind.SET, Kind.RESET, Kind.RESET_ALL, Kind.DISCARD, Kind.NOOP):
            return self._set(statement)
        if kind in (Kind.DECLARE, Kind.FETCH, Kind.MOVE, Kind.CLOSE):
            return await self._cursor(statement, params, param_oids)
        if kind == Kind.DEALLOCATE:
            if statement.tag == "DEALLOCATE ALL":
                self.prepared.clear()
            else:
                self.prepared.pop(statement.name, None)
            return Answer(None, tag=statement.tag)
        if kind == Kind.SHOW:
            return self._show(statement.name)
        if kind == Kind.SHOW_ALL:
            rows = [(k, self.settings.values[k], "") for k in sorted(self.settings.values)]
            rows += [(f"dpsql.{k}", self.settings.privacy.show(k), "") for k in PRIVACY]
            cols = [Column(n, codec.TEXT) for n in ("name", "setting", "description")]
            return Answer(cols, rows, "SHOW")
        if kind == Kind.CATALOG:
            return await self._catalog(statement, params, param_oids)
        return await self._engine(statement, params, param_oids, notify=notify)

    async def _cursor(
        self, statement: Statement, params: Sequence[Any], oids: Sequence[int]
    ) -> Answer:
        """DECLARE runs its query once (one charge at most) into a portal of the cursor's
        name, as PostgreSQL does; FETCH and MOVE page through it; CLOSE drops it."""
        if statement.kind == Kind.DECLARE:
            assert statement.inner is not None
            self._check_room(self.portals, statement.name, "cursors and portals")
            answer = await self._run(statement.inner, params, oids)
            self._hold(answer, self.portals.get(statement.name))
            self.portals[statement.name] = Portal(
                Prepared(statement.inner, list(oids)),
                list(params),
                [1] if statement.binary else [],
                answer=answer,
            )
            return Answer(None, tag=statement.tag, notices=answer.notices)
        if statement.kind == Kind.CLOSE:
            if statement.name:
                self.portals.pop(statement.name, None)
            else:
                self.portals.clear()
            return Answer(None, tag=statement.tag)
        cursor = self.portals.get(statement.name)
        if cursor is None or cursor.answer is None:
            raise WireError(INVALID_CURSOR_NAME, f'cursor "{statement.name}" does not exist')
        rows = cursor.answer.rows
        end = len(rows) if statement.count < 0 else min(len(rows), cursor.sent + statement.count)
        page = rows[cursor.sent : end]
        cursor.sent = end
        if statement.kind == Kind.MOVE:
            return Answer(None, tag=f"MOVE {len(page)}")
        binary = [1] if statement.inner is None and _is_binary(self, statement.name) else []
        return Answer(cursor.answer.columns, page, "FETCH", formats=binary)

    def _transaction(self, statement: Statement) -> Answer:
        kind, tag = statement.kind, statement.tag
        notes: list[Notice] = []
        if kind == Kind.BEGIN:
            if self.tx != b"I":
                notes.append(
                    Notice("WARNING", "25001", "there is already a transaction in progress")
                )
            else:
                self._tx_settings, self._local_settings = self.settings.snapshot(), {}
                self._savepoints = []
            self.tx = b"T"
        elif kind in (Kind.COMMIT, Kind.ROLLBACK):
            if self.tx == b"I":
                notes.append(Notice("WARNING", "25P01", "there is no transaction in progress"))
            if self.tx == b"E":
                tag = "ROLLBACK"
            if self.tx != b"I":
                self._end_settings(rolled_back=tag == "ROLLBACK")
            self.tx = b"I"
        elif kind == Kind.SAVEPOINT:
            self._savepoint(tag, _savepoint_name(statement.sql))
            if tag == "ROLLBACK" and self.tx == b"E":  # ROLLBACK TO SAVEPOINT
                self.tx = b"T"
        return Answer(None, tag=tag, notices=notes)

    def _savepoint(self, tag: str, name: str) -> None:
        """Settings at a savepoint, restored by ``ROLLBACK TO`` it (as PostgreSQL); kept
        past ``RELEASE``. Outside a transaction there is none (PostgreSQL refuses them)."""
        if self.tx == b"I":
            return
        if tag == "SAVEPOINT":
            self._savepoints.append((name, self.settings.snapshot(), dict(self._local_settings)))
            return
        found = [i for i, (n, _, _) in enumerate(self._savepoints) if n == name]
        if not found:
            return
        at = found[-1]
        if tag == "RELEASE":
            del self._savepoints[at:]
            return
        _, snapshot, local = self._savepoints[at]
        with self._reporting_changes():
            self.settings.restore_all(snapshot)
        self._local_settings = dict(local)
        del self._savepoints[at + 1 :]

    def _end_settings(self, *, rolled_back: bool) -> None:
        with self._reporting_changes():
            if rolled_back and self._tx_settings is not None:
                self.settings.restore_all(self._tx_settings)
            else:
                for group, state in self._local_settings.items():
                    self.settings.restore(group, state)
        self._tx_settings, self._local_settings = None, {}
        self._savepoints = []

    @contextlib.contextmanager
    def _reporting_changes(self) -> Iterator[None]:
        """ParameterStatus for each reported setting the block changed (a restore)."""
        before = {name: self.settings.get(name) for name in STARTUP}
        yield
        for name in STARTUP:
            if self.settings.get(name) != before[name]:
                self._report(name)

    def _set(self, statement: Statement) -> Answer:
        kind = statement.kind
        if kind == Kind.SET and statement.local and self.tx == b"I":
            warning = Notice("WARNING", "25P01", "SET LOCAL can only be used in transaction blocks")
            return Answer(None, tag=statement.tag, notices=[warning])
        group = self.settings.group_of(statement.name) if statement.name else ""
        if kind == Kind.SET and statement.local:
            self._local_settings.setdefault(group, self.settings.state(group))
        if kind == Kind.SET:
            self.settings.set(statement.name, statement.value)
            self._report(canonical(statement.name))
            if not statement.local and self.tx != b"I" and group in self._local_settings:
                # a plain SET after SET LOCAL outlives the transaction, as in PostgreSQL
                self._local_settings[group] = self.settings.state(group)
        elif kind == Kind.RESET:
            self.settings.set(statement.name, None)
            self._report(canonical(statement.name))
        elif kind in (Kind.RESET_ALL, Kind.DISCARD):
            self.settings.reset_all()
            if statement.tag == "DISCARD ALL":
                self.prepared.clear()
                self.portals.clear()
        return Answer(None, tag=statement.tag)

    def _report(self, name: str) -> None:
        if name in STARTUP:
            value = self.settings.get(name) or ""
            self.stream.write(codec.m.make_parameter_status(DISPLAY.get(name, name), value))

    def _show(self, name: str) -> Answer:
        key = canonical(name)
        column = DISPLAY.get(key, key)
        if key.startswith("dpsql."):
            short = key[len("dpsql.") :]
            if short in PRIVACY:
                value = self.settings.privacy.show(short)
            elif short == "remaining":
                left = self.server.door.remaining(self.caller)
                value = ", ".join(f"{k}={v:.6g}" for k, v in left.items()) or "n/a"
            elif short == "last_release":
                value = "" if self.last_result is None else release_json(self.last_result)
            else:
                raise unknown(key)
            return Answer([Column(column, codec.TEXT)], [(value,)], "SHOW")
        standard = self.settings.get(key)
        if standard is None:
            raise unknown(key)
        return Answer([Column(column, codec.TEXT)], [(standard,)], "SHOW")

    def facts(self) -> SessionFacts:
        return SessionFacts(
            user=self.caller.name,
            database=self.database,
            version=self.server.version,
            pid=self.pid,
            settings=dict(self.settings.values),
        )

    async def _catalog(
        self, statement: Statement, params: Sequence[Any], oids: Sequence[int]
    ) -> Answer:
        assert statement.tree is not None
        values = catalog_params(params, oids)
        # Free, but not unlimited: each holds a worker for up to catalog_limits.TIMEOUT_S
        # (the Trino door counts its catalog queries the same way).
        self.server.limiter_check(self.caller.name)
        found = await self._off_loop(self.shadow.answer, statement.tree, values, self.facts())
        columns = [Column(n, _duckdb_oid(t)) for n, t in zip(found.names, found.types, strict=True)]
        return Answer(columns, found.rows, "SELECT")

    async def _engine(
        self,
        statement: Statement,
        params: Sequence[Any],
        oids: Sequence[int],
        *,
        notify: bool,
    ) -> Answer:
        search_path = [
            s.strip().strip('"')
            for s in (self.settings.get("search_path") or "").split(",")
            if s.strip().strip('"') not in ("$user", "")
        ]
        sql = engine_sql(
            statement.sql,
            params,
            oids,
            database=self.database,
            search_path=search_path,
            user_tables=self.user_tables,
        )
        self.server.limiter_check(self.caller.name)
        ask = Ask(sql, self.settings.privacy, self.caller, self.settings.get("timezone"))
        try:
            result = await self._off_loop(self.server.door.run, ask)
        except DPSQLError as error:
            raise from_dpsql(error, sql) from None
        except Exception:  # an engine bug: no details to the client, the log has them
            log.exception("engine failure")
            raise WireError(
                INTERNAL_ERROR, "internal error", hint="report this to the operator"
            ) from None
        self.last_result = result
        oids_out = pgtypes.infer_oids(len(result.columns), result.rows)
        if not result.rows:
            # no value to read types from: the plan's (free), not text (a probe, 2026-12-06)
            planned = await self._off_loop(self.server.door.output_columns, ask)
            if planned is not None and len(planned) == len(oids_out):
                oids_out = [_duckdb_oid(t) for _, t in planned]
        # Named as PostgreSQL names them (an unaliased COUNT(*) is "count"), as the
        # statement's Describe named them; a star's columns keep the engine's names.
        names = _projection_names(statement.sql)
        if names is None or len(names) != len(result.columns):
            names = result.columns
        columns = [Column(n, o) for n, o in zip(names, oids_out, strict=True)]
        return Answer(columns, list(result.rows), "SELECT", notices(result) if notify else [])


def _savepoint_name(sql: str) -> str:
    """The savepoint a SAVEPOINT, RELEASE or ROLLBACK TO names (its last word)."""
    words = sql.strip().rstrip(";").split()
    last = words[-1] if words else ""
    return last[1:-1] if last.startswith('"') and last.endswith('"') else last.lower()


def _unreadable(error: SqlglotError) -> WireError:
    first = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    return WireError("42601", f"syntax error: {first}")


def _malformed(error: BaseException) -> WireError:
    """The ErrorResponse for input the codec or the parsers could not read."""
    if isinstance(error, UnicodeDecodeError):
        return WireError("22021", 'invalid byte sequence for encoding "UTF8"')
    if isinstance(error, RecursionError):
        return WireError("54001", "statement is too complex (nesting too deep)")
    if isinstance(error, ValueError) and not isinstance(error, struct.error):
        return WireError("22P02", f"invalid input: {str(error)[:200]}")
    return WireError(PROTOCOL_VIOLATION, "malformed message")


def _is_binary(connection: Connection, name: str) -> bool:
    cursor = connection.portals.get(name)
    return bool(cursor and cursor.formats == [1])


def _fields(columns: list[Column], formats: list[int]) -> list[codec.FieldSpec]:
    return [
        codec.FieldSpec(name=c.name, oid=c.oid, format_code=_format(formats, i))
        for i, c in enumerate(columns)
    ]


def _format(formats: list[int], index: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[index]


def _encode(row: Sequence[Any], columns: list[Column], formats: list[int]) -> list[bytes | None]:
    out: list[bytes | None] = []
    for i, value in enumerate(row):
        if value is None:
            out.append(None)
            continue
        oid = columns[i].oid if i < len(columns) else codec.TEXT
        if _format(formats, i) == 1:
            try:
                out.append(codec.encode_binary(oid, value))
            except (ValueError, TypeError, OverflowError) as error:
                raise WireError("22P03", f"cannot send column {i + 1} in binary: {error}") from None
        else:
            out.append(codec.encode_text(oid, value).encode("utf-8"))
    return out


@functools.lru_cache(maxsize=1024)
def _projection_names(sql: str) -> tuple[str, ...] | None:
    """Output column names of a SELECT, as PostgreSQL would name them (no execution);
    None where a star leaves them to the plan. Memoised: every answer of the door is
    named so, and clients send the same text again and again (statements._query)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, dialect="postgres")
    except sqlglot.errors.SqlglotError:  # (TokenError too)
        return ("?column?",)
    if not isinstance(tree, exp.Query):
        return ("?column?",)
    names: list[str] = []
    for item in tree.selects:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star):
            return None
        if isinstance(item, exp.Alias):
            names.append(item.alias)
        elif isinstance(item, exp.Column):
            names.append(item.name)
        elif isinstance(item, exp.Func):
            names.append(item.sql_name().lower())
        else:
            names.append("?column?")
    return tuple(names)


def _startup_options(options: str) -> list[tuple[str, str]]:
    """``options=-c name=value -c ...`` from the startup packet (libpq's PGOPTIONS)."""
    out = []
    tokens = options.replace("--", "-c ").split()
    for i, token in enumerate(tokens):
        if token == "-c" and i + 1 < len(tokens) and "=" in tokens[i + 1]:
            name, _, value = tokens[i + 1].partition("=")
            if canonical(name) in STANDARD or canonical(name).startswith("dpsql."):
                out.append((name, value))
    return out
