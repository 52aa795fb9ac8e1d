"""Suite 3b: the hand-written escape corpus against the proxy.

Every query that is not of the TOTAL kind must be refused with its documented 4xx code
before the executor reads a private row, with the ledger unchanged. TOTAL queries (row
functions that could fail on some rows) must never fail with a 500 and must have the same
outcome whether the value they test exists in the data or not.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from proxy.engine import Engine
from proxy.errors import CODES, DPSQLError
from proxy.request import QueryRequest
from tests.reliability.conftest import FzChecker
from tests.reliability.escape_corpus import CORPUS, EXISTING, MISSING, TOTAL, Escape


def _param(escape: Escape) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=escape.defect)] if escape.defect else []
    return pytest.param(escape, id=escape.id, marks=marks)


REFUSED = [_param(e) for e in CORPUS if e.expected != TOTAL]
TOTALS = [_param(e) for e in CORPUS if e.expected == TOTAL]
TIME_LIMIT_S = 10.0


def test_corpus_is_large_and_covers_every_category() -> None:
    assert len(CORPUS) >= 60
    per_category = Counter(e.category for e in CORPUS)
    assert len(per_category) == 10
    assert min(per_category.values()) >= 5, per_category
    assert all(e.expected == TOTAL or CODES[e.expected] < 500 for e in CORPUS)


@pytest.fixture
def fz_reads(fz_demo_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every call that reaches the private data (Executor.run)."""
    calls: list[str] = []
    real = fz_demo_engine.executor.run

    def spy(sql: str, params: Any = ()) -> Any:
        calls.append(sql)
        return real(sql, params)

    monkeypatch.setattr(fz_demo_engine.executor, "run", spy)
    return calls


@pytest.mark.parametrize("escape", REFUSED)
def test_escape_is_refused_before_touching_data(
    fz_demo_engine: Engine,
    fz_checker: Callable[[Engine], FzChecker],
    fz_reads: list[str],
    escape: Escape,
) -> None:
    check = fz_checker(fz_demo_engine)
    sql = escape.sql.replace("{t}", "users")
    started = time.monotonic()
    outcome = check(QueryRequest(sql, epsilon=0.5))
    assert time.monotonic() - started < TIME_LIMIT_S
    assert not outcome.violation, outcome.violation
    assert outcome.kind == escape.expected
    assert fz_reads == []


def _class(outcome: Any) -> str:
    return "answered" if outcome.kind == "answered" else f"refused:{outcome.kind}"


@pytest.mark.parametrize("escape", TOTALS)
def test_failing_row_functions_never_depend_on_data(
    fz_demo_engine: Engine, fz_checker: Callable[[Engine], FzChecker], escape: Escape
) -> None:
    check = fz_checker(fz_demo_engine)
    classes = []
    for value in (EXISTING, MISSING) if "{v}" in escape.sql else (EXISTING,):
        started = time.monotonic()
        outcome = check(QueryRequest(escape.sql.replace("{v}", value), epsilon=0.5))
        assert time.monotonic() - started < TIME_LIMIT_S
        assert not outcome.violation, f"{value}: {outcome.violation}"
        classes.append(_class(outcome))
    assert len(set(classes)) == 1, classes


def test_refusals_carry_message_and_hint(fz_demo_engine: Engine) -> None:
    for escape in CORPUS:
        if escape.expected == TOTAL or escape.defect:
            continue
        with pytest.raises(DPSQLError) as info:
            fz_demo_engine.run(QueryRequest(escape.sql.replace("{t}", "users"), epsilon=0.5))
        assert info.value.message.strip() and info.value.hint.strip(), escape.id
