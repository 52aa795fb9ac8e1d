"""POST /v1/query, POST /v1/explain and GET /v1/pages/{cursor}."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from proxy.errors import DPSQLError
from proxy.public_queries import PUBLIC_KEY_PREFIX
from proxy.request import QueryRequest
from proxy.result import Result
from proxy.server import formats
from proxy.server.answers import page_response, to_request
from proxy.server.auth import Caller
from proxy.server.context import CallerDep, Context, get_context, log_fields
from proxy.server.errors import error_response
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import ErrorResponse, ExplainResponse, QueryBody, QueryResponse
from proxy.server.store import CursorError, StoredResponse, StoredResult

router = APIRouter(prefix="/v1", tags=["query"], responses=COMMON_ERRORS)

_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "model": QueryResponse,
        "description": "the answer with its privacy metadata (also in X-DPSQL-* headers)",
        "content": {formats.CSV: {}, formats.ARROW: {}},
    }
}
_QUERY_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_ANSWER,
    402: {"model": ErrorResponse, "description": "budget_exhausted, with requested/spent/cap"},
    408: {"model": ErrorResponse, "description": "timeout: the engine time limit"},
}

FormatParam = Annotated[
    Literal["json", "csv", "arrow"] | None,
    Query(description="overrides Accept: json, csv or arrow"),
]
ShapeParam = Annotated[
    Literal["arrays", "objects"], Query(description="JSON rows as arrays or as objects")
]
PageSizeParam = Annotated[int | None, Query(ge=1, le=100_000, description="rows per page")]
IdempotencyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        description="a retried POST with the same key returns the first answer, uncharged",
    ),
]


def _page_size(ctx: Context, asked: int | None) -> int:
    return min(asked or ctx.settings.page_size, ctx.settings.max_page_size)


@router.post("/query", responses=_QUERY_RESPONSES, response_class=Response)
async def query(
    body: QueryBody,
    request: Request,
    caller: CallerDep,
    format: FormatParam = None,
    shape: ShapeParam = "arrays",
    page_size: PageSizeParam = None,
    idempotency_key: IdempotencyHeader = None,
) -> Response:
    """Answer one SELECT with differentially private noise, charging the budget unless
    the same release is already cached (then the answer is replayed for free)."""
    ctx = get_context(request)
    media = formats.negotiate(format, request.headers.get("accept"))
    size = _page_size(ctx, page_size)
    if idempotency_key is None:
        return await _answer(ctx, request, body, caller, media, shape, size)
    fingerprint = hashlib.sha256(
        json.dumps([body.model_dump(), media, shape, size], sort_keys=True).encode()
    ).hexdigest()
    claim = await _claim(ctx, caller, idempotency_key, fingerprint)
    if isinstance(claim, StoredResponse):
        log_fields(request)["idempotent_replay"] = True
        return Response(
            claim.body,
            status_code=claim.status,
            media_type=claim.media_type,
            headers={**claim.headers, "Idempotent-Replayed": "true"},
        )
    try:
        response = await _answer(ctx, request, body, caller, media, shape, size, catch=True)
    except BaseException:
        await run_in_threadpool(ctx.store.abandon, caller.name, idempotency_key)
        raise
    if response.status_code >= 500:
        await run_in_threadpool(ctx.store.abandon, caller.name, idempotency_key)
        return response
    stored = StoredResponse(
        response.status_code,
        response.media_type or formats.JSON,
        {k: v for k, v in response.headers.items() if k.lower().startswith(("x-dpsql", "link"))},
        bytes(response.body),
    )
    await run_in_threadpool(ctx.store.finish, caller.name, idempotency_key, stored)
    return response


async def _claim(ctx: Context, caller: Caller, key: str, fingerprint: str) -> StoredResponse | str:
    waited = 0.0
    limit = ctx.engine.policy.proxy.query_timeout_s * 2 + 5
    while True:
        claim = await run_in_threadpool(
            ctx.store.begin, caller.name, key, fingerprint, ttl_s=ctx.settings.idempotency_ttl_s
        )
        if claim == "mismatch":
            raise DPSQLError(
                "bad_request",
                "this Idempotency-Key was already used for a different request",
                "use a fresh key for each distinct request",
            )
        if claim != "pending":
            return claim
        if waited > limit:
            raise DPSQLError(
                "timeout",
                "the first request with this Idempotency-Key is still running",
                "retry in a moment",
            )
        await anyio.sleep(0.05)
        waited += 0.05


async def _answer(
    ctx: Context,
    request: Request,
    body: QueryBody,
    caller: Caller,
    media: str,
    shape: str,
    size: int,
    *,
    catch: bool = False,
) -> Response:
    req = to_request(body, caller)
    try:
        result = await run_in_threadpool(ctx.engine.run, req)
    except DPSQLError as error:
        ctx.metrics.queries.labels("refused").inc()
        if not catch:
            raise
        return error_response(request, error)
    return await respond(ctx, request, body, caller, result, media, shape, size)


async def respond(
    ctx: Context,
    request: Request,
    body: QueryBody,
    caller: Caller,
    result: Result,
    media: str,
    shape: str,
    size: int,
) -> Response:
    """The engine's answer as the first page (the cache-hit door, proxy/server/hits.py,
    answers through here too): metrics, log fields, a stored result for the next
    pages, the rendered page."""
    count_answer(ctx, request, result)
    result_id = None
    if len(result.rows) > size:
        stored = body.model_dump()
        if result.answered_sql is not None:
            # the text as answered (its clock read): the next pages replay that release
            stored["sql"] = result.answered_sql
        result_id = await run_in_threadpool(
            ctx.store.save_result,
            result.cache_key,
            stored,
            ttl_s=ctx.settings.cursor_ttl_s,
        )
    return page_response(
        ctx,
        caller,
        result,
        offset=0,
        page_size=size,
        result_id=result_id,
        media=media,
        objects=shape == "objects",
    )


def count_answer(ctx: Context, request: Request, result: Result) -> None:
    """An answer's log fields and metrics (cached or charged)."""
    p = result.privacy
    log_fields(request).update(query=result.cache_key[:12], cached=p.cached, epsilon=p.epsilon)
    if p.cached:
        ctx.metrics.queries.labels("cached").inc()
        ctx.metrics.cache_hits.inc()
    else:
        ctx.metrics.queries.labels("charged").inc()
        for population in p.populations:
            ctx.metrics.epsilon.labels(population).inc(p.epsilon)


