"""Issue #12 §3: the number of groups per person K chosen from the data, for tables whose
policy says max_groups = "auto" (with max_groups_limit).

The first query with private keys not seen before pays once (``auto_bounds_epsilon``) for
a histogram of distinct groups per person under those keys; every later query with the
same keys reads it for free and plans with the K it gives (part of the plan and so of
its cache key). Public key domains and one group per person need no release.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from proxy.auto_groups import grouping
from proxy.cache import open_release_cache
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import PolicyError, parse_policy
from proxy.released_once import release_once
from proxy.request import QueryRequest
from tests.proxy.conftest import ROOT
from tests.proxy.test_policy import mutated, parse

DAILY = "SELECT CAST(ts AS DATE) AS d, COUNT(*) AS n FROM prompts GROUP BY d"
LIMIT = 200
FIXED_K = "max_groups = 4                 #"


def auto_k_text(tmp: Path, db: Path) -> str:
    """The demo policy with prompts' K "auto" up to :data:`LIMIT`."""
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    for old, new in (
        ('duckdb = "usage.duckdb"', f'duckdb = "{db}"'),
        ('path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"'),
        ("epsilon_cap = 4.0", "epsilon_cap = 1000.0"),
        (FIXED_K, f'max_groups = "auto"\nmax_groups_limit = {LIMIT} #'),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.fixture
def engine(tmp_path: Path, demo_db: Path) -> Iterator[Engine]:
    db = tmp_path / "copy.duckdb"
    shutil.copy(demo_db, db)
    e = Engine(parse_policy(auto_k_text(tmp_path, db), base_dir=tmp_path))
    yield e
    e.close()


def auto_k_charges(e: Engine) -> list[str]:
    return [
        ev.note
        for ev in e.ledger.history()
        if ev.kind == "charge" and ev.note.startswith("auto max_groups")
    ]


# --- policy ----------------------------------------------------------------------------
def test_policy_parses_auto_k_and_refuses_it_with_hints() -> None:
    auto = mutated("max_groups = 4", 'max_groups = "auto"\nmax_groups_limit = 16')
    prompts = parse(auto).table("prompts")
    assert prompts.max_groups is None and prompts.auto_groups_limit == 16
    assert parse().table("prompts").auto_groups_limit is None
    with pytest.raises(PolicyError, match=r"prompts\.max_groups_limit: required with max_groups"):
        parse(mutated("max_groups = 4", 'max_groups = "auto"'))
    with pytest.raises(PolicyError, match=r"max_groups_limit: only with max_groups = \"auto\""):
        parse(mutated("max_groups = 4", "max_groups = 4\nmax_groups_limit = 16"))
    with pytest.raises(PolicyError, match=r'max_groups: must be an integer or "auto"'):
        parse(mutated("max_groups = 4", 'max_groups = "many"'))
    with pytest.raises(PolicyError, match="max_groups_limit: 0 must be >= 1"):
        parse(mutated("max_groups = 4", 'max_groups = "auto"\nmax_groups_limit = 0'))
    with pytest.raises(PolicyError, match="max_groups_limit: a public table holds no person"):
        parse(mutated("public = true", "public = true\nmax_groups_limit = 3"))


# --- the engine ------------------------------------------------------------------------
def test_explain_lists_it_and_the_first_run_pays_once_per_key(engine: Engine) -> None:
    e = engine
    before = e.ledger.history()
    pending = e.explain(QueryRequest(DAILY, epsilon=1.0)).to_dict()["auto_bounds"]
    waiting = [p for p in pending if "keys" in p]
    assert [(p["tables"], p["keys"], p["limit"]) for p in waiting] == [
        (["prompts"], ["CAST(t0.ts AS DATE)"], LIMIT)
    ]
    assert "chosen from the data" in waiting[0]["note"]
    assert e.ledger.history() == before  # explaining pays nothing
    e.run(QueryRequest(DAILY, epsilon=1.0))
    assert auto_k_charges(e) == ["auto max_groups of prompts by CAST(t0.ts AS DATE)"]
    # The same keys (another spelling and alias, another ε and filter): free.
    e.run(
        QueryRequest(
            "SELECT CAST(p.ts AS DATE) AS day, SUM(tokens_in) AS s FROM prompts AS p "
            "WHERE model = 'small' GROUP BY 1",
            epsilon=0.7,
        )
    )
    assert len(auto_k_charges(e)) == 1
    assert [p for p in e.explain(QueryRequest(DAILY)).to_dict()["auto_bounds"]] == []
    # Other keys: their own histogram, paid once.
    hourly = "SELECT DATE_TRUNC('week', ts) AS w, COUNT(*) AS n FROM prompts GROUP BY w"
    e.run(QueryRequest(hourly, epsilon=1.0))
    e.run(QueryRequest(hourly, epsilon=0.5))
    assert len(auto_k_charges(e)) == 2


def test_planning_uses_the_k_of_least_estimated_error(engine: Engine) -> None:
    e = engine
    e.run(QueryRequest(DAILY, epsilon=1.0))
    shape, plan = e.prepare(QueryRequest(DAILY, epsilon=1.0))
    g = grouping(shape, "duckdb")
    assert g is not None and e.auto_groups.histogram(g) is not None
    assert plan.pending_bounds == ()
    # Explain shows the candidates' estimated errors; the plan's K is the least of them.
    shown = e.explain(QueryRequest(DAILY, epsilon=1.0)).to_dict()
    (chosen,) = [c for c in shown["chosen_bounds"] if c["bound"] == "max_groups"]
    errors = {c["value"]: c["estimated_relative_error"] for c in chosen["candidates"]}
    assert max(errors) == LIMIT and min(errors) == 1
    k = chosen["chosen"]
    # The least among the candidates up to the release peak (private keys: no K above
    # the peak of pairs kept over the threshold is chosen).
    peak = chosen["release_peak"]
    assert peak is not None and k <= peak
    assert errors[k] == min(e for v, e in errors.items() if v <= peak)
    assert len(set(errors.values())) > 1
    assert plan.max_groups == k == shown["limits"]["max_groups"] and 1 < k <= LIMIT
    assert chosen["limit"] == LIMIT and 0 <= chosen["share_cut"] < 1
    # The L0 cut keeps k groups per person: the k-th smallest hash is each heavy
    # person's cut-off (proxy/rewrite/l0.py).
    assert f"__l[{k + 1}]" in plan.core_sql
    # The same plan as a request naming K and the chosen cap: same noise, same cache key.
    named = e.prepare(
        QueryRequest(DAILY, epsilon=1.0, max_groups=k, max_rows_per_group=plan.max_rows)
    )[1]
    assert named.cache_key == plan.cache_key
    assert [n.descriptor.scale for n in named.noise] == [n.descriptor.scale for n in plan.noise]
    other = 1 if k > 1 else 2
    at_other = e.prepare(
        QueryRequest(DAILY, epsilon=1.0, max_groups=other, max_rows_per_group=plan.max_rows)
    )[1]
    assert plan.noise[0].sensitivity.l1 * other == pytest.approx(
        at_other.noise[0].sensitivity.l1 * k
    )
    assert at_other.cache_key != plan.cache_key


AVG_DAILY = "SELECT CAST(ts AS DATE) AS d, AVG(tokens_out) AS a FROM prompts GROUP BY d"


def test_a_mean_picks_a_smaller_k_and_says_how_many_people_it_cuts(engine: Engine) -> None:
    # Same keys, same histogram (paid once): a mean loses little by cutting a heavy
    # person's groups, a count loses their pairs, so the mean's K is smaller.
    e = engine
    # Both may stop at the release peak (no K is chosen where the threshold grows faster
    # than the pairs K keeps), so the mean's K is at most the count's here; that it is
    # smaller without that cap: tests/accounting/test_group_bounds.py.
    e.run(QueryRequest(DAILY, epsilon=1.0))
    count_k = e.prepare(QueryRequest(DAILY, epsilon=20.0))[1].max_groups
    plan = e.prepare(QueryRequest(AVG_DAILY, epsilon=20.0))[1]
    assert plan.max_groups <= count_k
    (chosen,) = [c for c in plan.chosen_bounds if c.bound == "max_groups"]
    assert chosen.people_cut is not None and chosen.people_cut > 0.05
    result = e.run(QueryRequest(AVG_DAILY, epsilon=20.0))
    assert len(auto_k_charges(e)) == 1
    notes = [w for w in result.warnings if "groups (max_groups, chosen from the data" in w]
    cut = e.prepare(QueryRequest(AVG_DAILY, epsilon=20.0))[1].chosen_bounds[0]
    assert notes == [
        n for n in notes if f"about {cut.people_cut:.0%} of the people of prompts" in n
    ]
    assert len(notes) == 1 and f"more than {cut.chosen} groups" in notes[0]


def test_a_request_k_wins_up_to_the_limit(engine: Engine) -> None:
    e = engine
    plan = e.prepare(QueryRequest(DAILY, epsilon=1.0, max_groups=2))[1]
    assert plan.max_groups == 2
    assert not [p for p in plan.pending_bounds if hasattr(p, "grouping")]
    with pytest.raises(DPSQLError, match=f"max_groups {LIMIT + 1} exceeds the policy's {LIMIT}"):
        e.prepare(QueryRequest(DAILY, epsilon=1.0, max_groups=LIMIT + 1))
    e.run(QueryRequest(DAILY, epsilon=1.0, max_groups=2))
    assert auto_k_charges(e) == []  # the request's own K needs no histogram


def test_public_keys_and_one_group_per_person_need_no_release(engine: Engine) -> None:
    e = engine
    by_model = e.prepare(QueryRequest("SELECT model, COUNT(*) FROM prompts GROUP BY model"))[1]
    assert by_model.max_groups == 3  # min(limit, the public domain's 3 models)
    by_region = e.prepare(
        QueryRequest(
            "SELECT region, COUNT(*) FROM prompts JOIN users USING (user_id) GROUP BY region"
        )
    )[1]
    assert by_region.max_groups == 1  # a person's region is one group
    for plan in (by_model, by_region):
        assert not [p for p in plan.pending_bounds if hasattr(p, "grouping")]
    e.run(QueryRequest("SELECT model, COUNT(*) FROM prompts GROUP BY model", epsilon=1.0))
    assert auto_k_charges(e) == []


def test_a_fresh_engine_reads_the_stored_histogram(tmp_path: Path, demo_db: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copy(demo_db, db)
    text = auto_k_text(tmp_path, db)
    first = Engine(parse_policy(text, base_dir=tmp_path))
    first.run(QueryRequest(DAILY, epsilon=1.0))
    k = first.prepare(QueryRequest(DAILY, epsilon=1.0))[1].max_groups
    first.close()
    second = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        plan = second.prepare(QueryRequest(DAILY, epsilon=1.0))[1]
        assert plan.max_groups == k and plan.pending_bounds == ()
        second.run(QueryRequest(DAILY, epsilon=0.5))
        assert len(auto_k_charges(second)) == 1  # the first engine's, not a new one
    finally:
        second.close()


def test_the_histogram_draw_cannot_fail_on_a_row_the_where_drops(engine: Engine) -> None:
    # The release reads the grouping without the query's WHERE, so a key that only
    # fails on rows the WHERE removes must not fail there either: the charge is already
    # made, and the error would tell whether that row (one person's) exists. The core
    # makes keys total (proxy/rewrite/total_forms.py); the histogram's SQL must too.
    e = engine
    key = "CAST(CASE WHEN prompt_id = 1 THEN 'x' ELSE '1' END AS INTEGER)"
    joined = (
        f"SELECT {key} AS k, COUNT(*) AS n FROM prompts AS p "
        "JOIN users AS u ON u.user_id = p.user_id "
        "AND CAST(CASE WHEN p.prompt_id = 2 THEN 'y' ELSE '1' END AS INTEGER) = 1 "
        "WHERE prompt_id <> 1 GROUP BY k"
    )
    for sql in (
        f"SELECT {key} AS k, COUNT(*) AS n FROM prompts WHERE prompt_id <> 1 GROUP BY k",
        joined,
    ):
        result = e.run(QueryRequest(sql, epsilon=1.0))
        assert [row[0] for row in result.rows] == [1]
    assert len(auto_k_charges(e)) == 2


def test_a_second_caller_waits_for_the_release_without_spinning(engine: Engine) -> None:
    # Another holder (another cache instance: another owner, alive) flies the release;
    # the waiting caller must poll the store at a modest rate, not in a hot loop that
    # takes the SQLite write lock thousands of times a second on a 2-core machine.
    e = engine
    other = open_release_cache(e.policy)
    key = "test-released-once"
    assert other.claim(key)
    claims = 0
    claim = e.cache.claim

    def counted(k: str) -> bool:
        nonlocal claims
        claims += 1
        return claim(k)

    e.cache.claim = counted  # type: ignore[method-assign]
    waiter = threading.Thread(
        target=release_once,
        args=(e.cache, e.budgets, key),
        kwargs={
            "population": "users",
            "curve": e.auto_groups._stored.person.calibration("a test histogram").curve,
            "analyst": "alice",
            "note": "never charged: the other holder stores first",
            "draw": lambda: pa.table({"x": [2]}),
        },
    )
    before = e.ledger.history()
    waiter.start()
    time.sleep(0.5)
    other.put(key, 0, pa.table({"x": [1]}))
    waiter.join(timeout=10)
    other.close()
    assert not waiter.is_alive()
    stored = e.cache.get(key)
    assert stored is not None and stored[1].column("x").to_pylist() == [1]
    assert e.ledger.history() == before
    assert 1 < claims <= 50, claims


def test_the_daily_key_gets_a_k_that_releases_days(engine: Engine) -> None:
    # The daily key of the test data: people are active on dozens of days each (up to
    # 472 of 1,238), a day has at most 46 people. People over the threshold (about 250
    # "days") underestimated the days fivefold, so every candidate's typical day cleared
    # its threshold and the largest K won (64 up to the limit), whose threshold released
    # about 15 days at ε = 16 where K = 8 or 16 released 130 or more. K now stops at the
    # peak of pairs kept over the threshold (accounting/group_bounds.py: release_peak).
    e = engine
    e.run(QueryRequest(DAILY, epsilon=1.0))  # pays for the histogram once
    plan = e.prepare(QueryRequest(DAILY, epsilon=16.0))[1]
    (chosen,) = [c for c in plan.chosen_bounds if c.bound == "max_groups"]
    assert chosen.release_peak is not None and plan.max_groups <= chosen.release_peak <= 32
    shown = len(e.run(QueryRequest(DAILY, epsilon=16.0)).rows)
    cap = plan.max_rows
    at_64 = len(e.run(QueryRequest(DAILY, epsilon=16.0, max_groups=64, max_rows_per_group=cap)).rows)
    assert shown >= 60 and shown >= 3 * at_64, (plan.max_groups, shown, at_64)


def test_the_history_names_the_groups_histogram(engine: Engine) -> None:
    """dpsql's own release is named in the analyst's history (proxy/ledger_views.py)."""
    engine.run(QueryRequest(DAILY, epsilon=1.0))
    named = {h.automatic for h in engine.query_history("local") if h.automatic}
    # (the demo policy's rows per person are "auto" too: their histogram is named alike)
    assert named == {*auto_k_charges(engine), "auto bounds of prompts"}
    assert len(auto_k_charges(engine)) == 1
