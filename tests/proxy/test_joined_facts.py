"""Per-person facts joined to the people's table on the person id (Looker's derived
tables, Tableau's FIXED, notebooks), with that table first or the facts as a CTE, are
read in the order the per-person anchor answers (proxy/joined_facts.py): the answer of
the per-person form written by hand. Refused before (a corpus of BI SQL, 2026-12-06)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

FACTS = "(SELECT user_id, COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts GROUP BY user_id)"
PUSHED = (
    "SELECT region, AVG(n) AS a, COUNT(*) AS users FROM (SELECT p.user_id, u.region, "
    "COUNT(*) AS n FROM prompts p JOIN users u ON u.user_id = p.user_id "
    "GROUP BY p.user_id, u.region) t GROUP BY region"
)


@pytest.mark.parametrize(
    "joined",
    [
        f"SELECT u.region, AVG(t.n) AS a, COUNT(*) AS users FROM users u JOIN {FACTS} t "
        "ON t.user_id = u.user_id GROUP BY u.region",
        f"SELECT region, AVG(n) AS a, COUNT(*) AS users FROM {FACTS} t JOIN users u "
        "ON u.user_id = t.user_id GROUP BY region",
        "WITH f AS (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY 1) SELECT "
        "users.region, AVG(f.n) AS a, COUNT(*) AS users FROM users INNER JOIN f "
        "ON users.user_id = f.user_id GROUP BY 1",
    ],
    ids=["users_first", "facts_first_bare_names", "cte_positional"],
)
def test_joined_facts_answer_as_the_pushed_form(small_demo: Engine, joined: str) -> None:
    """The same answer as the per-person form written by hand, within both answers'
    stated noise (a large ε: the noise is small), and the same columns."""
    pushed = small_demo.run(QueryRequest(PUSHED, epsilon=3000.0))
    again = small_demo.run(QueryRequest(joined, epsilon=3000.0))
    assert again.columns == pushed.columns
    want = {row[0]: (row, ci) for row, ci in zip(pushed.rows, pushed.intervals, strict=True)}
    assert {row[0] for row in again.rows} == set(want)
    for row, ci in zip(again.rows, again.intervals, strict=True):
        other, other_ci = want[row[0]]
        for value, expected, w1, w2 in zip(row[1:], other[1:], ci[1:], other_ci[1:], strict=True):
            assert abs(value - expected) <= 3 * ((w1 or 0) + (w2 or 0)) + 1e-9, (row, other)


def test_filters_and_keys_from_the_table_are_read_inside(small_demo: Engine) -> None:
    sql = (
        f"SELECT u.plan, u.region, AVG(t.s) AS s, MAX(t.n) AS most FROM {FACTS} t "
        "JOIN users u ON t.user_id = u.user_id WHERE u.age > 30 GROUP BY u.plan, u.region"
    )
    result = small_demo.run(QueryRequest(sql, epsilon=5.0))
    assert result.columns == ("plan", "region", "s", "most") and result.rows


@pytest.mark.parametrize(
    "refused",
    [
        # people without facts would be added: not the per-person form
        f"SELECT u.region, AVG(t.n) AS a FROM users u LEFT JOIN {FACTS} t "
        "ON t.user_id = u.user_id GROUP BY u.region",
        # not on the person id
        f"SELECT u.region, AVG(t.n) AS a FROM users u JOIN {FACTS} t ON t.n = u.age "
        "GROUP BY u.region",
        # facts not grouped by the person alone
        "SELECT u.region, AVG(t.n) AS a FROM users u JOIN (SELECT user_id, model, COUNT(*) "
        "AS n FROM prompts GROUP BY user_id, model) t ON t.user_id = u.user_id "
        "GROUP BY u.region",
    ],
    ids=["left_from_people", "not_the_id", "two_keys"],
)
def test_other_joins_stay_refused_before_any_charge(small_demo: Engine, refused: str) -> None:
    before = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as error:
        small_demo.run(QueryRequest(refused, epsilon=1.0))
    assert error.value.code == "unsupported_sql"
    assert small_demo.ledger.history() == before
