"""The benchmark harness: every table of BENCHMARKS.md and its plots, in one run.

    make bench                                  # full (about 15 min on 2 quiet cores)
    make bench BENCH_ARGS=--quick               # a few minutes, fewer runs and sizes
    .venv/bin/python -m bench.run [--quick] [--only SECTION ...] [--output FILE]

Sections: ``scale`` (floor ratio and scale curve), ``smartnoise`` (latency, error at
equal total ε, what each accepts), ``session`` (budget efficiency), ``accounting``
(tightness against dp-accounting), ``latency`` (in-process, HTTP, ledger), ``acceptance``
(peer suites' PUMS queries answered by dpsql and SmartNoise: bench/acceptance.py),
``accuracy`` (issue #12: realistic questions at ε = 1, fixed vs auto caps vs SmartNoise),
``doors`` (a cached query through /v1/query, the Trino door and the PostgreSQL door:
bench/doors.py; ``--doors-before REV`` adds commit REV beside it). ``--only``
re-measures some sections and keeps the others from the last ``bench/results.json``.
Writes ``bench/results.json`` (summaries, no raw rows), the figures under
``bench/figures/`` and ``BENCHMARKS.md``. Timings are medians measured in this run on
this machine; ratios are the point, and nothing here gates CI.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata as md
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_HERE = ROOT / "bench"
# Run as a script, bench/ would head sys.path and shadow the `accounting` package and
# the standard library's `http` with bench/accounting.py and bench/http.py.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from bench import plots, workloads  # noqa: E402
from bench.peers import dpsql as dp  # noqa: E402
from bench.peers import smartnoise as sn  # noqa: E402

RESULTS = ROOT / "bench" / "results.json"
FIGURES = ROOT / "bench" / "figures"
SECTIONS = ("scale", "smartnoise", "session", "accounting", "latency", "acceptance",
            "new_aggregates", "accuracy", "doors")
# --doors-before REV: the doors section also serves commit REV, for a before/after table
DOORS_BEFORE: list[str] = []


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median_ms(xs: list[float]) -> float:
    return 1000 * statistics.median(xs) if xs else math.nan


# --- environment --------------------------------------------------------------------
def environment(argv: list[str]) -> dict[str, Any]:
    def ver(p: str) -> str:
        try:
            return md.version(p)
        except md.PackageNotFoundError:
            return "not installed"

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        mem = math.nan
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "accounting", "proxy"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout
        commit += " (engine files modified)" if dirty.strip() else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python -m bench.run", *argv]).strip(),
        "machine": f"{cpu}, {os.cpu_count()} logical cores, {mem:.0f} GiB RAM",
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
        "commit": commit,
        "versions": {p: ver(p) for p in ("dpsql", "duckdb", "opendp", "sqlglot", "numpy",
                                          "dp-accounting", "matplotlib")},
    }


# --- 1 + 6: floor ratio and scale curve ---------------------------------------------
def _scale_point(engine: Any, sql: str, floor: str, repeat: int) -> dict[str, float]:
    from bench import engine as eb
    from proxy.request import QueryRequest

    engine.executor.evaluate(floor)  # warm the page cache
    t_floor = eb.median_time(lambda: engine.executor.evaluate(floor), repeat)
    counter = iter(range(1, 10**9))
    # Each run a new release: ε moves by 1e-6, so it plans, charges, runs and noises.
    t_miss = eb.median_time(
        lambda: engine.run(QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-6)), repeat)
    t_hit = eb.median_time(lambda: engine.run(QueryRequest(sql, epsilon=1.0 + 1e-6)), repeat)
    return {"floor_s": t_floor, "miss_s": t_miss, "hit_s": t_hit, "ratio": t_miss / t_floor}


def section_scale(quick: bool) -> dict[str, Any]:
    from bench import engine as eb
    from proxy.engine import Engine
    from proxy.policy import parse_policy

    sizes = [100_000, 300_000, 1_000_000] if quick else [
        100_000, 300_000, 1_000_000, 3_000_000, 10_000_000]
    repeat = 3 if quick else 5
    points = []
    for prompts in sizes:
        people = prompts // 10
        db = workloads.OUT / f"usage-{people}-{prompts}.duckdb"
        if not db.exists():
            t0 = time.perf_counter()
            eb.generate(db, people=people, prompts=prompts, seed=7)
            log(f"generated {db.name} in {time.perf_counter() - t0:.1f}s")
        with tempfile.TemporaryDirectory() as tmp:
            policy = parse_policy(eb.demo_policy(db, Path(tmp) / "ledger.sqlite", 2),
                                  base_dir=Path(tmp))
            engine = Engine(policy)
            try:
                for name, sql, floor in (("public key", eb.PUBLIC_KEY, eb.PUBLIC_FLOOR),
                                         ("private key", eb.PRIVATE_KEY, eb.PRIVATE_FLOOR)):
                    point = _scale_point(engine, sql, floor, repeat)
                    points.append({"rows": prompts, "people": people, "query": name, **point})
                    log(f"scale {prompts:>10,} {name}: floor {point['floor_s']:.3f}s "
                        f"miss {point['miss_s']:.3f}s ×{point['ratio']:.2f}")
            finally:
                engine.close()
    return {"repeat": repeat, "points": points,
            "sql": {"public key": eb.PUBLIC_KEY, "public floor": eb.PUBLIC_FLOOR,
                    "private key": eb.PRIVATE_KEY, "private floor": eb.PRIVATE_FLOOR}}


# --- 2: SmartNoise SQL ----------------------------------------------------------------
def _key(v: Any) -> str:
    if v is None:
        return "NULL"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return str(int(f)) if f.is_integer() else repr(f)


def truths(rows: int) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Exact answers per query, per system definition: {query: {system: {key: values}}}."""
    con = duckdb.connect()
    con.execute("CREATE SCHEMA PUMS")
    con.execute("CREATE TABLE PUMS.PUMS AS SELECT * FROM read_csv_auto(?)",
                [str(workloads.dataset(rows))])
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for q in workloads.QUERIES:
        out[q.name] = {}
        for system, sql in (("dpsql", q.truth), ("smartnoise", q.smartnoise_truth)):
            table = {}
            for r in con.execute(sql).fetchall():
                table["|".join(_key(v) for v in r[:q.keys])] = [float(v) for v in r[q.keys:]]
            out[q.name][system] = table
    con.close()
    return out


