"""The clamped-rows flag's gates stay within a budget of the query's size.

Each clamp in a branch of the analyst's CASE is gated by copies of the conditions before
it (proxy/rewrite/clamped_rows.py): n branches reading a clamped column copied 1, 2, ...,
n conditions, and a sum of n clamped columns under its range's CASE copied that whole
sum into each clamp's gates, both quadratic in the query before the charge (42 s for
160 branches). Past GATE_NODES the tests run ungated, on every row.
"""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.rewrite import clamped_rows


def _flat_case(branches: int) -> str:
    whens = " ".join(f"WHEN plan = 'p{i}' THEN age" for i in range(branches))
    return f"SELECT SUM(CASE {whens} ELSE 0 END) AS s FROM users"


def _counting_taken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    taken = clamped_rows._taken

    def counted(condition: object, value: bool) -> object:
        calls[0] += 1
        return taken(condition, value)  # type: ignore[arg-type]

    monkeypatch.setattr(clamped_rows, "_taken", counted)
    return calls


def test_a_small_case_keeps_its_gates(small_demo: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_taken(monkeypatch)
    plan = small_demo.prepare(QueryRequest(sql=_flat_case(3)))[1]
    assert calls[0] > 0
    assert "TRY(CASE WHEN t0.plan = 'p0' THEN TRUE ELSE FALSE END)" in plan.core_sql


def test_many_branches_copy_no_quadratic_gates(
    small_demo: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_taken(monkeypatch)
    sql = _flat_case(150)
    plan = small_demo.prepare(QueryRequest(sql=sql))[1]
    # Before: 11,325 gates copied, and the flag held each branch's conditions again
    # (about 600,000 characters of core SQL).
    assert calls[0] == 0
    assert len(plan.core_sql) < 20 * len(sql)


def test_a_long_clamped_sum_copies_its_range_test_a_bounded_number_of_times(
    small_demo: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_taken(monkeypatch)
    small_demo.prepare(
        QueryRequest(sql="SELECT SUM(" + " + ".join(["age"] * 120) + ") AS s FROM users")
    )
    # Before: each of the 360 clamps copied the whole sum (the range CASE's tests).
    assert calls[0] == 0
