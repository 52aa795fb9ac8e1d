"""The CLI's engine opens its executor, ledger and post-processing database on a thread
of their own while the planner imports (proxy/engine_opening.py). What it opens must
serve as what the engine opens itself, an error while opening must reach the command
before any charge, and nothing may stay open when the command fails first. Real PUMS
policies, real DuckDB and SQLite files; the subprocess runs are the `dpsql` console
script itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.engine_opening import Opening
from proxy.errors import DPSQLError
from proxy.policy import load_policy
from proxy.request import QueryRequest
from tests.proxy.conftest import ROOT, pums_policy
from tests.proxy.test_cli_startup import _dpsql, _policy

DPSQL = str(Path(sys.executable).parent / "dpsql")
SQL = "SELECT sex, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex"


def _open_files_under(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open (Linux /proc)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


def test_the_opened_parts_serve_as_the_engine_own(tmp_path: Path) -> None:
    for name in ("threaded", "serial"):
        (tmp_path / name).mkdir()  # the state folder: the CSV copy is kept there
    mine = pums_policy(tmp_path / "threaded")
    theirs = pums_policy(tmp_path / "serial")
    interval = sys.getswitchinterval()
    threaded = Opening(mine).engine()
    assert sys.getswitchinterval() == interval  # restored once the thread is done
    serial = Engine(theirs)
    try:
        assert threaded.executor.column_types() == serial.executor.column_types()
        assert [t.to_dict() for t in threaded.schema(None)] == [
            t.to_dict() for t in serial.schema(None)
        ]
        request = QueryRequest(sql=SQL, epsilon=1.0, analyst="a")
        # The same plan; the cache keys differ, as each store keys its data version.
        planned = [e.explain(request).to_dict() for e in (threaded, serial)]
        assert planned[0].pop("cache_key") != planned[1].pop("cache_key")
        assert planned[0] == planned[1]
        first = threaded.run(request)
        assert not first.privacy.cached and first.privacy.epsilon == pytest.approx(1.0)
        again = threaded.run(request)
        assert again.privacy.cached and again.rows == first.rows
        # The charge is in the ledger file the policy names, the kept CSV copy beside it.
        assert (tmp_path / "threaded" / "ledger.sqlite").exists()
        assert list((tmp_path / "threaded" / "ledger-csv").glob("*.duckdb"))
    finally:
        threaded.close()
        serial.close()
    assert _open_files_under(tmp_path / "threaded") == []


def _bad_csv_policy(tmp: Path) -> Path:
    """A PUMS policy whose CSV header does not match its declared columns."""
    source = (ROOT / "sample_data" / "pums" / "PUMS_pid.csv").read_text().splitlines()
    bad = tmp / "bad.csv"
    bad.write_text("\n".join([source[0].replace("income", "salary"), *source[1:]]) + "\n")
    path = _policy(tmp)
    path.write_text(
        path.read_text().replace(str(ROOT / "sample_data" / "pums" / "PUMS_pid.csv"), str(bad))
    )
    return path


def test_an_error_while_opening_stops_the_command_before_any_charge(tmp_path: Path) -> None:
    policy_path = _bad_csv_policy(tmp_path)
    interval = sys.getswitchinterval()
    with pytest.raises(DPSQLError) as raised:
        Opening(load_policy(policy_path)).engine()
    assert raised.value.code == "policy_error"
    assert sys.getswitchinterval() == interval
    assert _open_files_under(tmp_path) == []
    proc = subprocess.run(
        [DPSQL, "--policy", str(policy_path), "query", SQL, "--epsilon", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "policy_error" in proc.stderr and "salary" in proc.stderr
    # The executor opens first, as in the engine: the ledger was never even created.
    assert not (tmp_path / "ledger.sqlite").exists()


def test_discard_closes_what_was_opened(tmp_path: Path) -> None:
    policy = pums_policy(tmp_path)
    opening = Opening(policy)
    opening.discard()
    assert (tmp_path / "ledger.sqlite").exists()  # it was opened (and made) ...
    assert _open_files_under(tmp_path) == []  # ... and closed
    opened = Opening(policy).result()
    assert opened.executor is not None and opened.ledger is not None
    assert opened.post is not None
    opened.close()
    assert _open_files_under(tmp_path) == []
    for_schema = Opening(policy, post=False).result()
    assert for_schema.post is None  # `dpsql schema` answers no query
    for_schema.close()
    assert _open_files_under(tmp_path) == []


def test_a_cold_query_leaves_the_console_views_and_emoji_table_alone(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    out, modules = _dpsql(policy, "query", SQL, "--epsilon", "1")
    assert "n:" in out
    assert "proxy.ledger_views" not in modules
    assert "rich._emoji_codes" not in modules


def test_names_are_printed_as_written_not_as_emoji(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    sql = 'SELECT sex AS ":smile:", COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex'
    out, _ = _dpsql(policy, "query", sql, "--epsilon", "1")
    assert ":smile:" in out and "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in out


def test_the_arity_table_read_over_the_post_database_is_duckdb_own(tmp_path: Path) -> None:
    """The first thread reads DuckDB's function catalog over the post-processing
    database it opens: that table must be the one an empty database gives, and a cold
    command must refuse a call no overload takes."""
    import duckdb

    from proxy import duckdb_functions

    duckdb_functions._known = None
    engine = Opening(pums_policy(tmp_path)).engine()
    try:
        learnt = duckdb_functions._known
        assert learnt is not None  # read while opening, not at the first check
        with duckdb.connect(":memory:") as empty:
            assert learnt == duckdb_functions.read_arities(empty)
        assert learnt["length"][0] == frozenset({1})
    finally:
        engine.close()
    policy = _policy(tmp_path)
    proc = subprocess.run(
        [DPSQL, "--policy", str(policy), "query",
         "SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE length(CAST(sex AS VARCHAR), 2) > 0",
         "--epsilon", "1"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "unsupported_sql" in proc.stderr and "length" in proc.stderr


def test_a_failure_of_the_first_thread_stops_the_command_and_closes_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxy import post_database

    def refuse(*args: object) -> object:
        raise DPSQLError("internal", "no post-processing database here", "none")

    monkeypatch.setattr(post_database, "open_post_database", refuse)
    interval = sys.getswitchinterval()
    with pytest.raises(DPSQLError, match="no post-processing database"):
        Opening(pums_policy(tmp_path)).engine()
    assert sys.getswitchinterval() == interval
    assert _open_files_under(tmp_path) == []
    # The copy was built by the first thread and is whole: no partial file is left.
    assert [p.name for p in (tmp_path / "ledger-csv").iterdir() if "partial" in p.name] == []
