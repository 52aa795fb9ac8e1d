"""Neighbour tests of the quantile histograms (issue #13 §1): MEDIAN, quantiles, MIN and
MAX on D and D minus one person (the heaviest, and an ordinary one with rows everywhere),
the same secret seed on both sides.

The harness (tests/reliability/neighbours.py, check (d)) compares each argument's
per-group histogram as the release step reads it: it must move by at most C in L1 per
group and in at most K groups; the plans must be identical, nothing may fail after
planning (the release step draws on both sides), and every noised statistic of the same
query keeps its declared sensitivity. The harness's teeth: with bounding switched off
the heaviest person moves a histogram by all their rows and touches every week.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed
from tests.reliability.conftest import fz_demo_policy, fz_pums_policy
from tests.reliability.neighbours import (
    CHOICES,
    NeighbourPair,
    Removal,
    ViolationKind,
    build_neighbours,
)

TIMEOUT_S = 4.0

DEMO = (
    "SELECT MEDIAN(age) AS m FROM users",
    "SELECT region, MEDIAN(age), MIN(age), MAX(age) FROM users GROUP BY region",
    "SELECT model, MEDIAN(tokens_in), QUANTILE_CONT(latency_ms, 0.9) FROM prompts GROUP BY model",
    "SELECT date_trunc('week', ts) AS w, MEDIAN(tokens_out), COUNT(*) FROM prompts GROUP BY w",
    "SELECT MIN(tokens_in), MAX(tokens_in), COUNT(*) FROM prompts",
    "SELECT u.region, MEDIAN(p.tokens_in) FROM prompts p JOIN users u USING (user_id) "
    "GROUP BY u.region",
    "SELECT u.plan, PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY t.resolution_minutes) AS p "
    "FROM tickets t JOIN users u USING (user_id) GROUP BY u.plan",
    "SELECT MEDIAN(CASE WHEN model = 'small' THEN tokens_in END) FROM prompts",
    "SELECT model, MEDIAN(tokens_in) FROM prompts WHERE user_id = {pid} GROUP BY model",
    "SELECT category, MAX(resolution_minutes), MEDIAN(resolution_minutes) FROM tickets "
    "GROUP BY category",
    "SELECT model, MEDIAN(tokens_in * 1000000000000000) FROM prompts GROUP BY model",
    "SELECT flagged, QUANTILE_DISC(latency_ms / 7.0, 0.3), MIN(latency_ms / 7.0) FROM prompts "
    "GROUP BY flagged",
)
PUMS = (
    "SELECT sex, MEDIAN(age), MEDIAN(income) FROM PUMS.PUMS GROUP BY sex",
    "SELECT race, QUANTILE_DISC(income, 0.75) FROM PUMS.PUMS GROUP BY race",
    "SELECT MIN(income), MAX(income) FROM PUMS.PUMS WHERE pid = {pid}",
    "SELECT educ, APPROX_QUANTILE(age, 0.1) FROM PUMS.PUMS GROUP BY educ",
)


def _sides(policy_for, folder: Path, ledgers: Path) -> Iterator[dict[Removal, NeighbourPair]]:
    pairs: dict[Removal, NeighbourPair] = {}
    try:
        for removal in CHOICES:
            neighbours = build_neighbours(
                policy_for(folder), folder / removal, removal, timeout_s=TIMEOUT_S, ledgers=ledgers
            )
            pairs[removal] = NeighbourPair(neighbours)
        yield pairs
    finally:
        for pair in pairs.values():
            pair.close()


@pytest.fixture(scope="module")
def q_demo(
    tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path, au_ledgers: Path
) -> Iterator[dict[Removal, NeighbourPair]]:
    yield from _sides(
        lambda folder: fz_demo_policy(folder, fz_demo_db),
        tmp_path_factory.mktemp("q-demo"),
        au_ledgers,
    )


@pytest.fixture(scope="module")
def q_pums(
    tmp_path_factory: pytest.TempPathFactory, au_ledgers: Path
) -> Iterator[dict[Removal, NeighbourPair]]:
    yield from _sides(fz_pums_policy, tmp_path_factory.mktemp("q-pums"), au_ledgers)


def _check(pair: NeighbourPair, template: str) -> None:
    sql = template.format(pid=pair.neighbours.person)
    report = pair.check(sql)
    assert report.answered, report.describe()
    assert report.ok, report.describe()
    _, plan = pair.d.prepare(QueryRequest(sql, epsilon=1.0))
    assert plan.quantiles, sql


@pytest.mark.parametrize("removal", CHOICES)
@pytest.mark.parametrize("template", DEMO)
def test_quantile_histograms_on_demo_neighbours(
    q_demo: dict[Removal, NeighbourPair], template: str, removal: Removal
) -> None:
    _check(q_demo[removal], template)


@pytest.mark.parametrize("removal", CHOICES)
@pytest.mark.parametrize("template", PUMS)
def test_quantile_histograms_on_pums_neighbours(
    q_pums: dict[Removal, NeighbourPair], template: str, removal: Removal
) -> None:
    _check(q_pums[removal], template)


def test_the_heaviest_person_moves_a_histogram_by_exactly_c(
    q_demo: dict[Removal, NeighbourPair],
) -> None:
    """The bound is attained, not just respected: the heaviest person has more than C
    prompts, so with one group their removal moves the histogram by exactly C = 10."""
    pair = q_demo[Removal.HEAVIEST]
    _, plan = pair.d.prepare(QueryRequest("SELECT MEDIAN(tokens_in) FROM prompts", epsilon=1.0))
    assert "?" not in plan.core_sql  # one group per person: no L0 sampling
    params = [7] if takes_seed(plan.core_sql) else []
    exacts = [e.executor.run(plan.core_sql, params) for e in pair.engines]
    sizes = [int(sum(sum(n) for n in ex["__h0_n"] if n is not None)) for ex in exacts]
    assert plan.max_rows == 10 and dict(pair.neighbours.rows_removed)["prompts"] > 10
    assert sizes[0] - sizes[1] == 10


def test_harness_catches_unbounded_histograms(tmp_path: Path, fz_demo_db: Path) -> None:
    """Linf and L0 switched off (the audit flag): the heaviest person's every prompt
    lands in the histogram, and their weeks all move."""
    neighbours = build_neighbours(
        fz_demo_policy(tmp_path, fz_demo_db), tmp_path / "nb", Removal.HEAVIEST
    )
    rows = dict(neighbours.rows_removed)["prompts"]
    with NeighbourPair(neighbours, bounding=False) as pair:
        report = pair.check("SELECT MEDIAN(tokens_in) FROM prompts", run_engine=False)
        [cell] = [v for v in report.violations if v.kind is ViolationKind.HISTOGRAM_CELL]
        assert (cell.declared, cell.measured) == (10.0, float(rows)), cell.describe()
        weeks = pair.check(
            "SELECT date_trunc('week', ts) AS d, MEDIAN(tokens_in) FROM prompts GROUP BY d",
            run_engine=False,
        )
        assert ViolationKind.HISTOGRAM_GROUPS in weeks.kinds(), weeks.describe()
