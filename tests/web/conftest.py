"""A real `dpsql serve` on 127.0.0.1 with fresh keys, and headless Chromium on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sample_data.generate import generate
from tests.reliability.server_harness import (
    Key,
    Server,
    fresh_keys,
    running_server,
    write_keyed_policy,
)
from tests.web.browser import Browser, chromium, missing

CAP = 4.0


@pytest.fixture(scope="session")
def web_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(
        tmp_path_factory.mktemp("web-data") / "usage.duckdb", people=2000, prompts=20000, seed=5
    )


@pytest.fixture(scope="module")
def web_keys() -> dict[str, Key]:
    return fresh_keys()


@pytest.fixture(scope="module")
def web_server(
    tmp_path_factory: pytest.TempPathFactory, web_db: Path, web_keys: dict[str, Key]
) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web")
    with running_server(write_keyed_policy(folder, web_db, web_keys, cap=CAP)) as server:
        yield server


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, web_server: Server) -> Iterator[Browser]:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    with chromium(web_server.url, tmp_path_factory.mktemp("chromium-profile")) as b:
        yield b


def sign_in(browser: Browser, key: Key) -> None:
    browser.open("/")
    browser.wait_visible("#api-key").send_keys(key.secret)
    browser.find("#signin-btn").click()
    browser.wait_visible("#view-console")
    browser.wait("the schema", lambda d: browser.all("#schema-tables .schema-table"))
