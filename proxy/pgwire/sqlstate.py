"""SQLSTATEs: one table from dpsql's error codes to PostgreSQL's, and the error the
wire door raises.

Clients branch on SQLSTATE (psycopg picks its exception class from it, Tableau wants
28000 for bad credentials), so each dpsql code maps to the PostgreSQL class that
means the same thing. tests/pgwire/test_sqlstate.py keeps the table complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.errors import DPSQLError

# dpsql error code -> SQLSTATE (PostgreSQL's errcodes appendix).
SQLSTATES: dict[str, str] = {
    "parse_error": "42601",  # syntax_error
    "unsupported_sql": "0A000",  # feature_not_supported
    "bad_request": "22023",  # invalid_parameter_value
    "policy_error": "F0000",  # config_file_error
    "unauthorized": "28000",  # invalid_authorization_specification
    "budget_exhausted": "53400",  # configuration_limit_exceeded
    "forbidden": "42501",  # insufficient_privilege
    "not_found": "42P01",  # undefined_table
    "timeout": "57014",  # query_canceled
    "too_large": "54000",  # program_limit_exceeded
    "validation_error": "22023",  # invalid_parameter_value
    "rate_limited": "53000",  # insufficient_resources
    "ledger_unavailable": "58000",  # system_error
    "internal": "XX000",  # internal_error
}

# States the door raises itself, outside the engine's codes.
INVALID_PASSWORD = "28P01"
INVALID_AUTHORIZATION = "28000"
PROTOCOL_VIOLATION = "08P01"
FEATURE_NOT_SUPPORTED = "0A000"
UNDEFINED_OBJECT = "42704"
INSUFFICIENT_PRIVILEGE = "42501"
INVALID_PARAMETER_VALUE = "22023"
IN_FAILED_TRANSACTION = "25P02"
INVALID_STATEMENT_NAME = "26000"
INVALID_CURSOR_NAME = "34000"
QUERY_CANCELED = "57014"
INTERNAL_ERROR = "XX000"
PROGRAM_LIMIT_EXCEEDED = "54000"
ADMIN_SHUTDOWN = "57P01"
SYNTAX_ERROR = "42601"


@dataclass
class WireError(Exception):
    """An ErrorResponse: SQLSTATE, message, and optional hint, detail and position."""

    sqlstate: str
    message: str
    hint: str = ""
    detail: str = ""
    position: int | None = None  # 1-based character offset into the statement
    severity: str = "ERROR"
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def fields(self) -> dict[str, str]:
        out = {"S": self.severity, "V": self.severity, "C": self.sqlstate, "M": self.message}
        if self.detail:
            out["D"] = self.detail
        if self.hint:
            out["H"] = self.hint
        if self.position is not None:
            out["P"] = str(self.position)
        out.update(self.extra)
        return out


def offset_of(sql: str, line: int, column: int) -> int:
    """1-based character offset of (line, column) in ``sql``, as ErrorResponse wants."""
    lines = sql.split("\n")
    before = sum(len(text) + 1 for text in lines[: max(line - 1, 0)])
    return before + max(column, 1)


def from_dpsql(error: DPSQLError, sql: str = "") -> WireError:
    """The ErrorResponse for an engine refusal: its SQLSTATE, message and hint, the
    position when known, and the structured details (budget numbers) as DETAIL."""
    position = None
    if error.position is not None and sql:
        position = offset_of(sql, error.position["line"], error.position["column"])
    detail = ", ".join(f"{k}={v}" for k, v in error.details.items())
    return WireError(
        SQLSTATES[error.code],
        error.message,
        hint=error.hint,
        detail=f"dpsql code {error.code}" + (f"; {detail}" if detail else ""),
        position=position,
    )
