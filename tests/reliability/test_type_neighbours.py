"""Neighbour tests on column types the demo data lacks (a probe of 2026-12-02 found each
of these failing after the charge, on D only):

* a DECIMAL(38, 37) or FLOAT column compared with a literal its type cannot hold, in a
  WHERE clause (DuckDB converted the literal per row, outside TRY);
* a per-person SUM or AVG of a HUGEINT column, whose raw rows overflowed the 128-bit sum
  (their declared bounds say nothing of rows before any clamp);
* a UHUGEINT column declared with a negative lower bound, and a FLOAT column with bounds
  beyond a float's range (the clamp's bounds did not convert to the column's type).

The chosen person holds the extreme values; everyone else holds ordinary ones, so each
failure showed on D and not on D'.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from proxy.policy import parse_policy
from tests.policies import users_policy
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

TARGET = 7

POLICY = users_policy(
    """
[tables.people]
population = "users"
unit = "user_id"
one_row_per_person = true
columns.score = {{ lower = 0, upper = 100 }}

[tables.ev]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 5
columns.h = {{ lower = -1000, upper = 1000 }}
columns.uh = {{ lower = -5, upper = 1000 }}
columns.f = {{ lower = -1e39, upper = 1e39 }}
columns.d38 = {{ lower = -1, upper = 1 }}

[tables.evu]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 5

[tables.evd]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 5

