"""The accuracy benchmark (bench/accuracy.py, issue #12) at CI size: three of its
questions, a few repetitions each, and the properties that must hold at that size.

The full run (200 repetitions, 29 questions, SmartNoise beside) writes BENCHMARKS.md §7;
this one checks that the harness measures what it says and that the goal-shaped
properties hold with tolerances no honest run misses:

* prompts by region: the old fixed cap (C = 10) loses about 70% of the rows, and every
  cell that far off carries a warning (the clipping estimate); the auto cap loses far less.
* AVG(tokens_out) by plan: bounding keeps each person's own mean, so the noise-free
  bounded AVG is within 1% of the exact one with the cap of 10 (within 3% with the
  small cap the query chooses, which re-weights heavy persons), and with the cap of 10
  the released AVG is within 25%.
* PUMS by age: a public integer domain (0..100), so every age with people is released in
  every run, and the cells far off say so.
* intervals cover the bounded value.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import accuracy
from bench.accuracy_report import goals

QUESTIONS = ["prompts by region", "mean tokens_out by plan", "PUMS people by age"]
RUNS = 15


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return accuracy.run(RUNS, QUESTIONS, smartnoise=False)


def _results(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(q["results"] for q in data["questions"] if q["name"] == name)


def test_every_question_is_answered_in_every_configuration(measured: dict[str, Any]) -> None:
    assert [q["name"] for q in measured["questions"]] == QUESTIONS
    for q in measured["questions"]:
        configs = ("fixed", "auto") if q["data"] == "demo" else ("pums",)
        assert set(q["results"]) == set(configs)
        for m in q["results"].values():
            assert m["error"] == "" and m["runs"] == RUNS
            assert m["rows_per_run"] > 0


def test_counts_by_region(measured: dict[str, Any]) -> None:
    r = _results(measured, "prompts by region")
    fixed, auto = r["fixed"], r["auto"]
    assert fixed["cap"] == 10 and auto["cap"] > 10
    # About 71% of the prompt rows lie beyond 10 per person: the bounded count itself is
    # that low, and the released one with it.
    assert 0.6 < fixed["bias"] < 0.8
    assert fixed["median_rel_error"] > 0.6
    # ... and every cell that far off says so (the clipping estimate's warning).
    assert fixed["off_cells"] == 4 * RUNS
    assert fixed["off_cells_warned"] == fixed["off_cells"]
    assert any("had more than 10 rows in a group" in w for w in fixed["warnings"])
    # The cap chosen from the data keeps far more rows.
    assert auto["bias"] < 0.35 and auto["median_rel_error"] < fixed["median_rel_error"] / 2


def test_average_by_plan_keeps_each_persons_mean(measured: dict[str, Any]) -> None:
    r = _results(measured, "mean tokens_out by plan")
    assert r["fixed"]["worst_bias"] < 0.01, r["fixed"]["worst_bias"]
    # The per-query cap of an AVG is small (C = 1 on the demo data): each person then
    # weighs one row, and the person-weighted mean of the team plan is 1.6% above its
    # row mean — the re-weighting bias the choice trades for less noise.
    assert r["auto"]["cap"] < 10
    assert r["auto"]["worst_bias"] < 0.03, r["auto"]["worst_bias"]
    # Noise at C = 10 and ε = 1: one run's error on the team plan has a median of about
    # 10% (BENCHMARKS.md §7a) and exceeds 25% with probability about 0.11, so the median
    # of 15 runs exceeds it with probability about 1e-4.
    assert r["fixed"]["worst_rel_error"] < 0.25, r["fixed"]["cell_errors"]


def test_public_integer_domain(measured: dict[str, Any]) -> None:
    m = _results(measured, "PUMS people by age")["pums"]
    # Every age present in the data (73 of 0..100) comes back in every run: no
    # partition selection (SmartNoise's thresholding releases almost none of them).
    assert m["exact_groups"] == 73 and m["rows_per_run"] == 73
    assert m["off_cells"] > 0 and m["off_cells_warned"] == m["off_cells"]


def test_intervals_cover_the_bounded_value(measured: dict[str, Any]) -> None:
    covered = sum(m["covered"] for q in measured["questions"] for m in q["results"].values())
    cells = sum(m["with_interval"] for q in measured["questions"] for m in q["results"].values())
    # (4 + 3) · 2 · 15 + 73 · 15 = 1,305 cells at a claimed 95% (measured: 95.9%):
    # below 90% has probability < 1e-6 if the claim holds.
    assert cells == 1305 and covered / cells >= 0.90, (covered, cells)
    found = {g.goal: g for g in goals(measured)}
    assert "interval coverage of the bounded value ≥ 93%" in found
