"""The Trino client protocol's routes, served by the same app as the REST API.

``POST /v1/statement`` runs one statement and replies with its first page;
``GET /v1/statement/executing/{id}/{slug}/{token}`` serves the next pages from the
stored answer; ``DELETE`` on the same URI cancels. Identity is an API key, sent as the
password of HTTP Basic (what Trino clients send for ``user:password``) or as
``Authorization: Bearer``; ``X-Trino-User`` alone grants nothing. A statement's failure
is a 200 reply with Trino's ``error`` object; 401 and 429 keep their HTTP meaning.
"""

from __future__ import annotations

import base64
import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from proxy.errors import DPSQLError
from proxy.server.auth import Caller
from proxy.server.context import RATE_CHECKED, Context, get_context, log_fields
from proxy.trino import protocol as P
from proxy.trino.adapter import EngineAdapter
from proxy.trino.answer import Answer
from proxy.trino.door import ClientSession, TrinoDoor
from proxy.trino.shadow import CATALOG

router = APIRouter(include_in_schema=False)
_setup = threading.Lock()


class DoorState:
    def __init__(self, ctx: Context):
        adapter = EngineAdapter(ctx.engine)
        self.door = TrinoDoor(adapter)
        self.results = adapter.results_store()
        self.page_rows = ctx.settings.trino_page_rows


def door_state(request: Request) -> DoorState:
    app = request.app
    state: DoorState | None = getattr(app.state, "trino", None)
    if state is None:
        with _setup:
            state = getattr(app.state, "trino", None)
            if state is None:
                state = DoorState(get_context(request))
                app.state.trino = state
    return state


def _authorization(request: Request) -> str | None:
    return bearer(request.headers.get("authorization"))


