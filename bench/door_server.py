"""One `dpsql serve` for the door benchmarks: HTTPS (the Trino door and /v1/query) and
the PostgreSQL door (TLS) in one process, on a private copy of the demo policy.

The policy copy has its own ledger in a temporary folder, a cap that never runs out and
one analyst whose key the benchmarks send; the rate limit is off. ``source`` runs the
server from another checkout of the repository (an exported older commit), so one run
can time the code before and after a change side by side on the same data.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
USER, KEY = "bench", "bench-door-key-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_policy(folder: Path, db: Path, user: str = USER, key: str = KEY) -> Path:
    """The demo policy on ``db`` with its ledger in ``folder`` and analyst ``user``."""
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{folder / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
    digest = hashlib.sha256(key.encode()).hexdigest()
    text += f'\n[analysts.{user}]\nkey_sha256 = "{digest}"\nrole = "analyst"\n'
    path = folder / "policy.toml"
    path.write_text(text)
    return path


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (Trino clients send keys over HTTPS only)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        sys.exit("the openssl CLI is needed (apt-get install openssl)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def export_commit(rev: str, folder: Path) -> Path:
    """The repository's tree at ``rev`` in ``folder`` (git archive; no work tree)."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


@dataclass
class DoorServer:
    """A running `dpsql serve --tls-cert ... --pg-port ...`; stop() ends its group."""

    process: subprocess.Popen[bytes]
    url: str
    pg_port: int
    cert: Path
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start(
    policy: Path, cert: Path, key: Path, log: Path, *, source: Path | None = None
) -> DoorServer:
    """Serve ``policy`` with one worker; ``source``: run that checkout's code instead."""
    port, pg_port = free_port(), free_port()
    env = {**os.environ, "DPSQL_RATE_LIMIT": "off", "DPSQL_LOG_LEVEL": "WARNING"}
    if source is not None:
        # The venv's editable install finds this checkout only after PYTHONPATH.
        env["PYTHONPATH"] = str(source)
    process = subprocess.Popen(
        [sys.executable, "-c", "from proxy.cli import main; raise SystemExit(main())",
         "serve", "--policy", str(policy), "--port", str(port), "--pg-port", str(pg_port),
         "--tls-cert", str(cert), "--tls-key", str(key), "--rate-limit", "off"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True, env=env,
        cwd=str(source or ROOT),
    )  # fmt: skip
    server = DoorServer(process, f"https://127.0.0.1:{port}", pg_port, cert, log)
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise SystemExit(f"dpsql serve did not start:\n{log.read_text()}")
        try:
            if (
                "PostgreSQL door" in log.read_text()
                and httpx.get(f"{server.url}/healthz", verify=str(cert), timeout=2).status_code
                == 200
            ):
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
