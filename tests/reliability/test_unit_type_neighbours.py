"""Person ids of different types in one population (a review, 2026-12-06).

``users.user_id`` is a BIGINT and ``ev.user_id`` a VARCHAR. The join ``ev.user_id =
users.user_id`` compares them as numbers (DuckDB casts the text), so ``'7'``, ``'07'``,
``'007'`` … are all person 7's rows: the join, a ``WHERE users.user_id = 7`` and the
neighbour harness's removal (``user_id IS DISTINCT FROM 7``) all say so. The bounded
core, anchored on ``ev``, groups each person's rows by ``ev.user_id`` as text: every
spelling was a person of its own, with C rows of its own. With C = 1, the target's 40
spellings moved a count declared Δ∞ = 1 by 40, and the people count partition selection
thresholds by 40 as well (one person alone could pass the threshold of a key).
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from tests.policies import users_policy
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

TARGET = 7
SPELLINGS = 40

POLICY = users_policy(
    """
[tables.people]
population = "users"
unit = "user_id"
one_row_per_person = true
columns.score = {{ lower = 0, upper = 100 }}

[tables.ev]
population = "users"
unit = "user_id"
max_groups = 1
max_rows_per_group = 1
columns.v = {{ lower = 0, upper = 1 }}
"""
)

QUERIES = (
    "SELECT COUNT(*) AS n FROM ev e JOIN people p ON e.user_id = p.user_id",
    "SELECT COUNT(*) AS n FROM ev e JOIN people p ON p.user_id = e.user_id "
    f"WHERE p.user_id = {TARGET}",
    "SELECT e.v, COUNT(*) AS n FROM ev e JOIN people p ON e.user_id = p.user_id GROUP BY e.v",
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeighbourPair | DPSQLError]:
    folder = tmp_path_factory.mktemp("unit-type-neighbours")
    db = folder / "units.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE people (user_id BIGINT, score INTEGER)")
        con.execute("INSERT INTO people SELECT i, i % 100 FROM range(1, 61) t(i)")
        con.execute("CREATE TABLE ev (user_id VARCHAR, v INTEGER)")
        con.execute("INSERT INTO ev SELECT CAST(i % 60 + 1 AS VARCHAR), 1 FROM range(0, 240) t(i)")
        # The target's rows under many spellings of the same number.
        con.execute(
            f"INSERT INTO ev SELECT repeat('0', i) || '{TARGET}', 1 "
            f"FROM range(1, {SPELLINGS + 1}) t(i)"
        )
    policy = parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder)
    neighbours = build_neighbours(
        policy, folder / "nb", Removal.CHOSEN, timeout_s=10.0, person=TARGET
    )
    try:
        with_pair: NeighbourPair | DPSQLError = NeighbourPair(neighbours)
    except DPSQLError as refused:
        # Refusing to start on such a policy is sound too: nothing is ever answered.
        with_pair = refused
    try:
        yield with_pair
    finally:
        if isinstance(with_pair, NeighbourPair):
            with_pair.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_person_ids_of_different_types_bound_one_person(
    pair: NeighbourPair | DPSQLError, sql: str
) -> None:
    if isinstance(pair, DPSQLError):
        assert pair.code == "policy_error" and "different types" in pair.message, pair
        return
    report = pair.check(sql)
    assert report.ok, report.describe()
