"""The key-join rule (proxy/rewrite/key_join.py) through the neighbour harness on data the
generator never makes: a person with a users row and no prompts, prompts (and tickets)
of a person with no users row, rows with a NULL person id, people whose region is NULL.

The rule reads the anchor without the join (so ``pp`` holds the orphans and the NULL id)
and the key table alone (so ``pk`` holds people without rows): both are dropped by the
inner join of ``pp`` and ``pk``. D' removes, in turn, the heaviest person (whose region
is NULL here), an ordinary person in every table, the orphan, the users-only person and
another person whose region is NULL. A NULL person id in users itself is refused at start
(the one-row-per-person check counts it as a repeat), which is tested too.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest
from tests.reliability import neighbour_corpus as corpus
from tests.reliability.conftest import fz_demo_policy
from tests.reliability.neighbour_corpus import Entry
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

USERS_ONLY = 9001  # a users row, no prompts, no tickets
ORPHAN = 9002  # prompts and a ticket, no users row
NULL_REGION = 7  # an ordinary person whose region is set to NULL (the heaviest is too)
CHOICES: tuple[tuple[str, Removal, int | None], ...] = (
    ("heaviest", Removal.HEAVIEST, None),
    ("everywhere", Removal.EVERYWHERE, None),
    ("orphan", Removal.CHOSEN, ORPHAN),
    ("users_only", Removal.CHOSEN, USERS_ONLY),
    ("null_region", Removal.CHOSEN, NULL_REGION),
)


def _edit(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO users SELECT ?, 'north', 'free', 30, signup_month FROM users LIMIT 1",
        [USERS_ONLY],
    )
    con.execute(
        "INSERT INTO prompts SELECT prompt_id + 100000, ?, ts, model, tokens_in, tokens_out, "
        "latency_ms, flagged FROM prompts ORDER BY prompt_id LIMIT 6",
        [ORPHAN],
    )
    con.execute(
        "INSERT INTO prompts SELECT prompt_id + 200000, NULL, ts, model, tokens_in, "
        "tokens_out, latency_ms, flagged FROM prompts ORDER BY prompt_id LIMIT 40"
    )
    con.execute(
        "INSERT INTO tickets SELECT ticket_id + 100000, u, opened_at, category, "
        "resolution_minutes FROM tickets, (VALUES (?), (NULL)) v(u) "
        "ORDER BY ticket_id LIMIT 2",
        [ORPHAN],
    )
    heaviest = con.execute(
        "SELECT user_id FROM prompts WHERE user_id IS NOT NULL GROUP BY 1 "
        "ORDER BY COUNT(*) DESC, 1 LIMIT 1"
    ).fetchone()
    assert heaviest is not None
    con.execute(
        "UPDATE users SET region = NULL WHERE user_id IN (?, ?)", [NULL_REGION, heaviest[0]]
    )
    con.execute("CHECKPOINT")


@pytest.fixture(scope="module")
def kj_db(tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path) -> Path:
    db = tmp_path_factory.mktemp("kj-data") / "usage.duckdb"
    shutil.copyfile(fz_demo_db, db)
    con = duckdb.connect(str(db))
    try:
        _edit(con)
    finally:
        con.close()
    return db


@pytest.fixture(scope="module")
def kj_pairs(
    tmp_path_factory: pytest.TempPathFactory, kj_db: Path, au_ledgers: Path
) -> Iterator[dict[str, tuple[NeighbourPair, dict[str, object]]]]:
    folder = tmp_path_factory.mktemp("kj-nb")
    policy = fz_demo_policy(folder, kj_db)
    pairs: dict[str, tuple[NeighbourPair, dict[str, object]]] = {}
    try:
        for name, removal, person in CHOICES:
            neighbours = build_neighbours(
                policy, folder / name, removal, timeout_s=2.0, ledgers=au_ledgers, person=person
            )
            pair = NeighbourPair(neighbours)
            pairs[name] = (pair, corpus.demo_facts(pair.exact_rows, neighbours.person))
        yield pairs
    finally:
        for pair, _ in pairs.values():
            pair.close()


def test_the_edited_data_has_its_edge_cases(
    kj_pairs: dict[str, tuple[NeighbourPair, dict[str, object]]],
) -> None:
    pair, facts = kj_pairs["heaviest"]
    [(users_only, orphans, null_ids, null_regions)], _ = pair.exact_rows(
        f"SELECT (SELECT COUNT(*) FROM users u WHERE u.user_id = {USERS_ONLY} AND NOT EXISTS "
        f"(SELECT 1 FROM prompts p WHERE p.user_id = u.user_id)), "
        f"(SELECT COUNT(*) FROM prompts WHERE user_id = {ORPHAN}), "
        "(SELECT COUNT(*) FROM prompts WHERE user_id IS NULL), "
        "(SELECT COUNT(*) FROM users WHERE region IS NULL)"
    )
    assert (users_only, orphans, null_ids, null_regions) == (1, 6, 40, 2)
    assert facts["region"] == "north"  # the heaviest person's region is NULL (the fallback)
    removed = dict(kj_pairs["orphan"][0].neighbours.rows_removed)
    assert (removed["users"], removed["prompts"], removed["tickets"]) == (0, 6, 1)
    removed = dict(kj_pairs["users_only"][0].neighbours.rows_removed)
    assert (removed["users"], removed["prompts"], removed["tickets"]) == (1, 0, 0)


@pytest.mark.parametrize("entry", corpus.KEY_JOIN, ids=lambda e: e.name)
@pytest.mark.parametrize("choice", [c[0] for c in CHOICES])
def test_key_join_neighbours_on_edge_data(
    entry: Entry,
    choice: str,
    kj_pairs: dict[str, tuple[NeighbourPair, dict[str, object]]],
) -> None:
    pair, facts = kj_pairs[choice]
    sql = entry.render(facts)
    # the rule's form is what is checked (else this tests the MIN form again)
    assert "pk AS (" in pair.d.prepare(QueryRequest(sql, epsilon=1.0))[1].core_sql
    report = pair.check(sql)
    assert report.ok and report.answered, report.describe()


def test_a_null_person_id_in_the_key_table_is_refused_at_start(tmp_path: Path, kj_db: Path) -> None:
    db = tmp_path / "null_user.duckdb"
    shutil.copyfile(kj_db, db)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO users SELECT NULL, region, plan, age, signup_month FROM users LIMIT 1")
    con.execute("CHECKPOINT")
    con.close()
    with pytest.raises(DPSQLError) as refused:
        Engine(fz_demo_policy(tmp_path, db)).close()
    assert refused.value.code == "policy_error"
