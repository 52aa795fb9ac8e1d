"""The PostgreSQL v3 listener: startup (SSLRequest, TLS, CancelRequest), authentication,
then one :class:`~proxy.pgwire.connection.Connection` per client.

One asyncio loop accepts and speaks the protocol; engine and catalog work runs in a
thread pool, so one slow query never blocks the other connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import ssl
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from proxy.errors import DPSQLError
from proxy.pgwire import codec
from proxy.pgwire.adapter import EngineDoor
from proxy.pgwire.auth import Gate
from proxy.pgwire.connection import Connection
from proxy.pgwire.session_settings import version_string
from proxy.pgwire.shadow import ShadowCatalog
from proxy.pgwire.sqlstate import (
    ADMIN_SHUTDOWN,
    PROTOCOL_VIOLATION,
    SQLSTATES,
    WireError,
)
from proxy.server.auth import Caller, RateLimiter
from proxy.server.logs import PGWIRE_LOGGER

log = logging.getLogger(PGWIRE_LOGGER)

PROTOCOL_3 = 3 << 16
DEFAULT_PORT = 5433
# Startup, TLS and authentication together (PostgreSQL's authentication_timeout is
# 60 s): a peer that stalls before it is an analyst holds a connection no longer.
STARTUP_TIMEOUT_S = 60.0
# After a FATAL before authentication: how long, and how much input, is read and
# dropped before the socket closes (see PgServer._fatal).
LINGER_S = 1.0
LINGER_BYTES = 4 << 20


@dataclass(frozen=True)
class PgSettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    tls_cert: Path | None = None
    tls_key: Path | None = None
    threads: int = 16
    rate_limit: str = "50/second;2000/minute"  # per analyst, like the HTTP door
    dpsql_version: str = "0.1.0"


def _tls_context(settings: PgSettings) -> ssl.SSLContext | None:
    if settings.tls_cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(settings.tls_cert), str(settings.tls_key or settings.tls_cert))
    return context


def _loopback(peer: object) -> bool:
    if isinstance(peer, tuple) and peer:
        try:
            return ipaddress.ip_address(str(peer[0]).split("%")[0]).is_loopback
        except ValueError:
            return False
    return isinstance(peer, str)  # a Unix socket path


class PgServer:
    def __init__(self, door: EngineDoor, settings: PgSettings):
        self.door = door
        self.settings = settings
        self.version = version_string(settings.dpsql_version)
        self.pool = ThreadPoolExecutor(settings.threads, thread_name_prefix="dpsql-pg")
        self.tls = _tls_context(settings)
        self.gate = Gate(door.policy)
        self.limiter = RateLimiter(settings.rate_limit)
        self.closing = False
        self.user_table_keys = frozenset(door.all_table_keys())
        self._shadows: dict[frozenset[str], ShadowCatalog] = {}
        self._shadows_guard = threading.Lock()
        self._connections: dict[int, Connection] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._next_pid = 1000

    # --- shared state ---------------------------------------------------------------
    def shadow_for(self, caller: Caller) -> ShadowCatalog:
        with self._shadows_guard:
            shadow = self._shadows.get(caller.tables)
            if shadow is None:
                shadow = ShadowCatalog(self.door.visible_tables(caller))
                self._shadows[caller.tables] = shadow
            return shadow

    def limiter_check(self, analyst: str) -> None:
        try:
            self.limiter.check(analyst)
        except DPSQLError as error:
            raise WireError(SQLSTATES[error.code], error.message, hint=error.hint) from None

    # --- listening ------------------------------------------------------------------
    async def start(self) -> asyncio.Server:
        self._server = await asyncio.start_server(
            self._accepted, self.settings.host, self.settings.port
        )
        return self._server

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        self.closing = True
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections.values()):
            connection.stream.write(
                codec.m.make_error_response(
                    WireError(
                        ADMIN_SHUTDOWN,
                        "terminating connection due to administrator command",
                        severity="FATAL",
                    ).fields()
                )
            )
            connection.stream.flush()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        self.pool.shutdown(wait=True, cancel_futures=True)
        for shadow in self._shadows.values():
            shadow.close()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        stream = codec.PgStream(reader, writer)
        try:
            await self._session(stream, writer)
        except (codec.ConnectionClosed, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            if task is not None:
                self._handlers.discard(task)
            with contextlib.suppress(Exception):  # the transport may already be gone
                writer.close()

    async def _session(self, stream: codec.PgStream, writer: asyncio.StreamWriter) -> None:
        try:
            connection = await asyncio.wait_for(self._handshake(stream, writer), STARTUP_TIMEOUT_S)
        except TimeoutError:
            # PostgreSQL's authentication_timeout: an unauthenticated peer holds no
            # connection open for longer; it is closed without a reply, as there.
            log.info("startup or authentication not finished within %s s", STARTUP_TIMEOUT_S)
            return
        except codec.BadLength as error:
            await self._fatal(stream, WireError(PROTOCOL_VIOLATION, str(error), severity="FATAL"))
            return
        if connection is None:
            return
        self._connections[connection.pid] = connection
        try:
            await connection.greet()
            await connection.serve()
        except codec.BadLength as error:
            # PostgreSQL closes a connection whose message announces an invalid length
            await self._fatal(stream, WireError(PROTOCOL_VIOLATION, str(error), severity="FATAL"))
        finally:
            self._connections.pop(connection.pid, None)

    async def _handshake(
        self, stream: codec.PgStream, writer: asyncio.StreamWriter
    ) -> Connection | None:
        """Startup and authentication: the connection, or None once refused."""
        tls = False
        # SSLRequest and GSSENCRequest, each at most once and in either order, as
        # PostgreSQL: libpq with gssencmode=prefer sends SSLRequest after a refused
        # GSSENCRequest. After TLS no GSS encryption is offered; a repeat is refused below.
        negotiated: set[int] = set()
        code, payload = await stream.read_startup_packet()
        while code in (codec.SSL_REQUEST_CODE, codec.GSSENC_REQUEST_CODE) and (
            code not in negotiated
        ):
            negotiated.add(code)
            if code == codec.SSL_REQUEST_CODE and self.tls is not None:
                stream.write(b"S")
                await stream.drain()
                await writer.start_tls(self.tls)
                tls = True
                negotiated.add(codec.GSSENC_REQUEST_CODE)
            else:
                stream.write(b"N")
                await stream.drain()
            code, payload = await stream.read_startup_packet()
        if code == codec.CANCEL_REQUEST_CODE:
            if len(payload) == 8:
                pid, secret = codec.m.parse_cancel_request(payload)
                target = self._connections.get(pid)
                if target is not None and target.secret == secret:
                    target.cancel()
            return None
        if code >> 16 != 3:
            await self._fatal(
                stream,
                WireError(
                    PROTOCOL_VIOLATION,
                    f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}",
                    severity="FATAL",
                ),
            )
            return None
        try:
            startup = codec.m.parse_startup_message(payload)
        except ValueError:  # a missing terminator, or names that are not UTF-8
            await self._fatal(
                stream,
                WireError(PROTOCOL_VIOLATION, "invalid startup packet layout", severity="FATAL"),
            )
            return None
        user = startup.get("user", "")
        secure = tls or _loopback(writer.get_extra_info("peername"))
        try:
            caller = await self.gate.authenticate(stream, user, secure=secure)
            pid = self._pid()
            # the cancel key: opaque random bytes, never part of a released value
            secret = int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF
            return Connection(self, stream, caller, startup, pid, secret)
        except WireError as error:
            if error.severity != "FATAL":
                error = WireError(error.sqlstate, error.message, hint=error.hint, severity="FATAL")
            await self._fatal(stream, error)
            return None

    def _pid(self) -> int:
        self._next_pid += 1
        return self._next_pid

    @staticmethod
    async def _fatal(stream: codec.PgStream, error: WireError) -> None:
        """The FATAL of the startup phase, then a lingering close: the client may still be
        sending (an oversized startup packet), and closing over unread input resets the
        connection, which can discard the error before the client reads it."""
        stream.write(codec.m.make_error_response(error.fields()))
        await stream.drain()
        if stream.writer.can_write_eof():
            stream.writer.write_eof()
        discarded = 0
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(LINGER_S):
                while discarded < LINGER_BYTES:
                    chunk = await stream.reader.read(65536)
                    if not chunk:
                        break
                    discarded += len(chunk)


def run(
    policy_path: str,
    settings: PgSettings,
    *,
    ready: threading.Event | None = None,
    stop_signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM),
) -> None:
    """Serve until a stop signal (or until ``stop_pg`` is called from another thread)."""
    door = EngineDoor.open(policy_path)
    try:
        asyncio.run(_main(door, settings, ready, tuple(stop_signals)))
    finally:
        door.close()


_STOP: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}


async def _main(
    door: EngineDoor,
    settings: PgSettings,
    ready: threading.Event | None,
    stop_signals: tuple[int, ...],
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in stop_signals:
        loop.add_signal_handler(sig, stop.set)
    _STOP["current"] = (loop, stop)
    server = PgServer(door, settings)
    await server.start()
    print(
        f"dpsql PostgreSQL door on {settings.host}:{server.port} "
        f"(TLS {'on' if server.tls else 'off'}): "
        f'psql "postgresql://ANALYST@{settings.host}:{server.port}/dpsql"',
        flush=True,
    )
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        await server.close()


def stop_pg() -> None:
    """Stop a door started with :func:`run` in another thread of this process."""
    found = _STOP.get("current")
    if found is not None:
        loop, event = found
        loop.call_soon_threadsafe(event.set)
