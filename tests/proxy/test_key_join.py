"""The key-join rule (proxy/rewrite/key_join.py): a person-constant key from a
one-row-per-person table joined after the per-person aggregation. Same rows as the
MIN-over-every-row form on the demo data; left alone outside its shape; and one group
per person enforced by the SQL even on data that breaks one_row_per_person."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pytest

import proxy.rewrite as rewrite_pkg
from proxy.engine import Engine
from proxy.plan import limits
from proxy.request import QueryRequest
from proxy.rewrite import RULES, initial_core, key_join
from proxy.rewrite.core import Core
from proxy.rewrite.l0 import takes_seed
from tests.proxy.conftest import demo_policy

SEED = 77

APPLIES = (
    "SELECT region, COUNT(*), SUM(tokens_in) FROM prompts JOIN users USING (user_id) "
    "GROUP BY region",
    "SELECT u.region, u.plan, AVG(p.latency_ms) AS l, COUNT(*) AS n FROM prompts p "
    "JOIN users u ON u.user_id = p.user_id WHERE p.model = 'large' GROUP BY 1, 2",
    "SELECT upper(u.plan) AS k, SUM(p.tokens_out) AS s FROM prompts p JOIN users u "
    "ON p.user_id = u.user_id WHERE p.tokens_in > 100 GROUP BY 1",
)
LEFT_ALONE = (
    # a key table's column in WHERE, a LEFT join, a DISTINCT count, a median, a key of
    # the anchor (the key table first in FROM), private keys
    "SELECT upper(u.plan) AS k, SUM(p.tokens_out) AS s FROM users u JOIN prompts p "
    "ON p.user_id = u.user_id GROUP BY 1",
    "SELECT region, COUNT(*) FROM prompts JOIN users USING (user_id) WHERE plan = 'pro' "
    "GROUP BY region",
    "SELECT region, COUNT(*) FROM prompts LEFT JOIN users USING (user_id) GROUP BY region",
    "SELECT region, COUNT(DISTINCT model) FROM prompts JOIN users USING (user_id) GROUP BY region",
    "SELECT region, MEDIAN(tokens_in) FROM prompts JOIN users USING (user_id) GROUP BY region",
    "SELECT region, SUM(age) FROM prompts JOIN users USING (user_id) GROUP BY region",
    "SELECT plan, COUNT(*) FROM users GROUP BY plan",
    "SELECT model, COUNT(*) FROM prompts GROUP BY model",
)


def _cores(engine: Engine, sql: str, *, vouched: bool | None = None) -> tuple[Core, Core]:
    """The core with every rule, and without the key-join rule; ``vouched`` overrides
    whether the executor vouches for the key table's unique person ids (the DuckDB
    executor does for the demo's users; PostgreSQL and Spark do not)."""
    request = QueryRequest(sql, epsilon=1.0)
    shape = engine.checked_shape(request).shape
    if vouched is not None:
        tables = {a: replace(t, unit_unique=vouched) for a, t in shape.tables.items()}
        shape = replace(shape, tables=tables)
    max_rows, max_groups = limits(request, shape, engine.policy)
    out = []
    for rules in (RULES, tuple(r for r in RULES if r is not key_join.apply)):
        core = initial_core(shape, max_rows=max_rows, max_groups=max_groups)
        for rule in rules:
            core = rule(core)
        out.append(core)
    return out[0], out[1]


def _rows(result: dict[str, np.ndarray]) -> list[tuple[object, ...]]:
    names = sorted(result)
    return sorted(
        (tuple(result[n][i] for n in names) for i in range(len(result[names[0]]))), key=repr
    )


def _run(engine: Engine, sql: str) -> list[tuple[object, ...]]:
    return _rows(engine.executor.run(sql, [SEED] if takes_seed(sql) else []))


@pytest.mark.parametrize("sql", APPLIES)
def test_the_key_join_gives_the_rows_of_min_over_every_row(demo_engine: Engine, sql: str) -> None:
    new, old = _cores(demo_engine, sql)
    assert any(name == "pk" for name, _ in new.ctes), "the rule did not apply"
    assert "JOIN" not in dict(new.ctes)["r"].sql(), "r still joins the key table"
    rows = _run(demo_engine, new.sql)
    assert rows and rows == _run(demo_engine, old.sql)
    # and the engine plans that form (at the row cap it chooses)
    assert "pk AS (" in demo_engine.prepare(QueryRequest(sql, epsilon=1.0))[1].core_sql


@pytest.mark.parametrize("sql", APPLIES)
def test_the_unvouched_form_groups_the_key_table_and_gives_the_same_rows(
    demo_engine: Engine, sql: str
) -> None:
    vouched, _ = _cores(demo_engine, sql, vouched=True)
    unvouched, _ = _cores(demo_engine, sql, vouched=False)
    assert "GROUP BY" not in dict(vouched.ctes)["pk"].sql()
    assert "GROUP BY" in dict(unvouched.ctes)["pk"].sql()
    assert "MIN(" in dict(unvouched.ctes)["pk"].sql()
    rows = _run(demo_engine, vouched.sql)
    assert rows and rows == _run(demo_engine, unvouched.sql)


