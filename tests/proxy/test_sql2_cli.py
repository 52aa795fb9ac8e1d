"""Per-person aggregates, COUNT(DISTINCT value) and UNION ALL through the real `dpsql`
console script on PUMS (issue #13 §2, §3, §5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.proxy.test_cli import policy_file, run

__all__ = ["policy_file"]  # the fixture, shared with test_cli.py

P = "PUMS.PUMS"
QUERIES = (
    # average number of rows per person, and people with an income above 50,000
    f"SELECT AVG(n) AS per_person, COUNT(*) AS people FROM "
    f"(SELECT pid, COUNT(*) AS n FROM {P} GROUP BY pid) t",
    f"SELECT sex, COUNT(DISTINCT educ) AS levels FROM {P} GROUP BY sex",
    f"SELECT COUNT(*) AS n FROM (SELECT pid FROM {P} WHERE age > 60 UNION ALL "
    f"SELECT pid FROM {P} WHERE income > 100000) t",
)


@pytest.mark.parametrize("sql", QUERIES, ids=["per-person", "count-distinct", "union-all"])
def test_answered_charged_once_and_replayed(policy_file: Path, sql: str) -> None:
    explained = run(policy_file, "explain", sql, "--epsilon", "1")
    assert explained.returncode == 0, explained.stderr
    plan = json.loads(explained.stdout)
    assert plan["cache"].startswith("miss") and plan["statistics"]
    first = run(policy_file, "query", sql, "--epsilon", "1", "--format", "json")
    assert first.returncode == 0, first.stderr
    body = json.loads(first.stdout)
    assert body["rows"] and body["privacy"]["epsilon"] == pytest.approx(1.0, rel=1e-4)
    assert all(w is not None for row in body["intervals_95"] for w in row[-1:])
    again = run(policy_file, "query", sql, "--epsilon", "1", "--format", "json")
    replay = json.loads(again.stdout)
    assert replay["privacy"]["cached"] is True and replay["rows"] == body["rows"]


def test_per_person_value_in_range(policy_file: Path) -> None:
    out = run(policy_file, "query", QUERIES[0], "--epsilon", "2", "--format", "json")
    per_person, people = json.loads(out.stdout)["rows"][0]
    # PUMS has one row per person: each value is 1, and about 1,000 people.
    assert per_person == pytest.approx(1.0, abs=0.2) and 900 <= people <= 1100


def test_refused_with_a_hint(policy_file: Path) -> None:
    out = run(
        policy_file,
        "query",
        f"SELECT COUNT(*) FROM (SELECT pid FROM {P} UNION SELECT pid FROM {P}) t",
    )
    assert out.returncode == 2 and "unsupported_sql" in out.stderr and "UNION ALL" in out.stderr
