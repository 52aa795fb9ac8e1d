"""One router per resource."""

from __future__ import annotations

from typing import Any

from proxy.server.schemas import ErrorResponse

_ERROR = {"model": ErrorResponse}
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {**_ERROR, "description": "parse_error, unsupported_sql or bad_request"},
    401: {**_ERROR, "description": "unauthorized: missing or invalid API key"},
    403: {**_ERROR, "description": "forbidden: wrong role or table not granted"},
    404: {**_ERROR, "description": "not_found"},
    413: {**_ERROR, "description": "too_large: request body or SQL"},
    422: {**_ERROR, "description": "validation_error: the body does not match the schema"},
    429: {**_ERROR, "description": "rate_limited"},
    500: {**_ERROR, "description": "internal"},
    503: {**_ERROR, "description": "ledger_unavailable"},
}
