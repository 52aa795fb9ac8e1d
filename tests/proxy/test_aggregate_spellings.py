"""Aggregate spellings analysts and BI tools write, read as the forms dpsql answers
(proxy/spellings.py): each is the same release as its plain form, so asking one after
the other is a free replay. All were refused before (a corpus of BI and notebook SQL,
2026-12-06): ``FILTER (WHERE ...)`` in every position, ``DATE(ts)`` (Looker's date
dimension), ``NULLIF`` inside an aggregate ("the mean of the values that are not 0"),
``COUNT_IF`` and ``approx_count_distinct``."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest

SAME = [
    (
        "SELECT COUNT(*) FILTER (WHERE flagged) AS f, COUNT(*) AS n FROM prompts",
        "SELECT COUNT(CASE WHEN flagged THEN 1 END) AS f, COUNT(*) AS n FROM prompts",
    ),
    (
        "SELECT model, AVG(tokens_in) FILTER (WHERE NOT flagged) AS a, "
        "SUM(tokens_in) FILTER (WHERE tokens_in > 100) AS s FROM prompts GROUP BY model",
        "SELECT model, AVG(CASE WHEN NOT flagged THEN tokens_in END) AS a, "
        "SUM(CASE WHEN tokens_in > 100 THEN tokens_in END) AS s FROM prompts GROUP BY model",
    ),
    (
        "SELECT COUNT(DISTINCT model) FILTER (WHERE tokens_in > 500) AS m FROM prompts",
        "SELECT COUNT(DISTINCT CASE WHEN tokens_in > 500 THEN model END) AS m FROM prompts",
    ),
    (
        "SELECT model, COUNT(*) * 100.0 / SUM(COUNT(*)) FILTER (WHERE model <> 'small') "
        "OVER () AS pct FROM prompts GROUP BY model",
        "SELECT model, COUNT(*) * 100.0 / SUM(CASE WHEN model <> 'small' THEN COUNT(*) END) "
        "OVER () AS pct FROM prompts GROUP BY model",
    ),
    (
        "SELECT COUNT_IF(flagged) AS c FROM prompts",
        "SELECT COUNT(CASE WHEN flagged THEN 1 END) AS c FROM prompts",
    ),
    (
        "SELECT approx_count_distinct(model) AS c FROM prompts",
        "SELECT COUNT(DISTINCT model) AS c FROM prompts",
    ),
    (
        "SELECT DATE(ts) AS d, COUNT(*) AS n FROM prompts GROUP BY 1",
        "SELECT CAST(ts AS DATE) AS d, COUNT(*) AS n FROM prompts GROUP BY 1",
    ),
    (
        "SELECT AVG(NULLIF(tokens_in, 0)) AS a FROM prompts",
        "SELECT AVG(CASE WHEN tokens_in = 0 THEN NULL ELSE tokens_in END) AS a FROM prompts",
    ),
]


@pytest.mark.parametrize(("spelled", "plain"), SAME, ids=[f"s{i}" for i in range(len(SAME))])
def test_a_spelling_is_the_release_of_its_plain_form(
    small_demo: Engine, spelled: str, plain: str
) -> None:
    first = small_demo.run(QueryRequest(plain, epsilon=20.0))
    again = small_demo.run(QueryRequest(spelled, epsilon=20.0))
    assert not first.privacy.cached and again.privacy.cached
    assert again.rows == first.rows and again.cache_key == first.cache_key


def test_filtered_counts_are_near_the_exact_ones(small_demo: Engine) -> None:
    """FILTER drops the rows whose condition is not true (NULL too): the answer at a large
    ε is the filtered count of the bounded rows (each person's first 10), within its
    stated interval."""
    sql = "SELECT COUNT(*) FILTER (WHERE tokens_in > 500) AS big, COUNT(*) AS n FROM prompts"
    result = small_demo.run(QueryRequest(sql, epsilon=5000.0))
    # A person's kept rows are 10 of theirs picked by a secret hash: between these.
    low, high, n = small_demo.executor.evaluate(  # type: ignore[attr-defined]
        "SELECT SUM(GREATEST(b - GREATEST(n - 10, 0), 0)), SUM(LEAST(b, 10)), "
        "SUM(LEAST(n, 10)) FROM (SELECT user_id, COUNT(*) FILTER (WHERE tokens_in > 500) "
        "AS b, COUNT(*) AS n FROM prompts GROUP BY user_id)"
    )[0]
    (big, count), (big_half, count_half) = result.rows[0], result.intervals[0]
    assert big_half is not None and count_half is not None
    assert low - 3 * big_half <= big <= high + 3 * big_half
    assert abs(count - n) <= 3 * count_half
    assert high < n  # the filter removed rows


def test_fetch_first_rows_only_is_limit(small_demo: Engine) -> None:
    """The SQL standard's row limit (Looker writes it) was refused as a LIMIT that is not
    an integer literal (a corpus of BI SQL, 2026-12-06)."""
    limited = small_demo.run(
        QueryRequest(
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 2 DESC LIMIT 2",
            epsilon=3.0,
            dialect="postgres",
        )
    )
    fetched = small_demo.run(
        QueryRequest(
            "SELECT model, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 2 DESC "
            "FETCH NEXT 2 ROWS ONLY",
            epsilon=3.0,
            dialect="postgres",
        )
    )
    assert fetched.privacy.cached and fetched.rows == limited.rows and len(fetched.rows) == 2
