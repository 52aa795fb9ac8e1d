"""In-process checks of the app factory: per-key rate limits, settings from the
environment, and two apps in one process not sharing state."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from proxy.server import Settings, create_app
from proxy.server.formats import ARROW, CSV, JSON, negotiate
from tests.server.conftest import SQL, auth, write_policy


def test_rate_limit_is_per_key_and_429(tmp_path: Path, dataset: Path) -> None:
    # A day's window: the limiter's sliding-window counter weighs the previous window's
    # hits, so a test that straddled a minute boundary could be let one request more.
    settings = Settings(policy=write_policy(tmp_path, dataset), rate_limit="3/day")
    with TestClient(create_app(settings)) as client:
        codes = [client.get("/v1/budget", headers=auth("ana")).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = client.get("/v1/budget", headers=auth("ana"))
        assert r.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(r.headers["Retry-After"]) <= 86_400
        assert client.get("/v1/budget", headers=auth("bob")).status_code == 200
        # Invalid keys are refused before they could use anyone's allowance.
        assert client.get("/v1/budget", headers={"Authorization": "Bearer x"}).status_code == 401
        assert (
            'dpsql_refusals_total{code="rate_limited"} 2.0'
            in client.get("/metrics", headers=auth("adm")).text
        )


def test_apps_do_not_share_metrics(tmp_path: Path, dataset: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = create_app(Settings(policy=write_policy(tmp_path / "a", dataset)))
    b = create_app(Settings(policy=write_policy(tmp_path / "b", dataset)))
    with TestClient(a) as ca, TestClient(b) as cb:
        assert ca.post("/v1/query", json={"sql": SQL}, headers=auth("ana")).status_code == 200
        assert (
            'dpsql_queries_total{outcome="charged"} 1.0'
            in ca.get("/metrics", headers=auth("adm")).text
        )
        assert (
            'dpsql_queries_total{outcome="charged"}'
            not in cb.get("/metrics", headers=auth("adm")).text
        )


def test_settings_round_trip_through_the_environment(tmp_path: Path) -> None:
    s = Settings(policy=tmp_path / "p.toml", rate_limit="off", page_size=7, json_logs=False)
    assert Settings.from_env(s.to_env()) == s
    assert Settings.from_env({"DPSQL_POLICY": "x.toml"}) == Settings(policy=Path("x.toml"))
    with pytest.raises(ValueError):
        Settings.from_env({})
    with pytest.raises(ValueError):
        Settings(policy=Path("p"), page_size=0)


@pytest.mark.parametrize(
    ("param", "accept", "expected"),
    [
        (None, None, JSON),
        (None, "text/csv", CSV),
        (None, f"{ARROW}, application/json;q=0.5", ARROW),
        (None, f"application/json;q=0.2, {ARROW};q=0.9", ARROW),
        (None, "image/png", JSON),
        (None, "*/*", JSON),
        ("csv", ARROW, CSV),
    ],
)
def test_negotiation(param: str | None, accept: str | None, expected: str) -> None:
    assert negotiate(param, accept) == expected


def test_demo_policy_has_absolute_paths_and_working_keys(tmp_path: Path) -> None:
    import hashlib
    import shutil

    from proxy.cli import demo_policy_text
    from proxy.policy import parse_policy
    from proxy.server.auth import Authenticator
    from tests.server.conftest import REPO

    sample = tmp_path / "sample_data"
    sample.mkdir()
    shutil.copy(REPO / "sample_data" / "policy.toml", sample / "policy.toml")
    keys = {"demo_analyst": ("analyst", "k-analyst"), "demo_admin": ("admin", "k-admin")}
    text = demo_policy_text(sample / "policy.toml", keys)
    elsewhere = tmp_path / "elsewhere"
    policy = parse_policy(text, base_dir=elsewhere)  # paths no longer depend on the folder
    assert policy.duckdb_path == (sample / "usage.duckdb").resolve()
    assert policy.ledger_path == (tmp_path / "state" / "ledger.sqlite").resolve()
    assert {a.name: a.role for a in policy.analysts} == {
        "demo_analyst": "analyst",
        "demo_admin": "admin",
    }
    assert "k-analyst" not in text and hashlib.sha256(b"k-analyst").hexdigest() in text
    authenticate = Authenticator(policy)
    assert authenticate("Bearer k-admin").admin
    assert authenticate("Bearer k-analyst").name == "demo_analyst"


def test_demo_banner_prints_the_console_url_and_the_keys() -> None:
    from proxy.cli import demo_banner

    text = demo_banner("http://127.0.0.1:8123", Path("state/demo-policy.toml"), "k-an", "k-ad")
    assert "Web console: open http://127.0.0.1:8123/ in a browser" in text
    assert "analyst  k-an" in text and "admin    k-ad" in text
    assert "http://127.0.0.1:8123/docs" in text


def test_a_worker_freezes_what_start_up_built_and_tests_do_not(
    tmp_path: Path, dataset: Path
) -> None:
    import gc

    settings = Settings(policy=write_policy(tmp_path, dataset))
    gc.unfreeze()
    try:
        with TestClient(create_app(settings)) as client:
            assert client.get("/healthz").status_code == 200
            assert gc.get_freeze_count() == 0  # the default: nothing kept forever
        with TestClient(create_app(settings, freeze_after_start=True)) as client:
            # uvicorn's workers (app_from_env): the engine is out of the collector's way.
            assert gc.get_freeze_count() > 0
            assert client.post("/v1/query", json={"sql": SQL}, headers=auth("ana")).is_success
    finally:
        gc.unfreeze()
