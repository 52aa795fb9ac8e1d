"""DuckDB's ``date_part('year', ts)`` is its ``EXTRACT(year FROM ts)`` (found by an answer
oracle, 2026-12-05: refused in GROUP BY, where EXTRACT is answered). The respelling is
the same release, so the second spelling is a free replay; a part that is not one of
DuckDB's names, or not a literal, stays as written and is refused before any charge."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

EXTRACT = "SELECT EXTRACT(year FROM ts) AS y, COUNT(*) AS n FROM prompts GROUP BY EXTRACT(year FROM ts)"
DATE_PART = "SELECT date_part('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY date_part('year', ts)"


def test_date_part_is_the_extract_release(small_demo: Engine) -> None:
    first = small_demo.run(QueryRequest(EXTRACT, epsilon=1.0))
    again = small_demo.run(QueryRequest(DATE_PART.replace("'year'", "'YEAR'"), epsilon=1.0))
    assert not first.privacy.cached and again.privacy.cached
    assert again.rows == first.rows and again.cache_key == first.cache_key


@pytest.mark.parametrize(
    "part", ["'fortnight'", "'year FROM ts) --'", "model"], ids=["unknown", "text", "column"]
)
def test_other_parts_are_refused_before_any_charge(small_demo: Engine, part: str) -> None:
    spent = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(DATE_PART.replace("'year'", part), epsilon=1.0))
    assert refused.value.code in ("unsupported_sql", "bad_request")
    assert small_demo.ledger.history() == spent
