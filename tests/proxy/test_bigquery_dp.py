"""BigQuery's differential-privacy syntax (issue 13 §7), pasted as Google documents it.

The statements below are copied from Google's BigQuery reference, "Differentially
private aggregate functions"
(https://cloud.google.com/bigquery/docs/reference/standard-sql/aggregate-dp-functions)
and "Query syntax: Differential privacy clause"
(https://cloud.google.com/bigquery/docs/reference/standard-sql/query-syntax#dp_clause),
over the example table ``professors`` those pages define. They are answered end to end
by the engine, by the ``dpsql`` CLI and by ``POST /v1/query`` on a real server; what
dpsql does differently (bounds only tighten the policy, δ above the population's
per-query δ is replaced, no "remove noise" setting) is checked too. The pre-parser
itself (proxy/bigquery_dp.py) is tested on its own first.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest
import sqlglot
from sqlglot import exp

from proxy.bigquery_dp import DPClause, translate
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import load_policy
from proxy.request import QueryRequest
from tests.server.conftest import DPSQL, start_server, stop_server

# The docs' example table (query-syntax#dp_example_tables).
PROFESSORS = """CREATE TABLE professors AS (
  SELECT 101 AS id, 'pencil' AS item, 24 AS quantity UNION ALL
  SELECT 123, 'pen', 16 UNION ALL
  SELECT 123, 'pencil', 10 UNION ALL
  SELECT 123, 'pencil', 38 UNION ALL
  SELECT 101, 'pen', 19 UNION ALL
  SELECT 101, 'pen', 23 UNION ALL
  SELECT 130, 'scissors', 8 UNION ALL
  SELECT 150, 'pencil', 72)"""
KEY = "key-bq-0123456789abcdef"

# Pasted from the two pages above (their "with noise" examples).
AVG_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) average_quantity
FROM professors
GROUP BY item;"""
COUNT_STAR_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    COUNT(*, contribution_bounds_per_group=>(0, 100)) times_requested
FROM professors
GROUP BY item;"""
COUNT_EXPR_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    COUNT(item, contribution_bounds_per_group => (0,100)) times_requested
FROM professors
GROUP BY item;"""
SUM_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    SUM(quantity, contribution_bounds_per_group => (0,100)) quantity
FROM professors
GROUP BY item;"""
CLAUSE_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=2, privacy_unit_column=id)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) AS average_quantity
FROM professors
GROUP BY item;"""
NO_MAX_GROUPS_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, privacy_unit_column=id)
    item,
    AVG(quantity, contribution_bounds_per_group => (0,100)) AS average_quantity
FROM professors
GROUP BY item;"""
REMOVE_NOISE_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=1e20, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    AVG(quantity) average_quantity
FROM professors
GROUP BY item;"""
PERCENTILE_EXAMPLE = """SELECT
  WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1, privacy_unit_column=id)
    item,
    PERCENTILE_CONT(quantity, 0.5, contribution_bounds_per_row => (0,100)) percentile_requested
FROM professors
GROUP BY item;"""
PASTED = {
    "percentile": PERCENTILE_EXAMPLE,
    "avg": AVG_EXAMPLE,
    "count-star": COUNT_STAR_EXAMPLE,
    "count-expr": COUNT_EXPR_EXAMPLE,
    "sum": SUM_EXAMPLE,
    "clause": CLAUSE_EXAMPLE,
    "no-max-groups": NO_MAX_GROUPS_EXAMPLE,
}
# The output column each pasted example names.
COLUMNS = {
    "percentile": ("item", "percentile_requested"),
    "avg": ("item", "average_quantity"),
    "count-star": ("item", "times_requested"),
    "count-expr": ("item", "times_requested"),
    "sum": ("item", "quantity"),
    "clause": ("item", "average_quantity"),
    "no-max-groups": ("item", "average_quantity"),
}


