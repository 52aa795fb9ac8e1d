"""Released row order as a neighbour test (issue #19 §1).

With private keys, the rows of a release must be a function of the released values
alone. A target-first filter (``WHERE user_id >= target``) puts the target's rows first
in storage, and an engine that keeps DuckDB's aggregation order then tends to release
one of the target's groups first. Over N fresh releases (each run asks for a slightly
different ε, so each is a charged cache miss with fresh noise) on D and on D' = D minus
the target, let k and k' count the runs whose first released row is one of the target's
groups. (ε, δ)-DP bounds the event's probability: P ≤ e^ε·P' + δ. The test asserts

    k/N ≤ e^ε·k'/N + δ + 3·sqrt(p(1−p)/N + e^{2ε}·p'(1−p')/N),

the tolerance being three standard errors of k/N − e^ε·k'/N (normal approximation, with
p = (k+1)/(N+2) and p' = (k'+1)/(N+2) so that 0/N and N/N keep a positive variance): a
correct engine fails it with probability about 0.1% at the bound and far less when, as
with a canonical order, P ≈ P'.

CI: the 5,000-person demo with ``threads = 1`` (DuckDB then emits groups in the order it
meets them, so the leak is certain and N = 40 suffices); full (``-m slow``): the demo
policy as shipped (2 threads), N = 200 per side (the first 80 are printed apart, the
issue's sample: it reported 44/80 vs 4/80; at N = 80 the tolerance leaves too little
margin for a test that must fail reliably). A deterministic companion checks that the
stored release is sorted by key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proxy.engine import Engine
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.reliability.conftest import fz_demo_policy
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

EPSILON = 1.0
DELTA = 1e-10  # the query's δ, as in the issue
CI_N = 40
FULL_N = 200
ISSUE_N = 80  # the issue's sample size, reported separately from the first runs
REASON = (
    "issue #19 §1: released rows keep DuckDB's aggregation order, which puts the "
    "target's groups first when they are present"
)
SQL = (
    "SELECT date_trunc('week', ts) AS d, COUNT(*) AS n FROM prompts WHERE user_id >= {t} GROUP BY d"
)


class OrderLeak(Exception):
    """The first released row's distribution, or the stored order, betrays the target."""


@pytest.fixture(scope="module")
def ro_demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The demo's own size and seed (sample_data.generate defaults): the issue's data.
    return generate(
        tmp_path_factory.mktemp("ro-data") / "usage.duckdb", people=5000, prompts=100_000, seed=7
    )


