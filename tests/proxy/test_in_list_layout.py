"""Long IN lists whose constants would pile up in DuckDB's hash table are refused before
any charge (proxy/in_list_layout.py).

DuckDB answers ``x IN (five or more constants)`` with a MARK hash join built on the
constants. 900 texts with one DuckDB hash, and 32,768 planted rows of one person with
that hash, took 0.128 s against 0.010 s without the person (2026-12-03): each planted
row compared with all 900. Constants whose slots are consecutive (distinct salts) cost
2.2x. The tests below check the layout arithmetic against a plain simulation, that
random lists pass, that crafted lists are refused whatever the type they are compared
in, and that honest long lists (duplicates included) are answered.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.in_list_layout import allowed_run, crowded, longest_run
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from tests.hash_collisions import (
    colliding_integers,
    colliding_texts,
    double_hashing_to,
    texts_hashing_to,
)
from tests.policies import ev_policy, users_policy

POLICY = users_policy(
    """
[tables.ev]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 100
columns.f = {{ lower = 0, upper = 10 }}
columns.d = {{ lower = 0, upper = 10 }}
"""
)


def _simulated_run(hashes: list[int], slots: int) -> int:
    """Linear probing done slot by slot, on the circle."""
    table = [False] * slots
    for h in hashes:
        i = h % slots
        while table[i]:
            i = (i + 1) % slots
        table[i] = True
    if all(table):
        return slots
    start = table.index(False)
    best = run = 0
    for k in range(slots):
        if table[(start + k) % slots]:
            run += 1
            best = max(best, run)
        else:
            run = 0
    return best


def test_longest_run_is_linear_probings() -> None:
    rng = random.Random(4)
    for _ in range(400):
        slots = rng.choice([16, 32, 64])
        n = rng.randrange(1, slots // 2 + 1)
        # clustered draws, so that runs wrap round the end of the table too
        centre = rng.randrange(slots)
        hashes = [
            (centre + int(rng.gauss(0, 3))) % slots + slots * rng.randrange(99) for _ in range(n)
        ]
        got = longest_run(np.array(hashes, dtype=np.uint64), slots)
        assert got == _simulated_run(hashes, slots), (hashes, slots)


def test_random_lists_pass() -> None:
    rng = np.random.default_rng(7)
    for n, lists in ((5, 1500), (8, 1500), (40, 1500), (300, 400), (900, 200), (3000, 60)):
        for _ in range(lists):
            assert not crowded(rng.integers(0, 2**64, n, dtype=np.uint64)), n


def test_allowed_runs() -> None:
    # what a list of 900 may form in DuckDB 2's table (16,384 slots) and in one of 2,048
    assert allowed_run(900, 16384) == 14
    assert allowed_run(900, 2048) == 90
    # the sparser the table, the shorter the run random hashes reach
    runs = [allowed_run(300, 2**b) for b in range(10, 25)]
    assert runs == sorted(runs, reverse=True) and runs[-1] >= 3
    assert allowed_run(5000, 16384) == 53


def test_crafted_layouts_are_crowded() -> None:
    same = np.full(900, 12345, dtype=np.uint64) + (np.arange(900, dtype=np.uint64) << 48)
    assert crowded(same)  # one slot, distinct salts
    consecutive = np.arange(900, dtype=np.uint64) + np.uint64(7 << 40)
    assert crowded(consecutive)  # one run in every table
    # consecutive at 2,048 slots and spread at 16,384: found at 2,048
    spread = (np.arange(200, dtype=np.uint64) % 2048) | (np.arange(200, dtype=np.uint64) % 8 << 11)
    assert crowded(spread)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp("in-lists")
    db = folder / "lists.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE ev AS SELECT i % 50 + 1 AS user_id, 'v' || (i % 37) AS t, "
            "CAST(i AS BIGINT) AS n, CAST(i % 9 AS INTEGER) AS k, i / 7.0 AS f, "
            "CAST(i % 11 AS DECIMAL(18, 3)) AS d FROM range(0, 2000) r(i)"
        )
    policy = parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder)
    eng = Engine(policy)
    try:
        yield eng
    finally:
        eng.close()


def _quoted(texts: list[str]) -> str:
    return ", ".join("'" + t.replace("'", "''") + "'" for t in texts)


def _refused(engine: Engine, sql: str) -> DPSQLError:
    before = engine.remaining("users")
    with pytest.raises(DPSQLError) as caught:
        engine.run(QueryRequest(sql, epsilon=0.1))
    assert engine.remaining("users") == before
    return caught.value


CRAFTED = {
    "texts with one hash": lambda: f"t IN ({_quoted(colliding_texts(900))})",
    "texts in consecutive slots": lambda: (
        f"t IN ({_quoted(texts_hashing_to([(i * 0x9E37 % 65536) << 48 | 0x3C0000 | i for i in range(120)]))})"
    ),
    "bigints with one slot": lambda: f"n IN ({', '.join(map(str, colliding_integers(300)))})",
    "bigints against an integer column": lambda: (
        f"k IN ({', '.join(map(str, colliding_integers(300)))})"
    ),
    "doubles with one slot": lambda: "f IN ({})".format(
        ", ".join(
            repr(v)
            for i in range(1, 400)
            if math.isfinite(v := double_hashing_to((i << 40) | 0x77777))
        )
    ),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_lists_are_refused_before_any_charge(engine: Engine, name: str) -> None:
    error = _refused(engine, f"SELECT COUNT(*) AS n FROM ev WHERE {CRAFTED[name]()}")
    assert error.code == "unsupported_sql"
    assert "fall together" in error.message and "nothing was charged" in error.hint


def test_a_list_inside_an_aggregate_is_checked(engine: Engine) -> None:
    listed = _quoted(colliding_texts(300))
    error = _refused(
        engine, f"SELECT SUM(CASE WHEN t IN ({listed}) THEN 1 ELSE 0 END) AS n FROM ev"
    )
    assert error.code == "unsupported_sql"


def test_the_doubles_are_checked_as_doubles(engine: Engine) -> None:
    """The same constants are harmless as texts: the layout is the compared type's."""
    values = [
        v for i in range(1, 400) if math.isfinite(v := double_hashing_to((i << 40) | 0x77777))
    ]
    listed = ", ".join(f"'{v!r}'" for v in values)
    engine.run(QueryRequest(f"SELECT COUNT(*) AS n FROM ev WHERE t IN ({listed})", epsilon=0.1))


