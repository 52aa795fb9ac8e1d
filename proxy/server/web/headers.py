"""Security headers on every response: a Content-Security-Policy that allows scripts,
styles, images, fonts and fetches from this origin only, and no inline script anywhere.

The console's own pages also forbid inline styles. Swagger UI and Redoc set element
styles at run time (Redoc injects <style> elements), so the docs pages allow inline
*styles* — never inline scripts — and Redoc its search worker from a blob: URL it builds
from its own bundle.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_COMMON = (
    "default-src 'none'",
    "script-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
)
CONSOLE_CSP = "; ".join((*_COMMON, "style-src 'self'"))
DOCS_CSP = "; ".join((*_COMMON, "style-src 'self' 'unsafe-inline'", "worker-src 'self' blob:"))
# JSON, CSV, Arrow and assets: nothing in them may run or be framed.
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

_FIXED = {
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    b"cross-origin-opener-policy": b"same-origin",
    b"cross-origin-resource-policy": b"same-origin",
}


def add_fixed(headers: MutableHeaders, default_csp: str = API_CSP) -> None:
    """The fixed headers, and ``default_csp`` unless a policy is set already."""
    if "content-security-policy" not in headers:
        headers["Content-Security-Policy"] = default_csp
    for name, value in _FIXED.items():
        if name.decode() not in headers:
            headers[name.decode()] = value.decode()


class SecurityHeaders:
    """Adds the fixed headers, and ``API_CSP`` unless the route chose a policy itself
    (the HTML pages do)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                html = headers.get("content-type", "").startswith("text/html")
                add_fixed(headers, CONSOLE_CSP if html else API_CSP)
            await send(message)

        await self.app(scope, receive, send_wrapper)
