"""Joins on floats, UUIDs, BLOBs and TIMEs are keyed like joins on other values
(proxy/rewrite/keyed_groups.py).

DuckDB hashes a DOUBLE by a fixed mix of its bits, so one person's planted floats can all
land in one bucket of a join's hash table: a probe (2026-12-03) joined 32,768 such
DOUBLEs of one person with a public table of 200,000 rows in 2.05 s, against 0.005 s
with the keyed equality. A float compared with an integer, a DECIMAL or a float of the
other width is compared as a DOUBLE, so both sides are cast to DOUBLE before their keyed
hashes; DuckDB's hash of a DOUBLE is one per value (-0.0 and 0.0 alike, every NaN
alike), which the first test pins, so the keyed equality holds wherever the join's does.
A UUID is hashed as its two stored halves combined: 32,768 UUIDs whose halves are equal
share one hash (joined in 1.96 s plain, 0.01 s keyed by their secret-prefixed text).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite import keyed_groups
from proxy.rewrite.l0 import takes_seed
from tests.policies import users_policy

# The UUID, BLOB, TIME and INTERVAL tables (the Spark suite keys its BINARY joins on them)
TEXTUAL_TABLES = """
[tables.ex]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 100

[tables.pex]
public = true
"""

POLICY = users_policy(
    """
[tables.ev]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 100
columns.i = {{ lower = 0, upper = 10 }}

