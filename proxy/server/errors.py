"""One handler shape for every failure: ``{"error": {"code", "message", "hint", ...}}``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from proxy.errors import CODES, DPSQLError
from proxy.server.logs import code_locations, log
from proxy.server.web.headers import add_fixed

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    402: "budget_exhausted",
    403: "forbidden",
    404: "not_found",
    408: "timeout",
    413: "too_large",
    422: "validation_error",
    429: "rate_limited",
}


def error_response(
    request: Request | None, error: DPSQLError, status: int | None = None
) -> JSONResponse:
    headers: dict[str, str] = {}
    if error.code == "unauthorized":
        headers["WWW-Authenticate"] = "Bearer"
    if error.code == "rate_limited" and "retry_after_s" in error.details:
        headers["Retry-After"] = str(error.details["retry_after_s"])
    if request is not None:
        state = request.scope.setdefault("state", {})
        state.setdefault("log", {})["code"] = error.code
        ctx = getattr(request.app.state, "ctx", None)
        if ctx is not None:
            ctx.metrics.refusals.labels(error.code).inc()
    return JSONResponse(error.to_dict(), status_code=status or error.status, headers=headers)


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    code = _HTTP_CODES.get(status, "internal" if status >= 500 else "bad_request")
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    hint = "see /docs for the routes and their methods" if status in (404, 405) else ""
    response = error_response(request, DPSQLError(code, message, hint), status)
    for name, value in (exc.headers or {}).items():
        response.headers.setdefault(name, value)
    return response


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # loc and msg only: pydantic's "input" would echo the request back.
    problems: list[dict[str, Any]] = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
        for e in exc.errors()[:20]
    ]
    first = problems[0] if problems else {"loc": ["body"], "msg": "invalid request"}
    where = ".".join(first["loc"][1:]) or ".".join(first["loc"]) or "request"
    json_body = request.headers.get("content-type", "").startswith("application/json")
    error = DPSQLError(
        "validation_error",
        f"{where}: {first['msg']}",
        "see /docs for the request schema"
        + ("" if json_body else "; send JSON with 'Content-Type: application/json'"),
        details={"errors": problems},
    )
    return error_response(request, error)


def _dpsql_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DPSQLError)
    return error_response(request, exc)


def _internal(request: Request, exc: Exception) -> JSONResponse:
    log(
        "internal_error",
        logging.ERROR,
        exception=type(exc).__name__,
        at=code_locations(exc.__traceback__),
        path=request.url.path,
    )
    response = error_response(
        request,
        DPSQLError("internal", "internal error", "the operator's logs record the failure"),
    )
    # Starlette answers an exception that escapes a middleware from outside every
    # middleware, SecurityHeaders included: the headers go on here too.
    add_fixed(response.headers)
    return response


def install(app: FastAPI) -> None:
    assert set(_HTTP_CODES.values()) <= set(CODES)
    app.add_exception_handler(DPSQLError, _dpsql_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal)
