"""Issue 18 (planning): key types read from the catalog instead of binding the core in
the engine, only where the catalog types the whole query (proxy/catalog_types.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from proxy import catalog_types
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed

# Queries the catalog types completely: their key types must be DESCRIBE's, exactly.
PLAIN = [
    ("pums", "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"),
    (
        "pums",
        "SELECT educ, SUM(income) FROM PUMS.PUMS WHERE age > 30 AND NOT married = 1 GROUP BY educ",
    ),
    ("pums", "SELECT COUNT(*) FROM PUMS.PUMS WHERE age BETWEEN 20 AND 40 OR income IS NULL"),
    (
        "pums",
        "SELECT sex, educ, AVG(income * 2 - age) FROM PUMS.PUMS WHERE educ IN (1, 2, 3) "
        "GROUP BY sex, educ HAVING COUNT(*) > 3 ORDER BY 1",
    ),
    ("demo", "SELECT region, COUNT(*) FROM users WHERE plan = 'pro' GROUP BY region"),
    ("demo", "SELECT model, COUNT(*) FROM prompts WHERE model IN ('a', 'b') GROUP BY model"),
]
# Queries it cannot vouch for: functions, casts, division, strings in arithmetic, joins,
# subqueries, distinct counts, quantiles. These bind the core in the engine as before.
NOT_PLAIN = [
    ("pums", "SELECT sex, AVG(income / 2) FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT sex, COUNT(*) FROM PUMS.PUMS WHERE ABS(age) > 3 GROUP BY sex"),
    ("pums", "SELECT CAST(sex AS VARCHAR), COUNT(*) FROM PUMS.PUMS GROUP BY 1"),
    ("pums", "SELECT sex, COUNT(DISTINCT educ) FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT sex, MEDIAN(income) FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT sex, COUNT(*) FROM PUMS.PUMS WHERE age > '3' GROUP BY sex"),
    ("demo", "SELECT region, COUNT(*) FROM prompts JOIN users USING (user_id) GROUP BY region"),
]


def _engine(request: pytest.FixtureRequest, which: str) -> Engine:
    return request.getfixturevalue(f"{which}_engine")


def _key_types(engine: Engine, sql: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(the catalog's answer, the engine's DESCRIBE of the core) for one query."""
    shape = engine.checked_shape(QueryRequest(sql)).shape
    core = engine._structure_for(QueryRequest(sql)).core
    described = dict(engine.executor.describe(core.sql, [0] if takes_seed(core.sql) else []))
    return catalog_types.key_types(shape), tuple(described[k] for k in core.key_columns())


@pytest.mark.parametrize(("which", "sql"), PLAIN)
def test_plain_queries_take_the_catalogs_key_types(
    request: pytest.FixtureRequest, which: str, sql: str
) -> None:
    fast, described = _key_types(_engine(request, which), sql)
    assert fast is not None, "the catalog should type this query"
    assert fast == described


@pytest.mark.parametrize(("which", "sql"), NOT_PLAIN)
def test_other_queries_still_bind_the_core_in_the_engine(
    request: pytest.FixtureRequest, which: str, sql: str
) -> None:
    engine = _engine(request, which)
    try:
        shape = engine.checked_shape(QueryRequest(sql)).shape
    except DPSQLError:
        return  # refused by the checker: never reaches the key types
    assert catalog_types.key_types(shape) is None


def test_a_comparison_the_engine_cannot_bind_is_still_refused_before_any_charge(
    pums_engine: Engine,
) -> None:
    """A number compared with a date: the catalog does not vouch for it, so the core is
    bound in the engine and the query refused, with nothing charged."""
    before = pums_engine.ledger.history()
    sql = "SELECT sex, COUNT(*) FROM PUMS.PUMS WHERE age > DATE '2020-01-01' GROUP BY sex"
    with pytest.raises(DPSQLError) as refused:
        pums_engine.run(QueryRequest(sql, epsilon=1.0))
    assert refused.value.code == "bad_request"
    assert "cannot run" in refused.value.message
    assert pums_engine.ledger.history() == before


# --- review 3: adversarial tables --------------------------------------------------------
#
# Every column type the catalog may meet, a quoted mixed-case name, a column that is NULL
# in every row, extreme values, and a CSV source (with the table's types declared, as
# the engine reads it). For each query: either the catalog does not vouch for it, or DESCRIBE binds
# the core and names exactly the catalog's key types; and a vouched-for query, run, is
# answered (nothing after the charge fails).

