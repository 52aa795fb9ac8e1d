"""A released value cast to DECIMAL keeps its interval and its warnings (found by an
answer oracle, 2026-12-05): the post-processing DuckDB returns a DECIMAL cell as
Python's Decimal, which the interval and warning code took for a non-number, so
``SUM(income)::DECIMAL(18, 2)`` came back with no interval and no word where the same sum
cast to BIGINT showed ±1232. Decimal and float do not mix in Python arithmetic: the
first version of the fix raised a TypeError after the charge, so every path that does
arithmetic on cells runs here (profiles, a window's bootstrap, the warnings)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

QUERIES = (
    "SELECT sex, AVG(age)::DECIMAL(10, 2) AS a, SUM(income)::DECIMAL(18, 2) AS s "
    "FROM PUMS.PUMS GROUP BY sex ORDER BY sex",
    "SELECT educ, CAST(COUNT(*) AS DECIMAL(38, 0)) AS n, "
    "CAST(100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS DECIMAL(9, 3)) AS pct "
    "FROM PUMS.PUMS GROUP BY educ HAVING COUNT(*) > 20 ORDER BY n DESC",
    "SELECT CAST(SUM(income) AS DECIMAL(38, 10)) / 1000 AS k, "
    "CAST(VAR_SAMP(age) AS DECIMAL(12, 4)) AS v FROM PUMS.PUMS WHERE age > 30",
)


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("epsilon", [0.1, 5.0])
def test_decimal_cells_have_intervals(pums_engine: Engine, sql: str, epsilon: float) -> None:
    answer = pums_engine.run(QueryRequest(sql, epsilon=epsilon))
    assert answer.rows
    decimals = 0
    for row, widths in zip(answer.rows, answer.intervals, strict=True):
        for name, value, width in zip(answer.columns, row, widths, strict=True):
            if not isinstance(value, Decimal):
                continue
            decimals += 1
            if width is None:
                # only beside a window whose HAVING keeps or drops the row under noise,
                # and then the answer says so
                said = f"values in column {name!r} have no interval"
                assert "OVER" in sql and any(said in w for w in answer.warnings), answer.warnings
            else:
                assert width > 0, (name, value)  # a noisy cell: never an exact-looking 0
    assert decimals > 0, answer.rows  # the casts came back as DECIMAL cells, or nothing ran
    if epsilon == 0.1:  # wide enough that some DECIMAL cell is flagged as imprecise
        assert any("imprecise" in w or "within" in w for w in answer.warnings), answer.warnings
