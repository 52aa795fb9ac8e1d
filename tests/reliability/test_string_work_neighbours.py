"""One person's text deciding a failure after the charge, through string work the
checks under-counted (an adversarial probe, 2026-12-06; each failed before its fix):

1. a constant LIKE/ILIKE pattern of P characters was counted as P/64 passes over the
   text, where DuckDB's (and PostgreSQL's) matcher makes about one per character: one
   person's 3M-character text timed the core out on D only, and on the unmodified demo a
   CASE pinned to the heaviest person cost 0.9 s against 3 ms. Now P passes
   (proxy/string_growth._like_passes): such patterns are refused before any charge.
2. a grouping key or DISTINCT argument of 60 copies of a text column (within the 64-fold
   growth allowed for evaluated strings) ran out of the default 2 GB after the charge on
   one person's 48 MB of text, on D only. Stored strings now hold at most 4 copies of a
   column (proxy/string_growth.check_stored_strings).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from tests.policies import users_policy
from tests.reliability.conftest import fz_demo_policy
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
)


def docs_db(folder: Path, long_rows: int, length: int) -> Path:
    """``folder/docs.duckdb``: 60 people with short notes, and the target's ``long_rows``
    documents of ``length`` characters (distinct)."""
    db = folder / "docs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE docs (user_id BIGINT, body VARCHAR)")
        con.execute("INSERT INTO docs SELECT i % 60 + 1, 'note ' || i FROM range(0, 240) t(i)")
        con.execute(
            f"INSERT INTO docs SELECT {TARGET}, repeat('y', {length}) || i "
            f"FROM range({long_rows}) t(i)"
        )
    return db


def _docs_pair(
    folder: Path,
    long_rows: int,
    timeout_s: float,
    *,
    length: int = 3_000_000,
    memory_limit: str | None = None,
) -> NeighbourPair:
    """60 people with short notes; the target also wrote ``long_rows`` documents of
    ``length`` characters (distinct)."""
    db = docs_db(folder, long_rows, length)
    text = POLICY
    if memory_limit is not None:
        text = text.replace(
            'mechanism = "gaussian"', f'mechanism = "gaussian"\nmemory_limit = "{memory_limit}"'
        )
    policy = parse_policy(text.format(db=db, folder=folder), base_dir=folder)
    neighbours = build_neighbours(
        policy, folder / "nb", Removal.CHOSEN, timeout_s=timeout_s, person=TARGET
    )
    return NeighbourPair(neighbours)


def _runs(pair: NeighbourPair, sql: str) -> list[tuple[str, int]]:
    """(outcome, ledger events added) on D and on D' through Engine.run."""
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


LIKE = "SELECT COUNT(*) AS n FROM docs WHERE body LIKE '%y" + "_" * 3990 + "z%'"
ILIKE = "SELECT COUNT(*) AS n FROM docs WHERE body ILIKE '%" + "y" * 3990 + "z%'"


@pytest.mark.parametrize("sql", [LIKE, ILIKE], ids=["like_underscores", "ilike_literal"])
def test_a_constant_like_pattern_times_out_on_one_side_only(tmp_path: Path, sql: str) -> None:
    with _docs_pair(tmp_path, 1, timeout_s=5.0) as pair:
        # today: bounded core: D timeout (13 s against 5 s), D' answered in 4 ms
        report = pair.check(sql, run_engine=False)
        assert report.ok, report.describe()
        # today: [('timeout', 1), ('answered', 1)] -- charged on both sides
        runs = _runs(pair, sql)
        assert runs == [("unsupported_sql", 0)] * 2, runs  # refused before any charge


def test_a_like_pinned_to_the_heaviest_person_costs_seconds_on_the_demo(
    tmp_path: Path, fz_demo_db: Path
) -> None:
    """No planted data: a CASE gives the heaviest person's 187 prompts an 18,000-character
    constant, within string_growth's limits (18,000 x 228/64 < 65,536)."""
    policy = fz_demo_policy(tmp_path, fz_demo_db)
    neighbours = build_neighbours(policy, tmp_path / "nb", Removal.HEAVIEST, timeout_s=30.0)
    with NeighbourPair(neighbours) as pair:
        pid = neighbours.person
        sql = (
            f"SELECT COUNT(*) AS n FROM prompts WHERE (CASE WHEN user_id = {pid} THEN '"
            + "y" * 18000
            + "' ELSE model END) LIKE '%y"
            + "_" * 228
            + "z%'"
        )
        report = pair.check(sql, run_engine=False)
        assert report.ok, report.describe()
        if report.answered:  # (before the fix: about 0.9 s on D against 0.003 s on D')
            d, d_prime = report.core_seconds
            assert d < 20 * d_prime + 0.1, report.core_seconds
        else:
            assert report.outcome == "unsupported_sql"


