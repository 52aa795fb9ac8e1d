"""Automatic row caps for quantiles (2026-12-06) through the neighbour harness.

A MEDIAN or a quantile of the middle now weighs its rank error in the choice of an
"auto" table's row cap (proxy/auto_bounds.cap_targets, accounting/bounds.RANK_REWEIGHT):
it chooses a cap below the policy's limit where it kept the limit before. On the small
fuzz demo (300 people) with prompts' cap "auto", for both neighbour choices (the heaviest
person, a person present everywhere):

* with the released histogram of rows per person shared between D and D' (a release is
  public: both sides plan with it), each query is planned identically on both sides (the
  same chosen cap and cache key): the choice reads nothing but released and public values;
* the cores of the quantile entries at the chosen caps stay within their declared
  sensitivities, and every entry's outcome is the same on D and D' (nothing fails after
  the charge on one side only).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.request import QueryRequest
from tests.policies import AUTO_PROMPTS
from tests.reliability.auto_neighbours import Pair, auto_policy, check_entries, neighbour_pair
from tests.reliability.neighbour_corpus import Entry
from tests.reliability.neighbours import CHOICES, Removal

ENTRIES = (
    Entry(
        "auto_cap_median",
        "SELECT model, MEDIAN(latency_ms) AS m FROM prompts GROUP BY model",
        "§12.3 a median's own cap, chosen from the released histogram",
    ),
    Entry(
        "auto_cap_quartile_pinned",
        "SELECT QUANTILE_CONT(tokens_in, 0.25) AS q FROM prompts WHERE user_id = {pid} "
        "OR model = 'small'",
        "§12.3 a quartile's cap with one person's rows pinned",
    ),
    Entry(
        "auto_cap_median_and_count",
        "SELECT region, MEDIAN(tokens_out) AS m, COUNT(*) AS n FROM prompts "
        "JOIN users USING (user_id) GROUP BY region",
        "§12.3 a median beside a total: both weigh in one cap",
    ),
)


@pytest.fixture(scope="module", params=CHOICES, ids=str)
def pair(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fz_demo_db: Path,
    au_ledgers: Path,
) -> Iterator[Pair]:
    removal: Removal = request.param
    folder = tmp_path_factory.mktemp(f"nb-auto-cap-{removal}")
    policy = auto_policy(folder, fz_demo_db, "max_rows_per_group = 10", AUTO_PROMPTS)
    yield from neighbour_pair(policy, folder, removal, au_ledgers)


def test_quantile_caps_through_the_harness(pair: Pair) -> None:
    p, facts = pair
    d, d_prime = p.engines
    prompts = d.policy.table("prompts")
    assert prompts is not None and prompts.auto_rows_limit == 256
    # Release the histogram on D and share it with D' (it is public).
    d.run(QueryRequest("SELECT COUNT(*) AS n FROM prompts", epsilon=1.0))
    key = d.auto_bounds._key(prompts)
    stored = d.cache.get(key)
    assert stored is not None and d_prime.cache.get(key) is None
    d_prime.cache.put(key, stored[0], stored[1])
    caps = []
    for entry in ENTRIES:
        sql = entry.render(facts)
        plan = d.prepare(QueryRequest(sql, epsilon=1.0))[1]
        other = d_prime.prepare(QueryRequest(sql, epsilon=1.0))[1]
        assert other.max_rows == plan.max_rows and other.cache_key == plan.cache_key, entry.name
        caps.append(plan.max_rows)
    # The median alone now chooses its own cap (it kept the limit of 256 before).
    assert caps[0] < 256, caps
    assert check_entries(p, facts, ENTRIES) == len(ENTRIES)
