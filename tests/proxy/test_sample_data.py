from __future__ import annotations

import filecmp
import time
from pathlib import Path

import duckdb
import pytest

from proxy.policy import Policy, load_policy
from sample_data.generate import generate, main

REPO = Path(__file__).resolve().parents[2]
SHARED_PUMS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "pums"

COLUMNS = {
    "users": [
        ("user_id", "BIGINT"),
        ("region", "VARCHAR"),
        ("plan", "VARCHAR"),
        ("age", "INTEGER"),
        ("signup_month", "DATE"),
    ],
    "prompts": [
        ("prompt_id", "BIGINT"),
        ("user_id", "BIGINT"),
        ("ts", "TIMESTAMP"),
        ("model", "VARCHAR"),
        ("tokens_in", "INTEGER"),
        ("tokens_out", "INTEGER"),
        ("latency_ms", "INTEGER"),
        ("flagged", "BOOLEAN"),
    ],
    "tickets": [
        ("ticket_id", "BIGINT"),
        ("user_id", "BIGINT"),
        ("opened_at", "TIMESTAMP"),
        ("category", "VARCHAR"),
        ("resolution_minutes", "INTEGER"),
    ],
    "regions": [("region", "VARCHAR"), ("name", "VARCHAR")],
}


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return generate(
        tmp_path_factory.mktemp("gen") / "usage.duckdb", people=300, prompts=3000, seed=11
    )


@pytest.fixture(scope="module")
def demo_policy() -> Policy:
    return load_policy(REPO / "sample_data" / "policy.toml")


def fingerprint(path: Path) -> tuple:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (
            rows(
                con,
                "SELECT count(*), sum(age), sum(epoch(signup_month)), "
                "string_agg(region || plan, ',' ORDER BY user_id) FROM users",
            ),
            rows(
                con,
                "SELECT count(*), sum(user_id), sum(epoch(ts)), sum(tokens_in), "
                "sum(tokens_out), sum(latency_ms), sum(flagged::INT), "
                "sum(length(model)) FROM prompts",
            ),
            rows(
                con,
                "SELECT count(*), sum(user_id), sum(epoch(opened_at)), "
                "sum(resolution_minutes), sum(length(category)) FROM tickets",
            ),
        )
    finally:
        con.close()


def test_tables_have_the_declared_columns(small):
    con = duckdb.connect(str(small), read_only=True)
    for table, expected in COLUMNS.items():
        got = rows(
            con,
            f"SELECT column_name, data_type FROM duckdb_columns() "
            f"WHERE table_name = '{table}' ORDER BY column_index",
        )
        assert got == expected, table
    assert rows(
        con, "SELECT count(*), count(DISTINCT user_id), min(user_id), max(user_id) FROM users"
    ) == [(300, 300, 1, 300)]
    assert rows(con, "SELECT count(*), count(DISTINCT prompt_id) FROM prompts") == [(3000, 3000)]
    assert rows(con, "SELECT * FROM regions ORDER BY region") == [
        ("east", "East"),
        ("north", "North"),
        ("south", "South"),
        ("west", "West"),
    ]
    # no orphans, and nobody acts before signing up
    assert rows(con, "SELECT count(*) FROM prompts p ANTI JOIN users u USING (user_id)") == [(0,)]
    assert rows(con, "SELECT count(*) FROM tickets t ANTI JOIN users u USING (user_id)") == [(0,)]
    assert rows(
        con, "SELECT count(*) FROM prompts JOIN users USING (user_id) WHERE ts < signup_month"
    ) == [(0,)]
    assert rows(
        con, "SELECT count(*) > 0, count(*) FILTER (WHERE opened_at IS NULL) FROM tickets"
    ) == [(True, 0)]


def test_values_lie_inside_the_policy_bounds_and_domains(small, demo_policy):
    con = duckdb.connect(str(small), read_only=True)
    checked = 0
    for table in demo_policy.tables:
        for col in table.columns:
            nulls = rows(con, f"SELECT count(*) FROM {table.name} WHERE {col.name} IS NULL")
            assert nulls == [(0,)], (table.name, col.name)
            if col.lower is not None and col.upper is not None:
                ((lo, hi),) = rows(
                    con, f"SELECT min({col.name}), max({col.name}) FROM {table.name}"
                )
                assert col.lower <= lo and hi <= col.upper, (table.name, col.name, lo, hi)
                checked += 1
            if col.values is not None:
                seen = {v for (v,) in rows(con, f"SELECT DISTINCT {col.name} FROM {table.name}")}
                assert seen <= set(col.values), (table.name, col.name, seen)
                checked += 1
    assert checked == 11
    # each person has exactly one value of the partition column
    pop = demo_policy.population("users")
    assert pop.partition == "users.region"
    assert rows(
        con,
        "SELECT max(c) FROM (SELECT user_id, count(DISTINCT region) c FROM users GROUP BY user_id)",
    ) == [(1,)]


