"""Issue #12 §2: every answer carries a DP estimate of how many people bounding cut, and
says in words when it is more than a few percent."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest
from tests.proxy.conftest import demo_policy


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, demo_db: Path):
    root = tmp_path_factory.mktemp("clipping")
    db = root / "copy.duckdb"
    shutil.copy(demo_db, db)
    truth = duckdb.connect(str(demo_db), read_only=True)
    engine = Engine(demo_policy(root, db))
    yield engine, truth
    engine.close()
    truth.close()


def test_prompts_by_region_reports_the_people_cut(pair) -> None:
    engine, truth = pair
    sql = "SELECT region, COUNT(*) AS n FROM prompts JOIN users USING (user_id) GROUP BY region"
    # People with more than C = 10 prompts (one region each, so L0 cuts nobody).
    cut, people = truth.execute(
        "SELECT SUM(CASE WHEN n > 10 THEN 1 ELSE 0 END), COUNT(*) FROM "
        "(SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id)"
    ).fetchone()
    r = engine.run(QueryRequest(sql, epsilon=2.0))
    clip = r.privacy.clipping
    assert clip is not None and clip.max_rows_per_group == 10
    assert abs(clip.total_cut - cut) <= clip.total_cut_half_width * 3
    # The fraction is the noisy cut over the noisy people count: allow three of the
    # cut's own 95% half-widths (a fixed 0.05 was about its 95% width: 10% failures).
    assert clip.fraction == pytest.approx(cut / people, abs=3 * clip.total_cut_half_width / people)
    assert any("rows in a group" in w and "lower than the true totals" in w for w in r.warnings)
    assert r.privacy.to_dict()["clipping"]["fraction_cut"] == clip.fraction


def test_nobody_cut_means_no_warning(pair) -> None:
    engine, _ = pair
    r = engine.run(QueryRequest("SELECT plan, COUNT(*) AS n FROM users GROUP BY plan", epsilon=2.0))
    assert r.privacy.clipping is not None
    assert not any("rows in a group" in w for w in r.warnings)


def test_the_estimate_costs_its_declared_share(pair) -> None:
    engine, _ = pair
    plan = engine.prepare(
        QueryRequest("SELECT region, COUNT(*) AS n FROM users GROUP BY region", epsilon=1.0)
    )[1]
    rho = {n.statistic.kind: n.descriptor.curve.values[0] for n in plan.noise}
    # Two clipping columns (people cut, people) share 5% against the count's 95%.
    share = (rho["clipped"] + rho["persons"]) / (rho["clipped"] + rho["persons"] + rho["rows"])
    assert share == pytest.approx(engine.policy.proxy.clipping_share, rel=0.05)


def test_an_empty_release_says_why_and_what_would_help(pair) -> None:
    # Issue #12 §5: "top busiest days" came back empty with no explanation.
    engine, _ = pair
    sql = "SELECT date_trunc('day', ts) AS d, COUNT(*) FROM prompts WHERE user_id < 50 GROUP BY d"
    plan = engine.prepare(QueryRequest(sql))[1]
    explained = engine.explain(QueryRequest(sql)).to_dict()
    assert plan.threshold is not None
    assert str(plan.threshold.tau) in explained["partition"]["note"]
    r = engine.run(QueryRequest(sql))
    assert r.rows == []
    [hint] = [w for w in r.warnings if w.startswith("no group was released")]
    assert f"reaches {plan.threshold.tau}" in hint and "four times the budget" in hint


def test_a_few_heavy_people_cut_are_said_even_below_the_share(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """One person of 201 holds 500 of 1,500 rows: the cap C = 10 cuts 0.5% of the people
    and a third of the rows. Below the 5% share the answer still says that people were
    cut and that counts fall by more than their share (an audit: 0.3% of the people cut
    took 16% of one group's rows with no word)."""
    from proxy.policy import parse_policy

    root = tmp_path_factory.mktemp("heavy")
    db = root / "heavy.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE ev (user_id BIGINT, k VARCHAR)")
        con.execute("INSERT INTO ev SELECT i % 200 + 1, 'a' FROM range(1000) t(i)")
        con.execute("INSERT INTO ev SELECT 999, 'a' FROM range(500) t(i)")
    text = (
        f'[proxy]\ndefault_epsilon = 1.0\ndefault_delta = 1e-9\nmechanism = "gaussian"\n\n'
        f'[database]\nduckdb = "{db}"\n\n[ledger]\npath = "{root / "ledger.sqlite"}"\n\n'
        "[populations.users]\nepsilon_cap = 1e9\ndelta = 1e-4\n\n"
        '[tables.ev]\npopulation = "users"\nunit = "user_id"\nmax_groups = 1\n'
        "max_rows_per_group = 10\n"
    )
    engine = Engine(parse_policy(text, base_dir=root))
    try:
        r = engine.run(QueryRequest("SELECT COUNT(*) AS n FROM ev", epsilon=1e4))
        clip = r.privacy.clipping
        assert clip is not None and clip.fraction < 0.05
        assert r.rows[0][0] < 1100  # 1,010 counted of 1,500
        (warning,) = [w for w in r.warnings if "rows in a group" in w]
        assert "at least 1 person (about 0.5%" in warning and "larger share" in warning
    finally:
        engine.close()
