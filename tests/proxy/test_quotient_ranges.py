"""A quotient by a divisor whose range keeps away from 0 has a range of its own (the
corners' quotients, proxy/rewrite/ranges.py), enforced by the clamp the rewrite puts on
every aggregate argument: ``AVG(tokens_out / GREATEST(tokens_in, 1))``, the per-row
ratio BI tools write, was refused as unbounded (the BI corpus, 2026-12-06). A divisor
that can be 0 is still refused, before any charge, with a hint that works."""

from __future__ import annotations

import duckdb
import pytest
from sqlglot import exp, parse_one

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest
from proxy.rewrite.ranges import Range, derive


def _range(engine: Engine, expression: str) -> Range:
    tables = {"prompts": engine.catalog.get("main", "prompts")}
    node = parse_one(f"SELECT {expression} FROM prompts AS prompts", read="duckdb")
    for col in node.find_all(exp.Column):
        col.set("table", exp.to_identifier("prompts"))
    return derive(node.expressions[0], tables)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # tokens_in in [0, 4000], tokens_out in [0, 8000] (the demo policy)
        ("tokens_out / GREATEST(tokens_in, 1)", Range(0.0, 8000.0, False)),
        ("tokens_out * 1.0 / GREATEST(tokens_in, 1)", Range(0.0, 8000.0, False)),
        ("tokens_in / (tokens_out + 1)", Range(0.0, 4000.0, False)),
        ("(tokens_in - 2000) / GREATEST(tokens_out, 10)", Range(-200.0, 200.0, False)),
        ("tokens_in / (tokens_out - 8001)", Range(-4000.0, -0.0, False)),
        ("tokens_out // GREATEST(tokens_in, 3)", Range(0.0, 2667.0, True)),
        ("tokens_out / 4", Range(0.0, 2000.0, False)),  # a constant, as before
    ],
)
def test_the_ranges(small_demo: Engine, expression: str, expected: Range) -> None:
    assert _range(small_demo, expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "tokens_in / tokens_out",
        "tokens_in / (tokens_out - 10)",  # [-10, 7990] holds 0
        "tokens_in // tokens_out",
        "tokens_in / GREATEST(tokens_out, 1, prompt_id)",  # the id has no bound
        "prompt_id / GREATEST(tokens_in, 1)",
    ],
)
def test_a_divisor_that_can_be_0_or_an_unbounded_part_gives_no_range(
    small_demo: Engine, expression: str
) -> None:
    assert not _range(small_demo, expression).bounded


def test_answered_near_the_data(
    pums_near_exact: Engine, pums_exact: duckdb.DuckDBPyConnection
) -> None:
    # PUMS has one row per person: no row is cut, so the answer is SQL's own up to noise
    sql = (
        "SELECT AVG(income / GREATEST(age, 1)) AS r, AVG(age // (educ + 1)) AS q, "
        "SUM((age - 50) / GREATEST(educ, 2)) AS s FROM PUMS.PUMS"
    )
    answer = pums_near_exact.run(QueryRequest(sql, rho=1e6))
    [got], [widths] = answer.rows, answer.intervals
    [want] = pums_exact.execute(sql.replace("PUMS.PUMS", "pums.pums")).fetchall()
    for g, w, width in zip(got, want, widths, strict=True):
        # within 4 times the cell's stated 95% half-width (the oracle's tolerance), which
        # is itself small: the ratio's range [0, 500000] noised at this budget
        assert width is not None and width < 0.01 * abs(float(w)) + 0.05, (got, want, widths)
        assert abs(float(g) - float(w)) <= 4 * width + 1e-9, (got, want, widths)


def test_a_divisor_that_can_be_0_is_refused_with_a_hint_that_works(small_demo: Engine) -> None:
    spent = small_demo.ledger.history()
    for sql in (
        "SELECT AVG(tokens_out / tokens_in) AS r FROM prompts",
        "SELECT AVG(tokens_out * 1.0 / NULLIF(tokens_in, 0)) AS r FROM prompts",
    ):
        with pytest.raises(DPSQLError) as refused:
            small_demo.run(QueryRequest(sql, epsilon=1.0))
        assert "divides by a value that can be 0" in refused.value.message
        assert "GREATEST(tokens_in, 1)" in (refused.value.hint or "")
    assert small_demo.ledger.history() == spent  # refused before any charge
    fixed = "SELECT AVG(tokens_out / GREATEST(tokens_in, 1)) AS r FROM prompts"
    assert len(small_demo.run(QueryRequest(fixed, epsilon=1.0)).rows) == 1
