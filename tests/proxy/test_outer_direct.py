"""Issue 18: outer layers answered without DuckDB (proxy/outer_direct.py) give DuckDB's
answer exactly: the same names, the same rows in the same order, each value of the same
Python type and, for doubles, the same bits (sign of zero included)."""

from __future__ import annotations

import math
import random
import struct
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from proxy.engine import Engine
from proxy.intervals import with_row_index
from proxy.outer_direct import compile_outer
from proxy.release import PostProcessor
from proxy.request import QueryRequest
from tests.proxy.test_rewrite_golden import CASES, _read


@pytest.fixture(scope="module")
def post() -> Any:
    p = PostProcessor()
    yield p
    p.close()


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def _assert_same(post: PostProcessor, outer: str, table: pa.Table) -> bool:
    """Both answers agree when the direct path answers; True when it did."""
    direct = compile_outer(outer, post.double)
    assert direct is not None
    found = direct.run(table)
    names, rows = post.run(outer, table)
    if found is None:
        return False
    assert found[0] == names
    assert len(found[1]) == len(rows)
    for got, want in zip(found[1], rows, strict=True):
        assert len(got) == len(want)
        assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    return True


_DOUBLES = [
    0.0,
    -0.0,
    1.5,
    -1.5,
    1e300,
    -1e300,
    5e-324,
    -5e-324,
    1e-310,
    3e15,
    2.0**53 + 2,
    123456.789,
    -0.1,
    0.30000000000000004,
    1e308,
    -1e308,
    math.inf,
    -math.inf,
    math.nan,
]
_INTS = [0, 1, -1, 2, -7, 3, 10**6, 2**53 - 1, -(2**53) + 1, 2**53, 2**62, -(2**62)]


def _column(kind: str, rng: random.Random, rows: int, edge: bool) -> pa.Array:
    kind = kind.upper()
    if kind == "DOUBLE":
        pick = _DOUBLES if edge else None
        return pa.array(
            [rng.choice(pick) if pick else rng.uniform(-1e6, 1e6) for _ in range(rows)],
            type=pa.float64(),
        )
    if kind in ("BIGINT", "INTEGER"):
        return pa.array(
            [rng.choice(_INTS) if edge else rng.randint(-50, 5000) for _ in range(rows)],
            type=pa.int64(),
        )
    if kind == "VARCHAR":
        return pa.array(
            [rng.choice([None, "a", "Ü", "x y", ""]) for _ in range(rows)], type=pa.string()
        )
    if kind == "DATE":
        return pa.array(
            [rng.choice([None, date(2024, 1, 1), date(1, 1, 1)]) for _ in range(rows)],
            type=pa.date32(),
        )
    if kind == "BOOLEAN":
        return pa.array([rng.choice([None, True, False]) for _ in range(rows)], type=pa.bool_())
    if kind == "TIMESTAMP":
        # Edge tables hold microseconds past Python's range too (pyarrow raises there,
        # DuckDB gives text): such a table must go to DuckDB.
        stamps = [None, 0, 1_704_067_200_123_456, -62_135_596_800_000_000]
        stamps += [253_402_300_799_999_999] + ([2**62, -(2**62)] if edge else [])
        return pa.array([rng.choice(stamps) for _ in range(rows)], type=pa.timestamp("us"))
    raise AssertionError(kind)


def _table(columns: tuple[tuple[str, str], ...], rng: random.Random, rows: int, edge: bool):
    data = {name: _column(kind, rng, rows, edge) for name, kind in columns if name != "__row"}
    return with_row_index(pa.table(data))


def _plans() -> list[tuple[str, str]]:
    return [(p.stem, _read(p)[0]) for p in CASES]


@pytest.fixture(scope="module")
def engines(pums_engine: Engine, demo_engine: Engine) -> dict[str, Engine]:
    return {"pums": pums_engine, "demo": demo_engine}


EXTRA = (
    ("pums", "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS WHERE age > 3 GROUP BY sex"),
    ("pums", "SELECT educ, SUM(income) AS s, AVG(age) AS a, COUNT(*) FROM PUMS.PUMS GROUP BY educ"),
    ("pums", "SELECT race, AVG(income) AS a FROM PUMS.PUMS GROUP BY race"),
    ("demo", "SELECT region, AVG(age) AS a FROM users GROUP BY region"),
    ("demo", "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"),
    ("demo", "SELECT COUNT(*) AS n, SUM(tokens_in) FROM prompts WHERE flagged"),
    # the time series a dashboard draws: a TIMESTAMP key
    ("demo", "SELECT date_trunc('day', ts) AS d, COUNT(*) FROM prompts GROUP BY 1"),
    ("demo", "SELECT date_trunc('month', ts) AS m, AVG(tokens_in) FROM prompts GROUP BY 1"),
)


