"""Drives SmartNoise SQL inside its own virtual environment (it pins its own OpenDP).

Not imported by dpsql: ``bench/peers/smartnoise.py`` starts it with the SmartNoise venv's
Python, writes one JSON job on stdin and reads one JSON answer on stdout. Only the
standard library, SmartNoise SQL and pandas are used here; ``workloads.py`` is loaded by
path for the PUMS metadata.

Job: ``{"csv": path, "rows": n, "delta": δ, "tasks": [task, ...]}``; each task is
``{"kind": "runs", "queries": [sql...], "epsilon": E, "runs": R, "keep_rows": bool}``
(each query executed R times, one warm-up first; latency of each run, the released rows
of each run when asked, the odometer's spend for one execution),
``{"kind": "accept", "queries": [...], "epsilon": E}`` (accepted or the error), or
``{"kind": "session", "queries": [...], "epsilon": E}`` (one reader, one odometer, the
queries in order; the odometer's (ε, δ) after each).

Equal total ε: SmartNoise's ``Privacy(epsilon=e)`` is per released statistic, and it
adds statistics of its own (the key count used for thresholding, the sum and count
behind an AVG, ...). For a query total ``E`` we give it the per-statistic ``e`` for which
its own cost estimate (``get_privacy_cost``, the odometer's arithmetic) is ``E``, found by
bisection, and we read the odometer after running to report what it actually spent.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pandas as pd
import snsql
from snsql import Privacy
from snsql.sql.odometer import OdometerHeterogeneous

warnings.filterwarnings("ignore")

_spec = importlib.util.spec_from_file_location(
    "bench_workloads", Path(__file__).resolve().with_name("workloads.py")
)
assert _spec is not None and _spec.loader is not None
workloads = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = workloads  # dataclasses look their module up there
_spec.loader.exec_module(workloads)


def _plain(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f if math.isfinite(f) else None


def per_statistic_epsilon(reader: Any, sql: str, total: float, delta: float) -> float:
    """The per-statistic ε whose composed cost, by SmartNoise's own odometer, is ``total``
    (rounded down, so SmartNoise never spends more than dpsql)."""
    def cost(e: float) -> float:
        reader.privacy = Privacy(epsilon=e, delta=delta)
        return float(reader.get_privacy_cost(sql)[0])

    # Basic composition (k statistics at e each cost k·e) is the usual minimum: try it
    # first, and bisect only when the odometer's advanced bound undercuts it.
    k = sum(1 for c in reader._get_mechanism_costs(sql) if c)
    if k and math.isclose(cost(total / k), total, rel_tol=1e-12):
        return total / k
    lo, hi = total / 1000.0, total
    if cost(hi) <= total:
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if cost(mid) <= total:
            lo = mid
        else:
            hi = mid
    return lo


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def run_queries(reader: Any, task: dict[str, Any], delta: float) -> list[dict[str, Any]]:
    out = []
    for sql in task["queries"]:
        item: dict[str, Any] = {"sql": sql}
        try:
            e = per_statistic_epsilon(reader, sql, task["epsilon"], delta)
            reader.privacy = Privacy(epsilon=e, delta=delta)
            reader.odometer = OdometerHeterogeneous(reader.privacy)
            reader.execute(sql)  # warm-up, and the odometer's spend for one execution
            spent = reader.odometer.spent
            item.update(per_statistic_epsilon=e, statistics=reader.odometer.k,
                        spent_epsilon=float(spent[0]), spent_delta=float(spent[1]))
            times, rows = [], []
            for _ in range(task["runs"]):
                t0 = time.perf_counter()
                result = reader.execute(sql)
                times.append(time.perf_counter() - t0)
                if task.get("keep_rows"):
                    rows.append([[_plain(v) for v in r] for r in result[1:]])
            item.update(ok=True, columns=[str(c) for c in result[0]], seconds=times, rows=rows)
        except Exception as exc:  # SmartNoise refuses by raising anything
            item.update(ok=False, error=_error(exc))
        out.append(item)
    return out


def accept(reader: Any, task: dict[str, Any], delta: float) -> list[dict[str, Any]]:
    out = []
    for sql in task["queries"]:
        try:
            reader.privacy = Privacy(epsilon=task["epsilon"], delta=delta)
            result = reader.execute(sql)
            out.append({"sql": sql, "ok": True, "first_row": [_plain(v) for v in result[1]]
                        if len(result) > 1 else None})
        except Exception as exc:
            out.append({"sql": sql, "ok": False, "error": _error(exc)})
    return out


def session(reader: Any, task: dict[str, Any], delta: float) -> list[dict[str, Any]]:
    reader.privacy = Privacy(epsilon=task["epsilon"], delta=delta)
    reader.odometer = OdometerHeterogeneous(reader.privacy)
    out = []
    for sql in task["queries"]:
        item: dict[str, Any] = {"sql": sql}
        try:
            e = per_statistic_epsilon(reader, sql, task["epsilon"], delta)
            reader.privacy = Privacy(epsilon=e, delta=delta)
            before = reader.odometer.k
            reader.execute(sql)
            item.update(ok=True, statistics=reader.odometer.k - before)
        except Exception as exc:
            item.update(ok=False, error=_error(exc))
        spent = reader.odometer.spent
        item.update(epsilon=float(spent[0]), delta=float(spent[1]),
                    basic=float(sum(s[0] for s in reader.odometer.steps)))
        out.append(item)
    return out


def main() -> None:
    job = json.load(sys.stdin)
    t0 = time.perf_counter()
    df = pd.read_csv(job["csv"])
    reader = snsql.from_df(df, privacy=Privacy(epsilon=1.0, delta=job["delta"]),
                           metadata=workloads.pums_metadata(job["rows"]))
    answer: dict[str, Any] = {
        "load_seconds": time.perf_counter() - t0,
        "versions": {p: version(p) for p in ("smartnoise-sql", "opendp", "pandas", "SQLAlchemy")},
        "python": sys.version.split()[0],
        "results": [],
    }
    kinds = {"runs": run_queries, "accept": accept, "session": session}
    for task in job["tasks"]:
        answer["results"].append(kinds[task["kind"]](reader, task, job["delta"]))
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
