"""What another draw of the noise could have answered otherwise (proxy/unsettled.py).

A comparison with a noisy count, a CASE label over one, and the rows HAVING and
ORDER BY … LIMIT choose by noisy values had no interval and no word: HAVING kept a region
at 19,150 ± 5,790 and dropped one at 18,501 ± 5,790 against a cut-off of 19,000 (a
review, 2026-12-06). The rule stated: a cell or a row choice is unsettled when it comes
out the other way in at least 1 of 40 simulated draws of the noise, which for ``n > t`` is
when t lies within about 1.96 σ of n. Each test reads the release's own noisy values and
σ and checks the rule where it is clear-cut (below 1.5 σ: unsettled; beyond 2.5 σ: not).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from proxy import unsettled as U
from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.result import Result
from tests.proxy.conftest import demo_policy

BASE = "SELECT plan, {items} FROM prompts JOIN users USING (user_id) GROUP BY plan"
EPS = 1.0  # σ of a count about 55; the free plan's count is about 80 σ above the others


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, demo_db: Path):
    root = tmp_path_factory.mktemp("unsettled")
    db = root / "copy.duckdb"
    shutil.copy(demo_db, db)
    e = Engine(demo_policy(root, db))
    yield e
    e.close()


def _counts(engine: Engine) -> tuple[dict[str, float], float]:
    """The release's noisy count per plan and its σ (the queries below share it)."""
    r = engine.run(QueryRequest(BASE.format(items="COUNT(*) AS n"), epsilon=EPS))
    sigma = r.privacy.columns[1].noise_scale
    assert sigma is not None
    return {row[0]: float(row[1]) for row in r.rows}, sigma


def _run(engine: Engine, items: str, tail: str = "") -> Result:
    r = engine.run(QueryRequest(BASE.format(items=items) + tail, epsilon=EPS))
    assert r.privacy.cached, "the same release, read by another outer layer"
    return r


def _clear(distance: float, sigma: float) -> bool | None:
    """Whether a choice at ``distance`` from its cut-off must be unsettled (None: the
    band where the simulated draws decide)."""
    if abs(distance) < 1.5 * sigma:
        return True
    if abs(distance) > 2.5 * sigma:
        return False
    return None


def test_a_comparison_and_a_label_near_their_threshold_are_marked(engine: Engine) -> None:
    counts, sigma = _counts(engine)
    target = min(counts, key=counts.__getitem__)
    cut = counts[target] + 0.5 * sigma  # within the noise of one plan's count
    r = _run(
        engine,
        f"COUNT(*) > {cut} AS big, CASE WHEN COUNT(*) > {cut} THEN 'many' ELSE 'few' END "
        "AS size, COUNT(*) AS n",
    )
    marked = set(r.unsettled_cells)
    decided = 0
    for i, row in enumerate(r.rows):
        expect = _clear(counts[row[0]] - cut, sigma)
        if expect is None:
            continue
        decided += 1
        assert ((i, 1) in marked) is expect, (row, counts, sigma, marked)
        assert ((i, 2) in marked) is expect, (row, counts, sigma, marked)
        assert (i, 3) not in marked  # a number: its interval says it
    assert decided >= 2  # the target and the free plan, far above it
    words = [w for w in r.warnings if "could be otherwise" in w]
    assert len(words) == 2 and "'big'" in words[0] and "'size'" in words[1]
    # Far from every count, nothing is marked and nothing is said.
    far = max(counts.values()) + 40 * sigma
    clear = _run(engine, f"COUNT(*) > {far} AS big, COUNT(*) AS n")
    assert clear.unsettled_cells == () and not any("otherwise" in w for w in clear.warnings)


def test_a_null_a_condition_gives_near_its_threshold_is_marked(engine: Engine) -> None:
    counts, sigma = _counts(engine)
    target = max(counts, key=counts.__getitem__)
    cut = counts[target] - 0.3 * sigma  # the largest count passes it, barely
    r = _run(engine, f"CASE WHEN COUNT(*) < {cut} THEN COUNT(*) END AS small_n")
    row = next(i for i, row in enumerate(r.rows) if row[0] == target)
    assert r.rows[row][1] is None
    assert (row, 1) in r.unsettled_cells


