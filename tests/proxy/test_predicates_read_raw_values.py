"""A column an aggregate's argument only compares is read as it is, not clamped to its
declared bounds (found by an answer oracle, 2026-12-05). With income declared within
[0, 100000] and 56 people above it, ``SUM(CASE WHEN income > 100000 THEN 1 ELSE 0 END)``
answered 0, because the clamp made the condition false on every row, while
``COUNT(CASE WHEN income > 100000 THEN 1 END)`` (no bounds needed) answered 56. The
values an aggregate adds are still clamped, and the answer says so only where a clamp
moved one of them. Answers at a budget where the noise is below 0.01 are compared with
DuckDB's own answer to the same query on the same rows."""

from __future__ import annotations

import math
from collections.abc import Iterator

import duckdb
import pytest

from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from tests.proxy.conftest import PUMS_CSV, ROOT

DECLARED = "columns.income  = { lower = 0, upper = 500000 }"
TIGHT = "columns.income  = { lower = 0, upper = 100000 }"

# (query, whether a clamp moves a value the aggregate adds)
QUERIES = (
    ("SELECT SUM(CASE WHEN income > 100000 THEN 1 ELSE 0 END) AS n_sum, "
     "COUNT(CASE WHEN income > 100000 THEN 1 END) AS n_count FROM PUMS.PUMS", False),
    ("SELECT SUM(income > 100000) AS n FROM PUMS.PUMS", False),
    ("SELECT AVG(CASE WHEN income <= 100000 THEN income END) AS a FROM PUMS.PUMS", False),
    ("SELECT sex, SUM(CASE WHEN income > 100000 THEN age ELSE 0 END) AS s FROM PUMS.PUMS "
     "GROUP BY sex ORDER BY sex", False),
    ("SELECT SUM(CASE WHEN income BETWEEN 100001 AND 200000 OR income IN (250000) THEN 1 "
     "ELSE 0 END) AS n FROM PUMS.PUMS", False),
    ("SELECT AVG(CASE WHEN income > 100000 THEN 100000 ELSE income END) AS a FROM PUMS.PUMS",
     False),
    # the value itself is read: clamped, and the answer says so
    ("SELECT SUM(CASE WHEN income > 100000 THEN income ELSE 0 END) AS s FROM PUMS.PUMS", True),
)  # fmt: skip


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("raw-predicates")
    text = (ROOT / "sample_data" / "pums" / "policy.toml").read_text()
    assert DECLARED in text
    text = text.replace(DECLARED, TIGHT).replace('"PUMS_pid.csv"', f'"{PUMS_CSV}"')
    text = text.replace('"../../state/pums-ledger.sqlite"', f'"{tmp / "ledger.sqlite"}"')
    out = Engine(parse_policy(text.replace("epsilon_cap = 10.0", "epsilon_cap = 1e12"), base_dir=tmp))
    yield out
    out.close()



def _close(got: object, want: object) -> bool:
    if isinstance(want, float) or isinstance(got, float):
        return got is not None and want is not None and math.isclose(got, want, abs_tol=1.0)
    return got == want


@pytest.mark.parametrize(("sql", "moved"), QUERIES)
def test_compared_columns_are_read_as_they_are(
    engine: Engine, pums_exact: duckdb.DuckDBPyConnection, sql: str, moved: bool
) -> None:
    answer = engine.run(QueryRequest(sql, rho=1e6))
    want = pums_exact.execute(sql).fetchall()
    clipping = answer.privacy.clipping
    cut = 0.0 if clipping is None else clipping.total_cut
    if moved:
        # 56 people have an income above 100000: their values are clamped and counted
        assert cut == pytest.approx(56, abs=1)
        assert any("outside [0, 100000]" in w for w in answer.warnings)
        return
    assert len(answer.rows) == len(want)
    for row, expected in zip(answer.rows, want, strict=True):
        assert all(_close(g, w) for g, w in zip(row, expected, strict=True)), (row, expected)
    assert cut == pytest.approx(0, abs=0.5)
    assert not any("outside [0, 100000]" in w for w in answer.warnings)
