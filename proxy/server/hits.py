"""The cache-hit door of ``POST /v1/query`` (issue 18): repeat cache hits answered
before FastAPI's routing, dependency solving and thread pool.

A request qualifies when it is a plain JSON ``POST /v1/query`` (no query string, no
Idempotency-Key, an Accept that negotiates to JSON). It is validated by the same
``QueryBody`` model, authenticated by the same ``Authenticator``, counted once by the
same rate limiter, and answered by ``Engine.run_cached`` — the engine alone decides
whether memory can answer it (a repeat of a release this analyst already holds) — and
rendered by the route's own ``respond``. Anything else, and every request the engine
declines, goes on to the route unchanged (the body is replayed to it), which answers it
exactly as before; refusals keep the route's error shape. Answering on the event loop is
sound because ``run_cached`` never plans, executes, charges or waits for the disk.
"""

from __future__ import annotations

import json

from fastapi import APIRouter
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.errors import DPSQLError
from proxy.result import Result
from proxy.server import formats
from proxy.server.answers import page_response, to_request
from proxy.server.context import RATE_CHECKED, Context, log_fields
from proxy.server.errors import error_response
from proxy.server.routes import query as query_routes
from proxy.server.routes.query import count_answer, respond
from proxy.server.schemas import QueryBody

PATH = "/v1/query"
RENDERED = 256  # rendered repeat answers kept per worker


class CacheHits:
    """ASGI middleware, inside ``Observe`` (which buffers the body, times and logs)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._route: APIRoute | None = None  # POST /v1/query's (post_route)
        # id(result) -> (the result, its rendered body, its headers): the result is held
        # so that its id cannot be reused by another while the entry lives.
        self._rendered: dict[int, tuple[Result, bytes, dict[str, str]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] != PATH
            or scope.get("query_string")
        ):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        accept = headers.get(b"accept")
        if (
            b"idempotency-key" in headers
            or content_type != b"application/json"
            or formats.negotiate(None, None if accept is None else accept.decode("latin-1"))
            != formats.JSON
        ):
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        replayed = replaying(body, receive)
        response = None if more else await self._answer(scope, body, headers)
        if response is None:
            await self.app(scope, replayed, send)
        else:
            await response(scope, replayed, send)

    async def _answer(
        self, scope: Scope, body: bytes, headers: dict[bytes, bytes]
    ) -> Response | None:
        """The response to a repeat hit, a refusal by the rate limiter or the ledger, or
        None: the route answers."""
        ctx: Context | None = getattr(scope["app"].state, "ctx", None)
        authorization = headers.get(b"authorization")
        if ctx is None or authorization is None:
            return None
        try:
            query = QueryBody.model_validate(json.loads(body))
            caller = ctx.authenticate(authorization.decode("latin-1"))
        except (ValueError, ValidationError, DPSQLError, RecursionError):
            # (RecursionError: JSON nested past Python's limit, within the body's size
            # cap; a review found it escaping this door as a 500)
            return None  # the route refuses it with its own error
        request = Request(scope)
        self._route = self._route or post_route(query_routes.router, PATH)
        refused = admit(ctx, request, caller.name, self._route)
        if refused is not None:
            return refused
        try:
            result = ctx.engine.run_cached(to_request(query, caller))
        except DPSQLError as error:
            ctx.metrics.queries.labels("refused").inc()
            return error_response(request, error)
        if result is None:
            del scope["route"]  # the router sets it again
            return None
        size = min(ctx.settings.page_size, ctx.settings.max_page_size)
        if len(result.rows) > size:  # a cursor to sign and a result to store: the route's way
            return await respond(ctx, request, query, caller, result, formats.JSON, "arrays", size)
        kept = self._rendered.get(id(result))
        if kept is None or kept[0] is not result:
            # The engine keeps a repeat's result while the budgets it shows are current:
            # render it once (one page, no cursor) and send the same bytes again.
            response = page_response(
                ctx,
                caller,
                result,
                offset=0,
                page_size=size,
                result_id=None,
                media=formats.JSON,
                objects=False,
            )
            kept = (result, bytes(response.body), dict(response.headers))
            self._rendered[id(result)] = kept
            while len(self._rendered) > RENDERED:
                self._rendered.pop(next(iter(self._rendered)))
        count_answer(ctx, request, result)
        return Response(kept[1], media_type=formats.JSON, headers=_own_headers(kept[2]))


def post_route(router: APIRouter, path: str) -> APIRoute:
    """The route object of ``POST path``: the latency metric and the log line name it,
    as when the router answers."""
    return next(
        r
        for r in router.routes
        if isinstance(r, APIRoute) and r.path == path and r.methods == {"POST"}
    )


def admit(ctx: Context, request: Request, analyst: str, route: APIRoute) -> Response | None:
    """What a cache-hit door does before asking the engine: name the route and the
    analyst for the metrics and the log line, and count the request once by the rate
    limiter (the route then skips it). The limiter's refusal, or None."""
    request.scope["route"] = route
    log_fields(request)["analyst"] = analyst
    try:
        ctx.limiter.check(analyst)
    except DPSQLError as error:
        return error_response(request, error)
    request.scope.setdefault("state", {})[RATE_CHECKED] = analyst
    return None


def _own_headers(rendered: dict[str, str]) -> dict[str, str]:
    """The page's own headers (X-DPSQL-*, Link); Response sets content-type and length."""
    return {k: v for k, v in rendered.items() if k not in ("content-type", "content-length")}


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The first request message's body and whether more follows (Observe delivers the
    whole body in one message; anything else is left to the route)."""
    message = await receive()
    if message["type"] != "http.request":
        return b"", True
    return message.get("body", b""), bool(message.get("more_body", False))


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive channel that delivers ``body`` (already read) whole, then what follows."""
    return replaying_message({"type": "http.request", "body": body, "more_body": False}, receive)


def replaying_message(first: Message, receive: Receive) -> Receive:
    """A receive channel that delivers ``first`` (already read) again, then what follows."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return first
        return await receive()

    return replay
