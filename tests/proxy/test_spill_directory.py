"""Past the memory limit, DuckDB spills to a folder of dpsql's own
(proxy/duckdb_sandbox.spill_directory), not to ``<file>.tmp`` beside the data: where that
cannot be made (a read-only data folder), a query past the limit failed after its charge,
by how much data one person has."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from proxy.duckdb_sandbox import spill_directory
from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from tests.policies import ev_policy


def _engine(tmp_path: Path) -> tuple[Engine, Path]:
    db = tmp_path / "data" / "many.duckdb"
    db.parent.mkdir()
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE ev (user_id BIGINT, d BIGINT)")
        # 2,000 people with one value each, and one person with 3M distinct values: the
        # per-person aggregation holds 3M groups, far past 48 MB
        con.execute("INSERT INTO ev SELECT 10 + x, x % 3 FROM range(2000) t(x)")
        con.execute("INSERT INTO ev SELECT 1, x FROM range(3000000) t(x)")
    # Where DuckDB would spill by default cannot be made: as a read-only folder would
    # (this works as root too)
    Path(f"{db}.tmp").write_text("not a folder")
    text = ev_policy(3).replace(
        'mechanism = "gaussian"', 'mechanism = "gaussian"\nmemory_limit = "48MB"'
    )
    return Engine(parse_policy(text.format(db=db, folder=tmp_path), base_dir=tmp_path)), db


def test_a_query_past_the_memory_limit_spills_where_dpsql_chose(tmp_path: Path) -> None:
    engine, db = _engine(tmp_path)
    try:
        setting = engine.executor._db.execute(  # type: ignore[attr-defined]
            "SELECT current_setting('temp_directory')"
        ).fetchone()
        assert setting is not None and setting[0] == spill_directory(db)
        assert not setting[0].startswith(str(db.parent))
        result = engine.run(QueryRequest("SELECT d, COUNT(*) AS n FROM ev GROUP BY d", epsilon=1.0))
        assert tuple(result.columns) == ("d", "n")
    finally:
        engine.close()


def test_the_spill_directory_is_one_per_process_and_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    assert spill_directory(a) == spill_directory(tmp_path / "." / "a.duckdb")
    assert spill_directory(a) != spill_directory(b)
    assert os.path.isdir(spill_directory(a))
