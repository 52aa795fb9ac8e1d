"""A bare FastAPI JSON route, served by the same uvicorn as `dpsql serve` (issue 18).

The yardstick for the HTTP cache-hit rows of BENCHMARKS.md: ``POST /v1/query`` parses
the JSON body and answers a small constant JSON object, with nothing else in the way
(no authentication, engine, ledger or middleware). bench/http.py starts it with the
same protocol class, workers and settings as `dpsql serve`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, FastAPI

_BODY = Body(...)


def create() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/v1/query")
    async def query(body: dict[str, Any] = _BODY) -> dict[str, Any]:
        return {"columns": ["region", "n"], "rows": [["north", 1]], "sql": body.get("sql")}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
