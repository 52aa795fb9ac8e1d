"""GET /v1/history and GET /v1/usage: read-only views for the web console (issue 17).

This module is the console's one adapter to the engine: it calls only
``Engine.query_history`` and ``Engine.usage``, which read the ledger and never charge.
An analyst sees its own history and the populations of the tables it may read; an admin
sees every population and every analyst.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from proxy.ledger_views import CacheStats, Point
from proxy.server.auth import Caller
from proxy.server.context import CallerDep, Context, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.routes.budget import reachable_populations
from proxy.server.schemas import (
    AdminEventOut,
    CacheOut,
    ConsumerOut,
    HistoryItem,
    HistoryResponse,
    PointOut,
    SeriesOut,
    UsageResponse,
)

router = APIRouter(prefix="/v1", tags=["console"], responses=COMMON_ERRORS)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _points(points: tuple[Point, ...]) -> list[PointOut]:
    return [PointOut(ts=p.ts, value=_finite(p.value)) for p in points]


def _cache(c: CacheStats) -> CacheOut:
    return CacheOut(charges=c.charges, replays=c.replays, hit_rate=c.hit_rate)


def _history(ctx: Context, caller: Caller, limit: int) -> HistoryResponse:
    entries = ctx.engine.query_history(caller.name, limit)
    return HistoryResponse(
        analyst=caller.name,
        queries=[
            HistoryItem(
                fingerprint=e.fingerprint,
                charge_id=e.charge_id,
                first_ts=e.first_ts,
                last_ts=e.last_ts,
                asks=e.asks,
                epsilon=_finite(e.epsilon),
                populations=list(e.populations),
                cached=e.cached,
                automatic=e.automatic or None,
            )
            for e in entries
        ],
    )


def _usage(ctx: Context, caller: Caller, top: int) -> UsageResponse:
    roots = reachable_populations(ctx, caller)
    usage = ctx.engine.usage(roots, viewer=caller.name, admin=caller.admin, top=top)
    events = [
        [
            AdminEventOut(
                id=e.id,
                ts=e.ts,
                kind=e.kind,
                population=e.population,
                analyst=e.analyst,
                note=e.note,
                cap=e.cap,
                epsilon=_finite(e.epsilon),
            )
            for e in group
        ]
        for group in (usage.cap_changes, usage.externals)
    ]
    return UsageResponse(
        viewer=caller.name,
        role="admin" if caller.admin else "analyst",
        populations=list(roots),
        series=[
            SeriesOut(population=s.population, epsilon=_points(s.epsilon), caps=_points(s.caps))
            for s in usage.series
        ],
        consumers=[
            ConsumerOut(
                analyst=c.analyst,
                fingerprint=c.fingerprint,
                kind=c.kind,
                epsilon=_finite(c.epsilon),
                charges=c.charges,
                replays=c.replays,
            )
            for c in usage.consumers
        ],
        cache=_cache(usage.cache),
        own_cache=_cache(usage.own_cache),
        cap_changes=events[0],
        externals=events[1],
    )


@router.get("/history", response_model=HistoryResponse)
async def history(
    request: Request,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=500, description="most recent releases")] = 50,
) -> HistoryResponse:
    """The caller's own queries, grouped by release (cache key), most recent first: when
    they were asked, what the caller's charge cost and whether asking again is free. No
    SQL text: dpsql keeps only fingerprints; the console remembers the text it sent."""
    return await run_in_threadpool(_history, get_context(request), caller, limit)


@router.get("/usage", response_model=UsageResponse)
async def usage(
    request: Request,
    caller: CallerDep,
    top: Annotated[int, Query(ge=1, le=100, description="rows of top consumers")] = 20,
) -> UsageResponse:
    """Budget dashboard data for the populations the caller may reach (admins: all):
    composed ε over time and the caps, the top consumers by (analyst, query
    fingerprint), the cache hit rate; for admins also cap changes and external charges.
    Analysts see their own rows and one summed row for everybody else."""
    return await run_in_threadpool(_usage, get_context(request), caller, top)
