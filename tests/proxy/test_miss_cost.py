"""Issue 18: what a cache miss on new text shares between its steps stays unchanged.

The engine parses a new text once: the steps that only read it (the nested-query split,
the public-query route, the columns a query's bounds are needed for) share the tree and
the binder works on a copy of it, so no step may change it: after each kind of query, every kept tree still renders as a fresh
parse of its text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.parse import parse
from proxy.request import QueryRequest
from tests.proxy.conftest import demo_policy

INNER = "SELECT region, COUNT(*) AS n, SUM(age) AS s FROM users GROUP BY region"
QUERIES = (
    "SELECT region, COUNT(*) AS n, AVG(age) FROM users WHERE age > 20 GROUP BY region",
    f"SELECT AVG(s) AS a, SUM(n) AS total FROM ({INNER})",
    f"WITH t AS ({INNER}) SELECT region, n * 100.0 / SUM(n) OVER () AS pct FROM t",
    "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(*) AS n FROM users GROUP BY user_id) x",
    "SELECT COUNT(*) FROM (SELECT * FROM users WHERE age > 30) AS u",
    "SELECT DISTINCT region FROM users",
    # Public queries: classified (and respelled) on the shared parse.
    "SELECT VARP(LENGTH(name)) AS v FROM regions",
    "SELECT region, STDEV(age) AS s FROM users GROUP BY region",
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, demo_db: Path):
    root = tmp_path_factory.mktemp("miss")
    db = root / "copy.duckdb"
    shutil.copy(demo_db, db)
    e = Engine(demo_policy(root, db))
    yield e
    e.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_shared_trees_are_never_changed(engine: Engine, sql: str) -> None:
    engine.explain(QueryRequest(sql, epsilon=1.0))
    result = engine.run(QueryRequest(sql, epsilon=1.0))
    assert result.rows is not None
    settings = engine.policy.proxy
    kept = engine._read_trees.get((sql, "duckdb"))
    assert kept is not None
    fresh = parse(sql, "duckdb", max_length=settings.max_sql_length, max_nodes=settings.max_nodes)
    assert kept.sql(dialect="duckdb") == fresh.sql(dialect="duckdb")
    assert kept == fresh


def test_the_checked_tree_forgets_positions_the_shared_parse_keeps_them(engine: Engine) -> None:
    """Positions are dropped from the checked query only (proxy/parse.py:
    forget_positions): its parts are copied many times by the rewrite, and nothing after
    the check places a refusal in the text. The shared parse keeps them, so a refusal of
    the same text (e.g. at another budget, or for an analyst who may not read a table)
    still points into it; sqlglot's other meta is kept."""
    sql = "SELECT region, COUNT(*) AS n FROM users WHERE age > 41 GROUP BY region"
    engine.run(QueryRequest(sql, epsilon=1.0))
    kept = engine._read_trees.get((sql, "duckdb"))
    assert kept is not None
    assert any(node.meta.get("line") == 1 for node in kept.walk() if node._meta)
    shape = engine.checked_shape(QueryRequest(sql, epsilon=1.0)).shape
    metas = [node._meta for node in shape.select.walk() if node._meta is not None]
    assert all(not set(m) & {"line", "col", "start", "end"} for m in metas)
    assert all(m for m in metas)  # an emptied meta is dropped, not left as {}
    # A refusal still names its place in the text.
    refused = "SELECT TOP 2 region, COUNT(*) AS n FROM users GROUP BY region LIMIT 3"
    with pytest.raises(DPSQLError) as error:
        engine.run(QueryRequest(refused, epsilon=1.0))
    assert error.value.position == {"line": 1, "column": 8}
