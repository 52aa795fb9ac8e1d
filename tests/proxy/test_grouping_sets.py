"""GROUP BY ROLLUP / CUBE / GROUPING SETS (proxy/grouping_sets.py): the finest grouping
released once, the subtotals summed from its cells by the outer layer (free), each with
the interval its sum of noisy cells has. Refused before (the BI corpus's R7); and the
outer layer's intervals matched a grouped outer query's rows by their non-numeric
values, which pooled the rows of a numeric key and dropped a row's intervals when one
of its cells was NULL (found while building this, 2026-12-06)."""

from __future__ import annotations

import math

import pytest
import sqlglot

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.grouping_sets import as_cells
from proxy.request import QueryRequest


def _cells(sql: str) -> str | None:
    out = as_cells(sqlglot.parse_one(sql, read="duckdb"))
    return None if out is None else out.sql(dialect="duckdb")


def test_the_finest_grouping_is_the_inner_query():
    assert _cells(
        "SELECT model, flagged, COUNT(*) AS n, AVG(tokens_in) AS a FROM prompts "
        "WHERE tokens_in > 5 GROUP BY CUBE (model, flagged) ORDER BY n DESC LIMIT 5"
    ) == (
        'SELECT "model" AS "model", "flagged" AS "flagged", SUM("n") AS "n", '
        'SUM("a (sum)") / NULLIF(SUM("a (count)"), 0) AS "a" FROM (SELECT model AS "model", '
        'flagged AS "flagged", COUNT(*) AS "n", SUM(tokens_in) AS "a (sum)", '
        'COUNT(tokens_in) AS "a (count)" FROM prompts WHERE tokens_in > 5 '
        "GROUP BY model, flagged) AS __cells "
        'GROUP BY CUBE ("model", "flagged") ORDER BY n DESC LIMIT 5'
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT model, COUNT(*) FROM prompts GROUP BY model",  # no grouping sets
        "SELECT model, COUNT(DISTINCT user_id) FROM prompts GROUP BY ROLLUP (model)",
        "SELECT model, MIN(tokens_in) FROM prompts GROUP BY ROLLUP (model)",
        "SELECT model, COUNT(*) FROM prompts GROUP BY ROLLUP (model) HAVING COUNT(*) > 5",
        "SELECT model, GROUPING(model), COUNT(*) FROM prompts GROUP BY ROLLUP (model)",
        # an alias that is also a column's name elsewhere in the query: which one it names
        # is the engine's to say, so it is left as written
        "SELECT date_trunc('month', ts) AS ts, COUNT(*) FROM prompts GROUP BY ROLLUP (ts)",
        "SELECT model, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (2)",  # an aggregate's
        "SELECT model, COUNT(*) * 2 FROM prompts GROUP BY ROLLUP (model)",
        "WITH p AS (SELECT * FROM prompts) SELECT model, COUNT(*) FROM p GROUP BY ROLLUP (model)",
    ],
)
def test_what_cells_cannot_add_up_is_left_as_written(sql: str):
    assert _cells(sql) is None


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        (
            "SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (1)",
            "SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (model)",
        ),
        (
            "SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (m)",
            "SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (model)",
        ),
        (
            "SELECT date_trunc('month', ts) AS mon, model, SUM(tokens_in) AS s FROM prompts "
            "GROUP BY CUBE (mon, 2)",
            "SELECT date_trunc('month', ts) AS mon, model, SUM(tokens_in) AS s FROM prompts "
            "GROUP BY CUBE (date_trunc('month', ts), model)",
        ),
        (
            "SELECT model AS m, flagged AS f, COUNT(*) AS n FROM prompts "
            "GROUP BY GROUPING SETS ((m, f), (m), ())",
            "SELECT model AS m, flagged AS f, COUNT(*) AS n FROM prompts "
            "GROUP BY GROUPING SETS ((model, flagged), (model), ())",
        ),
    ],
)
def test_positions_and_aliases_in_grouping_sets_name_the_select_items(written: str, meant: str):
    # (refused before, as "ROLLUP (1) is not allowed in GROUP BY")
    assert _cells(written) is not None
    assert _cells(written) == _cells(meant)


