"""DuckDB's ``GROUP BY ALL`` is ``GROUP BY`` the select items that hold a column and no
aggregate or window (proxy/spellings.py), and ``ORDER BY ALL`` is ``ORDER BY`` every item. It was refused with a message naming a column
that is grouped (an answer oracle, 2026-12-05); it is now the same release as the
positional form, so either spelling after the other is a free replay."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest


@pytest.mark.parametrize(
    ("by_all", "explicit"),
    [
        (
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY ALL",
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model",
        ),
        # a constant and a window are not grouped; an expression of columns is
        (
            "SELECT model, 1 AS one, tokens_in > 1000 AS big, COUNT(*) AS n, "
            "RANK() OVER (ORDER BY COUNT(*)) AS r FROM prompts GROUP BY ALL",
            "SELECT model, 1 AS one, tokens_in > 1000 AS big, COUNT(*) AS n, "
            "RANK() OVER (ORDER BY COUNT(*)) AS r FROM prompts GROUP BY 1, 3",
        ),
        # nothing to group: one row over everything
        ("SELECT COUNT(*) AS n FROM prompts GROUP BY ALL", "SELECT COUNT(*) AS n FROM prompts"),
        # in a per-person subquery
        (
            "SELECT AVG(n) AS m FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY ALL) t",
            "SELECT AVG(n) AS m FROM (SELECT user_id, COUNT(*) AS n FROM prompts "
            "GROUP BY user_id) t",
        ),
    ],
    ids=["key", "constant_and_window", "no_key", "per_person"],
)
def test_group_by_all_is_the_explicit_release(
    small_demo: Engine, by_all: str, explicit: str
) -> None:
    first = small_demo.run(QueryRequest(explicit, epsilon=1.0))
    again = small_demo.run(QueryRequest(by_all, epsilon=1.0))
    assert not first.privacy.cached and again.privacy.cached
    assert again.rows == first.rows and again.cache_key == first.cache_key


def test_an_ungrouped_column_under_all_is_refused_before_any_charge(small_demo: Engine) -> None:
    """``SELECT *`` stays as written, and a column beside an aggregate in one item is not
    grouped: both are refused as an ungrouped column is, naming it."""
    spent = small_demo.ledger.history()
    for sql in (
        "SELECT *, COUNT(*) AS n FROM prompts GROUP BY ALL",
        "SELECT model, COUNT(*) + tokens_in AS n FROM prompts GROUP BY ALL",
    ):
        with pytest.raises(DPSQLError) as refused:
            small_demo.run(QueryRequest(sql, epsilon=1.0))
        assert refused.value.code in ("unsupported_sql", "bad_request")
        assert "without an aggregate" in str(refused.value)
    assert small_demo.ledger.history() == spent


@pytest.mark.parametrize(
    ("by_all", "explicit"),
    [
        (
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY ALL",
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY 1, 2",
        ),
        (
            "SELECT year(ts) AS y, month(ts) AS m, COUNT(*) AS n FROM prompts "
            "GROUP BY ALL ORDER BY ALL DESC",
            "SELECT year(ts) AS y, month(ts) AS m, COUNT(*) AS n FROM prompts "
            "GROUP BY 1, 2 ORDER BY 1 DESC, 2 DESC, 3 DESC",
        ),
    ],
    ids=["asc", "desc_with_group_by_all"],
)
def test_order_by_all_orders_by_every_item(
    small_demo: Engine, by_all: str, explicit: str
) -> None:
    """``ORDER BY ALL`` failed in DuckDB's parser as the outer layer's text (a corpus of
    BI and notebook SQL, 2026-12-06); it is the positions of every item, left to right."""
    first = small_demo.run(QueryRequest(explicit, epsilon=1.0))
    again = small_demo.run(QueryRequest(by_all, epsilon=1.0))
    assert again.privacy.cached and again.rows == first.rows
    descending = "DESC" in explicit
    assert again.rows == sorted(again.rows, reverse=descending)
