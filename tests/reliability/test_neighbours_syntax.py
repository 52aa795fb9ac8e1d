"""Issue 13 §6–§8 through the neighbour harness: on D and D' = D minus one person (the
heaviest, and an ordinary one reached through every table), math in aggregate arguments,
the other spellings, windows over released rows and BigQuery's DP syntax plan alike,
never fail after planning, and move every released statistic by at most its declared
sensitivity; queries over public data give the same exact answer on both and write no
ledger event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from proxy.policy import Policy
from proxy.request import QueryRequest
from tests.reliability.conftest import fz_demo_policy, fz_pums_policy
from tests.reliability.neighbours import CHOICES, NeighbourPair, Removal, build_neighbours

P = "PUMS.PUMS"
BQ = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-9, {unit}) "

PUMS_QUERIES = {
    "math-by-sex": f"SELECT sex, AVG(LN(income + 1)), SUM(SQRT(income)), "
    f"STDDEV(POWER(age, 2)) FROM {P} GROUP BY sex",
    "trig-exp-by-educ": f"SELECT educ, AVG(EXP(age / 50.0)), SUM(SIN(age)), "
    f"VAR(ATAN(income - 250000)), AVG(SIGN(age - 40)) FROM {P} GROUP BY educ",
    "math-private-key": f"SELECT race, SUM(LOG(2, age + 1)), AVG(CBRT(income)) FROM {P} "
    "GROUP BY race",
    "top-var": f"SELECT TOP 5 educ, VAR(age), STD(income), VARP(age) FROM {P} GROUP BY educ",
    "windows": f"SELECT educ, COUNT(*) * 100.0 / SUM(COUNT(*)) OVER () AS pct, "
    f"RANK() OVER (ORDER BY AVG(income) DESC) AS r FROM {P} GROUP BY educ ORDER BY r",
    "bigquery-dp": BQ.format(unit="privacy_unit_column = pid")
    + "educ, AVG(income, contribution_bounds_per_group => (0, 100000)) AS a, "
    f"COUNT(*, contribution_bounds_per_group => (0, 1)) AS n FROM {P} GROUP BY educ",
    "bigquery-anon": "SELECT WITH ANONYMIZATION OPTIONS (epsilon = 1, delta = 1e-9) sex, "
    f"ANON_SUM(income CLAMPED BETWEEN 1000 AND 90000) FROM {P} GROUP BY sex",
}
DEMO_QUERIES = {
    "math-multi-row": "SELECT model, AVG(LN(tokens_in + 1)), SUM(SQRT(latency_ms)), "
    "AVG(POWER(tokens_out / 1000.0, 2)) FROM prompts GROUP BY model",
    "bigquery-dp-multi-row": BQ.format(
        unit="max_groups_contributed = 2, privacy_unit_column = user_id"
    )
    + "model, SUM(tokens_in, contribution_bounds_per_group => (0, 500)) AS s, "
    "COUNT(*, contribution_bounds_per_group => (0, 4)) AS n FROM prompts GROUP BY model",
    "window-over-join": "SELECT u.region, COUNT(*) AS n, COUNT(*) * 1.0 / SUM(COUNT(*)) OVER () "
    "FROM prompts p JOIN users u ON p.user_id = u.user_id GROUP BY u.region",
}
PUBLIC_QUERIES = [
    "SELECT region, name FROM regions ORDER BY region",
    "SELECT COUNT(*), MIN(region) FROM regions",
    "SELECT 1 + 1, PI()",
]


def _pairs(
    factory: pytest.TempPathFactory, policy_of: Callable[[Path], Policy], name: str
) -> Iterator[dict[Removal, NeighbourPair]]:
    folder = factory.mktemp(name)
    policy = policy_of(folder)
    pairs: dict[Removal, NeighbourPair] = {}
    try:
        for removal in CHOICES:
            neighbours = build_neighbours(policy, folder / removal, removal, timeout_s=4.0)
            pairs[removal] = NeighbourPair(neighbours)
        yield pairs
    finally:
        for pair in pairs.values():
            pair.close()


@pytest.fixture(scope="module")
def pums_pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Removal, NeighbourPair]]:
    yield from _pairs(tmp_path_factory, fz_pums_policy, "nb-syntax-pums")


@pytest.fixture(scope="module")
def demo_pairs(
    tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path
) -> Iterator[dict[Removal, NeighbourPair]]:
    yield from _pairs(tmp_path_factory, lambda f: fz_demo_policy(f, fz_demo_db), "nb-syntax-demo")


@pytest.mark.parametrize("removal", CHOICES)
@pytest.mark.parametrize("name", sorted(PUMS_QUERIES))
def test_pums(pums_pairs: dict[Removal, NeighbourPair], name: str, removal: Removal) -> None:
    report = pums_pairs[removal].check(PUMS_QUERIES[name])
    assert report.ok, report.describe()
    assert report.answered, report.outcome


@pytest.mark.parametrize("removal", CHOICES)
@pytest.mark.parametrize("name", sorted(DEMO_QUERIES))
def test_demo(demo_pairs: dict[Removal, NeighbourPair], name: str, removal: Removal) -> None:
    report = demo_pairs[removal].check(DEMO_QUERIES[name])
    assert report.ok, report.describe()
    assert report.answered, report.outcome


@pytest.mark.parametrize("removal", CHOICES)
def test_public_queries_are_the_same_on_both_and_free(
    demo_pairs: dict[Removal, NeighbourPair], removal: Removal
) -> None:
    pair = demo_pairs[removal]
    for sql in PUBLIC_QUERIES:
        answers = []
        for engine in pair.engines:
            before = len(engine.ledger.history(limit=100000))
            result = engine.run(QueryRequest(sql))
            assert result.privacy.exact and result.privacy.epsilon == 0
            assert len(engine.ledger.history(limit=100000)) == before
            answers.append((result.columns, result.rows))
        assert answers[0] == answers[1], sql


# Found by a probe of the dialects (2026-12-02): pinned to the removed person, each failed
# after the charge on D only. A truncation in a named zone is rendered AT TIME ZONE, and
# an unknown zone raises an error DuckDB's TRY does not catch (now refused before the
# charge); IS TRUE of a text or date column cast it per row outside TRY.
DIALECT_QUERIES = {
    "bigquery-trunc-zone": (
        "bigquery",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} "
        "AND TIMESTAMP_TRUNC(ts, DAY, model) IS NOT NULL",
    ),
    "postgres-trunc-zone": (
        "postgres",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} "
        "AND date_trunc('day', ts, 'Mars/Olympus') IS NOT NULL",
    ),
    "postgres-text-is-true": (
        "postgres",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND model IS TRUE",
    ),
    "duckdb-text-is-not-false": (
        "duckdb",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND model IS NOT FALSE",
    ),
    "trino-date-is-true": (
        "trino",
        "SELECT COUNT(*) AS n FROM users WHERE user_id = {pid} AND signup_month IS TRUE",
    ),
    # Units DuckDB binds and then refuses on each row (NotImplementedException, which
    # TRY does not catch): the era and time-zone parts, and DATE_DIFF between TIMEs.
    "duckdb-era-diff": (
        "duckdb",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND date_diff('era', ts, ts) = 0",
    ),
    "duckdb-timezone-part": (
        "duckdb",
        "SELECT EXTRACT(timezone FROM signup_month) AS k, COUNT(*) AS n FROM users "
        "WHERE user_id = {pid} GROUP BY k",
    ),
    "duckdb-time-diff": (
        "duckdb",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "date_diff('day', CAST(ts AS TIME), CAST(ts AS TIME)) = 0",
    ),
    "trino-timezone-diff": (
        "trino",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "date_diff('timezone_hour', ts, ts) = 0",
    ),
    # PostgreSQL's and Trino's integer division (proxy/typed_division.py), by zero on the
    # pinned person's rows only: DuckDB's // raises where / gave NULL under TRY.
    "postgres-integer-division-by-zero": (
        "postgres",
        "SELECT COUNT(*) AS n FROM users WHERE user_id = {pid} AND 100 / (age - age) = 0",
    ),
    "trino-integer-division-sum": (
        "trino",
        "SELECT SUM(tokens_in / 3) AS s FROM prompts "
        "WHERE 100 / (CASE WHEN user_id = {pid} THEN 0 ELSE 1 END) > 0",
    ),
}


@pytest.mark.parametrize("removal", CHOICES)
@pytest.mark.parametrize("name", sorted(DIALECT_QUERIES))
def test_dialects(demo_pairs: dict[Removal, NeighbourPair], name: str, removal: Removal) -> None:
    pair = demo_pairs[removal]
    dialect, sql = DIALECT_QUERIES[name]
    report = pair.check(sql.format(pid=pair.neighbours.person), dialect=dialect)
    assert report.ok, report.describe()
