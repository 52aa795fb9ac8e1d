"""GET /v1/schema: the tables, columns, bounds and public domains the caller may query."""

from __future__ import annotations

from fastapi import APIRouter, Request

from proxy.server.context import CallerDep, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import ColumnOut, SchemaResponse, TableOut

router = APIRouter(prefix="/v1", tags=["schema"], responses=COMMON_ERRORS)


@router.get("/schema", response_model=SchemaResponse)
async def schema(request: Request, caller: CallerDep) -> SchemaResponse:
    """Only policy facts and column types: no statistics of the data."""
    ctx = get_context(request)
    tables = []
    for info in ctx.engine.catalog.visible_to(caller.tables):
        t = info.policy
        columns = []
        for name, type_ in info.column_types.items():
            rule = t.column(name)
            columns.append(
                ColumnOut(
                    name=name,
                    type=type_,
                    lower=None if rule is None else rule.lower,
                    upper=None if rule is None else rule.upper,
                    values=None if rule is None or rule.values is None else list(rule.values),
                    unit=name == t.unit,
                )
            )
        tables.append(
            TableOut(
                name=t.name,
                public=t.public,
                population=t.population,
                max_groups=t.max_groups,
                max_rows_per_group=t.max_rows_per_group,
                columns=columns,
            )
        )
    return SchemaResponse(tables=sorted(tables, key=lambda x: x.name))
