"""The whole console in headless Chromium against a real server, checked through the API.

An analyst signs in, explains a query (cost shown, ledger unchanged), runs it (table with
95% intervals, bar chart with error bars), runs it again (free, replayed), charts a time
key (line with a band), re-runs from the history, meets two refusals (message and hint),
and sees the budget gauge move; an admin sees the ledger verified and changes a cap and
records an external charge from the dashboard. No request leaves 127.0.0.1, no Content-
Security-Policy violation is reported, and screenshots of the console and the dashboard
are saved under the test's tmp dir and bench/out/console/ (git-ignored).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from tests.reliability.server_harness import REPO, Key, Server
from tests.web.browser import Browser
from tests.web.conftest import CAP, sign_in
from tests.web.test_console_smoke import chart_facts

BAR_SQL = "SELECT region, COUNT(*) AS n, AVG(age) AS avg_age FROM users GROUP BY region"
TIME_SQL = (
    "SELECT date_trunc('month', ts) AS month, COUNT(*) AS prompts FROM prompts GROUP BY month"
)
REFUSED_SQL = "SELECT user_id, age FROM users"
SHOTS = REPO / "bench" / "out" / "console"


def ledger(client: httpx.Client, admin: Key) -> list[dict[str, object]]:
    r = client.get("/v1/ledger", params={"limit": 1000}, headers=admin.headers())
    assert r.status_code == 200, r.text
    events: list[dict[str, object]] = r.json()["events"]
    return events


def budget_used(client: httpx.Client, key: Key) -> float:
    users = next(p for p in client.get("/v1/budget", headers=key.headers()).json()["populations"])
    return float(users["epsilon_cap"] - users["remaining"])


def type_sql(browser: Browser, sql: str, epsilon: float = 0.5) -> None:
    area = browser.find("#sql")
    area.clear()
    area.send_keys(sql)
    box = browser.find("#epsilon")
    box.clear()
    box.send_keys(str(epsilon))


def click_and_wait(browser: Browser, button: str, panel: str) -> None:
    """Click, then wait until the request it started has finished (buttons re-enabled)
    and ``panel`` is shown."""
    browser.js("document.body.dataset.seen = String(Date.now())")
    browser.find(button).click()
    browser.wait(
        "the request to finish", lambda d: not browser.find("#run-btn").get_attribute("disabled")
    )
    browser.wait_visible(panel)


def run(browser: Browser) -> None:
    browser.js(
        "document.getElementById('result').hidden = true; document.getElementById('error-box').hidden = true;"
    )
    browser.find("#run-btn").click()
    browser.wait(
        "an answer or a refusal",
        lambda d: (
            browser.find("#result").is_displayed() or browser.find("#error-box").is_displayed()
        ),
    )


def show_budget(browser: Browser) -> None:
    before = browser.js("return document.body.dataset.budgetLoaded || ''")
    browser.find("#tab-budget").click()
    browser.wait(
        "the dashboard to load",
        lambda d: browser.js("return document.body.dataset.budgetLoaded || ''") not in ("", before),
    )


def gauge_used(browser: Browser, population: str) -> float:
    value = browser.find(f'.gauge-card[data-population="{population}"] .gauge-value')
    return float(value.get_attribute("data-used") or "nan")


def save(browser: Browser, tmp: Path, name: str) -> Path:
    shot = browser.screenshot(tmp / name)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, SHOTS / name)
    assert shot.stat().st_size > 10_000
    return shot


def test_the_console_and_dashboard_in_a_real_browser(
    browser: Browser,
    web_server: Server,
    web_keys: dict[str, Key],
    tmp_path: Path,
) -> None:
    analyst, admin = web_keys["analyst"], web_keys["admin"]
    client = web_server.client()
    sign_in(browser, analyst)
    tables = [e.get_attribute("data-table") for e in browser.all("#schema-tables .schema-table")]
    assert set(tables) == {"users", "prompts", "tickets", "regions"}
    assert "[18, 100]" in browser.find('.schema-table[data-table="users"]').text  # age bounds

    # The dashboard before anything is spent.
    show_budget(browser)
    used_before = gauge_used(browser, "users")
    assert used_before == pytest.approx(budget_used(client, analyst))
    browser.find("#tab-console").click()
    browser.wait_visible("#view-console")

    # Explain: the cost and the populations, and nothing is charged.
    events = ledger(client, admin)
    type_sql(browser, BAR_SQL)
    click_and_wait(browser, "#explain-btn", "#explain")
    assert browser.find("#explain-cache").get_attribute("data-cache") == "miss"
    assert float(browser.find("#explain-cost").get_attribute("data-epsilon") or 0) == pytest.approx(
        0.5
    )
    assert browser.find("#explain-charges").text == "users"
    assert len(browser.all("#explain-noise tbody tr")) >= 2  # COUNT and the AVG's parts
    assert "±" in browser.find("#explain-noise tbody").text
    assert "GROUP BY" in browser.js(
        "return document.getElementById('explain-core-sql').textContent"
    )
    assert ledger(client, admin) == events, "explain changed the ledger"

    # Run: charged once; the table has intervals and the chart has error bars.
    run(browser)
    assert browser.find("#result-badge").get_attribute("data-cached") == "false"
    rows = browser.all("#result-table tbody tr")
    assert len(rows) == 4 and all(r.text.count("±") == 2 for r in rows), [r.text for r in rows]
    facts = chart_facts(browser, "result-chart")
    assert facts["kind"] == "bar-error" and facts["points"] == [4], facts
    assert int(facts["painted"]) > 1000, facts  # type: ignore[call-overload]
    after_run = ledger(client, admin)
    assert [e["kind"] for e in after_run[len(events) :]] == ["charge"]
    save(browser, tmp_path, "console.png")

    # Run again: free, a replay of the same charge.
    run(browser)
    badge = browser.find("#result-badge")
    assert badge.get_attribute("data-cached") == "true" and "free" in badge.text
    again = ledger(client, admin)[len(after_run) :]
    assert [e["kind"] for e in again] == ["replay"]
    assert again[0]["parent_id"] == after_run[-1]["id"]

    # A query pinning the partition column charges that partition only.
    type_sql(browser, "SELECT plan, COUNT(*) AS n FROM users WHERE region = 'north' GROUP BY plan")
    run(browser)
    assert browser.find("#result-badge").get_attribute("data-cached") == "false"
    assert "users/region=north" in browser.find("#result-status").text

    # A time key: a line with its band.
    type_sql(browser, TIME_SQL, epsilon=1.0)
    run(browser)
    assert browser.find("#result").is_displayed(), browser.find("#error-box").text
    facts = chart_facts(browser, "result-chart")
    assert facts["kind"] == "line-band" and facts["type"] == "line", facts
    assert int(facts["painted"]) > 1000, facts  # type: ignore[call-overload]
    months = [
        r.find_element("css selector", "td").text for r in browser.all("#result-table tbody tr")
    ]
    assert len(months) >= 6 and all(m.startswith("20") for m in months), months
    assert facts["points"] == [len(months)] * 3, facts  # the band's two edges and the line
    save(browser, tmp_path, "console-time.png")

    # An accuracy target instead of ε: explain states what it would cost.
    browser.find("#budget-mode").send_keys("accuracy")
    click_and_wait(browser, "#explain-btn", "#explain")
    assert float(browser.find("#explain-cost").get_attribute("data-epsilon") or 0) > 0
    assert browser.find("#explain-cache").get_attribute("data-cache") == "miss"
    browser.find("#budget-mode").send_keys("ε")

    # The history lists both releases with what they cost; re-running the first is free.
    browser.wait(
        "three history rows",
        lambda d: len(browser.all("#history-table tbody tr[data-fingerprint]")) == 3,
    )
    history = browser.all("#history-table tbody tr[data-fingerprint]")
    assert TIME_SQL in history[0].text and BAR_SQL in history[2].text
    assert "Re-run (free)" in history[2].text
    charges = [e for e in ledger(client, admin) if e["kind"] == "charge"]
    history[2].find_element("css selector", "button.rerun").click()
    browser.wait(
        "the replayed answer",
        lambda d: (
            browser.find("#result-badge").get_attribute("data-cached") == "true"
            and "avg_age" in browser.find("#result-table thead").text
        ),
    )
    assert [e for e in ledger(client, admin) if e["kind"] == "charge"] == charges

    # Refusals: the message and the hint, and the ledger unchanged.
    events = ledger(client, admin)
    type_sql(browser, REFUSED_SQL)
    run(browser)
    box = browser.find("#error-box")
    assert box.is_displayed() and box.get_attribute("data-code") == "unsupported_sql"
    assert "user_id" in box.find_element("css selector", ".message").text
    assert box.find_element("css selector", ".hint").text.startswith("Hint: aggregate it")
    type_sql(browser, "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan", epsilon=CAP * 4)
    run(browser)
    assert box.get_attribute("data-code") == "budget_exhausted", box.text
    assert "users" in box.text and "lower epsilon" in box.text
    assert ledger(client, admin) == events

    # A comparison within the noise of a count it reads is marked "?" (proxy/unsettled.py):
    # another draw of the noise could have given another value. The same release: free.
    held = client.post(
        "/v1/query", json={"sql": BAR_SQL, "epsilon": 0.5}, headers=analyst.headers()
    ).json()
    near = held["rows"][0][1] + 0.1 * held["privacy"]["columns"][1]["noise_scale"]
    type_sql(browser, BAR_SQL.replace(" FROM", f", COUNT(*) > {near:.1f} AS big FROM"))
    run(browser)
    assert browser.find("#result-badge").get_attribute("data-cached") == "true"
    cells = [
        r.find_elements("css selector", "td")[3].text
        for r in browser.all("#result-table tbody tr")
    ]
    assert cells[0].endswith("?") and all(c.split()[0] in ("true", "false") for c in cells), cells

    # The gauge moved by what was charged; the dashboard shows the analyst's consumption.
    show_budget(browser)
    used_after = gauge_used(browser, "users")
    assert used_after > used_before
    # The north persons paid for the partition query too: they are the most-spent ones.
    assert gauge_used(browser, "users/region=north") == pytest.approx(used_after)
    assert used_after == pytest.approx(budget_used(client, analyst))
    assert chart_facts(browser, "epsilon-chart")["kind"] == "epsilon-over-time"
    consumers = browser.find("#consumers tbody").text
    assert analyst.name in consumers and "(other analysts)" not in consumers
    assert "%" in browser.find("#cache-rate").text
    assert not browser.find("#admin").is_displayed()

    # An admin: everyone, the ledger verified, a cap change and an external charge.
    browser.find("#signout").click()
    browser.wait_visible("#signin")
    assert browser.js("return sessionStorage.getItem('dpsql.apiKey')") is None
    sign_in(browser, admin)
    show_budget(browser)
    browser.wait(
        "the ledger verify status",
        lambda d: browser.find("#verify-status").get_attribute("data-ok") == "true",
    )
    assert analyst.name in browser.find("#consumers tbody").text
    browser.find("#cap-value").send_keys(str(CAP + 1))
    browser.find("#cap-reason").send_keys("browser test")
    browser.find("#cap-form button").click()
    browser.wait("the cap change", lambda d: "browser test" in browser.find("#cap-changes").text)
    browser.find("#charge-rho").send_keys("0.001")
    browser.find("#charge-note").send_keys("training run")
    browser.find("#charge-form button").click()
    browser.wait("the external charge", lambda d: "training run" in browser.find("#externals").text)
    kinds = [e["kind"] for e in ledger(client, admin)]
    assert kinds[-2:] == ["cap_change", "external"]
    browser.wait(
        "the ledger verify status",
        lambda d: browser.find("#verify-status").get_attribute("data-ok") == "true",
    )
    save(browser, tmp_path, "dashboard.png")

    # Nothing left this machine, and no page broke its Content-Security-Policy.
    outside = [r for r in browser.requests() if not r.local]
    assert not outside, outside
    violations = [m for m in browser.console() if "Content Security Policy" in m or "Uncaught" in m]
    assert not violations, violations
    for path in ("/", "/docs", "/redoc"):
        csp = client.get(path).headers["content-security-policy"]
        assert (
            "script-src 'self'" in csp
            and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
        )
    client.close()