KEY = "concat(" + ", ".join(["body"] * 60) + ")"


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT {KEY} AS k, COUNT(*) AS n FROM docs GROUP BY 1",
        f"SELECT COUNT(DISTINCT {KEY}) AS n FROM docs",
    ],
    ids=["key", "count_distinct"],
)
def test_a_grown_text_key_runs_out_of_memory_on_one_side_only(tmp_path: Path, sql: str) -> None:
    """The default memory_limit (2GB); the target's 16 documents hold 48 MB of text."""
    with _docs_pair(tmp_path, 16, timeout_s=60.0) as pair:
        # today: bounded core: D internal (OutOfMemoryException); D' answered
        report = pair.check(sql, run_engine=False)
        assert report.ok, report.describe()
        runs = _runs(pair, sql)  # before: [('internal', 1), ('answered', 1)]
        assert runs == [("unsupported_sql", 0)] * 2, runs  # refused before any charge


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM docs WHERE body LIKE '%note%' OR body ILIKE 'NOTE 1_%' "
        "OR body LIKE '%ote 2%'",
        "SELECT lower(body) || '-' || body AS k, COUNT(*) AS n FROM docs GROUP BY 1",
        "SELECT COUNT(DISTINCT body) AS d, COUNT(DISTINCT upper(body)) AS u FROM docs",
    ],
    ids=["short_patterns", "key_of_two_copies", "two_distincts"],
)
def test_ordinary_patterns_and_keys_are_answered_on_both_sides(tmp_path: Path, sql: str) -> None:
    with _docs_pair(tmp_path, 1, timeout_s=30.0) as pair:
        report = pair.check(sql, run_engine=False)
        assert report.ok and report.answered, report.describe()


# --- a UNION ALL arm hid copies (a review of this round's, 2026-12-06) ---------------
# A UNION ALL arm hid string copies from the outer query's checks (a review of this
# round's, 2026-12-06): the arm built ``concat(body x 60)`` under a plain name, and the
# outer GROUP BY or COUNT(DISTINCT) stored it as one copy, so one person's text ran the
# engine out of memory after the charge on D only, and the outer 64-fold bound saw one
# value where there were 60. An arm's column is now at most one input value (plus
# constants, proxy/union_rows.py): refused before any charge. Each case failed before.

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


@pytest.mark.parametrize("sql", [UNION_GROUP, UNION_DISTINCT], ids=["group", "distinct"])
def test_a_union_all_arm_hides_copies_from_the_stored_strings_check(
    tmp_path: Path, sql: str
) -> None:
    # 16 distinct texts of 1M characters: 60 copies each is ~960 MB of keys, past 256MB.
    with _docs_pair(tmp_path, 16, 30.0, length=1_000_000, memory_limit="256MB") as pair:
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
    with _docs_pair(tmp_path, 1, 30.0, length=1_000_000, memory_limit="256MB") as pair:
        runs = _runs(pair, UNION_GROWTH)
        assert runs == [("unsupported_sql", 0)] * 2, runs


# --- row constructors, repeats in filters, and memory past the limit (2026-12-06) -----
# A second adversarial probe of the string checks found three more ways for one person's
# text to decide a failure after the charge, each refused before any charge now (each
# case failed before):
# * a row constructor counted as no text: COUNT(DISTINCT (body x 60)) and a key
#   CAST((body x 60) AS VARCHAR) ran out of memory on D only; nested CAST((x, 'x') AS
#   VARCHAR) doubles a value's quotes at each level, so 21 levels over one name of 3,000
#   apostrophes did too. Tuples now stand only in comparisons, IN lists and
#   COUNT(DISTINCT (a, b)), and hold the sum of their parts.
# * a LIKE repeated in separate conjuncts was counted once; DuckDB runs each copy: 130
#   copies of a 52-character pattern timed out on D's single 3M-character row.
# * an allowed 60-fold concat took 1.3 GB past a 256 MB memory_limit on D only (DuckDB
#   keeps expression strings outside it): a row's built strings are now at most 8 times
#   its longest input value.

