"""Issue 18 (planning): key types read from the catalog instead of binding the core in
the engine, only where the catalog types the whole query (proxy/catalog_types.py)."""

from __future__ import annotations

import pytest

from proxy import catalog_types
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

# Queries the catalog types completely: their key types must be DESCRIBE's, exactly.
PLAIN = [
    ("pums", "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"),
    (
        "pums",
        "SELECT educ, SUM(income) FROM PUMS.PUMS WHERE age > 30 AND NOT married = 1 GROUP BY educ",
    ),
    ("pums", "SELECT COUNT(*) FROM PUMS.PUMS WHERE age BETWEEN 20 AND 40 OR income IS NULL"),
    (
        "pums",
        "SELECT sex, educ, AVG(income * 2 - age) FROM PUMS.PUMS WHERE educ IN (1, 2, 3) "
        "GROUP BY sex, educ HAVING COUNT(*) > 3 ORDER BY 1",
    ),
    ("demo", "SELECT region, COUNT(*) FROM users WHERE plan = 'pro' GROUP BY region"),
    ("demo", "SELECT model, COUNT(*) FROM prompts WHERE model IN ('a', 'b') GROUP BY model"),
]
# Queries it cannot vouch for: functions, casts, division, strings in arithmetic, joins,
# subqueries, distinct counts, quantiles. These bind the core in the engine as before.
NOT_PLAIN = [
    ("pums", "SELECT sex, AVG(income / 2) FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT sex, COUNT(*) FROM PUMS.PUMS WHERE ABS(age) > 3 GROUP BY sex"),
    ("pums", "SELECT CAST(sex AS VARCHAR), COUNT(*) FROM PUMS.PUMS GROUP BY 1"),
    ("pums", "SELECT sex, COUNT(DISTINCT educ) FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT sex, MEDIAN(income) FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT sex, COUNT(*) FROM PUMS.PUMS WHERE age > '3' GROUP BY sex"),
    ("demo", "SELECT region, COUNT(*) FROM prompts JOIN users USING (user_id) GROUP BY region"),
]


def _engine(request: pytest.FixtureRequest, which: str) -> Engine:
    return request.getfixturevalue(f"{which}_engine")


def _key_types(engine: Engine, sql: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(the catalog's answer, the engine's DESCRIBE of the core) for one query."""
    shape = engine.checked_shape(QueryRequest(sql)).shape
    core = engine._structure_for(QueryRequest(sql)).core
    described = dict(engine.executor.describe(core.sql, [0] if "?" in core.sql else []))
    return catalog_types.key_types(shape), tuple(described[k] for k in core.key_columns())


@pytest.mark.parametrize(("which", "sql"), PLAIN)
def test_plain_queries_take_the_catalogs_key_types(
    request: pytest.FixtureRequest, which: str, sql: str
) -> None:
    fast, described = _key_types(_engine(request, which), sql)
    assert fast is not None, "the catalog should type this query"
    assert fast == described


@pytest.mark.parametrize(("which", "sql"), NOT_PLAIN)
def test_other_queries_still_bind_the_core_in_the_engine(
    request: pytest.FixtureRequest, which: str, sql: str
) -> None:
    engine = _engine(request, which)
    try:
        shape = engine.checked_shape(QueryRequest(sql)).shape
    except DPSQLError:
        return  # refused by the checker: never reaches the key types
    assert catalog_types.key_types(shape) is None


def test_a_comparison_the_engine_cannot_bind_is_still_refused_before_any_charge(
    pums_engine: Engine,
) -> None:
    """A number compared with a date: the catalog does not vouch for it, so the core is
    bound in the engine and the query refused, with nothing charged."""
    before = pums_engine.ledger.history()
    sql = "SELECT sex, COUNT(*) FROM PUMS.PUMS WHERE age > DATE '2020-01-01' GROUP BY sex"
    with pytest.raises(DPSQLError) as refused:
        pums_engine.run(QueryRequest(sql, epsilon=1.0))
    assert refused.value.code == "bad_request"
    assert "cannot run" in refused.value.message
    assert pums_engine.ledger.history() == before
