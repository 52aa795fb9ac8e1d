"""Where a PUMS cache miss on never-seen text spends its time, step by step (issue 18).

    .venv/bin/python -m bench.miss_steps [--misses 300] [--new-epsilon] [--disk]

Runs ``SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS WHERE age > N GROUP BY sex``
with a new N each time (nothing memoised; ``--new-epsilon``: the same text at a new ε)
and times each engine step with a wall clock around it (steps nest: a step's time
includes the steps it calls). Also counts the DuckDB statements per miss (the core on
the engine, outer layers on the post-processor), sqlglot parses, and the garbage
collector's passes. The ledger is in RAM (/dev/shm) unless ``--disk``. Prints medians
per miss; ``ISSUE18_TREE=DIR`` profiles another source tree (as bench/issue18.py).
Nothing here gates CI.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

TREE = Path(os.environ.get("ISSUE18_TREE", Path(__file__).resolve().parents[1])).resolve()
sys.path.insert(0, str(TREE))

SQL = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"

# (module path, owner attribute or "", function name, label); missing ones are skipped,
# so that an older tree can be profiled with the same table.
STEPS = (
    ("proxy.engine", "Engine", "_nested", "nested-query split (parse)"),
    ("proxy.engine", "Engine", "_public_query", "public-query route"),
    ("proxy.engine", "Engine", "_structure", "structure (plan text)"),
    ("proxy.engine", "", "bind", "  bind"),
    ("proxy.engine", "", "check_shape", "  check"),
    ("proxy.engine", "", "rewrite", "  rewrite"),
    ("proxy.engine", "", "outer_sql", "  outer layer SQL"),
    ("proxy.engine", "", "build_plan", "calibrate and plan"),
    ("proxy.engine", "Engine", "_charge", "charge (ledger)"),
    ("proxy.engine", "", "release", "release (noise)"),
    ("proxy.engine", "Engine", "_answer", "answer"),
    ("proxy.engine", "Engine", "_post_process", "  outer layer"),
)
COUNTED = {"sqlglot parses (the engine's)"}


def _wrap(
    owner: Any, name: str, label: str, spent: dict[str, float], calls: dict[str, int]
) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - start
            calls[label] += 1

    setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", type=int, default=300)
    parser.add_argument("--new-epsilon", action="store_true")
    parser.add_argument("--disk", action="store_true")
    args = parser.parse_args()

    import importlib

    from bench import workloads
    from proxy.engine import Engine
    from proxy.policy import parse_policy
    from proxy.request import QueryRequest

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for module, owner, name, label in STEPS:
        target: Any = importlib.import_module(module)
        if owner:
            target = getattr(target, owner)
        if hasattr(target, name):
            _wrap(target, name, label, spent, calls)
    # Parses of the request's text (proxy/parse.py, imported by name into the engine).
    _wrap(
        importlib.import_module("proxy.engine"),
        "parse",
        "sqlglot parses (the engine's)",
        spent,
        calls,
    )
    gc_passes = [0]
    gc.callbacks.append(lambda phase, _: gc_passes.__setitem__(0, gc_passes[0] + (phase == "stop")))

    parent = None if args.disk or not Path("/dev/shm").is_dir() else "/dev/shm"
    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        folder = Path(tmp)
        policy = workloads.pums_policy(
            workloads.PUMS_CSV,
            folder / "ledger.sqlite",
            mechanism="gaussian",
            population_delta=1e-4,
        )
        engine = Engine(parse_policy(policy, base_dir=folder))
        from proxy import execute, release

        _wrap(execute.DuckDBExecutor, "run", "DuckDB: core statement", spent, calls)
        _wrap(release.PostProcessor, "run", "DuckDB: outer statement", spent, calls)
        COUNTED.update({"DuckDB: core statement", "DuckDB: outer statement"})

        def request(i: int) -> Any:
            if args.new_epsilon:
                return QueryRequest(SQL, epsilon=1.0 + (i + 1) * 1e-6)
            return QueryRequest(SQL.replace("GROUP BY", f"WHERE age > {i} GROUP BY"), epsilon=1.0)

        for i in range(20):  # warm: imports, the outer layer's check, OpenDP's spaces
            engine.run(request(10**6 + i))
        per: dict[str, list[float]] = defaultdict(list)
        counts: dict[str, list[int]] = defaultdict(list)
        totals, passes = [], []
        for i in range(args.misses):
            spent.clear()
            calls.clear()
            gc_passes[0] = 0
            start = time.perf_counter()
            engine.run(request(i))
            totals.append(time.perf_counter() - start)
            passes.append(gc_passes[0])
            for _, _, _, label in STEPS:
                per[label].append(spent.get(label, 0.0))
            for label in COUNTED:
                per[label].append(spent.get(label, 0.0))
                counts[label].append(calls.get(label, 0))
        engine.close()
    print(f"tree {TREE}: {args.misses} misses, median {1000 * statistics.median(totals):.2f} ms")
    for label in dict.fromkeys([*(s[3] for s in STEPS), *sorted(COUNTED)]):
        ms = 1000 * statistics.median(per[label])
        count = f"  ({statistics.mean(counts[label]):.1f} per miss)" if label in counts else ""
        print(f"  {label:32s} {ms:6.3f} ms{count}")
    print(f"  garbage collector passes         {statistics.mean(passes):.2f} per miss")


if __name__ == "__main__":
    main()
