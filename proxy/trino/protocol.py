"""The Trino client protocol's documents: QueryResults, errors, warnings, query ids.

A statement is POSTed to ``/v1/statement``; each reply is a QueryResults document
(``id``, ``infoUri``, ``nextUri``, ``columns``, ``data``, ``stats``, ``error``,
``warnings``) and the client GETs ``nextUri`` until it is absent; DELETE on it cancels.
Errors travel in a 200 reply's ``error`` object; HTTP statuses are reserved for
authentication (401), rate limits (429) and the server's own failures.
"""

from __future__ import annotations

import datetime as dt
import itertools
import secrets
from typing import Any

from proxy.errors import CODES, DPSQLError

# Trino reserves error-code ranges per component; dpsql's codes live in their own range,
# in the order of proxy.errors.CODES, so a code's number is stable while CODES only grows.
ERROR_CODE_BASE = 0x0D50_0000
WARNING_PRIVACY = (ERROR_CODE_BASE + 0x100, "DPSQL_PRIVACY")
WARNING_ACCURACY = (ERROR_CODE_BASE + 0x101, "DPSQL_ACCURACY")
_RESOURCE_CODES = {"budget_exhausted", "rate_limited", "timeout", "too_large"}
_INTERNAL_CODES = {"internal", "ledger_unavailable"}
_counter = itertools.count(1)


def new_query_id() -> str:
    """Trino's shape: date_time_counter_suffix (the suffix makes ids unguessable)."""
    now = dt.datetime.now(dt.UTC)
    return f"{now:%Y%m%d_%H%M%S}_{next(_counter) % 100000:05d}_{secrets.token_hex(4)}"


def error_type(code: str) -> str:
    if code in _RESOURCE_CODES:
        return "INSUFFICIENT_RESOURCES"
    if code in _INTERNAL_CODES:
        return "INTERNAL_ERROR"
    return "USER_ERROR"


def error_object(error: DPSQLError) -> dict[str, Any]:
    """Trino's error object: errorName is dpsql's stable code in upper case, the message
    carries the hint, and a parse error's position becomes errorLocation."""
    message = error.message
    if error.hint:
        message += f" — hint: {error.hint}"
    message += f" [dpsql {error.code}]"
    body: dict[str, Any] = {
        "message": message,
        "errorCode": ERROR_CODE_BASE + list(CODES).index(error.code),
        "errorName": error.code.upper(),
        "errorType": error_type(error.code),
        "failureInfo": {
            "type": f"dpsql.{error.code}",
            "message": message,
            "suppressed": [],
            "stack": [],
        },
    }
    if error.position is not None:
        location = {
            "lineNumber": error.position["line"],
            "columnNumber": error.position["column"],
        }
        body["errorLocation"] = location
        body["failureInfo"]["errorLocation"] = location
    if error.details:
        body["dpsql"] = error.details
    return body


def warning(code: tuple[int, str], message: str) -> dict[str, Any]:
    return {"warningCode": {"code": code[0], "name": code[1]}, "message": message}


def stats(state: str, *, elapsed_ms: int = 0, rows: int = 0) -> dict[str, Any]:
    return {
        "state": state,
        "queued": state == "QUEUED",
        "scheduled": state != "QUEUED",
        "nodes": 1,
        "totalSplits": 1,
        "queuedSplits": 0,
        "runningSplits": 0 if state in ("FINISHED", "FAILED") else 1,
        "completedSplits": 1 if state in ("FINISHED", "FAILED") else 0,
        "cpuTimeMillis": elapsed_ms,
        "wallTimeMillis": elapsed_ms,
        "queuedTimeMillis": 0,
        "elapsedTimeMillis": elapsed_ms,
        "processedRows": rows,
        "processedBytes": 0,
        "physicalInputBytes": 0,
        "peakMemoryBytes": 0,
        "spilledBytes": 0,
        "progressPercentage": 100.0 if state == "FINISHED" else 0.0,
    }


def results(
    *,
    base_url: str,
    query_id: str,
    state: str,
    next_uri: str | None = None,
    columns: list[dict[str, Any]] | None = None,
    data: list[list[Any]] | None = None,
    warnings: list[dict[str, Any]] | None = None,
    error: dict[str, Any] | None = None,
    update_type: str | None = None,
    elapsed_ms: int = 0,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": query_id,
        # Trino's own points at its web UI's page of the query, which dpsql has not:
        # the console (the analyst's releases and budget) instead of a 404.
        "infoUri": f"{base_url}/",
        "stats": stats(state, elapsed_ms=elapsed_ms, rows=len(data or ())),
        "warnings": warnings or [],
    }
    if next_uri is not None:
        doc["nextUri"] = next_uri
    if columns is not None:
        doc["columns"] = columns
    if data:
        doc["data"] = data
    if error is not None:
        doc["error"] = error
    if update_type is not None:
        doc["updateType"] = update_type
    return doc
