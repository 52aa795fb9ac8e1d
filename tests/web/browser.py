"""Headless Chromium from Debian's packages, driven by Selenium through Debian's
chromedriver (never a downloaded browser or driver), with every request the page makes
recorded from the DevTools performance log.

Chromium runs as root here, so it needs --no-sandbox; the other flags keep it from
reaching the network on its own (updates, sync, QUIC probes) and give each run a fresh
profile.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--window-size=1280,900",
    "--force-device-scale-factor=1",
)
LOCAL_HOSTS = frozenset({"127.0.0.1"})
# Not network requests: inline data, the page's own blobs, and the browser's built-in
# pages (its start page loads chrome:// resources from its own binary).
LOCAL_SCHEMES = frozenset({"data", "blob", "about", "chrome", "chrome-untrusted", "chrome-error"})


def missing() -> str | None:
    """Why the browser tests cannot run here, or None (CI installs both: .ci/run)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists() and shutil.which(path.name) is None:
            return f"{path} is missing: apt-get install -y chromium chromium-driver"
    return None


@dataclass(frozen=True)
class Request:
    url: str
    blocked: str | None  # e.g. "csp" when the browser refused to send it

    @property
    def local(self) -> bool:
        parts = urlsplit(self.url)
        return parts.scheme in LOCAL_SCHEMES or parts.hostname in LOCAL_HOSTS


@dataclass
class Browser:
    driver: webdriver.Chrome
    base: str
    _sent: dict[str, str] = field(default_factory=dict)  # request id -> url
    _blocked: dict[str, str] = field(default_factory=dict)  # request id -> reason
    _console: list[dict[str, Any]] = field(default_factory=list)

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait(self, what: str, check: Any, timeout: float = 30.0) -> Any:
        """Poll ``check(driver)`` until truthy; the message names what was awaited."""
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(check)
        except TimeoutException:
            raise AssertionError(f"timed out waiting for {what}") from None

    def wait_visible(self, css: str, timeout: float = 30.0) -> WebElement:
        def visible(d: webdriver.Chrome) -> WebElement | bool:
            found = d.find_elements(By.CSS_SELECTOR, css)
            return found[0] if found and found[0].is_displayed() else False

        element: WebElement = self.wait(f"{css} to be visible", visible, timeout)
        return element

    def _drain(self) -> None:
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            params = message.get("params", {})
            if message.get("method") == "Network.requestWillBeSent":
                self._sent[params["requestId"]] = params["request"]["url"]
            elif message.get("method") == "Network.loadingFailed" and params.get("blockedReason"):
                self._blocked[params["requestId"]] = params["blockedReason"]
        self._console.extend(self.driver.get_log("browser"))

    def requests(self) -> list[Request]:
        """Every request the pages made so far, with the browser's reason if it blocked it."""
        self._drain()
        return [Request(url, self._blocked.get(rid)) for rid, url in self._sent.items()]

    def forget(self) -> None:
        """Start a new record of requests and console messages."""
        self._drain()
        self._sent.clear()
        self._blocked.clear()
        self._console.clear()

    def console(self) -> list[str]:
        """Console messages of level SEVERE (errors, CSP violations) so far."""
        self._drain()
        return [str(e["message"]) for e in self._console if e.get("level") == "SEVERE"]

    def screenshot(self, path: Path) -> Path:
        """The whole page, beyond the viewport (DevTools' captureScreenshot)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@contextmanager
def chromium(base_url: str, profile: Path) -> Iterator[Browser]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # A driver path given explicitly: Selenium Manager is never asked to download one.
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(60)
        yield Browser(driver, base_url)
    finally:
        driver.quit()
