"""GET /v1/schema: the tables, columns, bounds and public domains the caller may query."""

from __future__ import annotations

from fastapi import APIRouter, Request

from proxy.server.context import CallerDep, get_context
from proxy.server.routes import COMMON_ERRORS
from proxy.server.schemas import SchemaResponse

router = APIRouter(prefix="/v1", tags=["schema"], responses=COMMON_ERRORS)


@router.get("/schema", response_model=SchemaResponse)
async def schema(request: Request, caller: CallerDep) -> SchemaResponse:
    """Only policy facts and column types: no statistics of the data."""
    tables = get_context(request).engine.schema(caller.tables)
    return SchemaResponse.model_validate({"tables": [t.to_dict() for t in tables]})
