"""Issue #13 §2 and §5: releasing keys (SELECT DISTINCT k, GROUP BY k with no aggregate)
and semi-joins on the person (IN / NOT IN / EXISTS / NOT EXISTS over a table of the same
population). Each through the real engine; the neighbour corpus runs the semi-joins on D
and D minus one person (tests/reliability/neighbour_corpus.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed
from tests.proxy.conftest import demo_policy


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, demo_db: Path):
    root = tmp_path_factory.mktemp("keys")
    db = root / "copy.duckdb"
    shutil.copy(demo_db, db)
    truth = duckdb.connect(str(demo_db), read_only=True)
    engine = Engine(demo_policy(root, db))
    yield engine, truth
    engine.close()
    truth.close()


def test_distinct_of_a_public_domain_is_free_and_exact(env) -> None:
    engine, _ = env
    before = engine.ledger.history()
    for sql in (
        "SELECT DISTINCT model FROM prompts",
        "SELECT model AS model FROM prompts GROUP BY model ORDER BY model LIMIT 1000",
    ):
        r = engine.run(QueryRequest(sql))
        assert sorted(row[0] for row in r.rows) == ["large", "medium", "small"]
        assert r.privacy.epsilon == 0 and r.privacy.charge_id is None
        assert any("the policy declares" in w for w in r.warnings)
    assert engine.ledger.history() == before  # no charge, no replay: nothing was read


def test_distinct_of_a_private_key_goes_through_partition_selection(env) -> None:
    engine, truth = env
    sql = "SELECT DISTINCT date_trunc('month', ts) AS m FROM prompts ORDER BY m"
    r = engine.run(QueryRequest(sql, epsilon=1.0))
    assert r.privacy.epsilon > 0 and r.privacy.partition["strategy"] == "threshold"
    months = {row[0] for row in r.rows}
    real = {
        row[0]
        for row in truth.execute("SELECT DISTINCT date_trunc('month', ts) FROM prompts").fetchall()
    }
    assert months and months <= real  # only groups that exist, and only big enough ones
    assert [row[0] for row in r.rows] == sorted(months)
    # DISTINCT with GROUP BY is refused with a rewrite that works (over aggregates
    # without GROUP BY it is a no-op: tests/proxy/test_distinct_and_per_person.py).
    with pytest.raises(DPSQLError) as info:
        engine.prepare(QueryRequest("SELECT DISTINCT model, COUNT(*) FROM prompts GROUP BY model"))
    assert info.value.code == "unsupported_sql" and "drop DISTINCT" in info.value.hint
    sql = "SELECT model, COUNT(*) FROM prompts GROUP BY model"
    assert engine.run(QueryRequest(sql, epsilon=1.0)).rows


def _core_count(engine: Engine, sql: str) -> float:
    plan = engine.prepare(QueryRequest(sql))[1]
    out = engine.executor.run(plan.core_sql, [3] if takes_seed(plan.core_sql) else [])
    rows = next(s for s in plan.statistics if s.kind == "rows").column
    return float(out[rows][0])


@pytest.mark.parametrize(
    ("sql", "exact"),
    [
        (
            "SELECT COUNT(*) FROM users WHERE user_id IN "
            "(SELECT user_id FROM prompts WHERE tokens_in > 3000)",
            "SELECT COUNT(*) FROM users WHERE user_id IN "
            "(SELECT user_id FROM prompts WHERE tokens_in > 3000)",
        ),
        (
            "SELECT COUNT(*) FROM users u WHERE NOT EXISTS "
            "(SELECT 1 FROM tickets t WHERE t.user_id = u.user_id AND t.category = 'bug')",
            "SELECT COUNT(*) FROM users WHERE user_id NOT IN "
            "(SELECT user_id FROM tickets WHERE category = 'bug')",
        ),
        (
            "SELECT COUNT(*) FROM users WHERE user_id NOT IN (SELECT user_id FROM tickets)",
            "SELECT COUNT(*) FROM users WHERE user_id NOT IN (SELECT user_id FROM tickets)",
        ),
    ],
)
def test_semi_joins_filter_people_by_their_own_rows(env, sql: str, exact: str) -> None:
    engine, truth = env
    row = truth.execute(exact).fetchone()
    assert row is not None
    # users has one row per person: the bounded core is the exact count.
    assert _core_count(engine, sql) == row[0]
    assert engine.run(QueryRequest(sql, epsilon=1.0)).rows


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        (
            "SELECT COUNT(*) FROM prompts WHERE user_id IN (SELECT ticket_id FROM tickets)",
            "person id",
        ),
        # (user_id IN (SELECT region FROM regions): a public subquery, folded to its
        # values since 2026-12-06 and refused as text compared with the id,
        # tests/proxy/test_public_subqueries.py)
        (
            "SELECT COUNT(*) FROM prompts WHERE user_id IN "
            "(SELECT user_id FROM tickets GROUP BY user_id HAVING COUNT(*) > 2)",
            "plain filter",
        ),
        (
            "SELECT COUNT(*) FROM prompts WHERE tokens_in IN (SELECT user_id FROM tickets)",
            "person id",
        ),
        # Clauses that let other people's rows decide whether a person's rows are kept:
        # QUALIFY and USING SAMPLE were answered (a probe, 2026-12-02).
        (
            "SELECT COUNT(*) FROM prompts p WHERE p.user_id IN "
            "(SELECT s.user_id FROM tickets s QUALIFY COUNT(*) OVER () >= 34)",
            "plain filter",
        ),
        (
            "SELECT COUNT(*) FROM users u WHERE u.user_id NOT IN "
            "(SELECT s.user_id FROM prompts s USING SAMPLE bernoulli(10%) REPEATABLE (7))",
            "plain filter",
        ),
        (
            "SELECT COUNT(*) FROM users u WHERE u.user_id IN "
            "(SELECT s.user_id FROM prompts s WINDOW w AS (PARTITION BY s.model))",
            "plain filter",
        ),
        (
            "SELECT COUNT(*) FROM prompts p WHERE p.user_id IN (WITH tickets AS "
            "(SELECT z.user_id FROM main.tickets z LIMIT 100000) SELECT tickets.user_id "
            "FROM tickets)",
            "start of the query",
        ),
        # two columns in the subquery: a 500 (an unpacking error) before
        (
            "SELECT COUNT(*) FROM users u WHERE u.user_id IN "
            "(SELECT s.user_id, s.model FROM prompts s)",
            "person id alone",
        ),
        # EXISTS with a LIMIT or GROUP BY was answered as a plain EXISTS (the clause
        # dropped): now refused as it stands.
        (
            "SELECT COUNT(*) FROM prompts p WHERE EXISTS "
            "(SELECT 1 FROM tickets s WHERE s.user_id = p.user_id LIMIT 0)",
            "EXISTS",
        ),
        (
            "SELECT COUNT(*) FROM prompts p WHERE EXISTS (SELECT 1 FROM tickets s "
            "WHERE s.user_id = p.user_id GROUP BY s.user_id HAVING COUNT(*) > 1000)",
            "EXISTS",
        ),
    ],
)
def test_other_subqueries_are_refused_before_any_charge(env, sql: str, fragment: str) -> None:
    engine, _ = env
    with pytest.raises(DPSQLError) as info:
        engine.prepare(QueryRequest(sql))
    assert info.value.code == "unsupported_sql" and fragment in info.value.message


def test_the_hint_for_two_many_row_tables_works(env) -> None:
    engine, _ = env
    with pytest.raises(DPSQLError) as info:
        engine.prepare(
            QueryRequest(
                "SELECT p.model, COUNT(*) FROM prompts p JOIN tickets t "
                "ON p.user_id = t.user_id GROUP BY p.model"
            )
        )
    assert "WHERE user_id IN (SELECT user_id FROM" in info.value.hint
    rewritten = (
        "SELECT model, COUNT(*) FROM prompts WHERE user_id IN "
        "(SELECT user_id FROM tickets) GROUP BY model"
    )
    assert engine.run(QueryRequest(rewritten, epsilon=1.0)).rows
