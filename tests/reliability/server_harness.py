"""Real `dpsql serve` processes for the load, crash and access-control suites.

Starting, stopping and the policy text come from tests/server/conftest.py; this module
adds API keys drawn with ``secrets``, a context manager that always stops the server
(and an atexit net for anything a failed test leaves behind), SIGKILL of the whole
process group, and readers of the ledger and release-cache files as they are on disk.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import secrets
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from accounting.ledger import Event
from accounting.store_sqlite import SQLiteLedger
from proxy.errors import CODES
from tests.accounting.test_ledger_concurrency import _store_facts
from tests.server.conftest import DPSQL, REPO, Server, start_server, stop_server, write_policy

__all__ = [
    "DPSQL",
    "REPO",
    "Key",
    "LedgerFacts",
    "Server",
    "cli_verify",
    "fresh_keys",
    "kill_server",
    "ledger_facts",
    "released_keys",
    "running_server",
    "write_keyed_policy",
]

_LIVE: dict[int, Server] = {}


def _stop_leftovers() -> None:
    for server in list(_LIVE.values()):
        # A reaped server's process group id may belong to someone else by now.
        if server.process.poll() is None:
            with suppress(Exception):
                kill_server(server)


atexit.register(_stop_leftovers)


@dataclass(frozen=True)
class Key:
    name: str
    role: str  # "analyst" | "admin"
    secret: str
    tables: tuple[str, ...] | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


def fresh_keys() -> dict[str, Key]:
    """An analyst, an admin and an analyst who may read only ``users``; fresh secrets per
    call so no key is ever written into the repository."""
    return {
        "analyst": Key("r_ana", "analyst", secrets.token_urlsafe(24)),
        "admin": Key("r_adm", "admin", secrets.token_urlsafe(24)),
        "narrow": Key("r_narrow", "analyst", secrets.token_urlsafe(24), ("users",)),
    }


def write_keyed_policy(
    folder: Path,
    db: Path,
    keys: dict[str, Key],
    *,
    cap: float,
    extra_proxy: str = "",
) -> Path:
    """The demo policy (via the server tests' writer) with ``keys`` added as
    ``[analysts.NAME]`` sections holding only each key's SHA-256."""
    path = write_policy(folder, db, cap=cap, extra_proxy=extra_proxy)
    text = path.read_text()
    for key in keys.values():
        text += f"\n[analysts.{key.name}]\n"
        text += f'key_sha256 = "{hashlib.sha256(key.secret.encode()).hexdigest()}"\n'
        text += f'role = "{key.role}"\n'
        if key.tables is not None:
            text += "tables = [" + ", ".join(f'"{t}"' for t in key.tables) + "]\n"
    path.write_text(text)
    return path


def ledger_path(policy: Path) -> Path:
    return policy.with_name("ledger.sqlite")


def cache_path(policy: Path) -> Path:
    return policy.with_name("ledger-cache.sqlite")


@contextmanager
def running_server(
    policy: Path, *, workers: int = 1, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """A started server that is stopped (SIGTERM, then SIGKILL) however the block ends.
    The per-key rate limit is off unless ``env`` sets it: the suites fire faster than a
    person would, and a 429 would hide what they test."""
    server = start_server(policy, workers=workers, env={"DPSQL_RATE_LIMIT": "off", **(env or {})})
    _LIVE[server.process.pid] = server
    try:
        yield server
    finally:
        try:
            stop_server(server)
        finally:
            _LIVE.pop(server.process.pid, None)


def kill_server(server: Server) -> None:
    """SIGKILL the server's whole process group (master and every worker) and reap it."""
    if server.process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    _LIVE.pop(server.process.pid, None)


def track(server: Server) -> Server:
    """Put a server started without ``running_server`` under the atexit net."""
    _LIVE[server.process.pid] = server
    return server


def start_tracked(policy: Path, *, workers: int = 1) -> Server:
    return track(start_server(policy, workers=workers, env={"DPSQL_RATE_LIMIT": "off"}))


@dataclass(frozen=True)
class LedgerFacts:
    events: tuple[Event, ...]
    verified: bool
    problems: tuple[str, ...]
    charges: int  # charge events in the events table
    counted: int  # charges counted by the latest totals rows
    named: int  # populations named by charge events (what ``counted`` must equal)
    spent: dict[str, float]  # ε spent per population

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


def ledger_facts(path: Path) -> LedgerFacts:
    """Open the store as a fresh process would and read everything the suites check.
    Precondition: only charges, replays, registrations, caps and external events exist
    (``counted`` counts charge and external events alike)."""
    ledger = SQLiteLedger(path)
    try:
        report = ledger.verify()
        events = tuple(ledger.history(limit=10**7))
        spent = {p: ledger.spent(p).epsilon for p in ledger.populations()}
    finally:
        ledger.close()
    charges, counted = _store_facts(path)  # also asserts no charge lacks its totals rows
    with sqlite3.connect(path) as conn:
        named = conn.execute(
            "SELECT coalesce(sum(json_array_length(populations)), 0) FROM events "
            "WHERE kind IN ('charge', 'external')"
        ).fetchone()[0]
    return LedgerFacts(
        events, report.ok, tuple(report.problems), charges, counted, int(named), spent
    )


def released_keys(policy: Path) -> dict[str, int]:
    """cache key → charge id of every release stored in the cache file."""
    path = cache_path(policy)
    if not path.exists():
        return {}
    conn = sqlite3.connect(path)
    try:
        return {str(k): int(c) for k, c in conn.execute("SELECT key, charge_id FROM released")}
    finally:
        conn.close()


def cli_verify(policy: Path) -> subprocess.CompletedProcess[str]:
    """`dpsql --policy F ledger verify` as an operator would run it (the global option
    goes before the subcommand)."""
    return subprocess.run(
        [str(DPSQL), "--policy", str(policy), "ledger", "verify"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def error_code(response: httpx.Response) -> str:
    """The documented error code of a refusal, checked against its HTTP status; a
    response that breaks the error contract yields a code starting with '!'."""
    try:
        body: Any = response.json()
        code = body["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return f"!unparsed {response.status_code}: {response.text[:80]!r}"
    if CODES.get(code) != response.status_code:
        return f"!{code} sent as {response.status_code}"
    return str(code)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def dumps(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
