"""Admin: PUT /v1/populations/{name}/cap."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from accounting.ledger import InvalidRequest, LedgerError, UnknownPopulation
from proxy.errors import DPSQLError, bad_request
from proxy.server.auth import Caller
from proxy.server.context import AdminDep, Context, get_context, log_fields
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import CapBody, CapResponse

router = APIRouter(prefix="/v1/populations", tags=["admin"], responses=COMMON_ERRORS)


def _set_cap(ctx: Context, name: str, body: CapBody, caller: Caller) -> CapResponse:
    ledger = ctx.engine.ledger
    try:
        event_id = ledger.set_cap(name, body.epsilon_cap, reason=body.reason, analyst=caller.name)
        spend = ledger.spent(name)
    except UnknownPopulation:
        raise DPSQLError(
            "not_found", f"unknown population {name!r}", "see GET /v1/budget"
        ) from None
    except InvalidRequest as error:
        raise bad_request(f"the ledger refused the cap: {error}", "caps are set on roots") from None
    except LedgerError as error:
        raise DPSQLError(
            "ledger_unavailable", f"the ledger is unavailable: {type(error).__name__}", ""
        ) from None
    return CapResponse(
        event_id=event_id,
        population=name,
        epsilon_cap=spend.cap,
        epsilon_spent=spend.epsilon,
        remaining=ctx.engine.remaining(name),
    )


@router.put("/{name}/cap", response_model=CapResponse)
async def set_cap(name: str, body: CapBody, request: Request, caller: AdminDep) -> CapResponse:
    """Change a root population's ε cap, with a reason kept in the ledger. A cap below
    what is spent is allowed: every later charge reaching it is then refused. The policy
    file's cap applies again only if the policy's cap itself changes."""
    out = await run_in_threadpool(_set_cap, get_context(request), name, body, caller)
    log_fields(request).update(event_id=out.event_id)
    return out