def test_having_names_rows_near_its_cut_off(engine: Engine) -> None:
    counts, sigma = _counts(engine)
    ordered = sorted(counts, key=counts.__getitem__)
    cut = counts[ordered[1]] + 0.4 * sigma  # the second smallest is just left out
    r = _run(engine, "COUNT(*) AS n", f" HAVING COUNT(*) > {cut}")
    shown = {row[0] for row in r.rows}
    assert shown == {p for p, n in counts.items() if n > cut}
    for i, row in enumerate(r.rows):
        expect = _clear(counts[row[0]] - cut, sigma)
        if expect is not None:
            assert (i in r.unsettled_rows) is expect, (row, counts, sigma)
    words = [w for w in r.warnings if "rows shown were chosen by noisy values (HAVING)" in w]
    assert len(words) == 1
    hidden_near = sum(
        1 for p, n in counts.items() if p not in shown and _clear(n - cut, sigma)
    )
    assert f"{hidden_near} of the {len(counts) - len(shown)} rows left out" in words[0]


def test_order_by_limit_names_rows_near_the_cut_off(engine: Engine) -> None:
    counts, sigma = _counts(engine)
    ordered = sorted(counts, key=counts.__getitem__, reverse=True)
    r = _run(engine, "COUNT(*) AS n", " ORDER BY n DESC LIMIT 1")
    assert [row[0] for row in r.rows] == ordered[:1]
    # Two independently noised counts: their difference has σ·√2.
    gap = counts[ordered[0]] - counts[ordered[1]]
    expect = _clear(gap, sigma * 2**0.5)
    if expect is not None:
        assert (0 in r.unsettled_rows) is expect
        assert any("ORDER BY … LIMIT" in w for w in r.warnings) is expect
    # The free plan's count is far above the others at this ε: the top plan is settled.
    assert expect is False
    # The two smaller plans hold about as many prompts: the bottom one is decided by
    # the gap between them.
    low = _run(engine, "COUNT(*) AS n", " ORDER BY n LIMIT 1")
    bottom, next_up = sorted(counts.values())[:2]
    expect = _clear(next_up - bottom, sigma * 2**0.5)
    if expect is not None:
        assert (0 in low.unsettled_rows) is expect, (counts, sigma)


def test_replays_say_the_same(engine: Engine) -> None:
    counts, sigma = _counts(engine)
    cut = min(counts.values()) + 0.2 * sigma
    sql = BASE.format(items=f"COUNT(*) > {cut} AS big") + f" HAVING COUNT(*) > {cut - sigma}"
    first = engine.run(QueryRequest(sql, epsilon=EPS))
    again = engine.run(QueryRequest(sql, epsilon=EPS))
    assert first.unsettled_cells and first.unsettled_cells == again.unsettled_cells
    assert first.unsettled_rows == again.unsettled_rows and first.warnings == again.warnings


def test_plain_answers_simulate_nothing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No HAVING, no LIMIT, only numbers and keys: no copies are made (a miss pays
    nothing for this)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated")

    monkeypatch.setattr(U, "noisy_copies", refuse)
    r = engine.run(
        QueryRequest(BASE.format(items="COUNT(*) AS n, AVG(tokens_in) AS a"), epsilon=0.7)
    )
    assert r.unsettled_cells == () and r.unsettled_rows == ()


