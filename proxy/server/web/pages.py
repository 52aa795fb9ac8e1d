"""GET / (the console and dashboard), GET /docs (Swagger UI), GET /redoc and
GET /static/{path}: files of this package, each with an explicit media type.

The pages hold no data: everything they show comes from the /v1 routes, called by the
page's scripts with the API key the analyst typed (kept in sessionStorage).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from proxy.errors import DPSQLError
from proxy.server.web.headers import CONSOLE_CSP, DOCS_CSP

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
PAGES = HERE / "pages"

# Explicit, so the answer does not depend on the host's mime.types: browsers refuse to
# run a module script served with any type but JavaScript's.
MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}

router = APIRouter(include_in_schema=False)


def _page(name: str, csp: str) -> HTMLResponse:
    return HTMLResponse(
        (PAGES / name).read_text(encoding="utf-8"),
        headers={"Content-Security-Policy": csp, "Cache-Control": "no-cache"},
    )


@router.get("/")
async def console() -> HTMLResponse:
    return _page("console.html", CONSOLE_CSP)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return _page("docs.html", DOCS_CSP)


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return _page("redoc.html", DOCS_CSP)


def _not_found(path: str) -> DPSQLError:
    return DPSQLError("not_found", f"no asset {path!r}", "the console's assets live under /static")


@router.get("/static/{path:path}")
async def static(path: str) -> FileResponse:
    target = (STATIC / path).resolve()
    media = MEDIA_TYPES.get(target.suffix)
    if media is None or not target.is_relative_to(STATIC) or not target.is_file():
        raise _not_found(path)
    return FileResponse(target, media_type=media, headers={"Cache-Control": "no-cache"})
