"""Casts the checker refuses before any charge: unsigned integers by any of DuckDB's
names (their arithmetic raises below zero on the rows that reach it, and one raising row
makes DuckDB redo its vector row by row), and type names sqlglot does not know (only
DuckDB could say what they are). DuckDB's aliases UINT8 ... UINT64 were answered while
UTINYINT ... UBIGINT were refused (an adversarial probe, 2026-12-05)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

REFUSED = [
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
    "UINT8", "UINT16", "UINT32", "UINT64", "VARINT", "NOT_A_TYPE",
]  # fmt: skip


@pytest.mark.parametrize("kind", REFUSED)
def test_unsigned_and_unknown_casts_are_refused_before_any_charge(
    small_demo: Engine, kind: str
) -> None:
    spent = small_demo.ledger.history()
    for sql in (
        f"SELECT COUNT(*) AS n FROM prompts WHERE CAST(tokens_in AS {kind}) - 5 > 0",
        f"SELECT SUM(TRY_CAST(tokens_in AS {kind})) AS s FROM prompts",
    ):
        with pytest.raises(DPSQLError) as refused:
            small_demo.run(QueryRequest(sql, epsilon=1.0))
        assert refused.value.code == "unsupported_sql", sql
        assert "a cast to" in str(refused.value) and "not answered" in str(refused.value)
    assert small_demo.ledger.history() == spent


@pytest.mark.parametrize("kind", ["INT8", "INT4", "BIGINT", "HUGEINT", "DOUBLE", "FLOAT8"])
def test_signed_casts_are_answered(small_demo: Engine, kind: str) -> None:
    sql = f"SELECT COUNT(*) AS n FROM prompts WHERE CAST(tokens_in AS {kind}) - 5 > 0"
    assert len(small_demo.run(QueryRequest(sql, epsilon=1.0)).rows) == 1
