"""Admin: POST /v1/charges — an external consumer (e.g. a DP training run) spends budget."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from proxy.server.auth import Caller
from proxy.server.context import AdminDep, Context, get_context, log_fields
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import ChargeBody, ChargeResponse, ErrorResponse, SpendOut

router = APIRouter(prefix="/v1", tags=["admin"], responses=COMMON_ERRORS)


def _charge(ctx: Context, body: ChargeBody, caller: Caller) -> ChargeResponse:
    receipt = ctx.engine.budgets.external(
        body.population,
        rho=body.rho,
        curve=None if body.curve is None else (body.curve.orders, body.curve.values),
        delta_extra=body.delta_extra,
        analyst=caller.name,
        note=body.note,
    )
    return ChargeResponse(
        event_id=receipt.event_id,
        population=body.population,
        epsilon=receipt.epsilon_requested,
        spends=[
            SpendOut(
                population=s.population,
                epsilon_spent=s.epsilon,
                epsilon_cap=s.cap,
                remaining=s.remaining,
            )
            for s in receipt.spends
        ],
    )


@router.post(
    "/charges",
    response_model=ChargeResponse,
    responses={402: {"model": ErrorResponse, "description": "budget_exhausted"}},
)
async def charge(body: ChargeBody, request: Request, caller: AdminDep) -> ChargeResponse:
    """Record an external spend, as an RDP curve at the ledger's orders or a zCDP ρ,
    against a population (or a partition such as ``users/region=north``); admitted only
    within the cap, like a query."""
    ctx = get_context(request)
    out = await run_in_threadpool(_charge, ctx, body, caller)
    log_fields(request).update(epsilon=out.epsilon, event_id=out.event_id)
    ctx.metrics.epsilon.labels(body.population.split("/")[0]).inc(out.epsilon)
    return out
