"""The L0 plans of bench/l0_plans.py (issue 18) give the shipped core's answer.

BENCHMARKS.md quotes the experimental rows-first plan, the ANY_VALUE variant and the
other forms of the cut and of person-constant keys (issue 18, second round) as "same
rows" as the core; this checks that claim on real DuckDB data where persons have
many rows per group (daily and monthly keys, so the row heaps hold duplicate hashes),
for several seeds and for the smallest heap the plan allows (K + 1 rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from bench import engine as eb
from bench.l0_plans import (
    CUT_FORMS,
    KEY_FORMS,
    any_value_keys,
    min_key_core,
    plain_core,
    rows_first,
    without_l0,
)
from proxy.engine import Engine, Explanation
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed
from sample_data.generate import generate
from tests.proxy.conftest import demo_policy
from tests.proxy.test_l0_rule import kept_by_rule


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("l0-plans")
    # 40 prompts per person: most (person, day) groups hold several rows.
    db = generate(tmp / "usage.duckdb", people=500, prompts=20000, seed=5)
    engine = Engine(demo_policy(tmp, db))
    yield engine
    engine.close()


def _rows(engine: Engine, sql: str, seed: int) -> list[tuple[Any, ...]]:
    columns = engine.executor.run(sql, [seed] if takes_seed(sql) else [])
    return sorted(zip(*(columns[c].tolist() for c in sorted(columns)), strict=True))


def _core(engine: Engine, sql: str) -> tuple[str, int]:
    explanation = engine.explain(QueryRequest(sql, epsilon=1.0))
    assert isinstance(explanation, Explanation)
    return explanation.plan.core_sql, int(explanation.plan.max_groups)


@pytest.mark.parametrize("sql", [eb.PRIVATE_KEY, eb.PRIVATE_MONTH])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_first_gives_the_cores_rows(engine: Engine, sql: str, seed: int) -> None:
    core, k = _core(engine, sql)
    assert k >= 1
    want = _rows(engine, core, seed)
    assert want  # groups are released
    for heap in (k + 1, 2 * (k + 1)):
        variant = rows_first(core, k, heap)
        assert variant is not None
        assert _rows(engine, variant, seed) == want
    # The cut does something here: without it some persons keep more than K groups.
    unbounded = without_l0(core)
    assert unbounded is not None
    assert _rows(engine, unbounded, seed) != want


def test_any_value_keys_gives_the_cores_rows_for_a_person_constant_key(engine: Engine) -> None:
    core, _ = _core(engine, eb.PUBLIC_KEY)
    keyed = min_key_core(engine, eb.PUBLIC_KEY)  # MIN over every row, before key_join
    assert keyed is not None and any_value_keys(core) is None
    assert _rows(engine, keyed, 0) == _rows(engine, core, 0)
    variant = any_value_keys(keyed)
    assert variant is not None and "ANY_VALUE" in variant
    assert _rows(engine, variant, 0) == _rows(engine, core, 0)
    assert rows_first(core, 1, 2) is None  # one group per person: no cut to move


@pytest.mark.parametrize("label", [label for label, _ in CUT_FORMS])
@pytest.mark.parametrize("sql", [eb.PRIVATE_KEY, eb.PRIVATE_MONTH])
def test_each_cut_form_gives_the_cores_rows(engine: Engine, label: str, sql: str) -> None:
    core, k = _core(engine, sql)
    form = dict(CUT_FORMS)[label](plain_core(core), k)
    assert form is not None and form.count("?") == 1
    assert _rows(engine, form, 1) == _rows(engine, core, 1)


@pytest.mark.parametrize("label", [label for label, _ in KEY_FORMS])
def test_each_key_form_gives_the_cores_rows_for_a_person_constant_key(
    engine: Engine, label: str
) -> None:
    core, _ = _core(engine, eb.PUBLIC_KEY)
    keyed = min_key_core(engine, eb.PUBLIC_KEY)
    assert keyed is not None
    form = dict(KEY_FORMS)[label](keyed)
    assert form is not None
    assert _rows(engine, form, 3) == _rows(engine, core, 3)
    private, _ = _core(engine, eb.PRIVATE_KEY)
    assert dict(KEY_FORMS)[label](private) is None  # no person-constant key to pick


# The cut forms against the shipped rule's reference with hashes chosen by the test, as
# tests/proxy/test_l0_rule.py does for the shipped cut: ties at the K-th hash included.
_FAKE_CORE = (
    "WITH pp AS (SELECT __u, __k0, COUNT(*) AS __s0 FROM t GROUP BY __u, __k0), "
    "pph AS (SELECT 1), heavy AS (SELECT 1), bounded AS (SELECT 1) SELECT __k0 FROM bounded"
)
SMALL = st.integers(min_value=0, max_value=5)
PERSONS = st.dictionaries(
    st.integers(min_value=1, max_value=30),
    st.lists(st.one_of(SMALL, st.integers(min_value=0, max_value=2**63 - 1)), max_size=12),
    min_size=1,
    max_size=10,
)


def _cut_only(form: str) -> str:
    """The form's CTEs after pp and pph (the test's tables stand in for those two)."""
    tree = sqlglot.parse_one(form, read="duckdb")
    for cte in list(tree.args["with_"].expressions):
        if cte.alias in ("pp", "pph"):
            cte.pop()
    tree.set("expressions", [exp.column("__u"), exp.column("__k0")])
    tree.set("group", None)
    return tree.sql(dialect="duckdb")


def _kept_by(forms: list[str], persons: dict[int, list[int]]) -> list[dict[int, set[int]]]:
    rows = [(u, g, 1, h) for u, hs in persons.items() for g, h in enumerate(hs)]
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE pph (__u BIGINT, __k0 BIGINT, __s0 BIGINT, __h BIGINT)")
        if rows:
            values = ", ".join(f"({u}, {g}, {c}, {h})" for u, g, c, h in rows)
            con.execute(f"INSERT INTO pph VALUES {values}")
        con.execute("CREATE TABLE pp AS SELECT * FROM pph")
        out = []
        for form in forms:
            kept: dict[int, set[int]] = {u: set() for u in persons}
            for u, g in con.execute(form).fetchall():
                kept[u].add(g)
            out.append(kept)
        return out
    finally:
        con.close()


@settings(max_examples=20, deadline=None)
@given(PERSONS, st.sampled_from([1, 2, 4]))
def test_cut_forms_keep_the_rules_groups_ties_included(
    persons: dict[int, list[int]], k: int
) -> None:
    forms = [(label, build(_FAKE_CORE, k)) for label, build in CUT_FORMS]
    assert all(form is not None for _, form in forms)
    runs = _kept_by([_cut_only(form) for _, form in forms if form is not None], persons)
    for (label, _), kept in zip(forms, runs, strict=True):
        for u, hashes in persons.items():
            assert kept[u] == kept_by_rule(hashes, k), (label, u, hashes)
