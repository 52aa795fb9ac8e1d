"""Engine results → HTTP responses, one page at a time."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Response

from proxy.request import AccuracyTarget, QueryRequest
from proxy.result import PrivacyInfo, Result
from proxy.server import formats
from proxy.server.auth import Caller
from proxy.server.context import Context
from proxy.server.schemas import QueryBody
from proxy.server.store import Cursor


def to_request(body: QueryBody, caller: Caller) -> QueryRequest:
    accuracy = (
        None
        if body.accuracy is None
        else AccuracyTarget(
            body.accuracy.rel_error, body.accuracy.at_count, body.accuracy.confidence
        )
    )
    return QueryRequest(
        sql=body.sql,
        dialect=body.dialect,
        epsilon=body.epsilon,
        delta=body.delta,
        rho=body.rho,
        accuracy=accuracy,
        max_groups=body.max_groups,
        max_rows_per_group=body.max_rows_per_group,
        raw_noise=body.raw_noise,
        analyst=caller.name,
        tables=caller.tables,
    )


def privacy_dict(p: PrivacyInfo) -> dict[str, Any]:
    return p.to_dict()


def page_response(
    ctx: Context,
    caller: Caller,
    result: Result,
    *,
    offset: int,
    page_size: int,
    result_id: str | None,
    media: str,
    objects: bool,
) -> Response:
    """One page of an engine answer (a cursor to the next when ``result_id`` is stored)."""
    rows = result.rows
    end = offset + page_size
    token = None
    if end < len(rows) and result_id is not None:
        token = ctx.store.sign(Cursor(result_id, end, page_size, caller.name, time.time()))
    page = formats.Page(
        columns=result.columns,
        rows=rows[offset:end],
        intervals=result.intervals[offset:end],
        privacy=privacy_dict(result.privacy),
        warnings=result.warnings,
        offset=offset,
        total_rows=len(rows),
        next=token,
        unsettled_cells=[
            (r - offset, c) for r, c in result.unsettled_cells if offset <= r < end
        ],
        unsettled_rows=[r - offset for r in result.unsettled_rows if offset <= r < end],
    )
    return Response(
        formats.render(page, media, objects=objects),
        media_type=media,
        headers=formats.headers(page, media),
    )
