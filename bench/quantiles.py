"""MEDIAN, quantiles, MIN and MAX (issue #13 §1): error at ε = 1 on PUMS against the true
values, whether SmartNoise SQL answers the same queries, and what a median adds to a
query's run time on the demo data.

    .venv/bin/python -m bench.quantiles [--runs 200] [--no-smartnoise]

Writes ``bench/out/quantiles.json`` and prints Markdown tables.

* **Error.** Each run is a fresh release through ``Engine.run`` (ε moves by 1e-7 per run,
  so every run plans, charges, runs the bounded core and draws), on PUMS (1,000 people,
  one row each, ``sample_data/pums/policy.toml``: age on [0, 100], income on [0, 500000],
  C = 1). The truth is the exact quantile of the clamped values (DuckDB's
  ``quantile_cont``); MIN/MAX are compared with the true extremes (dpsql releases the
  value a few rows from the end, see README "Supported SQL"). Reported: median and 90th
  percentile of |released − true|, and the median rank error (rows between the released
  value and the target rank).
* **SmartNoise SQL** (``bench/smartnoise_runner.py`` in its own venv): the same queries
  through its ``accept`` task at ε = 1; its rewriter knows SUM, COUNT, AVG, VAR and STD
  only, so the table records its refusal messages. If the venv cannot be built (no
  network), that is reported instead.
* **Run time.** The demo generator's data (5,000 people, 100,000 prompts, seed 7; prompts
  capped at C = 10 rows per person and group), cache-miss latency of a query with and
  without a median, median of ``--repeat`` fresh releases each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import workloads
from bench.engine import demo_policy, generate
from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed

EPSILON = 1.0
DELTA = workloads.QUERY_DELTA

BOUNDS = {"age": 100, "income": 500000}  # lower bounds are 0 (the PUMS policy)
# (name, SQL, column, level: a quantile in (0, 1) or "min"/"max", grouped by sex)
PUMS_QUERIES: tuple[tuple[str, str, str, float | str, bool], ...] = (
    ("median age", "SELECT MEDIAN(age) FROM PUMS.PUMS", "age", 0.5, False),
    ("median income", "SELECT MEDIAN(income) FROM PUMS.PUMS", "income", 0.5, False),
    ("p90 income", "SELECT QUANTILE_CONT(income, 0.9) FROM PUMS.PUMS", "income", 0.9, False),
    ("median age by sex", "SELECT sex, MEDIAN(age) FROM PUMS.PUMS GROUP BY sex", "age", 0.5, True),
    (
        "median income by sex",
        "SELECT sex, MEDIAN(income) FROM PUMS.PUMS GROUP BY sex",
        "income",
        0.5,
        True,
    ),
    ("min age", "SELECT MIN(age) FROM PUMS.PUMS", "age", "min", False),
    ("max income", "SELECT MAX(income) FROM PUMS.PUMS", "income", "max", False),
)
# The same questions as SmartNoise SQL's grammar would spell them.
SMARTNOISE_QUERIES = (
    "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) FROM PUMS.PUMS",
    "SELECT MEDIAN(age) FROM PUMS.PUMS",
    "SELECT MIN(age) FROM PUMS.PUMS",
    "SELECT MAX(income) FROM PUMS.PUMS",
    "SELECT sex, MIN(age) FROM PUMS.PUMS GROUP BY sex",
)

DEMO_WITHOUT = "SELECT model, COUNT(*), AVG(tokens_in) FROM prompts GROUP BY model"
DEMO_WITH = "SELECT model, COUNT(*), AVG(tokens_in), MEDIAN(tokens_in) FROM prompts GROUP BY model"
DEMO_PRIVATE_WITHOUT = (
    "SELECT date_trunc('month', ts) AS m, COUNT(*) FROM prompts GROUP BY date_trunc('month', ts)"
)
DEMO_PRIVATE_WITH = (
    "SELECT date_trunc('month', ts) AS m, COUNT(*), MEDIAN(latency_ms) FROM prompts "
    "GROUP BY date_trunc('month', ts)"
)


def _values(con: Any, column: str, grouped: bool) -> dict[Any, list[float]]:
    """The clamped values per group (one group, key None, when not grouped)."""
    key = "sex" if grouped else "NULL"
    rows = con.execute(
        f"SELECT {key}, LEAST(GREATEST({column}, 0), {BOUNDS[column]}) FROM t"
    ).fetchall()
    out: dict[Any, list[float]] = {}
    for k, v in rows:
        out.setdefault(k, []).append(float(v))
    return out


def _true(values: list[float], level: float | str) -> float:
    if level == "min":
        return min(values)
    if level == "max":
        return max(values)
    assert isinstance(level, float)
    return float(
        statistics.quantiles(values, n=10_000, method="inclusive")[round(level * 10_000) - 1]
    )


def _rank_error(values: list[float], released: float, q: float) -> float:
    """Rows between the released value and the target rank q·n of ``values``."""
    lt = sum(v < released for v in values)
    le = sum(v <= released for v in values)
    r = q * len(values)
    return max(lt - r, r - le, 0.0)


def pums_errors(mechanism: str, runs: int) -> list[dict[str, Any]]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv_auto('{workloads.PUMS_CSV}')")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        text = workloads.pums_policy(
            workloads.PUMS_CSV,
            Path(tmp) / "ledger.sqlite",
            mechanism=mechanism,
            population_delta=1e-4,
        )
        engine = Engine(parse_policy(text, base_dir=Path(tmp)))
        try:
            for name, sql, column, level, grouped in PUMS_QUERIES:
                groups = _values(con, column, grouped)
                truth = {k: _true(v, level) for k, v in groups.items()}
                q = {"min": 0.0, "max": 1.0}.get(str(level), level)
                assert isinstance(q, float)
                errors: list[float] = []
                ranks: list[float] = []
                seconds: list[float] = []
                plan = engine.prepare(QueryRequest(sql, epsilon=EPSILON, delta=DELTA))[1]
                [drawn] = plan.quantiles
                stat = drawn.statistic
                for i in range(runs):
                    t0 = time.perf_counter()
                    result = engine.run(
                        QueryRequest(sql, epsilon=EPSILON - (i + 1) * 1e-7, delta=DELTA)
                    )
                    seconds.append(time.perf_counter() - t0)
                    for row in result.rows:
                        key = row[0] if grouped else None
                        if key not in truth:
                            continue
                        errors.append(abs(float(row[-1]) - truth[key]))
                        ranks.append(_rank_error(groups[key], float(row[-1]), q))
                errors.sort()
                out.append(
                    {
                        "name": name,
                        "sql": sql,
                        "mechanism": mechanism,
                        "runs": runs,
                        "truth": {str(k): v for k, v in truth.items()},
                        "median_abs_error": statistics.median(errors),
                        "p90_abs_error": errors[int(0.9 * (len(errors) - 1))],
                        "median_rank_error": statistics.median(ranks),
                        "predicted_rank_error_95": drawn.descriptor.rank_error,
                        "offset_rows": drawn.descriptor.target.offset,
                        "epsilon_per_group": drawn.descriptor.epsilon_per_group,
                        "grid_bins": stat.grid.bins,
                        "miss_ms": 1000 * statistics.median(seconds),
                    }
                )
        finally:
            engine.close()
            con.close()
    return out


def smartnoise(epsilon: float) -> dict[str, Any]:
    try:
        from bench.peers import smartnoise as sn

        answer = sn.run_job(
            {
                "csv": str(workloads.PUMS_CSV),
                "rows": 1000,
                "delta": DELTA,
                "tasks": [
                    {"kind": "accept", "queries": list(SMARTNOISE_QUERIES), "epsilon": epsilon}
                ],
            },
            timeout=1200,
        )
    except Exception as error:  # no venv, no network: say so
        return {"available": False, "error": f"{type(error).__name__}: {str(error)[:300]}"}
    return {"available": True, "versions": answer["versions"], "results": answer["results"][0]}


def demo_timing(repeat: int) -> list[dict[str, Any]]:
    out_dir = workloads.OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    db = out_dir / "usage-5000-100000.duckdb"
    if not db.exists():
        generate(db, people=5000, prompts=100_000, seed=7)
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        text = demo_policy(db, Path(tmp) / "ledger.sqlite", 2)
        text = text.replace(
            'max_rows_per_group = "auto"    # Linf: rows of one person counted per group, '
            "chosen from\nmax_rows_per_group_limit = 256",
            "max_rows_per_group = 10\n#",
        )
        engine = Engine(parse_policy(text, base_dir=Path(tmp)))
        try:
            counter = iter(range(1, 10**9))
            for name, sql in (
                ("public key, without median", DEMO_WITHOUT),
                ("public key, with median", DEMO_WITH),
                ("private key, without median", DEMO_PRIVATE_WITHOUT),
                ("private key, with median", DEMO_PRIVATE_WITH),
            ):
                engine.run(QueryRequest(sql, epsilon=1.0))  # warm
                times = []
                core = []
                for _ in range(repeat):
                    request = QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-7)
                    t0 = time.perf_counter()
                    engine.run(request)
                    times.append(time.perf_counter() - t0)
                    plan = engine.prepare(request)[1]
                    t1 = time.perf_counter()
                    engine.executor.run(plan.core_sql, [1] if takes_seed(plan.core_sql) else [])
                    core.append(time.perf_counter() - t1)
                points.append(
                    {
                        "name": name,
                        "sql": sql,
                        "miss_ms": 1000 * statistics.median(times),
                        "core_ms": 1000 * statistics.median(core),
                        "max_rows": plan.max_rows,
                    }
                )
        finally:
            engine.close()
    return points


def render(result: dict[str, Any]) -> str:
    lines = [
        "| query | mechanism | true | median abs error | p90 abs error | median rank error "
        "(rows) | predicted 95% rank error | ε per draw | bins |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for e in result["errors"]:
        truth = ", ".join(f"{v:g}" for v in e["truth"].values())
        lines.append(
            f"| {e['name']} | {e['mechanism']} | {truth} | {e['median_abs_error']:.4g} | "
            f"{e['p90_abs_error']:.4g} | {e['median_rank_error']:.3g} | "
            f"{e['predicted_rank_error_95']:.3g} | {e['epsilon_per_group']:.3g} | "
            f"{e['grid_bins']} |"
        )
    sn = result["smartnoise"]
    lines.append("")
    if not sn["available"]:
        lines.append(f"SmartNoise SQL could not run here: {sn['error']}")
    else:
        lines.append(f"SmartNoise SQL {sn['versions'].get('smartnoise-sql')}:")
        for item in sn["results"]:
            outcome = "answered" if item["ok"] else f"refused ({item['error'][:120]})"
            lines.append(f"* `{item['sql']}`: {outcome}")
    lines.append("")
    lines.append("| demo query | C | miss ms | core ms |")
    lines.append("| --- | ---: | ---: | ---: |")
    for p in result["timing"]:
        lines.append(f"| {p['name']} | {p['max_rows']} | {p['miss_ms']:.1f} | {p['core_ms']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-smartnoise", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"epsilon": EPSILON, "delta": DELTA, "errors": []}
    for mechanism in ("gaussian", "laplace"):
        result["errors"] += pums_errors(mechanism, args.runs)
    result["smartnoise"] = (
        {"available": False, "error": "skipped (--no-smartnoise)"}
        if args.no_smartnoise
        else smartnoise(EPSILON)
    )
    result["timing"] = demo_timing(args.repeat)
    workloads.OUT.mkdir(parents=True, exist_ok=True)
    (workloads.OUT / "quantiles.json").write_text(json.dumps(result, indent=2))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
