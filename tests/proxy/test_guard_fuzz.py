"""Differential fuzzing of proxy/guarded_arithmetic.py against DuckDB's TRY: random
nested expressions (tests/proxy/guard_fuzz.py) over the edge rows of
test_guarded_arithmetic.py, each guarded and run beside its plain form. A fixed few
hundred run by default; `make test-slow` runs thousands."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from proxy.guarded_arithmetic import guarded_sql
from tests.proxy.guard_fuzz import Expressions
from tests.proxy.test_guarded_arithmetic import ROWS, TYPES, _query

# What the guards' SQL may grow to beside the plain form (the worst of 7,000 fuzzed
# expressions was 30 times; a form copied at every level grew a thousandfold).
_GROWTH = 60


@pytest.fixture(scope="module")
def db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET threads = 1")  # rows in rowid order, with no other work beside
    con.execute(
        "CREATE TABLE t (i INTEGER, b BIGINT, s SMALLINT, h HUGEINT, ts TIMESTAMP, dt DATE, "
        "d DOUBLE, m DECIMAL(18, 2), w DECIMAL(38, 0), n DECIMAL(9, 4)); "
        f"INSERT INTO t VALUES {ROWS}"
    )
    return con


def _values(db: duckdb.DuckDBPyConnection, sql: str) -> list[str | None]:
    """The values as text (NaN equal to NaN; INTERVALs and DECIMALs as DuckDB writes
    them, so a changed type shows)."""
    inner = sql.removesuffix(" ORDER BY rowid")
    return [v for (v,) in db.execute(f"SELECT CAST(v AS VARCHAR) FROM ({inner})").fetchall()]


def _untried(sql: str) -> str:
    tree = sqlglot.parse_one(sql, read="duckdb")
    for node in list(tree.find_all(exp.Try)):
        node.replace(node.this)
    return tree.sql(dialect="duckdb")


def _fuzz(db: duckdb.DuckDBPyConnection, seeds: range, *, choices: bool) -> int:
    """Checks each seed's expression that DuckDB runs in its plain form; the count run."""
    ran = 0
    for seed in seeds:
        expression = Expressions(seed, choices=choices).next()
        plain = _query(expression)
        try:
            want = _values(db, plain)
        except duckdb.Error:
            continue  # not bound by DuckDB (a generated mismatch of types)
        ran += 1
        guarded = guarded_sql(plain, TYPES)
        assert len(guarded) <= _GROWTH * len(plain), (seed, expression)
        got = _values(db, guarded)  # binds
        _values(db, _untried(guarded))  # and, without TRY, raises on no row
        if choices:
            continue
        # Nothing here turns a NULL operand into a value: each value is TRY's, or NULL
        # (at or near DuckDB's limits), and NULL where TRY is NULL, but for a SMALLINT
        # beside an integer literal, which DuckDB narrows to SMALLINT and overflows
        # there (the module's docstring: the guard gives the exact value).
        narrowed = any(c.name == "s" for c in sqlglot.parse_one(plain, read="duckdb").find_all(exp.Column))
        for row, (w, g) in enumerate(zip(want, got, strict=True)):
            assert g == w or g is None or (w is None and narrowed), (seed, expression, row, w, g)
    return ran


@pytest.mark.parametrize("choices", [False, True])
def test_fuzzed_expressions_give_trys_values_without_raising(
    db: duckdb.DuckDBPyConnection, choices: bool
) -> None:
    assert _fuzz(db, range(150), choices=choices) > 100


@pytest.mark.slow
@pytest.mark.parametrize("choices", [False, True])
def test_many_fuzzed_expressions(db: duckdb.DuckDBPyConnection, choices: bool) -> None:
    _fuzz(db, range(150, 3150), choices=choices)
