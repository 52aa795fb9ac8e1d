"""GET /v1/budget: spent, cap and remaining ε of the populations the caller can reach."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from proxy.budgets import PopulationView
from proxy.server.auth import Caller
from proxy.server.context import CallerDep, Context, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import BudgetResponse, PartitionBudget, PopulationBudget, ShareBudget

router = APIRouter(prefix="/v1", tags=["budget"], responses=COMMON_ERRORS)


def reachable_populations(ctx: Context, caller: Caller) -> list[str]:
    policy = ctx.engine.policy
    if caller.admin:
        return sorted(p.name for p in policy.populations)
    return sorted({t.population for t in policy.tables if t.name in caller.tables and t.population})


def population_budget(view: PopulationView) -> PopulationBudget:
    return PopulationBudget(
        name=view.name,
        epsilon_cap=view.epsilon_cap,
        delta=view.delta,
        epsilon_spent=view.epsilon_spent,
        remaining=view.remaining,
        partitions=[
            PartitionBudget(name=p.name, epsilon_spent=p.epsilon_spent, remaining=p.remaining)
            for p in view.partitions
        ],
        share=None
        if view.share is None
        else ShareBudget(
            analyst=view.share.analyst,
            epsilon_cap=view.share.epsilon_cap,
            epsilon_spent=view.share.epsilon_spent,
            remaining=view.share.remaining,
        ),
    )


def _budget(ctx: Context, caller: Caller) -> BudgetResponse:
    views = ctx.engine.budgets.views(reachable_populations(ctx, caller), caller.name)
    return BudgetResponse(populations=[population_budget(v) for v in views])


@router.get("/budget", response_model=BudgetResponse)
async def budget(request: Request, caller: CallerDep) -> BudgetResponse:
    """ε spent, cap and remaining per population (and per known partition). Spent is
    what the population's persons who have spent the most have borne, so spent +
    remaining = cap; a caller limited to a share of a population also sees that share."""
    return await run_in_threadpool(_budget, get_context(request), caller)
