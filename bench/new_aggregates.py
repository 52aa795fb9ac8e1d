"""Error of issue 13's new aggregates at ε = 1 on PUMS, against SmartNoise SQL where it
answers the same query: COUNT/SUM/AVG/VARIANCE(DISTINCT x), per-person aggregates (an
inner query grouped by the person id) and quantiles.

    .venv/bin/python -m bench.new_aggregates [--runs 200] [--no-smartnoise]

Each question runs ``runs`` times through ``Engine.run`` (a fresh charged release each
time, ε = 1, δ = 1e-9) on ``sample_data/pums`` (1,000 people, one row each) and, when it
reads the query, through SmartNoise SQL 1.0.10 in its own venv at the same total ε (the
per-statistic ε its odometer composes to 1; ``bench/smartnoise_runner.py``). The error of
a cell is the median over runs of |released − exact| / |exact| against plain DuckDB;
shown is the median over cells (and the worst cell), as in ``bench/accuracy.py``, whose
measuring code this reuses. SmartNoise's VARIANCE is the population form: its error is
against VAR_POP(DISTINCT x). SmartNoise's spelling of a subquery needs ``AS t``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import accuracy
from bench.accuracy_questions import Data, Question
from proxy.release import PostProcessor

T = "PUMS.PUMS"
PER_PERSON_INCOME = f"(SELECT pid, SUM(income) AS s FROM {T} GROUP BY pid) AS t"
QUESTIONS: tuple[Question, ...] = (
    Question(
        "distinct ages by sex", Data.PUMS,
        f"SELECT sex, COUNT(DISTINCT age) AS d FROM {T} GROUP BY sex", 1,
        f"SELECT sex, COUNT(DISTINCT age) FROM {T} GROUP BY sex", "COUNT(DISTINCT value)",
        smartnoise_sql=f"SELECT sex, COUNT(DISTINCT age) AS d FROM {T} GROUP BY sex",
    ),
    Question(
        "distinct education levels", Data.PUMS,
        f"SELECT COUNT(DISTINCT educ) AS d FROM {T}", 0,
        f"SELECT COUNT(DISTINCT educ) FROM {T}", "COUNT(DISTINCT value), no key",
        smartnoise_sql=f"SELECT COUNT(DISTINCT educ) AS d FROM {T}",
    ),
    Question(
        "sum of distinct ages by sex", Data.PUMS,
        f"SELECT sex, SUM(DISTINCT age) AS s FROM {T} GROUP BY sex", 1,
        f"SELECT sex, SUM(DISTINCT age) FROM {T} GROUP BY sex", "SUM(DISTINCT value)",
        smartnoise_sql=f"SELECT sex, SUM(DISTINCT age) AS s FROM {T} GROUP BY sex",
    ),
    Question(
        "mean of distinct ages by sex", Data.PUMS,
        f"SELECT sex, AVG(DISTINCT age) AS a FROM {T} GROUP BY sex", 1,
        f"SELECT sex, AVG(DISTINCT age) FROM {T} GROUP BY sex", "AVG(DISTINCT value)",
        smartnoise_sql=f"SELECT sex, AVG(DISTINCT age) AS a FROM {T} GROUP BY sex",
    ),
    Question(
        "variance of distinct ages by sex", Data.PUMS,
        f"SELECT sex, VARIANCE(DISTINCT age) AS v FROM {T} GROUP BY sex", 1,
        f"SELECT sex, VAR_SAMP(DISTINCT age) FROM {T} GROUP BY sex", "VARIANCE(DISTINCT value)",
        smartnoise_sql=f"SELECT sex, VARIANCE(DISTINCT age) AS v FROM {T} GROUP BY sex",
        smartnoise_truth=f"SELECT sex, VAR_POP(DISTINCT age) FROM {T} GROUP BY sex",
    ),
    Question(
        "people whose income sum exceeds 50,000", Data.PUMS,
        f"SELECT COUNT(*) AS n FROM {PER_PERSON_INCOME} WHERE s > 50000", 0,
        f"SELECT COUNT(*) FROM {PER_PERSON_INCOME} WHERE s > 50000",
        "per-person aggregate, filtered",
        smartnoise_sql=f"SELECT COUNT(*) AS n FROM {PER_PERSON_INCOME} WHERE s > 50000",
    ),
    Question(
        "mean per-person income by sex", Data.PUMS,
        f"SELECT sex, AVG(s) AS a FROM (SELECT pid, sex, SUM(income) AS s FROM {T} "
        "GROUP BY pid, sex) AS t GROUP BY sex", 1,
        f"SELECT sex, AVG(s) FROM (SELECT pid, sex, SUM(income) AS s FROM {T} "
        "GROUP BY pid, sex) AS t GROUP BY sex",
        "per-person aggregate, person-constant key",
        smartnoise_sql=f"SELECT sex, AVG(s) AS a FROM (SELECT pid, sex, SUM(income) AS s "
        f"FROM {T} GROUP BY pid, sex) AS t GROUP BY sex",
    ),
    Question(
        "people per income band of 100,000", Data.PUMS,
        f"SELECT b, COUNT(*) AS n FROM (SELECT pid, FLOOR(SUM(income) / 100000) AS b "
        f"FROM {T} GROUP BY pid) AS t GROUP BY b", 1,
        f"SELECT b, COUNT(*) FROM (SELECT pid, FLOOR(SUM(income) / 100000) AS b "
        f"FROM {T} GROUP BY pid) AS t GROUP BY b",
        "histogram of per-person totals",
        smartnoise_sql=f"SELECT b, COUNT(*) AS n FROM (SELECT pid, FLOOR(SUM(income) / 100000) "
        f"AS b FROM {T} GROUP BY pid) AS t GROUP BY b",
    ),
    Question(
        "median age by sex", Data.PUMS,
        f"SELECT sex, MEDIAN(age) AS m FROM {T} GROUP BY sex", 1,
        f"SELECT sex, QUANTILE_CONT(age, 0.5) FROM {T} GROUP BY sex", "MEDIAN",
        smartnoise_sql=f"SELECT sex, MEDIAN(age) AS m FROM {T} GROUP BY sex",
    ),
    Question(
        "90th percentile of income", Data.PUMS,
        f"SELECT QUANTILE_CONT(income, 0.9) AS p FROM {T}", 0,
        f"SELECT QUANTILE_CONT(income, 0.9) FROM {T}", "QUANTILE_CONT",
        smartnoise_sql=f"SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY income) AS p FROM {T}",
    ),
    # (SmartNoise SQL has no CORR or REGR_SLOPE: not run there)
    Question(
        "correlation of age and income", Data.PUMS,
        f"SELECT CORR(age, income) AS r FROM {T}", 0,
        f"SELECT CORR(age, income) FROM {T}", "CORR (proxy/covariance.py)",
    ),
    Question(
        "income per year of age, by sex", Data.PUMS,
        f"SELECT sex, REGR_SLOPE(income, age) AS b FROM {T} GROUP BY sex", 1,
        f"SELECT sex, REGR_SLOPE(income, age) FROM {T} GROUP BY sex", "REGR_SLOPE",
    ),
)
RUNS_FULL, RUNS_QUICK = 200, 20


def run(runs: int, *, smartnoise: bool = True,
        log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {q.name: {} for q in QUESTIONS}
    info: dict[str, Any] = {}
    with accuracy.recording_seeds() as recorder:
        post = PostProcessor()
        try:
            with accuracy.pums_engine() as engine:
                for q in QUESTIONS:
                    log(f"dpsql {q.name} ({runs} runs)")
                    exact = accuracy.pums_exact(q.truth, q.keys)
                    m = accuracy.measure(engine, post, recorder, q, exact, runs)
                    results[q.name]["dpsql"] = asdict(m)
        finally:
            post.close()
    if smartnoise:
        log(f"SmartNoise: {len(QUESTIONS)} questions ({runs} runs)")
        sn, info = accuracy.smartnoise_measures(list(QUESTIONS), runs, log)
        for name, m in sn.items():
            results[name]["smartnoise"] = asdict(m)
    return {
        "runs": runs, "epsilon": accuracy.EPSILON, "delta": accuracy.DELTA,
        "smartnoise": info,
        "questions": [{"name": q.name, "sql": q.sql, "what": q.what,
                       "smartnoise_sql": q.smartnoise_sql, "results": results[q.name]}
                      for q in QUESTIONS],
    }


def _pct(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _error(m: dict[str, Any]) -> str:
    if m.get("error") and not m.get("cell_errors"):
        return f"refused: {m['error'].removeprefix('ValueError: ')[:90]}"
    text = f"{_pct(m['median_rel_error'])} ({_pct(m['worst_rel_error'])})"
    if m["exact_groups"] > 1 and m["rows_per_run"] < m["exact_groups"]:
        text += f"; {m['rows_per_run']:.1f}/{m['exact_groups']} groups"
    return text


def _same_groups(dp: dict[str, Any], sn: dict[str, Any] | None) -> str:
    if not sn or not sn.get("common_groups") or not dp.get("cell_errors"):
        return "—"
    errors = [dp["cell_errors"][k] for k in sn["common_groups"] if k in dp["cell_errors"]]
    if not errors:
        return "—"
    errors.sort()
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
    return _pct(median)


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "| question | SQL | dpsql: error (worst) | SmartNoise: error (worst) "
        "| dpsql, SmartNoise's groups |",
        "|---|---|---|---|---|",
    ]
    for q in data["questions"]:
        dp = q["results"].get("dpsql", {})
        sn = q["results"].get("smartnoise")
        lines.append(
            f"| {q['name']} | `{q['sql']}` | {_error(dp) if dp else '—'} | "
            f"{_error(sn) if sn else 'not run'} | {_same_groups(dp, sn)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, help=f"repetitions (default {RUNS_FULL})")
    parser.add_argument("--quick", action="store_true", help=f"{RUNS_QUICK} repetitions")
    parser.add_argument("--no-smartnoise", action="store_true", help="skip SmartNoise")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args(argv)
    runs = args.runs or (RUNS_QUICK if args.quick else RUNS_FULL)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    data = run(runs, smartnoise=not args.no_smartnoise, log=log)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
