"""MEDIAN, quantiles, MIN and MAX through a real `dpsql serve` (issue #13 §1): answered
with their metadata and no interval, explained for free, replayed free in another
spelling (and another dialect), refused before any charge with a working rewrite."""

from __future__ import annotations

import csv
import io

import httpx
import pytest

from tests.server.conftest import Server, auth
from tests.server.test_http import ask, assert_error, events, spent

SQL = (
    "SELECT region, MEDIAN(age) AS med, MIN(age) AS lo, MAX(age) AS hi, COUNT(*) AS n "
    "FROM users GROUP BY region"
)


@pytest.fixture(scope="module")
def c(server: Server):
    with server.client() as client:
        yield client


def test_quantiles_are_answered_with_their_metadata(c: httpx.Client) -> None:
    before = spent(c)
    r = ask(c, {"sql": SQL, "epsilon": 0.8})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["columns"] == ["region", "med", "lo", "hi", "n"]
    assert sorted(row[0] for row in body["rows"]) == ["east", "north", "south", "west"]
    for row in body["rows"]:
        assert all(isinstance(v, int) and 18 <= v <= 100 for v in row[1:4]), row
    # Quantile cells have no interval; the count has its own.
    assert all(w[1:4] == [None, None, None] and w[4] is not None for w in body["intervals_95"])
    p = body["privacy"]
    assert p["cached"] is False and p["epsilon"] == pytest.approx(0.8, rel=1e-5)
    kinds = {q["name"]: q for q in p["quantiles"]}
    assert kinds["med"]["kind"] == "quantile" and kinds["med"]["q"] == 0.5
    assert kinds["lo"]["kind"] == "min" and kinds["hi"]["kind"] == "max"
    assert kinds["med"]["grid"]["bins"] == 83 and kinds["med"]["half_width_95"] is None
    assert kinds["lo"]["offset_rows"] >= 1 and kinds["med"]["rank_error_95"] > 0
    assert any("column 'med' is a DP median" in w for w in body["warnings"])
    assert any("rows from the smallest" in w for w in body["warnings"])
    assert spent(c)["epsilon_spent"] > before["epsilon_spent"]


def test_another_spelling_is_a_free_replay(c: httpx.Client) -> None:
    first = ask(c, {"sql": "SELECT plan, MEDIAN(age) AS m FROM users GROUP BY plan"}).json()
    charges = len(events(c, "charge"))
    again = ask(
        c,
        {
            "sql": "SELECT plan, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) AS m "
            "FROM users GROUP BY plan ORDER BY m DESC",
            "dialect": "postgres",
        },
        who="bob",
    ).json()
    assert again["privacy"]["cached"] is True and again["privacy"]["epsilon"] == 0
    assert sorted(again["rows"]) == sorted(first["rows"])
    assert len(events(c, "charge")) == charges


def test_explain_shows_the_quantile_columns_for_free(c: httpx.Client) -> None:
    charges = len(events(c))
    body = {
        "sql": "SELECT model, QUANTILE_CONT(latency_ms, 0.9) AS p90 FROM prompts GROUP BY model",
        "epsilon": 0.6,
    }
    ex = c.post("/v1/explain", json=body, headers=auth("ana")).json()
    [q] = ex["quantiles"]
    assert q["kind"] == "quantile" and q["q"] == 0.9 and q["mechanism"] == "exponential"
    assert q["grid"]["lower"] == 0 and q["grid"]["upper"] == 60000 and q["grid"]["bins"] > 1000
    assert q["max_rows_per_group"] == 10 and q["max_groups"] == 4
    assert q["rank_error_95"] > 0 and [a["rows"] for a in q["accuracy"]] == [100, 1000, 10000]
    assert "qv AS" in ex["core_sql"] and 0 < ex["cost"]["epsilon"] <= 0.6
    assert len(events(c)) == charges


def test_csv_has_no_interval_column_for_quantiles(c: httpx.Client) -> None:
    r = ask(
        c,
        {"sql": "SELECT MEDIAN(tokens_in) AS m, COUNT(*) AS n FROM prompts", "epsilon": 0.5},
        headers={"Accept": "text/csv"},
    )
    assert r.status_code == 200, r.text
    rows = list(csv.DictReader(io.StringIO(r.text)))
    [row] = [x for x in rows if x.get("m")]
    assert "m_ci95" not in row and row["n_ci95"] != ""  # no interval column for a quantile


def test_refusals_before_any_charge_with_a_working_rewrite(c: httpx.Client) -> None:
    charges = len(events(c, "charge"))
    for sql, dialect in (
        ("SELECT MIN(ts) FROM prompts", "duckdb"),
        ("SELECT APPROX_QUANTILES(age, 4) FROM users", "bigquery"),
    ):
        body = assert_error(ask(c, {"sql": sql, "dialect": dialect}), "unsupported_sql")
        assert body["hint"]
    assert len(events(c, "charge")) == charges
    fixed = ask(
        c, {"sql": "SELECT APPROX_QUANTILES(age, 4)[OFFSET(2)] FROM users", "dialect": "bigquery"}
    )
    assert fixed.status_code == 200, fixed.text
