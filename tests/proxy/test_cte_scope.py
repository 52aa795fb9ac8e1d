"""CTEs by scope (proxy/cte_scope.py): a CTE never hides the real table of its name from
the grant check, a WITH below the top of the query is refused, and two tables never
share an alias (proxy/joins.py). Each case was answered before (a probe, 2026-12-02)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from proxy.catalog import Catalog
from proxy.cte_scope import cte_references
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.joins import tables_of
from proxy.request import QueryRequest


def _refs(sql: str) -> list[str]:
    tree = sqlglot.parse_one(sql, read="duckdb")
    ids = cte_references(tree)
    return sorted(t.sql() for t in tree.find_all(exp.Table) if id(t) in ids)


def test_a_cte_body_reads_the_real_table_of_its_own_name_and_of_later_ctes() -> None:
    # "a" in b's body is the CTE; "b" in a's body and "a" in a's body are tables.
    assert _refs("WITH a AS (SELECT * FROM a, b), b AS (SELECT * FROM a) SELECT * FROM b") == [
        "a",
        "b",
    ]
    tree = sqlglot.parse_one(
        "WITH a AS (SELECT * FROM a, b), b AS (SELECT * FROM a) SELECT * FROM b", read="duckdb"
    )
    ids = cte_references(tree)
    first = tree.args["with_"].expressions[0].this
    assert not any(id(t) in ids for t in first.find_all(exp.Table))


def test_a_qualified_name_is_never_a_cte() -> None:
    assert _refs("WITH users AS (SELECT 1 AS x) SELECT * FROM main.users, users") == ["users"]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE x IN (WITH c AS (SELECT 1 AS x) SELECT x FROM c)",
        "SELECT * FROM (WITH c AS (SELECT 1 AS x) SELECT x FROM c) AS s",
        "WITH a AS (WITH b AS (SELECT 1 AS x) SELECT x FROM b) SELECT * FROM a",
    ],
)
def test_a_with_below_the_top_is_refused(sql: str) -> None:
    with pytest.raises(DPSQLError) as refused:
        cte_references(sqlglot.parse_one(sql, read="duckdb"))
    assert refused.value.code == "unsupported_sql"
    assert "start of the query" in refused.value.message


def test_cte_names_are_distinct_and_not_a_readable_tables() -> None:
    tree = sqlglot.parse_one("WITH a AS (SELECT 1), a AS (SELECT 2) SELECT * FROM a")
    with pytest.raises(DPSQLError, match="already the name of a CTE"):
        cte_references(tree)
    tree = sqlglot.parse_one("WITH users AS (SELECT 1) SELECT * FROM users")
    with pytest.raises(DPSQLError, match="already the name of a table"):
        cte_references(tree, ["users"])
    assert cte_references(tree, ["prompts"])  # a name nobody can read is the caller's


def test_two_tables_under_one_alias_are_refused(small_demo: Engine) -> None:
    select = sqlglot.parse_one("SELECT 1 FROM main.users AS a, main.regions AS a")
    assert isinstance(select, exp.Select)
    catalog: Catalog = small_demo.catalog
    with pytest.raises(DPSQLError, match="both named a"):
        tables_of(select, catalog)


# (tables the analyst may read, query): each read a table outside the grant, exactly.
GRANT_BYPASSES = [
    (
        "prompts",
        "SELECT u.region, COUNT(*) AS n FROM prompts p JOIN users u ON u.user_id = p.user_id "
        "WHERE p.user_id IN (WITH users AS (SELECT user_id FROM prompts) SELECT user_id "
        "FROM users) GROUP BY u.region",
    ),
    ("prompts", "WITH users AS (SELECT * FROM users) SELECT COUNT(*) AS n FROM users"),
    ("users", "SELECT * FROM regions, (WITH regions AS (SELECT 1 AS x) SELECT * FROM regions) t"),
    ("users", "WITH regions AS (SELECT * FROM regions) SELECT * FROM regions"),
    ("users", "WITH r AS (SELECT * FROM regions) SELECT * FROM r"),
]


@pytest.mark.parametrize(("granted", "sql"), GRANT_BYPASSES)
def test_a_cte_does_not_open_a_table_outside_the_grant(
    small_demo: Engine, granted: str, sql: str
) -> None:
    before = small_demo.ledger.history(limit=10**6)
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0, tables=frozenset({granted})))
    assert refused.value.code in ("not_found", "unsupported_sql")
    assert small_demo.ledger.history(limit=10**6) == before


def test_top_level_ctes_are_still_answered(small_demo: Engine) -> None:
    for sql in (
        "WITH r AS (SELECT * FROM regions) SELECT * FROM r",
        "WITH p AS (SELECT * FROM prompts WHERE tokens_in > 5), q AS (SELECT * FROM p) "
        "SELECT COUNT(*) AS n FROM q",
        "WITH t AS (SELECT region, COUNT(*) AS n FROM users GROUP BY region) "
        "SELECT * FROM t WHERE n > 3",
    ):
        assert small_demo.run(QueryRequest(sql, epsilon=1.0)).rows
