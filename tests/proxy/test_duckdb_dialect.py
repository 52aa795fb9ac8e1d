"""dpsql's handlers in sqlglot's DuckDB generator (proxy/duckdb_dialect.py): the stock
handlers' text, printed without copying the operand at every level."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.generators.duckdb import DuckDBGenerator

from proxy import duckdb_dialect
from proxy.render import DUCKDB
from tests.copy_counter import deep_copies

QUERIES = [
    "SELECT date_trunc('day', ts), date_trunc('week', ts + INTERVAL 1 DAY)",
    "SELECT date_trunc('month', CAST(x AS TIMESTAMP)), date_trunc('isoweek', ts)",
    "SELECT date_trunc('hour', date_trunc('day', ts - INTERVAL 3 HOUR))",
    "SELECT CAST(date_trunc('year', ts) AS DATE), date_trunc('quarter', ts) > ts",
    "SELECT safe_divide(a + 1, b - 2), safe_divide(1, safe_divide(2, c))",
    "SELECT 3 / safe_divide(a, b), safe_divide(-a, b), safe_divide(a * 2, b / 3) * 2",
    "SELECT safe_divide(CASE WHEN x THEN 1 END, COALESCE(b, 1)), safe_divide(a, 2.5)",
    "SELECT date_trunc('month', CASE WHEN ts BETWEEN CAST('0001-01-01' AS TIMESTAMP) AND "
    "CAST('9999-12-31 23:59:59.999999' AS TIMESTAMP) THEN ts END) AS k, "
    "safe_divide(CASE WHEN ts BETWEEN CAST('0001-01-01' AS TIMESTAMP) AND CAST('9999-12-31' "
    "AS TIMESTAMP) THEN a END, b)",
]
BIGQUERY = [
    "SELECT timestamp_trunc(ts, week(monday)), timestamp_trunc(ts, day, 'UTC')",
    "SELECT timestamp_trunc(ts + INTERVAL 1 DAY, hour), safe_divide(x, y)",
]
STOCK: dict[type[exp.Expr], Callable[..., str]] = {
    exp.SafeDivide: DuckDBGenerator.safedivide_sql,
    exp.TimestampTrunc: duckdb_dialect._STOCK_TRUNC,
}


def _trees() -> list[exp.Expr]:
    return [sqlglot.parse_one(q, read="duckdb") for q in QUERIES] + [
        sqlglot.parse_one(q, read="bigquery") for q in BIGQUERY
    ]


@pytest.mark.parametrize("pretty", [False, True])
@pytest.mark.parametrize("tree", _trees(), ids=lambda t: t.sql()[:40])
def test_the_handlers_print_the_stock_text(tree: exp.Expr, pretty: bool) -> None:
    generator = DUCKDB.generator(pretty=pretty)
    found = [n for n in tree.walk() if type(n) in STOCK]
    assert found
    for node in found:
        ours = duckdb_dialect.HANDLERS[type(node)](generator, node)
        assert ours == STOCK[type(node)](generator, node.copy())


def test_the_handlers_are_installed() -> None:
    """Every DuckDB text goes through them, however it is asked for."""
    tree = sqlglot.parse_one("SELECT safe_divide(a, b), date_trunc('day', ts)", read="duckdb")
    text = "SELECT CASE WHEN b <> 0 THEN a / b ELSE NULL END, DATE_TRUNC('DAY', ts)"
    assert tree.sql(dialect="duckdb") == text
    assert DUCKDB.generate(tree, copy=False) == text
    assert DuckDBGenerator.TRANSFORMS[exp.SafeDivide] is duckdb_dialect.safe_divide_sql


@pytest.mark.parametrize("tree", _trees(), ids=lambda t: t.sql()[:40])
def test_printing_leaves_the_tree_as_it_was(tree: exp.Expr) -> None:
    before = repr(tree)
    DUCKDB.generate(tree, copy=False)
    assert repr(tree) == before
    for node in tree.walk():
        for child in node.iter_expressions():
            assert child.parent is node


def _deep_copies(text: str, dialect: str = "duckdb") -> int:
    """How many times copy.deepcopy is entered while ``text`` is printed in place."""
    tree = sqlglot.parse_one(text, read=dialect)
    return deep_copies(lambda: DUCKDB.generate(tree, copy=False))


@pytest.mark.parametrize(
    "step", ["date_trunc('day', {e})", "safe_divide({e}, 2)", "safe_divide({e} + 1, 2)"]
)
def test_nested_calls_are_not_copied_at_every_level(step: str) -> None:
    """sqlglot's handlers copied the operand at every level: printing 100 nested levels
    copied about 5,000 subtrees of nodes (320 truncations took 10 s to plan)."""
    counts = []
    for depth in (50, 100):
        expression = "ts"
        for _ in range(depth):
            expression = step.format(e=expression)
        counts.append(_deep_copies(f"SELECT {expression}"))
    assert counts[1] <= 2.5 * max(counts[0], 1) and counts[1] < 2_000, counts
