"""An adversarial probe of the PostgreSQL engine (a helper session, 2026-12-06): the
string-work attacks of tests/reliability/test_string_work_neighbours.py (run there on
DuckDB only) and PostgreSQL's own ways to fail, each run through ``Engine.run`` on D and
on D minus the targeted person, with the outcome and the ledger events of both sides.

Found, and fixed (each test of the first group failed before: a timeout after the
charge on D only, D' answered):

* **Repeats the engine evaluates, counted once or not at all.** proxy/string_growth.py
  counted a match or builder repeated outside WHERE once, and dropped the work of
  anything under a cast to a number (it read its running total before walking the
  cast's input). PostgreSQL also pulled the row-level CTE up into every aggregate that
  reads its columns, and the clamp and float guards write an argument several times:
  SUM, AVG, VAR_SAMP and STDDEV of one 52-character LIKE ran about 100 times a row
  (5.8 s on D, 0.29 s on D'; DuckDB 0.05 s). Now every copy the analyst wrote is
  counted, the row-level SELECTs are fenced on PostgreSQL (OFFSET 0: evaluated once per
  row), a guard reads an operand that does string work once, and the rendered SQL's
  row-level string work is counted copy by copy before any charge
  (string_growth.check_rendered_rows).

Held up (refused before any charge on both sides, or answered on both): every
string-work attack of the DuckDB probe (long LIKE/ILIKE patterns, 60-fold keys and
DISTINCT arguments, UNION ALL arms, row constructors and their casts, repeated LIKE
conjuncts, built memory), and a NUMERIC(10, 2) column holding NaN on one person's rows
(keys, casts, arithmetic, COUNT(DISTINCT)).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.policy import DatabaseSettings, EngineKind, parse_policy
from sample_data.export import source, to_postgres
from tests.engines.test_neighbours_engines import Side, _moved, _pg_side
from tests.postgres_server import PgServer
from tests.reliability import test_string_work_neighbours as sw
from tests.reliability.conftest import fz_demo_policy
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours
from tests.reliability.test_string_work_neighbours import _runs

# the DuckDB probe's docs table and target, loaded into PostgreSQL
TARGET, POLICY = sw.TARGET, sw.POLICY
TIMEOUT_S = 2.0


def _pg_docs_pair(
    cluster: PgServer, folder: Path, name: str, long_rows: int, length: int
) -> NeighbourPair:
    """60 people with short notes; the target also wrote ``long_rows`` documents of
    ``length`` characters; D and D' each loaded into a PostgreSQL database of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    db = sw.docs_db(folder, long_rows, length)
    policy = parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder)
    neighbours = build_neighbours(
        policy, folder / "nb", Removal.CHOSEN, timeout_s=TIMEOUT_S, person=TARGET
    )
    policies = []
    for label, side in (("d", neighbours.d), ("dp", neighbours.d_prime)):
        database = f"probe_{name}_{label}"
        with source(side) as con:
            to_postgres(con, cluster.replace_database(database))
        settings = DatabaseSettings(engine=EngineKind.POSTGRES, dsn=cluster.grant_reader(database))
        policies.append(_moved(side, settings, TIMEOUT_S))
    return NeighbourPair(dataclasses.replace(neighbours, d=policies[0], d_prime=policies[1]))


@pytest.fixture(scope="module")
def pg_docs(
    pg_cluster: PgServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeighbourPair]:
    """The target's 20 documents of 50,000 characters (1 MB): a 52-character LIKE
    over them runs in about 0.1 s."""
    pair = _pg_docs_pair(pg_cluster, tmp_path_factory.mktemp("pg-probe-docs"), "docs", 20, 50_000)
    try:
        yield pair
    finally:
        pair.close()


SOUND = ([("unsupported_sql", 0)] * 2, [("answered", 1)] * 2)

# --- found: repeats PostgreSQL evaluates, counted once ---------------------------------

