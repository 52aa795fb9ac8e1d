"""Issue #13 §4: an outer query over a released aggregate (a FROM-subquery or a CTE) is
post-processing: the inner query is charged once, the outer costs nothing, equals the
same SQL run on the inner answer, and carries simulated intervals."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
import sqlglot

from proxy import nested
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest
from tests.proxy.conftest import demo_policy

INNER = "SELECT region, COUNT(*) AS n, SUM(age) AS s FROM users GROUP BY region"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, demo_db: Path):
    root = tmp_path_factory.mktemp("nested")
    db = root / "copy.duckdb"
    shutil.copy(demo_db, db)
    e = Engine(demo_policy(root, db))
    yield e
    e.close()


@pytest.mark.parametrize(
    "outer",
    [
        f"SELECT AVG(s) AS a, SUM(n) AS total FROM ({INNER})",
        f"WITH t AS ({INNER}) SELECT region, n * 100.0 / SUM(n) OVER () AS pct FROM t "
        "ORDER BY region",
        f"SELECT region, s / n AS mean_age FROM ({INNER}) AS x WHERE n > 100 ORDER BY region",
        # Row-level CTEs between the outer query and the aggregate one (a chain).
        f"WITH t AS ({INNER}), u AS (SELECT region, s / n AS mean_age, n FROM t WHERE n > 0) "
        "SELECT COUNT(*) AS groups, AVG(mean_age) AS m FROM u",
        f"WITH t AS ({INNER}), u AS (SELECT region, n / 2 AS n2 FROM t), "
        "v AS (SELECT region AS r, n2 + 1 AS n3 FROM u) SELECT r, n3 FROM v ORDER BY r",
    ],
)
def test_outer_queries_are_post_processing(engine: Engine, outer: str) -> None:
    inner = engine.run(QueryRequest(INNER, epsilon=0.8))
    charges = len([e for e in engine.ledger.history() if e.kind == "charge"])
    r = engine.run(QueryRequest(outer, epsilon=0.8))
    assert r.privacy.cached and r.privacy.epsilon == 0  # the inner release, replayed
    assert len([e for e in engine.ledger.history() if e.kind == "charge"]) == charges
    # The same SQL over the inner answer gives the same numbers.
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT * FROM (VALUES "
        + ", ".join(f"('{k}', {n}, {s})" for k, n, s in inner.rows)
        + ") AS v(region, n, s)"
    )
    local = (
        outer.replace(f"WITH t AS ({INNER}) ", "")
        .replace(f"t AS ({INNER}), ", "")
        .replace(f"({INNER})", "t")
    )
    expected = [tuple(x) for x in con.execute(local).fetchall()]
    assert len(expected) == len(r.rows)
    for want, got in zip(expected, r.rows, strict=True):
        for a, b in zip(want, got, strict=True):
            assert b == (pytest.approx(a) if isinstance(a, float) else a)
    numeric = [
        w
        for row, widths in zip(r.rows, r.intervals, strict=True)
        for v, w in zip(row, widths, strict=True)
        if isinstance(v, float)
    ]
    assert numeric and all(w is not None and w > 0 for w in numeric)


def test_select_star_over_the_answer_shows_every_column(engine: Engine) -> None:
    """``SELECT *`` over the released answer (directly or through a chain) shows all of
    its columns, not only the first (the width once came from the number of select
    items, and ``*`` is one)."""
    inner = engine.run(QueryRequest(INNER, epsilon=0.8))
    by_region = {row[0]: row for row in inner.rows}
    star = engine.run(
        QueryRequest(f"SELECT * FROM ({INNER}) AS x ORDER BY region", epsilon=0.8)
    )
    assert star.columns == ("region", "n", "s")
    assert sorted(star.rows) == sorted(inner.rows)
    assert all(len(w) == 3 for w in star.intervals)
    chain = engine.run(
        QueryRequest(
            f"WITH t AS ({INNER}), u AS (SELECT region, n * 2 AS m FROM t) "
            "SELECT * FROM u ORDER BY region",
            epsilon=0.8,
        )
    )
    assert chain.columns == ("region", "m")
    assert chain.rows == [(k, by_region[k][1] * 2) for k in sorted(by_region)]


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT __row, * FROM ({INNER}) AS x",
        f"SELECT region, n AS __row FROM ({INNER}) AS x",
    ],
)
def test_dpsqls_row_index_is_not_a_name_of_the_outer_query(engine: Engine, sql: str) -> None:
    """Reading ``__row`` showed each released row's index and dropped a column; naming a
    column so dropped it (a probe, 2026-12-02). Both are refused before any charge."""
    before = engine.ledger.history(limit=10**6)
    with pytest.raises(DPSQLError) as refused:
        engine.run(QueryRequest(sql, epsilon=0.8))
    assert refused.value.code == "unsupported_sql" and "__row" in refused.value.message
    assert engine.ledger.history(limit=10**6) == before


def test_a_per_person_inner_query_is_not_a_release(engine: Engine) -> None:
    """Grouped by the person id, the inner query is never released: the whole query is
    a per-person aggregate (proxy/per_person_values.py), charged as one release."""
    sql = "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(*) AS n FROM users GROUP BY user_id) x"
    r = engine.run(QueryRequest(sql, epsilon=0.5))
    assert not r.privacy.cached and r.privacy.epsilon == pytest.approx(0.5)
    assert not any("post-processing" in w for w in r.warnings)
    with pytest.raises(DPSQLError) as info:
        engine.run(QueryRequest("SELECT user_id, COUNT(*) AS n FROM users GROUP BY user_id"))
    assert info.value.code == "unsupported_sql"


def test_a_chain_must_read_only_its_ctes(engine: Engine) -> None:
    """A CTE off the chain, or a row-level CTE reading a private table, is not a query
    over a released answer: it goes the ordinary way and is refused there, uncharged."""
    charges = len([e for e in engine.ledger.history() if e.kind == "charge"])
    for sql in (
        f"WITH t AS ({INNER}), u AS (SELECT region, n FROM t), w AS (SELECT 1 AS one) "
        "SELECT COUNT(*) AS c FROM u",
        f"WITH t AS ({INNER}), u AS (SELECT region, COUNT(*) AS k FROM t GROUP BY region) "
        "SELECT SUM(k) AS c FROM u",
    ):
        with pytest.raises(DPSQLError):
            engine.run(QueryRequest(sql, epsilon=0.5))
    assert len([e for e in engine.ledger.history() if e.kind == "charge"]) == charges


def test_an_outer_query_over_a_public_domain_is_told_of_its_empty_groups(
    engine: Engine, pums_engine: Engine
) -> None:
    """A public domain releases every declared key, empty ones included, and an outer
    COUNT(*) or AVG counts those rows too (an audit: 101 PUMS age groups where the data
    has 73): the answer says so. Over a private key (partition selection) it does not."""
    sql = "SELECT COUNT(*) AS groups FROM (SELECT age, COUNT(*) AS n FROM PUMS.PUMS GROUP BY age) t"
    result = pums_engine.run(QueryRequest(sql, epsilon=1.0))
    groups = result.privacy.partition["groups"]
    assert result.rows == [(groups,)]
    assert any(f"each of the {groups} declared values" in w for w in result.warnings)
    private = pums_engine.run(
        QueryRequest(
            "SELECT COUNT(*) AS g FROM (SELECT income, COUNT(*) AS n FROM PUMS.PUMS "
            "GROUP BY income) t",
            epsilon=1.0,
        )
    )
    assert not any("declared values" in w for w in private.warnings)
    assert any("partition selection" in w for w in private.warnings)


def _charges(engine: Engine) -> int:
    return len([e for e in engine.ledger.history() if e.kind == "charge"])


@pytest.mark.parametrize(
    ("outer", "expected"),
    [
        # A cast the released values do not fit: NULL, as the ordinary outer layer's TRY.
        (f"SELECT region, CAST(n AS TINYINT) AS t FROM ({INNER}) ORDER BY region", None),
        # ... inside an aggregate, in the grouping, and in a row-level CTE.
        (f"SELECT SUM(CAST(n AS TINYINT)) AS t FROM ({INNER})", None),
        (
            f"SELECT CAST(n AS TINYINT) AS t, COUNT(*) AS c FROM ({INNER}) "
            "GROUP BY CAST(n AS TINYINT)",
            None,
        ),
        (f"WITH t AS ({INNER}), u AS (SELECT CHR(CAST(n - n - 1 AS INT)) AS l FROM t) SELECT l FROM u", None),
        # No character has a negative code point: DuckDB raises, the outer query's NULL.
        (f"SELECT region, CHR(CAST(n - n - 1 AS INT)) AS l FROM ({INNER}) ORDER BY region", None),
    ],
)
def test_the_outer_query_cannot_fail_on_the_released_values(
    engine: Engine, outer: str, expected: object
) -> None:
    """The outer query runs after the inner answer is charged: what would raise on the
    released values gives NULL, as in the ordinary outer layer (review 2026-12-04: a
    cast to TINYINT was charged and then refused)."""
    before = _charges(engine)
    r = engine.run(QueryRequest(outer, epsilon=0.55))
    assert _charges(engine) - before <= 1  # the inner answer's one charge, if new
    assert r.rows and all(row[-1] is expected or row[0] is expected for row in r.rows)


def test_a_failure_above_an_aggregate_is_reported_and_the_retry_is_free(
    engine: Engine,
) -> None:
    """DuckDB allows no TRY around an aggregate: a failure there, on the released values,
    says that the inner answer is paid for and that a corrected query costs nothing."""
    engine.run(QueryRequest(INNER, epsilon=0.45))
    before = _charges(engine)
    with pytest.raises(DPSQLError) as caught:
        engine.run(QueryRequest(f"SELECT CHR(CASE WHEN SUM(n) > 100 THEN 2000000 ELSE 65 END) AS l FROM ({INNER})", epsilon=0.45))
    assert caught.value.code == "bad_request"
    assert "costs nothing" in caught.value.hint
    fixed = engine.run(
        QueryRequest(
            f"SELECT CHR(CAST(GREATEST(SUM(n) - SUM(n), 65) AS INT)) AS l FROM ({INNER})",
            epsilon=0.45,
        )
    )
    assert fixed.rows == [("A",)] and _charges(engine) == before


@pytest.mark.parametrize(
    "outer",
    [
        # a GROUP BY expression inside a larger one, in HAVING, by ordinal
        f"SELECT n > 100 AS big, (n > 100) AND TRUE AS b2, COUNT(*) AS c FROM ({INNER}) "
        "GROUP BY n > 100",
        f"SELECT n > 100 AS big, COUNT(*) AS c FROM ({INNER}) GROUP BY n > 100 "
        "HAVING NOT (n > 100)",
        f"SELECT n > 100 AS big, COUNT(*) AS c FROM ({INNER}) GROUP BY 1 HAVING n > 100",
        f"SELECT n % 2 AS k, (n % 2) * 10 + SUM(s) AS m FROM ({INNER}) GROUP BY n % 2",
        f"SELECT CAST(n AS VARCHAR) AS c, COUNT(*) AS x FROM ({INNER}) "
        "GROUP BY CAST(n AS VARCHAR) ORDER BY CAST(n AS VARCHAR) || 'x'",
        # an aggregate's alias in HAVING, ORDER BY and a later select item
        f"SELECT n > 100 AS big, SUM(s) AS t FROM ({INNER}) GROUP BY 1 HAVING t > 0",
        f"SELECT n > 100 AS big, SUM(s) AS t FROM ({INNER}) GROUP BY 1 ORDER BY t * -1",
        f"SELECT SUM(n) AS t, t * 2 AS u FROM ({INNER})",
        # ROW_NUMBER is no aggregate to sqlglot, but DuckDB allows no TRY around it
        f"SELECT region, ROW_NUMBER() OVER (ORDER BY n DESC) AS r FROM ({INNER}) "
        "ORDER BY region",
    ],
)
def test_total_forms_keep_every_outer_query_that_ran_before(engine: Engine, outer: str) -> None:
    """Queries a review (2026-12-04) found refused once the outer query was made total:
    each is answered as the same SQL over the released rows answers it."""
    inner = engine.run(QueryRequest(INNER, epsilon=0.8))
    r = engine.run(QueryRequest(outer, epsilon=0.8))
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE rel AS SELECT * FROM (VALUES "
        + ", ".join(f"('{k}', {n}, {s})" for k, n, s in inner.rows)
        + ") AS v(region, n, s)"
    )
    local = con.execute(outer.replace(f"({INNER})", "rel")).fetchall()
    assert sorted(map(str, r.rows)) == sorted(map(str, local))


MONTHLY = "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY 1"


@pytest.mark.parametrize(
    "outer",
    [
        "SELECT EXTRACT(year FROM m) AS y, SUM(n) AS n FROM monthly GROUP BY 1 ORDER BY 1",
        "SELECT year(m) AS y, SUM(n) AS n FROM monthly GROUP BY 1 ORDER BY 1",
        "SELECT date_trunc('year', m) AS y, SUM(n) AS n FROM monthly GROUP BY 1 ORDER BY 1",
        "SELECT m + INTERVAL 1 DAY AS d, n FROM monthly ORDER BY 1",
    ],
    ids=["extract", "year", "date_trunc", "interval"],
)
def test_date_functions_over_a_released_date_key(small_demo: Engine, outer: str) -> None:
    """The stand-in row that checks an outer query before the charge had NULL keys typed
    "null" by Arrow, on which DuckDB cannot choose a date function: the usual "monthly,
    then by year" was refused (a corpus of notebook SQL, 2026-12-06). Keys keep their
    released type now, on the stand-in and on a release of no rows alike."""
    inner = small_demo.run(QueryRequest(MONTHLY, epsilon=50.0))
    assert inner.rows  # months were released
    got = small_demo.run(QueryRequest(f"WITH monthly AS ({MONTHLY}) {outer}", epsilon=50.0))
    assert got.privacy.cached and got.rows
    years = {row[0].year if hasattr(row[0], "year") else int(row[0]) for row in got.rows}
    assert years == {m.year for m, _ in inner.rows} or "INTERVAL" in outer


def test_released_columns_keep_their_types_without_values() -> None:
    """A release of no rows, or a key column of NULLs only, keeps its column types."""
    import datetime as dt

    import pyarrow as pa

    from proxy import nested

    types = (pa.timestamp("us"), pa.int64())
    for rows in ([], [(None, 3)], [(dt.datetime(2024, 5, 1), 2)]):
        table = nested.table_of(("m", "n"), rows, types)
        assert table.schema.field("m").type == pa.timestamp("us")
        assert table.schema.field("n").type == pa.int64()
    untyped = nested.table_of(("m", "n"), [(None, 3)])
    assert pa.types.is_null(untyped.schema.field("m").type)  # what Arrow reads alone


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, COUNT(*) AS n FROM users GROUP BY region",
        "SELECT s.* FROM (SELECT region, COUNT(*) AS n FROM users GROUP BY region) s",
        "SELECT x.region, x.n * 2 AS twice FROM (SELECT region, COUNT(*) AS n FROM users "
        "GROUP BY region) AS x WHERE x.n > 0",
        "SELECT * FROM (SELECT plan, AVG(age) FROM users GROUP BY plan) t",
    ],
)
def test_output_columns_are_planned_without_a_charge(engine: Engine, sql: str) -> None:
    """What a door's statement Describe tells a client before running anything (the
    PostgreSQL door named a star's columns "?column?", one column, and sent rows of two:
    a probe, 2026-12-06): the names the answer then has, and no ledger change."""
    before = engine.ledger.history()
    planned = engine.output_columns(QueryRequest(sql, epsilon=0.7))
    assert planned is not None and engine.ledger.history() == before
    answered = engine.run(QueryRequest(sql, epsilon=0.7))
    assert tuple(name for name, _ in planned) == answered.columns
    # and the types the values have (an empty answer is typed from these)
    python = {"BIGINT": int, "DOUBLE": float, "VARCHAR": str}
    for (_, kind), values in zip(planned, zip(*answered.rows, strict=True), strict=True):
        assert all(v is None or isinstance(v, python[kind]) for v in values), (kind, values)


@pytest.mark.parametrize(
    "outer",
    [
        # aggregated: every region's MAX(1) ties, and LIMIT picks among them
        "SELECT region, MAX(1) AS one FROM (SELECT region, plan, COUNT(*) AS n FROM users "
        "GROUP BY region, plan) AS t GROUP BY region ORDER BY one LIMIT 2",
        "SELECT DISTINCT n FROM (SELECT region, plan, COUNT(*) AS n FROM users "
        "GROUP BY region, plan) AS t ORDER BY n % 1 LIMIT 2",
        # row-wise: every row's n * 0 ties
        "SELECT region, plan FROM (SELECT region, plan, COUNT(*) AS n FROM users "
        "GROUP BY region, plan) AS t ORDER BY n * 0 LIMIT 3 OFFSET 1",
    ],
)
def test_rows_a_tied_limit_keeps_do_not_hang_on_the_engines_order(
    engine: Engine, outer: str
) -> None:
    # The outer query's ORDER BY ties and its LIMIT chooses among the tied rows: the
    # choice must not be whatever order DuckDB happens to read or group them in (the same
    # release could be answered otherwise, and its simulated copies, which break ties by
    # the rows themselves, would disagree with what is shown).
    found = nested.split(sqlglot.parse_one(outer, dialect="duckdb"))
    assert found is not None
    rows = [
        (region, plan, 100 + 7 * i + j)
        for i, region in enumerate(("east", "north", "south", "west"))
        for j, plan in enumerate(("free", "pro", "team"))
    ]
    released = nested.table_of(("region", "plan", "n"), rows)  # with each row's index
    shown = nested.displayed(found).sql(dialect="duckdb")
    answers = {
        tuple(engine.post.run(shown, released.take(order))[1])
        for order in (list(range(12)), list(range(11, -1, -1)), [*range(1, 12, 2), *range(0, 12, 2)])
    }
    assert len(answers) == 1, answers


@pytest.mark.parametrize(
    "outer",
    [
        # a LIST-valued key (a cast from text) and a MAP one: unhashable in Python
        f"SELECT CAST('[' || CAST(ROUND(n) AS BIGINT) || ']' AS BIGINT[]) AS l, SUM(s) AS t "
        f"FROM ({INNER}) GROUP BY 1",
        f"SELECT CAST('{{1=2}}' AS MAP(INT, INT)) AS l, SUM(n) AS t FROM ({INNER}) GROUP BY 1",
    ],
)
def test_the_simulation_of_a_grouped_outer_query_cannot_escape(engine: Engine, outer: str) -> None:
    """The simulated widths run after the inner answer is charged: a key of a kind
    Python cannot hash (a list, a map) escaped as a TypeError (an internal error) after
    the charge (an adversarial review, 2026-12-06). The answer stands; its doubt is said
    in words."""
    r = engine.run(QueryRequest(outer, epsilon=0.65))
    assert len(r.rows) >= 1


@pytest.mark.parametrize(
    ("outer", "named"),
    [("REGR_SLOPE(n, a)", "REGR_SLOPE"), ("COVAR_SAMP(n, a)", "COVAR_SAMP")],
)
def test_a_refused_outer_function_is_named_as_written(outer: str, named: str) -> None:
    # (named by sqlglot's class key: REGRSLOPE, COVARSAMP)
    tree = sqlglot.parse_one(
        f"SELECT {outer} FROM (SELECT model, COUNT(*) AS n, AVG(tokens_in) AS a "
        "FROM prompts GROUP BY model) t",
        read="duckdb",
    )
    found = nested.split(tree)
    assert found is not None
    with pytest.raises(DPSQLError) as caught:
        nested.check_outer(found.outer)
    assert caught.value.message.startswith(f"{named} is not allowed")
