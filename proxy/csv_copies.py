"""Read-only DuckDB copies of a policy's CSV sources, kept between processes.

DuckDB runs the core on a read-only, locked connection, so CSV sources are first copied
into a DuckDB file. Building that copy is most of a cold `dpsql query`'s own work on a
small CSV, so the copy is kept in the state folder beside the SQLite ledger and reused
by the next process while the sources are byte for byte the same.

A copy is named by a hash of everything that decides its contents: the DuckDB version,
the connection settings it is opened with (DuckDB refuses a second connection to one file
with other settings within a process), and each table's name and source bytes. A source
edited in place therefore gets a new copy; nothing relies on modification times. A copy
is written under a temporary name and renamed into place, so a reader sees a whole file
or none, and processes racing to build it each rename a complete one.

With the ledger in PostgreSQL there is no state folder: each process builds its own copy
in a temporary folder, removed at close.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from proxy.catalog import split_name
from proxy.policy import Policy

# Bumped when the way a copy is built changes, so older copies are not reused.
_FORMAT = 1


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class CsvCopy:
    """A DuckDB file holding the CSV tables; ``scratch`` is removed at close."""

    path: Path
    scratch: tempfile.TemporaryDirectory[str] | None

    def close(self) -> None:
        if self.scratch is not None:
            self.scratch.cleanup()


def copy_key(policy: Policy, config: dict[str, Any]) -> str:
    """The name of the copy for these sources read with these settings."""
    digest = hashlib.blake2b(digest_size=16)
    header = {"format": _FORMAT, "duckdb": duckdb.__version__, "config": config}
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    for name, source in policy.csv_tables:
        digest.update(b"\0table\0" + name.encode() + b"\0")
        with open(source, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _build(policy: Policy, config: dict[str, Any], path: Path) -> None:
    loader = duckdb.connect(str(path), config=config)
    try:
        for name, source in policy.csv_tables:
            db, table = split_name(name)
            if db != "main":
                loader.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(db)}")
            loader.execute(
                f"CREATE TABLE {_quote(db)}.{_quote(table)} AS "
                "SELECT * FROM read_csv_auto(?, header = true)",
                [str(source)],
            )
    finally:
        loader.close()


def csv_copy(policy: Policy, config: dict[str, Any]) -> CsvCopy:
    """A DuckDB file with the policy's CSV tables: the kept copy when the state folder
    exists (built now if missing), else a private one in a temporary folder."""
    if policy.ledger_url is None and policy.ledger_path.parent.is_dir():
        folder = policy.ledger_path.with_name(policy.ledger_path.stem + "-csv")
        path = folder / f"{copy_key(policy, config)}.duckdb"
        if not path.exists():
            folder.mkdir(exist_ok=True)
            partial = folder / f".{path.name}.{os.getpid()}.partial"
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
            _build(policy, config, partial)
            os.replace(partial, path)
            _drop_others(folder, keep=path)
        return CsvCopy(path, None)
    scratch = tempfile.TemporaryDirectory(prefix="dpsql-csv-")
    path = Path(scratch.name) / "data.duckdb"
    _build(policy, config, path)
    return CsvCopy(path, scratch)


def _drop_others(folder: Path, keep: Path) -> None:
    """Remove copies of earlier sources. A process still reading one keeps its open file
    (POSIX unlink), so this never breaks a running engine."""
    for other in folder.glob("*.duckdb"):
        if other != keep:
            with contextlib.suppress(OSError):
                other.unlink()
