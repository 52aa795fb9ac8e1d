"""A remainder by a constant and a calendar part have ranges of their own
(proxy/rewrite/ranges.py), enforced by the clamp the rewrite puts on every aggregate
argument: ``SUM(tokens_in % 10)`` and ``AVG(EXTRACT(hour FROM ts))`` were refused as
unbounded (a probe, 2026-12-06)."""

from __future__ import annotations

import pytest
from sqlglot import exp, parse_one

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.rewrite.ranges import Range, derive


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("tokens_in % 10", Range(0.0, 9.0, True)),
        ("(tokens_in - 2000) % 7", Range(-6.0, 6.0, True)),
        ("(tokens_in - 5000) % 7", Range(-6.0, 0.0, True)),
        ("-tokens_in % 3", Range(-2.0, 0.0, True)),
        ("tokens_in % 2.5", Range(0.0, 2.5, False)),
        ("EXTRACT(hour FROM ts)", Range(0.0, 23.0, True)),
        ("EXTRACT(dow FROM ts)", Range(0.0, 6.0, True)),
        ("EXTRACT(isodow FROM ts)", Range(1.0, 7.0, True)),
        ("EXTRACT(month FROM ts)", Range(1.0, 12.0, True)),
        ("EXTRACT(second FROM ts)", Range(0.0, 61.0, False)),
    ],
)
def test_the_ranges(small_demo: Engine, expression: str, expected: Range) -> None:
    tables = {"prompts": small_demo.catalog.get("main", "prompts")}
    node = parse_one(f"SELECT {expression} FROM prompts AS prompts", read="duckdb")
    for col in node.find_all(exp.Column):
        col.set("table", exp.to_identifier("prompts"))
    assert derive(node.expressions[0], tables) == expected  # type: ignore[arg-type]


def test_the_year_stays_unbounded(small_demo: Engine) -> None:
    tables = {"prompts": small_demo.catalog.get("main", "prompts")}
    node = parse_one("SELECT EXTRACT(year FROM prompts.ts) FROM prompts", read="duckdb")
    assert not derive(node.expressions[0], tables).bounded  # type: ignore[arg-type]


def test_answered_near_the_data(small_demo: Engine) -> None:
    sql = (
        "SELECT AVG(tokens_in % 10) AS a, AVG(EXTRACT(hour FROM ts)) AS h, "
        "AVG(EXTRACT(dow FROM ts)) AS d FROM prompts"
    )
    [got] = small_demo.run(QueryRequest(sql, epsilon=1e4)).rows
    [want] = small_demo.executor.evaluate(sql.replace("FROM prompts", "FROM main.prompts"))
    for g, w in zip(got, want, strict=True):
        assert abs(float(g) - float(w)) < 0.6, (got, want)
