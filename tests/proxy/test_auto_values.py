"""Issue #12 §3, value bounds: an upper bound chosen from the data for a numeric column
whose policy says ``upper = "auto"`` (with ``upper_limit``).

The first query that needs the bound pays once (``auto_bounds_epsilon``) for a DP
quantile of the column's values; every later query, any analyst, reads the released bin
for free and plans with its bound (clamping and sensitivity follow it, and so does the
plan's cache key). Method: accounting/value_bounds.py.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest

from accounting import value_bounds as V
from accounting.quantiles import QuantileError
from accounting.rdp import ORDERS
from proxy.auto_values import Side
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import PolicyError, parse_policy
from proxy.request import QueryRequest
from tests.policies import fixed_caps
from tests.proxy.conftest import ROOT

LATENCY = "columns.latency_ms = { lower = 0, upper = 60000 }"
AUTO_LATENCY = 'columns.latency_ms = { lower = 0, upper = "auto", upper_limit = 600000 }'
SUM = "SELECT SUM(latency_ms) AS s FROM prompts"
NOTE = "auto upper bound of prompts.latency_ms"


def policy_text(
    tmp: Path, db: Path, latency: str = AUTO_LATENCY, epsilon: float = 2.0, *, fixed: bool = True
) -> str:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = fixed_caps(text) if fixed else text
    assert LATENCY in text, "the demo policy's latency_ms changed"
    text = text.replace(LATENCY, latency)
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000.0")
    return text.replace("auto_bounds_epsilon = 0.25", f"auto_bounds_epsilon = {epsilon}")


@pytest.fixture
def engine(tmp_path: Path, demo_db: Path):
    e = Engine(parse_policy(policy_text(tmp_path, demo_db), base_dir=tmp_path))
    yield e
    e.close()


def _charges(e: Engine) -> list[str]:
    return [ev.note for ev in e.ledger.history() if ev.kind == "charge"]


def _truth(e: Engine, sql: str) -> float:
    """An exact answer straight from the engine's DuckDB (no privacy layer)."""
    return float(next(iter(e.executor.run(sql).values()))[0])


def _schema_upper(e: Engine) -> float | None:
    prompts = next(t for t in e.schema(None) if t.name == "prompts")
    return next(c.upper for c in prompts.columns if c.name == "latency_ms")


# --- policy --------------------------------------------------------------------------


def test_policy_spells_auto_upper_with_its_limit(tmp_path: Path, demo_db: Path) -> None:
    policy = parse_policy(policy_text(tmp_path, demo_db), base_dir=tmp_path)
    col = policy.table("prompts").column("latency_ms")
    assert (col.lower, col.upper, col.upper_limit) == (0.0, None, 600000.0)
    fixed = policy.table("prompts").column("tokens_out")
    assert (fixed.upper, fixed.upper_limit) == (8000.0, None)


@pytest.mark.parametrize(
    ("spelling", "message"),
    [
        ('{ lower = 0, upper = "auto" }', 'upper_limit: required with upper = "auto"'),
        ('{ upper = "auto", upper_limit = 10 }', 'lower: required with upper = "auto"'),
        ('{ lower = "auto", upper = 10 }', 'lower_limit: required with lower = "auto"'),
        ('{ lower = "auto", lower_limit = 0 }', 'upper: required with lower = "auto"'),
        ("{ lower = 0, lower_limit = 0, upper = 5 }", 'lower_limit: only with lower = "auto"'),
        ('{ lower = "auto", lower_limit = 5, upper = 5 }', "upper 5 must be above lower_limit 5"),
        (
            '{ lower = "auto", lower_limit = 9, upper = "auto", upper_limit = 3 }',
            "upper_limit 3 must be above lower_limit 9",
        ),
        ('{ lower = "least", lower_limit = 0, upper = 5 }', 'lower: must be a number or "auto"'),
        ("{ lower = 0, upper = 10, upper_limit = 20 }", 'upper_limit: only with upper = "auto"'),
        ('{ lower = 5, upper = "auto", upper_limit = 5 }', "must be above lower 5"),
        ('{ lower = 0, upper = "most", upper_limit = 5 }', 'upper: must be a number or "auto"'),
        ('{ lower = 0, upper = "auto", upper_limit = "big" }', "upper_limit: must be a number"),
    ],
)
def test_policy_errors_name_the_key_and_the_fix(
    tmp_path: Path, demo_db: Path, spelling: str, message: str
) -> None:
    text = policy_text(tmp_path, demo_db, f"columns.latency_ms = {spelling}")
    with pytest.raises(PolicyError, match=r"tables\.prompts\.columns\.latency_ms") as error:
        parse_policy(text, base_dir=tmp_path)
    assert message in str(error.value)


