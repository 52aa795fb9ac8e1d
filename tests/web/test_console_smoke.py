"""Browser smoke tests, in the default suite: sign in, run one query, see the table with
its intervals and a drawn chart; /docs (Swagger UI) and /redoc render from local files
alone; no request leaves 127.0.0.1 and the pages carry their Content-Security-Policy."""

from __future__ import annotations

import httpx

from tests.reliability.server_harness import Key, Server
from tests.web.browser import Browser
from tests.web.conftest import sign_in

SQL = "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"

CHART_FACTS = """
const canvas = document.getElementById(arguments[0]);
const chart = window.Chart.getChart(canvas);
const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
let painted = 0;
for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) painted++;
return {
  kind: canvas.dataset.chartKind || null,
  type: chart ? chart.config.type : null,
  points: chart ? chart.data.datasets.map((d) => d.data.length) : [],
  painted, size: canvas.width * canvas.height,
};
"""


def chart_facts(browser: Browser, canvas_id: str) -> dict[str, object]:
    facts: dict[str, object] = browser.js(CHART_FACTS, canvas_id)
    return facts


def test_sign_in_run_and_see_a_chart(
    browser: Browser, web_server: Server, web_keys: dict[str, Key]
):
    sign_in(browser, web_keys["analyst"])
    assert browser.js("return sessionStorage.getItem('dpsql.apiKey')") == web_keys["analyst"].secret
    assert web_keys["analyst"].secret not in browser.driver.current_url
    assert browser.js("return document.cookie") == ""

    area = browser.find("#sql")
    area.clear()
    area.send_keys(SQL)
    browser.find("#run-btn").click()
    browser.wait_visible("#result")
    rows = browser.all("#result-table tbody tr")
    assert [r.find_element("css selector", "td").text for r in rows] == ["free", "pro", "team"]
    assert all("±" in r.text for r in rows), [r.text for r in rows]
    assert browser.find("#result-badge").get_attribute("data-cached") == "false"

    facts = chart_facts(browser, "result-chart")
    assert facts["kind"] == "bar-error" and facts["type"] == "barWithErrorBars", facts
    assert facts["points"] == [3], facts
    assert int(facts["painted"]) > 1000, facts  # type: ignore[call-overload]

    outside = [r for r in browser.requests() if not r.local]
    assert not outside, outside
    assert not browser.console(), browser.console()
    with httpx.Client(base_url=web_server.url) as client:
        csp = client.get("/").headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, csp


def test_the_api_docs_render_offline(browser: Browser, web_server: Server):
    browser.forget()
    browser.open("/docs")
    browser.wait("Swagger UI's operations", lambda d: len(browser.all(".opblock")) >= 10)
    text = browser.find("#swagger-ui").text
    assert "/v1/query" in text and "/v1/usage" in text
    assert not [r for r in browser.requests() if not r.local]
    assert not browser.console(), browser.console()

    browser.forget()
    browser.open("/redoc")
    browser.wait(
        "Redoc's operations",
        lambda d: "/v1/history" in browser.js("return document.body.innerText"),
    )
    assert len(browser.all("[data-section-id^='tag/']")) >= 5
    # Redoc's "powered by" mark comes from this server (tools/web_assets.py).
    assert not [r for r in browser.requests() if not r.local]
    assert not browser.console(), browser.console()
    with httpx.Client(base_url=web_server.url) as client:
        for path in ("/docs", "/redoc"):
            csp = client.get(path).headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp, (path, csp)