def _events(engine: Engine) -> int:
    return len(engine.ledger.history(limit=10**6))


def test_subtotals_are_sums_of_the_released_cells_charged_once(small_demo: Engine):
    cells = small_demo.run(
        QueryRequest(
            "SELECT model, flagged, COUNT(*) AS n FROM prompts GROUP BY model, flagged",
            epsilon=50.0,
        )
    )
    before = _events(small_demo)
    rollup = small_demo.run(
        QueryRequest(
            "SELECT model, flagged, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (model, flagged)",
            epsilon=50.0,
        )
    )
    # the same release (replayed free), its cells and their sums
    assert rollup.privacy.cached and rollup.privacy.charge_id == cells.privacy.charge_id
    assert _events(small_demo) == before + 1
    by_cell = {(m, f): n for m, f, n in cells.rows}
    got = {
        (m, f): (n, i) for (m, f, n), (_, _, i) in zip(rollup.rows, rollup.intervals, strict=True)
    }
    models = {m for m, _ in by_cell}
    for model in models:
        total, width = got[(model, None)]
        assert total == sum(n for (m, _), n in by_cell.items() if m == model)
        assert width is not None and width > got[(model, False)][1]
    grand, grand_width = got[(None, None)]
    assert grand == sum(by_cell.values())
    # a sum of k independent noisy cells: about sqrt(k) times one cell's half-width
    one = got[(next(iter(models)), False)][1]
    assert grand_width == pytest.approx(one * math.sqrt(len(by_cell)), rel=0.25)
    assert ("large", True) in got and got[("large", True)][1] is not None


def test_what_is_not_rewritten_is_refused_before_any_charge(small_demo: Engine):
    before = _events(small_demo)
    with pytest.raises(DPSQLError) as info:
        small_demo.run(
            QueryRequest(
                "SELECT model, COUNT(DISTINCT user_id) FROM prompts GROUP BY ROLLUP (model)",
                epsilon=1.0,
            )
        )
    assert info.value.code == "unsupported_sql"
    # the hint says what grouping sets are answered with (it said "use comparisons,
    # arithmetic, CASE, string and date functions")
    assert "COUNT" in info.value.hint and "ROLLUP" in info.value.message
    assert _events(small_demo) == before


def test_a_numeric_outer_key_carries_no_interval_and_each_row_its_own(small_demo: Engine):
    result = small_demo.run(
        QueryRequest(
            "SELECT CAST(EXTRACT(year FROM m) AS INT) AS y, SUM(n) AS n FROM (SELECT "
            "date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m) t "
            "GROUP BY y ORDER BY y",
            epsilon=50.0,
        )
    )
    assert len(result.rows) >= 3
    for key_width, n_width in result.intervals:
        assert key_width is None  # a key is the same in every simulated copy
        assert n_width is not None
    widths = [w for _, w in result.intervals]
    # before: every year's width was the spread of all years pooled, the same for each
    assert max(widths) < 3 * min(widths)


def test_an_alias_the_order_by_reads_is_still_the_select_item(small_demo: Engine):
    out = _cells("SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (m) ORDER BY m")
    assert out is not None and "GROUP BY model" in out
    answer = small_demo.run(
        QueryRequest(
            "SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (1) ORDER BY m",
            epsilon=50.0,
        )
    )
    assert answer.columns == ("m", "n") and (None,) in {r[:1] for r in answer.rows}