def test_duckdb_vouches_for_checked_base_tables_only(demo_engine: Engine, tmp_path: Path) -> None:
    # The demo's users (one_row_per_person, a base table) is vouched for; prompts is not
    # declared one row per person; a view declared so is not, though it passes the check,
    # nor a table with a generated column.
    assert demo_engine.executor.unique_units == frozenset({("main", "users")})  # type: ignore[attr-defined]
    users, prompts = demo_engine.catalog.get("main", "users"), demo_engine.catalog.get("main", "prompts")
    assert users is not None and users.unit_unique
    assert prompts is not None and not prompts.unit_unique
    db = tmp_path / "view.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE base AS SELECT range AS user_id, 'north' AS region FROM range(5)")
    con.execute("CREATE VIEW people AS SELECT * FROM base")
    # a person id computed at every read passes the check and may repeat later
    con.execute(
        "CREATE TABLE made (id BIGINT, region VARCHAR, user_id BIGINT AS (CASE WHEN "
        "current_query() LIKE '%COUNT(DISTINCT%' THEN id ELSE 1 END))"
    )
    con.execute("INSERT INTO made (id, region) VALUES (1, 'north'), (2, 'south')")
    con.close()
    from proxy.execute import DuckDBExecutor
    from proxy.policy import parse_policy

    policy = parse_policy(
        f'[database]\nduckdb = "{db}"\n[ledger]\npath = "{tmp_path / "l.sqlite"}"\n'
        '[populations.people]\nepsilon_cap = 1.0\ndelta = 1e-6\n'
        '[tables.people]\npopulation = "people"\nunit = "user_id"\none_row_per_person = true\n'
        '[tables.base]\npopulation = "people"\nunit = "user_id"\none_row_per_person = true\n'
        '[tables.made]\npopulation = "people"\nunit = "user_id"\none_row_per_person = true\n',
        base_dir=tmp_path,
    )
    executor = DuckDBExecutor(policy)
    try:
        assert executor.unique_units == frozenset({("main", "base")})
    finally:
        executor.close()


def test_nobody_can_write_the_file_while_the_executor_holds_it(demo_engine: Engine) -> None:
    # What the vouching rests on: the start-up check read the data every later core
    # reads, because no other process can open the file for writing meanwhile.
    path = demo_engine.policy.duckdb_path
    assert path is not None
    code = (
        "import duckdb, sys\n"
        "try:\n"
        f"    duckdb.connect({str(path)!r}).execute('DELETE FROM users')\n"
        "except duckdb.Error as e:\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 3, done.stderr.decode()[-500:]
    assert demo_engine.executor.evaluate("SELECT COUNT(*) > 0 FROM users") == [(True,)]


@pytest.mark.parametrize("sql", LEFT_ALONE)
def test_other_shapes_are_left_alone(demo_engine: Engine, sql: str) -> None:
    new, old = _cores(demo_engine, sql)
    assert new.sql == old.sql


def test_one_group_per_person_is_enforced_by_the_sql(demo_engine: Engine, tmp_path: Path) -> None:
    # Data that breaks one_row_per_person (the executor refuses to start on it, so the
    # core is run here directly): person 1 has two users rows in different regions,
    # person 2 has none. Each person still lands in one group, counted once, at most C,
    # in the form every executor that does not vouch for the key table runs.
    new, _ = _cores(demo_engine, APPLIES[0], vouched=False)
    c = new.max_rows
    db = tmp_path / "broken.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE users (user_id BIGINT, region VARCHAR, plan VARCHAR, age INTEGER)")
    con.execute(
        "INSERT INTO users VALUES (1, 'west', 'pro', 30), (1, 'east', 'free', 40), "
        "(3, 'north', 'free', 50)"
    )
    con.execute(
        "CREATE TABLE prompts AS SELECT i AS prompt_id, CASE WHEN i % 3 = 0 THEN 1 "
        "WHEN i % 3 = 1 THEN 2 ELSE 3 END AS user_id, TIMESTAMP '2026-01-01' AS ts, "
        "'small' AS model, 10 AS tokens_in, 10 AS tokens_out, 5 AS latency_ms, "
        "false AS flagged FROM range(300) t(i)"
    )
    rows = con.execute(new.sql).fetchall()
    con.close()
    by_key = {r[0]: r for r in rows}
    assert set(by_key) == {"east", "north"}  # person 1: MIN of their regions; 2: no row
    persons = [r[-1] for r in rows]
    assert sum(persons) == 2
    assert all(r[1] == c for r in rows)  # each person's count capped at C, counted once


DERIVED = (
    # a per-person derived table, a self join, a UNION ALL of row-level arms as the anchor
    "SELECT u.region, AVG(t.n) AS a, COUNT(*) AS c FROM (SELECT user_id, COUNT(*) AS n "
    "FROM prompts GROUP BY user_id) t JOIN users u ON u.user_id = t.user_id GROUP BY u.region",
    "SELECT b.region, COUNT(*) AS c FROM users a JOIN users b ON a.user_id = b.user_id "
    "GROUP BY b.region",
    "SELECT u.region, COUNT(*) AS c, SUM(p.tokens_in) AS s FROM (SELECT * FROM prompts "
    "UNION ALL SELECT * FROM prompts) p JOIN users u ON u.user_id = p.user_id GROUP BY u.region",
)


def test_derived_anchors_give_the_rows_of_min_over_every_row(
    demo_engine: Engine, demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Planned end to end (the derived tables are embedded after checking), once with the
    # rule and once by an engine whose rewrite runs without it.
    with_rule = [demo_engine.prepare(QueryRequest(s, epsilon=1.0))[1].core_sql for s in DERIVED]
    monkeypatch.setattr(rewrite_pkg, "RULES", tuple(r for r in RULES if r is not key_join.apply))
    other = Engine(demo_policy(tmp_path, demo_db))
    try:
        for sql, new in zip(DERIVED, with_rule, strict=True):
            old = other.prepare(QueryRequest(sql, epsilon=1.0))[1].core_sql
            assert "pk AS (" in new and "pk AS (" not in old
            rows = _run(demo_engine, new)
            assert rows and rows == _run(other, old)
    finally:
        other.close()
