"""A public domain releases exactly its declared values: rows whose key is NULL or not
one of them are in no group. Whether such rows exist is the data's, so every
public-domain answer says so, and no other answer does (an answer oracle, 2026-12-05:
138 of 4,000 prompts with a NULL model were left out of ``GROUP BY model`` with no
word)."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

NOTE = "rows whose key is NULL or not one of them"


@pytest.mark.parametrize(
    ("sql", "noted"),
    [
        ("SELECT sex, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex", True),
        ("SELECT educ, AVG(age) AS a FROM PUMS.PUMS WHERE educ IN (9, 13) GROUP BY educ", True),
        ("SELECT race, COUNT(*) AS n FROM PUMS.PUMS GROUP BY race", False),  # selection
        ("SELECT COUNT(*) AS n FROM PUMS.PUMS", False),  # no key
    ],
)
def test_public_domain_answers_say_what_they_leave_out(
    pums_engine: Engine, sql: str, noted: bool
) -> None:
    answer = pums_engine.run(QueryRequest(sql, epsilon=1.0))
    assert any(NOTE in w for w in answer.warnings) == noted, answer.warnings
    # the same note on a repeat from the cache
    again = pums_engine.run(QueryRequest(sql, epsilon=1.0))
    assert again.privacy.cached and again.warnings == answer.warnings


def test_a_key_expression_releases_what_it_gives_for_null(small_demo: Engine) -> None:
    """``COALESCE(category, 'none')`` over a LEFT JOIN (how BI tools name NULL keys): the
    'none' group held most users and was dropped, the domain being the key over the
    declared values only (a corpus of BI SQL, 2026-12-06). What a key gives for NULL is
    public too; a NULL key stays out, as for a column."""
    sql = (
        "SELECT COALESCE(t.category, 'none') AS category, COUNT(*) AS users FROM users u "
        "LEFT JOIN tickets t ON t.user_id = u.user_id GROUP BY 1"
    )
    got = dict(small_demo.run(QueryRequest(sql, epsilon=50.0)).rows)
    exact = dict(
        small_demo.executor.evaluate(  # type: ignore[attr-defined]
            "SELECT COALESCE(t.category, 'none'), COUNT(*) FROM users u "
            "LEFT JOIN tickets t ON t.user_id = u.user_id GROUP BY 1"
        )
    )
    assert "none" in got and abs(got["none"] - exact["none"]) < 0.2 * exact["none"]
    plain = small_demo.run(QueryRequest("SELECT lower(model) AS m, COUNT(*) AS n FROM prompts GROUP BY 1", epsilon=5.0))
    assert None not in {m for m, _ in plain.rows}


@pytest.mark.parametrize(
    ("sql", "released"),
    [
        ("SELECT age, COUNT(*) AS n FROM PUMS.PUMS WHERE age BETWEEN 20 AND 30 GROUP BY age",
         set(range(20, 31))),
        ("SELECT sex, COUNT(*) AS n FROM PUMS.PUMS WHERE sex <> 0 GROUP BY sex", {1}),
        ("SELECT educ, COUNT(*) AS n FROM PUMS.PUMS WHERE educ >= 14 AND age > 30 GROUP BY educ",
         {14, 15, 16}),
        # a conjunct about another column, or under OR, narrows nothing
        ("SELECT sex, COUNT(*) AS n FROM PUMS.PUMS WHERE sex <> 0 OR age > 50 GROUP BY sex",
         {0, 1}),
    ],
    ids=["between", "not_equal", "with_another_conjunct", "under_or"],
)
def test_a_filter_on_the_key_alone_narrows_its_public_domain(
    pums_engine: Engine, sql: str, released: set[int]
) -> None:
    """``WHERE age BETWEEN 20 AND 30 GROUP BY age`` released all 101 declared ages, 90 as
    noisy zeros (and averages of nobody at the middle of the declared range): only IN
    and = narrowed a domain (a corpus of BI SQL, 2026-12-06). A conjunct about the key
    alone keeps the values it holds for, evaluated on the public values."""
    answer = pums_engine.run(QueryRequest(sql, epsilon=1.0))
    assert {row[0] for row in answer.rows} == released