def _row_key(q: workloads.Query, r: list[Any]) -> str:
    return "|".join(_key(v) for v in r[:q.keys])


def errors(q: workloads.Query, truth: dict[str, list[float]], runs: list[list[list[Any]]],
           only: set[str] | None = None) -> dict[str, Any]:
    """Per aggregate column: mean |released − true| over released cells matched by key
    (and whose key is in ``only``, when given)."""
    ncols = len(next(iter(truth.values())))
    sums, counts = [0.0] * ncols, [0] * ncols
    released = 0
    for rows in runs:
        released += len(rows)
        for r in rows:
            k = _row_key(q, r)
            if k not in truth or (only is not None and k not in only):
                continue
            for j, v in enumerate(r[q.keys:]):
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                sums[j] += abs(float(v) - truth[k][j])
                counts[j] += 1
    return {"mae": [s / c if c else math.nan for s, c in zip(sums, counts, strict=True)],
            "cells": counts, "rows_per_run": released / max(len(runs), 1)}


PUMS_FLOOR = ("SELECT SUM(c), COUNT(*) FROM (SELECT pid, COUNT(*) AS c FROM PUMS.PUMS "
              "GROUP BY pid)")


def _dpsql_runs(rows: int, mechanism: str, runs: int, keep_rows: bool,
                population_delta: float = 1e-4,
                floor: list[float] | None = None) -> list[dict[str, Any]]:
    out = []
    with dp.PumsEngine(rows, mechanism=mechanism, population_delta=population_delta) as eng:
        if floor is not None:
            # The per-person pre-aggregation alone, on the engine's own DuckDB: what any
            # user-level answer over this table must at least compute.
            from bench import engine as eb

            eng.engine.executor.evaluate(PUMS_FLOOR)
            floor.append(eb.median_time(lambda: eng.engine.executor.evaluate(PUMS_FLOOR),
                                        max(runs, 3)))
        for q in workloads.QUERIES:
            first = eng.run(q.sql, workloads.QUERY_EPSILON)  # warm-up (a miss, charged)
            item: dict[str, Any] = {"name": q.name, "ok": first.ok, "error": first.error,
                                    "epsilon": first.epsilon, "columns": list(first.columns)}
            if first.ok:
                times, outs, hits = [], [], 0
                for i in range(1, runs + 1):
                    # A relative 1e-9 change of ε makes every run a fresh, charged release.
                    a = eng.run(q.sql, workloads.QUERY_EPSILON * (1 + i * 1e-9))
                    times.append(a.seconds)
                    hits += a.cached
                    if keep_rows:
                        outs.append([list(r) for r in a.rows])
                item.update(seconds=times, rows=outs, cache_hits=hits)
            out.append(item)
    return out


