"""A UNION ALL arm hid string copies from the outer query's checks (a review of this
round's, 2026-12-06): the arm built ``concat(body x 60)`` under a plain name, and the
outer GROUP BY or COUNT(DISTINCT) stored it as one copy, so one person's text ran the
engine out of memory after the charge on D only, and the outer 64-fold bound saw one
value where there were 60. An arm's column is now at most one input value (plus
constants, proxy/union_rows.py): refused before any charge. Each case failed before."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from tests.policies import users_policy
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

TARGET = 7
POLICY = users_policy(
    """
[tables.docs]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 5
"""
).replace('mechanism = "gaussian"', 'mechanism = "gaussian"\nmemory_limit = "256MB"')

C60 = "concat(" + ", ".join(["body"] * 60) + ")"
DIRECT = f"SELECT {C60} AS k, COUNT(*) AS n FROM docs GROUP BY 1"
UNION_GROUP = (
    f"SELECT k, COUNT(*) AS n FROM (SELECT user_id, {C60} AS k FROM docs "
    "UNION ALL SELECT user_id, body AS k FROM docs) t GROUP BY k"
)
UNION_DISTINCT = (
    f"SELECT COUNT(DISTINCT k) AS n FROM (SELECT user_id, {C60} AS k FROM docs "
    "UNION ALL SELECT user_id, body AS k FROM docs) t"
)


def _pair(folder: Path, long_rows: int, length: int) -> NeighbourPair:
    db = folder / "docs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE docs (user_id BIGINT, body VARCHAR)")
        con.execute("INSERT INTO docs SELECT i % 60 + 1, 'note ' || i FROM range(0, 240) t(i)")
        con.execute(
            f"INSERT INTO docs SELECT {TARGET}, repeat('y', {length}) || i "
            f"FROM range({long_rows}) t(i)"
        )
    policy = parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder)
    neighbours = build_neighbours(
        policy, folder / "nb", Removal.CHOSEN, timeout_s=30.0, person=TARGET
    )
    return NeighbourPair(neighbours)


def _runs(pair: NeighbourPair, sql: str) -> list[tuple[str, int]]:
    out = []
    for engine in pair.engines:
        before = len(engine.ledger.history())
        try:
            engine.run(QueryRequest(sql, epsilon=0.5))
            outcome = "answered"
        except DPSQLError as error:
            outcome = error.code
        out.append((outcome, len(engine.ledger.history()) - before))
    return out


@pytest.mark.parametrize("sql", [UNION_GROUP, UNION_DISTINCT], ids=["group", "distinct"])
def test_a_union_all_arm_hides_copies_from_the_stored_strings_check(
    tmp_path: Path, sql: str
) -> None:
    # 16 distinct texts of 1M characters: 60 copies each is ~960 MB of keys, past 256MB.
    with _pair(tmp_path, 16, 1_000_000) as pair:
        direct = _runs(pair, DIRECT)
        assert direct == [("unsupported_sql", 0)] * 2, direct  # the plain form is refused
        runs = _runs(pair, sql)
        # refused before any charge on both sides, as DIRECT is
        assert runs == [("unsupported_sql", 0)] * 2, runs


K60 = "concat(" + ", ".join(["k"] * 60) + ")"
UNION_GROWTH = (
    f"SELECT COUNT(*) AS n FROM (SELECT user_id, {C60} AS k FROM docs "
    f"UNION ALL SELECT user_id, body AS k FROM docs) t WHERE length({K60}) > 5"
)


def test_a_union_all_arm_multiplies_the_outer_growth_bound(tmp_path: Path) -> None:
    """The outer query counts the arm's column as one length L (growth_of(t.k) = L), so
    60 x 60 = 3,600 copies per row pass the 64-fold bound."""
    with _pair(tmp_path, 1, 1_000_000) as pair:
        runs = _runs(pair, UNION_GROWTH)
        assert runs == [("unsupported_sql", 0)] * 2, runs
