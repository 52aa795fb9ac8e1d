"""Golden rewrite fixtures: input SQL -> expected core SQL, each executed on DuckDB.

Set DPSQL_UPDATE_GOLDEN=1 to rewrite the expected sections after an intended change;
review the diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlglot

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed

FIXTURES = Path(__file__).parent.parent / "fixtures" / "rewrite"
CASES = sorted(FIXTURES.glob("*.sql"))


def _read(path: Path) -> tuple[str, str, str]:
    text = path.read_text()
    head, _, rest = text.partition("-- input\n")
    policy = head.split("-- policy:")[1].strip()
    sql, _, expected = rest.partition("-- expected\n")
    return policy, sql.strip(), expected.strip()


def _pretty(sql: str) -> str:
    return sqlglot.transpile(sql, read="duckdb", write="duckdb", pretty=True)[0]


@pytest.fixture(scope="module")
def engines(pums_engine: Engine, demo_engine: Engine) -> dict[str, Engine]:
    return {"pums": pums_engine, "demo": demo_engine}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_rewrite_matches_golden_and_runs(path: Path, engines: dict[str, Engine]) -> None:
    policy, sql, expected = _read(path)
    engine = engines[policy]
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    got = _pretty(plan.core_sql)
    if os.environ.get("DPSQL_UPDATE_GOLDEN"):
        path.write_text(f"-- policy: {policy}\n-- input\n{sql}\n-- expected\n{got}\n")
        expected = got
    assert got == expected, f"rewrite of {path.name} changed"
    params = [12345] if takes_seed(plan.core_sql) else []
    result = engine.executor.run(plan.core_sql, params)
    assert "__persons" in result
    assert {s.column for s in plan.statistics} <= set(result)
    # MEDIAN, quantiles, MIN, MAX: each argument's histogram (bins and counts) per group.
    assert {f"{q.statistic.histogram}_{p}" for q in plan.quantiles for p in "bn"} <= set(result)


def test_fixture_count() -> None:
    assert len(CASES) >= 12
