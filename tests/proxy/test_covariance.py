"""CORR, COVAR_POP, COVAR_SAMP and REGR_* (proxy/covariance.py): written as AVG, VAR_POP
and COUNT of the pairs where both arguments are not NULL, so that the rules every such
aggregate goes through bound them. The expansion computes SQL's definitions on exact
aggregates; through the engine, with caps that cut nobody and a budget where the noise
vanishes, the answers are DuckDB's own; with real noise they stay within the ranges the
definitions give and carry their uncertainty."""

from __future__ import annotations

import math

import duckdb
import pytest
import sqlglot

from proxy import spellings
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

FUNCTIONS = (
    "CORR",
    "COVAR_POP",
    "COVAR_SAMP",
    "REGR_SLOPE",
    "REGR_INTERCEPT",
    "REGR_COUNT",
    "REGR_R2",
    "REGR_AVGX",
    "REGR_AVGY",
    "REGR_SXX",
    "REGR_SYY",
    "REGR_SXY",
)


def _close(got: object, want: object, rel: float, abs_: float = 1e-9) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return math.isclose(float(got), float(want), rel_tol=rel, abs_tol=abs_)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_expansion_is_sqls_definition_on_exact_aggregates(name: str) -> None:
    # y is NULL on some rows and x on others: each function reads only the pairs where
    # both are present (a NULL on either side drops the row), not each column's own rows.
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i % 3 AS g, "
        "CASE WHEN i % 7 = 0 THEN NULL ELSE (i * 37) % 101 END AS y, "
        "CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 13) % 29 + i / 10.0 END AS x "
        "FROM range(200) AS r(i)"
    )
    native = f"SELECT g, {name}(y, x) AS v FROM t GROUP BY g ORDER BY g"
    expanded = spellings.normalize(sqlglot.parse_one(native, read="duckdb")).sql(dialect="duckdb")
    assert name not in expanded.upper().replace("VAR_POP", "")  # written out, not passed on
    want = con.execute(native).fetchall()
    got = con.execute(expanded).fetchall()
    assert len(got) == len(want) == 3
    for (_, g), (_, w) in zip(got, want, strict=True):
        assert _close(g, w, 1e-9), (name, got, want)


def test_a_window_s_aggregate_is_left_as_written() -> None:
    tree = spellings.normalize(sqlglot.parse_one("SELECT CORR(a, b) OVER () FROM t"))
    assert tree.find(sqlglot.exp.Corr) is not None


def test_corr_of_a_and_b_and_of_b_and_a_read_the_same_statistics(pums_engine: Engine) -> None:
    one = pums_engine.explain(QueryRequest("SELECT CORR(age, income) FROM PUMS.PUMS", epsilon=1))
    both = pums_engine.explain(
        QueryRequest(
            "SELECT CORR(age, income), CORR(income, age), REGR_R2(income, age) FROM PUMS.PUMS",
            epsilon=1,
        )
    )
    assert len(both.plan.statistics) == len(one.plan.statistics)


def test_answers_are_duckdbs_when_the_noise_vanishes(
    pums_near_exact: Engine, pums_exact: duckdb.DuckDBPyConnection
) -> None:
    items = ", ".join(f"{f}(income, age) AS {f.lower()}" for f in FUNCTIONS)
    sql = f"SELECT sex, {items} FROM PUMS.PUMS GROUP BY sex ORDER BY sex"
    got = pums_near_exact.run(QueryRequest(sql, rho=1e6))
    want = pums_exact.execute(sql).fetchall()
    assert len(got.rows) == len(want) == 2
    for g_row, w_row, widths in zip(got.rows, want, got.intervals, strict=True):
        for name, g, w, width in zip(got.columns[1:], g_row[1:], w_row[1:], widths[1:], strict=True):
            # within 4 times the cell's stated 95% half-width (the oracle's tolerance);
            # a count's noise is below 0.01 at this budget
            assert width is not None and width < 0.05 * max(abs(w), 1e-3), (name, width, w)
            assert abs(g - w) <= 4 * width + 1e-9, (name, g, w, width)


def test_noisy_answers_keep_the_definitions_ranges(pums_engine: Engine) -> None:
    sql = (
        "SELECT educ, CORR(age, income) AS r, REGR_R2(income, age) AS r2, "
        "REGR_COUNT(income, age) AS n, COVAR_SAMP(age, income) AS c, "
        "CORR(age, 7) AS flat FROM PUMS.PUMS GROUP BY educ"
    )
    answer = pums_engine.run(QueryRequest(sql, epsilon=0.5))
    assert len(answer.rows) == 16
    for row, widths in zip(answer.rows, answer.intervals, strict=True):
        _, r, r2, n, c, flat = row
        assert r is None or -1.0 <= r <= 1.0
        assert r2 is None or 0.0 <= r2 <= 1.0
        assert isinstance(n, int) and n >= 0
        assert isinstance(c, float) and math.isfinite(c) and widths[4] is not None
        # a constant has no spread: NULL (SQL's NaN or NULL), never an infinity or ±1
        assert flat is None
    # at this budget over 16 groups of PUMS the correlations are mostly noise: said
    assert any("'r'" in w for w in answer.warnings)


