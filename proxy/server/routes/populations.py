"""Admin: PUT /v1/populations/{name}/cap."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from proxy.server.auth import Caller
from proxy.server.context import AdminDep, Context, get_context, log_fields
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import CapBody, CapResponse

router = APIRouter(prefix="/v1/populations", tags=["admin"], responses=COMMON_ERRORS)


def _set_cap(ctx: Context, name: str, body: CapBody, caller: Caller) -> CapResponse:
    budgets = ctx.engine.budgets
    event_id = budgets.set_cap(name, body.epsilon_cap, reason=body.reason, analyst=caller.name)
    view = budgets.view(name)
    return CapResponse(
        event_id=event_id,
        population=name,
        epsilon_cap=view.epsilon_cap,
        epsilon_spent=view.epsilon_spent,
        remaining=view.remaining,
    )


@router.put("/{name}/cap", response_model=CapResponse)
async def set_cap(name: str, body: CapBody, request: Request, caller: AdminDep) -> CapResponse:
    """Change a root population's ε cap, with a reason kept in the ledger. A cap below
    what is spent is allowed: every later charge reaching it is then refused. The policy
    file's cap applies again only if the policy's cap itself changes."""
    out = await run_in_threadpool(_set_cap, get_context(request), name, body, caller)
    log_fields(request).update(event_id=out.event_id)
    return out
