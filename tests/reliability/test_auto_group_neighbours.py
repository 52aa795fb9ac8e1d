"""Issue #12 §3 through the neighbour harness: K (groups per person) chosen from the data.

On the small fuzz demo (300 people), with prompts' ``max_groups = "auto"``, for both
neighbour choices (the heaviest person, a person present everywhere):

* the corpus entries of :data:`neighbour_corpus.AUTO_GROUPS` are planned identically on D
  and D' and their cores stay within the declared sensitivities, first with the limit
  (before any histogram is released), then with the histogram released on D and stored
  into D''s release cache too (a released histogram is public: both sides plan with it);
* the histogram K is chosen from moves by exactly one person in one bin between D and D'
  (L1 sensitivity 1, the input its noise assumes: proxy/auto_groups.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from proxy.auto_groups import grouping
from proxy.request import QueryRequest
from tests.reliability import neighbour_corpus as corpus
from tests.reliability.auto_neighbours import auto_policy, check_entries, neighbour_pair
from tests.reliability.neighbours import CHOICES, NeighbourPair, Removal

FIXED_K = "max_groups = 4                 #"
AVG_DAILY = "SELECT CAST(ts AS DATE) AS d, AVG(tokens_out) AS a FROM prompts GROUP BY d"


@pytest.fixture(scope="module", params=CHOICES, ids=str)
def pair(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fz_demo_db: Path,
    au_ledgers: Path,
) -> Iterator[tuple[NeighbourPair, dict[str, object]]]:
    removal: Removal = request.param
    folder = tmp_path_factory.mktemp(f"nb-auto-k-{removal}")
    policy = auto_policy(folder, fz_demo_db, FIXED_K, corpus.AUTO_GROUPS_POLICY)
    assert policy.table("prompts").auto_groups_limit == 64
    yield from neighbour_pair(policy, folder, removal, au_ledgers)


def _check_all(pair: NeighbourPair, facts: dict[str, object]) -> int:
    return check_entries(pair, facts, corpus.AUTO_GROUPS)


def test_auto_k_through_the_harness(pair: tuple[NeighbourPair, dict[str, object]]) -> None:
    p, facts = pair
    d, d_prime = p.engines
    daily = QueryRequest(corpus.AUTO_GROUPS[0].sql, epsilon=1.0)
    # Before any release: both sides plan with the limit and list the release.
    shape, plan = d.prepare(daily)
    assert plan.max_groups == 64
    assert [p.grouping.key_sqls for p in plan.pending_bounds if hasattr(p, "grouping")] == [
        ("CAST(t0.ts AS DATE)",)
    ]
    assert _check_all(p, facts) == len(corpus.AUTO_GROUPS)
    # The histogram's input: the removed person moves one bin by one.
    g = grouping(shape, "duckdb")
    g_prime = grouping(d_prime.prepare(daily)[0], "duckdb")
    assert g is not None and g == g_prime
    moved = np.abs(
        np.asarray(d.auto_groups.exact_counts(g)) - np.asarray(d_prime.auto_groups.exact_counts(g))
    )
    assert moved.sum() == 1
    # Release on D, share it with D' (it is public), and check again with the chosen K.
    d.run(daily)
    key = d.auto_groups.key(g)
    stored = d.cache.get(key)
    assert stored is not None and d_prime.cache.get(key) is None
    d_prime.cache.put(key, stored[0], stored[1])
    # Each query picks its K from the shared histogram by expected error: the same K, the
    # same candidates' errors, on both sides; a mean of the same keys takes a K below the
    # limit (it loses little by cutting a heavy person's days).
    for sql in (daily, replace(daily, sql=AVG_DAILY)):
        plan = d.prepare(sql)[1]
        other = d_prime.prepare(sql)[1]
        assert plan.chosen_bounds == other.chosen_bounds and plan.cache_key == other.cache_key
        assert plan.max_groups == other.max_groups <= 64
    assert d.prepare(replace(daily, sql=AVG_DAILY))[1].max_groups < 64
    assert _check_all(p, facts) == len(corpus.AUTO_GROUPS)