def _target(db: Path) -> int:
    """The first person from id 1001 on with 3 to 5 active weeks (1001 in the demo)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT user_id FROM prompts WHERE user_id >= 1001 GROUP BY user_id "
            "HAVING COUNT(DISTINCT date_trunc('week', ts)) BETWEEN 3 AND 5 "
            "ORDER BY user_id LIMIT 1"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0])


def _pair(folder: Path, db: Path, ledgers: Path, threads: int) -> NeighbourPair:
    target = _target(db)
    policy = fz_demo_policy(folder, db)
    policy = dataclasses.replace(policy, proxy=dataclasses.replace(policy.proxy, threads=threads))
    return NeighbourPair(
        build_neighbours(policy, folder / "nb", Removal.CHOSEN, person=target, ledgers=ledgers)
    )


@pytest.fixture(scope="module")
def ro_pair_ci(
    tmp_path_factory: pytest.TempPathFactory, ro_demo_db: Path, au_ledgers: Path
) -> Iterator[NeighbourPair]:
    with _pair(tmp_path_factory.mktemp("ro-ci"), ro_demo_db, au_ledgers, threads=1) as pair:
        yield pair


@pytest.fixture(scope="module")
def ro_pair_full(
    tmp_path_factory: pytest.TempPathFactory, ro_demo_db: Path, au_ledgers: Path
) -> Iterator[NeighbourPair]:
    with _pair(tmp_path_factory.mktemp("ro-full"), ro_demo_db, au_ledgers, threads=2) as pair:
        yield pair


def target_groups(pair: NeighbourPair) -> set[Any]:
    target = pair.neighbours.person
    rows, _ = pair.exact_rows(
        f"SELECT DISTINCT date_trunc('week', ts) FROM prompts WHERE user_id = {int(target)}"
    )
    return {r[0] for r in rows}


def first_row_hits(engine: Engine, sql: str, groups: set[Any], n: int) -> list[bool]:
    """For each of n fresh releases, whether it put one of ``groups`` first (a run that
    releases no row counts as a miss)."""
    hits = []
    for i in range(n):
        # A distinct ε per run: a cache miss, charged, with fresh noise and sampling.
        epsilon = EPSILON * (1 + i * 1e-10)
        result = engine.run(QueryRequest(sql, epsilon=epsilon, delta=DELTA))
        assert not result.privacy.cached
        hits.append(bool(result.rows) and result.rows[0][0] in groups)
    return hits


def tolerance(k: int, k_prime: int, n: int, epsilon: float) -> float:
    p, q = (k + 1) / (n + 2), (k_prime + 1) / (n + 2)
    return 3 * math.sqrt(p * (1 - p) / n + math.exp(2 * epsilon) * q * (1 - q) / n)


def assert_within_dp_bound(k: int, k_prime: int, n: int) -> None:
    allowed = math.exp(EPSILON) * k_prime / n + DELTA + tolerance(k, k_prime, n, EPSILON)
    print(
        f"\nfirst released row is the target's: {k}/{n} with, {k_prime}/{n} without; "
        f"allowed {allowed:.3f}"
    )
    if k / n > allowed:
        raise OrderLeak(f"{k}/{n} with the target, {k_prime}/{n} without: above {allowed:.3f}")


def test_tolerance_is_three_standard_errors():
    # The bound the issue quotes: e·4/80 + δ ≈ 0.14, plus the tolerance at 44 vs 4.
    assert math.exp(1) * 4 / 80 == pytest.approx(0.136, abs=1e-3)
    assert tolerance(44, 4, 80, 1.0) == pytest.approx(0.275, abs=1e-3)
    assert math.exp(1) * 4 / 80 + tolerance(44, 4, 80, 1.0) < 44 / 80  # the issue's numbers fail
    assert math.exp(1) * 8 / 80 + tolerance(10, 8, 80, 1.0) > 10 / 80  # an honest pair passes


def _run(pair: NeighbourPair, n: int) -> None:
    sql = SQL.format(t=int(pair.neighbours.person))
    groups = target_groups(pair)
    assert 3 <= len(groups) <= 5
    on_d = first_row_hits(pair.d, sql, groups, n)
    on_d_prime = first_row_hits(pair.d_prime, sql, groups, n)
    if n > ISSUE_N:
        print(
            f"\nfirst {ISSUE_N} runs: {sum(on_d[:ISSUE_N])}/{ISSUE_N} with the target, "
            f"{sum(on_d_prime[:ISSUE_N])}/{ISSUE_N} without"
        )
    assert_within_dp_bound(sum(on_d), sum(on_d_prime), n)


def test_first_released_row_ci(ro_pair_ci: NeighbourPair):
    _run(ro_pair_ci, CI_N)


@pytest.mark.slow
def test_first_released_row_full(ro_pair_full: NeighbourPair):
    _run(ro_pair_full, FULL_N)


def _is_canonical(keys: list[Any]) -> bool:
    """Sorted by key, with NULLs (if any) together at one end."""
    values = [k for k in keys if k is not None]
    nulls = len(keys) - len(values)
    at_an_end = keys[:nulls] == [None] * nulls or keys[len(keys) - nulls :] == [None] * nulls
    return values == sorted(values) and at_an_end


def test_stored_release_is_sorted_by_key(ro_pair_ci: NeighbourPair):
    """The release stored in the cache (which every free replay, page and format reads)
    is in canonical key order, whatever order the engine produced it in."""
    engine = ro_pair_ci.d
    sql = SQL.format(t=int(ro_pair_ci.neighbours.person))
    request = QueryRequest(sql, epsilon=EPSILON * (1 + 0.5e-10), delta=DELTA)
    result = engine.run(request)
    _, plan = engine.prepare(request)
    stored = engine.cache.get(plan.cache_key)
    assert stored is not None and stored[0] == result.privacy.charge_id
    table = stored[1]
    assert table.num_rows >= 3, "too few groups released to tell an order"
    keys = table.column(plan.key_columns[0]).to_pylist()
    answered = [row[0] for row in result.rows]
    assert sorted(map(repr, answered)) == sorted(map(repr, keys))
    if not _is_canonical(keys):
        raise OrderLeak(f"stored keys are not sorted: {keys[:5]}...")
