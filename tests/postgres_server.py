"""A throwaway PostgreSQL server for tests and benchmarks, from the distribution's binaries:
the one module every test tree (the ledger and cache stores, the PostgreSQL door, the
PostgreSQL executor) and the benchmarks start PostgreSQL with.

``initdb`` and ``pg_ctl`` (on PATH, else the newest ``/usr/lib/postgresql/*/bin``) run in
a fresh directory under the system temp dir, as an unprivileged user: ``initdb`` refuses
root, so when running as root (CI) a system user ``dpsqltest`` is created once with
``useradd`` and the server runs as that user. The server listens on 127.0.0.1 only, on a
free port, with its Unix socket inside its directory, and trusts local connections (it
is reachable from this machine only and lives for one test session). Two roles exist
from the start: ``dpsql`` (a login that is not a superuser, for the stores) and
``dpsql_reader`` (a login given SELECT only, what an operator gives dpsql's executor).

Nothing is left running: :meth:`PgServer.stop` (called by the pytest fixture and by
``atexit``) stops it, and a watchdog process started beside it stops it and removes its
directory as soon as the process that started it goes away, however that happens
(SIGTERM, SIGKILL, a crash): the watchdog waits on a pipe whose only writer is the
starting process.
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OS_USER = "dpsqltest"
SUPERUSER = "postgres"
# The role tests and benchmarks give the stores: a login role that is not a superuser
# (the PostgreSQL ledger refuses superusers: they bypass its append-only rules).
APP_ROLE = "dpsql"
READER = "dpsql_reader"  # SELECT only: what an operator should give dpsql's executor

_WATCHDOG = r"""
import os, shutil, subprocess, sys
fd, pg_ctl, data, root = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
user = sys.argv[5] or None
while os.read(fd, 1):
    pass
if os.path.exists(os.path.join(data, "postmaster.pid")):
    subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], user=user,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root)
shutil.rmtree(root, ignore_errors=True)
"""


class PgUnavailable(RuntimeError):
    """The PostgreSQL binaries are missing or the server could not be started."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    found = shutil.which("initdb")
    candidates = [Path(os.path.realpath(found)).parent] if found else []
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += versions
    for d in candidates:
        if all((d / b).is_file() and os.access(d / b, os.X_OK) for b in _BINARIES):
            return d
    return None


_BINARIES = ("initdb", "pg_ctl", "postgres")