def test_a_simulation_that_fails_is_said_in_words(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broken")

    monkeypatch.setattr(U, "noisy_copies", broken)
    r = engine.run(
        QueryRequest(BASE.format(items="COUNT(*) AS n") + " HAVING COUNT(*) > 5", epsilon=0.9)
    )
    assert not r.privacy.cached and r.rows
    assert any("could not simulate how the noise moves them" in w for w in r.warnings)


def test_an_outer_query_over_an_answer_says_the_same(engine: Engine) -> None:
    """An outer query over an inner aggregate (proxy/nested.py): its WHERE on a noisy
    value and its comparisons get the same rule; a row such a WHERE keeps in only some
    simulated draws keeps its interval (it had none, and no word said so)."""
    counts, sigma = _counts(engine)
    ordered = sorted(counts, key=counts.__getitem__)
    cut = counts[ordered[0]] - 0.3 * sigma  # the smallest plan is kept, barely
    inner = BASE.format(items="COUNT(*) AS n")
    r = engine.run(
        QueryRequest(
            f"SELECT plan, n, n > {cut + 0.6 * sigma} AS big FROM ({inner}) AS s "
            f"WHERE n > {cut}",
            epsilon=EPS,
        )
    )
    assert r.privacy.cached
    assert {row[0] for row in r.rows} == set(counts)
    low = next(i for i, row in enumerate(r.rows) if row[0] == ordered[0])
    assert low in r.unsettled_rows and (low, 2) in r.unsettled_cells
    assert r.intervals[low][1] is not None and r.intervals[low][1] > 0
    top = next(i for i, row in enumerate(r.rows) if row[0] == ordered[-1])
    assert top not in r.unsettled_rows and (top, 2) not in r.unsettled_cells
    assert any("chosen by noisy values (the outer query's WHERE)" in w for w in r.warnings)
    assert any("'big' could be otherwise" in w for w in r.warnings)


def test_infinite_cells_are_said(pums_engine: Engine) -> None:
    """A ratio over a count shown as 0 is infinite: it has no interval and had no word
    (an honesty probe, 2026-12-06: 43 infinite cells in 20 answers)."""
    sql = "SELECT educ, SUM(married) * 1.0 / COUNT(*) AS mrate FROM PUMS.PUMS GROUP BY educ"
    for i in range(8):
        r = pums_engine.run(QueryRequest(sql, epsilon=0.3 + i * 1e-6))
        infinite = sum(
            1 for row in r.rows if isinstance(row[1], float) and not math.isfinite(row[1])
        )
        said = [w for w in r.warnings if "'mrate' are infinite" in w]
        assert bool(said) == bool(infinite), (infinite, r.warnings)
        if infinite:
            assert said[0].startswith(f"{infinite} of {len(r.rows)} values")
            return
    pytest.fail("no infinite cell in 8 answers")


def test_a_window_after_partition_selection_says_it_misses_the_dropped_groups(
    engine: Engine,
) -> None:
    """A share of the total over the groups partition selection kept: the dropped ones
    are in no value and no interval (an honesty probe saw 100% ± 0 for one month
    released alone, true share 16%)."""
    windowed = (
        "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n, "
        "100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS pct FROM prompts GROUP BY 1"
    )
    plain = "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY 1"
    said = [w for w in engine.run(QueryRequest(windowed, epsilon=0.5)).warnings]
    assert any("partition selection" in w and "reads only the groups shown" in w for w in said)
    plain_said = engine.run(QueryRequest(plain, epsilon=0.5)).warnings
    assert any("partition selection" in w for w in plain_said)
    assert not any("reads only the groups shown" in w for w in plain_said)


def test_an_outer_query_s_limit_over_an_answer_is_simulated(engine: Engine) -> None:
    """A BI tool's wrapper (``SELECT … FROM (<aggregate>) AS virtual_table ORDER BY n
    DESC LIMIT 1``): the rows a LIMIT over noisy values chooses, per simulated copy."""
    counts, sigma = _counts(engine)
    inner = BASE.format(items="COUNT(*) AS n")
    r = engine.run(
        QueryRequest(
            f"SELECT plan, n FROM ({inner}) AS virtual_table ORDER BY n LIMIT 1", epsilon=EPS
        )
    )
    assert r.privacy.cached and len(r.rows) == 1
    bottom, next_up = sorted(counts.values())[:2]
    expect = _clear(next_up - bottom, sigma * 2**0.5)
    if expect is not None:
        assert (0 in r.unsettled_rows) is expect, (counts, sigma)
        said = [w for w in r.warnings if "the outer query's ORDER BY … LIMIT" in w]
        assert bool(said) is expect
    top = engine.run(
        QueryRequest(
            f"SELECT plan, n FROM ({inner}) AS virtual_table ORDER BY n DESC LIMIT 1",
            epsilon=EPS,
        )
    )
    assert top.unsettled_rows == () and top.intervals[0][1] is not None


def test_a_bi_tool_s_long_limit_simulates_nothing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Superset appends LIMIT 10000 to every chart's query: a LIMIT at least as long as
    the answer chooses nothing and costs no simulation."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated")

    monkeypatch.setattr(U, "noisy_copies", refuse)
    r = engine.run(QueryRequest(BASE.format(items="COUNT(*) AS n") + " LIMIT 10000", epsilon=EPS))
    assert r.rows and r.unsettled_rows == () and not any("chosen by" in w for w in r.warnings)


