"""proxy/render.py: printing a subtree in place gives the copy's text and leaves the tree
as it was, and the node types it prints in place are still handled by read-only code in
the installed sqlglot."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from proxy import check, outer
from proxy.engine import Engine
from proxy.plan import limits
from proxy.render import READ_ONLY_TYPES, duckdb_sql, owned_duckdb_sql
from proxy.request import QueryRequest
from proxy.rewrite import rewrite

QUERIES: tuple[tuple[str, str], ...] = (
    ("pums", "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS WHERE age > 30 GROUP BY sex"),
    ("pums", "SELECT married, VAR_POP(age) AS v FROM PUMS.PUMS WHERE income / age > 10 GROUP BY 1"),
    (
        "pums",
        "SELECT sex, SUM(income) + 1 AS s, MAX(age) AS m FROM PUMS.PUMS "
        "WHERE NOT (age < 20 OR age >= 60) AND income IS NOT NULL GROUP BY sex "
        "HAVING COUNT(*) > 5 ORDER BY s DESC",
    ),
    ("pums", "SELECT CAST(age AS DECIMAL(10, 2)) AS a, COUNT(*) AS n FROM PUMS.PUMS GROUP BY 1"),
    ("demo", "SELECT model, SUM(tokens_in) AS s, COUNT(*) AS n FROM prompts GROUP BY model"),
    ("demo", "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n FROM prompts GROUP BY 1"),
    ("demo", "SELECT plan, MEDIAN(age) AS m FROM users GROUP BY plan"),
    (
        "demo",
        "SELECT u.region, AVG(p.latency_ms) AS l FROM prompts p JOIN users u "
        "ON u.user_id = p.user_id GROUP BY u.region",
    ),
)


def _trees(engine: Engine, sql: str) -> list[exp.Expr]:
    """The trees planning prints pieces of: the text as parsed, the checked select, and
    the core's argument and CTE trees."""
    request = QueryRequest(sql, epsilon=1.0)
    shape = engine.checked_shape(request).shape
    max_rows, max_groups = limits(request, shape, engine.policy)
    core = rewrite(shape, max_rows=max_rows, max_groups=max_groups)
    return [
        sqlglot.parse_one(sql, read="duckdb"),
        shape.select,
        *core.arguments.values(),
        *(body for _, body in core.ctes),
    ]


@pytest.mark.parametrize(("policy", "sql"), QUERIES)
def test_in_place_text_is_the_copys_and_the_tree_is_unchanged(
    policy: str, sql: str, pums_engine: Engine, demo_engine: Engine
) -> None:
    engine = pums_engine if policy == "pums" else demo_engine
    in_place = 0
    for tree in _trees(engine, sql):
        before = tree.copy()
        whole = tree.sql(dialect="duckdb")
        for node in list(tree.walk()):
            expected = node.sql(dialect="duckdb")  # the generator's own copy
            assert duckdb_sql(node) == expected
            in_place += all(type(n) in READ_ONLY_TYPES for n in node.walk())
        assert tree == before  # structure, types and values
        assert tree.sql(dialect="duckdb") == whole
        assert owned_duckdb_sql(before) == whole  # a tree the caller gives away
    assert in_place > 0  # the fast path was taken


def test_read_only_types_keep_read_only_handlers() -> None:
    """Each type printed in place is handled by the base generator's own method, DuckDB's
    rename_func, or the generic function fallback: the handlers read in sqlglot's source
    for this module. An upgrade that gives one a DuckDB handler of its own fails here,
    to be read before the type stays in the set."""
    generator = DuckDB().generator()
    for node_type in READ_ONLY_TYPES:
        handler = generator.TRANSFORMS.get(node_type)
        if handler is not None:
            assert handler.__qualname__ == "rename_func.<locals>.<lambda>", node_type
            continue
        method = getattr(type(generator), f"{node_type.key}_sql", None)
        if method is None:
            assert issubclass(node_type, exp.Func), node_type  # function_fallback_sql
        else:
            assert method.__qualname__.startswith("Generator."), (node_type, method)


def test_a_type_rewritten_while_printed_is_copied() -> None:
    """DuckDB's datatype_sql changes the node it prints: such a subtree is copied."""
    assert exp.DataType not in READ_ONLY_TYPES
    cast = sqlglot.parse_one("CAST(x AS DECIMAL(10, 2))", read="duckdb")
    before = cast.copy()
    assert duckdb_sql(cast) == before.sql(dialect="duckdb")
    assert cast == before


# An outer layer nested deep: each clause's chain of `COUNT(*) / 2` over a grouping.
OUTER_CHAINS = {
    "HAVING": "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model HAVING {e} > 5",
    "select list": "SELECT model, {e} AS v FROM prompts GROUP BY model",
    "ORDER BY": "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY {e}",
}


@pytest.mark.parametrize("clause", sorted(OUTER_CHAINS))
def test_the_outer_layer_prints_each_node_once_a_key_size(
    clause: str, small_demo: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checker and the outer layer match keys by their text: printing every node of
    a nested outer expression to compare it printed text quadratic in the depth (480
    nested `COUNT(*) / 2` in HAVING took 18 s to plan, 2026-12-04). Only nodes of a key's
    size are printed (render.KeyTexts), so the text printed grows with the chain."""
    printed = 0

    def counted(node: exp.Expr) -> str:
        nonlocal printed
        text = duckdb_sql(node)
        printed += len(text)
        return text

    monkeypatch.setattr(check, "duckdb_sql", counted)
    monkeypatch.setattr(outer, "duckdb_sql", counted)
    sizes = []
    for depth in (20, 40):
        chain = "COUNT(*)"
        for _ in range(depth):
            chain = f"({chain} / 2)"
        printed = 0
        small_demo.explain(QueryRequest(OUTER_CHAINS[clause].format(e=chain), epsilon=1.0))
        sizes.append(printed)
    assert sizes[1] < 2.5 * sizes[0], sizes


def test_keys_are_still_found_in_the_outer_layer(small_demo: Engine) -> None:
    """Keys inside outer expressions, of several sizes, are still matched by their text
    (a key's columns are not aggregated: unmatched, the query would be refused)."""
    sql = (
        "SELECT date_trunc('day', ts) AS d, model, "
        "CONCAT(model, '/', CAST(date_trunc('day', ts) AS VARCHAR)) AS label, "
        "COUNT(*) * 2 AS n FROM prompts GROUP BY date_trunc('day', ts), model "
        "HAVING date_trunc('day', ts) > TIMESTAMP '2000-01-01' AND model <> 'none' "
        "ORDER BY date_trunc('day', ts) DESC, LENGTH(model)"
    )
    rows = small_demo.run(QueryRequest(sql, epsilon=1000.0)).rows
    assert rows and all(r[2] == f"{r[1]}/{r[0]}" for r in rows)