def test_public_tables_cannot_have_auto_bounds(tmp_path: Path, demo_db: Path) -> None:
    text = policy_text(tmp_path, demo_db) + (
        'columns.area = { lower = 0, upper = "auto", upper_limit = 9 }\n'
    )
    assert text.rstrip().splitlines()[-4] == "[tables.regions]"
    with pytest.raises(
        PolicyError, match=r"tables\.regions\.columns\.area\.upper: \"auto\" is for"
    ):
        parse_policy(text, base_dir=tmp_path)


# --- the grid and the draw -------------------------------------------------------------


def test_a_lower_bound_is_the_lower_edge_of_its_bin() -> None:
    grid = V.value_grid(-1000.0, 60000.0)
    assert V.lower_bound_of(grid, 0) == -1000.0  # nothing below the limit
    at = grid.edges.index(1500.0)
    assert V.lower_bound_of(grid, at) == -1000.0 + grid.edges[at - 1]
    assert V.lower_bound_of(grid, at + 1) == 500.0
    with pytest.raises(V.ValueBoundsError):
        V.lower_bound_of(grid, grid.bins)
    low = V.describe(grid, max_rows=3, epsilon=1.0, q=V.LOWER_QUANTILE)
    high = V.describe(grid, max_rows=3, epsilon=1.0)
    assert low.curve == high.curve  # the rank score's sensitivity is max(q, 1 − q)·C


def test_grid_is_round_numbers_up_to_the_limit() -> None:
    grid = V.value_grid(0.0, 600000.0)
    assert grid.edges[-1] == 600000.0 and list(grid.edges) == sorted(set(grid.edges))
    assert {1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 5000.0, 500000.0} <= set(grid.edges)
    assert V.bound_of(grid, grid.edges.index(5000.0)) == 5000.0
    shifted = V.value_grid(-10.0, 90.0)
    assert V.bound_of(shifted, shifted.bins - 1) == 90.0
    assert V.bound_of(shifted, shifted.edges.index(15.0)) == 5.0
    with pytest.raises(V.ValueBoundsError):
        V.value_grid(3.0, 3.0)


def test_the_draw_finds_the_high_quantile_bin() -> None:
    grid = V.value_grid(0.0, 1000.0)
    counts = np.zeros(grid.bins, dtype=np.int64)
    counts[grid.edges.index(10.0)] = 9000  # values in (7, 10]
    counts[grid.edges.index(100.0)] = 1000  # the top 10%: q = 0.95 falls here
    d = V.describe(grid, max_rows=1, epsilon=1.0)
    assert d.max_rows == 1 and d.pure_epsilon == pytest.approx(1.0)
    drawn = {V.bound_of(grid, V.release_bound(grid, counts, d)) for _ in range(20)}
    assert drawn == {100.0}
    with pytest.raises(V.ValueBoundsError):
        V.release_bound(grid, counts[:-1], d)
    with pytest.raises(QuantileError):
        V.describe(grid, max_rows=0, epsilon=1.0)


# --- the engine ------------------------------------------------------------------------


