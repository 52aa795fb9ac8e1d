"""GET /healthz (no API key: operational facts only) and GET /metrics (admin key: the
counters include ε charged per population, which says how much each is being studied)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from proxy.server.context import AdminDep, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, responses={503: COMMON_ERRORS[503]})
async def healthz(request: Request) -> Health:
    """ok when the worker can read the ledger."""
    ctx = get_context(request)
    roots = [p.name for p in ctx.engine.policy.populations]
    await run_in_threadpool(ctx.engine.budgets.views, roots)  # raises when unreadable
    return Health(status="ok")


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(request: Request, caller: AdminDep) -> Response:
    """This worker's counters: queries, refusals by code, ε charged, cache hits, latency.
    Needs an admin key (Prometheus: ``authorization: {credentials: <key>}``)."""
    ctx = get_context(request)
    m = ctx.metrics
    roots = [p.name for p in ctx.engine.policy.populations]
    for view in await run_in_threadpool(ctx.engine.budgets.views, roots):
        for v in (view, *view.partitions):
            m.spent.labels(v.name).set(v.epsilon_spent)
            m.remaining.labels(v.name).set(v.remaining)
    return Response(m.render(), media_type=m.content_type)
