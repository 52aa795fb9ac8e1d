"""The console's pages and assets over HTTP (issue 17), without a browser: `/`, `/docs` and
`/redoc` are HTML that references only files dpsql serves itself, each asset comes with
the right media type, every HTML response carries a Content-Security-Policy without
inline scripts or other origins, and the vendored files are exactly the npm files the
manifest names."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from proxy.server.web import pages
from tests.server.conftest import Server
from tools.web_assets import ASSETS, MANIFEST, VENDOR, manifest_text, sha256

HTML_PAGES = ("/", "/docs", "/redoc")
JS = "text/javascript; charset=utf-8"
CSS = "text/css; charset=utf-8"


class _Refs(HTMLParser):
    """src/href of every element, and the text of scripts without a src."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.inline_scripts: list[str] = []
        self.inline_handlers: list[str] = []
        self._in_inline_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("src", "href", "spec-url", "data-spec-url", "action"):
            if found.get(name):
                self.refs.append(str(found[name]))
        self.inline_handlers += [name for name, _ in attrs if name.startswith("on")]
        if "style" in found:
            self.inline_handlers.append("style")
        self._in_inline_script = tag == "script" and not found.get("src")

    def handle_data(self, data: str) -> None:
        if self._in_inline_script and data.strip():
            self.inline_scripts.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_inline_script = False


def parse(html: str) -> _Refs:
    refs = _Refs()
    refs.feed(html)
    return refs


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


def csp_directives(header: str) -> dict[str, list[str]]:
    out = {}
    for part in header.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


@pytest.mark.parametrize("path", HTML_PAGES)
def test_pages_reference_only_local_assets_and_run_no_inline_script(
    c: httpx.Client, path: str
) -> None:
    r = c.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    found = parse(r.text)
    assert found.refs, path
    assert not found.inline_scripts and not found.inline_handlers, path
    for ref in found.refs:
        # Same-origin paths and in-page anchors only: no scheme, no //host.
        assert (ref.startswith("/") and not ref.startswith("//")) or ref.startswith("#"), ref
        if ref.startswith("/static/"):
            asset = c.get(ref)
            assert asset.status_code == 200, ref
            suffix = ref.rsplit(".", 1)[-1]
            assert asset.headers["content-type"] == pages.MEDIA_TYPES["." + suffix], ref
            assert asset.headers["x-content-type-options"] == "nosniff"
    assert not re.search(r"https?://", " ".join(found.refs)), found.refs


@pytest.mark.parametrize("path", HTML_PAGES)
def test_every_html_page_has_a_csp_without_inline_scripts_or_other_origins(
    c: httpx.Client, path: str
) -> None:
    r = c.get(path)
    policy = csp_directives(r.headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]
    for values in policy.values():
        for value in values:
            assert value in ("'self'", "'none'", "'unsafe-inline'", "data:", "blob:"), value
    assert "'unsafe-inline'" not in policy["script-src"]
    if path == "/":
        assert policy["style-src"] == ["'self'"]
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "set-cookie" not in r.headers


def test_the_html_routes_of_the_app_are_exactly_the_pages_tested() -> None:
    from fastapi.routing import APIRoute

    html_routes = {
        route.path
        for route in pages.router.routes
        if isinstance(route, APIRoute) and not route.path.startswith("/static")
    }
    assert html_routes == set(HTML_PAGES)


def test_other_responses_carry_a_deny_all_csp(c: httpx.Client) -> None:
    for path in ("/v1/schema", "/healthz", "/openapi.json", "/nope", "/static/console/app.js"):
        csp = c.get(path).headers["content-security-policy"]
        assert csp.startswith("default-src 'none'"), (path, csp)


def test_every_asset_is_served_with_its_media_type(c: httpx.Client) -> None:
    files = [p for p in pages.STATIC.rglob("*") if p.is_file()]
    assert len(files) >= 15
    served = 0
    for path in files:
        media = pages.MEDIA_TYPES.get(path.suffix)
        url = "/static/" + path.relative_to(pages.STATIC).as_posix()
        r = c.get(url)
        if media is None:
            assert r.status_code == 404, url
            continue
        served += 1
        assert r.status_code == 200, url
        assert r.headers["content-type"] == media, url
        assert r.content == path.read_bytes(), url
    assert served >= 15
    assert c.get("/static/console/app.js").headers["content-type"] == JS
    assert c.get("/static/console/console.css").headers["content-type"] == CSS