def test_golden_and_common_outer_layers_agree_with_duckdb(
    engines: dict[str, Engine], post: PostProcessor
) -> None:
    cases = [(policy, _read(p)[1]) for p in CASES for policy in [_read(p)[0]]] + list(EXTRA)
    rng = random.Random(18)
    direct_layers = 0
    for policy, sql in cases:
        engine = engines[policy]
        try:
            _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
        except Exception:  # a translated or refused text: nothing to compare
            continue
        if not plan.released_columns or compile_outer(plan.outer_sql, post.double) is None:
            continue
        answered = 0  # of the ordinary tables (the edge cases may go to DuckDB)
        for trial in range(40):
            edge = trial % 2 == 1
            table = _table(plan.released_columns, rng, rng.choice([0, 1, 2, 5]), edge)
            answered += _assert_same(post, plan.outer_sql, table) and not edge
        # The edge cases aside, the direct path answered.
        assert answered == 20, sql
        direct_layers += answered > 0
    # The plain shapes (bare keys, counts, sums, AVGs) of the fixtures take this path.
    assert direct_layers >= 8


AVG = (
    'SELECT __k0 AS "sex", GREATEST(__s2, 0) AS "n", TRY(LEAST(GREATEST(250000.0 + (__s0 / '
    'GREATEST(__s1, 1)), 0.0), 500000.0)) AS "AVG(income)", __s0 AS __ci2_s, __s1 AS __ci2_n, '
    "__row FROM released"
)


@pytest.mark.parametrize(
    "centre", ["250000.0", "0.1", "-0.3", "0.0", "1e+16", "123456789.987654321"]
)
def test_avg_form_at_edges(post: PostProcessor, centre: str) -> None:
    outer = AVG.replace("250000.0", centre).replace("0.0), 500000.0", "-1e+300), 1e+300")
    rng = random.Random(centre)
    answered = 0
    for _ in range(120):
        rows = 3
        s = [rng.choice([*_DOUBLES, rng.uniform(-1e9, 1e9)]) for _ in range(rows)]
        n = [rng.choice([*_INTS, rng.randint(-3, 3)]) for _ in range(rows)]
        table = with_row_index(
            pa.table(
                {
                    "__k0": pa.array([1, None, 0], type=pa.int64()),
                    "__s0": pa.array(s, type=pa.float64()),
                    "__s1": pa.array(n, type=pa.int64()),
                    "__s2": pa.array(n, type=pa.int64()),
                }
            )
        )
        answered += _assert_same(post, outer, table)
    assert answered >= 12  # many edge tables answered directly, the rest by DuckDB


def test_integer_sums_and_wide_values_go_to_duckdb_where_rounding_differs(
    post: PostProcessor,
) -> None:
    table = with_row_index(
        pa.table(
            {
                "__k0": pa.array([1, 2], type=pa.int64()),
                "__s0": pa.array([2**60 + 1, 5], type=pa.int64()),
                "__s1": pa.array([3, 2], type=pa.int64()),
                "__s2": pa.array([3, 2], type=pa.int64()),
            }
        )
    )
    direct = compile_outer(AVG, post.double)
    assert direct is not None and direct.run(table) is None
    small = table.set_column(1, "__s0", pa.array([7, -5], type=pa.int64()))
    assert _assert_same(post, AVG, small)


@pytest.mark.parametrize(
    "outer",
    [
        AVG.replace("FROM released", "FROM released WHERE __s1 > 2"),
        AVG + " ORDER BY 1",
        AVG + " LIMIT 1",
        AVG.replace("SELECT ", "SELECT DISTINCT "),
        'SELECT __s0 * 2 AS "x", __row FROM released',
        'SELECT __k0 AS "a", __s0 AS "A", __row FROM released',
        'SELECT __s0 AS "x", SUM(__s0) OVER () AS "t", __row FROM released',
        "SELECT * FROM released",
        'SELECT GREATEST(__s0, 1) AS "x", __row FROM released',
        'SELECT TRY(__s0 + 1) AS "x", __row FROM released',
    ],
)
def test_other_outer_layers_go_to_duckdb(post: PostProcessor, outer: str) -> None:
    assert compile_outer(outer, post.double) is None