@pytest.mark.parametrize(
    "where",
    [
        "t IN ({})".format(_quoted([f"v{i}" for i in range(900)])),
        "n IN ({})".format(", ".join(str(i * 7919) for i in range(1500))),
        "f IN ({})".format(", ".join(f"{i / 7.0!r}" for i in range(600))),
        "d IN ({})".format(", ".join(f"{i}.000" for i in range(400))),
        f"t IN ({_quoted([colliding_texts(1)[0]] * 900)})",  # one value, 900 times
        f"t NOT IN ({_quoted([f'v{i}' for i in range(30)])})",
    ],
)
def test_honest_long_lists_are_answered(engine: Engine, where: str) -> None:
    result = engine.run(QueryRequest(f"SELECT COUNT(*) AS n FROM ev WHERE {where}", epsilon=0.1))
    assert len(result.rows) == 1


# Every scope a list may sit in: a semi-join's subquery, a UNION ALL arm, a per-person
# subquery, a join's ON, a CTE (the demo database, tests/proxy/conftest.py).
SCOPES = (
    "SELECT COUNT(*) AS n FROM users u WHERE EXISTS (SELECT 1 FROM prompts s "
    "WHERE s.user_id = u.user_id AND s.model IN ({}))",
    "SELECT COUNT(*) AS n FROM users u WHERE u.user_id IN "
    "(SELECT s.user_id FROM prompts s WHERE s.model IN ({}))",
    "SELECT model, COUNT(*) AS n FROM (SELECT user_id, model FROM prompts WHERE model IN ({}) "
    "UNION ALL SELECT user_id, category FROM tickets) t GROUP BY model",
    "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(*) AS n FROM prompts "
    "WHERE model IN ({}) GROUP BY user_id) t",
    "SELECT u.region, COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
    "AND p.model IN ({}) GROUP BY u.region",
    "WITH x AS (SELECT * FROM prompts WHERE model IN ({})) SELECT COUNT(*) AS n FROM x",
)