[tables.pubf]
public = true
"""
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeighbourPair]:
    folder = tmp_path_factory.mktemp("type-neighbours")
    db = folder / "types.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE people (user_id BIGINT, score DECIMAL(38, 37))")
        con.execute(
            "CREATE TABLE ev (user_id BIGINT, h HUGEINT, uh UHUGEINT, f FLOAT, "
            "d38 DECIMAL(38, 37), tm TIME)"
        )
        con.execute("INSERT INTO people SELECT i, 0.5 FROM range(1, 61) t(i)")
        con.execute(
            "INSERT INTO ev SELECT i % 60 + 1, i, i, i % 100, 0.5, TIME '10:00' "
            "FROM range(0, 240) t(i)"
        )
        # Joins on floats, UUIDs and INTERVALs (keyed: keyed_groups._floats, _textual, the
        # interval's total), the target's values among them: -0.0, NaN, the largest REAL,
        # '29 days' and its equal '1 month -1 day', and an interval of -83,333 years.
        con.execute("CREATE TABLE evu (user_id BIGINT, u UUID, x DOUBLE, iv INTERVAL)")
        con.execute("CREATE TABLE pubf (x FLOAT, u UUID, iv INTERVAL)")
        con.execute(
            "INSERT INTO evu SELECT i % 60 + 1, CAST(printf('%032x', i % 9) AS UUID), i % 9, "
            "INTERVAL (i % 9 * 24) HOUR FROM range(0, 240) t(i)"
        )
        con.execute(
            f"INSERT INTO evu VALUES ({TARGET}, NULL, CAST('-0.0' AS DOUBLE), INTERVAL '29 days'), "
            f"({TARGET}, CAST(printf('%032x', 3) AS UUID), CAST('nan' AS DOUBLE), "
            "INTERVAL '1 month -1 day'), "
            f"({TARGET}, CAST(printf('%032x', 5) AS UUID), 3.4e38, INTERVAL '-83333 years')"
        )
        con.execute(
            "INSERT INTO pubf SELECT i, CAST(printf('%032x', i) AS UUID), INTERVAL (i) DAY "
            "FROM range(0, 6) t(i)"
        )
        con.execute(
            "INSERT INTO pubf VALUES (CAST('nan' AS FLOAT), NULL, INTERVAL '29 days'), "
            "(3.4e38, NULL, INTERVAL '-83333 years')"
        )
        # Date keys (per_person._truncated_within): ordinary days for everyone, and for
        # the target the infinities, year 10000, the first instant of year 1 and one
        # microsecond before it, which must not become keys (nor fail) on D.
        con.execute("CREATE TABLE evd (user_id BIGINT, ts TIMESTAMP, d DATE)")
        con.execute(
            "INSERT INTO evd SELECT i % 60 + 1, TIMESTAMP '2024-01-01' + INTERVAL (i) HOUR, "
            "DATE '2024-01-01' + CAST(i % 3 AS INTEGER) FROM range(0, 240) t(i)"
        )
        con.execute(
            f"INSERT INTO evd SELECT {TARGET}, CAST(v AS TIMESTAMP), TRY_CAST(v AS DATE) FROM "
            "(VALUES ('infinity'), ('-infinity'), ('10000-01-01'), ('0001-01-01'), "
            "('0001-12-31 23:59:59.999999 BC')) AS e(v)"
        )
        # The target: values at the edges of each type.
        con.execute(
            f"UPDATE people SET score = 9.9999999999999999999999999999999999999 WHERE user_id = {TARGET}"
        )
        con.execute(
            f"INSERT INTO ev SELECT {TARGET}, "
            "170141183460469231731687303715884105727, "
            "340282366920938463463374607431768211455, 3.4e38, "
            "9.9999999999999999999999999999999999999, TIME '23:59' FROM range(4)"
        )
    policy = parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder)
    neighbours = build_neighbours(
        policy, folder / "nb", Removal.CHOSEN, timeout_s=10.0, person=TARGET
    )
    with_pair = NeighbourPair(neighbours)
    try:
        yield with_pair
    finally:
        with_pair.close()


QUERIES = {
    "decimal_where": f"SELECT COUNT(*) AS n FROM ev WHERE user_id = {TARGET} AND d38 > 50",
    "decimal_between": f"SELECT COUNT(*) AS n FROM ev WHERE user_id = {TARGET} AND d38 BETWEEN 0 AND 100",
    "decimal_one_row": f"SELECT COUNT(*) AS n FROM people WHERE user_id = {TARGET} AND score > 50",
    "float_where": f"SELECT COUNT(*) AS n FROM ev WHERE user_id = {TARGET} AND f > 3.5e38",
    "hugeint_per_person_sum": (
        "SELECT AVG(x) AS a FROM (SELECT user_id, SUM(h) AS x FROM ev GROUP BY user_id) t "
        f"WHERE user_id = {TARGET}"
    ),
    "hugeint_per_person_avg": (
        "SELECT AVG(x) AS a FROM (SELECT user_id, AVG(h) AS x FROM ev GROUP BY user_id) t "
        f"WHERE user_id = {TARGET}"
    ),
    "uhugeint_negative_bound": (
        f"SELECT SUM(uh) AS s, MEDIAN(uh) AS m FROM ev WHERE user_id = {TARGET}"
    ),
    "float_wide_bounds": f"SELECT MIN(f) AS lo, MEDIAN(f) AS m FROM ev WHERE user_id = {TARGET}",
    "float_join": "SELECT COUNT(*) AS n FROM evu JOIN pubf ON evu.x = pubf.x",
    "float_join_target": (
        f"SELECT COUNT(*) AS n FROM evu JOIN pubf ON evu.x = pubf.x WHERE user_id = {TARGET}"
    ),
    "interval_join": (
        "SELECT pubf.x, COUNT(*) AS n FROM evu JOIN pubf ON evu.iv = pubf.iv GROUP BY pubf.x"
    ),
    # arithmetic on intervals, guarded field by field (-83,333 years times 30,000 passes
    # a month field's range on the target's row only) and a per-person DISTINCT of an
    # interval expression, keyed on its total
    "interval_product": (
        "SELECT COUNT(*) AS n FROM evu WHERE iv * 30000 > INTERVAL 1 DAY OR -iv < iv"
    ),
    "interval_sum_target": (
        f"SELECT COUNT(*) AS n FROM evu WHERE iv + INTERVAL 1 HOUR > INTERVAL 1 DAY "
        f"AND user_id = {TARGET}"
    ),
    "interval_distinct_expression": (
        "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(DISTINCT iv * 2) AS n FROM evu "
        "GROUP BY user_id) t"
    ),
    # values beyond their declared bounds on the target's rows only (their 4 extreme
    # rows, within the row cap of 5): the clipping estimate counts the target on D for
    # the clamps alone, and not on D'
    "declared_clamps_counted": (
        "SELECT SUM(h) AS s, AVG(d38) AS a, MEDIAN(uh) AS m FROM ev "
        f"WHERE h > 1000 OR user_id <> {TARGET}"
    ),
    # a per-person subquery whose values the target alone takes beyond their bounds (8
    # rows against a cap of 5, an AVG(h) past h's bounds): its hidden flag counts the
    # target on D only, and the estimate's sensitivity stays 1
    "per_person_clamps_counted": (
        "SELECT AVG(x) AS a, SUM(y) AS s FROM (SELECT user_id, AVG(h) AS x, COUNT(*) AS y "
        "FROM ev GROUP BY user_id) t"
    ),
    # the flag's comparisons of per-person values of wide types (DECIMAL(38, 37) whose
    # type cannot hold the bound 1,000; UHUGEINT against a negative bound) never raise
    "per_person_wide_clamps_counted": (
        "SELECT AVG(x) AS a, AVG(y) AS b, AVG(z) AS c, AVG(w) AS d FROM (SELECT user_id, "
        "SUM(d38) AS x, AVG(d38) AS y, SUM(uh) AS z, MAX(h) AS w FROM ev GROUP BY user_id) t"
    ),
    # clamps in branches of the analyst's CASE and IF count only where the branch is
    # taken: the flag then tests the branches' conditions on every row, among them a cast
    # of a HUGEINT that only the rows taking the second branch would reach
    "gated_clamps_counted": (
        "SELECT SUM(CASE WHEN h > 1000 THEN 0 WHEN CAST(h AS INTEGER) > 5 THEN uh "
        "ELSE d38 END) AS s, SUM(IF(uh > 500, 0, h)) AS t FROM ev"
    ),
    # a branch condition that raises on the target's rows only (h * 2 past HUGEINT):
    # the analyst's CASE is under TRY, and so is the flag's copy of the condition (bare,
    # it failed after the charge: a review, 2026-12-04)
    "gate_fails_only_for_the_target": (
        "SELECT SUM(CASE WHEN h * 2 > 5 THEN d38 ELSE 0 END) AS s, "
        "SUM(IF(h * 2 > 5, 0, uh)) AS t FROM ev"
    ),
    # the same with CASE x WHEN a, respelled as CASE WHEN x = a (here a cast of a
    # HUGEINT that fails on the target's rows, where the analyst's CASE gives NULL)
    "simple_case_clamps_counted": (
        "SELECT SUM(CASE CAST(h AS INTEGER) WHEN 5 THEN uh WHEN 7 THEN 0 ELSE d38 END) AS s, "
        "SUM(CASE uh WHEN 0 THEN 0 ELSE h END) AS t FROM ev"
    ),
    # the same in a per-person subquery: only the target's count (8 rows, clamped to the
    # cap of 5; everyone else has 4) takes the branch; and a column list renaming the
    # subquery's columns by position
    "per_person_gated_clamps_counted": (
        "SELECT AVG(a) AS m, AVG(c) AS n FROM (SELECT user_id, CASE WHEN COUNT(*) > 4 "
        "THEN AVG(h) ELSE 0 END AS a, COUNT(*) AS b FROM ev GROUP BY user_id) t(u, a, c)"
    ),
    "uuid_join": "SELECT pubf.x, COUNT(*) AS n FROM evu JOIN pubf ON evu.u = pubf.u GROUP BY pubf.x",
    # date keys read within the years 1-9999 on the column, before one truncation
    "date_trunc_month_key": "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM evd GROUP BY 1",
    "date_trunc_day_of_date": "SELECT date_trunc('day', d) AS k, COUNT(*) AS n FROM evd GROUP BY 1",
    "date_trunc_target_year": (
        f"SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM evd WHERE user_id = {TARGET} "
        "GROUP BY 1"
    ),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_exotic_types_behave_alike_on_both_sides(name: str, pair: NeighbourPair) -> None:
    report = pair.check(QUERIES[name])
    assert report.ok, report.describe()
    assert report.answered  # a refusal on both sides would pass vacuously


REFUSED = {
    # DuckDB binds DATE_DIFF of TIMEs in any unit, then refuses the coarse ones per row.
    "time_column_diff": f"SELECT COUNT(*) AS n FROM ev WHERE user_id = {TARGET} "
    "AND date_diff('day', tm, tm) = 0",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_would_fail_per_row_is_refused_before_the_charge(
    name: str, pair: NeighbourPair
) -> None:
    report = pair.check(REFUSED[name])
    assert report.ok, report.describe()
    assert not report.answered and "unsupported_sql" in report.outcome, report.outcome
