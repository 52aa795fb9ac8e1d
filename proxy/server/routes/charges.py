"""Admin: POST /v1/charges — an external consumer (e.g. a DP training run) spends budget."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from accounting.ledger import (
    BudgetExhausted,
    InvalidRequest,
    LedgerError,
    LedgerUnavailable,
    UnknownPopulation,
)
from accounting.rdp import Curve, CurveError, curve_from_orders, zcdp_curve
from proxy.errors import DPSQLError, bad_request
from proxy.server.auth import Caller
from proxy.server.context import AdminDep, Context, get_context, log_fields
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import ChargeBody, ChargeResponse, ErrorResponse, SpendOut

router = APIRouter(prefix="/v1", tags=["admin"], responses=COMMON_ERRORS)


def _curve(body: ChargeBody) -> Curve:
    if (body.curve is None) == (body.rho is None):
        raise bad_request("give exactly one of curve and rho", "send an RDP curve or a zCDP rho")
    try:
        if body.rho is not None:
            return zcdp_curve(body.rho)
        assert body.curve is not None
        return curve_from_orders(body.curve.orders, body.curve.values)
    except (CurveError, ValueError) as error:
        raise bad_request(
            f"bad curve: {error}", "values at exactly the orders of GET /v1/ledger, each >= 0"
        ) from None


def _charge(ctx: Context, body: ChargeBody, caller: Caller) -> ChargeResponse:
    curve = _curve(body)
    try:
        receipt = ctx.engine.ledger.external(
            body.population, curve, body.delta_extra, analyst=caller.name, note=body.note
        )
    except BudgetExhausted as error:
        raise DPSQLError(
            "budget_exhausted",
            f"the privacy budget of {error.population} cannot pay for this charge",
            "charge less or raise the cap (PUT /v1/populations/{name}/cap)",
            details={
                "population": error.population,
                "requested": error.requested,
                "spent": error.spent,
                "cap": error.cap,
            },
        ) from None
    except UnknownPopulation:
        raise DPSQLError(
            "not_found", f"unknown population {body.population!r}", "see GET /v1/budget"
        ) from None
    except InvalidRequest as error:
        raise bad_request(f"the ledger refused the charge: {error}", "check the body") from None
    except (LedgerUnavailable, LedgerError) as error:
        raise DPSQLError(
            "ledger_unavailable", f"the ledger is unavailable: {type(error).__name__}", ""
        ) from None
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
