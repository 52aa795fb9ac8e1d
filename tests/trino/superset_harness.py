"""Apache Superset in its own virtual environment, started headless on 127.0.0.1.

Superset pins its own SQLAlchemy, pandas and Flask stack, so it never enters dpsql's
environment: ``ensure_venv`` builds ``build/superset-venv`` once with pip (about 30 s;
a stamp records the requirements). 6.1.0 needs two undeclared dependencies (``rich``,
``cachetools``) and ``flask-caching<2.5``. ``start_superset`` creates a fresh SQLite
metadata database, an admin user and the default roles, then serves with Flask's
server; ``SupersetApi`` logs in and sends the CSRF token the REST API wants.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.server.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "build" / "superset-venv"
REQUIREMENTS = (
    "apache-superset==6.1.0",
    "flask-caching<2.5",
    "rich",
    "cachetools",
    "trino[sqlalchemy]>=0.330,<1",
)
ADMIN = ("admin", "admin-password-for-tests")


def python() -> Path:
    return VENV / "bin" / "python"


def ensure_venv() -> Path:
    stamp = VENV / ".dpsql-requirements"
    wanted = "\n".join(REQUIREMENTS)
    if stamp.exists() and stamp.read_text() == wanted and python().exists():
        return VENV
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    stamp.write_text(wanted)
    return VENV


@dataclass
class Superset:
    url: str
    home: Path
    log: Path
    process: subprocess.Popen[bytes]


def _cli(env: Mapping[str, str], *args: str, log: Path) -> None:
    with log.open("ab") as out:
        subprocess.run(
            [str(VENV / "bin" / "superset"), *args],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=600,
        )


def start_superset(folder: Path, *, extra_env: Mapping[str, str] | None = None) -> Superset:
    ensure_venv()
    home = folder / "superset-home"
    home.mkdir(parents=True, exist_ok=True)
    config = folder / "superset_config.py"
    config.write_text(
        "\n".join(
            [
                'SECRET_KEY = "dpsql-test-only-secret-key-0123456789abcdef0123456789"',
                f'SQLALCHEMY_DATABASE_URI = "sqlite:///{home / "superset.db"}?check_same_thread=false"',
                "TALISMAN_ENABLED = False",
                "PREVENT_UNSAFE_DB_CONNECTIONS = False",
                "FEATURE_FLAGS = {}",
                # no result caching: every chart request reaches dpsql
                'DATA_CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}',
                "",
            ]
        )
    )
    env = {
        **os.environ,
        "SUPERSET_CONFIG_PATH": str(config),
        "SUPERSET_HOME": str(home),
        "FLASK_APP": "superset",
        **(extra_env or {}),
    }
    log = folder / "superset.log"
    _cli(env, "db", "upgrade", log=log)
    _cli(
        env,
        "fab", "create-admin", "--username", ADMIN[0], "--firstname", "A", "--lastname", "D",
        "--email", "admin@example.com", "--password", ADMIN[1],
        log=log,
    )  # fmt: skip
    _cli(env, "init", log=log)
    port = free_port()
    process = subprocess.Popen(
        [str(VENV / "bin" / "superset"), "run", "-h", "127.0.0.1", "-p", str(port),
         "--with-threads"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    superset = Superset(f"http://127.0.0.1:{port}", home, log, process)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"superset exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(superset.url + "/health", timeout=2).status_code == 200:
                return superset
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    stop_superset(superset)
    raise RuntimeError(f"superset did not start:\n{log.read_text()[-3000:]}")


def stop_superset(superset: Superset) -> None:
    if superset.process.poll() is None:
        os.killpg(superset.process.pid, signal.SIGTERM)
        try:
            superset.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(superset.process.pid, signal.SIGKILL)
            superset.process.wait(timeout=20)


class SupersetApi:
    """Superset's REST API as the frontend uses it: a bearer token, the session cookie
    and the CSRF token on every write."""

    def __init__(self, url: str):
        self.client = httpx.Client(base_url=url, timeout=300.0)
        r = self.client.post(
            "/api/v1/security/login",
            json={"username": ADMIN[0], "password": ADMIN[1], "provider": "db", "refresh": True},
        )
        r.raise_for_status()
        self.client.headers["Authorization"] = f"Bearer {r.json()['access_token']}"
        r = self.client.get("/api/v1/security/csrf_token/")
        r.raise_for_status()
        self.client.headers["X-CSRFToken"] = r.json()["result"]
        self.client.headers["Referer"] = url

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def post(self, path: str, body: Mapping[str, Any]) -> httpx.Response:
        return self.client.post(path, json=dict(body))

    def put(self, path: str, body: Mapping[str, Any] | None = None) -> httpx.Response:
        return self.client.put(path, json=dict(body or {}))

    def close(self) -> None:
        self.client.close()
