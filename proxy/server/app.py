"""The FastAPI application factory. Routes only translate HTTP to `Engine` calls.

Nothing is built at import time: `create_app(settings)` returns an app whose lifespan
opens one Engine (DuckDB, ledger, release cache) per worker process, and
`app_from_env()` is the factory uvicorn's workers call (``factory=True``).
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy import thread_imports
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import PolicyError, load_policy
from proxy.server import errors
from proxy.server.auth import Authenticator, RateLimiter
from proxy.server.context import Context
from proxy.server.hits import CacheHits, replaying
from proxy.server.logs import log
from proxy.server.metrics import Metrics
from proxy.server.routes import (
    budget,
    charges,
    health,
    ledger,
    populations,
    query,
    schema,
    views,
)
from proxy.server.settings import Settings
from proxy.server.store import open_server_store
from proxy.server.web import pages
from proxy.server.web.headers import SecurityHeaders
from proxy.trino import routes as trino_routes
from proxy.trino.hits import StatementHits

API_DESCRIPTION = """\
Differentially private SQL over HTTP. Every answer carries its privacy metadata
(ε/δ/ρ charged, 0 when replayed from the cache; mechanism; per-column noise scale and
95% half-width; partition strategy; remaining budget). Authenticate with
`Authorization: Bearer <key>`. Errors share one shape:
`{"error": {"code", "message", "hint", "position"?}}`.

A web console for analysts and a budget dashboard are served at `/`.
"""


def _too_large(limit: int) -> bytes:
    return json.dumps(
        DPSQLError(
            "too_large",
            f"the request body exceeds {limit} bytes",
            "send a smaller request",
        ).to_dict()
    ).encode()


class Observe:
    """Outermost layer: caps the request body, times the request, counts it and writes
    one JSON log line. The body is buffered (it is small by construction) so the cap
    holds for chunked uploads too."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0
        fields: dict[str, Any] = scope.setdefault("state", {}).setdefault("log", {})

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            body = await self._read_body(scope, receive)
            if body is None:
                fields["code"] = "too_large"
                await self._reject(send_wrapper)
                return
            await self.app(scope, replaying(body, receive), send_wrapper)
        except Exception:
            status = status or 500  # the outer error handler answers it with "internal"
            raise
        finally:
            elapsed = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", "unmatched")
            app = scope.get("app")
            ctx = getattr(getattr(app, "state", None), "ctx", None)
            if ctx is not None:
                ctx.metrics.latency.labels(scope.get("method", ""), route).observe(elapsed)
                if fields.get("code") == "too_large" and status == 413 and "route" not in scope:
                    ctx.metrics.refusals.labels("too_large").inc()
            log(
                "request",
                method=scope.get("method"),
                route=route,
                status=status,
                ms=round(elapsed * 1000, 3),
                **fields,
            )

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    if int(value) > self.limit:
                        return None
                except ValueError:
                    return None
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _reject(self, send: Send) -> None:
        body = _too_large(self.limit)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def create_app(settings: Settings, *, freeze_after_start: bool = False) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            policy = load_policy(settings.policy)
        except (PolicyError, OSError) as error:
            raise RuntimeError(f"cannot load policy {settings.policy}: {error}") from None
        # Before the first request: it is answered on a thread of a pool.
        thread_imports.import_now()
        engine = Engine(policy)
        ctx = Context(
            settings=settings,
            engine=engine,
            store=open_server_store(policy, pending_stale_s=policy.proxy.query_timeout_s * 2 + 60),
            metrics=Metrics(),
            authenticate=Authenticator(policy),
            limiter=RateLimiter(settings.rate_limit),
        )
        app.state.ctx = ctx
        log("started", policy=str(policy.path), analysts=len(policy.analysts))
        if freeze_after_start:
            # A server worker's start-up (modules, policy, engine) lives as long as the
            # worker: out of the collector's generations, full collections skip it.
            # Only for uvicorn's workers: a test process building many apps would keep
            # their cycles forever.
            gc.freeze()
        try:
            yield
        finally:
            ctx.close()

    app = FastAPI(
        title="dpsql",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        # FastAPI's own docs pages load Swagger UI and Redoc from a CDN and initialise
        # them with an inline script; pages.py serves local copies instead.
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    errors.install(app)
    for module in (query, budget, schema, ledger, charges, populations, views, health, pages):
        app.include_router(module.router)
    # The Trino client protocol (POST /v1/statement ...), for BI tools: not in OpenAPI.
    app.include_router(trino_routes.router)
    # Innermost: repeat cache hits of POST /v1/query, answered before the router (issue
    # 18); everything else passes through to it.
    app.add_middleware(CacheHits)
    # Beside it, the Trino door's repeat cache hits (POST /v1/statement).
    app.add_middleware(StatementHits)
    app.add_middleware(Observe, max_body_bytes=settings.max_body_bytes)
    # Outermost, so that every response (a 413 from Observe too) carries the headers.
    app.add_middleware(SecurityHeaders)
    logging.getLogger("dpsql.server").setLevel(settings.log_level.upper())
    return app


def app_from_env() -> FastAPI:
    """uvicorn factory (``proxy.server.app:app_from_env``): settings from DPSQL_*."""
    return create_app(Settings.from_env(), freeze_after_start=True)
