"""The listener in-process, over a real engine: a slow query does not block other
connections, CancelRequest, TLS, and the cleartext-password rule."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.pgwire import codec
from proxy.pgwire.adapter import Ask, EngineDoor
from proxy.pgwire.auth import Gate
from proxy.pgwire.server import PgServer, PgSettings, _loopback
from proxy.pgwire.sqlstate import WireError
from proxy.policy import load_policy
from proxy.result import Result
from tests.pgwire.conftest import ANA, pg_policy

psycopg = pytest.importorskip("psycopg", reason="the pg extra (psycopg) is not installed")

SLOW_S = 2.0


class SlowDoor(EngineDoor):
    """The real engine behind a fixed delay, for queries that mention 'slow_marker'."""

    def run(self, ask: Ask) -> Result:
        if "slow_marker" in ask.sql:
            time.sleep(SLOW_S)
        return super().run(ask)


@contextmanager
def in_process(door: EngineDoor, settings: PgSettings) -> Iterator[PgServer]:
    loop = asyncio.new_event_loop()
    server = PgServer(door, settings)
    started = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


@pytest.fixture(scope="module")
def slow_door(tmp_path_factory: pytest.TempPathFactory, pg_dataset: Path) -> Iterator[SlowDoor]:
    policy = pg_policy(tmp_path_factory.mktemp("pg-inproc"), pg_dataset, cap=1000.0)
    door = SlowDoor(Engine(load_policy(policy)))
    yield door
    door.close()


def dsn(server: PgServer, **extra: str) -> str:
    parts = {
        "host": "127.0.0.1",
        "port": str(server.port),
        "dbname": "dpsql",
        "user": ANA[0],
        "password": ANA[1],
        "sslmode": "disable",
        **extra,
    }
    return " ".join(f"{k}={v}" for k, v in parts.items())


SLOW_SQL = "SELECT COUNT(*) AS n FROM users WHERE region <> 'slow_marker' AND age > {}"


def test_slow_query_blocks_no_other_connection_and_cancel(slow_door: SlowDoor) -> None:
    with in_process(slow_door, PgSettings(port=0, rate_limit="off")) as server:
        slow = psycopg.connect(dsn(server), autocommit=True)
        fast = psycopg.connect(dsn(server), autocommit=True)
        outcome: dict[str, object] = {}

        def run_slow() -> None:
            start = time.monotonic()
            try:
                slow.execute(SLOW_SQL.format(20)).fetchall()
                outcome["slow"] = "answered"
            except psycopg.errors.QueryCanceled as error:
                outcome["slow"] = error.diag.sqlstate
            outcome["slow_s"] = time.monotonic() - start

        thread = threading.Thread(target=run_slow)
        thread.start()
        time.sleep(0.3)
        start = time.monotonic()
        rows = fast.execute("SELECT region, COUNT(*) AS n FROM users GROUP BY region").fetchall()
        fast_s = time.monotonic() - start
        assert len(rows) == 4
        assert fast_s < SLOW_S / 2, "a slow query held up another connection"
        # a CancelRequest on a new socket with the backend key (cancel_safe waits without
        # holding the GIL, which this in-process server needs)
        slow.cancel_safe(timeout=10)
        thread.join(30)
        assert outcome["slow"] == "57014"
        assert float(str(outcome["slow_s"])) < SLOW_S
        # the connection survives the cancel; the engine finished in its thread, so the
        # query it charged for is answered from the cache, free
        time.sleep(SLOW_S)
        slow.execute(SLOW_SQL.format(20)).fetchall()
        shown = slow.execute("SHOW dpsql.last_release").fetchone()
        assert shown is not None and '"cached": true' in shown[0]
        slow.close()
        fast.close()


class _Writer:
    """What PgStream needs of an asyncio.StreamWriter, recording each socket write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    async def drain(self) -> None:
        return None


def test_replies_leave_in_one_write_at_drain() -> None:
    writer = _Writer()
    stream = codec.PgStream(asyncio.StreamReader(), writer)  # type: ignore[arg-type]
    stream.write(codec.m.make_parse_complete())
    stream.write(codec.m.make_bind_complete())
    stream.write(codec.m.make_ready_for_query(b"I"))
    assert writer.writes == []
    asyncio.run(stream.drain())
    assert writer.writes == [
        codec.m.make_parse_complete()
        + codec.m.make_bind_complete()
        + codec.m.make_ready_for_query(b"I")
    ]
    asyncio.run(stream.drain())  # nothing buffered: no empty write
    assert len(writer.writes) == 1


def test_pipeline_mode_gets_its_replies_at_sync(slow_door: SlowDoor) -> None:
    """psycopg's pipeline sends several extended batches before one Sync; replies are
    buffered until Sync (as PostgreSQL does) and every query is answered."""
    with (
        in_process(slow_door, PgSettings(port=0, rate_limit="off")) as server,
        psycopg.connect(dsn(server), autocommit=True) as conn,
    ):
        with conn.pipeline() as pipeline:
            first = conn.execute("SELECT region, COUNT(*) AS n FROM users GROUP BY region")
            second = conn.execute(
                "SELECT COUNT(*) AS n FROM users WHERE age > %s", (30,), prepare=False
            )
            pipeline.sync()
            assert len(first.fetchall()) == 4
            assert len(second.fetchall()) == 1
        # the connection is usable after the pipeline
        assert (
            len(conn.execute("SELECT region, COUNT(*) AS n FROM users GROUP BY region").fetchall())
            == 4
        )


def _self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.mark.skipif(
    subprocess.run(["which", "openssl"], capture_output=True).returncode != 0,
    reason="openssl is needed to make a test certificate",
)
def test_tls(slow_door: SlowDoor, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    settings = PgSettings(port=0, tls_cert=cert, tls_key=key, rate_limit="off")
    with in_process(slow_door, settings) as server:
        with psycopg.connect(dsn(server, sslmode="require")) as conn:
            assert conn.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(dsn(server, sslmode="disable")) as conn:
            assert not conn.pgconn.ssl_in_use  # loopback: cleartext is still allowed
    with (
        in_process(slow_door, PgSettings(port=0, rate_limit="off")) as server,
        pytest.raises(psycopg.OperationalError),
    ):
        psycopg.connect(dsn(server, sslmode="require"))  # no certificate: SSL refused


def test_cleartext_password_refused_off_loopback(slow_door: SlowDoor) -> None:
    assert _loopback(("127.0.0.1", 5433)) and _loopback(("::1", 5433, 0, 0))
    assert not _loopback(("192.0.2.10", 5433))

    async def attempt() -> tuple[WireError, bytes]:
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        peer_reader, peer_writer = await asyncio.open_connection(sock=theirs)
        gate = Gate(slow_door.policy)
        with pytest.raises(WireError) as refused:
            await gate.authenticate(codec.PgStream(reader, writer), ANA[0], secure=False)
        writer.close()
        sent = await peer_reader.read()  # nothing was asked of the client
        peer_writer.close()
        return refused.value, sent

    error, sent = asyncio.run(attempt())
    assert error.sqlstate == "28000" and error.severity == "FATAL"
    assert "neither TLS nor loopback" in error.message
    assert sent == b""