def test_unsupported_column_types_and_nulls_go_to_duckdb(post: PostProcessor) -> None:
    outer = 'SELECT __k0 AS "k", GREATEST(__s0, 0) AS "n", __row FROM released'
    direct = compile_outer(outer, post.double)
    assert direct is not None
    # Time zones and other units: DuckDB's objects differ (an aware datetime in its
    # session's zone; nanoseconds) or are not reasoned about here.
    zoned = pa.array([1_704_067_200_000_000], type=pa.timestamp("us", tz="UTC"))
    nanos = pa.array(np.array(["2024-01-01T00:00"], dtype="datetime64[ns]"))
    for k, n in (
        (zoned, pa.array([1], type=pa.int64())),
        (nanos, pa.array([1], type=pa.int64())),
        (pa.array([1], type=pa.int32()), pa.array([1], type=pa.int64())),
        (pa.array([1], type=pa.int64()), pa.array([None], type=pa.int64())),
        (pa.array([1], type=pa.int64()), pa.array([1.0], type=pa.float64())),
    ):
        table = with_row_index(pa.table({"__k0": k, "__s0": n}))
        assert direct.run(table) is None


def test_an_engine_answer_is_the_same_either_way(pums_engine: Engine, tmp_path: Path) -> None:
    sql = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS WHERE age > 40 GROUP BY sex"
    result = pums_engine.run(QueryRequest(sql, epsilon=1.0))
    _, plan = pums_engine.prepare(QueryRequest(sql, epsilon=1.0))
    assert pums_engine._direct_outer(plan.outer_sql) is not None
    stored = pums_engine._stored(plan.cache_key)
    assert stored is not None
    names, rows = pums_engine.post.run(plan.outer_sql, with_row_index(stored[1]))
    shown = len(result.columns)
    assert tuple(names[:shown]) == tuple(result.columns)
    assert [tuple(r[:shown]) for r in rows] == [tuple(r) for r in result.rows]


# Review 5: hypothesis over the forms as outer.py writes them (bounds rendered by
# outer._number from random policy bounds of any magnitude) and released columns drawn
# with the extremes noise can give (±0, subnormals, ±inf, NaN, 2^53 and 2^62 edges).
_EXTREME_DOUBLES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.0**53, -(2.0**53), 1.7976931348623157e308]),
)
_EXTREME_INTS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**53 - 1, 2**53, -(2**53), 2**62, -(2**62), 2**63 - 1]),
)
_BOUNDS = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False)


def _avg_outer(lower: float, upper: float, total_first: bool) -> str:
    from proxy.outer import _div, _greatest, _least, _number

    centre = (lower + upper) / 2
    mean = exp.Add(
        this=_number(centre),
        expression=exp.Paren(
            this=_div(exp.column("__s0"), _greatest(exp.column("__s1"), exp.Literal.number(1)))
        ),
    )
    avg = exp.Try(this=_least(_greatest(mean, _number(lower)), _number(upper)))
    shown = _greatest(exp.column("__s1"), exp.Literal.number(0))
    items = [exp.alias_(avg, "a", quoted=True), exp.alias_(shown, "n", quoted=True)]
    bare = [exp.column("__s0"), exp.column("__k0"), exp.column("__row")]
    select = exp.Select(expressions=[*items, *bare] if total_first else [*bare, *items])
    return select.from_("released").sql(dialect="duckdb")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bounds=st.tuples(_BOUNDS, _BOUNDS).filter(lambda b: b[0] < b[1]),
    total_first=st.booleans(),
    int_total=st.booleans(),
    rows=st.lists(
        st.tuples(_EXTREME_DOUBLES, _EXTREME_INTS, _EXTREME_INTS, _EXTREME_DOUBLES),
        max_size=4,
    ),
)
def test_hypothesis_dpsql_forms_agree_with_duckdb_or_go_to_it(
    post: PostProcessor,
    bounds: tuple[float, float],
    total_first: bool,
    int_total: bool,
    rows: list[tuple[float, int, int, float]],
) -> None:
    outer = _avg_outer(*bounds, total_first)
    assert compile_outer(outer, post.double) is not None, outer
    totals = (
        pa.array([r[2] for r in rows], type=pa.int64())
        if int_total
        else pa.array([r[0] for r in rows], type=pa.float64())
    )
    table = with_row_index(
        pa.table(
            {
                "__k0": pa.array([r[3] for r in rows], type=pa.float64()),
                "__s0": totals,
                "__s1": pa.array([r[1] for r in rows], type=pa.int64()),
            }
        )
    )
    ANSWERED.append(_assert_same(post, outer, table))


ANSWERED: list[bool] = []


def test_hypothesis_forms_were_answered_directly_often() -> None:
    """(Runs after the hypothesis test, in file order.) The direct path answered a fair
    share of the drawn tables, so the comparison above was not vacuous."""
    if not ANSWERED:
        pytest.skip("the hypothesis test did not run in this session")
    assert sum(ANSWERED) >= len(ANSWERED) // 5, (sum(ANSWERED), len(ANSWERED))
