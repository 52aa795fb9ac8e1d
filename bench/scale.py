"""Scale benchmark (issue #16): dpsql's cache-miss latency against each engine's own
per-person floor, at growing row counts, on DuckDB, PostgreSQL and Spark local[2].

Run: `python -m bench.scale [--rows 1000000,10000000] [--engines duckdb,postgres,spark]
[--repeat 3] [--min-seconds 5]`. Data comes from the project's generator (sample_data/generate.py, one
person per 20 prompts as in the demo) and is copied to each engine (sample_data/
export.py); PostgreSQL is a private cluster (tests/postgres_server.py) with
work_mem = 256MB; Spark's JVM gets the heap dpsql gives the JVM it starts
(proxy/engines/spark.py, driver_memory: a quarter of the machine, 1-8 GiB). The floor is bench/engine.py's: the per-person pre-aggregation and the
cross-person aggregation, run alone on the same engine through the same executor;
dpsql's miss adds clamping, L0 bounding, the ledger charge, noise, the cache write and
the outer layer. Prints one table per engine and writes bench/out/scale.json and
bench/figures/engines_scale.png (the cost curve; bench/figures/scale.png is
bench/run.py's DuckDB-only curve). Never a timed assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine import PRIVATE_FLOOR, PRIVATE_KEY, PUBLIC_FLOOR, PUBLIC_KEY  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from sample_data.export import to_parquet, to_postgres  # noqa: E402
from sample_data.generate import generate  # noqa: E402

QUERIES = (("public key", PUBLIC_KEY, PUBLIC_FLOOR), ("private key", PRIVATE_KEY, PRIVATE_FLOOR))
OUT = ROOT / "bench" / "out"
MAX_PAIRS = 51


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def policy_text(database: str, ledger: Path, timeout_s: float) -> str:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = text.replace('duckdb = "usage.duckdb"', database.split("\n", 1)[1])
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{ledger}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
    return text.replace("[proxy]", f"[proxy]\nthreads = 2\nquery_timeout_s = {timeout_s}", 1)


def dataset(rows: int) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    db = OUT / f"scale-{rows}.duckdb"
    if not db.exists():
        start = time.perf_counter()
        generate(db, people=max(rows // 20, 100), prompts=rows, seed=7)
        print(f"generated {rows:,} prompts in {time.perf_counter() - start:.1f} s", flush=True)
    return db


def measure(database: str, repeat: int, min_seconds: float = 0.0) -> list[dict[str, Any]]:
    """Floor and miss of each query, interleaved: at least ``repeat`` pairs, and more (up
    to ``MAX_PAIRS``) until the pairs have taken ``min_seconds``, so that a query of tens
    of milliseconds gets enough rounds for a stable median (at 1M on DuckDB five pairs
    moved the ratios by 0.15-0.2 between runs)."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        text = policy_text(database, Path(tmp) / "ledger.sqlite", 3600.0)
        engine = Engine(parse_policy(text, base_dir=Path(tmp)))
        try:
            for name, sql, floor in QUERIES:
                engine.executor.evaluate(floor)  # warm caches (pages, Spark's plans)
                counter = iter(range(10**9))
                engine.run(QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-6))
                # interleaved, floor and miss alternating which goes first, so that
                # drift on a shared machine hits both alike
                floors: list[float] = []
                misses: list[float] = []
                began = time.perf_counter()
                i = 0
                while i < repeat or (time.perf_counter() - began < min_seconds and i < MAX_PAIRS):
                    pair = [
                        (floors, lambda f=floor: engine.executor.evaluate(f)),
                        (
                            misses,
                            lambda s=sql, c=counter: engine.run(
                                QueryRequest(s, epsilon=1.0 + next(c) * 1e-6)
                            ),
                        ),
                    ]
                    for times, fn in pair[:: 1 if i % 2 == 0 else -1]:
                        times.append(median_time(fn, 1))
                    i += 1
                out.append(
                    {
                        "query": name,
                        "pairs": i,
                        "floor_s": statistics.median(floors),
                        "dpsql_s": statistics.median(misses),
                        "load": list(os.getloadavg()),
                    }
                )
        finally:
            engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000")
    parser.add_argument("--engines", default="duckdb,postgres,spark")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=5.0,
        help="keep pairing floor and miss until they took this long (at most 51 pairs)",
    )
    args = parser.parse_args(argv)
    sizes = [int(r) for r in args.rows.split(",")]
    engines = args.engines.split(",")
    results: list[dict[str, Any]] = []
    cluster = None
    if "postgres" in engines:
        from tests import postgres_server

        # fsync off as in the tests (timing the engine, not the disk); room for 10M rows
        cluster = postgres_server.start(
            durable=False,
            settings={"shared_buffers": "256MB", "synchronous_commit": "off"},
        )
    try:
        for rows in sizes:
            db = dataset(rows)
            for kind in engines:
                if kind == "duckdb":
                    database = f'[database]\nduckdb = "{db}"'
                elif kind == "postgres":
                    assert cluster is not None
                    name = f"scale_{rows}"
                    start = time.perf_counter()
                    con = duckdb.connect(str(db), read_only=True)
                    to_postgres(con, cluster.replace_database(name))
                    con.close()
                    cluster.execute(f"ALTER DATABASE {name} SET work_mem = '256MB'")
                    print(f"loaded PostgreSQL in {time.perf_counter() - start:.1f} s", flush=True)
                    database = (
                        f'[database]\nengine = "postgres"\ndsn = "{cluster.grant_reader(name)}"'
                    )
                else:
                    folder = OUT / f"scale-{rows}-parquet"
                    if not folder.exists():
                        con = duckdb.connect(str(db), read_only=True)
                        to_parquet(con, folder)
                        con.close()
                    database = (
                        f'[database]\nengine = "spark"\nmaster = "local[2]"\nparquet = "{folder}"'
                    )
                print(f"measuring {kind} at {rows:,} rows ...", flush=True)
                for row in measure(database, args.repeat, args.min_seconds):
                    results.append({"engine": kind, "rows": rows, **row})
                if kind == "postgres" and cluster is not None:
                    cluster.execute(f"DROP DATABASE scale_{rows}")
            report(results)
    finally:
        if cluster is not None:
            cluster.stop()
    (OUT / "scale.json").write_text(json.dumps(results, indent=2))
    plot(results)
    return 0


def report(results: list[dict[str, Any]]) -> None:
    print(
        f"\n{'engine':<10}{'rows':>13}  {'query':<13}{'floor s':>9}{'dpsql s':>9}{'ratio':>8}"
        f"{'pairs':>7}"
    )
    for r in results:
        print(
            f"{r['engine']:<10}{r['rows']:>13,}  {r['query']:<13}{r['floor_s']:>9.3f}"
            f"{r['dpsql_s']:>9.3f}{r['dpsql_s'] / r['floor_s']:>7.2f}x{r.get('pairs', ''):>7}"
        )


def plot(results: list[dict[str, Any]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (the bench extra): no figure")
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (query, _, _) in zip(axes, QUERIES, strict=True):
        for engine in dict.fromkeys(r["engine"] for r in results):
            rows = [r for r in results if r["engine"] == engine and r["query"] == query]
            xs = [r["rows"] for r in rows]
            (line,) = ax.plot(xs, [r["dpsql_s"] for r in rows], marker="o", label=f"{engine} dpsql")
            ax.plot(
                xs,
                [r["floor_s"] for r in rows],
                linestyle="--",
                color=line.get_color(),
                label=f"{engine} floor",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows (prompts)")
        ax.set_title(query)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds (median)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    target = ROOT / "bench" / "figures" / "engines_scale.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=120)
    print(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