P = "'%y" + "_" * 50 + "z%'"  # 52 characters: counted 52 passes, within 64
LIKE_E = f"CASE WHEN body LIKE {P} THEN 1 ELSE 0 END"
LIKE_F = f"CAST(CASE WHEN body LIKE {P} THEN 1 ELSE 2 END AS DOUBLE) * 1.5"
REPEATS = {
    # one LIKE in the query text; the core evaluates it about 100 times a row
    "four_aggregates": (
        f"SELECT SUM({LIKE_F}) AS a, AVG({LIKE_F}) AS b, VAR_SAMP({LIKE_F}) AS c, "
        f"STDDEV({LIKE_F}) AS d FROM docs"
    ),
    "case_branches": (
        "SELECT SUM(CASE "
        + " ".join(f"WHEN body LIKE {P} THEN {k}" for k in range(30))
        + " ELSE 0 END) AS s FROM docs"
    ),
    "aggregates": "SELECT "
    + ", ".join(f"SUM(CASE WHEN body LIKE {P} THEN {k} ELSE 0 END) AS s{k}" for k in range(20))
    + " FROM docs",
    # one copy in the text, under one aggregate: the clamp and the float guard repeat it
    # in the SQL PostgreSQL runs (about 12 evaluations a row before the fence)
    "one_variance": f"SELECT VAR_SAMP({LIKE_F}) AS v FROM docs",
    "key_case_branches": (
        "SELECT CASE "
        + " ".join(f"WHEN body LIKE {P} THEN {k}" for k in range(30))
        + " ELSE 0 END AS k, COUNT(*) AS n FROM docs GROUP BY 1"
    ),
}


@pytest.fixture(scope="module")
def pg_big_docs(
    pg_cluster: PgServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeighbourPair]:
    """The target's 20 documents of 1,000,000 characters (20 MB)."""
    pair = _pg_docs_pair(
        pg_cluster, tmp_path_factory.mktemp("pg-probe-big-docs"), "bigdocs", 20, 1_000_000
    )
    try:
        yield pair
    finally:
        pair.close()


# A review of the fix (2026-12-06): length() was counted as no work, and PostgreSQL
# detoasts and counts the characters of the value at each call: 300 terms timed out
# after the charge on D (2 s), answered on D'. Now one pass each: refused.
LENGTHS = "SELECT COUNT(*) AS n FROM docs WHERE " + " OR ".join(
    f"length(body) = {k}" for k in range(300)
)


def test_lengths_are_counted(pg_big_docs: NeighbourPair) -> None:
    assert _runs(pg_big_docs, LENGTHS) in SOUND


def test_the_pattern_alone_is_answered_in_time(pg_docs: NeighbourPair) -> None:
    """The control: the LIKE once, as a filter, is answered on both sides."""
    assert _runs(pg_docs, f"SELECT COUNT(*) AS n FROM docs WHERE body LIKE {P}") == SOUND[1]


@pytest.mark.parametrize("name", sorted(REPEATS))
def test_repeats_postgres_evaluates_are_counted(pg_docs: NeighbourPair, name: str) -> None:
    # before the fix: [('timeout', 1), ('answered', 1)], a timeout after the charge on D only
    runs = _runs(pg_docs, REPEATS[name])
    assert runs in SOUND, runs


# --- held up: the DuckDB probe's string-work attacks on PostgreSQL ---------------------

B60 = sw.B60
PORTED = {
    "like_underscores": sw.LIKE,
    "ilike_literal": sw.ILIKE,
    "key_60": f"SELECT {sw.KEY} AS k, COUNT(*) AS n FROM docs GROUP BY 1",
    "count_distinct_60": f"SELECT COUNT(DISTINCT {sw.KEY}) AS n FROM docs",
    "union_group": sw.UNION_GROUP,
    "union_distinct": sw.UNION_DISTINCT,
    "union_growth": sw.UNION_GROWTH,
    "distinct_tuple": f"SELECT COUNT(DISTINCT ({B60})) AS n FROM docs",
    "tuple_key": f"SELECT CAST(({B60}) AS VARCHAR) AS k, COUNT(*) AS n FROM docs GROUP BY 1",
    "tuple_like": f"SELECT COUNT(*) AS n FROM docs WHERE CAST(({B60}) AS VARCHAR) LIKE '%yz%'",
    "repeated_like": sw.REPEATED_LIKE,
    "built_memory": f"SELECT COUNT(*) AS n FROM docs WHERE length(concat({B60})) > 1",
    "tuple_compare": f"SELECT COUNT(*) AS n FROM docs WHERE ({B60}, {B60}) = ({B60}, {B60})",
    "tuple_in_list": "SELECT COUNT(*) AS n FROM docs WHERE (body, body) IN ("
    + ", ".join(["(body, body)"] * 40)
    + ")",
    # PostgreSQL refuses these two row forms (no total form), DuckDB answers them
    "distinct_pair": "SELECT COUNT(DISTINCT (user_id, body)) AS n FROM docs",
    "tuple_in": "SELECT COUNT(*) AS n FROM docs WHERE (user_id, body) IN ((7, 'note 6'), (8, 'x'))",
}


