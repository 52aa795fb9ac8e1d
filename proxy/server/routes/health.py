"""GET /healthz (no API key: operational facts only) and GET /metrics (admin key: the
counters include ε charged per population, which says how much each is being studied)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from accounting.ledger import LedgerError
from proxy.errors import DPSQLError
from proxy.server.context import AdminDep, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, responses={503: COMMON_ERRORS[503]})
async def healthz(request: Request) -> Health:
    """ok when the worker can read the ledger."""
    ctx = get_context(request)
    roots = [p.name for p in ctx.engine.policy.populations]
    try:
        for root in roots:
            await run_in_threadpool(ctx.engine.ledger.spent, root)
    except LedgerError as error:
        raise DPSQLError(
            "ledger_unavailable",
            f"the ledger is unavailable: {type(error).__name__}",
            "run `dpsql ledger verify`",
        ) from None
    return Health(status="ok")


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(request: Request, caller: AdminDep) -> Response:
    """This worker's counters: queries, refusals by code, ε charged, cache hits, latency.
    Needs an admin key (Prometheus: ``authorization: {credentials: <key>}``)."""
    m = get_context(request).metrics
    return Response(m.render(), media_type=m.content_type)