@pytest.mark.parametrize(
    "path",
    [
        "/static/../pages/console.html",
        "/static/%2e%2e/pages/console.html",
        "/static/console/../../pages.py",
        "/static/console/missing.js",
        "/static/console",
        "/static/",
        "/docs/oauth2-redirect",
    ],
)
def test_nothing_outside_the_static_folder_is_served(c: httpx.Client, path: str) -> None:
    r = c.get(path)
    assert r.status_code == 404, (path, r.text[:200])
    assert r.json()["error"]["code"] == "not_found"


def test_docs_pages_load_swagger_ui_and_redoc_from_this_server(c: httpx.Client) -> None:
    docs = parse(c.get("/docs").text).refs
    assert "/static/vendor/swagger-ui-dist/swagger-ui-bundle.js" in docs
    assert "/static/vendor/swagger-ui-dist/swagger-ui.css" in docs
    assert "/openapi.json" in docs
    redoc = parse(c.get("/redoc").text).refs
    assert "/static/vendor/redoc/redoc.standalone.js" in redoc and "/openapi.json" in redoc
    init = c.get("/static/docs/swagger-init.js").text
    assert "validatorUrl: null" in init  # the default validator badge is another origin
    mark = c.get("/static/docs/redoc-mark.svg")  # Redoc's logo, rewritten to this server
    assert mark.status_code == 200 and mark.headers["content-type"].startswith("image/svg+xml")


def test_openapi_documents_the_views_and_hides_the_pages(c: httpx.Client) -> None:
    spec = c.get("/openapi.json").json()
    assert {"/v1/history", "/v1/usage"} <= set(spec["paths"])
    assert not {"/", "/docs", "/redoc", "/static/{path}"} & set(spec["paths"])
    for path in ("/v1/history", "/v1/usage"):
        op = spec["paths"][path]["get"]
        assert op["description"] and "401" in op["responses"], path
        assert op["security"], path


def test_vendored_files_are_the_npm_files_of_the_manifest() -> None:
    assert MANIFEST.read_text(encoding="utf-8") == manifest_text()
    for asset in ASSETS:
        assert (VENDOR / asset.target).is_file(), asset.target
        assert sha256(VENDOR / asset.target).isalnum()
    packages = {a.package.rsplit("@", 1)[0] for a in ASSETS}
    for package in packages:
        licences = [
            a for a in ASSETS if a.package.startswith(package + "@") and "LICENSE" in a.target
        ]
        assert licences, f"{package} is vendored without its licence"
    for asset in ASSETS:
        text = (VENDOR / asset.target).read_text(encoding="utf-8")
        for old, new in asset.rewrites:  # e.g. Redoc's logo comes from this server
            assert old not in text and new in text, (asset.target, old)
    listed = {a.target for a in ASSETS}
    on_disk = {
        p.relative_to(VENDOR).as_posix() for p in VENDOR.rglob("*") if p.is_file() and p != MANIFEST
    }
    assert on_disk == listed


def test_the_served_package_fetches_nothing() -> None:
    """The web assets are served from the installed package: no module of it fetches
    anything (refreshing the vendored files is tools/vendor_web.py, outside it)."""
    web = Path(__file__).resolve().parents[2] / "proxy" / "server" / "web"
    fetching = ("subprocess", "urllib", "http.client", "httpx", "requests", '"npm"')
    for module in web.rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        found = [f for f in fetching if f in text]
        assert not found, f"{module.name} reaches for {found}"


def test_the_served_package_names_no_remote_origin_or_package() -> None:
    """The pins and the CDN URL the Redoc rewrite replaces live in tools/web_assets.py,
    outside the served package: nothing under proxy/server/web names where a file could
    be fetched from."""
    web = Path(__file__).resolve().parents[2] / "proxy" / "server" / "web"
    for module in web.rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        assert not re.search(r"https?://|\bnpm\b|@\d+\.\d+", text), module.name
