"""Operands written or evaluated twice per level (proxy/repeated_operands.py): nested
past the limit, refused before any charge; within it, answered."""

from __future__ import annotations

import sys
import time

import pytest
import sqlglot

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.repeated_operands import MAX_REPEATED, check_repeated_operands
from proxy.request import QueryRequest
from tests.proxy.test_refusals import refused


def _nested(step: str, start: str, depth: int) -> str:
    expression = start
    for _ in range(depth):
        expression = step.format(e=expression)
    return expression


INNER = "SELECT {e} AS k, COUNT(*) AS n FROM prompts GROUP BY 1"
OUTER = "SELECT model, {e} AS m FROM (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) AS s"


@pytest.mark.parametrize(
    ("query", "step", "start"),
    [
        (INNER, "safe_divide(1, {e})", "tokens_out"),
        (INNER, "safe_divide(1, {e} + 1)", "tokens_out"),
        (OUTER, "NULLIF({e}, 3)", "n"),
    ],
    ids=["denominator", "denominator sum", "outer nullif"],
)
def test_past_the_limit_is_refused_before_the_charge(
    small_demo: Engine, query: str, step: str, start: str
) -> None:
    # 16 nested levels took 88 s (SAFE_DIVIDE) and 38 s (NULLIF) to plan before the limit
    started = time.perf_counter()
    error = refused(
        small_demo,
        QueryRequest(query.format(e=_nested(step, start, 16)), epsilon=1.0),
        "unsupported_sql",
    )
    assert "the limit is 4" in error.message
    assert "subquery or CTE" in error.hint
    assert error.position is not None
    # nothing to time here but the refusal itself: reported, not asserted
    print(f"refused in {time.perf_counter() - started:.3f} s")


@pytest.mark.parametrize(
    ("query", "step", "start"),
    [
        (INNER, "safe_divide(1, {e})", "tokens_out"),
        (OUTER, "NULLIF({e}, 3)", "n"),
    ],
    ids=["denominator", "outer nullif"],
)
def test_within_the_limit_is_answered(
    small_demo: Engine, query: str, step: str, start: str
) -> None:
    result = small_demo.run(
        QueryRequest(query.format(e=_nested(step, start, MAX_REPEATED)), epsilon=1.0)
    )
    assert result.rows


def test_numerators_and_second_arguments_are_not_counted() -> None:
    text = "SELECT " + _nested("safe_divide(NULLIF(2, {e}), 3)", "x", 12)
    check_repeated_operands(sqlglot.parse_one(text, read="bigquery"))
    with pytest.raises(DPSQLError):
        check_repeated_operands(
            sqlglot.parse_one("SELECT " + _nested("safe_divide(2, {e})", "x", 5), read="bigquery")
        )


def test_a_deep_tree_is_checked_without_recursion() -> None:
    """The walk is iterative: a tree deeper than the recursion limit left to the caller
    is checked, and passes."""
    tree = sqlglot.parse_one("SELECT " + _nested("({e} + 1)", "x", 300), read="duckdb")
    limit = sys.getrecursionlimit()
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(depth + 100)  # fewer frames than the tree has levels
    try:
        check_repeated_operands(tree)
    finally:
        sys.setrecursionlimit(limit)