def write_professors(folder: Path) -> Path:
    """The docs' table in DuckDB, and a policy: one population of professors (id), a
    public domain for item, quantity bounded by [0, 80], at most 2 groups and 3 rows per
    professor and group."""
    db = duckdb.connect(str(folder / "professors.duckdb"))
    db.execute(PROFESSORS)
    db.close()
    policy = folder / "policy.toml"
    policy.write_text(
        f"""
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
mechanism = "gaussian"
max_groups = 2
max_rows_per_group = 3

[database]
duckdb = "{folder / "professors.duckdb"}"

[ledger]
path = "{folder / "ledger.sqlite"}"

[populations.professors]
epsilon_cap = 1000.0
delta = 1e-6

[tables.professors]
population = "professors"
unit = "id"
columns.item = {{ values = ["pen", "pencil", "scissors"] }}
columns.quantity = {{ lower = 0, upper = 80 }}

[analysts.bq]
key_sha256 = "{hashlib.sha256(KEY.encode()).hexdigest()}"
role = "analyst"
"""
    )
    return policy


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_professors(tmp_path_factory.mktemp("professors"))


@pytest.fixture(scope="module")
def engine(policy_file: Path) -> Iterator[Engine]:
    e = Engine(load_policy(policy_file))
    yield e
    e.close()


def events(engine: Engine) -> int:
    return len(engine.ledger.history(limit=100000))


# --- the pre-parser ---------------------------------------------------------------------


def test_translation_of_the_avg_example() -> None:
    found = translate(AVG_EXAMPLE, "bigquery")
    assert found is not None
    assert found.clause == DPClause(
        epsilon=10.0, delta=0.01, max_groups=1, privacy_unit_column=("id",)
    )
    assert "DIFFERENTIAL_PRIVACY" not in found.sql and "contribution_bounds" not in found.sql
    assert (
        "AVG(CASE WHEN (quantity) < 0 THEN 0 WHEN (quantity) > 100 THEN 100 ELSE (quantity) END)"
        in found.sql
    )
    assert [(b.function, b.lower, b.upper, b.argument) for b in found.bounds] == [
        ("AVG", 0.0, 100.0, "quantity")
    ]


def test_count_bounds_become_rows_per_person_and_group() -> None:
    found = translate(COUNT_STAR_EXAMPLE, "bigquery")
    assert found is not None
    assert "COUNT(*) times_requested" in found.sql
    assert found.max_rows_per_group == 100


def test_other_text_is_not_translated() -> None:
    assert translate("SELECT COUNT(*) FROM professors", "bigquery") is None
    # The words inside a string or a comment are not the clause.
    assert translate("SELECT 'WITH DIFFERENTIAL_PRIVACY' AS x FROM t", "bigquery") is None
    assert translate("SELECT /* with differential_privacy */ 1", "bigquery") is None


def test_percentiles_are_read_as_quantiles_in_every_dialect() -> None:
    sql = (
        "SELECT WITH ANONYMIZATION OPTIONS(epsilon=10, delta=.01, max_groups_contributed=1) "
        "item, ANON_PERCENTILE_CONT(quantity, 0.5 CLAMPED BETWEEN 0 AND 100) p "
        "FROM professors GROUP BY item"
    )
    for dialect in ("bigquery", "duckdb", "postgres", "trino", "snowflake"):
        found = translate(sql, dialect)
        assert found is not None
        tree = sqlglot.parse_one(found.sql, read=dialect)
        (call,) = list(tree.find_all(exp.PercentileCont))
        assert call.args["expression"].name == "0.5"
        assert found.bounds[0].lower == 0 and found.bounds[0].upper == 100


def test_anonymization_clause_and_clamped_between() -> None:
    sql = (
        "SELECT WITH ANONYMIZATION OPTIONS(epsilon=10, delta=.01, kappa=1) item, "
        "ANON_SUM(quantity CLAMPED BETWEEN 0 AND 50) s, ANON_COUNT(*) n "
        "FROM professors GROUP BY item"
    )
    found = translate(sql, "bigquery")
    assert found is not None
    assert found.clause.max_groups == 1
    assert "SUM(CASE WHEN (quantity) < 0 THEN 0 WHEN (quantity) > 50 THEN 50" in found.sql
    assert "COUNT(*) n" in found.sql and "ANON_" not in found.sql