def test_an_unbounded_argument_is_refused_before_any_charge(pums_engine: Engine) -> None:
    before = pums_engine.ledger.history(limit=100000)[-1].id if pums_engine.ledger.history() else 0
    with pytest.raises(DPSQLError) as caught:
        pums_engine.run(QueryRequest("SELECT CORR(age, pid) FROM PUMS.PUMS", epsilon=1.0))
    assert caught.value.code == "unsupported_sql"
    assert "pid" in caught.value.message and "declare lower/upper" in (caught.value.hint or "")
    after = pums_engine.ledger.history(limit=100000)
    assert (after[-1].id if after else 0) == before


@pytest.mark.parametrize("kind", ["TINYINT", "INTEGER", "DECIMAL(9, 2)"])
def test_the_product_of_narrow_arguments_is_computed_as_sql_computes_it(kind: str) -> None:
    # SQL's CORR and COVAR read their arguments as DOUBLE: the product of two INTEGERs
    # of 100,000 or two TINYINTs of 100 is no overflow there. Written as AVG(Y * X) in
    # the arguments' own type it overflowed (an error here; under the engine's TRY a
    # NULL that left the row out of AVG(Y * X) alone).
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE t AS SELECT CAST(i % 100 AS {kind}) AS y, "
        f"CAST((i * 7) % 90 AS {kind}) AS x FROM range(200) AS r(i)"
    )
    if kind == "INTEGER":
        con.execute("UPDATE t SET y = y * 1000, x = x * 1000")
    for name in ("COVAR_POP", "REGR_SLOPE", "CORR"):
        native = f"SELECT {name}(y, x) FROM t"
        expanded = spellings.normalize(sqlglot.parse_one(native, read="duckdb"))
        want = con.execute(native).fetchone()
        got = con.execute(expanded.sql(dialect="duckdb")).fetchone()
        assert want is not None and got is not None
        assert _close(got[0], want[0], 1e-9), (name, got, want)


def test_integer_arguments_answer_sqls_covariance(
    pums_near_exact: Engine, pums_exact: duckdb.DuckDBPyConnection
) -> None:
    sql = (
        "SELECT COVAR_POP(CAST(income AS INTEGER), CAST(income AS INTEGER)) AS c, "
        "REGR_SLOPE(CAST(income AS INTEGER), CAST(age AS TINYINT)) AS b FROM PUMS.PUMS"
    )
    got = pums_near_exact.run(QueryRequest(sql, rho=1e6))
    want = pums_exact.execute(sql).fetchall()
    for g, w, width in zip(got.rows[0], want[0], got.intervals[0], strict=True):
        assert width is not None and abs(g - w) <= 4 * width + 1e-9, (g, w, width)


def _bulky(items: int, terms: int) -> str:
    arg = " + ".join(["age"] * terms)
    listed = ", ".join(f"REGR_R2(income, {arg} + {i})" for i in range(items))
    return f"SELECT {listed} FROM PUMS.PUMS"


def test_the_expansions_copies_are_bounded_before_any_charge(pums_engine: Engine) -> None:
    # Each REGR_R2 writes its arguments out about 40 times (and the bounding three times
    # each again): 20 of them over 30-term sums, 4,000 characters within the node limit,
    # took 23 s to plan (VAR_POP of the same sums: under 2 s). Refused as a simple
    # CASE's operand copies are (spellings.MAX_CASE_COPIES), before the charge.
    with pytest.raises(DPSQLError) as caught:
        spellings.normalize(sqlglot.parse_one(_bulky(20, 30), read="duckdb"))
    assert caught.value.code == "unsupported_sql" and "REGR_R2" in caught.value.message
    before = len(pums_engine.ledger.history(limit=10**6))
    with pytest.raises(DPSQLError):
        pums_engine.run(QueryRequest(_bulky(20, 30), epsilon=1.0))
    assert len(pums_engine.ledger.history(limit=10**6)) == before
    # every function over plain columns, and a few over sums, stay well within
    items = ", ".join(f"{f}(income, age)" for f in FUNCTIONS)
    spellings.normalize(sqlglot.parse_one(f"SELECT {items} FROM t", read="duckdb"))
    spellings.normalize(sqlglot.parse_one(_bulky(3, 10), read="duckdb"))
