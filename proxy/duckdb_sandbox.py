"""The settings every DuckDB connection to the data is opened with (the executor's, and
the one that builds a CSV source's copy, which DuckDB requires to match within a
process): the policy's threads and memory, no extension installed or loaded on the
fly, and division by zero as NULL rather than an error.

A module of its own, importing nothing of the planner, so that a cold `dpsql` command
can build the CSV copy on a thread while the planner is still being imported
(proxy/engine_opening.py).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from proxy.policy import Policy


def sandbox_settings(policy: Policy) -> dict[str, Any]:
    """DuckDB's connection settings for ``policy``'s data."""
    return {
        "threads": policy.proxy.threads,
        "memory_limit": policy.proxy.memory_limit,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "error_on_division_by_zero": False,
    }


# (process, database file) -> the spill directory made for it (see spill_directory).
_SPILL: dict[tuple[int, str], str] = {}
_SPILL_LOCK = threading.Lock()


def spill_directory(database: Path) -> str:
    """Where DuckDB writes what does not fit in the policy's memory_limit while running
    queries on ``database`` in this process: a directory of dpsql's own under the
    system's temporary folder (TMPDIR), removed at exit.

    DuckDB's default is ``<file>.tmp`` beside the data file, which a read-only data
    folder (the way to serve data one does not own) refuses: a query past the memory
    limit then fails instead of spilling, after its charge, and whether it passes
    depends on the data, down to one person's rows (a probe, 2026-12-05: 3M groups of
    one person at a 48 MB limit failed with the default and ran in 0.19 s here). One
    directory per process and file: DuckDB instances must not share one (their temp
    files' names repeat), and every connection of a process to one file must ask for the
    same settings."""
    key = (os.getpid(), str(database.resolve()))
    with _SPILL_LOCK:
        found = _SPILL.get(key)
        if found is None:
            found = tempfile.mkdtemp(prefix="dpsql-spill-")
            _SPILL[key] = found
        return found


@atexit.register
def _remove_spill_directories() -> None:
    pid = os.getpid()
    for (owner, _), folder in list(_SPILL.items()):
        if owner == pid:  # a forked child's exit leaves its parent's alone
            shutil.rmtree(folder, ignore_errors=True)