def test_released_once_then_free_and_planning_uses_it(engine: Engine, demo_db: Path) -> None:
    prompts = engine.policy.table("prompts")
    column = prompts.column("latency_ms")
    assert engine.auto_values.released(prompts, column) is None
    before = engine.ledger.history()
    explained = engine.explain(QueryRequest(SUM, epsilon=1.0)).to_dict()
    assert explained["auto_bounds"] == [
        {
            "table": "prompts",
            "column": "latency_ms",
            "limit": 600000.0,
            "epsilon": 2.0,
            "side": "upper",
            "note": explained["auto_bounds"][0]["note"],
        }
    ]
    assert explained["statistics"][0]["bounds"] == [0.0, 600000.0]  # the limit, until paid
    assert _schema_upper(engine) == 600000.0
    assert engine.ledger.history() == before  # explaining pays nothing
    key_at_limit = explained["cache_key"]
    engine.run(QueryRequest(SUM, epsilon=1.0))
    assert _charges(engine) == [NOTE, _charges(engine)[1]]
    bound = engine.auto_values.released(prompts, column)
    assert bound is not None and 0 < bound < 600000.0
    true_p95 = _truth(engine, "SELECT QUANTILE_CONT(latency_ms, 0.95) FROM prompts")
    assert true_p95 / 4 <= bound <= true_p95 * 4
    # Planning reads the bound: clamp and sensitivity follow it (C = 10, K = 4 here).
    plan = engine.explain(QueryRequest(SUM, epsilon=1.0)).to_dict()
    assert plan["auto_bounds"] == [] and plan["cache_key"] != key_at_limit
    assert _schema_upper(engine) == bound  # the default: the histogram's 95th percentile
    # This query picks its own bound from the histogram: the candidate of least
    # estimated error (bias + noise), listed with the others under chosen_bounds.
    (chosen,) = plan["chosen_bounds"]
    assert chosen["bound"] == "upper" and chosen["of"] == "prompts.latency_ms"
    errors = {c["value"]: c["estimated_relative_error"] for c in chosen["candidates"]}
    mine = chosen["chosen"]
    assert errors[mine] == min(errors.values()) and max(errors) <= 600000.0
    stat = plan["statistics"][0]
    assert stat["bounds"] == [0.0, mine]
    assert stat["sensitivity"]["per_group"] == pytest.approx(10 * mine)
    assert f"{mine:g}" in plan["core_sql"] or repr(mine) in plan["core_sql"]
    # Later queries on the column, any analyst, any ε: no second charge for the bound.
    engine.run(QueryRequest("SELECT model, AVG(latency_ms) FROM prompts GROUP BY model"))
    engine.run(QueryRequest(SUM, epsilon=0.3, analyst="someone-else"))
    assert sum(n == NOTE for n in _charges(engine)) == 1
    assert len(_charges(engine)) == 4


def test_a_fresh_engine_reads_the_stored_bound_for_free(tmp_path: Path, demo_db: Path) -> None:
    text = policy_text(tmp_path, demo_db)
    first = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        first.run(QueryRequest(SUM, epsilon=1.0))
        prompts = first.policy.table("prompts")
        bound = first.auto_values.released(prompts, prompts.column("latency_ms"))
        first_explained = first.explain(QueryRequest(SUM, epsilon=0.4)).to_dict()
    finally:
        first.close()
    second = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        n = len(_charges(second))
        prompts = second.policy.table("prompts")
        # The choice reads only the released histogram: the same bounds come back.
        assert second.auto_values.released(prompts, prompts.column("latency_ms")) == bound
        assert second.explain(QueryRequest(SUM, epsilon=0.4)).to_dict() == first_explained
        assert len(_charges(second)) == n
    finally:
        second.close()


def test_queries_that_need_no_bound_pay_nothing_for_it(engine: Engine) -> None:
    engine.run(QueryRequest("SELECT model, COUNT(latency_ms) AS n FROM prompts GROUP BY model"))
    engine.run(QueryRequest("SELECT SUM(tokens_out) FROM prompts WHERE latency_ms > 100"))
    assert NOTE not in _charges(engine)