def test_a_number_a_condition_could_make_null_is_marked(engine: Engine) -> None:
    """The mirror of a NULL that could be a number: a released number a CASE would
    have turned NULL under another draw (a review, 2026-12-06)."""
    counts, sigma = _counts(engine)
    target = min(counts, key=counts.__getitem__)
    cut = counts[target] - 0.3 * sigma  # the smallest count passes it, barely
    r = _run(engine, f"CASE WHEN COUNT(*) > {cut} THEN COUNT(*) END AS n_or_null")
    row = next(i for i, row in enumerate(r.rows) if row[0] == target)
    assert r.rows[row][1] is not None
    assert (row, 1) in r.unsettled_cells
    far = next(i for i, row in enumerate(r.rows) if row[0] == max(counts, key=counts.__getitem__))
    assert (far, 1) not in r.unsettled_cells


def test_rows_chosen_by_a_median_are_said_to_be_unsimulated(engine: Engine) -> None:
    """A HAVING on a DP median: its error is in ranks, not simulated; said in words
    (a review, 2026-12-06: silent)."""
    r = engine.run(
        QueryRequest(BASE.format(items="MEDIAN(tokens_in) AS m") + " HAVING MEDIAN(tokens_in) > 5",
                     epsilon=EPS)
    )
    assert any("by a DP median, quantile, MIN or MAX" in w for w in r.warnings)
    plain = engine.run(QueryRequest(BASE.format(items="MEDIAN(tokens_in) AS m"), epsilon=EPS))
    assert not any("by a DP median" in w for w in plain.warnings)


INNER = BASE.format(items="COUNT(*) AS n")


def test_a_star_over_an_answer_lines_up_with_its_copies(engine: Engine) -> None:
    """``SELECT *`` over an inner answer also read the hidden ``__row`` (and in the
    copies ``__rep``): keys were marked "?", the count had no interval, and
    ``SELECT *, expr`` showed ``__row`` and dropped ``expr`` (a review, 2026-12-06)."""
    for sql in (f"SELECT * FROM ({INNER}) AS s", f"SELECT s.* FROM ({INNER}) AS s"):
        r = engine.run(QueryRequest(sql, epsilon=EPS))
        assert r.columns == ("plan", "n") and r.unsettled_cells == ()
        assert all(w[0] is None and w[1] is not None and w[1] > 0 for w in r.intervals)
    r = engine.run(QueryRequest(f"SELECT *, n > 1 AS big FROM ({INNER}) AS s", epsilon=EPS))
    assert r.columns == ("plan", "n", "big")
    r = engine.run(QueryRequest(f"SELECT * EXCLUDE (plan) FROM ({INNER}) AS s", epsilon=EPS))
    _, sigma = _counts(engine)
    assert r.columns == ("n",) and all(w[0] < 3 * sigma for w in r.intervals)


def test_an_outer_group_by_ordinal_or_all_is_simulated(engine: Engine) -> None:
    counts, sigma = _counts(engine)
    low = min(counts.values())
    for group in ("GROUP BY 1", "GROUP BY ALL"):
        r = engine.run(
            QueryRequest(
                f"SELECT n > {low + 0.3 * sigma} AS big, COUNT(*) AS k FROM ({INNER}) AS s "
                f"{group}",
                epsilon=EPS,
            )
        )
        assert not any("could not run the outer query" in w for w in r.warnings), group
        assert r.unsettled_cells or r.unsettled_rows, (group, r.rows)