def _os_user() -> str | None:
    """The user to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(
            [
                shutil.which("useradd") or "/usr/sbin/useradd",
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                OS_USER,
            ],
            check=False,
            capture_output=True,
        )
        try:
            pwd.getpwnam(OS_USER)
        except KeyError as exc:  # another process may have raced us: checked again above
            raise PgUnavailable(f"running as root and cannot create user {OS_USER!r}") from exc
    return OS_USER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    root: Path
    bindir: Path
    port: int
    user: str | None
    start_s: float
    _watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _pipe: int | None = field(default=None, repr=False)
    _created: int = field(default=0, repr=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        """The server's log (statements appear there when a test turns logging on)."""
        return self.root / "server.log"

    def dsn(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            kwargs = {"user": self.user, "group": self.user, "extra_groups": []}
        return subprocess.run(
            list(args),
            cwd=self.root,
            capture_output=True,
            text=True,
            check=check,
            env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "HOME": str(self.root)},
            **kwargs,
        )

    def admin(self) -> Any:
        """An autocommit superuser connection (psycopg) to the ``postgres`` database."""
        import psycopg

        return psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10)

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run trusted SQL as the superuser (setting up roles and databases)."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def replace_database(self, name: str) -> str:
        """An empty database ``name`` owned by the superuser (dropped first if it exists),
        for data a test or benchmark loads; returns the superuser's DSN to it."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}"')
        self.execute(f'CREATE DATABASE "{name}" STRATEGY WAL_LOG')
        return self.dsn(name)

    def grant_reader(self, database: str) -> str:
        """SELECT on every table of ``database`` to :data:`READER`; returns its DSN."""
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

    def create_database(self, owner: str = APP_ROLE, prefix: str = "t") -> str:
        """A fresh empty database owned by ``owner``; returns its name."""
        self._created += 1
        name = f"{prefix}_{os.getpid()}_{self._created}_{os.urandom(3).hex()}"
        with self.admin() as conn:
            # WAL_LOG copies the (tiny) template through the WAL: ~10x faster than
            # FILE_COPY, which forces two checkpoints.
            conn.execute(f'CREATE DATABASE "{name}" OWNER "{owner}" STRATEGY WAL_LOG')
        return name

    def stop(self) -> None:
        if self._pipe is None:
            return
        if (self.data / "postmaster.pid").exists():
            self._run(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "fast",
                "-w",
                "stop",
                check=False,
            )
        os.close(self._pipe)  # the watchdog wakes, finds the server stopped, removes root
        self._pipe = None
        if self._watchdog is not None:
            try:
                self._watchdog.wait(30)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def start(
    *, durable: bool = True, settings: Mapping[str, str] | None = None, attempts: int = 4
) -> PgServer:
    """initdb + pg_ctl start; raises PgUnavailable with the reason when it cannot.

    ``durable=False`` turns ``fsync`` off (commits still wait for the WAL write, and
    visibility and locking are unchanged): tests observe no difference, only speed.
    The ledger benchmark keeps ``fsync=on`` and ``synchronous_commit=on``; ``settings``
    adds or overrides server settings (bench/scale.py gives more shared buffers).
    """
    bindir = find_bindir()
    if bindir is None:
        raise PgUnavailable(
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or in "
            "/usr/lib/postgresql/*/bin; install Debian's postgresql package"
        )
    user = _os_user()
    t0 = time.perf_counter()
    # /tmp when it can be used: short enough for the Unix socket's path limit (107
    # bytes) and reachable by the server's user, whatever TMPDIR says.
    base = "/tmp" if os.access("/tmp", os.W_OK | os.X_OK) else None
    root = Path(tempfile.mkdtemp(prefix="dpsql-pg-", dir=base))
    if user is not None:
        pw = pwd.getpwnam(user)
        os.chown(root, pw.pw_uid, pw.pw_gid)
    read_end, write_end = os.pipe()
    server = PgServer(root, bindir, 0, user, 0.0, _pipe=write_end)
    server._watchdog = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WATCHDOG,
            str(read_end),
            str(bindir / "pg_ctl"),
            str(server.data),
            str(root),
            user or "",
        ],
        pass_fds=(read_end,),
        start_new_session=True,  # a Ctrl-C to the test run must not kill it first
        stdin=subprocess.DEVNULL,
    )
    os.close(read_end)
    atexit.register(server.stop)
    try:
        init = server._run(
            str(bindir / "initdb"),
            "-D",
            str(server.data),
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            check=False,
        )
        if init.returncode != 0:
            raise PgUnavailable(f"initdb failed: {init.stderr.strip()[-2000:]}")
        conf_base = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{root}'",
            "max_connections": "200",
            "shared_buffers": "32MB",
            "fsync": "on" if durable else "off",
            "synchronous_commit": "on",
            "full_page_writes": "on" if durable else "off",
            "log_min_messages": "warning",
            "log_min_error_statement": "panic",  # tests provoke errors on purpose
            **(settings or {}),
        }
        last = ""
        for _ in range(attempts):
            server.port = _free_port()
            conf = {**conf_base, "port": str(server.port)}
            with (server.data / "postgresql.auto.conf").open("w") as f:
                f.writelines(f"{k} = {v}\n" for k, v in conf.items())
            started = server._run(
                str(bindir / "pg_ctl"),
                "-D",
                str(server.data),
                "-l",
                str(server.log_path),
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if started.returncode == 0:
                break
            log = server.log_path
            last = (started.stderr + (log.read_text() if log.exists() else ""))[-2000:]
        else:
            raise PgUnavailable(f"pg_ctl start failed: {last}")
        try:
            with server.admin() as conn:
                conn.execute(f'CREATE ROLE "{APP_ROLE}" LOGIN NOSUPERUSER')
                conn.execute(f'CREATE ROLE "{READER}" LOGIN NOSUPERUSER')
        except ImportError as exc:
            raise PgUnavailable("psycopg is not installed (pip install -e '.[postgres]')") from exc
    except BaseException:
        server.stop()
        raise
    server.start_s = time.perf_counter() - t0
    return server
