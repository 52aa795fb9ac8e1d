"""A private PostgreSQL cluster for the engine tests and bench/scale.py.

``initdb`` and ``pg_ctl`` from Debian's packages (on PATH or in
/usr/lib/postgresql/<version>/bin) build a cluster in a temporary directory and start
it on a free 127.0.0.1 port, its socket inside that directory. ``initdb`` will not run
as root, so under root (CI) the cluster belongs to a system user ``dpsqltest``, created
with ``useradd`` the first time. A sitter process stops the server and removes the
directory when the process that started it ends, however it ends (it waits for EOF on
a pipe only that process holds).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

OS_USER = "dpsqltest"
SUPERUSER = "postgres"
READER = "dpsql_reader"  # SELECT only: what an operator should give dpsql

_SITTER = r"""
import os, shutil, subprocess, sys
pg_ctl, data, root, user = sys.argv[1:5]
sys.stdin.buffer.read()
subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], user=user or None,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
shutil.rmtree(root, ignore_errors=True)
"""


class NoPostgres(RuntimeError):
    """No PostgreSQL binaries here, or the cluster would not start."""


def binaries() -> Path | None:
    found = shutil.which("pg_ctl")
    dirs = [Path(os.path.realpath(found)).parent] if found else []
    dirs += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for d in dirs:
        if all((d / b).exists() for b in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
            capture_output=True,
            check=False,
        )
        try:
            pwd.getpwnam(OS_USER)
        except KeyError as error:
            raise NoPostgres(f"cannot create the system user {OS_USER}") from error
    return OS_USER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    root: Path
    port: int
    bindir: Path
    user: str | None
    sitter: subprocess.Popen[bytes]

    def dsn(self, database: str = "postgres", role: str = SUPERUSER) -> str:
        return f"postgresql://{role}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run trusted SQL as the superuser (setting up roles and databases)."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, name: str) -> str:
        """A fresh database, readable by :data:`READER`; returns the superuser DSN."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}"')
        self.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def grant_reader(self, database: str) -> str:
        """SELECT on every table of ``database`` to the read-only role; its DSN."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            schemas = [
                r[0]
                for r in conn.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' "
                    "AND nspname <> 'information_schema'"
                )
            ]
            conn.execute(f'GRANT CONNECT ON DATABASE "{database}" TO {READER}')  # type: ignore[arg-type]
            for schema in schemas:
                conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {READER}')  # type: ignore[arg-type]
                conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {READER}')  # type: ignore[arg-type]
        return self.dsn(database, READER)

    def stop(self) -> None:
        if self.sitter.poll() is None and self.sitter.stdin is not None:
            self.sitter.stdin.close()
            self.sitter.wait(timeout=60)


def start() -> Cluster:
    bindir = binaries()
    if bindir is None:
        raise NoPostgres("initdb/pg_ctl not found (apt-get install postgresql)")
    user = _run_as()
    root = Path(tempfile.mkdtemp(prefix="dpsql-engines-pg-"))
    data = root / "data"
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    port = _free_port()
    run_as = {"user": user} if user else {}
    init = subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ],
        capture_output=True,
        cwd="/",
        check=False,
        **run_as,  # type: ignore[arg-type]
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise NoPostgres(f"initdb failed: {init.stderr.decode()[-400:]}")
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        "-c shared_buffers=256MB -c max_connections=60"
    )
    sitter = subprocess.Popen(
        [sys.executable, "-c", _SITTER, str(bindir / "pg_ctl"), str(data), str(root), user or ""],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    started = subprocess.run(
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        ],
        capture_output=True,
        cwd="/",
        check=False,
        **run_as,  # type: ignore[arg-type]
    )
    cluster = Cluster(root, port, bindir, user, sitter)
    atexit.register(cluster.stop)
    if started.returncode != 0:
        cluster.stop()
        raise NoPostgres(f"pg_ctl start failed: {started.stderr.decode()[-400:]}")
    deadline = time.monotonic() + 30
    while True:
        try:
            cluster.execute(f"CREATE ROLE {READER} LOGIN")
            break
        except Exception:
            if time.monotonic() > deadline:
                cluster.stop()
                raise
            time.sleep(0.2)
    return cluster
