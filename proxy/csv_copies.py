"""Read-only DuckDB copies of a policy's CSV sources, kept between processes.

DuckDB runs the core on a read-only, locked connection, so CSV sources are first copied
into a DuckDB file. Building that copy is most of a cold `dpsql query`'s own work on a
small CSV, so the copy is kept in the state folder beside the SQLite ledger and reused
by the next process while the sources are byte for byte the same.

Columns take the types the policy declares (`[database.csv_types]`), never types read
off the rows: with `read_csv_auto`, one person who wrote text in a column of numbers
turns the whole column into text, which every analyst would see in the schema and in the
plans (a difference between neighbouring databases before any charge). The file is read
with a fixed dialect (comma, double quotes, a header line) for the same reason, every
field as text, then cast with TRY_CAST: a value that is not of its column's type becomes
NULL, which changes that person's row only. The header must name exactly the declared
columns (a policy error at start-up otherwise).

A copy is named by a hash of everything that decides its contents: the DuckDB version,
the connection settings it is opened with (DuckDB refuses a second connection to one file
with other settings within a process), the declared types, and each table's name and
source bytes. A source
edited in place therefore gets a new copy; nothing relies on modification times. A copy
is written under a temporary name (without DuckDB's own syncs), synced once when whole and
renamed into place, so a reader sees a whole file or none, even after a crash, and
processes racing to build it each rename a complete one.

With the ledger in PostgreSQL there is no state folder: each process builds its own copy
in a temporary folder, removed at close.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from proxy.catalog import split_name
from proxy.errors import DPSQLError
from proxy.policy import Policy

# Bumped when the way a copy is built changes, so older copies are not reused.
_FORMAT = 3


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
    header = {
        "format": _FORMAT,
        "duckdb": duckdb.__version__,
        "config": config,
        "types": policy.csv_types,
    }
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    for name, source in policy.csv_tables:
        digest.update(b"\0table\0" + name.encode() + b"\0")
        with open(source, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _header(source: Path) -> list[str]:
    try:
        with open(source, newline="", encoding="utf-8-sig") as handle:
            return [name.strip().lower() for name in next(csv.reader(handle), [])]
    except (OSError, UnicodeDecodeError) as error:
        raise DPSQLError(
            "policy_error",
            f"the CSV source {source} cannot be read ({type(error).__name__})",
            "fix [database] csv",
        ) from None


def _raw_select(name: str, source: Path, types: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """The CSV read of ``source`` (every field as text, a fixed dialect; its one parameter
    is the path) and the cast of its rows to the declared ``types``, as a SELECT list.
    Raises policy_error when the header does not name exactly the declared columns."""
    header = _header(source)
    declared = dict(types)
    if sorted(header) != sorted(declared) or len(set(header)) != len(header):
        raise DPSQLError(
            "policy_error",
            f"the header of {source} ({', '.join(header) or 'empty'}) does not name exactly "
            f"the columns declared for {name} ({', '.join(declared)})",
            f"declare one type per column of the file under [database.csv_types.{name!r}]",
        )
    as_text = ", ".join(f"'{c.replace(chr(39), chr(39) * 2)}': 'VARCHAR'" for c in header)
    read = (
        "SELECT * FROM read_csv(?, header = true, auto_detect = false, delim = ',', "
        f"quote = '\"', escape = '\"', columns = {{{as_text}}})"
    )
    casts = ", ".join(f"TRY_CAST({_quote(c)} AS {declared[c]}) AS {_quote(c)}" for c in header)
    return read, casts


def declared_types(policy: Policy, name: str) -> tuple[tuple[str, str], ...]:
    """The (column, type) pairs the policy declares for CSV table ``name``."""
    return dict(policy.csv_types)[name]


def load_sources(policy: Policy, con: duckdb.DuckDBPyConnection) -> None:
    """Create the policy's CSV tables in ``con`` with their declared types."""
    for name, source in policy.csv_tables:
        db, table = split_name(name)
        if db != "main":
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(db)}")
        read, casts = _raw_select(name, source, declared_types(policy, name))
        # The text is staged in a table first: DuckDB would otherwise push the casts into
        # the CSV reader, where a value of another type fails the whole read instead of
        # becoming NULL.
        con.execute(f"CREATE OR REPLACE TEMP TABLE dpsql_csv_text AS {read}", [str(source)])
        try:
            _one_line_per_row(con, name, source, [c for c, _ in declared_types(policy, name)])
            con.execute(
                f"CREATE TABLE {_quote(db)}.{_quote(table)} AS SELECT {casts} FROM dpsql_csv_text"
            )
        finally:
            con.execute("DROP TABLE IF EXISTS dpsql_csv_text")


