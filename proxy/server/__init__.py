"""The HTTP service: `create_app(Settings(policy=...))`, or `dpsql serve`.

The two names are resolved on first use (PEP 562): importing a submodule such as
``proxy.server.formats`` (the CSV rendering `dpsql query --format csv` shares) must not
import FastAPI, Starlette and the routes with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.server.app import create_app
    from proxy.server.settings import Settings

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from proxy.server.app import create_app

        return create_app
    if name == "Settings":
        from proxy.server.settings import Settings

        return Settings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