def test_an_order_by_expression_over_an_alias_is_simulated(engine: Engine) -> None:
    r = engine.run(QueryRequest(INNER + " ORDER BY n + 0 DESC LIMIT 1", epsilon=EPS))
    assert r.rows and not any("could not simulate" in w for w in r.warnings)


def test_decimals_over_an_answer_are_numbers(engine: Engine) -> None:
    _, sigma = _counts(engine)
    r = engine.run(
        QueryRequest(f"SELECT plan, CAST(n AS DECIMAL(12, 2)) AS d FROM ({INNER}) AS s",
                     epsilon=EPS)
    )
    assert r.unsettled_cells == ()
    assert all(w[1] is not None and 0 < w[1] < 3 * sigma for w in r.intervals)


def test_distinct_over_an_answer_keeps_distinct_rows(engine: Engine) -> None:
    counts, _ = _counts(engine)
    r = engine.run(
        QueryRequest(f"SELECT DISTINCT n > {min(counts.values())} AS big FROM ({INNER}) AS s",
                     epsilon=EPS)
    )
    assert sorted(row[0] for row in r.rows) == [False, True]


def test_an_outer_query_restates_the_inner_answer_s_doubts(engine: Engine) -> None:
    """The inner answer's words counted its own rows and columns ("1 of the 3 rows
    shown" under a one-row total, about a column not shown; a review, 2026-12-06)."""
    counts, sigma = _counts(engine)
    cut = min(counts.values()) - 0.2 * sigma
    r = engine.run(
        QueryRequest(
            f"SELECT SUM(n) AS total FROM ({INNER} HAVING COUNT(*) > {cut}) AS s", epsilon=EPS
        )
    )
    assert len(r.rows) == 1
    assert not any("rows shown could have been left out" in w for w in r.warnings)
    assert any("the inner answer's rows or values were chosen by noisy values" in w
               for w in r.warnings)


def test_a_median_read_by_an_outer_query_has_no_width(engine: Engine) -> None:
    """A DP median's error is in ranks and is not simulated: read by an outer query it
    showed ± 0 (a review, 2026-12-06)."""
    inner = BASE.format(items="MEDIAN(tokens_in) AS m, COUNT(*) AS n")
    r = engine.run(QueryRequest(f"SELECT plan, m, m + 1 AS m1, n FROM ({inner}) AS s",
                                epsilon=EPS))
    assert all(w[1] is None and w[2] is None and w[3] is not None for w in r.intervals)
    star = engine.run(QueryRequest(f"SELECT *, m * 2 AS m2 FROM ({inner}) AS s", epsilon=EPS))
    assert star.columns == ("plan", "m", "n", "m2")
    assert all(w[1] is None and w[3] is None and w[2] is not None for w in star.intervals)


def test_a_limit_among_ties_keeps_the_rows_its_copies_keep(engine: Engine) -> None:
    # Every group's z ties, so LIMIT 10 OFFSET 7 picks among ties. The copies rank ties
    # by the released row (key order): the shown rows must be the 8th to the 17th too.
    # DuckDB's top-N alone kept others (its heap's order, not the input's), and one of
    # them was then marked as a row the noise could leave out, which no noise can.
    sql = (
        "SELECT region, model, plan, COUNT(*) * 0 AS z FROM prompts "
        "JOIN users USING (user_id) GROUP BY region, model, plan"
    )
    every = engine.run(QueryRequest(sql, epsilon=EPS))
    assert len(every.rows) >= 24  # (DuckDB's heap reorders ties from 24 rows up)
    picked = engine.run(QueryRequest(sql + " ORDER BY z LIMIT 10 OFFSET 7", epsilon=EPS))
    assert picked.privacy.charge_id == every.privacy.charge_id  # the same release
    assert picked.rows == every.rows[7:17]
    assert picked.unsettled_rows == ()