def _one_line_per_row(
    con: duckdb.DuckDBPyConnection, name: str, source: Path, columns: Sequence[str]
) -> None:
    """Refuse a source with a field across lines. A quoted field may hold line breaks,
    so one person's value starting with a quote (an exporter that does not quote text)
    runs to the next quote before a line end, taking every line between into that
    person's row: removing the person gave 33 other people their rows back (a review,
    2026-12-06; tests/reliability/test_csv_line_neighbours.py). With one row per line,
    a line changes only its own row."""
    spans = " OR ".join(
        f"strpos({_quote(c)}, chr(10)) > 0 OR strpos({_quote(c)}, chr(13)) > 0" for c in columns
    )
    found = con.execute(f"SELECT COUNT(*) FROM dpsql_csv_text WHERE {spans}").fetchone()
    if found is not None and found[0]:
        raise DPSQLError(
            "policy_error",
            f"{found[0]} row(s) of {source} (table {name}) have a field across lines: a "
            "quoted field may not hold a line break in a CSV source",
            "write each row on one line (replace line breaks inside values), or load the "
            "file into a DuckDB database",
        )


# DuckDB syncs a new file at creation, its log at each commit and the file twice at the
# checkpoint that closing runs: six syncs for one copy (strace), each a wait on a shared
# disk. Nothing needs them: a copy is whole once closed and is synced once
# then, before it is renamed into place (a crash before leaves only a partial name).
_NO_SYNC = {"fsync_mode": "none"}


def _connect_unsynced(path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), config={**config, **_NO_SYNC})
    except duckdb.InvalidInputException:
        # A DuckDB without fsync_mode (before 1.4) syncs as it writes.
        return duckdb.connect(str(path), config=config)


def _build(policy: Policy, config: dict[str, Any], path: Path, *, sync: bool) -> None:
    """Write the copy to ``path``; with ``sync``, on disk when this returns."""
    loader = _connect_unsynced(path, config)
    try:
        load_sources(policy, loader)
    except duckdb.Error as error:
        # Start-up only, for the operator (who may read the files): DuckDB names the line.
        raise DPSQLError(
            "policy_error",
            f"a CSV source could not be read: {error}",
            "fix the file (comma-separated, double quotes, one header line) or the policy",
        ) from None
    finally:
        loader.close()
    if sync:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def kept_copy(policy: Policy, config: dict[str, Any]) -> Path | None:
    """The kept copy of the policy's CSV tables (built now if missing), or None when it
    has no state folder to keep one in. One thread of a process at a time: the copy is
    built under a name of this process's."""
    if policy.ledger_url is not None or not policy.ledger_path.parent.is_dir():
        return None
    folder = policy.ledger_path.with_name(policy.ledger_path.stem + "-csv")
    path = folder / f"{copy_key(policy, config)}.duckdb"
    if not path.exists():
        folder.mkdir(exist_ok=True)
        partial = folder / f".{path.name}.{os.getpid()}.partial"
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        try:
            # Whole and on disk before the rename: a reader never sees a part.
            _build(policy, config, partial, sync=True)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
            raise
        os.replace(partial, path)
        _drop_others(folder, keep=path)
    return path


def csv_copy(policy: Policy, config: dict[str, Any]) -> CsvCopy:
    """A DuckDB file with the policy's CSV tables: the kept copy when the state folder
    exists (built now if missing), else a private one in a temporary folder."""
    kept = kept_copy(policy, config)
    if kept is not None:
        return CsvCopy(kept, None)
    scratch = tempfile.TemporaryDirectory(prefix="dpsql-csv-")
    path = Path(scratch.name) / "data.duckdb"
    _build(policy, config, path, sync=False)  # removed at close: a crash loses it anyway
    return CsvCopy(path, scratch)


def _drop_others(folder: Path, keep: Path) -> None:
    """Remove copies of earlier sources. A process still reading one keeps its open file
    (POSIX unlink), so this never breaks a running engine."""
    for other in folder.glob("*.duckdb"):
        if other != keep:
            with contextlib.suppress(OSError):
                other.unlink()
