"""A real `dpsql serve` on a free 127.0.0.1 port, over a small generated dataset."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from sample_data.generate import generate
from tests.policies import fixed_caps

REPO = Path(__file__).resolve().parents[2]
DPSQL = Path(sys.executable).with_name("dpsql")

KEYS = {
    "ana": ("analyst", "key-ana-0123456789abcdef", None),
    "bob": ("analyst", "key-bob-0123456789abcdef", None),
    "narrow": ("analyst", "key-narrow-0123456789abc", ["users", "regions"]),
    "adm": ("admin", "key-adm-0123456789abcdef", None),
}
SQL = "SELECT region, COUNT(*) AS n FROM users GROUP BY region"


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name][1]}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_policy(folder: Path, db: Path, *, cap: float = 4.0, extra_proxy: str = "") -> Path:
    text = fixed_caps((REPO / "sample_data" / "policy.toml").read_text())
    for old, new in (
        ('duckdb = "usage.duckdb"', f'duckdb = "{db}"'),
        ('path = "../state/ledger.sqlite"', f'path = "{folder / "ledger.sqlite"}"'),
        ("epsilon_cap = 4.0", f"epsilon_cap = {cap!r}"),
        ('mechanism = "gaussian"', f'mechanism = "gaussian"\n{extra_proxy}'),
    ):
        assert old in text, f"the sample policy no longer contains {old!r}"
        text = text.replace(old, new)
    for name, (role, key, tables) in KEYS.items():
        text += f'\n[analysts.{name}]\nkey_sha256 = "{hashlib.sha256(key.encode()).hexdigest()}"\n'
        text += f'role = "{role}"\n'
        if tables is not None:
            text += "tables = [" + ", ".join(f'"{t}"' for t in tables) + "]\n"
    path = folder / "policy.toml"
    path.write_text(text)
    return path


@dataclass
class Server:
    url: str
    policy: Path
    log: Path
    process: subprocess.Popen[bytes]

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0, **kwargs)  # type: ignore[arg-type]


def start_server(policy: Path, *, workers: int = 1, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    log = policy.with_name(f"server-{port}.log")
    process = subprocess.Popen(
        [
            str(DPSQL),
            "serve",
            "--policy",
            str(policy),
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,  # one process group: stopping it stops every worker
    )
    server = Server(f"http://127.0.0.1:{port}", policy, log, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()}")
        # Every worker logs "started" once its engine is open.
        if log.read_text().count('"event":"started"') >= workers:
            try:
                if httpx.get(server.url + "/healthz", timeout=2).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
        time.sleep(0.1)
    stop_server(server)
    raise RuntimeError(f"server did not start:\n{log.read_text()}")


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=15)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(
        tmp_path_factory.mktemp("data") / "usage.duckdb", people=300, prompts=3000, seed=5
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("server")
    policy = write_policy(folder, dataset, extra_proxy="max_sql_length = 3000")
    srv = start_server(policy)
    try:
        yield srv
    finally:
        stop_server(srv)