def section_smartnoise(quick: bool) -> dict[str, Any]:
    runs = 40 if quick else 200
    latency_sizes = {100_000: 3 if quick else 10, 1_000_000: 2 if quick else 5}
    E, delta = workloads.QUERY_EPSILON, workloads.QUERY_DELTA
    sql_sn = [q.smartnoise_sql for q in workloads.QUERIES]
    truth = truths(1000)
    result: dict[str, Any] = {"runs": runs, "epsilon": E, "delta": delta, "sizes": {}}

    # Accuracy and latency at 1,000 people: every run a fresh release on both sides.
    systems: dict[str, list[dict[str, Any]]] = {}
    for mech in ("gaussian", "laplace"):
        log(f"dpsql ({mech}) {runs} runs × {len(workloads.QUERIES)} queries on PUMS")
        systems[f"dpsql {mech}"] = _dpsql_runs(1000, mech, runs, keep_rows=True)
    log(f"SmartNoise {runs} runs × {len(sql_sn)} queries on PUMS, probes")
    probes = [sql for _, sql in workloads.PROBES]
    ans = sn.run_job({"csv": str(workloads.dataset(1000)), "rows": 1000, "delta": delta,
                      "tasks": [{"kind": "runs", "queries": sql_sn, "epsilon": E,
                                 "runs": runs, "keep_rows": True},
                                {"kind": "accept", "queries": probes, "epsilon": E}]})
    result["smartnoise_versions"] = ans["versions"]
    result["smartnoise_python"] = ans["python"]
    sn_runs, sn_probes = ans["results"]
    systems["smartnoise"] = [{"name": q.name, **r} for q, r in
                             zip(workloads.QUERIES, sn_runs, strict=True)]

    accuracy = []
    for i, q in enumerate(workloads.QUERIES):
        s = systems["smartnoise"][i]
        row: dict[str, Any] = {"name": q.name, "sql": q.sql, "columns": []}
        # The groups SmartNoise releases in at least half of its runs (its thresholding
        # drops small groups, where errors are largest): the like-for-like comparison.
        common: set[str] | None = None
        if s["ok"]:
            seen: dict[str, int] = {}
            for rows in s["rows"]:
                for r in rows:
                    seen[_row_key(q, r)] = seen.get(_row_key(q, r), 0) + 1
            common = {k for k, c in seen.items() if c >= len(s["rows"]) / 2}
        per_sys, per_common = {}, {}
        for name, items in systems.items():
            it = items[i]
            t = truth[q.name]["smartnoise" if name == "smartnoise" else "dpsql"]
            per_sys[name] = errors(q, t, it["rows"]) if it["ok"] else None
            per_common[name] = errors(q, t, it["rows"], common) if it["ok"] and common \
                else None
        agg_names = (s.get("columns") or systems["dpsql gaussian"][i]["columns"])[q.keys:]
        for j, col in enumerate(agg_names):
            cell: dict[str, Any] = {"column": col, "common_groups": len(common or ())}
            for name, e in per_common.items():
                cell[name] = e["mae"][j] if e else None
            for name, e in per_sys.items():
                cell[f"{name} all"] = e["mae"][j] if e else None
            accuracy.append({"query": q.name, **cell})
        row["rows_per_run"] = {n: (e["rows_per_run"] if e else None) for n, e in per_sys.items()}
        row["true_groups"] = len(truth[q.name]["dpsql"])
        row["spent"] = {
            "dpsql gaussian": systems["dpsql gaussian"][i]["epsilon"],
            "dpsql laplace": systems["dpsql laplace"][i]["epsilon"],
            "smartnoise": s.get("spent_epsilon"),
            "smartnoise_delta": s.get("spent_delta"),
            "smartnoise_statistics": s.get("statistics"),
            "smartnoise_per_statistic": s.get("per_statistic_epsilon"),
        }
        row["ok"] = {n: items[i]["ok"] for n, items in systems.items()}
        row["error"] = {n: items[i].get("error") for n, items in systems.items()
                        if not items[i]["ok"]}
        row["cache_hits"] = {n: items[i].get("cache_hits", 0) for n, items in systems.items()
                             if n != "smartnoise"}
        result.setdefault("queries", []).append(row)
    result["accuracy"] = accuracy
    result["sizes"]["1000"] = {
        n: {q.name: median_ms(it["seconds"]) if it["ok"] else None
            for q, it in zip(workloads.QUERIES, items, strict=True)}
        for n, items in systems.items()
    }
    result["sizes"]["1000"]["smartnoise_load_s"] = ans["load_seconds"]

    # Acceptance: the main queries and the probes.
    probe_rows = []
    with dp.PumsEngine(1000, mechanism="gaussian", population_delta=1e-4) as eng:
        for (label, sql), s_ans in zip(workloads.PROBES, sn_probes, strict=True):
            a = eng.run(sql, E)
            probe_rows.append({"label": label, "sql": sql, "dpsql": a.ok,
                               "dpsql_error": a.error, "smartnoise": s_ans["ok"],
                               "smartnoise_error": s_ans.get("error", "")})
    result["probes"] = probe_rows

    # Latency on scaled PUMS (unique person ids).
    for rows, reps in latency_sizes.items():
        log(f"latency at {rows:,} rows, {reps} runs per query")
        workloads.dataset(rows)
        floor: list[float] = []
        d = _dpsql_runs(rows, "gaussian", reps, keep_rows=False, floor=floor)
        ans = sn.run_job({"csv": str(workloads.dataset(rows)), "rows": rows, "delta": delta,
                          "tasks": [{"kind": "runs", "queries": sql_sn, "epsilon": E,
                                     "runs": reps, "keep_rows": False}]})
        result["sizes"][str(rows)] = {
            "dpsql gaussian": {q.name: median_ms(it["seconds"]) if it["ok"] else None
                               for q, it in zip(workloads.QUERIES, d, strict=True)},
            "smartnoise": {q.name: median_ms(it["seconds"]) if it["ok"] else None
                           for q, it in zip(workloads.QUERIES, ans["results"][0],
                                            strict=True)},
            "smartnoise_load_s": ans["load_seconds"],
            "runs": reps,
            "floor_ms": floor[0] * 1000,
        }
    return result


