"""Refusals name what the analyst wrote, and say what is not answered (a probe,
2026-12-06: sqlglot's class names IGNORENULLS, RAWSTRING or DATEFROMPARTS, rewritten core
text with TRY and clamps, a window over rows called a missing aggregate). Each case here
failed so; the dollar-quoted string and hour(x) were refused and are answered now."""

from __future__ import annotations

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest


@pytest.mark.parametrize(
    ("sql", "said", "unsaid"),
    [
        ("SELECT any_value(model) AS m, COUNT(*) AS n FROM prompts", "ANY_VALUE(model)", "IGNORE"),
        (
            "SELECT make_date(year(ts), month(ts), 1) AS m, COUNT(*) AS n FROM prompts GROUP BY 1",
            "MAKE_DATE(",
            "DATEFROMPARTS",
        ),
        ("SELECT COUNT(*) AS n FROM prompts WHERE epoch(ts) > 5", "EPOCH(ts)", "TIMETOUNIX"),
        (
            "SELECT regexp_extract(model, '^(.)', 1) AS k, COUNT(*) AS n FROM prompts GROUP BY 1",
            "REGEXP_EXTRACT(model",
            "t0.",
        ),
        ("SELECT SUM(EXTRACT(year FROM ts)) AS s FROM prompts", "bounds of ts", "TRY("),
        ("SELECT SUM(tokens_in) OVER () AS s FROM prompts", "window functions over private", "t0."),
        ("SELECT model, tokens_in FROM prompts GROUP BY model", "column tokens_in appears", "t0."),
    ],
)
def test_a_refusal_names_what_was_written(
    small_demo: Engine, sql: str, said: str, unsaid: str
) -> None:
    spent = small_demo.ledger.history()
    with pytest.raises(DPSQLError) as refused:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert said in str(refused.value), str(refused.value)
    assert unsaid not in str(refused.value), str(refused.value)
    assert small_demo.ledger.history() == spent


def test_a_dollar_quoted_string_is_a_string(small_demo: Engine) -> None:
    quoted = small_demo.run(
        QueryRequest("SELECT COUNT(*) AS n FROM prompts WHERE model = $$small$$", epsilon=1e4)
    )
    plain = small_demo.run(
        QueryRequest("SELECT COUNT(*) AS n FROM prompts WHERE model = 'small'", epsilon=1e4)
    )
    assert abs(float(quoted.rows[0][0]) - float(plain.rows[0][0])) < 3


def test_hour_minute_and_second_are_their_extract(small_demo: Engine) -> None:
    sql = "SELECT {}(ts) AS h, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1"
    for part in ("hour", "minute", "second"):
        keys = [r[0] for r in small_demo.run(QueryRequest(sql.format(part), epsilon=1e4)).rows]
        extract = sql.replace("{}(ts)", f"EXTRACT({part} FROM ts)")
        assert keys == [r[0] for r in small_demo.run(QueryRequest(extract, epsilon=1e4)).rows]
