"""The HTTP service: `create_app(Settings(policy=...))`, or `dpsql serve`."""

from proxy.server.app import create_app
from proxy.server.settings import Settings

__all__ = ["Settings", "create_app"]