# --- 3: budget efficiency -------------------------------------------------------------
def section_session(quick: bool) -> dict[str, Any]:
    del quick  # the session is the same in both modes
    E, delta = workloads.SESSION_EPSILON, workloads.QUERY_DELTA
    script = workloads.session()
    log("SmartNoise session")
    ans = sn.run_job({"csv": str(workloads.dataset(1000)), "rows": 1000, "delta": delta,
                      "tasks": [{"kind": "session", "queries": [s for _, s in script],
                                 "epsilon": E}]})
    sn_steps = ans["results"][0]
    sn_final = sn_steps[-1]
    out: dict[str, Any] = {"epsilon": E, "delta": delta, "queries": len(script),
                           "smartnoise": {
                               "epsilon": sn_final["epsilon"], "delta": sn_final["delta"],
                               "basic": sn_final["basic"],
                               "answered": sum(s["ok"] for s in sn_steps),
                               "statistics": sum(s.get("statistics", 0) for s in sn_steps),
                               "curve": [s["epsilon"] for s in sn_steps],
                               "refused": [(lab, s["error"]) for (lab, _), s in
                                           zip(script, sn_steps, strict=True) if not s["ok"]],
                           }}
    for mech in ("gaussian", "laplace"):
        log(f"dpsql ({mech}) session")
        with dp.PumsEngine(1000, mechanism=mech, population_delta=1e-6) as eng:
            curve, nocache, charged, refused, plans = [], [], 0, [], []
            for label, sql in script:
                a = eng.run(sql, E, delta)
                if a.ok:
                    charged += not a.cached
                    plans.append(eng.plan_curve(sql, E, delta))
                else:
                    refused.append((label, a.error))
                curve.append(eng.spent())
                nocache.append(dp.compose(plans, 1e-6))
            out[f"dpsql {mech}"] = {
                "epsilon": eng.spent(), "delta": 1e-6,
                "epsilon_at_smartnoise_delta": eng.spent(sn_final["delta"]),
                "charged": charged, "answered": len(script) - len(refused),
                "refused": refused, "curve": curve,
                "no_cache_epsilon": nocache[-1], "no_cache_curve": nocache,
                "no_cache_at_smartnoise_delta": dp.compose(plans, sn_final["delta"]),
            }
    return out