def _replay(ctx: Context, stored: StoredResult, req: QueryRequest) -> Result | None:
    """The answer again, from the stored release only: None if that release is gone
    (then nothing is run and nothing is charged)."""
    if stored.cache_key.startswith(PUBLIC_KEY_PREFIX):
        # Public data only: exact and free, so it is simply answered again.
        result = ctx.engine.run(req)
        return result if result.cache_key == stored.cache_key else None
    _, plan = ctx.engine.prepare(req)
    if plan.cache_key != stored.cache_key or ctx.engine.cache.get(plan.cache_key) is None:
        return None
    # A cache hit: Engine.run replays (zero-cost ledger event) and never executes.
    result = ctx.engine.run(req)
    if not result.privacy.cached:  # pragma: no cover - the release was checked above
        raise DPSQLError("internal", "a page was answered without the cache", "")
    return result


@router.get("/pages/{cursor}", responses=_ANSWER, response_class=Response)
async def page(
    cursor: str,
    request: Request,
    caller: CallerDep,
    format: FormatParam = None,
    shape: ShapeParam = "arrays",
) -> Response:
    """The next page of an answer: rebuilt from the stored released table, never re-run
    and never charged."""
    ctx = get_context(request)
    media = formats.negotiate(format, request.headers.get("accept"))
    try:
        position = ctx.store.open(cursor, analyst=caller.name, ttl_s=ctx.settings.cursor_ttl_s)
    except CursorError as error:
        raise DPSQLError(
            "not_found", f"unknown page cursor: {error}", "ask the query again for a fresh cursor"
        ) from None
    stored = await run_in_threadpool(ctx.store.result, position.result_id)
    result = None
    if stored is not None:
        req = to_request(QueryBody.model_validate(stored.request), caller)
        result = await run_in_threadpool(_replay, ctx, stored, req)
    if result is None:
        raise DPSQLError(
            "not_found",
            "the answer behind this cursor is no longer stored",
            "ask the query again (a cached query costs nothing)",
        )
    log_fields(request).update(
        query=result.cache_key[:12], cached=True, epsilon=0.0, page=position.offset
    )
    ctx.metrics.queries.labels("cached").inc()
    ctx.metrics.cache_hits.inc()
    return page_response(
        ctx,
        caller,
        result,
        offset=position.offset,
        page_size=position.page_size,
        result_id=position.result_id,
        media=media,
        objects=shape == "objects",
    )


@router.post("/explain", response_model=ExplainResponse)
async def explain(body: QueryBody, request: Request, caller: CallerDep) -> ExplainResponse:
    """Dry run: the rewritten SQL, sensitivities, noise, cost and cache decision. Reads
    no private data and charges nothing."""
    ctx = get_context(request)
    ex = await run_in_threadpool(ctx.engine.explain, to_request(body, caller))
    explained = ex.to_dict()
    log_fields(request).update(query=explained["cache_key"][:12])
    return ExplainResponse.model_validate(explained)
