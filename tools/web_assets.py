"""The vendored front-end libraries: which npm package and file each one is, its licence,
and its SHA-256, so that a test can check the committed files are exactly those.

The files are committed under ``proxy/server/web/static/vendor/`` and served from the
installed package, which holds no pins, no package names and no fetching code: nothing
a page loads comes from another origin. These pins are a maintainer's concern, kept
here beside ``tools/vendor_web.py`` (``make vendor-web``), which fetches the pinned
packages with ``npm pack``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[1] / "proxy" / "server" / "web" / "static" / "vendor"
MANIFEST = VENDOR / "VENDORED.md"


@dataclass(frozen=True)
class Asset:
    package: str  # npm name@version
    source: str  # path inside the package tarball (below package/)
    target: str  # path below static/vendor/
    licence: str  # SPDX id
    # (text in the package file, text served instead): each must occur in the file
    rewrites: tuple[tuple[str, str], ...] = ()


# Redoc 2's bundle draws its "powered by" mark from its vendor's CDN; the page shows
# dpsql's own mark from this server instead (static/docs/redoc-mark.svg).
REDOC_LOGO = ("https://cdn.redoc.ly/redoc/logo-mini.svg", "/static/docs/redoc-mark.svg")


ASSETS: tuple[Asset, ...] = (
    Asset("chart.js@4.5.1", "dist/chart.umd.min.js", "chart.js/chart.umd.min.js", "MIT"),
    Asset("chart.js@4.5.1", "LICENSE.md", "chart.js/LICENSE.md", "MIT"),
    Asset(
        "chartjs-chart-error-bars@4.4.5",
        "build/index.umd.min.js",
        "chartjs-chart-error-bars/index.umd.min.js",
        "MIT",
    ),
    Asset(
        "chartjs-chart-error-bars@4.4.5", "LICENSE", "chartjs-chart-error-bars/LICENSE.txt", "MIT"
    ),
    Asset(
        "swagger-ui-dist@5.35.0",
        "swagger-ui-bundle.js",
        "swagger-ui-dist/swagger-ui-bundle.js",
        "Apache-2.0",
    ),
    Asset(
        "swagger-ui-dist@5.35.0",
        "swagger-ui-bundle.js.LICENSE.txt",
        "swagger-ui-dist/swagger-ui-bundle.js.LICENSE.txt",
        "Apache-2.0",
    ),
    Asset(
        "swagger-ui-dist@5.35.0", "swagger-ui.css", "swagger-ui-dist/swagger-ui.css", "Apache-2.0"
    ),
    Asset("swagger-ui-dist@5.35.0", "LICENSE", "swagger-ui-dist/LICENSE.txt", "Apache-2.0"),
    Asset("swagger-ui-dist@5.35.0", "NOTICE", "swagger-ui-dist/NOTICE.txt", "Apache-2.0"),
    # Redoc 2 is the line FastAPI's own docs page targets; its standalone bundle is one file.
    Asset(
        "redoc@2.5.2",
        "bundles/redoc.standalone.js",
        "redoc/redoc.standalone.js",
        "MIT",
        rewrites=(REDOC_LOGO,),
    ),
    Asset(
        "redoc@2.5.2",
        "bundles/redoc.standalone.js.LICENSE.txt",
        "redoc/redoc.standalone.js.LICENSE.txt",
        "MIT",
    ),
    Asset("redoc@2.5.2", "LICENSE", "redoc/LICENSE.txt", "MIT"),
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_text() -> str:
    lines = [
        "# Vendored front-end files",
        "",
        "Copied from the npm packages below by `make vendor-web` (`tools/vendor_web.py`; the",
        "pins are in `tools/web_assets.py`), unchanged but for the rewrites listed",
        "there (Redoc's logo URL points at this server); `tests/server/test_web.py` checks",
        "every hash.",
        "",
        "| file | npm package | file in the package | licence | sha256 |",
        "|---|---|---|---|---|",
    ]
    for a in ASSETS:
        lines.append(
            f"| `{a.target}` | `{a.package}` | `{a.source}` | {a.licence} "
            f"| `{sha256(VENDOR / a.target)}` |"
        )
    return "\n".join(lines) + "\n"
