"""The Trino door's cache-hit path (issue 18): ``POST /v1/statement`` answered before
FastAPI's routing, dependency solving and thread pool when memory alone holds the
answer.

A statement qualifies when its text is a plain query this worker's door has routed
before and the engine's ``run_cached`` answers it (a repeat of a release the analyst
already holds: never planned, executed, charged or waited for on the disk, so it may run
on the event loop). It is authenticated by the same ``Authenticator``, counted once by
the same rate limiter, and rendered by the route's own functions, so the reply is the one
the route would send: columns, data and the final state in the POST's response, no
``nextUri`` unless the answer spans pages. Anything else — a first sight of the text, a
miss, a command, a catalog query, a request the authenticator refuses — goes on to the
route unchanged (its body replayed), which answers it exactly as before.
"""

from __future__ import annotations

import time

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import DPSQLError
from proxy.server.context import Context, log_fields
from proxy.server.hits import admit, post_route, replaying_message
from proxy.trino import routes

PATH = "/v1/statement"


class StatementHits:
    """ASGI middleware, inside ``Observe`` (which buffers the body, times and logs)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._route: APIRoute | None = None  # POST /v1/statement's (post_route)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        message = await receive()
        replayed = replaying_message(message, receive)
        response = None
        if message["type"] == "http.request" and not message.get("more_body", False):
            response = await self._answer(scope, message.get("body", b""))
        if response is None:
            await self.app(scope, replayed, send)
        else:
            await response(scope, replayed, send)

    async def _answer(self, scope: Scope, body: bytes) -> Response | None:
        """The reply to a statement memory can answer, a refusal by the rate limiter or
        the engine, or None: the route answers."""
        ctx: Context | None = getattr(scope["app"].state, "ctx", None)
        if ctx is None:
            return None
        request = Request(scope)
        header = routes.bearer(request.headers.get("authorization"))
        if header is None or header == "Basic":
            return None  # the route says what is missing
        try:
            caller = ctx.authenticate(header)
            text = body.decode("utf-8")
        except (DPSQLError, UnicodeDecodeError):
            return None  # the route refuses it with its own error
        if not text.strip():
            return None
        state = routes.door_state(request)
        client = routes.client_session(request.headers)
        self._route = self._route or post_route(routes.router, PATH)
        refused = admit(ctx, request, caller.name, self._route)
        if refused is not None:
            return refused
        fields = log_fields(request)
        started = time.perf_counter()
        try:
            answer = state.door.execute_cached(text, client, caller)
        except DPSQLError as error:
            fields["door"] = "trino"
            return routes.refusal(request, error, started)
        if answer is None:
            del scope["route"]  # the router sets it again
            return None
        fields["door"] = "trino"
        return await routes.answered(request, state, caller, answer, started)