@pytest.mark.parametrize(
    "sql",
    [
        # `flagged` is a column of prompts: SQL's GROUP BY reads the column before the
        # alias (DuckDB then refuses `model` as ungrouped, and so does dpsql's GROUP BY
        # flagged); inside ROLLUP the alias was read, and the query answered by model.
        "SELECT model AS flagged, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (flagged)",
        "SELECT COUNT(*) AS n, model AS flagged FROM prompts GROUP BY CUBE (flagged)",
        # a FROM subquery's output column likewise
        "SELECT model AS f, COUNT(*) AS n FROM (SELECT model, flagged AS f FROM prompts) t "
        "GROUP BY ROLLUP (f)",
    ],
)
def test_an_alias_that_is_also_a_source_column_names_the_column(small_demo: Engine, sql: str):
    before = _events(small_demo)
    with pytest.raises(DPSQLError) as info:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert info.value.code in ("unsupported_sql", "bad_request")
    assert _events(small_demo) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT CAST(EXTRACT(year FROM m) AS INT) AS y, SUM(n) AS n FROM (SELECT "
        "date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m) t GROUP BY y",
        "SELECT CAST(flagged AS INT) AS fl, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (fl)",
    ],
)
def test_a_grouped_outer_querys_key_is_not_called_imprecise(small_demo: Engine, sql: str):
    # A key has no interval by design (the same in every copy); every numeric key's
    # column was said to have values with no interval ("the outer query fails near the
    # released values ... treat them as imprecise"), on every ROLLUP of a numeric key.
    result = small_demo.run(QueryRequest(sql, epsilon=50.0))
    key = result.columns[0]
    assert all(w[0] is None for w in result.intervals)
    assert not [w for w in result.warnings if f"column {key!r}" in w]
    assert all(w[1] is not None for w in result.intervals)


def test_a_key_over_noisy_values_still_says_it_has_no_interval(small_demo: Engine):
    result = small_demo.run(
        QueryRequest(
            "SELECT n // 100 AS b, COUNT(*) AS k FROM (SELECT model, COUNT(*) AS n "
            "FROM prompts GROUP BY model) t GROUP BY b",
            epsilon=50.0,
        )
    )
    assert [w for w in result.warnings if "column 'b' have no interval" in w]


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        (
            "SELECT model, flagged, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (model, flagged) "
            "ORDER BY 1, 2 DESC",
            "SELECT model, flagged, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (model, flagged) "
            'ORDER BY "model", "flagged" DESC',
        ),
        (
            "SELECT model AS m, flagged AS f, COUNT(*) AS n FROM prompts GROUP BY 1, ROLLUP (2)",
            "SELECT model AS m, flagged AS f, COUNT(*) AS n FROM prompts "
            "GROUP BY model, ROLLUP (flagged)",
        ),
        (
            "SELECT model AS m, flagged AS f, COUNT(*) AS n FROM prompts GROUP BY m, CUBE (f)",
            "SELECT model AS m, flagged AS f, COUNT(*) AS n FROM prompts "
            "GROUP BY model, CUBE (flagged)",
        ),
    ],
)
def test_positions_and_aliases_beside_grouping_sets_name_the_select_items(
    written: str, meant: str
):
    # (refused: ORDER BY 1 and a plain key's position or alias beside a ROLLUP, where
    # the same key inside it was answered)
    assert _cells(written) is not None
    assert _cells(written) == _cells(meant)


def test_an_avg_s_cells_never_take_a_name_already_taken():
    # SUM(income) AS "a (sum)" took its name; AVG(age) AS a then named its own sum's cell
    # "a (sum)" too, and the subtotal of "a (sum)" showed the sum of ages
    out = as_cells(
        sqlglot.parse_one(
            'SELECT model, SUM(tokens_out) AS "a (sum)", COUNT(*) AS "a (count)", '
            "AVG(tokens_in) AS a FROM prompts GROUP BY ROLLUP (model)",
            read="duckdb",
        )
    )
    assert out is not None
    inner = out.find(sqlglot.exp.Subquery).this
    names = [e.alias for e in inner.expressions]
    assert len(names) == len(set(names)), names