@pytest.mark.parametrize("template", SCOPES)
def test_lists_in_every_scope_are_checked(demo_engine: Engine, template: str) -> None:
    honest = _quoted([f"m{i}" for i in range(40)])
    assert demo_engine.run(QueryRequest(template.format(honest), epsilon=0.1)).rows is not None
    error = _refused(demo_engine, template.format(_quoted(colliding_texts(40))))
    assert error.code == "unsupported_sql" and "fall together" in error.message


TYPED_LISTS = {
    "t": ["'v1'", "'w'", "NULL", "'v2'"],
    "k": ["1", "'3'", "NULL", "1.5", "2"],
    "f": ["0.5", "2", "'nan'", "'inf'", "1e3"],
    "d": ["1.5", "2", "1e3", "0.125", "7"],
    "dt": ["DATE '2020-01-02'", "'2020-02-03'", "TIMESTAMP '2020-01-01 10:00:00'"],
    "ts": ["TIMESTAMP '2020-01-01 01:00:00'", "'2020-01-01'", "DATE '2020-01-02'"],
    "b": ["TRUE", "FALSE", "NULL"],
    "m": ["'sad'", "'ok'", "'happy'"],
    "u": ["'00000000-0000-0000-0000-000000000001'", "'00000000-0000-0000-0000-000000000002'"],
    "ut": ["1", "250", "7", "0"],
    "h": ["1", "-100000000000000000000", "12345678901234567890"],
    "iv": ["INTERVAL 1 DAY", "INTERVAL 2 HOUR", "INTERVAL '24 hours'"],
    "upper(t)": ["'V1'", "'V2'", "'X'"],
}


def test_lists_of_every_type_answer_or_refuse_cleanly(tmp_path: Path) -> None:
    """Lists on columns of many types (an ENUM, a UUID, an unsigned integer, a HUGEINT,
    an INTERVAL...) with constants of other types among them: each is answered or
    refused with dpsql's own error, never an internal one."""
    db = tmp_path / "typed.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        con.execute(
            "CREATE TABLE ev AS SELECT i % 50 + 1 AS user_id, 'v' || (i % 37) AS t, "
            "CAST(i % 9 AS INTEGER) AS k, i / 7.0 AS f, CAST(i % 11 AS DECIMAL(18, 3)) AS d, "
            "DATE '2020-01-01' + (i % 100)::INT AS dt, "
            "TIMESTAMP '2020-01-01' + INTERVAL (i) MINUTE AS ts, i % 2 = 0 AS b, "
            "CAST(['sad', 'ok', 'happy'][i % 3 + 1] AS mood) AS m, "
            "CAST(printf('00000000-0000-0000-0000-%012d', i % 5) AS UUID) AS u, "
            "CAST(i % 200 AS UTINYINT) AS ut, CAST(i AS HUGEINT) AS h, INTERVAL (i) DAY AS iv "
            "FROM range(0, 300) r(i)"
        )
    text = ev_policy(100)
    engine = Engine(parse_policy(text.format(db=db, folder=tmp_path), base_dir=tmp_path))
    rng = random.Random(3)
    answered = 0
    try:
        for column, constants in TYPED_LISTS.items():
            for negated in ("", "NOT "):
                items = ", ".join(rng.choice(constants) for _ in range(rng.randrange(5, 30)))
                sql = f"SELECT COUNT(*) AS c FROM ev WHERE {column} {negated}IN ({items})"
                try:
                    engine.run(QueryRequest(sql, epsilon=0.1))
                    answered += 1
                except DPSQLError:
                    pass
    finally:
        engine.close()
    assert answered >= 20  # most are ordinary lists
