"""The two window forms of the L0 cut on PostgreSQL, interleaved (proxy/engines/render.py,
CutForm): the private-key query's cache-miss latency with each, against the per-person
floor, in one run on one cluster, medians of `--repeat` rounds.

Run: `python -m bench.pg_cut [--rows 1000000] [--repeat 7]`. Same data, cluster settings
and queries as bench/scale.py. Each round times the floor, then both forms in an order
that alternates from round to round, so that drift on a shared machine hits both alike.
Never a timed assertion.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine import PRIVATE_FLOOR, PRIVATE_KEY  # noqa: E402
from bench.scale import dataset, policy_text  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.engines.postgres import PostgresExecutor  # noqa: E402
from proxy.engines.render import CutForm  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from sample_data.export import to_postgres  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    from tests import postgres_server

    cluster = postgres_server.start(
        durable=False, settings={"shared_buffers": "256MB", "synchronous_commit": "off"}
    )
    try:
        db = dataset(args.rows)
        name = f"cut_{args.rows}"
        con = duckdb.connect(str(db), read_only=True)
        to_postgres(con, cluster.replace_database(name))
        con.close()
        cluster.execute(f"ALTER DATABASE {name} SET work_mem = '256MB'")
        database = f'[database]\nengine = "postgres"\ndsn = "{cluster.grant_reader(name)}"'
        with tempfile.TemporaryDirectory() as tmp:
            text = policy_text(database, Path(tmp) / "ledger.sqlite", 3600.0)
            engine = Engine(parse_policy(text, base_dir=Path(tmp)))
            executor = engine.executor
            assert isinstance(executor, PostgresExecutor)
            times: dict[str, list[float]] = {"floor": [], **{c.value: [] for c in CutForm}}
            counter = iter(range(10**9))

            def miss(cut: CutForm) -> float:
                # (the bench's own switch: dpsql itself has one form per engine)
                executor._forms.cut = cut  # type: ignore[attr-defined]
                executor._render.cache_clear()
                start = time.perf_counter()
                engine.run(QueryRequest(PRIVATE_KEY, epsilon=1.0 + next(counter) * 1e-6))
                return time.perf_counter() - start

            executor.evaluate(PRIVATE_FLOOR)  # warm the pages
            for c in CutForm:
                miss(c)  # warm (and the first run's row-cap histograms)
            for i in range(args.repeat):
                start = time.perf_counter()
                executor.evaluate(PRIVATE_FLOOR)
                times["floor"].append(time.perf_counter() - start)
                for c in list(CutForm)[:: 1 if i % 2 == 0 else -1]:
                    times[c.value].append(miss(c))
            engine.close()
        floor = statistics.median(times["floor"])
        print(f"PostgreSQL, {args.rows:,} rows, private daily key, medians of {args.repeat}:")
        print(f"  floor {floor:.3f} s")
        for c in CutForm:
            t = statistics.median(times[c.value])
            print(f"  dpsql with {c.value:<12} {t:.3f} s  ratio {t / floor:.2f}x")
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