def test_a_subquery_passing_the_column_on_waits_for_the_bound(engine: Engine) -> None:
    sql = "SELECT SUM(l) FROM (SELECT latency_ms AS l FROM prompts WHERE model = 'small') t"
    assert engine.explain(QueryRequest(sql)).to_dict()["auto_bounds"][0]["column"] == "latency_ms"


def test_each_person_keeps_at_most_c_values(engine: Engine) -> None:
    prompts = engine.policy.table("prompts")
    counts = engine.auto_values.exact_counts(prompts, prompts.column("latency_ms"))
    kept = _truth(
        engine,
        "SELECT SUM(LEAST(n, 10)) FROM (SELECT COUNT(*) AS n FROM prompts "
        "WHERE latency_ms IS NOT NULL GROUP BY user_id)",
    )
    assert engine.auto_values.rows_per_person(prompts) == 10 and int(counts.sum()) == kept
    # The same data gives the same histogram: no random choice of a person's rows.
    assert (engine.auto_values.exact_counts(prompts, prompts.column("latency_ms")) == counts).all()


def test_the_histograms_noise_is_what_c_values_per_person_need(engine: Engine) -> None:
    """One person adds up to C = 10 values to the histogram (at most C in L2 as in L1), so
    the charged ρ must pay for an L2 sensitivity of C: ρ ≥ C²/(2σ²). σ is read from the
    stored release itself (noisy minus exact counts, over its few dozen bins), not from
    the engine's calibration; the factor 0.1 leaves room for that estimate (a false alarm
    below 1e-12). Calibrated as if each person added one value, the noise is C times
    narrower for the same charge and ρ falls 100 times short."""
    engine.run(QueryRequest(SUM, epsilon=1.0))
    prompts = engine.policy.table("prompts")
    column = prompts.column("latency_ms")
    c = engine.auto_values.rows_per_person(prompts)
    stored = engine.cache.get(engine.auto_values._key(prompts, column))
    assert stored is not None and c == 10
    noisy = np.asarray(stored[1].column("count").to_pylist(), dtype=float)
    residual = noisy - np.asarray(engine.auto_values.exact_counts(prompts, column), dtype=float)
    assert residual.size >= 30
    sigma2 = float(np.mean(residual**2))  # the noise has mean 0
    [charge] = [e for e in engine.ledger.history(limit=10**6) if e.note == NOTE]
    rho = charge.curve.values[0] / ORDERS[0]
    assert charge.curve.values == pytest.approx([rho * a for a in ORDERS], rel=1e-9)  # zCDP
    assert rho >= 0.1 * c * c / (2 * sigma2), (rho, c, sigma2)


def test_refused_query_pays_nothing(engine: Engine) -> None:
    before = engine.ledger.history()
    with pytest.raises(DPSQLError):
        engine.run(QueryRequest("SELECT SUM(latency_ms) FROM prompts GROUP BY user_id"))
    assert engine.ledger.history() == before


def test_the_sum_comes_close_with_the_chosen_bound(engine: Engine, demo_db: Path) -> None:
    """With the fixed cap of 10 rows, the bounded truth is what the noise centres on:
    a bound near the values' high quantile keeps the sum within a few percent of it."""
    truth = _truth(
        engine,
        "SELECT SUM(v) FROM (SELECT latency_ms AS v, ROW_NUMBER() OVER "
        "(PARTITION BY user_id) AS r FROM prompts) WHERE r <= 10",
    )
    result = engine.run(QueryRequest(SUM, epsilon=1.0))
    released = float(result.rows[0][0])
    assert math.isfinite(released) and abs(released - truth) / truth < 0.25


