"""A real `dpsql pg` on a free 127.0.0.1 port over a small generated dataset, and the
connection strings real clients use to reach it."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxy.pgwire.auth import scram_verifier
from tests.server.conftest import DPSQL, free_port, write_policy

ANA = ("ana", "key-ana-0123456789abcdef")  # cleartext password (loopback)
SAM = ("sam", "key-sam-0123456789abcdef")  # SCRAM-SHA-256
NARROW = ("narrow", "key-narrow-0123456789abc")  # may read users and regions only


def pg_policy(folder: Path, db: Path, *, cap: float = 4.0, extra_proxy: str = "") -> Path:
    """The demo policy with the HTTP tests' analysts plus a SCRAM analyst with
    per-analyst defaults."""
    path = write_policy(folder, db, cap=cap, extra_proxy=extra_proxy)
    text = path.read_text()
    name, key = SAM
    text += (
        f'\n[analysts.{name}]\nkey_sha256 = "{hashlib.sha256(key.encode()).hexdigest()}"\n'
        f'scram_sha256 = "{scram_verifier(key)}"\ndefaults = {{ epsilon = 0.25 }}\n'
    )
    path.write_text(text)
    return path


@dataclass
class PgDoor:
    host: str
    port: int
    policy: Path
    log: Path
    process: subprocess.Popen[bytes]

    def dsn(self, who: tuple[str, str] = ANA, **extra: str) -> str:
        parts = {
            "host": self.host,
            "port": str(self.port),
            "dbname": "dpsql",
            "user": who[0],
            "password": who[1],
            "sslmode": "disable",
            "connect_timeout": "10",
            **extra,
        }
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def url(self, driver: str, who: tuple[str, str] = ANA) -> str:
        return f"postgresql+{driver}://{who[0]}:{who[1]}@{self.host}:{self.port}/dpsql"

    def ledger(self) -> Path:
        return self.policy.with_name("ledger.sqlite")


def start_door(policy: Path, *args: str, env: dict[str, str] | None = None) -> PgDoor:
    port = free_port()
    log = policy.with_name(f"pg-{port}.log")
    process = subprocess.Popen(
        [str(DPSQL), "pg", "--policy", str(policy), "--port", str(port), *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "DPSQL_RATE_LIMIT": "off", **(env or {})},
        start_new_session=True,
    )
    door = PgDoor("127.0.0.1", port, policy, log, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dpsql pg exited early:\n{log.read_text()}")
        if "PostgreSQL door" in log.read_text():
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return door
        time.sleep(0.1)
    stop_door(door)
    raise RuntimeError(f"dpsql pg did not start:\n{log.read_text()}")


def stop_door(door: PgDoor) -> None:
    if door.process.poll() is None:
        os.killpg(door.process.pid, signal.SIGTERM)
        try:
            door.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(door.process.pid, signal.SIGKILL)
            door.process.wait(timeout=15)


@pytest.fixture(scope="session")
def pg_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sample_data.generate import generate

    return generate(
        tmp_path_factory.mktemp("pgdata") / "usage.duckdb", people=300, prompts=3000, seed=5
    )


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory, pg_dataset: Path) -> Iterator[PgDoor]:
    policy = pg_policy(tmp_path_factory.mktemp("pg"), pg_dataset, cap=1000.0)
    started = start_door(policy)
    try:
        yield started
    finally:
        stop_door(started)
