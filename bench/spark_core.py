"""Spark's per-person forms (proxy/engines/spark_per_person.py) on and off, interleaved:
the cache-miss latency of the public-key and private-key queries of bench/scale.py
against the per-person floor, in one run on Spark local[2], medians of `--repeat` rounds.

Run: `python -m bench.spark_core [--rows 10000000] [--repeat 3] [--query public|day|month]`.
Same data and queries as bench/scale.py (the Parquet copy); each round times the floor,
then the miss with the forms off and on, in an order that alternates from round to round
so that drift on a shared machine hits them alike. `--explain` prints the core's physical
plan with the forms on. Never a timed assertion.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine import (  # noqa: E402
    MONTH_FLOOR,
    PRIVATE_FLOOR,
    PRIVATE_KEY,
    PRIVATE_MONTH,
    PUBLIC_FLOOR,
    PUBLIC_KEY,
)
from bench.pg_cut import _database  # noqa: E402
from bench.scale import policy_text  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402

QUERIES = {
    "public": (PUBLIC_KEY, PUBLIC_FLOOR),
    "day": (PRIVATE_KEY, PRIVATE_FLOOR),
    "month": (PRIVATE_MONTH, MONTH_FLOOR),
}
FORMS = ("forms off", "forms on")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--query", choices=sorted(QUERIES), default="public")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args(argv)
    sql, floor_sql = QUERIES[args.query]
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        text = policy_text(_database("spark", args.rows, None), Path(tmp) / "l.sqlite", 3600.0)
        engine = Engine(parse_policy(text, base_dir=Path(tmp)))
        executor = engine.executor
        counter = iter(range(10**9))

        def miss(label: str) -> float:
            # (the bench's own switch: dpsql itself always uses the forms on Spark)
            executor._forms.fast_per_person = label == "forms on"  # type: ignore[attr-defined]
            executor._render.cache_clear()  # type: ignore[attr-defined]
            start = time.perf_counter()
            engine.run(QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-6))
            return time.perf_counter() - start

        try:
            executor.evaluate(floor_sql)  # warm the pages
            for label in FORMS:
                miss(label)
            if args.explain:
                seen: list[str] = []
                run = executor.run
                executor.run = lambda s, p=(): (seen.append(s), run(s, p))[1]  # type: ignore[method-assign]
                miss("forms on")
                executor.run = run  # type: ignore[method-assign]
                executor._frame(seen[-1], [0]).explain("formatted")  # type: ignore[attr-defined]
            times: dict[str, list[float]] = {"floor": [], **{f: [] for f in FORMS}}
            for i in range(args.repeat):
                start = time.perf_counter()
                executor.evaluate(floor_sql)
                times["floor"].append(time.perf_counter() - start)
                for label in FORMS[:: 1 if i % 2 == 0 else -1]:
                    times[label].append(miss(label))
        finally:
            engine.close()
    load_end = os.getloadavg()
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"spark local[2], {args.rows:,} rows, {args.query} key, medians of {args.repeat} "
        f"(load {load_start[0]:.1f} -> {load_end[0]:.1f}):"
    )
    print(f"  floor {medians['floor']:.3f} s")
    for label in FORMS:
        t = medians[label]
        print(f"  dpsql, {label:<10} {t:.3f} s  ratio {t / medians['floor']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
