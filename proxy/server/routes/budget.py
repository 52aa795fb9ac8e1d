"""GET /v1/budget: spent, cap and remaining ε of the populations the caller can reach."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from accounting.ledger import LedgerError
from proxy.errors import DPSQLError
from proxy.server.auth import Caller
from proxy.server.context import CallerDep, Context, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import BudgetResponse, PartitionBudget, PopulationBudget

router = APIRouter(prefix="/v1", tags=["budget"], responses=COMMON_ERRORS)


def reachable_populations(ctx: Context, caller: Caller) -> list[str]:
    policy = ctx.engine.policy
    if caller.admin:
        return sorted(p.name for p in policy.populations)
    return sorted({t.population for t in policy.tables if t.name in caller.tables and t.population})


def _budget(ctx: Context, caller: Caller) -> BudgetResponse:
    ledger = ctx.engine.ledger
    try:
        known = ledger.populations()
        out = []
        for name in reachable_populations(ctx, caller):
            spend = ledger.spent(name)
            partitions = [
                PartitionBudget(name=p, epsilon_spent=s.epsilon, remaining=s.remaining)
                for p in known
                if p.startswith(name + "/")
                for s in (ledger.spent(p),)
            ]
            out.append(
                PopulationBudget(
                    name=name,
                    epsilon_cap=spend.cap,
                    delta=spend.delta,
                    epsilon_spent=spend.epsilon,
                    remaining=ctx.engine.remaining(name),
                    partitions=partitions,
                )
            )
    except LedgerError as error:
        raise DPSQLError(
            "ledger_unavailable",
            f"the budget ledger cannot be read: {type(error).__name__}",
            "the operator must verify the ledger",
        ) from None
    return BudgetResponse(populations=out)


@router.get("/budget", response_model=BudgetResponse)
async def budget(request: Request, caller: CallerDep) -> BudgetResponse:
    """ε spent, cap and remaining per population (and per known partition); the root's
    remaining is that of its persons who have spent the most."""
    return await run_in_threadpool(_budget, get_context(request), caller)
