"""The engine end to end on generated demo data, PUMS and a tiny hand-made table:
accuracy against the exact truth, caching as free post-processing, the ledger as the
composition of its charges, exhaustion, parallel composition over partitions, private
group keys through partition selection, CTE/subquery inlining and SQL dialects.

Noise cannot be seeded (OpenDP's samplers), so statistical checks use 5.5σ per value
(two-sided tail 3.8e-8); with fewer than 25 values checked per run the whole file fails
by chance with probability below 1e-6.
"""

from __future__ import annotations

import datetime
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from accounting.ledger import ancestors_or_self, epsilon_at
from accounting.rdp import ZERO
from proxy import release as release_step
from proxy.engine import Engine, Result
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.policies import fixed_caps

REPO = Path(__file__).resolve().parents[2]
PUMS_DIR = REPO / "sample_data" / "pums"
TOL = 5.5  # noise standard deviations per checked value

REGION_COUNT = (
    "SELECT u.region, COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
    "GROUP BY u.region"
)
MODEL_COUNT = "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"


def _patched(text: str, old: str, new: str) -> str:
    assert old in text, f"the sample policy no longer contains {old!r}"
    return text.replace(old, new)


def demo_policy_text(db: Path, ledger: Path, *, cap: float, prompt_rows: int = 10) -> str:
    text = fixed_caps((REPO / "sample_data" / "policy.toml").read_text())
    text = _patched(text, 'duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = _patched(text, 'path = "../state/ledger.sqlite"', f'path = "{ledger}"')
    text = _patched(text, "epsilon_cap = 4.0 ", f"epsilon_cap = {cap!r} ")
    return _patched(text, "max_rows_per_group = 10\n", f"max_rows_per_group = {prompt_rows}\n")


def exact(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def sigma(result: Result, column: str) -> float:
    info = next(c for c in result.privacy.columns if c.name == column)
    assert info.noise_scale is not None and info.noise_scale > 0
    return info.noise_scale


def n_events(engine: Engine) -> int:
    return len(engine.ledger.history(limit=100000))


def last_event_id(engine: Engine) -> int:
    events = engine.ledger.history(limit=100000)
    return events[-1].id if events else 0


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(
        tmp_path_factory.mktemp("data") / "usage.duckdb", people=2000, prompts=20000, seed=17
    )


@pytest.fixture(scope="module")
def truth_db(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte copy for exact answers: DuckDB will not open a file twice in one process
    with different settings, and the engine holds ``data`` open."""
    copy = tmp_path_factory.mktemp("truth") / "usage.duckdb"
    shutil.copyfile(data, copy)
    return copy


@pytest.fixture(scope="module")
def max_prompts(truth_db: Path) -> int:
    """The most prompts any one person wrote: as Linf, nobody's rows are dropped."""
    rows = exact(
        truth_db, "SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM prompts GROUP BY user_id)"
    )
    return int(rows[0][0])


@pytest.fixture(scope="module")
def engine(
    data: Path, max_prompts: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("engine")
    text = demo_policy_text(data, tmp / "ledger.sqlite", cap=100000.0, prompt_rows=max_prompts)
    e = Engine(parse_policy(text, base_dir=tmp))
    yield e
    e.close()


@pytest.fixture(scope="module")
def pums(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("pums")
    text = (PUMS_DIR / "policy.toml").read_text()
    text = _patched(text, '"PUMS_pid.csv"', f'"{PUMS_DIR / "PUMS_pid.csv"}"')
    text = _patched(
        text, 'path = "../../state/pums-ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"'
    )
    text = _patched(text, "epsilon_cap = 10.0", "epsilon_cap = 1000.0")
    e = Engine(parse_policy(text, base_dir=tmp))
    yield e
    e.close()


@pytest.fixture(scope="module")
def pums_truth() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE pums AS SELECT * FROM read_csv_auto(?, header = true)",
        [str(PUMS_DIR / "PUMS_pid.csv")],
    )
    return con


# --- accuracy -----------------------------------------------------------------------------


def test_region_counts_over_a_join_match_the_truth(engine: Engine, truth_db: Path) -> None:
    result = engine.run(QueryRequest(REGION_COUNT, epsilon=8.0))
    truth = dict(
        exact(
            truth_db,
            "SELECT u.region, COUNT(*) FROM prompts p JOIN users u ON p.user_id = u.user_id "
            "GROUP BY u.region",
        )
    )
    assert result.columns == ("region", "n")
    assert {r[0] for r in result.rows} == {"north", "south", "east", "west"}
    s = sigma(result, "n")
    for region, n in result.rows:
        assert abs(n - truth.get(region, 0)) <= TOL * s, (region, n, truth.get(region), s)
    assert result.privacy.partition["strategy"] == "public_domain"
    assert not result.privacy.cached and result.privacy.epsilon > 0


def test_users_counts_and_sums_match_the_truth(engine: Engine, truth_db: Path) -> None:
    sql = "SELECT region, COUNT(*) AS n, SUM(age) AS ages FROM users GROUP BY region"
    result = engine.run(QueryRequest(sql, epsilon=4.0))
    truth = {r[0]: r[1:] for r in exact(truth_db, sql)}
    s_n, s_age = sigma(result, "n"), sigma(result, "ages")
    assert s_n < 50  # one row per person: the noise is small next to ~500 per region
    for region, n, ages in result.rows:
        assert abs(n - truth[region][0]) <= TOL * s_n
        assert abs(ages - truth[region][1]) <= TOL * s_age


def test_per_model_people_and_token_sums_match_the_truth(engine: Engine, truth_db: Path) -> None:
    # K=4 covers the 3 models and Linf is the largest per-person count: no row is dropped.
    sql = (
        "SELECT model, COUNT(DISTINCT user_id) AS people, SUM(tokens_in) AS tokens "
        "FROM prompts GROUP BY model"
    )
    result = engine.run(QueryRequest(sql, epsilon=6.0))
    truth = {r[0]: r[1:] for r in exact(truth_db, sql)}
    assert len(result.rows) == 3
    s_people, s_tokens = sigma(result, "people"), sigma(result, "tokens")
    for model, people, tokens in result.rows:
        assert abs(people - truth[model][0]) <= TOL * s_people
        assert abs(tokens - truth[model][1]) <= TOL * s_tokens


# --- cache --------------------------------------------------------------------------------


def test_repeat_is_a_free_cache_hit_with_a_replay_event(engine: Engine) -> None:
    request = QueryRequest(MODEL_COUNT, epsilon=1.0)
    first = engine.run(request)
    assert not first.privacy.cached and first.privacy.epsilon > 0
    spent = engine.ledger.spent("users").epsilon
    mark = last_event_id(engine)

    again = engine.run(request)
    assert again.privacy.cached
    assert again.privacy.epsilon == 0.0 and again.privacy.delta == 0.0
    assert again.privacy.query_epsilon == pytest.approx(first.privacy.epsilon)
    assert again.rows == first.rows and again.columns == first.columns
    assert again.cache_key == first.cache_key
    assert again.privacy.charge_id == first.privacy.charge_id
    assert engine.ledger.spent("users").epsilon == spent

    new = engine.ledger.history(after_id=mark, limit=100)
    assert [e.kind for e in new] == ["replay"]
    assert new[0].parent_id == first.privacy.charge_id
    assert new[0].curve.is_zero()
    paying = [e for e in engine.ledger.history(limit=100000) if e.id == new[0].parent_id]
    assert len(paying) == 1 and paying[0].kind == "charge"
    assert paying[0].fingerprint == first.cache_key


def test_post_processing_variants_are_cache_hits(engine: Engine) -> None:
    base = engine.run(QueryRequest(MODEL_COUNT, epsilon=1.5))
    counts = dict(base.rows)
    assert set(counts) == {"small", "medium", "large"}
    spent = engine.ledger.spent("users").epsilon

    def hit(sql: str) -> Result:
        result = engine.run(QueryRequest(sql, epsilon=1.5))
        assert result.privacy.cached, sql
        assert result.privacy.epsilon == 0.0, sql
        assert result.cache_key == base.cache_key, sql
        return result

    # (ties broken by the key: with C = the heaviest person's 694 prompts the noise can
    # take two counts to 0, and LIMIT would then keep either)
    ordered = hit(MODEL_COUNT + " ORDER BY n DESC, model")
    assert [r[1] for r in ordered.rows] == sorted(counts.values(), reverse=True)
    limited = hit(MODEL_COUNT + " ORDER BY n DESC, model LIMIT 2")
    assert limited.rows == ordered.rows[:2]
    cut = sorted(counts.values())[1]
    having = hit(MODEL_COUNT + f" HAVING COUNT(*) >= {cut}")
    assert dict(having.rows) == {m: n for m, n in counts.items() if n >= cut}
    aliased = hit("SELECT model AS m, COUNT(*) AS how_many FROM prompts GROUP BY model")
    assert aliased.columns == ("m", "how_many")
    assert dict(aliased.rows) == counts
    arithmetic = hit("SELECT model, COUNT(*) * 2 + 1 AS odd FROM prompts GROUP BY model")
    assert dict(arithmetic.rows) == {m: 2 * n + 1 for m, n in counts.items()}
    reordered = hit("SELECT COUNT(*) AS n, model FROM prompts GROUP BY model ORDER BY model")
    assert [r[1] for r in reordered.rows] == sorted(counts)
    assert engine.ledger.spent("users").epsilon == spent


def test_cte_and_subquery_are_inlined_to_the_same_cache_key(engine: Engine) -> None:
    # Inlining puts the outer filter first; the inlined query below is written that way
    # (conjunct order is covered by test_cache_key_is_canonical).
    inline = "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 100 AND model = 'small'"
    cte = (
        "WITH t AS (SELECT * FROM prompts WHERE model = 'small') "
        "SELECT COUNT(*) AS n FROM t WHERE tokens_in > 100"
    )
    sub = (
        "SELECT COUNT(*) AS n FROM (SELECT user_id, tokens_in FROM prompts "
        "WHERE model = 'small') s WHERE s.tokens_in > 100"
    )
    plain_cte = (
        "WITH t AS (SELECT user_id, model FROM prompts WHERE tokens_in > 100 "
        "AND model = 'small') SELECT COUNT(*) AS n FROM t"
    )
    first = engine.run(QueryRequest(inline, epsilon=0.7))
    spent = engine.ledger.spent("users").epsilon
    for sql in (cte, sub, plain_cte):
        result = engine.run(QueryRequest(sql, epsilon=0.7))
        assert result.cache_key == first.cache_key, sql
        assert result.privacy.cached and result.rows == first.rows
    assert engine.ledger.spent("users").epsilon == spent


@pytest.mark.parametrize(
    "variant",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE model = 'small' AND tokens_in > 100",
        "SELECT COUNT(*) AS n FROM prompts p WHERE p.tokens_in > 100 AND p.model = 'small'",
        "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 100.0 AND model = 'small'",
    ],
    ids=["conjunct-order", "table-alias", "literal-format"],
)
def test_cache_key_is_canonical(engine: Engine, variant: str) -> None:
    base = "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 100 AND model = 'small'"
    key = engine.explain(QueryRequest(base, epsilon=0.7)).plan.cache_key
    assert engine.explain(QueryRequest(variant, epsilon=0.7)).plan.cache_key == key


def test_two_engines_on_one_file(
    engine: Engine, data: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("second")
    second = Engine(parse_policy(demo_policy_text(data, tmp / "l.sqlite", cap=5.0), base_dir=tmp))
    try:
        assert second.run(QueryRequest("SELECT COUNT(*) FROM users", epsilon=0.5)).rows
    finally:
        second.close()


# --- dialects -----------------------------------------------------------------------------


def test_postgres_dialect(engine: Engine) -> None:
    pg = "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in::int > 5 AND model ILIKE 'S%'"
    same = "SELECT COUNT(*) AS n FROM prompts WHERE CAST(tokens_in AS INT) > 5 AND model ILIKE 'S%'"
    result = engine.run(QueryRequest(pg, dialect="postgres", epsilon=0.5))
    assert result.columns == ("n",) and len(result.rows) == 1
    assert engine.explain(QueryRequest(same, epsilon=0.5)).plan.cache_key == result.cache_key


def test_bigquery_dialect_with_backticks(engine: Engine, truth_db: Path) -> None:
    sql = "SELECT COUNT(*) AS n FROM `prompts` WHERE `model` = 'small'"
    result = engine.run(QueryRequest(sql, dialect="bigquery", epsilon=4.0))
    assert result.columns == ("n",)
    truth = exact(truth_db, "SELECT COUNT(*) FROM prompts WHERE model = 'small'")[0][0]
    assert abs(result.rows[0][0] - truth) <= TOL * sigma(result, "n")


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT COUNT(*) AS n FROM `prompts` WHERE model = 'small'", "bigquery"),
        ("SELECT COUNT(*) AS n FROM \"prompts\" WHERE model = 'small'", "duckdb"),
        ("SELECT COUNT(*) AS n FROM prompts WHERE \"model\" = 'small'", "duckdb"),
    ],
    ids=["bigquery-backticks", "quoted-table", "quoted-column"],
)
def test_quoted_identifiers_share_the_cache_key(engine: Engine, sql: str, dialect: str) -> None:
    plain = "SELECT COUNT(*) AS n FROM prompts WHERE model = 'small'"
    key = engine.explain(QueryRequest(plain, epsilon=0.5)).plan.cache_key
    assert engine.explain(QueryRequest(sql, dialect=dialect, epsilon=0.5)).plan.cache_key == key


# --- partitions (parallel composition) ---------------------------------------------------

NORTH, SOUTH, EAST = "users/region=north", "users/region=south", "users/region=east"


def spends(engine: Engine, *pops: str) -> dict[str, float]:
    return {p: engine.ledger.spent(p).epsilon for p in pops}


def test_a_pinned_partition_charges_only_that_partition(engine: Engine) -> None:
    before = spends(engine, "users", NORTH, SOUTH, EAST)
    sql = (
        "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
        "WHERE u.region = 'north' AND p.model = 'large'"
    )
    result = engine.run(QueryRequest(sql, epsilon=0.9))
    assert result.privacy.populations == (NORTH,)
    after = spends(engine, "users", NORTH, SOUTH, EAST)
    assert after[NORTH] > before[NORTH]
    assert after[SOUTH] == before[SOUTH]
    assert after[EAST] == before[EAST]
    assert after["users"] == before["users"]


def test_an_in_list_charges_each_named_partition(engine: Engine) -> None:
    before = spends(engine, NORTH, SOUTH, EAST)
    sql = (
        "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
        "WHERE u.region IN ('north', 'south') AND p.flagged"
    )
    result = engine.run(QueryRequest(sql, epsilon=0.6))
    assert set(result.privacy.populations) == {NORTH, SOUTH}
    after = spends(engine, NORTH, SOUTH, EAST)
    assert after[NORTH] > before[NORTH] and after[SOUTH] > before[SOUTH]
    assert after[EAST] == before[EAST]


def test_a_charge_on_the_population_raises_every_partition(engine: Engine) -> None:
    pops = ("users", NORTH, SOUTH, EAST, "users/region=west")
    before = spends(engine, *pops)
    result = engine.run(QueryRequest("SELECT COUNT(*) AS n FROM users WHERE age > 40", epsilon=0.4))
    assert result.privacy.populations == ("users",)
    after = spends(engine, *pops)
    for p in pops:
        assert after[p] > before[p], p


def test_an_unpinning_filter_charges_the_whole_population(engine: Engine) -> None:
    # OR does not confine the rows to one partition.
    sql = (
        "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
        "WHERE u.region = 'north' OR p.tokens_in > 3000"
    )
    result = engine.run(QueryRequest(sql, epsilon=0.3))
    assert result.privacy.populations == ("users",)


@pytest.mark.parametrize(
    "where",
    ["u.region = 'east' AND p.tokens_in > 100", "u.region IN ('north', 'south')", "p.flagged"],
)
def test_remaining_reported_by_a_miss_is_the_ledgers(engine: Engine, where: str) -> None:
    # A miss reads the remaining budget off its charge receipt; it must be the figure
    # the ledger itself gives (the tightest of the population and its partitions).
    sql = f"SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id WHERE {where}"
    result = engine.run(QueryRequest(sql, epsilon=0.35))
    assert not result.privacy.cached
    assert result.privacy.remaining.keys() == set(result.privacy.populations)
    for population, left in result.privacy.remaining.items():
        assert left == pytest.approx(engine.remaining(population), rel=1e-12, abs=1e-12)


# --- the ledger is the composition of its charges ----------------------------------------


def test_ledger_totals_equal_the_composition_of_the_charges(engine: Engine) -> None:
    engine.run(QueryRequest("SELECT COUNT(*) AS n FROM tickets", epsilon=0.8))
    events = engine.ledger.history(limit=100000)
    charges = [e for e in events if e.kind in ("charge", "external")]
    assert len(charges) >= 2
    for e in events:
        if e.kind == "replay":
            assert e.curve.is_zero()
    delta = engine.policy.population("users").delta
    for pop in engine.ledger.populations():
        reach = set(ancestors_or_self(pop))
        mine = [e for e in charges if reach & set(e.populations)]
        curve, dx = ZERO, 0.0
        for e in mine:
            curve, dx = curve + e.curve, dx + e.delta_extra
        expected = epsilon_at(curve, delta, dx)
        assert engine.ledger.spent(pop).epsilon == pytest.approx(expected, rel=1e-9), pop
    assert engine.ledger.verify().ok


def test_the_charge_is_the_plan_curve(engine: Engine) -> None:
    request = QueryRequest("SELECT COUNT(*) AS n, AVG(age) AS a FROM users", epsilon=0.55)
    plan = engine.explain(request).plan
    result = engine.run(request)
    charge = [e for e in engine.ledger.history(limit=100000) if e.id == result.privacy.charge_id]
    assert charge[0].curve == plan.curve
    assert result.privacy.epsilon == pytest.approx(0.55, rel=1e-3)
    assert result.privacy.epsilon <= 0.55 + 1e-12


def test_explain_touches_no_budget(engine: Engine) -> None:
    events = n_events(engine)
    explanation = engine.explain(
        QueryRequest("SELECT plan, COUNT(*) FROM users GROUP BY plan", epsilon=0.33)
    )
    assert not explanation.cached
    assert n_events(engine) == events


# --- exhaustion ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("tiny")
    db = shutil.copyfile(data, tmp / "usage.duckdb")  # see test_two_engines_on_one_file
    e = Engine(parse_policy(demo_policy_text(db, tmp / "ledger.sqlite", cap=1.0), base_dir=tmp))
    yield e
    e.close()


def test_exhaustion_refuses_with_details_and_charges_nothing(tiny: Engine) -> None:
    paid = tiny.run(QueryRequest("SELECT COUNT(*) AS n FROM users", epsilon=1.0))
    assert not paid.privacy.cached
    spent = tiny.ledger.spent("users").epsilon
    assert 0 < spent <= 1.0
    events = n_events(tiny)

    with pytest.raises(DPSQLError) as info:
        tiny.run(QueryRequest("SELECT COUNT(*) AS n FROM prompts", epsilon=1.0))
    error = info.value
    assert error.code == "budget_exhausted"
    assert error.message and error.hint
    details = error.details
    assert details["population"] == "users"
    assert details["cap"] == pytest.approx(1.0)
    assert details["spent"] == pytest.approx(spent)
    assert details["needed"] > 0
    # the query's own ε, beside what it would add to the population's composed total
    assert details["query_epsilon"] == 1.0
    assert "it would add" in error.message
    assert n_events(tiny) == events
    assert tiny.ledger.spent("users").epsilon == spent

    # A released answer is still free to ask again.
    again = tiny.run(QueryRequest("SELECT COUNT(*) AS n FROM users", epsilon=1.0))
    assert again.privacy.cached and again.rows == paid.rows
    assert tiny.ledger.spent("users").epsilon == spent


def test_exhaustion_also_guards_partitions(tiny: Engine) -> None:
    sql = (
        "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
        "WHERE u.region = 'west'"
    )
    with pytest.raises(DPSQLError) as info:
        tiny.run(QueryRequest(sql, epsilon=1.0))
    assert info.value.code == "budget_exhausted"


# --- PUMS ---------------------------------------------------------------------------------


def test_pums_count_and_mean_by_sex(pums: Engine, pums_truth: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"
    result = pums.run(QueryRequest(sql, epsilon=2.0))
    assert result.columns == ("sex", "n", "AVG(income)")
    assert sorted(r[0] for r in result.rows) == [0, 1]
    truth = dict(pums_truth.execute("SELECT sex, COUNT(*) FROM pums GROUP BY sex").fetchall())
    s = sigma(result, "n")
    for sex, n, mean in result.rows:
        assert abs(n - truth[sex]) <= TOL * s
        assert 0 <= mean <= 500000


def test_pums_sum_by_educ_filtered_and_ordered(
    pums: Engine, pums_truth: duckdb.DuckDBPyConnection
) -> None:
    sql = (
        "SELECT educ, SUM(income) AS income FROM PUMS.PUMS WHERE educ IN (2, 3) "
        "GROUP BY educ ORDER BY educ DESC"
    )
    result = pums.run(QueryRequest(sql, epsilon=2.0))
    assert result.columns == ("educ", "income")
    assert [r[0] for r in result.rows] == [3, 2]
    truth = dict(
        pums_truth.execute(
            "SELECT educ, SUM(income) FROM pums WHERE educ IN (2, 3) GROUP BY educ"
        ).fetchall()
    )
    s = sigma(result, "income")
    for educ, income in result.rows:
        assert abs(income - truth[educ]) <= TOL * s


def test_pums_case_count(pums: Engine, pums_truth: duckdb.DuckDBPyConnection) -> None:
    sql = "SELECT SUM(CASE WHEN age > 90 THEN 1 ELSE 0 END) AS old FROM PUMS.PUMS"
    result = pums.run(QueryRequest(sql, epsilon=2.0))
    assert result.columns == ("old",) and len(result.rows) == 1
    truth = pums_truth.execute("SELECT COUNT(*) FROM pums WHERE age > 90").fetchone()
    assert truth is not None
    assert abs(result.rows[0][0] - truth[0]) <= TOL * sigma(result, "old")


def test_null_keys_are_not_released_as_zero(
    pums: Engine, pums_truth: duckdb.DuckDBPyConnection
) -> None:
    # b matches married men only; everyone else lands in the NULL group, outside the
    # domain {0, 1} of married, so the truth for married = 0 is 0.
    sql = (
        "SELECT b.married, COUNT(*) AS n FROM PUMS.PUMS a LEFT JOIN PUMS.PUMS b "
        "ON a.pid = b.pid AND b.sex = 1 AND b.married = 1 GROUP BY b.married"
    )
    result = pums.run(QueryRequest(sql, epsilon=2.0))
    truth = dict(
        pums_truth.execute(
            "SELECT married, COUNT(*) FROM pums WHERE sex = 1 AND married = 1 GROUP BY married"
        ).fetchall()
    )
    s = sigma(result, "n")
    assert sorted(r[0] for r in result.rows) == [0, 1]
    for married, n in result.rows:
        assert abs(n - truth.get(married, 0)) <= TOL * s, (married, n, truth)


def test_pums_private_key_goes_through_thresholding(pums: Engine) -> None:
    result = pums.run(QueryRequest("SELECT race, COUNT(*) AS n FROM PUMS.PUMS GROUP BY race"))
    partition = result.privacy.partition
    assert partition["strategy"] == "threshold"
    assert partition["tau"] > 1 and partition["delta"] > 0
    # race 5 has one person and race 6 five: far below any threshold at ε = 0.5.
    assert {r[0] for r in result.rows} <= {1, 2, 3, 4}


def test_prompts_month_key_goes_through_thresholding(engine: Engine) -> None:
    sql = "SELECT date_trunc('month', ts) AS month, COUNT(*) AS n FROM prompts GROUP BY 1"
    result = engine.run(QueryRequest(sql, epsilon=1.0))
    assert result.privacy.partition["strategy"] == "threshold"
    assert result.columns == ("month", "n")


# --- partition selection on a hand-made table ---------------------------------------------

THRESHOLD_POLICY = """
[proxy]
default_epsilon = 0.5
default_delta = 1e-9

[database]
duckdb = "{db}"

[ledger]
path = "{ledger}"

[populations.people]
epsilon_cap = 1000000.0
delta = 1e-6

[tables.t]
population = "people"
unit = "pid"
max_groups = 1
max_rows_per_group = 1
"""


@pytest.fixture(scope="module")
def lonely(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("lonely")
    db = tmp / "t.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t (pid BIGINT, grp VARCHAR)")
    con.execute("INSERT INTO t VALUES (1, 'solo')")
    con.execute("INSERT INTO t SELECT 1 + i, 'crowd' FROM range(1, 501) r(i)")
    con.close()
    text = THRESHOLD_POLICY.format(db=db, ledger=tmp / "ledger.sqlite")
    e = Engine(parse_policy(text, base_dir=tmp))
    yield e
    e.close()


def test_a_one_person_group_is_essentially_never_released(lonely: Engine) -> None:
    solo = crowd = 0
    for i in range(30):
        # A new ε each time: a repeat would be a cache hit, not a fresh draw.
        result = lonely.run(
            QueryRequest("SELECT grp, COUNT(*) AS n FROM t GROUP BY grp", epsilon=1.0 + i / 100)
        )
        assert not result.privacy.cached
        assert result.privacy.partition["strategy"] == "threshold"
        groups = {r[0] for r in result.rows}
        solo += "solo" in groups
        crowd += "crowd" in groups
    assert solo <= 1
    # The control: the 500-person group clears the threshold (τ is far below 500).
    assert crowd == 30


def test_threshold_is_well_above_one(lonely: Engine) -> None:
    result = lonely.run(QueryRequest("SELECT grp, COUNT(*) AS n FROM t GROUP BY grp", epsilon=0.4))
    tau = result.privacy.partition["tau"]
    assert 1 < tau < 500
    assert math.isfinite(result.privacy.partition["scale"])


def test_a_group_is_kept_exactly_when_its_noisy_person_count_reaches_tau(
    lonely: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release keeps a group iff its noisy person count is at least τ, noised with
    the threshold's own mechanism, scale and curve: the rule whose one-person release
    rate accounting/partition.py bounds by δ (tests/accounting/test_partition.py checks
    that rule with a comparison of its own, and 30 runs above cannot tell τ from τ − 1).
    The noise is zero here, so the release step's comparison itself is what is seen."""
    _, plan = lonely.prepare(QueryRequest("SELECT grp, COUNT(*) AS n FROM t GROUP BY grp"))
    thr = plan.threshold
    assert thr is not None and thr.tau > 2
    drawn: list[dict[str, Any]] = []

    def no_noise(values: Any, **kwargs: Any) -> Any:
        drawn.append(kwargs)
        return np.asarray(values)

    monkeypatch.setattr(release_step.mechanisms, "release_planned", no_noise)
    persons = np.array([0, 1, thr.tau - 1, thr.tau, thr.tau + 1], dtype=np.int64)
    keep, _ = release_step._select_partitions(plan, {"__persons": persons})
    assert keep.tolist() == [False, False, False, True, True]
    [used] = drawn
    assert (used["mechanism"], used["scale"], used["planned"]) == (
        thr.mechanism,
        thr.scale,
        thr.curve,
    )


def test_a_date_key_comes_back_as_a_date(engine: Engine) -> None:
    # NumPy fetches DuckDB's DATE as a timestamp at midnight; the answer keeps the type
    # the query asked for (issue #11 §5).
    sql = (
        "SELECT CAST(date_trunc('month', ts) AS DATE) AS m, COUNT(*) AS n "
        "FROM prompts GROUP BY 1 ORDER BY 1"
    )
    result = engine.run(QueryRequest(sql, epsilon=2.0))
    assert result.rows, "a monthly key over 20,000 prompts releases some months"
    assert all(type(m) is datetime.date for m, _ in result.rows)


def test_a_partition_table_nobody_freezes_charges_the_population(
    data: Path, max_prompts: int, tmp_path: Path
) -> None:
    """Parallel composition needs each person in one partition, which only the start-up
    check on frozen data guarantees: with ``users`` a view (computed again at each read,
    like a live PostgreSQL table), a pinned query charges the population, not the
    partition (a review, 2026-12-06: a second row with another region would put a person
    in two partitions charged apart)."""
    db = tmp_path / "view.duckdb"
    shutil.copyfile(data, db)
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE users RENAME TO users_rows")
    con.execute("CREATE VIEW users AS SELECT * FROM users_rows")
    con.close()
    text = demo_policy_text(db, tmp_path / "ledger.sqlite", cap=100.0, prompt_rows=max_prompts)
    viewed = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        assert not viewed.catalog.get("main", "users").unit_unique
        sql = (
            "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id "
            "WHERE u.region = 'north'"
        )
        assert viewed.run(QueryRequest(sql, epsilon=0.5)).privacy.populations == ("users",)
        assert viewed.ledger.spent(NORTH).epsilon == viewed.ledger.spent("users").epsilon > 0
    finally:
        viewed.close()
