"""Windows over the groups run after HAVING, as SQL computes them (found by an answer
oracle, 2026-12-05): the outer layer computed them over every released group and
filtered afterwards, so ``COUNT(*) OVER ()`` beside ``HAVING sex = 1`` counted 2 groups,
and ranks and shares of a total ran over all 16 education levels where HAVING kept 3.
Answers at a budget where the noise is below 0.01 are compared with DuckDB's own answer
to the same query on the same rows."""

from __future__ import annotations

import math

import duckdb
import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

QUERIES = (
    "SELECT sex, COUNT(*) AS n, COUNT(*) OVER () AS groups FROM PUMS.PUMS GROUP BY sex "
    "HAVING sex = 1",
    "SELECT educ, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*)) AS r, "
    "100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS pct FROM PUMS.PUMS GROUP BY educ "
    "HAVING COUNT(*) >= 100 ORDER BY educ",
    "SELECT educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ HAVING COUNT(*) > 50 "
    "ORDER BY ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC) LIMIT 3",
    "SELECT educ, ROW_NUMBER() OVER (ORDER BY educ DESC) AS rn, "
    "LAG(COUNT(*)) OVER (ORDER BY educ) AS before FROM PUMS.PUMS GROUP BY educ "
    "HAVING AVG(age) > 40 ORDER BY educ",
    # a RAND() in HAVING beside a window: the filter still sees its own draw
    "SELECT educ, COUNT(*) AS n, DENSE_RANK() OVER (ORDER BY educ) AS r FROM PUMS.PUMS "
    "GROUP BY educ HAVING COUNT(*) > 50 + RANDOM() * 0 ORDER BY educ",
    # no HAVING: windows over every group, as before
    "SELECT sex, COUNT(*) AS n, SUM(COUNT(*)) OVER () AS total FROM PUMS.PUMS GROUP BY sex "
    "ORDER BY sex",
)




def _close(got: object, want: object) -> bool:
    if isinstance(want, float) or isinstance(got, float):
        return got is not None and want is not None and math.isclose(got, want, abs_tol=0.05)
    return got == want


@pytest.mark.parametrize("sql", QUERIES)
def test_windows_see_the_groups_having_keeps(
    pums_near_exact: Engine, pums_exact: duckdb.DuckDBPyConnection, sql: str
) -> None:
    got = pums_near_exact.run(QueryRequest(sql, rho=1e6)).rows
    want = pums_exact.execute(sql).fetchall()
    assert len(got) == len(want), (got, want)
    for row, expected in zip(got, want, strict=True):
        assert all(_close(g, w) for g, w in zip(row, expected, strict=True)), (row, expected)
