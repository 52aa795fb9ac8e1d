"""A constant GROUP BY key splits no group (proxy/constant_keys.py): BI tools group by a
label column written as a constant, and it was refused as "GROUP BY position numbers
could not be resolved" (an honest-answers probe, 2026-12-06). A text cell carries no
half-width ("All ± 0" before)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

EPS = 1e4


@pytest.mark.parametrize(
    ("sql", "plain"),
    [
        (
            "SELECT 'All' AS seg, model, COUNT(*) AS n FROM prompts GROUP BY 1, 2 ORDER BY 2",
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY 1",
        ),
        (
            "SELECT model, 'const' AS c, COUNT(*) AS n FROM prompts GROUP BY model, c "
            "ORDER BY 1",
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY 1",
        ),
        (
            "SELECT 'All' AS seg, COUNT(*) AS n FROM prompts GROUP BY 1",
            "SELECT COUNT(*) AS n FROM prompts",
        ),
    ],
)
def test_a_constant_key_splits_no_group(small_demo: Engine, sql: str, plain: str) -> None:
    mine = small_demo.run(QueryRequest(sql, epsilon=EPS))
    theirs = small_demo.run(QueryRequest(plain, epsilon=EPS))
    assert len(mine.rows) == len(theirs.rows)
    for a, b, widths in zip(mine.rows, theirs.rows, mine.intervals, strict=True):
        assert abs(float(a[-1]) - float(b[-1])) < 3
        assert all(w is None for v, w in zip(a, widths, strict=True) if isinstance(v, str))