@pytest.mark.parametrize("name", sorted(PORTED))
def test_string_work_attacks_are_refused_before_any_charge(
    pg_docs: NeighbourPair, name: str
) -> None:
    assert _runs(pg_docs, PORTED[name]) == SOUND[0]


ORDINARY = {
    "short_patterns": "SELECT COUNT(*) AS n FROM docs WHERE body LIKE '%note%' OR "
    "body ILIKE 'NOTE 1_%' OR body LIKE '%ote 2%'",
    "key_of_two_copies": "SELECT lower(body) || '-' || body AS k, COUNT(*) AS n FROM docs "
    "GROUP BY 1",
    "two_distincts": "SELECT COUNT(DISTINCT body) AS d, COUNT(DISTINCT upper(body)) AS u FROM docs",
    "try_cast_text": "SELECT COUNT(*) AS n FROM docs WHERE TRY_CAST(body AS INTEGER) > 0 "
    "OR TRY_CAST(body AS DOUBLE) > 0",
}


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_ordinary_string_work_is_answered_on_both_sides(pg_docs: NeighbourPair, name: str) -> None:
    assert _runs(pg_docs, ORDINARY[name]) == SOUND[1]


# --- held up: NaN in a constrained NUMERIC on one person's rows ------------------------


@pytest.fixture(scope="module")
def pg_nan_side(
    pg_cluster: PgServer, engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Side]:
    """The demo data with a NUMERIC(10, 2) column on prompts (catalog DECIMAL(10, 2)),
    0 to 9 for everyone and 'NaN' on the removed person's rows (PostgreSQL 15's
    constrained NUMERIC holds NaN; DuckDB's DECIMAL cannot)."""
    folder = tmp_path_factory.mktemp("pg-probe-nan")
    edits = (
        "ALTER TABLE prompts ADD COLUMN amount numeric(10,2)",
        "UPDATE prompts SET amount = prompt_id % 10",
        "UPDATE prompts SET amount = 'NaN' WHERE user_id = {pid}",
    )
    yield from _pg_side(
        pg_cluster, fz_demo_policy(folder, engine_demo_db), folder, "nan", False, edits
    )


NAN = {
    "key": "SELECT amount AS k, COUNT(*) AS n FROM prompts GROUP BY 1",
    "key_int": "SELECT CAST(amount AS INTEGER) AS k, COUNT(*) AS n FROM prompts GROUP BY 1",
    "key_double": "SELECT CAST(amount AS DOUBLE) AS k, COUNT(*) AS n FROM prompts GROUP BY 1",
    "cast_bigint": "SELECT COUNT(*) AS n FROM prompts WHERE CAST(amount AS BIGINT) > 3",
    "arithmetic": "SELECT COUNT(*) AS n FROM prompts WHERE amount * 2 > 3 OR amount // 2 > 1 "
    "OR ROUND(amount) > 3 OR FLOOR(amount) > 3",
    "in_list": "SELECT COUNT(*) AS n FROM prompts WHERE amount IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)",
    "count_distinct": "SELECT COUNT(DISTINCT amount) AS n FROM prompts",
}


@pytest.mark.parametrize("name", sorted(NAN))
def test_a_nan_numeric_is_answered_on_both_sides(pg_nan_side: Side, name: str) -> None:
    report = pg_nan_side.pair.check(NAN[name])
    assert report.ok, report.describe()
    assert report.answered, report.outcome