def test_an_auto_integer_column_is_never_a_public_domain(tmp_path: Path, demo_db: Path) -> None:
    """Before release the planner sees the limit (51 integers here, a domain small enough
    to list): a key's domain must not depend on whether a bound was released yet."""
    text = policy_text(tmp_path, demo_db).replace(
        "columns.tokens_in  = { lower = 0, upper = 4000 }",
        'columns.tokens_in  = { lower = 0, upper = "auto", upper_limit = 50 }',
    )
    e = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        assert e.policy.table("prompts").column("tokens_in").upper_limit == 50.0
        sql = "SELECT tokens_in, COUNT(*) AS n FROM prompts GROUP BY tokens_in"
        explained = e.explain(QueryRequest(sql)).to_dict()
        assert explained["public_domain_size"] is None and explained["partition"] is not None
    finally:
        e.close()


def test_a_bound_the_budget_cannot_pay_is_refused_before_any_charge(
    tmp_path: Path, demo_db: Path
) -> None:
    text = policy_text(tmp_path, demo_db, epsilon=50.0).replace(
        "epsilon_cap = 1000.0", "epsilon_cap = 5.0"
    )
    e = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        with pytest.raises(DPSQLError) as error:
            e.run(QueryRequest(SUM, epsilon=0.5))
        assert error.value.code == "budget_exhausted"
        assert _charges(e) == []
        prompts = e.policy.table("prompts")
        assert e.auto_values.released(prompts, prompts.column("latency_ms")) is None
        # A query that needs no bound is still answered.
        e.run(QueryRequest("SELECT COUNT(*) FROM prompts", epsilon=0.5))
        assert len(_charges(e)) == 1
    finally:
        e.close()


def test_an_auto_row_cap_table_pays_its_histogram_then_the_bound(
    tmp_path: Path, demo_db: Path
) -> None:
    """On the demo policy as shipped (prompts' row cap is "auto" too): the first SUM
    pays the rows-per-person histogram, then the bound (drawn with 8 values per person),
    then itself; the next pays only itself."""
    e = Engine(parse_policy(policy_text(tmp_path, demo_db, fixed=False), base_dir=tmp_path))
    try:
        prompts = e.policy.table("prompts")
        assert prompts.auto_rows_limit == 256 and e.auto_values.rows_per_person(prompts) == 8
        e.run(QueryRequest(SUM, epsilon=1.0))
        notes = _charges(e)
        assert notes[:2] == ["auto bounds of prompts", NOTE] and len(notes) == 3
        bound = e.auto_values.released(prompts, prompts.column("latency_ms"))
        assert bound is not None and 0 < bound < 600000.0
        e.run(QueryRequest(SUM, epsilon=0.8))
        assert len(_charges(e)) == 4
    finally:
        e.close()


def test_the_draw_cannot_fail_on_one_persons_text_value(tmp_path: Path, demo_db: Path) -> None:
    # An auto bound declared on a text column of numbers: the draw reads every row, so
    # one row that is not a number (one person's) must not fail it after its charge —
    # the error would tell whether that person is in the data. Such a row is left out,
    # as a NULL is.
    db = tmp_path / "text.duckdb"
    shutil.copy(demo_db, db)
    with duckdb.connect(str(db)) as conn:
        conn.execute("ALTER TABLE prompts ADD COLUMN score VARCHAR")
        conn.execute("UPDATE prompts SET score = CAST(tokens_in AS VARCHAR)")
        conn.execute("UPDATE prompts SET score = 'n/a' WHERE prompt_id = 1")
    score = 'columns.score = { lower = 0, upper = "auto", upper_limit = 10000 }'
    text = policy_text(tmp_path, db, latency=f"{LATENCY}\n{score}")
    e = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        sql = "SELECT COUNT(*) AS n FROM (SELECT user_id, score FROM prompts) AS t"
        result = e.run(QueryRequest(sql, epsilon=1.0))
        assert len(result.rows) == 1
        assert _charges(e)[0] == "auto upper bound of prompts.score"
        prompts = e.policy.table("prompts")
        column = prompts.column("score")
        assert column is not None and e.auto_values.released(prompts, column) is not None
    finally:
        e.close()