[tables.pub]
public = true
"""
    + TEXTUAL_TABLES
)

# Values where a float's equality is not its bits': zeros of both signs, NaNs of two
# payloads, infinities, and integers beyond 2^53 that a DOUBLE rounds.
NEGATIVE_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]
FLOATS = [0.0, -0.0, float("nan"), NEGATIVE_NAN, float("inf"), -float("inf"), 1.5, 2.0**53]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp("float-joins")
    db = folder / "floats.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE ev (user_id BIGINT, f DOUBLE, r REAL, i INTEGER, b BIGINT, "
            "d DECIMAL(18, 3))"
        )
        con.execute("CREATE TABLE pub (x DOUBLE, y REAL, n BIGINT, m DECIMAL(10, 1))")
        # UUIDs, BLOBs and TIMEs (the typer's UNKNOWN; keyed by their text)
        con.execute("CREATE TABLE ex (user_id BIGINT, u UUID, bl BLOB, tm TIME, iv INTERVAL)")
        con.execute("CREATE TABLE pex (u UUID, bl BLOB, tm TIME, iv INTERVAL)")
        con.execute(
            "INSERT INTO ex SELECT i % 40 + 1, "
            "CAST(printf('00000000-0000-0000-0000-%012d', i % 7) AS UUID), "
            "CAST(printf('\\x%02X', i % 5) AS BLOB), "
            "TIME '10:00:00' + INTERVAL (i % 6) SECOND * 0.5, "
            "CASE WHEN i // 40 % 2 = 0 THEN INTERVAL 1 DAY ELSE INTERVAL 24 HOUR END "
            "FROM range(0, 400) t(i)"
        )
        con.execute(
            "INSERT INTO pex SELECT "
            "CAST(printf('00000000-0000-0000-0000-%012d', i) AS UUID), "
            "CAST(printf('\\x%02X', i) AS BLOB), "
            "TIME '10:00:00' + INTERVAL (i) SECOND * 0.5, INTERVAL (i * 24) HOUR "
            "FROM range(0, 4) t(i)"
        )
        rows = []
        for person in range(1, 41):
            for j, f in enumerate(FLOATS):
                n = 2**53 + 1 if j == 7 else j
                rows.append((person, f, f, j, n, j + 0.5))
        con.executemany("INSERT INTO ev VALUES (?, ?, ?, ?, ?, ?)", rows)
        con.executemany(
            "INSERT INTO pub VALUES (?, ?, ?, ?)",
            [(f, f, 2**53 if j == 7 else j, j + 0.5) for j, f in enumerate(FLOATS)]
            + [(-f, -f, -j, -j - 0.5) for j, f in enumerate(FLOATS)],
        )
    policy = parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder)
    eng = Engine(policy)
    try:
        yield eng
    finally:
        eng.close()


def test_duckdb_hashes_each_double_once() -> None:
    """What the keyed equality rests on: equal DOUBLEs hash alike under a seed."""
    with duckdb.connect() as con:
        row = con.execute(
            "SELECT HASH(CAST(-0.0 AS DOUBLE), 5) = HASH(CAST(0.0 AS DOUBLE), 5), "
            "HASH(CAST('nan' AS DOUBLE), 5) = HASH(CAST(? AS DOUBLE), 5), "
            "CAST(? AS DOUBLE) = CAST('nan' AS DOUBLE)",
            [NEGATIVE_NAN, NEGATIVE_NAN],
        ).fetchone()
    assert row == (True, True, True)


JOINS = {
    "double = double": "ev.f = pub.x",
    "real = double": "ev.r = pub.x",
    "real = real": "ev.r = pub.y",
    "integer = double": "ev.i = pub.x",
    "bigint = double": "pub.x = ev.b",
    "double = bigint": "ev.f = pub.n",
    "decimal = double": "ev.d = pub.x",
    "double = decimal": "ev.f = pub.m",
}


def _keyed(core_sql: str) -> list[exp.EQ]:
    tree = sqlglot.parse_one(core_sql, read="duckdb")
    return [
        eq
        for eq in tree.find_all(exp.EQ)
        if keyed_groups.is_companion(eq.this) and keyed_groups.is_companion(eq.expression)
    ]


def _result(engine: Engine, sql: str) -> list[tuple[str, ...]]:
    run = engine.executor.run
    out = run(sql, [11] if takes_seed(sql) else [])
    names = sorted(out)
    return sorted(
        tuple(repr(out[n][i]) for n in names) for i in range(len(out[names[0]]))
    )


@pytest.mark.parametrize("name", sorted(JOINS))
def test_a_join_on_floats_is_keyed_and_keeps_its_rows(engine: Engine, name: str) -> None:
    sql = (
        "SELECT COUNT(*) AS n, SUM(ev.i) AS s FROM ev JOIN pub ON "
        f"{JOINS[name]} WHERE ev.user_id < 30"
    )
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    (keyed,) = _keyed(plan.core_sql)
    casts = [c.to.sql(dialect="duckdb") for c in keyed.find_all(exp.Cast)]
    assert casts == ["DOUBLE", "DOUBLE"], keyed.sql(dialect="duckdb")
    plain = keyed_groups.plain(sqlglot.parse_one(plan.core_sql, read="duckdb")).sql("duckdb")
    assert not _keyed(plain)
    assert _result(engine, plan.core_sql) == _result(engine, plain)
    # The data has rows that match (each person's 1.5 at least).
    count = engine.executor.run(
        f"SELECT COUNT(*) AS n FROM ev JOIN pub ON {JOINS[name]} WHERE ev.user_id < 30"
    )["n"][0]
    assert count >= 29


def test_zeros_and_nans_match_through_the_keyed_equality(engine: Engine) -> None:
    """Per person, DuckDB's = matches each zero with the four zeros of pub, each NaN
    with its four NaNs, each infinity twice, 1.5 and 2^53 once: 22 rows, under the row
    cap, so the bounded count of the keyed core is that exactly."""
    sql = "SELECT COUNT(*) AS n FROM ev JOIN pub ON ev.f = pub.x WHERE ev.user_id < 30"
    assert engine.executor.run(sql)["n"][0] == 22 * 29
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    assert _keyed(plan.core_sql)
    out = engine.executor.run(plan.core_sql, [11] if takes_seed(plan.core_sql) else [])
    (count,) = out[plan.statistics[0].column]
    assert count == 22 * 29, out


TEXTUAL = {"uuid": "ex.u = pex.u", "blob": "pex.bl = ex.bl", "time": "ex.tm = pex.tm"}


@pytest.mark.parametrize("name", sorted(TEXTUAL))
def test_a_join_on_uuids_blobs_or_times_is_keyed_by_their_text(engine: Engine, name: str) -> None:
    """A UUID is hashed as its two 64-bit halves combined, which collide by construction;
    those joins, and BLOB and TIME ones, are keyed on the secret-prefixed text."""
    sql = f"SELECT COUNT(*) AS n FROM ex JOIN pex ON {TEXTUAL[name]}"
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    (keyed,) = _keyed(plan.core_sql)
    assert "||" in keyed.sql(dialect="duckdb")
    plain = keyed_groups.plain(sqlglot.parse_one(plan.core_sql, read="duckdb")).sql("duckdb")
    assert _result(engine, plan.core_sql) == _result(engine, plain)
    assert engine.executor.run(sql)["n"][0] > 40


def test_a_join_on_intervals_is_keyed_by_their_totals(engine: Engine) -> None:
    """An INTERVAL's text is not one per value ('1 day' equals '24 hours'): the join is
    keyed on the interval's total (keyed_groups.interval_total), and days still meet
    hours."""
    sql = "SELECT COUNT(*) AS n FROM ex JOIN pex ON ex.iv = pex.iv"
    assert engine.executor.run(sql)["n"][0] > 40  # days meet hours
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    (keyed,) = _keyed(plan.core_sql)
    assert "EXTRACT" in keyed.sql(dialect="duckdb").upper()
    plain = keyed_groups.plain(sqlglot.parse_one(plan.core_sql, read="duckdb")).sql("duckdb")
    assert _result(engine, plan.core_sql) == _result(engine, plain)


def test_a_persons_distinct_intervals_count_equal_intervals_once(engine: Engine) -> None:
    """'1 day' and '24 hours' are one value to DuckDB; a per-person COUNT(DISTINCT) of an
    INTERVAL column groups by its total (keyed_groups.interval_total), not its text,
    which counted them twice."""
    sql = (
        "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(DISTINCT iv) AS n FROM ex "
        "GROUP BY user_id) t"
    )
    assert engine.executor.run(sql)["a"][0] == 1.0  # every person: one value, two spellings
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    out = engine.executor.run(plan.core_sql, [11] if takes_seed(plan.core_sql) else [])
    total, count = (int(out[s.column][0]) for s in plan.statistics[:2])
    # The AVG's sum is centred on the middle of n's range, 0..100 (the row cap): n = 1
    # for each of the 40 people (n = 2 before: -1,920)
    assert (total, count) == (40 * (1 - 50), 40), out


@pytest.mark.parametrize(
    "value",
    [
        "iv * 2",
        "-iv",
        "CAST(iv AS INTERVAL)",
        "COALESCE(iv, INTERVAL 0 DAY)",
        "iv + INTERVAL 1 HOUR",
    ],
)
def test_a_persons_distinct_interval_expressions_count_equal_intervals_once(
    engine: Engine, value: str
) -> None:
    """An INTERVAL expression's text is not one per value either ('2 days' and '48:00:00'
    are one to DuckDB): keyed_groups.interval_valued types it, and it is grouped by its
    total (the tree before counted 2 per person; a sum of intervals was refused)."""
    sql = (
        f"SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(DISTINCT {value}) AS n FROM ex "
        "GROUP BY user_id) t"
    )
    assert engine.executor.run(sql)["a"][0] == 1.0
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    out = engine.executor.run(plan.core_sql, [11] if takes_seed(plan.core_sql) else [])
    total, count = (int(out[s.column][0]) for s in plan.statistics[:2])
    assert (total, count) == (40 * (1 - 50), 40), out
