"""The L0 rule's cut, run on DuckDB with hashes chosen by the test (ties included).

The hashes are the only input of the cut, so the test writes them directly into the
per-person table the rule reads and checks two claims: no person ever keeps more than
K groups, even when hashes collide; and without collisions each person keeps exactly
the K groups with the smallest hashes (all of them when they have at most K).
"""

from __future__ import annotations

from typing import cast

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from proxy.rewrite import l0
from proxy.rewrite.core import Core
from proxy.shape import Shape

HASHES = st.integers(min_value=0, max_value=2**63 - 1)
# Few distinct values make ties likely; the full range makes them (almost) impossible.
SMALL_HASHES = st.integers(min_value=0, max_value=6)
PERSONS = st.dictionaries(
    st.integers(min_value=1, max_value=40),
    st.lists(st.one_of(SMALL_HASHES, HASHES), min_size=1, max_size=14),
    min_size=1,
    max_size=12,
)


def _cut_sql(k: int) -> str:
    core = Core(shape=cast(Shape, None), max_rows=1, max_groups=k, keys=(exp.column("x"),))
    ctes = dict(l0.apply(core).ctes)
    heavy, bounded = ctes["heavy"].sql("duckdb"), ctes["bounded"].sql("duckdb")
    return f"WITH heavy AS ({heavy}), bounded AS ({bounded}) SELECT __u, __k0 FROM bounded"


def _kept(persons: dict[int, list[int]], k: int) -> dict[int, set[int]]:
    con = duckdb.connect()
    con.execute("CREATE TABLE pph (__u BIGINT, __k0 BIGINT, __s0 BIGINT, __h BIGINT)")
    rows = [(u, g, 1, h) for u, hs in persons.items() for g, h in enumerate(hs)]
    con.executemany("INSERT INTO pph VALUES (?, ?, ?, ?)", rows)
    kept: dict[int, set[int]] = {u: set() for u in persons}
    for u, g in con.execute(_cut_sql(k)).fetchall():
        kept[u].add(g)
    con.close()
    return kept


def kept_by_rule(hashes: list[int], k: int) -> set[int]:
    """The groups (indices) the tie rule keeps of one person's hashes (also the
    reference of bench/l0_plans.py's cut forms)."""
    if len(hashes) <= k:
        return set(range(len(hashes)))
    ordered = sorted(hashes)
    cut, tie = ordered[k - 1], ordered[k - 1] == ordered[k]
    return {g for g, h in enumerate(hashes) if h < cut or (h == cut and not tie)}


@settings(max_examples=60, deadline=None)
@given(PERSONS, st.sampled_from([1, 2, 4, l0.HEAP_K, l0.HEAP_K + 1]))
def test_no_person_keeps_more_than_k_groups_even_with_collisions(
    persons: dict[int, list[int]], k: int
) -> None:
    kept = _kept(persons, k)
    for u, hashes in persons.items():
        assert len(kept[u]) <= k
        assert kept[u] == kept_by_rule(hashes, k)


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.integers(min_value=1, max_value=40),
        st.lists(HASHES, min_size=1, max_size=14, unique=True),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([1, 3, 4, l0.HEAP_K + 2]),
)
def test_without_collisions_each_person_keeps_the_k_smallest_hashes(
    persons: dict[int, list[int]], k: int
) -> None:
    kept = _kept(persons, k)
    for u, hashes in persons.items():
        smallest = sorted(range(len(hashes)), key=hashes.__getitem__)[:k]
        assert kept[u] == set(smallest)


def test_large_k_finds_heavy_persons_first() -> None:
    # Above HEAP_K the per-person heap is built only for persons who exceed K.
    assert "SEMI JOIN" not in _cut_sql(l0.HEAP_K)
    assert "SEMI JOIN" in _cut_sql(l0.HEAP_K + 1)
