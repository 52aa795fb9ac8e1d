"""Issue #12 §3 through the neighbour harness: value bounds chosen from the data.

On the small fuzz demo (300 people), with ``latency_ms`` declared ``upper = "auto"`` (and
then with both ``lower`` and ``upper`` "auto"), for both neighbour choices (the heaviest
person, a person present everywhere):

* the corpus entries of :data:`neighbour_corpus.AUTO_VALUES` are planned identically on
  D and D' and their cores stay within the declared sensitivities, first with the limit
  (before any bound is released), then with a bound released on D and stored into D''s
  release cache too (a released bound is public: both sides plan with it);
* the histogram the bounds are chosen from moves by at most C in L1 between D and D' (the
  input its noise is calibrated to, accounting/value_bounds.py); both sides read one histogram.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from proxy.auto_values import Side
from proxy.engine import Engine
from proxy.request import QueryRequest
from tests.reliability import neighbour_corpus as corpus
from tests.reliability.auto_neighbours import auto_policy, check_entries, neighbour_pair
from tests.reliability.neighbours import CHOICES, NeighbourPair, Removal

LATENCY = "columns.latency_ms = { lower = 0, upper = 60000 }"


def _pair(
    removal: Removal, folder: Path, db: Path, ledgers: Path, spelling: str
) -> Iterator[tuple[NeighbourPair, dict[str, object]]]:
    # The fuzz policy (fz_demo_policy's swaps) with latency_ms's bound(s) made "auto".
    policy = auto_policy(folder, db, LATENCY, spelling)
    assert policy.proxy.auto_bounds_epsilon == 1.0
    yield from neighbour_pair(policy, folder, removal, ledgers)


@pytest.fixture(scope="module", params=CHOICES, ids=str)
def pair(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fz_demo_db: Path,
    au_ledgers: Path,
) -> Iterator[tuple[NeighbourPair, dict[str, object]]]:
    removal: Removal = request.param
    folder = tmp_path_factory.mktemp(f"nb-auto-{removal}")
    yield from _pair(removal, folder, fz_demo_db, au_ledgers, corpus.AUTO_VALUE_POLICY)


@pytest.fixture(scope="module", params=CHOICES, ids=str)
def both_pair(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fz_demo_db: Path,
    au_ledgers: Path,
) -> Iterator[tuple[NeighbourPair, dict[str, object]]]:
    removal: Removal = request.param
    folder = tmp_path_factory.mktemp(f"nb-auto-both-{removal}")
    yield from _pair(removal, folder, fz_demo_db, au_ledgers, corpus.AUTO_BOTH_POLICY)


def _check_all(pair: NeighbourPair, facts: dict[str, object]) -> int:
    return check_entries(pair, facts, corpus.AUTO_VALUES)


def test_auto_value_bounds_through_the_harness(
    pair: tuple[NeighbourPair, dict[str, object]],
) -> None:
    p, facts = pair
    d, d_prime = p.engines
    prompts = d.policy.table("prompts")
    column = prompts.column("latency_ms")
    assert prompts is not None and column is not None
    # Before any release: both sides plan with the limit.
    plan = d.prepare(QueryRequest("SELECT SUM(latency_ms) FROM prompts", epsilon=1.0))[1]
    assert [b.column for b in plan.pending_bounds] == ["latency_ms"]
    assert _check_all(p, facts) == len(corpus.AUTO_VALUES)
    # The draw's input: one person moves the histogram by at most C in L1.
    c = d.auto_values.rows_per_person(prompts)
    moved = np.abs(
        d.auto_values.exact_counts(prompts, column)
        - d_prime.auto_values.exact_counts(prompts, column)
    ).sum()
    assert 0 < moved <= c
    # Release on D, share the released bin with D' (it is public), and check again.
    d.run(QueryRequest("SELECT SUM(latency_ms) FROM prompts", epsilon=1.0))
    key = d.auto_values._key(prompts, column)
    stored = d.cache.get(key)
    assert stored is not None and d_prime.cache.get(key) is None
    d_prime.cache.put(key, stored[0], stored[1])
    bound = d.auto_values.released(prompts, column)
    assert bound is not None and d_prime.auto_values.released(prompts, column) == bound
    plan = d.prepare(QueryRequest("SELECT SUM(latency_ms) FROM prompts", epsilon=1.0))[1]
    # The query's own bound, chosen from the shared histogram: the same on both sides.
    (chosen,) = plan.chosen_bounds
    assert plan.pending_bounds == () and plan.noise[0].statistic.upper == chosen.chosen
    other = d_prime.prepare(QueryRequest("SELECT SUM(latency_ms) FROM prompts", epsilon=1.0))[1]
    assert other.chosen_bounds == plan.chosen_bounds and other.cache_key == plan.cache_key
    assert _check_all(p, facts) == len(corpus.AUTO_VALUES)


def _share(d: Engine, d_prime: Engine, key: str) -> None:
    """Store D's release under ``key`` in D''s cache too (a released bound is public)."""
    stored = d.cache.get(key)
    assert stored is not None and d_prime.cache.get(key) is None
    d_prime.cache.put(key, stored[0], stored[1])


def test_auto_lower_and_upper_bounds_through_the_harness(
    both_pair: tuple[NeighbourPair, dict[str, object]],
) -> None:
    p, facts = both_pair
    d, d_prime = p.engines
    prompts = d.policy.table("prompts")
    column = prompts.column("latency_ms")
    assert prompts is not None and column is not None and column.lower_limit == -1000.0
    sql = "SELECT SUM(latency_ms) FROM prompts"
    plan = d.prepare(QueryRequest(sql, epsilon=1.0))[1]
    assert sorted(b.side for b in plan.pending_bounds) == [Side.LOWER, Side.UPPER]
    assert _check_all(p, facts) == len(corpus.AUTO_VALUES)
    # The one histogram's input (both sides read it): one person moves it by at most C
    # in L1.
    c = d.auto_values.rows_per_person(prompts)
    moved = np.abs(
        d.auto_values.exact_counts(prompts, column)
        - d_prime.auto_values.exact_counts(prompts, column)
    ).sum()
    assert 0 < moved <= c
    d.run(QueryRequest(sql, epsilon=1.0))
    _share(d, d_prime, d.auto_values._key(prompts, column))
    bounds = []
    for side in Side:
        found = d.auto_values.released(prompts, column, side)
        assert found is not None and d_prime.auto_values.released(prompts, column, side) == found
        bounds.append(found)
    upper, lower = bounds
    assert -1000.0 <= lower < upper <= 600000.0
    # Each query's own bounds, chosen from the shared histogram: the same on both sides.
    for query in (sql, "SELECT AVG(latency_ms) FROM prompts"):
        plan = d.prepare(QueryRequest(query, epsilon=1.0))[1]
        chosen = {b.bound: b.chosen for b in plan.chosen_bounds}
        assert plan.pending_bounds == () and sorted(chosen) == ["lower", "upper"]
        assert -1000.0 <= chosen["lower"] < chosen["upper"] <= 600000.0
        statistic = plan.noise[0].statistic
        assert (statistic.lower, statistic.upper) == (chosen["lower"], chosen["upper"])
        other = d_prime.prepare(QueryRequest(query, epsilon=1.0))[1]
        assert other.chosen_bounds == plan.chosen_bounds and other.cache_key == plan.cache_key
    assert _check_all(p, facts) == len(corpus.AUTO_VALUES)