# --- 4: accounting tightness ---------------------------------------------------------
def section_accounting(quick: bool) -> dict[str, Any]:
    del quick
    from bench import accounting as acc

    rows = []
    for w in acc.WORKLOADS:
        c = acc.our_curve(w)
        d = w.target_delta
        row = {"workload": w.name, "delta": d, "ours": c.epsilon(d),
               "textbook": c.epsilon_textbook(d), "exact": acc.exact_gaussian(w)}
        if acc.dpa is not None:
            row.update(rdp_our_orders=acc.rdp_epsilon(w, list(acc.ORDERS)),
                       rdp_default=acc.rdp_epsilon(w, None), pld=acc.pld_epsilon(w))
        rows.append(row)
    return {"rows": rows, "dp_accounting": acc.dpa is not None}


# --- 5: latency and throughput -----------------------------------------------------
def section_latency(quick: bool) -> dict[str, Any]:
    from bench import engine as eb
    from proxy.request import QueryRequest

    repeat = 50 if quick else 200
    out: dict[str, Any] = {"repeat": repeat}
    sql = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"
    with dp.PumsEngine(1000, mechanism="gaussian", population_delta=1e-4) as pe:
        engine = pe.engine
        engine.run(QueryRequest(sql, epsilon=1.0))
        counter = iter(range(1, 10**9))
        miss = eb.median_time(lambda: engine.run(
            QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-6)), repeat)
        hit = eb.median_time(lambda: engine.run(QueryRequest(sql, epsilon=1.0)), repeat)
        # A query text never seen before: parse, bind, check and rewrite too.
        fresh = iter(range(10**9))
        new_text = eb.median_time(lambda: engine.run(QueryRequest(
            f"SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS WHERE age > {next(fresh)} "
            "GROUP BY sex", epsilon=1.0)), repeat)
        variant = "SELECT sex, COUNT(*) AS k, AVG(income) FROM PUMS.PUMS GROUP BY sex " \
                  "ORDER BY k DESC LIMIT 1"
        engine.run(QueryRequest(variant, epsilon=1.0))
        resorted = eb.median_time(lambda: engine.run(QueryRequest(variant, epsilon=1.0)),
                                  repeat)
    bare = duckdb.connect()
    bare.execute("CREATE TABLE p AS SELECT * FROM read_csv_auto(?)", [str(workloads.PUMS_CSV)])
    raw = eb.median_time(lambda: bare.execute(
        "SELECT sex, COUNT(*), AVG(income) FROM p GROUP BY sex").fetchall(), repeat)
    bare.close()
    out["in_process"] = {"sql": sql, "bare_ms": raw * 1000, "miss_ms": miss * 1000,
                         "new_text_miss_ms": new_text * 1000,
                         "hit_ms": hit * 1000, "resorted_hit_ms": resorted * 1000}
    log(f"in-process PUMS: miss {miss * 1000:.2f} ms, hit {hit * 1000:.2f} ms")

    # HTTP: bench/http.py is its own script (it prints a JSON report on stdout).
    http = ROOT / "bench" / "http.py"
    if http.exists():
        seconds = 2 if quick else 5
        sequential = 500 if quick else 2000
        log(f"HTTP bench ({seconds} s per phase)")
        proc = subprocess.run([sys.executable, str(http), "--seconds", str(seconds),
                               "--sequential", str(sequential)], cwd=ROOT, capture_output=True,
                              text=True, timeout=900, check=False)
        if proc.returncode == 0:
            out["http"] = {"seconds": seconds, "sequential": sequential,
                           "report": json.loads(proc.stdout)}
        else:
            out["http"] = {"error": proc.stderr[-1500:]}
    else:
        out["http"] = {"error": "bench/http.py not found"}

    from bench import ledger_bench as lb

    seconds = 1.0 if quick else 5.0
    ledger: dict[str, Any] = {"seconds": seconds, "conversion_us": lb.conversion_us()}
    with tempfile.TemporaryDirectory() as tmp:
        ledger["bare_commits_per_s"] = lb.bare_commits_per_second(
            str(Path(tmp) / "bare.sqlite"), seconds)
        for procs in (1, 2):
            ledger[f"charges_per_s_{procs}"] = lb.charges_per_second(
                str(Path(tmp) / f"ledger{procs}.sqlite"), procs, seconds)
    log(f"ledger: {ledger['charges_per_s_1']:.0f} charges/s (1 process)")
    out["ledger"] = ledger
    return out


