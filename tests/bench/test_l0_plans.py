"""The L0 plans of bench/l0_plans.py (issue 18) give the shipped core's answer.

BENCHMARKS.md quotes the experimental rows-first plan and the ANY_VALUE variant as
"same rows" as the core; this checks that claim on real DuckDB data where persons have
many rows per group (daily and monthly keys, so the row heaps hold duplicate hashes),
for several seeds and for the smallest heap the plan allows (K + 1 rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench import engine as eb
from bench.l0_plans import any_value_keys, rows_first, without_l0
from proxy.engine import Engine, Explanation
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.proxy.conftest import demo_policy


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("l0-plans")
    # 40 prompts per person: most (person, day) groups hold several rows.
    db = generate(tmp / "usage.duckdb", people=500, prompts=20000, seed=5)
    engine = Engine(demo_policy(tmp, db))
    yield engine
    engine.close()


def _rows(engine: Engine, sql: str, seed: int) -> list[tuple[Any, ...]]:
    columns = engine.executor.run(sql, [seed] if "?" in sql else [])
    return sorted(zip(*(columns[c].tolist() for c in sorted(columns)), strict=True))


def _core(engine: Engine, sql: str) -> tuple[str, int]:
    explanation = engine.explain(QueryRequest(sql, epsilon=1.0))
    assert isinstance(explanation, Explanation)
    return explanation.plan.core_sql, int(explanation.plan.max_groups)


@pytest.mark.parametrize("sql", [eb.PRIVATE_KEY, eb.PRIVATE_MONTH])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_first_gives_the_cores_rows(engine: Engine, sql: str, seed: int) -> None:
    core, k = _core(engine, sql)
    assert k >= 1
    want = _rows(engine, core, seed)
    assert want  # groups are released
    for heap in (k + 1, 2 * (k + 1)):
        variant = rows_first(core, k, heap)
        assert variant is not None
        assert _rows(engine, variant, seed) == want
    # The cut does something here: without it some persons keep more than K groups.
    unbounded = without_l0(core)
    assert unbounded is not None
    assert _rows(engine, unbounded, seed) != want


def test_any_value_keys_gives_the_cores_rows_for_a_person_constant_key(engine: Engine) -> None:
    core, _ = _core(engine, eb.PUBLIC_KEY)
    variant = any_value_keys(core)
    assert variant is not None and "ANY_VALUE" in variant
    assert _rows(engine, variant, 0) == _rows(engine, core, 0)
    assert rows_first(core, 1, 2) is None  # one group per person: no cut to move