# --- lower bounds ----------------------------------------------------------------------

BOTH = (
    'columns.latency_ms = { lower = "auto", lower_limit = -1000, upper = "auto", '
    "upper_limit = 600000 }"
)
LOWER_NOTE = "auto lower bound of prompts.latency_ms"
BOTH_NOTE = "auto lower and upper bounds of prompts.latency_ms"


def _schema_bounds(e: Engine) -> tuple[float | None, float | None]:
    prompts = next(t for t in e.schema(None) if t.name == "prompts")
    col = next(c for c in prompts.columns if c.name == "latency_ms")
    return col.lower, col.upper


def test_both_bounds_auto_share_one_histogram(tmp_path: Path, demo_db: Path) -> None:
    e = Engine(parse_policy(policy_text(tmp_path, demo_db, BOTH), base_dir=tmp_path))
    try:
        prompts = e.policy.table("prompts")
        column = prompts.column("latency_ms")
        assert (column.lower, column.lower_limit, column.upper_limit) == (None, -1000.0, 600000.0)
        explained = e.explain(QueryRequest(SUM, epsilon=1.0)).to_dict()
        assert sorted((p["side"], p["limit"]) for p in explained["auto_bounds"]) == [
            ("lower", -1000.0),
            ("upper", 600000.0),
        ]
        assert explained["statistics"][0]["bounds"] == [-1000.0, 600000.0]  # the limits
        assert _schema_bounds(e) == (-1000.0, 600000.0)
        e.run(QueryRequest(SUM, epsilon=1.0))
        # One histogram on the grid lower_limit..upper_limit serves both sides: one charge.
        assert _charges(e)[0] == BOTH_NOTE and NOTE not in _charges(e)
        assert LOWER_NOTE not in _charges(e)
        lower = e.auto_values.released(prompts, column, Side.LOWER)
        upper = e.auto_values.released(prompts, column, Side.UPPER)
        assert lower is not None and upper is not None
        # The lower bound sits just below the values' 5th percentile: the lower edge of
        # its bin on the grid of round numbers above the limit, which is finest there.
        p5 = _truth(e, "SELECT QUANTILE_CONT(latency_ms, 0.05) FROM prompts")
        p95 = _truth(e, "SELECT QUANTILE_CONT(latency_ms, 0.95) FROM prompts")
        assert -1000.0 < lower <= p5 < p95 / 4 <= upper <= p95 * 4
        assert lower + 1000.0 >= (p5 + 1000.0) / 4
        plan = e.explain(QueryRequest(SUM, epsilon=1.0)).to_dict()
        chosen = {c["bound"]: c["chosen"] for c in plan["chosen_bounds"]}
        assert plan["auto_bounds"] == [] and plan["statistics"][0]["bounds"] == [
            chosen["lower"],
            chosen["upper"],
        ]
        assert -1000.0 <= chosen["lower"] <= p5
        assert _schema_bounds(e) == (lower, upper)
        # Later queries: no further bound charges.
        e.run(QueryRequest("SELECT model, AVG(latency_ms) FROM prompts GROUP BY model"))
        assert sum(n in (NOTE, LOWER_NOTE, BOTH_NOTE) for n in _charges(e)) == 1
    finally:
        e.close()