def bearer(header: str | None) -> str | None:
    """The API key of an Authorization header as ``Bearer <key>`` for the shared
    authenticator; "Basic" when Basic credentials are malformed."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):  # binascii.Error, or a non-ASCII str
            return "Basic"  # malformed: the authenticator says what is wrong
        _, sep, password = decoded.partition(":")
        return f"Bearer {password}" if sep and password else "Basic"
    return header


def _caller(request: Request) -> Caller:
    ctx = get_context(request)
    header = _authorization(request)
    if header is None:
        raise DPSQLError(
            "unauthorized",
            "no API key was sent (X-Trino-User alone grants nothing)",
            "connect with user:KEY (HTTP Basic, needs HTTPS: dpsql serve --tls-cert/--tls-key) "
            "or send 'Authorization: Bearer <key>'",
        )
    if header == "Basic":
        raise DPSQLError(
            "unauthorized", "the Basic credentials are malformed", "send user:KEY with a key"
        )
    caller = ctx.authenticate(header)
    log_fields(request)["analyst"] = caller.name
    # The cache-hit door (hits.py) counts a request once, before passing it on here.
    if request.scope.get("state", {}).get(RATE_CHECKED) != caller.name:
        ctx.limiter.check(caller.name)
    return caller


def _client(request: Request) -> ClientSession:
    return client_session(request.headers)


def _joined(h: Mapping[str, str], name: str) -> str | None:
    """Every line of a list header, comma-joined (HTTP allows a list header to be sent
    as several lines; Trino's JDBC driver sends one per session property)."""
    getlist = getattr(h, "getlist", None)
    if getlist is None:
        return h.get(name)
    lines = getlist(name)
    return ",".join(lines) if lines else None


def client_session(h: Mapping[str, str]) -> ClientSession:
    """The client's session as its X-Trino-* headers (lower-case names) state it."""
    prepared: dict[str, str] = {}
    for item in (_joined(h, "x-trino-prepared-statement") or "").split(","):
        name, sep, value = item.partition("=")
        if sep:
            prepared[urllib.parse.unquote_plus(name.strip())] = urllib.parse.unquote_plus(
                value.strip()
            )
    return ClientSession(
        catalog=(h.get("x-trino-catalog") or CATALOG).strip().lower(),
        schema=(h.get("x-trino-schema") or "main").strip().lower(),
        session_header=_joined(h, "x-trino-session"),
        prepared=prepared,
        time_zone=h.get("x-trino-time-zone"),
    )


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _next_uri(request: Request, query_id: str, slug: str, token: int) -> str:
    return f"{_base(request)}/v1/statement/executing/{query_id}/{slug}/{token}"


def _page(
    request: Request,
    state: DoorState,
    query_id: str,
    slug: str,
    token: int,
    *,
    columns: list[dict[str, Any]],
    data: list[list[Any]],
    warnings: list[dict[str, Any]],
    update_type: str | None,
    elapsed_ms: int = 0,
) -> dict[str, Any]:
    size = state.page_rows
    start = token * size
    more = start + size < len(data)
    return P.results(
        base_url=_base(request),
        query_id=query_id,
        state="RUNNING" if more else "FINISHED",
        next_uri=_next_uri(request, query_id, slug, token + 1) if more else None,
        columns=columns,
        data=data[start : start + size],
        warnings=warnings,
        update_type=update_type,
        elapsed_ms=elapsed_ms,
    )


def _warnings(answer: Answer) -> list[dict[str, Any]]:
    out = []
    for text in answer.warnings:
        code = P.WARNING_PRIVACY if text.startswith("dpsql:") else P.WARNING_ACCURACY
        out.append(P.warning(code, text))
    return out


def _count(ctx: Context, answer: Answer) -> None:
    if answer.privacy is None:
        return
    for release in answer.privacy["releases"]:
        if release["cached"]:
            ctx.metrics.queries.labels("cached").inc()
            ctx.metrics.cache_hits.inc()
        else:
            ctx.metrics.queries.labels("charged").inc()
            for population in release["populations"]:
                ctx.metrics.epsilon.labels(population).inc(release["epsilon"])


@router.post("/v1/statement")
async def statement(request: Request) -> Response:
    caller = _caller(request)
    state = door_state(request)
    started = time.perf_counter()
    fields = log_fields(request)
    fields["door"] = "trino"
    try:
        text: str | None = (await request.body()).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    try:
        if text is None:
            raise DPSQLError(
                "bad_request", "the statement is not valid UTF-8", "send the SQL encoded as UTF-8"
            )
        if not text.strip():
            raise DPSQLError("parse_error", "no SQL statement was sent", "send the SQL as the body")
        answer = await run_in_threadpool(state.door.execute, text, _client(request), caller)
    except DPSQLError as error:
        if error.code in ("unauthorized", "rate_limited"):
            raise
        return refusal(request, error, started)
    return await answered(request, state, caller, answer, started)


def refusal(request: Request, error: DPSQLError, started: float) -> Response:
    """A refused statement: a 200 reply in state FAILED with Trino's error object."""
    ctx = get_context(request)
    log_fields(request)["code"] = error.code
    ctx.metrics.refusals.labels(error.code).inc()
    if error.code not in ("internal", "ledger_unavailable"):
        ctx.metrics.queries.labels("refused").inc()
    doc = P.results(
        base_url=_base(request),
        query_id=P.new_query_id(),
        state="FAILED",
        error=P.error_object(error),
        elapsed_ms=int((time.perf_counter() - started) * 1000),
    )
    return JSONResponse(doc)


async def answered(
    request: Request, state: DoorState, caller: Caller, answer: Answer, started: float
) -> Response:
    """An answer's first page (the rest stored for nextUri when it needs more)."""
    _count(get_context(request), answer)
    if answer.privacy is not None:
        log_fields(request).update(
            epsilon=answer.privacy["epsilon"], cached=answer.privacy["cached"]
        )
    query_id = P.new_query_id()
    columns = answer.columns()
    data = answer.data()
    warnings = _warnings(answer)
    more = len(data) > state.page_rows
    slug = secrets.token_hex(8) if more else ""  # only a stored answer's URIs carry one
    if more:
        await run_in_threadpool(
            state.results.put,
            query_id,
            slug,
            caller.name,
            columns=columns,
            data=data,
            warnings=warnings,
            update_type=answer.update_type,
        )
    doc = _page(
        request,
        state,
        query_id,
        slug,
        0,
        columns=columns if answer.names or answer.update_type is None else [],
        data=data,
        warnings=warnings,
        update_type=answer.update_type,
        elapsed_ms=int((time.perf_counter() - started) * 1000),
    )
    if answer.update_type is not None:
        doc.pop("columns", None)
    return JSONResponse(doc, headers=dict(answer.headers))


def _gone(request: Request, query_id: str, message: str, name: str) -> JSONResponse:
    error = DPSQLError("not_found", message, "run the statement again")
    body = P.error_object(error)
    if name == "USER_CANCELED":
        body["errorName"] = "USER_CANCELED"
        body["errorType"] = "USER_ERROR"
    return JSONResponse(
        P.results(base_url=_base(request), query_id=query_id, state="FAILED", error=body)
    )


@router.get("/v1/statement/executing/{query_id}/{slug}/{token}")
async def next_page(query_id: str, slug: str, token: int, request: Request) -> Response:
    caller = _caller(request)
    state = door_state(request)
    log_fields(request)["door"] = "trino"
    stored = await run_in_threadpool(state.results.get, query_id, slug, caller.name)
    if stored is None:
        return _gone(request, query_id, f"query {query_id} is not known (or expired)", "")
    if stored.cancelled:
        return _gone(request, query_id, f"query {query_id} was cancelled", "USER_CANCELED")
    return JSONResponse(
        _page(
            request,
            state,
            query_id,
            slug,
            max(0, token),
            columns=stored.columns,
            data=stored.data,
            warnings=stored.warnings,
            update_type=stored.update_type,
        )
    )


@router.delete("/v1/statement/executing/{query_id}/{slug}/{token}", status_code=204)
async def cancel(query_id: str, slug: str, token: int, request: Request) -> Response:
    caller = _caller(request)
    state = door_state(request)
    log_fields(request)["door"] = "trino"
    await run_in_threadpool(state.results.cancel, query_id, slug, caller.name)
    return Response(status_code=204)


@router.get("/v1/info")
async def info(request: Request) -> dict[str, Any]:
    """What Trino's JDBC driver and DBeaver read before connecting (no key needed:
    only the version)."""
    return {
        "nodeVersion": {"version": "476-dpsql"},
        "environment": "dpsql",
        "coordinator": True,
        "starting": False,
        "uptime": "0.00s",
    }
