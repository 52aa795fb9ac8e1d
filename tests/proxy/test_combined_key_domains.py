"""Keys over one domain column release only the combinations some value of it gives, and
an expression key only the values the WHERE clause keeps (proxy/domains.py).

An honest-answers probe (2026-12-06) found ``GROUP BY model, model`` released as nine
groups (three rows per model, with different counts), ``age // 10, age < 30`` with pairs
no age gives, and ``CAST(age AS VARCHAR)`` under ``age < 22`` as all 83 declared ages.
Each case here failed so."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

EPS = 1e4


def _rows(engine: Engine, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in engine.run(QueryRequest(sql, epsilon=EPS)).rows]


def test_a_repeated_key_is_one_group_per_value(small_demo: Engine) -> None:
    rows = _rows(small_demo, "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model, model")
    assert sorted(r[0] for r in rows) == ["large", "medium", "small"]
    single = dict(_rows(small_demo, "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"))
    for model, n in rows:
        assert abs(float(n) - float(single[model])) < 3  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "pairs"),
    [
        (
            "SELECT model, upper(model) AS u, COUNT(*) AS n FROM prompts GROUP BY 1, 2",
            {("large", "LARGE"), ("medium", "MEDIUM"), ("small", "SMALL")},
        ),
        (
            "SELECT age // 10 AS d, age < 30 AS young, COUNT(*) AS n FROM users GROUP BY 1, 2",
            {(1, True), (2, True)} | {(d, False) for d in range(3, 11)},
        ),
        (
            "SELECT age // 10 AS d, age < 30 AS young, COUNT(*) AS n FROM users "
            "WHERE age < 40 GROUP BY 1, 2",
            {(1, True), (2, True), (3, False)},
        ),
    ],
)
def test_keys_of_one_column_combine_as_its_values_do(
    small_demo: Engine, sql: str, pairs: set[tuple[object, object]]
) -> None:
    assert {r[:2] for r in _rows(small_demo, sql)} == pairs


def test_keys_of_different_columns_still_combine_freely(small_demo: Engine) -> None:
    rows = _rows(
        small_demo,
        "SELECT plan, plan = 'free' AS f, region, COUNT(*) AS n FROM users GROUP BY 1, 2, 3",
    )
    assert {(r[0], r[1]) for r in rows} == {("free", True), ("pro", False), ("team", False)}
    assert len(rows) == 3 * 4


def test_an_expression_key_takes_the_values_where_keeps(small_demo: Engine) -> None:
    rows = _rows(
        small_demo,
        "SELECT CAST(age AS VARCHAR) AS a, COUNT(*) AS n FROM users WHERE age < 22 GROUP BY 1",
    )
    assert sorted(r[0] for r in rows) == ["18", "19", "20", "21"]  # type: ignore[type-var]


def test_a_key_from_declared_bounds_says_rows_beyond_them_are_in_no_group(
    small_demo: Engine,
) -> None:
    # tokens_in // 1000 under bounds [0, 1000] left out three groups of larger values with
    # no word of the bounds (the same probe); the note names the column and its bounds
    answer = small_demo.run(
        QueryRequest("SELECT age // 10 AS d, COUNT(*) AS n FROM users GROUP BY 1", epsilon=EPS)
    )
    assert any("users.age outside [18, 100]" in w for w in answer.warnings), answer.warnings
    by_values = small_demo.run(
        QueryRequest("SELECT region, COUNT(*) AS n FROM users GROUP BY 1", epsilon=EPS)
    )
    assert not any("declared bounds" in w for w in by_values.warnings)


@pytest.fixture(scope="module")
def typed_domains(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """FLOAT and DATE columns with declared values (a review, 2026-12-06)."""
    import duckdb

    from proxy.policy import parse_policy
    from tests.policies import users_policy

    folder = tmp_path_factory.mktemp("typed-domains")
    db = folder / "f.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE ev (user_id BIGINT, score FLOAT, day DATE)")
        con.execute(
            "INSERT INTO ev SELECT i, CASE WHEN i % 2 = 0 THEN 0.1 ELSE 0.5 END, "
            "CASE WHEN i % 2 = 0 THEN DATE '2024-01-01' ELSE DATE '2024-02-01' END "
            "FROM range(1, 2001) t(i)"
        )
    text = users_policy(
        """
[tables.ev]
population = "users"
unit = "user_id"
max_groups = 1
max_rows_per_group = 1
columns.score = {{ values = [0.1, 0.5] }}
columns.day = {{ values = ["2024-01-01", "2024-02-01"] }}
"""
    )
    engine = Engine(parse_policy(text.format(db=db, folder=folder), base_dir=folder))
    yield engine
    engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        # a FLOAT's declared 0.1 is not the 0.1 of the text: joined, pinned or narrowed
        # by it, the group of 1,000 rows was dropped
        "SELECT score, COUNT(*) AS n FROM ev GROUP BY score, score * 2",
        "SELECT score, COUNT(*) AS n FROM ev WHERE score <= 0.1 GROUP BY score",
        "SELECT score, COUNT(*) AS n FROM ev WHERE score = 0.1 GROUP BY score",
        # a DATE key came back from the engine as a timestamp no domain date equals:
        # every group answered 0
        "SELECT day, COUNT(*) AS n FROM ev GROUP BY day",
        "SELECT day, day AS d, COUNT(*) AS n FROM ev GROUP BY day, day",
    ],
)
def test_inexact_and_dated_domains_keep_their_groups(typed_domains: Engine, sql: str) -> None:
    rows = typed_domains.run(QueryRequest(sql, epsilon=1000.0)).rows
    counts = sorted(float(r[-1]) for r in rows)
    assert counts[-1] > 990, rows  # the group of 1,000 rows is there, near its count
