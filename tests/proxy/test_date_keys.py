"""Date and time keys are read within the years 1-9999 (per_person.DATE_KEY_RANGE). For
``DATE_TRUNC(unit, x)`` of a DATE or TIMESTAMP column the range is tested on x, inside
the truncation, instead of on the truncated value (per_person._truncated_within): the
same keys, one truncation per row instead of two (four on PostgreSQL, which reads the
key again in its keyed hash). These tests hold the two forms to the same answers on
values at and beyond both ends of the range, and keep the old form wherever the
argument is not exactly such a column or the unit's truncation could leave the range."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import numpy as np
import pytest

from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite import per_person
from tests.policies import users_policy

POLICY = users_policy(
    """
[tables.ev]
population = "users"
unit = "user_id"
max_groups = 3
max_rows_per_group = 4
"""
)

# Each edge on its own person's rows, among ordinary ones; the first instant of year 1,
# the last of 9999, one microsecond beyond each, the infinities, NULL.
EDGES = (
    "0001-01-01 00:00:00",
    "0001-01-01 00:00:00.000001",
    "0001-12-31 23:59:59.999999 BC",
    "9999-12-31 23:59:59.999999",
    "9999-12-31 00:00:00",
    "10000-01-01 00:00:00",
    "infinity",
    "-infinity",
    "2024-02-29 13:45:10.123456",
)
UNITS = (
    "microsecond",
    "millisecond",
    "second",
    "minute",
    "hour",
    "day",
    "month",
    "quarter",
    "year",
)
SEED = 12345


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp("date-keys")
    db = folder / "dates.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE ev (user_id BIGINT, ts TIMESTAMP, d DATE, tz TIMESTAMPTZ, "
            "ns TIMESTAMP_NS, s TIMESTAMP_S)"
        )
        con.execute("SET TimeZone = 'UTC'")
        for i, edge in enumerate(EDGES):
            ts = f"CAST('{edge}' AS TIMESTAMP)"
            con.execute(
                f"INSERT INTO ev SELECT {i} * 10 + j % 5, {ts}, TRY_CAST({ts} AS DATE), "
                f"{ts}, TRY_CAST({ts} AS TIMESTAMP_NS), TRY_CAST({ts} AS TIMESTAMP_S) "
                "FROM range(0, 12) t(j)"
            )
        con.execute(
            "INSERT INTO ev SELECT 1000 + j % 40, TIMESTAMP '2024-01-01' + j * INTERVAL 7 HOUR, "
            "DATE '2024-01-01' + CAST(j AS INT), NULL, NULL, NULL FROM range(0, 400) t(j)"
        )
        con.execute("INSERT INTO ev VALUES (2000, NULL, NULL, NULL, NULL, NULL)")
    e = Engine(parse_policy(POLICY.format(db=db, folder=folder), base_dir=folder))
    yield e
    e.close()


def _core(engine: Engine, sql: str) -> str:
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    return plan.core_sql


def _rows(engine: Engine, core: str) -> list[tuple[object, ...]]:
    out = engine.executor.run(core, [SEED])
    columns = list(out.values())
    return sorted((tuple(str(c[i]) for c in columns) for i in range(len(columns[0]))), key=str)


def _reference(engine: Engine, sql: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The core as written before: the range tested on the truncated key."""
    with monkeypatch.context() as m:
        m.setattr(per_person, "_truncated_within", lambda core, key: None)
        fresh = Engine(engine.policy)  # no plan memoised
        try:
            return _core(fresh, sql)
        finally:
            fresh.close()


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("column", ["ts", "d"])
def test_the_range_tested_before_truncating_gives_the_same_keys(
    engine: Engine, unit: str, column: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = f"SELECT date_trunc('{unit}', {column}) AS k, COUNT(*) AS n FROM ev GROUP BY 1"
    core = _core(engine, sql)
    reference = _reference(engine, sql, monkeypatch)
    assert core != reference, "the truncation of a plain column reads the range first"
    assert core.count("DATE_TRUNC") == 1 and reference.count("DATE_TRUNC") == 2
    got, expected = _rows(engine, core), _rows(engine, reference)
    assert got == expected
    keys = [r[0] for r in got]
    # Nothing beyond the years 1-9999 became a key; the edges within them did.
    assert not any(k.startswith(("10000", "-", "inf")) or "BC" in k for k in keys)
    assert any(k.startswith("0001-01-01") for k in keys)
    assert any(k.startswith("9999-") for k in keys)


@pytest.mark.parametrize(
    "key",
    [
        "date_trunc('week', ts)",  # a week can start in the year before year 1
        "date_trunc('decade', ts)",
        "date_trunc('century', d)",
        "date_trunc('day', tz)",  # by the session's time zone
        "date_trunc('day', ns)",  # nanoseconds: compared after a conversion
        "date_trunc('day', s)",
        "date_trunc('day', ts + INTERVAL 1 DAY)",  # not a column
    ],
)
def test_other_truncations_keep_the_range_tested_on_the_key(
    engine: Engine, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) AS n FROM ev GROUP BY 1"
    core = _core(engine, sql)
    assert core == _reference(engine, sql, monkeypatch)
    assert not any(k.startswith(("10000", "-", "inf")) for k, *_ in _rows(engine, core))


def test_the_released_answer_has_the_same_keys(engine: Engine) -> None:
    """End to end (charged, noised): the month keys are those of the data within range."""
    r = engine.run(
        QueryRequest(
            "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM ev GROUP BY 1", epsilon=5.0
        )
    )
    months = {str(row[0])[:7] for row in r.rows}
    assert months <= {
        "0001-01",
        "9999-12",
        "2024-01",
        "2024-02",
        "2024-03",
        "2024-04",
        "2024-05",
        "None",
    }
    assert np.all([row[0] is None or 1 <= row[0].year <= 9999 for row in r.rows])