def section_acceptance(quick: bool) -> dict[str, Any]:
    """The peer-suite corpus through dpsql and SmartNoise (quick mode: the same; it takes
    under a minute)."""
    from dataclasses import asdict

    from bench import acceptance

    del quick
    rows = acceptance.evaluate(acceptance.load(), smartnoise=True)
    summary = acceptance.summarize(rows)
    log(f"acceptance: dpsql answers {summary.smartnoise_accepts[0]} of the "
        f"{summary.smartnoise_accepts[1]} queries SmartNoise accepts")
    return {"summary": asdict(summary), "markdown": acceptance.markdown(rows, summary),
            "queries": len(rows)}


def section_new_aggregates(quick: bool) -> dict[str, Any]:
    """Error of issue 13's new aggregates against SmartNoise SQL (bench/new_aggregates.py)."""
    from bench import new_aggregates

    runs = new_aggregates.RUNS_QUICK if quick else new_aggregates.RUNS_FULL
    return new_aggregates.run(runs, log=log)


# --- 7: accuracy at ε = 1 ----------------------------------------------------------------
def section_accuracy(quick: bool) -> dict[str, Any]:
    from bench import accuracy

    return accuracy.run(accuracy.RUNS_QUICK if quick else accuracy.RUNS_FULL,
                        draws=accuracy.DRAWS_QUICK if quick else accuracy.DRAWS_FULL, log=log)


# --- 9: the doors on a cached query ------------------------------------------------------
def section_doors(quick: bool) -> dict[str, Any]:
    """The same cached query through /v1/query, the Trino door and the PostgreSQL door
    (bench/doors.py), interleaved; with --doors-before, the named commit beside it."""
    from bench import doors

    data = doors.run(rounds=60 if quick else 300, per_round=2,
                     before=DOORS_BEFORE[0] if DOORS_BEFORE else None,
                     people=5000, prompts=100_000)
    log("doors: " + ", ".join(f"{p} {m['ratio']:.2f}x" for p, m in
                              list(data["servers"].values())[-1].items()))
    return data


RUNNERS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "scale": section_scale,
    "smartnoise": section_smartnoise,
    "session": section_session,
    "accounting": section_accounting,
    "latency": section_latency,
    "acceptance": section_acceptance,
    "new_aggregates": section_new_aggregates,


    "accuracy": section_accuracy,
    "doors": section_doors,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and sizes")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="re-measure these only")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--doors-before", metavar="REV",
                        help="the doors section also times commit REV (before/after)")
    parser.add_argument("--render", action="store_true",
                        help="only re-render BENCHMARKS.md and figures from results.json")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.doors_before:
        DOORS_BEFORE.append(args.doors_before)
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if not args.render:
        results.setdefault("sections", {})
        for name in args.only or SECTIONS:
            log(f"section {name}")
            t0 = time.perf_counter()
            env = environment(argv)
            data = RUNNERS[name](args.quick)
            results["sections"][name] = {"env": env, "quick": args.quick,
                                         "wall_s": time.perf_counter() - t0, "data": data}
            RESULTS.write_text(json.dumps(results, indent=1, default=str))
            log(f"section {name} done in {time.perf_counter() - t0:.0f}s")
    FIGURES.mkdir(parents=True, exist_ok=True)
    figures = plots.draw(results, FIGURES)
    from bench import report

    args.output.write_text(report.render(results, figures, ROOT))
    log(f"wrote {args.output.relative_to(ROOT)} and {len(figures)} figures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