def test_activity_is_heavy_tailed(small):
    con = duckdb.connect(str(small), read_only=True)
    ((median, top, zero, over_linf),) = rows(
        con,
        "SELECT median(n), max(n), count(*) FILTER (WHERE n = 0), "
        "count(*) FILTER (WHERE n > 10) FROM (SELECT u.user_id, count(p.user_id) AS n "
        "FROM users u LEFT JOIN prompts p USING (user_id) GROUP BY u.user_id)",
    )
    print(f"prompts per person: median {median}, max {top}, zero {zero}, >10 {over_linf}")
    assert top >= 10 * max(median, 1)
    assert top >= 100
    assert median <= 10  # mean is 10: most people write a few
    assert over_linf >= 30  # the Linf = 10 bound of the demo policy binds for many people


def test_same_seed_same_data_other_seed_other_data(tmp_path, small):
    again = generate(tmp_path / "a.duckdb", people=300, prompts=3000, seed=11)
    other = generate(tmp_path / "b.duckdb", people=300, prompts=3000, seed=12)
    assert fingerprint(again) == fingerprint(small)
    fo = fingerprint(other)
    assert fo != fingerprint(small)
    assert fo[0][0][0] == 300 and fo[1][0][0] == 3000


def test_generation_replaces_the_file_atomically(tmp_path):
    out = tmp_path / "usage.duckdb"
    out.write_bytes(b"old contents")
    generate(out, people=20, prompts=100, seed=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["usage.duckdb"]
    con = duckdb.connect(str(out), read_only=True)
    assert rows(con, "SELECT count(*) FROM prompts") == [(100,)]


def test_zero_prompts_and_bad_sizes(tmp_path):
    out = generate(tmp_path / "u.duckdb", people=5, prompts=0, seed=1)
    con = duckdb.connect(str(out), read_only=True)
    assert rows(con, "SELECT count(*) FROM users") == [(5,)]
    assert rows(con, "SELECT count(*) FROM prompts") == [(0,)]
    with pytest.raises(ValueError):
        generate(tmp_path / "v.duckdb", people=0, prompts=10, seed=1)


def test_cli_and_demo_size_timing(tmp_path, demo_policy):
    out = tmp_path / "demo.duckdb"
    started = time.perf_counter()
    main(["--out", str(out)])  # defaults: 5000 people, 100000 prompts, seed 7
    elapsed = time.perf_counter() - started
    print(f"demo-size generation: {elapsed:.2f} s")
    con = duckdb.connect(str(out), read_only=True)
    assert rows(con, "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM prompts)") == [
        (5000, 100000)
    ]
    # at demo size every value of every declared domain occurs (rare ones included)
    for table in demo_policy.tables:
        for col in table.columns:
            if col.values is not None:
                seen = {v for (v,) in rows(con, f"SELECT DISTINCT {col.name} FROM {table.name}")}
                assert seen == set(col.values), (table.name, col.name)


@pytest.mark.slow
def test_benchmark_size_generation(tmp_path):
    out = tmp_path / "big.duckdb"
    started = time.perf_counter()
    generate(out, people=1_000_000, prompts=10_000_000, seed=7)
    print(f"1M people / 10M prompts: {time.perf_counter() - started:.1f} s")
    con = duckdb.connect(str(out), read_only=True)
    assert rows(con, "SELECT count(*), count(DISTINCT prompt_id), max(prompt_id) FROM prompts") == [
        (10_000_000, 10_000_000, 10_000_000)
    ]
    assert rows(con, "SELECT count(*) FROM users") == [(1_000_000,)]


# --- the PUMS copy ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def pums_policy() -> Policy:
    return load_policy(REPO / "sample_data" / "pums" / "policy.toml")


@pytest.mark.skipif(not SHARED_PUMS.exists(), reason="shared dataset folder not mounted")
def test_pums_files_are_unchanged_copies():
    for name in ("PUMS.csv", "PUMS_pid.csv"):
        assert filecmp.cmp(REPO / "sample_data" / "pums" / name, SHARED_PUMS / name, False)


def test_pums_policy_matches_its_csv(pums_policy):
    ((table_name, csv),) = pums_policy.csv_tables
    table = pums_policy.table(table_name)
    assert table is not None and table.unit == "pid"
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{csv}')")
    names = [
        n for (n,) in rows(con, "SELECT column_name FROM duckdb_columns() WHERE table_name = 't'")
    ]
    assert names == ["age", "sex", "educ", "race", "income", "married", "pid"]
    # one row per person, as the policy claims
    assert rows(con, "SELECT count(*), count(DISTINCT pid), count(pid) FROM t") == [
        (1000, 1000, 1000)
    ]
    for col in table.columns:
        assert col.name in names
        assert rows(con, f"SELECT count(*) FROM t WHERE {col.name} IS NULL") == [(0,)]
        if col.lower is not None and col.upper is not None:
            ((lo, hi),) = rows(con, f"SELECT min({col.name}), max({col.name}) FROM t")
            assert col.lower <= lo and hi <= col.upper, col.name
        if col.values is not None:
            seen = {v for (v,) in rows(con, f"SELECT DISTINCT {col.name} FROM t")}
            assert seen <= set(col.values), col.name
