"""The proxy's own SQLite state files (proxy/sqlite_files.py): a new file is switched to
WAL without SQLite's four syncs and synced once; its connections then run as before."""

from __future__ import annotations

from pathlib import Path

from proxy.sqlite_files import ThreadConnections


def test_a_new_state_file_is_a_wal_file_with_normal_syncs(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    for _ in range(2):  # new, then existing
        connections = ThreadConnections(path)
        conn = connections.get()
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL, never OFF
        conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        connections.close()
        assert path.stat().st_size > 0  # the first page, which says WAL, is written
    connections = ThreadConnections(path)
    assert connections.get().execute("SELECT count(*) FROM t").fetchone() == (2,)
    connections.close()
