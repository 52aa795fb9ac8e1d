"""One error family with stable codes, shared by the engine, the CLI and the server.

Every refusal carries a code from ``CODES``, a message that says what was wrong, a hint
that says how to fix it, and, for SQL, the position. Messages never contain data values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# code -> HTTP status. The README lists every code; a test keeps the two in step.
CODES: dict[str, int] = {
    "parse_error": 400,
    "unsupported_sql": 400,
    "bad_request": 400,
    "policy_error": 400,
    "unauthorized": 401,
    "budget_exhausted": 402,
    "forbidden": 403,
    "not_found": 404,
    "timeout": 408,
    "too_large": 413,
    "validation_error": 422,
    "rate_limited": 429,
    "ledger_unavailable": 503,
    "internal": 500,
}


@dataclass
class DPSQLError(Exception):
    """A refusal or failure that can be shown to an analyst as is."""

    code: str
    message: str
    hint: str = ""
    position: dict[str, int] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown error code {self.code!r}")
        super().__init__(self.message)

    @property
    def status(self) -> int:
        return CODES[self.code]

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message, "hint": self.hint}
        if self.position is not None:
            body["position"] = self.position
        body.update(self.details)
        return {"error": body}


def position_of(node: Any) -> dict[str, int] | None:
    """Line and column of a sqlglot node, when the parser recorded them."""
    meta = getattr(node, "meta", None) or {}
    line, col = meta.get("line"), meta.get("col")
    if isinstance(line, int) and isinstance(col, int):
        return {"line": line, "column": col}
    return None


def unsupported(message: str, hint: str, position: dict[str, int] | None = None) -> DPSQLError:
    return DPSQLError("unsupported_sql", message, hint, position)


def bad_request(message: str, hint: str = "") -> DPSQLError:
    return DPSQLError("bad_request", message, hint)


def query_timeout(
    seconds: float, hint: str = "narrow the query; its budget charge stands"
) -> DPSQLError:
    """A query stopped at its time limit: the same words from every engine."""
    return DPSQLError("timeout", f"the query ran longer than {seconds:g} s and was stopped", hint)
