"""A real `dpsql serve` over HTTPS (self-signed certificate made here with the openssl
CLI) for the trino client tests, and helpers to read its budget."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from proxy.server.app import create_app
from proxy.server.settings import Settings
from tests.server.conftest import DPSQL, KEYS, dataset, free_port, write_policy

trino = pytest.importorskip("trino", reason="the trino client is in the [bi] extra")

__all__ = ["dataset"]  # the shared generated database, as a fixture here too

PAGE_ROWS = 3  # small pages, so answers span several nextUri pages


@dataclass(frozen=True)
class TlsServer:
    host: str
    port: int
    cert: Path
    policy: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def client(self) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.cert))
        return httpx.Client(base_url=self.url, verify=context, timeout=60.0)

    def connect(self, name: str = "ana", **kwargs: object) -> trino.dbapi.Connection:
        from trino.auth import BasicAuthentication

        return trino.dbapi.connect(
            host=self.host,
            port=self.port,
            user=name,
            catalog="dpsql",
            schema="main",
            http_scheme="https",
            auth=BasicAuthentication(name, KEYS[name][1]),
            verify=str(self.cert),
            **kwargs,
        )

    def spent(self, name: str = "adm") -> float:
        with self.client() as c:
            r = c.get("/v1/budget", headers={"Authorization": f"Bearer {KEYS[name][1]}"})
            r.raise_for_status()
            return float(r.json()["populations"][0]["epsilon_spent"])


def make_certificate(folder: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 (key beside it), valid for two days."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip(
            "the openssl CLI is needed to make a test certificate (apt-get install openssl)"
        )
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert


def start_tls_server(policy: Path, cert: Path, env: dict[str, str] | None = None) -> TlsServer:
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
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(cert.with_name("key.pem")),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "DPSQL_RATE_LIMIT": "off", **(env or {})},
        start_new_session=True,
    )
    server = TlsServer("127.0.0.1", port, cert, policy, log, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()}")
        if '"event":"started"' in log.read_text():
            try:
                with server.client() as c:
                    if c.get("/healthz").status_code == 200:
                        return server
            except httpx.TransportError:
                pass
        time.sleep(0.1)
    stop(server)
    raise RuntimeError(f"server did not start:\n{log.read_text()}")


def stop(server: TlsServer) -> None:
    if server.process.poll() is None:
        os.killpg(server.process.pid, 15)
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, 9)
            server.process.wait(timeout=15)


@pytest.fixture(autouse=True)
def _trust_the_test_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    # requests prefers REQUESTS_CA_BUNDLE over a session's own `verify`: drop it so the
    # clients trust the certificate they are given.
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[TlsServer]:
    folder = tmp_path_factory.mktemp("trino")
    policy = write_policy(folder, dataset, cap=50.0)
    # bob's sessions default to ε = 0.2 (the policy's per-analyst defaults)
    text = policy.read_text().replace(
        "[analysts.bob]\n", "[analysts.bob]\ndefaults = { epsilon = 0.2 }\n"
    )
    policy.write_text(text)
    server = start_tls_server(
        policy, make_certificate(folder), env={"DPSQL_TRINO_PAGE_ROWS": str(PAGE_ROWS)}
    )
    try:
        yield server
    finally:
        stop(server)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Iterator[TestClient]:
    """The app in process, rate limit off, errors answered as the server would (the
    door reviews' probes: a 500 must show as a 500, not raise in the test)."""
    folder = tmp_path_factory.mktemp("trino-in-process")
    app = create_app(Settings(policy=write_policy(folder, dataset, cap=50.0), rate_limit="off"))
    with TestClient(app, base_url="https://127.0.0.1", raise_server_exceptions=False) as c:
        yield c