_ADVERSARIAL_COLUMNS = """
 uid INTEGER, i8 TINYINT, i16 SMALLINT, i32 INTEGER, i64 BIGINT, f FLOAT, d DOUBLE,
 dec DECIMAL(10, 2), dt DATE, ts TIMESTAMP, b BOOLEAN, s VARCHAR, "MixedCase" INTEGER,
 nul INTEGER, big BIGINT, hi HUGEINT, mood ENUM('sad', 'ok')
"""
_ADVERSARIAL_ROWS = """
 SELECT i % 200 + 1, (i % 100)::TINYINT, (i % 30000)::SMALLINT, i, i * 1000000000,
 i / 7.0, i / 3.0, i / 4.0, DATE '2020-01-01' + (i % 30)::INTEGER,
 TIMESTAMP '2020-01-01' + INTERVAL (i % 30) DAY, i % 2 = 0, 's' || (i % 5), i % 4, NULL,
 9223372036854775807 - i, i, CASE WHEN i % 2 = 0 THEN 'ok' ELSE 'sad' END
 FROM range(0, 2000) r(i)
"""
_ADVERSARIAL_POLICY = """
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
[database]
{source}
[ledger]
path = "{ledger}"
[populations.people]
epsilon_cap = 100000.0
delta = 1e-6
[tables.t]
population = "people"
unit = "uid"
max_groups = 4
max_rows_per_group = 5
columns.i8 = {{ lower = -0.5, upper = 10.5 }}
columns.i16 = {{ lower = 0, upper = 100 }}
columns.i32 = {{ lower = 0.5, upper = 2000.5 }}
columns.i64 = {{ lower = 0, upper = 1e12 }}
columns.f = {{ lower = 0, upper = 1000 }}
columns.d = {{ lower = 0, upper = 1000 }}
columns.big = {{ lower = 0, upper = 1e17 }}
columns.nul = {{ lower = 0, upper = 10 }}
columns.MixedCase = {{ lower = 0, upper = 3 }}
columns.b = {{ values = [false, true] }}
columns.s = {{ values = ["s0", "s1", "s2", "s3", "s4"] }}
"""
ADVERSARIAL = [
    *(f"SELECT {k}, COUNT(*) FROM t GROUP BY {k}" for k in ("i8", "i16", "i32", "i64", "dt")),
    *(f"SELECT {k}, COUNT(*) FROM t GROUP BY {k}" for k in ("b", "s", "nul", "big", "mood")),
    'SELECT "MixedCase", COUNT(*) FROM t GROUP BY "MixedCase"',
    "SELECT mixedcase, COUNT(*) FROM T GROUP BY MIXEDCASE",
    "SELECT i8, i16, s, b, dt, COUNT(*) FROM t GROUP BY i8, i16, s, b, dt",
    "SELECT s AS i8, COUNT(*) FROM t GROUP BY i8",  # an alias shadowing a column
    "SELECT i8 AS s, SUM(i8) AS i16 FROM t GROUP BY 1 ORDER BY i16",
    "SELECT s, SUM(i32 * i32), AVG(i16 * i16 * i16) FROM t GROUP BY s",
    "SELECT s, SUM(nul), AVG(nul), COUNT(nul) FROM t GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE i32 * 999999999999999999 > 0 GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE i64 * i64 > 0 AND -big < 0 GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE big + 100 > 0 OR 1e308 * 1e308 > 0 GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE i8 = 300 AND i16 IN (1, 100000, 1e10) GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE d > 1e-400 AND f = 0.1 GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE i32 = 0.0000000000000001 GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE dec > 1 AND hi > 1 GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE s IN (1, 2) OR i8 IN ('1', '2') GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE mood = 'ok' GROUP BY s",
    "SELECT s, COUNT(*) FROM t WHERE nul IS NULL AND NOT (i8 IS NULL) GROUP BY s",
    "SELECT dt, SUM(d * 1e-300), AVG(i8 + 0.1) FROM t GROUP BY dt",
]


def _adversarial_engine(folder: Path, csv: bool) -> Engine:
    db = folder / "adversarial.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE t ({_ADVERSARIAL_COLUMNS})")
    con.execute(f"INSERT INTO t {_ADVERSARIAL_ROWS}")
    if csv:
        con.execute(f"COPY t TO '{folder / 't.csv'}' (HEADER, DELIMITER ',')")
    con.close()
    source = f'csv = {{ "t" = "{folder / "t.csv"}" }}' if csv else f'duckdb = "{db}"'
    if csv:  # the table's own types, declared (an ENUM is read as text)
        types = ", ".join(
            f'"{name}" = "{"VARCHAR" if kind.startswith("ENUM") else kind}"'
            for name, kind, *_ in duckdb.connect(str(db), read_only=True)
            .execute("DESCRIBE t")
            .fetchall()
        )
        source += f"\ncsv_types = {{ t = {{ {types} }} }}"
    text = _ADVERSARIAL_POLICY.format(source=source, ledger=folder / "ledger.sqlite")
    return Engine(parse_policy(text, base_dir=folder))


@pytest.fixture(scope="module", params=["duckdb", "csv"])
def adversarial_engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp(f"catalog-types-{request.param}")
    engine = _adversarial_engine(folder, request.param == "csv")
    yield engine
    engine.close()


@pytest.mark.parametrize("sql", ADVERSARIAL)
def test_the_catalogs_key_types_are_describes_on_adversarial_tables(
    adversarial_engine: Engine, sql: str
) -> None:
    engine = adversarial_engine
    try:
        shape = engine.checked_shape(QueryRequest(sql)).shape
        core = engine._structure_for(QueryRequest(sql)).core
    except DPSQLError:
        return  # refused while planning, before the key types (and any charge)
    fast = catalog_types.key_types(shape)
    if fast is None:
        return  # the engine binds the core itself
    # Vouched for: DESCRIBE must bind the core (no DPSQLError) and agree.
    described = dict(engine.executor.describe(core.sql, [0] if takes_seed(core.sql) else []))
    assert fast == tuple(described[k] for k in core.key_columns())
    answer = engine.run(QueryRequest(sql, epsilon=0.5))
    assert answer.privacy.charge_id is not None


def test_most_adversarial_queries_are_vouched_for(adversarial_engine: Engine) -> None:
    """The comparison above has teeth: the catalog types most of those queries."""
    vouched = 0
    for sql in ADVERSARIAL:
        try:
            shape = adversarial_engine.checked_shape(QueryRequest(sql)).shape
        except DPSQLError:
            continue
        vouched += catalog_types.key_types(shape) is not None
    assert vouched >= len(ADVERSARIAL) // 2
