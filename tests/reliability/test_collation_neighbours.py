"""A text column whose collation merges distinct strings (found by review 3).

Under ``COLLATE NOCASE`` the rows spelled ``NORTH`` and ``north`` were one group, and
DuckDB released one spelling for it: the one it met first. When one person's rows were
the only ones spelled ``NORTH``, the released key of a group of 150 people was that
person's spelling on D and ``north`` on D' = D minus that person. Analysts cannot write
COLLATE; the collation came from the schema, which no catalog view reports. The engine
now refuses to start on such a database (proxy/engines/collations.py), on DuckDB for any
COLLATE in a table's or view's DDL and on PostgreSQL for nondeterministic collations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

PERSON = 7  # the only person who spells the group NORTH
SQL = "SELECT c, COUNT(*) AS n FROM t GROUP BY c"

POLICY = """
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
[database]
{database}
[ledger]
path = "{ledger}"
[populations.p]
epsilon_cap = 1000.0
delta = 1e-6
[tables.t]
population = "p"
unit = "pid"
max_groups = 2
max_rows_per_group = 5
"""


def _database(
    folder: Path,
    column: str,
    extra: Callable[[duckdb.DuckDBPyConnection], object] = lambda con: None,
) -> Path:
    db = folder / "c.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE t (pid INTEGER, {column})")
    con.execute(f"INSERT INTO t SELECT {PERSON}, 'NORTH' FROM range(3)")
    con.execute(
        "INSERT INTO t SELECT 1 + i % 300, CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END "
        f"FROM range(3000) r(i) WHERE 1 + i % 300 <> {PERSON}"
    )
    extra(con)
    con.close()
    return db


def _policy_text(db: Path, folder: Path) -> str:
    return POLICY.format(database=f'duckdb = "{db}"', ledger=folder / "ledger.sqlite")


def _refused(text: str, folder: Path) -> DPSQLError:
    with pytest.raises(DPSQLError) as caught:
        Engine(parse_policy(text, base_dir=folder))
    assert caught.value.code == "policy_error"
    return caught.value


def test_a_collated_column_is_refused_at_start(tmp_path: Path) -> None:
    db = _database(tmp_path, "c VARCHAR COLLATE NOCASE")
    error = _refused(_policy_text(db, tmp_path), tmp_path)
    assert "main.t" in error.message and "COLLATE" in error.message


def test_a_view_that_collates_is_refused_even_over_a_plain_table(tmp_path: Path) -> None:
    db = _database(
        tmp_path,
        "c VARCHAR",
        lambda con: con.execute("CREATE VIEW folded AS SELECT pid, c COLLATE NOCASE AS c FROM t"),
    )
    error = _refused(_policy_text(db, tmp_path), tmp_path)
    assert "main.folded" in error.message


def test_the_word_collate_in_a_literal_is_not_a_collation(tmp_path: Path) -> None:
    db = _database(tmp_path, "c VARCHAR DEFAULT 'COLLATE NOCASE'")
    engine = Engine(parse_policy(_policy_text(db, tmp_path), base_dir=tmp_path))
    engine.close()


def test_without_the_collation_each_spelling_is_its_own_group_on_both_sides(
    tmp_path: Path,
) -> None:
    # The same data with a plain column: NORTH is person 7's own group, which partition
    # selection keeps or drops like any other; north's group has the same label on D and D'.
    db = _database(tmp_path, "c VARCHAR")
    policy = parse_policy(_policy_text(db, tmp_path), base_dir=tmp_path)
    neighbours = build_neighbours(policy, tmp_path / "nb", Removal.CHOSEN, person=PERSON)
    with NeighbourPair(neighbours) as pair:
        report = pair.check(SQL)
    assert report.ok, report.describe()
    assert report.answered, report.outcome  # (a refusal on both sides compares nothing)


def test_postgres_refuses_a_nondeterministic_collation(
    pg_server_session: Any, tmp_path: Path
) -> None:
    import psycopg

    name = pg_server_session.create_database()
    with psycopg.connect(pg_server_session.dsn(name), autocommit=True) as conn:
        conn.execute(
            "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', "
            "deterministic = false)"
        )
        conn.execute("CREATE TABLE t (pid INTEGER, c TEXT COLLATE ci, d TEXT COLLATE \"C\")")
        conn.execute("INSERT INTO t VALUES (1, 'NORTH', 'x'), (2, 'north', 'y')")
    dsn = pg_server_session.grant_reader(name)
    text = POLICY.format(
        database=f'engine = "postgres"\ndsn = "{dsn}"', ledger=tmp_path / "ledger.sqlite"
    )
    error = _refused(text, tmp_path)
    assert "public.t.c (ci)" in error.message and ".d " not in error.message
