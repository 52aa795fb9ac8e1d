"""A new SQLite file in WAL mode with its first contents, made with one sync of the file
and one of its folder.

Left to itself, SQLite switches a new file to WAL through a rollback journal: it syncs the
journal, the folder, the journal again and the file: four syncs before the first table,
about 20 ms of a cold `dpsql query` (which makes the budget ledger and the release cache)
on this machine's shared disk. Here the file is written whole under a temporary name with SQLite's syncs
off (the switch, the statements and the checkpoint its close runs), synced once, linked
to its name only if nothing is there yet, and the folder synced. A crash leaves no file
or a whole one (and perhaps a stray temporary name); processes racing to create it all
open the one linked first.

The file is synced through a descriptor of its own only while no SQLite connection of
this process has it open: POSIX drops every lock a process holds on a file when any of
its descriptors of that file is closed, and WAL mode relies on a lock on the file to
tell whether a closing connection is the last one (which then deletes the log).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable

# Writes the new file's first contents inside one transaction.
Fill = Callable[[sqlite3.Connection], None]


def _sync(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_wal_file(path: str | os.PathLike[str], fill: Fill | None = None) -> bool:
    """Create ``path`` as a WAL-mode SQLite file holding what ``fill`` writes, unless a
    file is there already (even an empty one: SQLite's own way then makes it). Returns
    whether this call linked the file into place."""
    path = os.fspath(path)
    if path == ":memory:" or os.path.exists(path):
        return False
    folder = os.path.dirname(os.path.abspath(path))
    # Random, not only the pid and thread: a creator killed mid-way leaves its file, and
    # a later process with the same pid and thread id (a container's fixed pid) opened
    # it, failed to write its first contents over that file's and stayed unavailable.
    temp = os.path.join(
        folder,
        f".{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}."
        f"{secrets.token_hex(8)}.new",
    )
    leftovers = [temp + suffix for suffix in ("", "-wal", "-shm", "-journal")]
    try:
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA journal_mode=WAL")
            if fill is not None:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    fill(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        finally:
            conn.close()  # the last connection: its checkpoint moves the log into the file
        _sync(temp)  # no connection has it open (see above)
        try:
            os.link(temp, path)  # never over a file another process linked first
        except OSError:  # that one, or no hard links here: SQLite's own way then
            return False
        _sync(folder, os.O_RDONLY | os.O_DIRECTORY)
        return True
    finally:
        for name in leftovers:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
