"""CSV sources are copied into a DuckDB file once and reused while their bytes are the
same (proxy/csv_copies.py)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import duckdb
import pytest

from proxy.csv_copies import _connect_unsynced, copy_key, csv_copy
from proxy.duckdb_sandbox import sandbox_settings as _sandbox_settings
from proxy.errors import DPSQLError
from proxy.execute import DuckDBExecutor
from proxy.policy import Policy, PolicyError, parse_policy

POLICY = """
[database]
csv = {{ "Main.People" = "{csv}" }}

[database.csv_types."Main.People"]
pid = "BIGINT"
age = "BIGINT"

[ledger]
path = "{ledger}"

[populations.people]
epsilon_cap = 10.0
delta = 1e-6

[tables."Main.People"]
population = "people"
unit = "pid"
columns.age = {{ lower = 0, upper = 100 }}
"""


def _policy(tmp_path: Path, ledger: str = "state/ledger.sqlite") -> Policy:
    text = POLICY.format(csv=tmp_path / "people.csv", ledger=ledger)
    return parse_policy(text, base_dir=tmp_path)


def _write(tmp_path: Path, ages: list[int]) -> None:
    rows = "".join(f"{i},{age}\n" for i, age in enumerate(ages, 1))
    (tmp_path / "people.csv").write_text("pid,age\n" + rows)


def _ages(executor: DuckDBExecutor) -> list[int]:
    return [int(a) for a in executor.run("SELECT age FROM main.people ORDER BY pid")["age"]]


def test_the_copy_is_kept_and_reused(tmp_path: Path) -> None:
    _write(tmp_path, [30, 40])
    (tmp_path / "state").mkdir()
    first = DuckDBExecutor(_policy(tmp_path))
    copies = sorted((tmp_path / "state" / "ledger-csv").glob("*.duckdb"))
    assert len(copies) == 1
    built = copies[0].stat()
    assert _ages(first) == [30, 40]
    first.close()
    assert copies[0].exists()  # closing keeps it for the next process

    second = DuckDBExecutor(_policy(tmp_path))
    assert _ages(second) == [30, 40]
    again = copies[0].stat()
    assert (again.st_ino, again.st_mtime_ns) == (built.st_ino, built.st_mtime_ns)
    second.close()


def test_changed_bytes_get_a_new_copy_even_with_the_same_size_and_time(
    tmp_path: Path,
) -> None:
    _write(tmp_path, [30, 40])
    (tmp_path / "state").mkdir()
    source = tmp_path / "people.csv"
    stamp = source.stat()
    executor = DuckDBExecutor(_policy(tmp_path))
    assert _ages(executor) == [30, 40]
    executor.close()

    _write(tmp_path, [31, 41])  # same length, same modification time
    os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    executor = DuckDBExecutor(_policy(tmp_path))
    assert _ages(executor) == [31, 41]
    executor.close()
    # The copy of the old bytes is gone: copies do not pile up in the state folder.
    assert len(list((tmp_path / "state" / "ledger-csv").glob("*.duckdb"))) == 1


def test_different_settings_get_separate_copies(tmp_path: Path) -> None:
    # DuckDB refuses a second connection to one file with other settings in a process.
    _write(tmp_path, [30, 40])
    (tmp_path / "state").mkdir()
    one = _policy(tmp_path)
    text = POLICY.format(csv=tmp_path / "people.csv", ledger="state/ledger.sqlite")
    two = parse_policy("[proxy]\nthreads = 1\n" + text, base_dir=tmp_path)
    assert copy_key(one, _sandbox_settings(one)) != copy_key(two, _sandbox_settings(two))
    a, b = DuckDBExecutor(one), DuckDBExecutor(two)
    assert _ages(a) == _ages(b) == [30, 40]
    a.close()
    b.close()


def test_a_copy_removed_under_a_starting_engine_is_built_again(tmp_path: Path) -> None:
    _write(tmp_path, [30, 40])
    (tmp_path / "state").mkdir()
    policy = _policy(tmp_path)
    DuckDBExecutor(policy).close()
    kept = csv_copy(policy, _sandbox_settings(policy)).path
    kept.unlink()  # what another process's clean-up does between check and connect
    executor = DuckDBExecutor(policy)
    assert _ages(executor) == [30, 40]
    executor.close()


def test_without_a_state_folder_the_copy_is_private_and_removed(tmp_path: Path) -> None:
    _write(tmp_path, [30, 40])
    policy = _policy(tmp_path, ledger="missing/ledger.sqlite")
    copy = csv_copy(policy, _sandbox_settings(policy))
    assert copy.scratch is not None and copy.path.exists()
    copy.close()
    assert not copy.path.exists()
    assert not (tmp_path / "missing").exists()


def _open_and_count(folder: str) -> int:
    policy = _policy(Path(folder))
    executor = DuckDBExecutor(policy)
    try:
        return len(_ages(executor))
    finally:
        executor.close()


def test_processes_racing_to_build_the_copy_all_read_it(tmp_path: Path) -> None:
    _write(tmp_path, list(range(500)))
    (tmp_path / "state").mkdir()
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        counts = pool.map(_open_and_count, [str(tmp_path)] * 8)
    assert counts == [500] * 8
    folder = tmp_path / "state" / "ledger-csv"
    assert len(list(folder.glob("*.duckdb"))) == 1
    assert not list(folder.glob(".*partial"))


def test_the_kept_copy_is_opened_read_only(tmp_path: Path) -> None:
    _write(tmp_path, [30, 40])
    (tmp_path / "state").mkdir()
    executor = DuckDBExecutor(_policy(tmp_path))
    with pytest.raises(duckdb.Error, match="read-only"):
        executor.evaluate("CREATE TABLE main.x AS SELECT 1")
    executor.close()


def test_a_header_unlike_the_declared_columns_is_a_policy_error_at_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "people.csv").write_text("pid,years\n1,30\n")
    (tmp_path / "state").mkdir()
    with pytest.raises(DPSQLError) as caught:
        DuckDBExecutor(_policy(tmp_path))
    assert caught.value.code == "policy_error"
    assert "pid, years" in caught.value.message and "pid, age" in caught.value.message
    # Nothing half-built is left to be mistaken for a copy.
    assert not list((tmp_path / "state" / "ledger-csv").glob("*"))


def test_undeclared_types_are_refused_with_duckdbs_guess_as_a_hint(tmp_path: Path) -> None:
    _write(tmp_path, [30, 40])
    text = POLICY.format(csv=tmp_path / "people.csv", ledger="state/ledger.sqlite")
    text = text[: text.index("[database.csv_types")] + text[text.index("[ledger]") :]
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, base_dir=tmp_path)
    message = str(caught.value)
    assert "needs its column types declared" in message
    assert 'pid = "BIGINT"' in message and 'age = "BIGINT"' in message


def test_quoted_fields_and_commas_inside_them_are_read_in_the_fixed_dialect(
    tmp_path: Path,
) -> None:
    (tmp_path / "people.csv").write_text('pid,age\n1,"30"\n2,"4,0"\n3,\n')
    (tmp_path / "state").mkdir()
    executor = DuckDBExecutor(_policy(tmp_path))
    rows = executor.run("SELECT pid, age FROM main.people ORDER BY pid")
    assert [int(p) for p in rows["pid"]] == [1, 2, 3]
    assert list(rows["age"]) == [30, None, None]
    executor.close()


def test_the_copy_is_written_without_duckdbs_syncs_and_left_whole(tmp_path: Path) -> None:
    # DuckDB's six syncs per build are replaced by one of the finished file, before its
    # rename (proxy/csv_copies.py): the loader runs with fsync_mode none.
    loader = _connect_unsynced(tmp_path / "probe.duckdb", _sandbox_settings(_policy(tmp_path)))
    try:
        mode = loader.execute("SELECT current_setting('fsync_mode')").fetchone()
    except duckdb.Error:
        pytest.skip(f"DuckDB {duckdb.__version__} has no fsync_mode: it syncs as it writes")
    finally:
        loader.close()
    assert mode == ("none",)
    _write(tmp_path, list(range(300)))
    (tmp_path / "state").mkdir()
    folder = tmp_path / "state" / "ledger-csv"
    folder.mkdir()
    # What a builder killed mid-write leaves: a partial under its own process id.
    (folder / f".{copy_key(_policy(tmp_path), _sandbox_settings(_policy(tmp_path)))}"
     ".duckdb.999999.partial").write_bytes(b"DUCK" * 1000)
    executor = DuckDBExecutor(_policy(tmp_path))
    assert _ages(executor) == list(range(300))  # the whole copy, never the partial
    executor.close()
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2 and names[1].endswith(".duckdb")  # the copy, and the stray part
    assert names[0].endswith(".999999.partial") and not any(n.endswith(".wal") for n in names)