def test_a_lower_only_auto_keeps_the_declared_upper(tmp_path: Path, demo_db: Path) -> None:
    spelling = 'columns.latency_ms = { lower = "auto", lower_limit = -1000, upper = 60000 }'
    e = Engine(parse_policy(policy_text(tmp_path, demo_db, spelling), base_dir=tmp_path))
    try:
        prompts = e.policy.table("prompts")
        column = prompts.column("latency_ms")
        # The lower side's histogram keeps the same C values per person as the upper one.
        lower_counts = e.auto_values.exact_counts(prompts, column)
        kept = _truth(
            e,
            "SELECT SUM(LEAST(n, 10)) FROM (SELECT COUNT(*) AS n FROM prompts "
            "WHERE latency_ms IS NOT NULL GROUP BY user_id)",
        )
        assert int(lower_counts.sum()) == kept
        e.run(QueryRequest(SUM, epsilon=1.0))
        assert LOWER_NOTE in _charges(e) and NOTE not in _charges(e)
        lower = e.auto_values.released(prompts, column, Side.LOWER)
        assert lower is not None and -1000.0 <= lower < 60000.0
        # A SUM of these positive values: max(|L|, |U|) = U for every candidate, so a lower
        # L saves no noise and the query keeps every value (the bound at or below the
        # default, never below the limit).
        plan = e.explain(QueryRequest(SUM, epsilon=1.0)).to_dict()
        (chosen,) = plan["chosen_bounds"]
        assert chosen["bound"] == "lower" and -1000.0 <= chosen["chosen"] <= lower
        assert plan["statistics"][0]["bounds"] == [chosen["chosen"], 60000.0]
    finally:
        e.close()


def _chosen_lower(e: Engine, sql: str, **kw: object) -> float:
    plan = e.explain(QueryRequest(sql, **kw)).to_dict()  # type: ignore[arg-type]
    (chosen,) = [c for c in plan["chosen_bounds"] if c["bound"] == "lower"]
    errors = {c["value"]: c["estimated_relative_error"] for c in chosen["candidates"]}
    assert errors[chosen["chosen"]] == min(errors.values())
    assert chosen["limit"] == -1000.0 and min(errors) >= -1000.0
    lower: float = plan["statistics"][0]["bounds"][0]
    assert lower == chosen["chosen"]
    return lower


def test_each_query_picks_its_own_lower_bound_for_free(tmp_path: Path, demo_db: Path) -> None:
    e = Engine(parse_policy(policy_text(tmp_path, demo_db, BOTH), base_dir=tmp_path))
    try:
        e.run(QueryRequest(SUM, epsilon=1.0))
        paid = len(_charges(e))
        assert _charges(e).count(BOTH_NOTE) == 1
        # An AVG's noise grows with the range U − L: a tiny ε buys a tighter (higher)
        # lower bound than a large one, never below the lower_limit.
        avg = "SELECT AVG(latency_ms) AS a FROM prompts"
        tight = _chosen_lower(e, avg, epsilon=0.06)
        loose = _chosen_lower(e, avg, epsilon=100.0)
        assert -1000.0 <= loose < tight
        # The lower bound is part of the plan, so of its cache key; choosing charged nothing.
        keys = {
            e.explain(QueryRequest(avg, epsilon=eps)).to_dict()["cache_key"] for eps in (0.06, 100)
        }
        assert len(keys) == 2
        e.run(QueryRequest(avg, epsilon=0.06))
        e.run(QueryRequest(avg, epsilon=100.0))
        notes = _charges(e)
        assert notes.count(BOTH_NOTE) == 1 and len(notes) == paid + 2  # the two queries only
        # An AVG of an expression is not weighed: it keeps the default (5th percentile).
        prompts = e.policy.table("prompts")
        column = prompts.column("latency_ms")
        default = e.auto_values.released(prompts, column, Side.LOWER)
        scaled = e.explain(QueryRequest("SELECT AVG(latency_ms * 2) FROM prompts")).to_dict()
        assert scaled["chosen_bounds"] == [] and default is not None
        assert scaled["statistics"][0]["bounds"][0] == 2 * default
        assert _schema_bounds(e)[0] == default
    finally:
        e.close()


# --- the upper bound by expected error, per query --------------------------------------


def _chosen_upper(e: Engine, sql: str, **kw: object) -> float:
    plan = e.explain(QueryRequest(sql, **kw)).to_dict()  # type: ignore[arg-type]
    (chosen,) = [c for c in plan["chosen_bounds"] if c["bound"] == "upper"]
    errors = {c["value"]: c["estimated_relative_error"] for c in chosen["candidates"]}
    assert errors[chosen["chosen"]] == min(errors.values())
    upper: float = plan["statistics"][0]["bounds"][1]
    assert upper == chosen["chosen"]
    return upper


