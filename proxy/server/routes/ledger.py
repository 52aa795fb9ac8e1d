"""Admin: GET /v1/ledger (events) and POST /v1/ledger/verify."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from proxy.server.context import AdminDep, Context, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import EventOut, LedgerResponse, VerifyResponse

router = APIRouter(prefix="/v1/ledger", tags=["admin"], responses=COMMON_ERRORS)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _history(ctx: Context, population: str | None, limit: int, after_id: int) -> LedgerResponse:
    out = [
        EventOut(
            id=e.id,
            ts=e.ts,
            kind=e.kind,
            populations=list(e.populations),
            epsilon=None if view.epsilon is None else _finite(view.epsilon),
            rdp=[_finite(v) for v in e.curve.values] if view.epsilon is not None else None,
            delta_extra=e.delta_extra,
            analyst=e.analyst,
            fingerprint=e.fingerprint,
            note=e.note,
            parent_id=e.parent_id,
            cap=e.cap,
        )
        for view in ctx.engine.budgets.events(population, limit=limit, after_id=after_id)
        for e in (view.event,)
    ]
    return LedgerResponse(
        events=out,
        next_after_id=out[-1].id if len(out) == limit else None,
        orders=list(ctx.engine.budgets.orders),
    )


@router.get("", response_model=LedgerResponse)
async def ledger(
    request: Request,
    caller: AdminDep,
    population: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after_id: Annotated[int, Query(ge=0, le=2**53)] = 0,
) -> LedgerResponse:
    """Ledger events in id order (page with ``after_id``)."""
    return await run_in_threadpool(_history, get_context(request), population, limit, after_id)


@router.post("/verify", response_model=VerifyResponse)
async def verify(request: Request, caller: AdminDep) -> VerifyResponse:
    """Recompute every total from the raw events and compare with the stored ones."""
    report = await run_in_threadpool(get_context(request).engine.budgets.verify)
    return VerifyResponse(
        ok=report.ok,
        events=report.events,
        populations=report.populations,
        problems=list(report.problems),
    )
