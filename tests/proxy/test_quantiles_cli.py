"""MEDIAN, quantiles, MIN and MAX through the real `dpsql` console script on PUMS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.proxy.test_cli import policy_file, run

__all__ = ["policy_file"]  # the fixture, shared with test_cli.py

SQL = (
    "SELECT sex, MEDIAN(age) AS med, MAX(income) AS top, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex"
)


def test_query_explain_and_free_replay(policy_file: Path) -> None:
    explained = run(policy_file, "explain", SQL, "--epsilon", "1")
    assert explained.returncode == 0, explained.stderr
    quantiles = json.loads(explained.stdout)["quantiles"]
    assert [(q["kind"], q["q"]) for q in quantiles] == [("quantile", 0.5), ("max", None)]
    assert quantiles[0]["grid"]["bins"] == 101 and quantiles[0]["rank_error_95"] > 0
    first = run(policy_file, "query", SQL, "--epsilon", "1", "--format", "json")
    assert first.returncode == 0, first.stderr
    body = json.loads(first.stdout)
    assert body["columns"] == ["sex", "med", "top", "n"]
    # PUMS: adults' ages around 40-50; income up to 500000 (the MAX is aimed inside).
    for _, med, top, _ in body["rows"]:
        assert 20 <= med <= 70 and 0 <= top <= 500000
    assert [w[1:3] for w in body["intervals_95"]] == [[None, None], [None, None]]
    assert body["privacy"]["epsilon"] == pytest.approx(1.0, rel=1e-4)
    assert any("is a DP median" in w for w in body["privacy"]["warnings"])
    again = run(
        policy_file,
        "query",
        "SELECT sex, QUANTILE_CONT(age, 0.5) AS med, MAX(income) AS top, COUNT(*) AS n "
        "FROM PUMS.PUMS GROUP BY sex ORDER BY sex",
        "--epsilon",
        "1",
        "--format",
        "json",
    )
    replay = json.loads(again.stdout)
    assert replay["privacy"]["cached"] is True and replay["rows"] == body["rows"]
    table = run(policy_file, "query", SQL, "--epsilon", "1")
    assert table.returncode == 0 and "cached replay" in table.stdout
    assert "warning:" in table.stdout and "is a DP median" in table.stdout


def test_refusal_with_a_hint(policy_file: Path) -> None:
    out = run(policy_file, "query", "SELECT MEDIAN(pid) FROM PUMS.PUMS")
    assert out.returncode == 2
    assert "unsupported_sql" in out.stderr and "LEAST(GREATEST" in out.stderr
    fixed = run(policy_file, "query", "SELECT MEDIAN(LEAST(GREATEST(pid, 1), 1000)) FROM PUMS.PUMS")
    assert fixed.returncode == 0, fixed.stderr