def test_each_query_picks_its_own_upper_bound_for_free(engine: Engine) -> None:
    engine.run(QueryRequest(SUM, epsilon=1.0))
    paid = len(_charges(engine))
    # More budget, less noise per unit of the bound: a larger bound, less clamped away.
    tight, loose = _chosen_upper(engine, SUM, epsilon=0.1), _chosen_upper(engine, SUM, epsilon=10.0)
    assert tight < loose <= 600000.0
    # An AVG over three public groups weighs its noise against smaller totals.
    avg = "SELECT model, AVG(latency_ms) AS a FROM prompts GROUP BY model"
    assert _chosen_upper(engine, avg, epsilon=1.0) <= _chosen_upper(engine, SUM, epsilon=1.0)
    # A request naming its own cap still gets a bound chosen for it.
    assert _chosen_upper(engine, SUM, epsilon=1.0, max_rows_per_group=2) > 0
    # The bound is part of the plan, so of its cache key; choosing it charged nothing.
    keys = {
        engine.explain(QueryRequest(SUM, epsilon=eps)).to_dict()["cache_key"] for eps in (0.1, 10)
    }
    assert len(keys) == 2 and len(_charges(engine)) == paid
    # A sum of an expression of the column is not weighed: it keeps the default bound.
    scaled = engine.explain(QueryRequest("SELECT SUM(latency_ms * 2) FROM prompts")).to_dict()
    released = engine.auto_values.released(
        engine.policy.table("prompts"), engine.policy.table("prompts").column("latency_ms")
    )
    assert scaled["chosen_bounds"] == [] and released is not None
    assert scaled["statistics"][0]["bounds"] == [0.0, 2 * released]


def test_another_person_definition_pays_for_its_own_histograms(
    tmp_path: Path, demo_db: Path
) -> None:
    """The same files, ledger and release store, after the policy re-declares who a
    table's person is: the histograms released about the old person (rows per person,
    the column's values) were charged to the old population only, and are not replayed
    for the new one: it pays for its own."""
    text = policy_text(tmp_path, demo_db, fixed=False)
    unit = '[tables.prompts]\npopulation = "users"\nunit = "user_id"'
    assert unit in text
    first = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        first.run(QueryRequest(SUM, epsilon=1.0))
        assert {NOTE, "auto bounds of prompts"} <= set(_charges(first))
        per_user = first.auto_bounds.histogram(first.policy.table("prompts"))
    finally:
        first.close()
    renamed = text.replace(
        unit, '[tables.prompts]\npopulation = "devices"\nunit = "prompt_id"'
    ) + "\n[populations.devices]\nepsilon_cap = 100.0\ndelta = 1e-6\n"
    second = Engine(parse_policy(renamed, base_dir=tmp_path))
    try:
        pending = second.explain(QueryRequest(SUM, epsilon=1.0)).to_dict()["auto_bounds"]
        assert pending, "the new person's histograms are pending before any query"
        second.run(QueryRequest(SUM, epsilon=1.0))
        paid = [
            ev.note
            for ev in second.ledger.history()
            if ev.kind == "charge" and "devices" in ev.populations
        ]
        assert NOTE in paid and "auto bounds of prompts" in paid
        # One row per prompt: the histogram read now is the new person's, not the old.
        per_prompt = second.auto_bounds.histogram(second.policy.table("prompts"))
        assert per_user is not None and per_prompt is not None and per_prompt != per_user
    finally:
        second.close()


def test_the_history_names_the_bound_it_paid_for(engine: Engine) -> None:
    """dpsql's own release is named in the analyst's history (proxy/ledger_views.py)."""
    engine.run(QueryRequest(SUM, epsilon=1.0))
    assert [h.automatic for h in engine.query_history("local") if h.automatic] == [NOTE]
