"""The window forms of the L0 cut on PostgreSQL or Spark, interleaved (proxy/engines/
render.py, CutForm): the private-key query's cache-miss latency with each, against the
per-person floor, in one run on one engine, medians of `--repeat` rounds.

Run: `python -m bench.pg_cut [--engine postgres|spark] [--rows 1000000] [--repeat 7]
[--query day|month] [--record]`. Same data, cluster settings and queries as
bench/scale.py (Spark: local[2] over the Parquet copy). Each round times the floor, then
every form the engine can run in an order that alternates from round to round, so that
drift on a shared machine hits them alike; the load average is read at the start and the
end. `--record` writes the run into the ``issue16_cut`` entry of bench/results.json
(BENCHMARKS.md renders it). Never a timed assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine import MONTH_FLOOR, PRIVATE_FLOOR, PRIVATE_KEY, PRIVATE_MONTH  # noqa: E402
from bench.scale import OUT, dataset, policy_text  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.engines.render import CutForm  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from sample_data.export import to_parquet, to_postgres  # noqa: E402

QUERIES = {"day": (PRIVATE_KEY, PRIVATE_FLOOR), "month": (PRIVATE_MONTH, MONTH_FLOOR)}


@dataclass(frozen=True)
class Variant:
    label: str
    cut: CutForm
    by_person: bool = True  # Spark: the REPARTITION hint (SparkForms.rows_by_person)


# Spark refuses a frame on ROW_NUMBER, which the ROW_NUMBER and GROUPED forms write;
# its first variant is the form shipped before issue 16's work (no REPARTITION).
FORMS = {
    "postgres": tuple(Variant(c.value, c) for c in CutForm),
    "spark": (
        Variant("range_count without repartition", CutForm.RANGE_COUNT, by_person=False),
        Variant(CutForm.RANGE_COUNT.value, CutForm.RANGE_COUNT),
        Variant(CutForm.NUMBERED.value, CutForm.NUMBERED),
    ),
}
RESULTS = ROOT / "bench" / "results.json"


def _rounds(engine: Engine, forms: tuple[Variant, ...], query: str, repeat: int) -> dict[str, Any]:
    sql, floor_sql = QUERIES[query]
    executor = engine.executor
    times: dict[str, list[float]] = {"floor": [], **{c.label: [] for c in forms}}
    counter = iter(range(10**9))

    def miss(variant: Variant) -> float:
        # (the bench's own switch: dpsql itself has one form per engine)
        executor._forms.cut = variant.cut  # type: ignore[attr-defined]
        executor._forms.by_person = variant.by_person  # type: ignore[attr-defined]
        executor._render.cache_clear()  # type: ignore[attr-defined]
        start = time.perf_counter()
        engine.run(QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-6))
        return time.perf_counter() - start

    executor.evaluate(floor_sql)  # warm the pages
    for c in forms:
        miss(c)  # warm (and the first run's row-cap histograms)
    for i in range(repeat):
        start = time.perf_counter()
        executor.evaluate(floor_sql)
        times["floor"].append(time.perf_counter() - start)
        for c in list(forms)[:: 1 if i % 2 == 0 else -1]:
            times[c.label].append(miss(c))
    return {k: statistics.median(v) for k, v in times.items()}


def _database(kind: str, rows: int, cluster: Any) -> str:
    db = dataset(rows)
    if kind == "postgres":
        name = f"cut_{rows}"
        con = duckdb.connect(str(db), read_only=True)
        to_postgres(con, cluster.replace_database(name))
        con.close()
        cluster.execute(f"ALTER DATABASE {name} SET work_mem = '256MB'")
        return f'[database]\nengine = "postgres"\ndsn = "{cluster.grant_reader(name)}"'
    folder = OUT / f"scale-{rows}-parquet"
    if not folder.exists():
        con = duckdb.connect(str(db), read_only=True)
        to_parquet(con, folder)
        con.close()
    return f'[database]\nengine = "spark"\nmaster = "local[2]"\nparquet = "{folder}"'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=sorted(FORMS), default="postgres")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--query", choices=sorted(QUERIES), default="day")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args(argv)
    cluster = None
    if args.engine == "postgres":
        from tests import postgres_server

        cluster = postgres_server.start(
            durable=False, settings={"shared_buffers": "256MB", "synchronous_commit": "off"}
        )
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    try:
        database = _database(args.engine, args.rows, cluster)
        with tempfile.TemporaryDirectory() as tmp:
            text = policy_text(database, Path(tmp) / "ledger.sqlite", 3600.0)
            engine = Engine(parse_policy(text, base_dir=Path(tmp)))
            try:
                medians = _rounds(engine, FORMS[args.engine], args.query, args.repeat)
            finally:
                engine.close()
    finally:
        if cluster is not None:
            cluster.stop()
    load_end = os.getloadavg()
    floor = medians["floor"]
    shipped = (
        "GROUPED" if args.engine == "postgres" else "NUMBERED"
    )  # postgres_forms.py / spark_forms.py
    print(
        f"{args.engine}, {args.rows:,} rows, private {args.query} key, medians of "
        f"{args.repeat} (load {load_start[0]:.1f} -> {load_end[0]:.1f}):"
    )
    print(f"  floor {floor:.3f} s")
    for c in FORMS[args.engine]:
        t = medians[c.label]
        mark = "  (shipped)" if c.label == shipped.lower() else ""
        print(f"  dpsql with {c.label:<12} {t:.3f} s  ratio {t / floor:.2f}x{mark}")
    if args.record:
        _record(args, medians, shipped, started, load_start, load_end)
    return 0


def _record(
    args: argparse.Namespace,
    medians: dict[str, float],
    shipped: str,
    started: str,
    load_start: tuple[float, float, float],
    load_end: tuple[float, float, float],
) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs = results.setdefault("issue16_cut", {})
    runs[f"{args.engine} {args.query} {args.rows}"] = {
        "engine": args.engine,
        "query": args.query,
        "rows": args.rows,
        "repeat": args.repeat,
        "seconds": medians,
        "shipped": shipped.lower(),
        "commit": commit,
        "started": started,
        "load_at_start": [round(x, 2) for x in load_start],
        "load_at_end": [round(x, 2) for x in load_end],
    }
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"recorded in {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