def test_positions_of_an_unknown_option_and_bad_bounds() -> None:
    with pytest.raises(DPSQLError) as error:
        translate(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, group_selection_strategy="
            "PUBLIC_GROUPS) COUNT(*) FROM professors",
            "bigquery",
        )
    assert error.value.code == "unsupported_sql"
    assert "drop group_selection_strategy" in error.value.hint
    with pytest.raises(DPSQLError) as error:
        translate(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) "
            "SUM(quantity, contribution_bounds_per_group => (10, 0)) FROM professors",
            "bigquery",
        )
    assert error.value.code == "bad_request" and "lower" in error.value.message
    with pytest.raises(DPSQLError) as error:
        translate(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) "
            "COUNT(*, contribution_bounds_per_group => (2, 5)) FROM professors",
            "bigquery",
        )
    assert "(0, 5)" in error.value.hint
    with pytest.raises(DPSQLError):
        translate(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, epsilon=2) COUNT(*) FROM t",
            "bigquery",
        )
    with pytest.raises(DPSQLError):
        translate(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed=0) COUNT(*) FROM t",
            "bigquery",
        )
    null = translate(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(max_groups_contributed=NULL) COUNT(*) FROM t",
        "bigquery",
    )
    assert null is not None and null.clause.max_groups is None


# --- the engine -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PASTED))
def test_pasted_examples_are_answered(engine: Engine, name: str) -> None:
    before = events(engine)
    result = engine.run(QueryRequest(PASTED[name]))
    assert result.columns == COLUMNS[name]
    # item has a public domain: all three items are released.
    assert sorted(r[0] for r in result.rows) == ["pen", "pencil", "scissors"]
    # "no-max-groups" asks what "clause" asked (max_groups_contributed 2 is the policy's):
    # a replay of the same release, free.
    # The spend is the asked ε = 10, never above it (a quantile's calibration searches
    # its scale and lands within 1e-4 below).
    assert result.privacy.cached or 10.0 * (1 - 1e-4) <= result.privacy.epsilon <= 10.0 + 1e-9
    # delta=.01 is far above the population's per-query δ: the policy's replaces it.
    assert any("delta = 0.01" in w for w in result.warnings)
    assert events(engine) == before + 1


def test_bounds_only_tighten_the_policy(engine: Engine) -> None:
    def bounds(sql: str) -> list[list[float]]:
        ex = engine.explain(QueryRequest(sql)).to_dict()
        return [s["bounds"] for s in ex["statistics"] if s["kind"] == "sum"]

    # (0, 100) is looser than quantity's [0, 80]: the policy's bounds stay.
    assert bounds(SUM_EXAMPLE) == [[0.0, 80.0]]
    # (0, 50) is tighter: it is used.
    assert bounds(SUM_EXAMPLE.replace("(0,100)", "(0,50)")) == [[0.0, 50.0]]
    result = engine.run(QueryRequest(SUM_EXAMPLE))
    assert any("looser than the policy's [0, 80]" in w for w in result.warnings)


def test_max_groups_contributed_maps_to_the_l0_bound(engine: Engine) -> None:
    one = engine.explain(QueryRequest(AVG_EXAMPLE)).to_dict()
    assert one["limits"]["max_groups"] == 1
    # 5 is looser than the policy's 2: the policy's applies, with a note in the answer.
    loose = AVG_EXAMPLE.replace("max_groups_contributed=1", "max_groups_contributed=5")
    assert engine.explain(QueryRequest(loose)).to_dict()["limits"]["max_groups"] == 2
    result = engine.run(QueryRequest(loose))
    assert any("max_groups_contributed = 5 is looser" in w for w in result.warnings)