B60 = ", ".join(["body"] * 60)
PATTERN = "'%y" + "_" * 50 + "z%'"
REPEATED_LIKE = "SELECT COUNT(*) AS n FROM docs WHERE " + " AND ".join(
    f"(body LIKE {PATTERN}) = (user_id = -{k})" for k in range(130)
)


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT COUNT(DISTINCT ({B60})) AS n FROM docs",
        f"SELECT CAST(({B60}) AS VARCHAR) AS k, COUNT(*) AS n FROM docs GROUP BY 1",
        f"SELECT COUNT(*) AS n FROM docs WHERE CAST(({B60}) AS VARCHAR) LIKE '%yz%'",
        REPEATED_LIKE,
        f"SELECT COUNT(*) AS n FROM docs WHERE length(concat({B60})) > 1",
        # a review of the fix (2026-12-06): comparing rows reads every field, and DuckDB
        # does not fold (body, ...) = (body, ...) as it folds body = body
        f"SELECT COUNT(*) AS n FROM docs WHERE ({B60}, {B60}) = ({B60}, {B60})",
        "SELECT COUNT(*) AS n FROM docs WHERE (body, body) IN ("
        + ", ".join(["(body, body)"] * 40)
        + ")",
        # the PostgreSQL probe (2026-12-06): repeats in CASE branches and in separate
        # aggregates were counted once, and work under a cast to a number not at all
        "SELECT SUM(CASE "
        + " ".join(f"WHEN body LIKE {PATTERN} THEN {k}" for k in range(30))
        + " ELSE 0 END) AS s FROM docs",
        "SELECT "
        + ", ".join(
            f"SUM(CASE WHEN body LIKE {PATTERN} THEN {k} ELSE 0 END) AS s{k}" for k in range(20)
        )
        + " FROM docs",
        "SELECT "
        + ", ".join(
            f"{f}(CAST(CASE WHEN body LIKE {PATTERN} THEN 1 ELSE 2 END AS DOUBLE) * 1.5) AS a{i}"
            for i, f in enumerate(("SUM", "AVG", "VAR_SAMP", "STDDEV"))
        )
        + " FROM docs",
    ],
    ids=[
        "distinct_tuple",
        "tuple_key",
        "tuple_like",
        "repeated_like",
        "built_memory",
        "tuple_compare",
        "tuple_in_list",
        "case_branches",
        "aggregates",
        "four_aggregates",
    ],
)
def test_tuples_repeats_and_built_strings_are_refused_before_any_charge(
    tmp_path: Path, sql: str
) -> None:
    # before: D out of memory or timed out, D' answered, both charged
    with _docs_pair(tmp_path, 2, 30.0, length=1_000_000, memory_limit="256MB") as pair:
        report = pair.check(sql, run_engine=False)
        assert report.ok, report.describe()
        assert _runs(pair, sql) == [("unsupported_sql", 0)] * 2


def test_nested_tuple_casts_of_one_name_are_refused_before_any_charge(tmp_path: Path) -> None:
    db = tmp_path / "people.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE people (user_id BIGINT, name VARCHAR)")
        con.execute("INSERT INTO people SELECT i, 'person ' || i FROM range(1, 61) t(i)")
        con.execute(f"UPDATE people SET name = repeat(chr(39), 3000) WHERE user_id = {TARGET}")
    text = users_policy(
        """
[tables.people]
population = "users"
unit = "user_id"
one_row_per_person = true
"""
    )
    policy = parse_policy(text.format(db=db, folder=tmp_path), base_dir=tmp_path)
    neighbours = build_neighbours(
        policy, tmp_path / "nb", Removal.CHOSEN, timeout_s=30.0, person=TARGET
    )
    nested = "name"
    for _ in range(21):
        nested = f"CAST(({nested}, 'x') AS VARCHAR)"
    sql = f"SELECT COUNT(*) AS n FROM people WHERE length({nested}) > 0"
    with NeighbourPair(neighbours) as pair:
        # before: D out of memory on one row of 3,000 apostrophes; D' answered in 0.5 s
        report = pair.check(sql, run_engine=False)
        assert report.ok, report.describe()
        assert _runs(pair, sql) == [("unsupported_sql", 0)] * 2


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(DISTINCT (user_id, body)) AS n FROM docs",
        "SELECT COUNT(*) AS n FROM docs WHERE (user_id, body) IN ((7, 'note 6'), (8, 'x'))",
        # (each copy of lower builds a string: 6 stay within the 8 a row may build)
        "SELECT SUM(CASE "
        + " ".join(f"WHEN lower(body) LIKE '%e {k}%' THEN {k}" for k in range(6))
        + " ELSE 0 END) AS s FROM docs",
    ],
    ids=["distinct_pair", "tuple_in", "case_of_one_lower"],
)
def test_tuples_and_repeats_in_a_projection_are_still_answered(tmp_path: Path, sql: str) -> None:
    with _docs_pair(tmp_path, 1, timeout_s=30.0, length=100_000) as pair:
        report = pair.check(sql, run_engine=False)
        assert report.ok and report.answered, report.describe()
