"""One SQLSTATE per dpsql error code, and what an ErrorResponse carries."""

from __future__ import annotations

import re

from proxy.errors import CODES, DPSQLError
from proxy.pgwire.sqlstate import SQLSTATES, from_dpsql, offset_of


def test_every_dpsql_code_has_a_sqlstate() -> None:
    assert set(SQLSTATES) == set(CODES)
    assert all(re.fullmatch(r"[0-9A-Z]{5}", s) for s in SQLSTATES.values())


def test_the_states_clients_branch_on() -> None:
    assert SQLSTATES["parse_error"] == "42601"
    assert SQLSTATES["unsupported_sql"] == "0A000"
    assert SQLSTATES["unauthorized"] == "28000"
    assert SQLSTATES["budget_exhausted"] == "53400"
    assert SQLSTATES["timeout"] == "57014"
    assert SQLSTATES["forbidden"] == "42501"
    assert SQLSTATES["not_found"] == "42P01"


def test_error_response_fields() -> None:
    sql = "SELECT region,\n  COUNT(*) FROM users GROUP BY regio"
    error = DPSQLError(
        "budget_exhausted",
        "the privacy budget of users cannot pay for this query",
        "ask a cached query",
        position={"line": 2, "column": 3},
        details={"population": "users", "cap": 4.0},
    )
    fields = from_dpsql(error, sql).fields()
    assert fields["C"] == "53400" and fields["S"] == "ERROR"
    assert fields["H"] == "ask a cached query"
    assert fields["D"] == "dpsql code budget_exhausted; population=users, cap=4.0"
    assert sql[int(fields["P"]) - 1] == "C"  # 1-based offset of line 2, column 3
    assert offset_of("ab\ncd", 1, 1) == 1
