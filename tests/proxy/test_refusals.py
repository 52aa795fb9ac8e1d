"""Every refusal class of the engine: the stable code, a message and a hint, and no
trace in the budget ledger (no event appended, no ε spent).

PUMS (one row per person, population ``pums``) covers the SQL surface; the generated
demo data (population ``users``) covers private joins and table grants.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.policies import fixed_caps

REPO = Path(__file__).resolve().parents[2]
PUMS_DIR = REPO / "sample_data" / "pums"
P = "PUMS.PUMS"


def _patched(text: str, old: str, new: str) -> str:
    assert old in text, f"the sample policy no longer contains {old!r}"
    return text.replace(old, new)


@pytest.fixture(scope="module")
def pums(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("pums")
    text = (PUMS_DIR / "policy.toml").read_text()
    text = _patched(text, '"PUMS_pid.csv"', f'"{PUMS_DIR / "PUMS_pid.csv"}"')
    text = _patched(
        text, 'path = "../../state/pums-ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"'
    )
    engine = Engine(parse_policy(text, base_dir=tmp))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("demo")
    db = generate(tmp / "usage.duckdb", people=300, prompts=3000, seed=5)
    text = fixed_caps((REPO / "sample_data" / "policy.toml").read_text())
    text = _patched(text, 'duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = _patched(text, 'path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"')
    engine = Engine(parse_policy(text, base_dir=tmp))
    yield engine
    engine.close()


@dataclass(frozen=True)
class Snapshot:
    events: int
    spent: tuple[float, ...]


def snapshot(engine: Engine) -> Snapshot:
    pops = engine.ledger.populations()
    return Snapshot(
        len(engine.ledger.history(limit=100000)),
        tuple(engine.ledger.spent(p).epsilon for p in pops),
    )


def refused(engine: Engine, request: QueryRequest, code: str) -> DPSQLError:
    """Run ``request``, expect refusal ``code`` and an untouched ledger."""
    before = snapshot(engine)
    with pytest.raises(DPSQLError) as info:
        engine.run(request)
    error = info.value
    assert error.code == code, f"{error.code}: {error.message}"
    assert error.message.strip()
    assert error.hint.strip()
    assert snapshot(engine) == before
    return error


# --- SQL the engine does not answer, on PUMS -------------------------------------------

UNSUPPORTED = [
    pytest.param(f"SELECT age, income FROM {P}", id="raw-columns"),
    pytest.param(f"SELECT COUNT(*) FROM {P} GROUP BY pid", id="group-by-unit"),
    pytest.param(f"SELECT COUNT(*) FROM {P} GROUP BY pid % 2", id="group-by-unit-expr"),
    pytest.param("SELECT * FROM read_csv('x.csv')", id="read_csv"),
    pytest.param(
        f"SELECT COUNT(*) FROM read_csv('{PUMS_DIR / 'PUMS_pid.csv'}')", id="read_csv-agg"
    ),
    pytest.param(f"COPY {P} TO 'x.csv'", id="copy"),
    pytest.param("ATTACH 'x.db'", id="attach"),
    pytest.param("PRAGMA version", id="pragma"),
    pytest.param("SET threads=1", id="set"),
    pytest.param("INSTALL httpfs", id="install"),
    pytest.param("LOAD httpfs", id="load"),
    pytest.param("CALL dbgen(sf=1)", id="call"),
    pytest.param(f"CREATE TABLE t AS SELECT * FROM {P}", id="ddl"),
    pytest.param(f"DELETE FROM {P}", id="dml"),
    pytest.param(f"SELECT COUNT(*) FROM {P}; SELECT 1", id="two-statements"),
    pytest.param(f"SELECT COUNT(*) FROM {P} UNION SELECT COUNT(*) FROM {P}", id="union"),
    pytest.param(
        f"SELECT COUNT(*) FROM (SELECT age FROM {P} EXCEPT SELECT age FROM {P}) t",
        id="except-in-from",
    ),
    pytest.param(f"SELECT COUNT(*) OVER () FROM {P}", id="window"),
    pytest.param(
        f"SELECT sex, COUNT(*) FROM {P} GROUP BY sex HAVING RANK() OVER (ORDER BY sex) = 1",
        id="window-in-having",
    ),
    pytest.param(
        f"SELECT DISTINCT age, COUNT(*) FROM {P} GROUP BY age", id="distinct-with-aggregate"
    ),
    pytest.param(
        f"SELECT COUNT(*) FROM {P} WHERE RANK() OVER (ORDER BY age) = 1", id="window-in-where"
    ),
    # MIN/MAX/quantiles are answered (tests/proxy/test_quantile_sql.py); these shapes not.
    pytest.param(f"SELECT MIN(pid) FROM {P}", id="min-unbounded"),
    pytest.param(f"SELECT QUANTILE_CONT(age, [0.25, 0.5]) FROM {P}", id="quantile-list"),
    pytest.param(f"SELECT QUANTILE_CONT(age, 1.5) FROM {P}", id="quantile-level"),
    pytest.param(f"SELECT median(DISTINCT age) FROM {P}", id="median-distinct"),
    pytest.param(f"SELECT median(age) OVER () FROM {P}", id="median-window"),
    pytest.param(f"SELECT MAX(age, 3) FROM {P}", id="max-top-n"),
    pytest.param(f"SELECT COUNT(DISTINCT age, sex) FROM {P}", id="count-distinct-two-values"),
    pytest.param(f"SELECT SUM(DISTINCT age, sex) FROM {P}", id="sum-distinct-two-values"),
    pytest.param(f"SELECT current_setting('threads'), COUNT(*) FROM {P}", id="current_setting"),
    pytest.param(f"SELECT COUNT(*) FROM {P} WHERE random() < 0.5", id="random-in-where"),
    pytest.param(
        f"SELECT COUNT(*) FROM {P} WHERE current_time > TIME '00:00:00'", id="time-of-day"
    ),
    pytest.param(f"SELECT COUNT(*) FROM {P} WHERE getenv('HOME') = 'x'", id="getenv"),
    pytest.param(
        f"SELECT getenv('HOME') FROM (SELECT sex, COUNT(*) AS n FROM {P} GROUP BY sex) t",
        id="getenv-over-a-subquery",
    ),
    pytest.param(
        f"SELECT COUNT(*) FROM {P} WHERE age > (SELECT AVG(age) FROM {P})",
        id="scalar-subquery",
    ),
    pytest.param(
        f"SELECT COUNT(*) FROM {P} WHERE age IN (SELECT age FROM {P} WHERE income > 1000)",
        id="in-subquery",
    ),
    pytest.param(f"SELECT COUNT(*) FROM {P} a RIGHT JOIN {P} b ON a.pid = b.pid", id="right-join"),
    pytest.param(f"SELECT COUNT(*) FROM {P} a FULL JOIN {P} b ON a.pid = b.pid", id="full-join"),
    pytest.param(f"SELECT COUNT(*) FROM {P} a JOIN {P} b ON a.age = b.age", id="join-not-on-unit"),
    pytest.param(f"SELECT COUNT(*) FROM {P} a CROSS JOIN {P} b", id="cross-join"),
    pytest.param(
        f"SELECT COUNT(*) FROM {P} a JOIN {P} b ON a.pid = b.pid OR a.age = b.age",
        id="join-unit-or-anything",
    ),
    pytest.param(
        f"SELECT sex, COUNT(*) FROM {P} GROUP BY sex ORDER BY age", id="order-by-private-column"
    ),
    pytest.param(f"SELECT COUNT(*) FROM {P} ORDER BY income", id="order-by-private-ungrouped"),
    pytest.param(
        f"SELECT sex, COUNT(*) FROM {P} GROUP BY sex HAVING income > 3", id="having-private-column"
    ),
    pytest.param(f"SELECT COUNT(*) FROM {P} LIMIT (SELECT 1)", id="limit-subquery"),
    # ROLLUP of what cells add up to is answered (tests/proxy/test_grouping_sets.py)
    pytest.param(
        f"SELECT sex, COUNT(DISTINCT age) FROM {P} GROUP BY ROLLUP (sex)", id="rollup-distinct"
    ),
    pytest.param(f"SELECT COUNT(*) FROM (SELECT * FROM FROM {P}) p", id="from-first-in-from"),
]


@pytest.mark.parametrize("sql", UNSUPPORTED)
def test_unsupported_sql_is_refused_before_any_charge(pums: Engine, sql: str) -> None:
    refused(pums, QueryRequest(sql, epsilon=0.5), "unsupported_sql")


def test_unbounded_sum_names_the_column_and_the_fix(pums: Engine) -> None:
    error = refused(pums, QueryRequest(f"SELECT SUM(pid) FROM {P}"), "unsupported_sql")
    assert "lower" in error.hint and "upper" in error.hint
    assert "pid" in error.hint


def test_unbounded_product_is_refused(pums: Engine) -> None:
    # pid has no bounds: multiplying by a bounded column does not bound it.
    error = refused(pums, QueryRequest(f"SELECT AVG(pid * age) FROM {P}"), "unsupported_sql")
    assert "lower" in error.hint and "upper" in error.hint


def test_not_found_for_unknown_table(pums: Engine) -> None:
    refused(pums, QueryRequest("SELECT COUNT(*) FROM nope"), "not_found")
    refused(pums, QueryRequest("SELECT COUNT(*) FROM PUMS.nope"), "not_found")


def test_huge_positional_group_by_is_a_bad_request(pums: Engine) -> None:
    refused(
        pums,
        QueryRequest(f"SELECT sex, COUNT(*) FROM {P} GROUP BY 9223372036854775808"),
        "bad_request",
    )


def test_bad_request_for_unknown_column(pums: Engine) -> None:
    refused(pums, QueryRequest(f"SELECT SUM(no_such_column) FROM {P}"), "bad_request")
    refused(pums, QueryRequest(f"SELECT COUNT(*) FROM {P} WHERE nope > 1"), "bad_request")


@pytest.mark.parametrize(
    "sql", ["this is not sql at all (((", "SELECT COUNT(* FROM PUMS.PUMS", "SELECT 'unterminated"]
)
def test_parse_error_for_garbage(pums: Engine, sql: str) -> None:
    refused(pums, QueryRequest(sql), "parse_error")


def test_parse_error_for_empty_text(pums: Engine) -> None:
    refused(pums, QueryRequest("   "), "parse_error")


def test_too_large_sql_text(pums: Engine) -> None:
    limit = pums.policy.proxy.max_sql_length
    sql = f"SELECT COUNT(*) FROM {P} WHERE " + " OR ".join(["age > 1"] * (limit // 10 + 1))
    assert len(sql) > limit
    error = refused(pums, QueryRequest(sql), "too_large")
    assert str(limit) in error.message


def test_too_many_syntax_nodes(pums: Engine) -> None:
    limit = pums.policy.proxy.max_nodes
    sql = f"SELECT COUNT(*) FROM {P} WHERE age IN (" + ",".join(["1"] * limit) + ")"
    assert len(sql) <= pums.policy.proxy.max_sql_length
    refused(pums, QueryRequest(sql), "too_large")


def test_unknown_dialect(pums: Engine) -> None:
    refused(pums, QueryRequest(f"SELECT COUNT(*) FROM {P}", dialect="cobol"), "bad_request")


# --- budget parameters --------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf")])
def test_epsilon_must_be_positive_and_finite(pums: Engine, epsilon: float) -> None:
    refused(pums, QueryRequest(f"SELECT COUNT(*) FROM {P}", epsilon=epsilon), "bad_request")


@pytest.mark.parametrize("rho", [0.0, -0.1])
def test_rho_must_be_positive(pums: Engine, rho: float) -> None:
    refused(pums, QueryRequest(f"SELECT COUNT(*) FROM {P}", rho=rho), "bad_request")


@pytest.mark.parametrize("factor", [1.0, 10.0])
def test_delta_at_or_above_population_delta(pums: Engine, factor: float) -> None:
    pop_delta = pums.policy.population("pums").delta
    request = QueryRequest(f"SELECT COUNT(*) FROM {P}", delta=pop_delta * factor)
    refused(pums, request, "bad_request")


@pytest.mark.parametrize("delta", [0.0, -1e-9])
def test_delta_must_be_positive(pums: Engine, delta: float) -> None:
    refused(pums, QueryRequest(f"SELECT COUNT(*) FROM {P}", delta=delta), "bad_request")


def test_max_groups_above_policy(pums: Engine) -> None:
    allowed = pums.policy.table("pums.pums").max_groups  # type: ignore[union-attr]
    assert allowed is not None
    request = QueryRequest(f"SELECT sex, COUNT(*) FROM {P} GROUP BY sex", max_groups=allowed + 1)
    error = refused(pums, request, "bad_request")
    assert "max_groups" in error.message


def test_max_rows_per_group_above_policy(pums: Engine) -> None:
    request = QueryRequest(f"SELECT COUNT(*) FROM {P}", max_rows_per_group=2)
    refused(pums, request, "bad_request")


@pytest.mark.parametrize("value", [0, -3])
def test_limits_must_be_at_least_one(pums: Engine, value: int) -> None:
    refused(pums, QueryRequest(f"SELECT COUNT(*) FROM {P}", max_groups=value), "bad_request")


def test_epsilon_and_rho_together(pums: Engine) -> None:
    request = QueryRequest(f"SELECT COUNT(*) FROM {P}", epsilon=1.0, rho=0.1)
    error = refused(pums, request, "bad_request")
    assert "epsilon" in error.message and "rho" in error.message


def test_sql_must_be_text(pums: Engine) -> None:
    refused(pums, QueryRequest(None), "bad_request")  # type: ignore[arg-type]


# --- private joins and grants, on the demo data -------------------------------------------


def test_private_join_not_on_the_unit(demo: Engine) -> None:
    sql = "SELECT COUNT(*) FROM prompts JOIN tickets ON prompts.user_id = tickets.ticket_id"
    error = refused(demo, QueryRequest(sql), "unsupported_sql")
    assert "user_id" in error.message


def test_private_join_unit_to_non_unit(demo: Engine) -> None:
    sql = "SELECT COUNT(*) FROM users u JOIN prompts p ON u.user_id = p.prompt_id"
    refused(demo, QueryRequest(sql), "unsupported_sql")


@pytest.mark.parametrize("side", ["RIGHT", "FULL"])
def test_outer_joins_that_keep_the_right_side(demo: Engine, side: str) -> None:
    sql = f"SELECT COUNT(*) FROM prompts p {side} JOIN users u ON p.user_id = u.user_id"
    refused(demo, QueryRequest(sql), "unsupported_sql")


def test_private_join_through_a_public_table(demo: Engine) -> None:
    sql = (
        "SELECT COUNT(*) FROM prompts p JOIN users a ON p.user_id = a.user_id "
        "JOIN regions r ON r.region = a.region JOIN users b ON b.region = r.region"
    )
    refused(demo, QueryRequest(sql), "unsupported_sql")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM regions WHERE region IN (SELECT region FROM users)",
        "SELECT COUNT(*) AS n FROM regions WHERE EXISTS (SELECT 1 FROM users WHERE age > 99)",
    ],
    ids=["in", "exists"],
)
def test_private_table_only_in_a_subquery_of_public_tables(demo: Engine, sql: str) -> None:
    """An IndexError (HTTP 500) before the refusal existed (a probe, 2026-12-02)."""
    error = refused(demo, QueryRequest(sql), "unsupported_sql")
    assert "subquery" in error.message


def test_public_tables_alone_are_answered_exactly_and_free(demo: Engine) -> None:
    # Public data only (issue 13 §8): answered, no ledger event, no ε.
    before = snapshot(demo)
    result = demo.run(QueryRequest("SELECT COUNT(*) FROM regions"))
    assert result.rows == [(4,)]
    assert result.privacy.exact and result.privacy.epsilon == 0
    assert snapshot(demo) == before


def test_forbidden_table(demo: Engine) -> None:
    request = QueryRequest("SELECT COUNT(*) FROM prompts", tables=frozenset({"users"}))
    error = refused(demo, request, "not_found")
    unknown = refused(demo, QueryRequest("SELECT COUNT(*) FROM nosuch"), "not_found")
    assert error.message.replace("prompts", "nosuch") == unknown.message
    assert error.hint == unknown.hint


def test_forbidden_table_inside_a_cte(demo: Engine) -> None:
    request = QueryRequest(
        "WITH t AS (SELECT * FROM prompts) SELECT COUNT(*) FROM t",
        tables=frozenset({"users"}),
    )
    refused(demo, request, "not_found")


def test_forbidden_table_in_a_join(demo: Engine) -> None:
    request = QueryRequest(
        "SELECT COUNT(*) FROM users u JOIN prompts p ON u.user_id = p.user_id",
        tables=frozenset({"users"}),
    )
    refused(demo, request, "not_found")


def test_granted_table_is_answered(demo: Engine) -> None:
    # The control for the grant tests: the same caller may read what it was granted.
    result = demo.run(
        QueryRequest("SELECT COUNT(*) FROM users", tables=frozenset({"users"}), epsilon=0.2)
    )
    assert len(result.rows) == 1


# --- engine bugs found while writing these tests (see the report) -------------------------


def test_qualify_with_window_is_refused(pums: Engine) -> None:
    sql = f"SELECT COUNT(*) FROM {P} QUALIFY COUNT(*) OVER () > 1"
    refused(pums, QueryRequest(sql, epsilon=0.3), "unsupported_sql")


@pytest.mark.parametrize(
    "sql",
    [f"SELECT COUNT(*) FROM {P} TABLESAMPLE 10%", f"SELECT COUNT(*) FROM {P} USING SAMPLE 10%"],
    ids=["tablesample", "using-sample"],
)
def test_sampling_is_refused(pums: Engine, sql: str) -> None:
    refused(pums, QueryRequest(sql, epsilon=0.3), "unsupported_sql")


def test_no_data_dependent_error_from_a_regex(pums: Engine) -> None:
    # pid 1 exists and pid 100000 does not. If the error depended on the data, the two
    # answers would differ deterministically, whatever the noise.
    template = (
        f"SELECT COUNT(*) FROM {P} WHERE regexp_matches('a', "
        "CASE WHEN pid = {pid} THEN '(' ELSE 'a' END)"
    )
    # A pattern that is not a literal is refused before any charge (string_growth.py:
    # its matching cost depends on the data), the same way whoever the pid names.
    for pid in (100000, 1):
        error = refused(
            pums, QueryRequest(template.format(pid=pid), epsilon=0.3), "unsupported_sql"
        )
        assert "literal" in error.message
