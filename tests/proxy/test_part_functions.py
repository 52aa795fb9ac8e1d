"""DuckDB's part functions (``year(x)``, ``dayofweek(x)``, ...) are its ``EXTRACT(<part>
FROM x)`` (proxy/spellings.py): the same release, so either spelling after the other is
a free replay, and on every engine they take EXTRACT's forms (PostgreSQL refused them,
an answer oracle 2026-12-05; tests/engines/test_postgres_oracle_found.py)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

PAIRS = [
    ("year(ts)", "EXTRACT(year FROM ts)"),
    ("month(ts)", "EXTRACT(month FROM ts)"),
    ("dayofmonth(ts)", "EXTRACT(day FROM ts)"),
    ("quarter(ts)", "EXTRACT(quarter FROM ts)"),
    ("dayofweek(ts)", "EXTRACT(dayofweek FROM ts)"),
    ("dayofyear(CAST(ts AS DATE))", "EXTRACT(dayofyear FROM CAST(ts AS DATE))"),
    ("weekofyear(ts)", "EXTRACT(week FROM ts)"),
    ("isodow(ts)", "EXTRACT(isodow FROM ts)"),  # (refused before: a corpus of BI SQL)
]


@pytest.mark.parametrize(("function", "extract"), PAIRS, ids=[p[0] for p in PAIRS])
def test_a_part_function_is_its_extract(small_demo: Engine, function: str, extract: str) -> None:
    first = small_demo.run(
        QueryRequest(f"SELECT {extract} AS p, COUNT(*) AS n FROM prompts GROUP BY 1", epsilon=1.0)
    )
    again = small_demo.run(
        QueryRequest(f"SELECT {function} AS p, COUNT(*) AS n FROM prompts GROUP BY 1", epsilon=1.0)
    )
    assert not first.privacy.cached and again.privacy.cached
    assert again.rows == first.rows and again.cache_key == first.cache_key