def test_count_bound_maps_to_rows_per_person(engine: Engine) -> None:
    tight = COUNT_STAR_EXAMPLE.replace("(0, 100)", "(0, 2)")
    assert engine.explain(QueryRequest(tight)).to_dict()["limits"]["max_rows_per_group"] == 2
    loose = engine.explain(QueryRequest(COUNT_STAR_EXAMPLE)).to_dict()
    assert loose["limits"]["max_rows_per_group"] == 3


def test_the_same_query_in_dpsql_sql_is_the_same_release(engine: Engine) -> None:
    bq = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.7, privacy_unit_column=id) "
        "item, COUNT(*) AS n FROM professors GROUP BY item"
    )
    first = engine.run(QueryRequest(bq))
    again = engine.run(
        QueryRequest("SELECT item, COUNT(*) AS n FROM professors GROUP BY item", epsilon=0.7)
    )
    assert not first.privacy.cached and again.privacy.cached
    assert again.rows == first.rows


@pytest.mark.parametrize(
    ("sql", "code", "needle"),
    [
        (
            AVG_EXAMPLE.replace("privacy_unit_column=id", "privacy_unit_column=item"),
            "unsupported_sql",
            "privacy_unit_column = id",
        ),
        (REMOVE_NOISE_EXAMPLE, "bad_request", "epsilon = 1"),
    ],
    ids=["wrong-unit", "remove-noise"],
)
def test_refusals_cost_nothing(engine: Engine, sql: str, code: str, needle: str) -> None:
    before = events(engine)
    with pytest.raises(DPSQLError) as error:
        engine.run(QueryRequest(sql))
    assert error.value.code == code
    assert needle in error.value.hint
    assert events(engine) == before


def test_budget_given_twice_is_refused(engine: Engine) -> None:
    with pytest.raises(DPSQLError) as error:
        engine.run(QueryRequest(AVG_EXAMPLE, epsilon=0.5))
    assert error.value.code == "bad_request" and "twice" in error.value.message
    # The same budget in both places is no conflict.
    assert engine.run(QueryRequest(AVG_EXAMPLE, epsilon=10.0)).rows


def test_privacy_unit_column_path_names_the_unit(engine: Engine) -> None:
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon=10, delta=1e-9, "
        "privacy_unit_column=members.id) item, COUNT(*, contribution_bounds_per_group=>(0, 3)) "
        "FROM (SELECT * FROM professors) AS members GROUP BY item"
    )
    assert len(engine.run(QueryRequest(sql)).rows) == 3


# --- the doors ------------------------------------------------------------------------


def test_cli_answers_a_pasted_example(tmp_path: Path) -> None:
    policy_file = write_professors(tmp_path)
    out = subprocess.run(
        [str(DPSQL), "--policy", str(policy_file), "query", AVG_EXAMPLE, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["columns"] == ["item", "average_quantity"]
    assert len(body["rows"]) == 3
    assert body["privacy"]["epsilon"] == pytest.approx(10.0, rel=1e-5)
    refused = subprocess.run(
        [str(DPSQL), "--policy", str(policy_file), "query", REMOVE_NOISE_EXAMPLE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2 and "bad_request" in refused.stderr


def test_http_answers_pasted_examples(tmp_path: Path) -> None:
    server = start_server(write_professors(tmp_path))
    try:
        with httpx.Client(base_url=server.url, timeout=60.0) as client:
            headers = {"Authorization": f"Bearer {KEY}"}
            for name in ("count-expr", "sum"):
                response = client.post("/v1/query", json={"sql": PASTED[name]}, headers=headers)
                assert response.status_code == 200, response.text
                body = response.json()
                assert tuple(body["columns"]) == COLUMNS[name]
                assert len(body["rows"]) == 3
                assert body["privacy"]["epsilon"] == pytest.approx(10.0, rel=1e-5)
                assert any("delta = 0.01" in w for w in body["warnings"])
            wrong = client.post(
                "/v1/query",
                json={"sql": AVG_EXAMPLE.replace("=id)", "=quantity)")},
                headers=headers,
            )
            assert wrong.status_code == 400
            assert wrong.json()["error"]["code"] == "unsupported_sql"
    finally:
        stop_server(server)
