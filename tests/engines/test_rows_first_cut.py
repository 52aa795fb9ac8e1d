"""The L0 cut rows first on DuckDB (proxy/engines/rows_first_cut.py): chosen from the
core's text alone, and the same groups, values and clipping marks as the cut of
proxy/rewrite/l0.py, ties and many rows per group included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.engine import Engine, Explanation
from proxy.engines.rows_first_cut import rows_first
from proxy.request import QueryRequest
from proxy.rewrite import l0
from proxy.rewrite.l0 import takes_seed
from tests.bench import test_l0_plans
from tests.proxy.test_l0_rule import kept_by_rule

# The engine over 500 people's 20,000 prompts, some days holding several of a person's
# rows (so that their row heaps see repeated hashes): the L0 plans' fixture.
engine = test_l0_plans.engine


def _core(engine: Engine, sql: str) -> str:
    explanation = engine.explain(QueryRequest(sql, epsilon=1.0))
    assert isinstance(explanation, Explanation)
    return explanation.plan.core_sql


def _raw_rows(engine: Engine, sql: str, seed: int) -> list[tuple[Any, ...]]:
    """``sql`` run as written (not through the executor, which would put a cut rows
    first itself)."""
    cursor = engine.executor._db.cursor()  # type: ignore[attr-defined]
    try:
        columns = cursor.execute(sql, [seed] if takes_seed(sql) else []).fetchnumpy()
    finally:
        cursor.close()
    return _sorted_rows(columns)


def _plain(value: Any) -> Any:
    """A cell comparable and sortable: a list (a histogram's bins) as a tuple."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    return tuple(value) if isinstance(value, list) else value


def _sorted_rows(columns: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows, sorted; a quantile's histogram (its bins ``X_b`` and counts ``X_n``,
    lists in whatever order DuckDB's threads aggregated them) as its sorted pairs."""
    cells = {c: [_plain(v) for v in columns[c].tolist()] for c in sorted(columns)}
    for name in [c for c in cells if c.endswith("_b") and c[:-2] + "_n" in cells]:
        counts = cells.pop(name[:-2] + "_n")
        cells[name] = [
            tuple(sorted(zip(b or (), n or (), strict=True)))
            for b, n in zip(cells[name], counts, strict=True)
        ]
    return sorted(zip(*(cells[c] for c in sorted(cells)), strict=True), key=repr)


FINE = [
    "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n, SUM(tokens_in) AS s "
    "FROM prompts GROUP BY d",
    "SELECT date_trunc('hour', ts) AS h, model, COUNT(*) AS n FROM prompts GROUP BY h, model",
    "SELECT CAST(ts AS DATE) AS d, AVG(latency_ms) AS a FROM prompts GROUP BY d",
    "SELECT model, date_trunc('minute', ts) AS m, COUNT(*) AS n FROM prompts "
    "WHERE tokens_in > 100 GROUP BY model, m",
]
# More shapes over a daily key: each is either cut rows first with the core's rows, or
# left as it is (a core whose per-person aggregation does not read r directly).
SHAPES = [
    "SELECT date_trunc('day', ts) AS d, COUNT(DISTINCT model) AS m FROM prompts GROUP BY d",
    "SELECT date_trunc('day', ts) AS d, MEDIAN(tokens_in) AS med, "
    "QUANTILE_CONT(latency_ms, 0.9) AS q FROM prompts GROUP BY d",
    "SELECT date_trunc('day', p.ts) AS d, u.region, COUNT(*) AS n FROM prompts p "
    "JOIN users u ON u.user_id = p.user_id GROUP BY d, u.region",
    "SELECT date_trunc('day', ts) AS d, MIN(tokens_out) AS lo, MAX(tokens_out) AS hi, "
    "VAR_POP(latency_ms) AS v FROM prompts WHERE flagged GROUP BY d HAVING COUNT(*) > 3",
    "SELECT date_trunc('hour', ts) AS h, SUM(CASE WHEN model = 'small' THEN tokens_in END) "
    "AS s FROM prompts WHERE user_id IN (SELECT user_id FROM users WHERE age > 30) GROUP BY h",
]

COARSE = [
    "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m",
    "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n FROM prompts GROUP BY w",
    "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model",
    "SELECT COUNT(*) AS n FROM prompts",
]


@pytest.mark.parametrize("sql", FINE)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_first_returns_the_cores_rows(engine: Engine, sql: str, seed: int) -> None:
    core = _core(engine, sql)
    variant = rows_first(core)
    assert variant != core and "early AS (" in variant  # chosen for a fine time key
    want = _raw_rows(engine, core, seed)
    assert want
    assert _raw_rows(engine, variant, seed) == want
    # and the executor runs it so, with the same answer
    assert _sorted_rows(engine.executor.run(core, [seed])) == want


@pytest.mark.parametrize("sql", SHAPES)
def test_other_shapes_over_a_daily_key_give_the_cores_rows(engine: Engine, sql: str) -> None:
    explanation = engine.explain(QueryRequest(sql, epsilon=1.0))
    assert isinstance(explanation, Explanation)
    core = explanation.plan.core_sql
    variant = rows_first(core)
    want = _raw_rows(engine, core, 4)
    assert want
    assert _raw_rows(engine, variant, 4) == want


@pytest.mark.parametrize("sql", COARSE)
def test_other_keys_keep_the_cut_after_the_aggregation(engine: Engine, sql: str) -> None:
    core = _core(engine, sql)
    assert rows_first(core) == core


def test_the_cut_is_left_alone_above_the_heap_size() -> None:
    core = (
        "WITH r AS (SELECT t.u AS __u, DATE_TRUNC('DAY', t.ts) AS __k0 FROM t), "
        "pp AS (SELECT __u, __k0, COUNT(*) AS __s0 FROM r GROUP BY HASH(HASH(__u, __k0, $1), "
        f"$1), __u, __k0), pph AS ({l0._hashed(1, True).sql('duckdb')}), "
        "heavy AS ({heavy}), bounded AS ({cut}) SELECT __k0, SUM(__s0) FROM bounded GROUP BY __k0"
    )
    for k, moved in ((4, True), (l0.HEAP_K, True), (l0.HEAP_K + 1, False)):
        text = core.format(heavy=l0._heavy(k).sql("duckdb"), cut=l0._CUT.sql("duckdb"))
        assert (rows_first(text) != text) is moved, k
    # not a core (no cut) and text sqlglot cannot read: returned as is
    assert rows_first("SELECT 1") == "SELECT 1"
    assert rows_first("heavy AS ( $1 ((") == "heavy AS ( $1 (("


# The rule's reference with hashes chosen by the test: each person's groups get hashes
# from a small range (ties at the K-th and (K+1)-th hash, among the heap's rows) or a
# large one, and one to four rows each (a person's smallest group can fill the heap).
GROUPS = st.lists(
    st.tuples(
        st.one_of(st.integers(min_value=0, max_value=4), st.integers(0, 2**62)),
        st.integers(min_value=1, max_value=4),
    ),
    max_size=10,
)
PERSONS = st.dictionaries(st.integers(min_value=1, max_value=25), GROUPS, min_size=1, max_size=8)


def _cut_with_hashes(k: int) -> str:
    """A core in l0.py's shape over table t (person, day, chosen hash), rows first, the
    row hash read from t instead of computed."""
    core = (
        "WITH r AS (SELECT t.u AS __u, DATE_TRUNC('DAY', t.ts) AS __k0, t.hh AS __hh FROM t), "
        "pp AS (SELECT __u, __k0, COUNT(*) AS __s0 FROM r GROUP BY HASH(HASH(__u, __k0, $1), "
        f"$1), __u, __k0), pph AS ({l0._hashed(1, True).sql('duckdb')}), "
        f"heavy AS ({l0._heavy(k).sql('duckdb')}), bounded AS ({l0._CUT.sql('duckdb')}) "
        "SELECT __u, __k0, __s0, __l0cut FROM bounded"
    )
    variant = rows_first(core)
    hashed = "CAST(HASH(r.__u, r.__k0, $1) >> 1 AS BIGINT)"
    assert variant != core and hashed in variant
    return variant.replace(hashed, "r.__hh")


@settings(max_examples=60, deadline=None)
@given(PERSONS, st.sampled_from([1, 2, 4, l0.HEAP_K]))
def test_the_early_cut_keeps_the_rules_groups_ties_included(
    persons: dict[int, list[tuple[int, int]]], k: int
) -> None:
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE t (u BIGINT, ts TIMESTAMP, hh BIGINT)")
        rows = [
            (u, g, h, row)
            for u, groups in persons.items()
            for g, (h, n) in enumerate(groups)
            for row in range(n)
        ]
        for u, g, h, row in rows:
            con.execute(
                "INSERT INTO t VALUES (?, TIMESTAMP '2024-01-01' + ? * INTERVAL 1 DAY "
                "+ ? * INTERVAL 1 MINUTE, ?)",
                [u, g, row, h],
            )
        out = con.execute(_cut_with_hashes(k), [7]).fetchall()
    finally:
        con.close()
    kept: dict[int, dict[int, tuple[int, int]]] = {u: {} for u in persons}
    for u, day, count, mark in out:
        kept[u][(day - day.replace(month=1, day=1)).days] = (count, mark)
    for u, groups in persons.items():
        want = kept_by_rule([h for h, _ in groups], k)
        assert set(kept[u]) == want, (u, groups, k)
        for g in want:
            # the group's whole count, and the clipping mark iff the person has > K groups
            assert kept[u][g] == (groups[g][1], int(len(groups) > k)), (u, groups, g)


def test_a_core_of_another_shape_is_left_alone() -> None:
    """A per-person aggregation that filters its groups (its dropped groups would count
    towards the early bound) or a cut not in l0.py's own form keeps the cut after pp."""
    core = (
        "WITH r AS (SELECT t.u AS __u, DATE_TRUNC('DAY', t.ts) AS __k0, t.ok AS __ok FROM t), "
        "pp AS (SELECT __u, __k0, COUNT(*) AS __s0 FROM r GROUP BY HASH(HASH(__u, __k0, $1), "
        f"$1), __u, __k0{{having}}), pph AS ({l0._hashed(1, True).sql('duckdb')}), "
        f"heavy AS ({l0._heavy(1).sql('duckdb')}), bounded AS ({{cut}}) "
        "SELECT __k0, SUM(__s0) FROM bounded GROUP BY __k0"
    )
    plain = core.format(having="", cut=l0._CUT.sql("duckdb"))
    assert rows_first(plain) != plain
    filtered = core.format(having=" HAVING BOOL_AND(__ok)", cut=l0._CUT.sql("duckdb"))
    assert rows_first(filtered) == filtered
    other_cut = core.format(having="", cut="SELECT * FROM pph")
    assert rows_first(other_cut) == other_cut


def test_one_persons_rows_do_not_set_the_memory_the_cut_takes(tmp_path: Path) -> None:
    """The core as written streams a person's rows into their groups, so its memory
    follows groups; rows first must not write every row out (DuckDB materialises a CTE
    read twice), or one person's rows on one day could make the statement fail after
    the charge where the core does not. A review, 2026-12-05: 20M rows of one person
    took 655 MB against the core's 95 MB. Here, under a memory limit with nowhere to
    spill, both forms must run and return the same rows."""
    from proxy.policy import parse_policy
    from tests.policies import ev_policy

    db = tmp_path / "heavy.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE ev (user_id BIGINT, ts TIMESTAMP, n INTEGER)")
        con.execute(  # 1,000 people with ten rows over ten days
            "INSERT INTO ev SELECT 1000 + x // 10, TIMESTAMP '2024-01-01' + "
            "(x % 10) * INTERVAL 1 DAY, x % 7 FROM range(10000) t(x)"
        )
        con.execute(  # one person with 4M rows, all on one day
            "INSERT INTO ev SELECT 1, TIMESTAMP '2024-01-01' + (x % 86400) * INTERVAL 1 SECOND, "
            "x % 7 FROM range(4000000) t(x)"
        )
    text = ev_policy(3, "columns.n = {{ lower = 0, upper = 20 }}\n")
    engine = Engine(parse_policy(text.format(db=db, folder=tmp_path), base_dir=tmp_path))
    try:
        core = _core(
            engine,
            "SELECT date_trunc('day', ts) AS k, COUNT(*) AS c, SUM(n) AS s FROM ev GROUP BY 1",
        )
        as_run = engine.executor._guard(core)  # type: ignore[attr-defined]
    finally:
        engine.close()
    assert as_run != core and "heavy AS (" in core
    config = {"memory_limit": "48MB", "temp_directory": "", "threads": 2}
    with duckdb.connect(str(db), read_only=True, config=config) as con:
        expected = sorted(con.execute(core, [7]).fetchall(), key=repr)
        assert sorted(con.execute(as_run, [7]).fetchall(), key=repr) == expected
