"""Per-cell 95% intervals: they must cover the truth about 95% of the time."""

from __future__ import annotations

import duckdb
import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest
from tests.proxy.conftest import ROOT

SQL = "SELECT sex, COUNT(*) AS n, AVG(age) AS age, SUM(age) AS total FROM PUMS.PUMS GROUP BY sex"


@pytest.fixture(scope="module")
def truth() -> dict[int, tuple[int, float, float]]:
    con = duckdb.connect()
    rows = con.execute(
        "SELECT sex, COUNT(*), AVG(age), SUM(age) FROM read_csv_auto(?) GROUP BY sex",
        [str(ROOT / "sample_data" / "pums" / "PUMS_pid.csv")],
    ).fetchall()
    return {int(r[0]): (int(r[1]), float(r[2]), float(r[3])) for r in rows}


def test_intervals_cover_the_truth(
    pums_engine: Engine, truth: dict[int, tuple[int, float, float]]
) -> None:
    runs = 150
    covered = [0, 0, 0]
    cells = 0
    for i in range(runs):
        result = pums_engine.run(QueryRequest(SQL, epsilon=0.5 * (1 + i * 1e-9)))
        assert not result.privacy.cached
        assert len(result.intervals) == len(result.rows)
        for row, widths in zip(result.rows, result.intervals, strict=True):
            assert widths[0] is None  # the key has no noise
            cells += 1
            n, avg, total = truth[row[0]]
            for j, want in enumerate((n, avg, total)):
                width = widths[j + 1]
                assert width is not None and width > 0
                covered[j] += abs(row[j + 1] - want) <= width
    # Nominal 95%; with 300 cells per column a rate below 89% has probability < 1e-6
    # under correct widths, and far-too-wide widths would cover all 300 (probability 2e-7 when correct).
    for rate in (c / cells for c in covered):
        assert 0.89 <= rate < 1.0, covered
