"""What one worker process holds while serving: built in the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.server.auth import Authenticator, Caller, RateLimiter
from proxy.server.metrics import Metrics
from proxy.server.settings import Settings
from proxy.server.store import ServerStore


@dataclass
class Context:
    settings: Settings
    engine: Engine
    store: ServerStore
    metrics: Metrics
    authenticate: Authenticator
    limiter: RateLimiter

    def close(self) -> None:
        self.store.close()
        self.engine.close()


def get_context(request: Request) -> Context:
    ctx: Context = request.app.state.ctx
    return ctx


def log_fields(request: Request) -> dict[str, Any]:
    """The request's log line, filled in by the route (see logs.py for what may go in)."""
    fields: dict[str, Any] = request.scope.setdefault("state", {}).setdefault("log", {})
    return fields


# Set in a request's scope state to the caller whose rate limit was already checked.
RATE_CHECKED = "rate_checked"

_bearer = HTTPBearer(auto_error=False, description="an API key from `dpsql keys create`")


async def current_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    ctx = get_context(request)
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    if header is None and request.headers.get("authorization"):
        header = request.headers["authorization"]  # let the authenticator say what is wrong
    caller = ctx.authenticate(header)
    log_fields(request)["analyst"] = caller.name
    # The cache-hit door (hits.py) counts a request once, before passing it on here.
    if request.scope.get("state", {}).get(RATE_CHECKED) != caller.name:
        ctx.limiter.check(caller.name)
    return caller


async def current_admin(caller: Annotated[Caller, Depends(current_caller)]) -> Caller:
    if not caller.admin:
        raise DPSQLError(
            "forbidden", "this route needs an admin API key", "ask the operator to run it"
        )
    return caller


CallerDep = Annotated[Caller, Depends(current_caller)]
AdminDep = Annotated[Caller, Depends(current_admin)]
