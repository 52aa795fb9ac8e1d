"""Issue #12 (finding 4): every cell whose 95% interval reaches ±10% of its value is
named by a warning — one per column, with the number of such cells, how wide they are
and what to do — so that a cell far off its exact value is never silent.
"""

from __future__ import annotations

import re

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.result import LOW_PRECISION, Result

FINE = (
    "SELECT model, plan, COUNT(*) AS n, AVG(tokens_out) AS a, SUM(tokens_in) / COUNT(*) AS r "
    "FROM prompts JOIN users USING (user_id) GROUP BY model, plan"
)
COARSE = "SELECT COUNT(*) AS n FROM prompts"


def _check(result: Result) -> dict[str, int]:
    """Per column, the cells that need a warning; asserts each column with any is named
    by exactly one warning of the imprecise kind, which states their number."""
    keys = 2 if "plan" in result.columns else 0
    need: dict[str, int] = {}
    for row, widths in zip(result.rows, result.intervals, strict=True):
        for c in range(keys, len(result.columns)):
            value, width = row[c], widths[c]
            if width is None or not isinstance(value, int | float):
                continue
            info = result.privacy.columns[c]
            if info.half_width_95 is not None and abs(value) < info.half_width_95:
                continue  # said by the "indistinguishable from 0" warning
            if width >= LOW_PRECISION * abs(value):
                need[result.columns[c]] = need.get(result.columns[c], 0) + 1
    for column in result.columns:
        found = [w for w in result.warnings if f"column {column!r} are imprecise" in w]
        if column in need:
            assert len(found) == 1, (column, result.warnings)
            assert re.match(rf"{need[column]} of {len(result.rows)} values", found[0])
            assert "larger epsilon" in found[0] and "coarser" in found[0]
        else:
            assert not found, found
    return need


def test_fine_groups_at_small_epsilon_are_warned(demo_engine: Engine) -> None:
    result = demo_engine.run(QueryRequest(FINE, epsilon=0.1))
    need = _check(result)
    assert need, "at epsilon 0.1 over 9 groups some cells are imprecise"
    # One warning per column, not one per cell.
    assert sum("are imprecise" in w for w in result.warnings) == len(need)


def test_a_precise_total_has_no_such_warning(demo_engine: Engine) -> None:
    result = demo_engine.run(QueryRequest(COARSE, epsilon=2.0))
    assert _check(result) == {}


def test_partition_selection_says_groups_may_be_missing(
    demo_engine: Engine, pums_engine: Engine
) -> None:
    """A private key's groups pass a noisy threshold of people; those that do not are
    missing, and the answer says so with the threshold (an audit: 292 of 438 PUMS income
    groups gone with no word). A public domain's answer shows every group: no such note."""
    private = pums_engine.run(
        QueryRequest("SELECT income, COUNT(*) AS n FROM PUMS.PUMS GROUP BY income", epsilon=1.0)
    )
    tau = private.privacy.partition["tau"]
    (note,) = [w for w in private.warnings if "partition selection" in w]
    assert f"about {tau:.0f}" in note and "public domain" in note
    public = demo_engine.run(
        QueryRequest("SELECT region, COUNT(*) AS n FROM users GROUP BY region", epsilon=1.0)
    )
    assert public.privacy.partition["strategy"] == "public_domain"
    assert not [w for w in public.warnings if "partition selection" in w]


def test_a_per_person_subquery_says_its_values_are_bounded(demo_engine: Engine) -> None:
    """Each person's COUNT(*) inside a per-person subquery is clamped to [.., C] before
    the outer query reads it; the answer names the bound whatever the data (an audit:
    an average of 12.5 prompts per person came back as 5.5 under C = 10, with no word)."""
    sql = "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t"
    result = demo_engine.run(QueryRequest(sql, epsilon=1.0))
    (note,) = [w for w in result.warnings if "per-person subquery" in w]
    assert re.search(r"n within \[\d[\d,]*, \d[\d,]*\]", note), note
    plain = demo_engine.run(QueryRequest("SELECT COUNT(*) AS n FROM prompts", epsilon=1.0))
    assert not [w for w in plain.warnings if "per-person subquery" in w]
