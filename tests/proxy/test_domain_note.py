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
