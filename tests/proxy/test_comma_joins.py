"""A comma join is answered as the inner join its WHERE equalities make
(proxy/comma_joins.py): every spelling was refused with "must be joined on the person
id" although it was (an honest-answers probe, 2026-12-06)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

EPS = 1e4

SAME = [
    (
        "SELECT COUNT(*) AS n FROM prompts p, users u WHERE p.user_id = u.user_id",
        "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id",
    ),
    (
        "SELECT u.region, SUM(p.tokens_in) AS s FROM users u, prompts p "
        "WHERE u.user_id = p.user_id AND u.plan = 'pro' GROUP BY 1 ORDER BY 1",
        "SELECT u.region, SUM(p.tokens_in) AS s FROM users u JOIN prompts p "
        "ON u.user_id = p.user_id WHERE u.plan = 'pro' GROUP BY 1 ORDER BY 1",
    ),
    (
        "SELECT COUNT(*) AS n FROM prompts, users, regions WHERE users.plan = 'pro' AND "
        "(prompts.user_id = users.user_id) AND regions.region = users.region",
        "SELECT COUNT(*) AS n FROM prompts JOIN users ON prompts.user_id = users.user_id "
        "JOIN regions ON regions.region = users.region WHERE users.plan = 'pro'",
    ),
    (
        "SELECT r.name, COUNT(*) AS n FROM users u, regions r WHERE u.region = r.region "
        "GROUP BY 1 ORDER BY 1",
        "SELECT r.name, COUNT(*) AS n FROM users u JOIN regions r ON u.region = r.region "
        "GROUP BY 1 ORDER BY 1",
    ),
]


@pytest.mark.parametrize(("comma", "joined"), SAME)
def test_a_comma_join_is_its_inner_join(small_demo: Engine, comma: str, joined: str) -> None:
    mine = small_demo.run(QueryRequest(comma, epsilon=EPS))
    theirs = small_demo.run(QueryRequest(joined, epsilon=EPS))
    assert len(mine.rows) == len(theirs.rows) > 0
    for a, b in zip(mine.rows, theirs.rows, strict=True):
        assert a[:-1] == b[:-1]
        assert abs(float(a[-1]) - float(b[-1])) < 3


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts p, users u",
        "SELECT COUNT(*) AS n FROM prompts p, users u WHERE p.tokens_in = u.age",
        "SELECT COUNT(*) AS n FROM prompts p, users u WHERE p.user_id = u.user_id + 1",
    ],
)
def test_a_comma_join_not_on_the_person_is_refused_before_any_charge(
    small_demo: Engine, sql: str
) -> None:
    spent = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert "joined on the person id" in str(refused.value)
    assert small_demo.ledger.history() == spent
