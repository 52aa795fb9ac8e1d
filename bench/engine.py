"""Engine benchmarks (issue: SQL engine): floor ratio on big data, fixed overhead on PUMS.

Run: `python bench/engine.py [--quick]`. Prints ratios measured in one run; never used
as a timed assertion. The big dataset is generated (never committed) under bench/out/.

Floor: the per-person pre-aggregation (DESIGN §5 step 2) followed by the cross-person
aggregation, run alone on DuckDB with the same threads: what any user-level DP answer
must at least compute. dpsql's cache-miss latency adds clamping, L0 bounding, the ledger
charge, noise, the cache write and the outer layer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.engine import Engine  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from sample_data.generate import generate  # noqa: E402

PUBLIC_KEY = ("SELECT region, COUNT(*), SUM(tokens_in) FROM prompts JOIN users USING (user_id) "
              "GROUP BY region")
PUBLIC_FLOOR = (
    "SELECT region, SUM(c), SUM(s), COUNT(*) FROM (SELECT p.user_id, u.region, COUNT(*) AS c, "
    "SUM(p.tokens_in) AS s FROM prompts p JOIN users u ON p.user_id = u.user_id "
    "GROUP BY p.user_id, u.region) GROUP BY region"
)
PRIVATE_KEY = ("SELECT date_trunc('day', ts) AS d, COUNT(*) FROM prompts "
               "GROUP BY date_trunc('day', ts)")
PRIVATE_MONTH = ("SELECT date_trunc('month', ts) AS m, COUNT(*) FROM prompts "
                 "GROUP BY date_trunc('month', ts)")
PRIVATE_FLOOR = (
    "SELECT d, SUM(c), COUNT(*) FROM (SELECT user_id, date_trunc('day', ts) AS d, COUNT(*) AS c "
    "FROM prompts GROUP BY user_id, date_trunc('day', ts)) GROUP BY d"
)
MONTH_FLOOR = PRIVATE_FLOOR.replace("'day'", "'month'")


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def demo_policy(db: Path, ledger: Path, threads: int) -> str:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{ledger}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
    return text.replace("[proxy]", f"[proxy]\nthreads = {threads}", 1)


def floor_ratio(people: int, prompts: int, repeat: int) -> None:
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    db = out / f"usage-{people}-{prompts}.duckdb"
    if not db.exists():
        start = time.perf_counter()
        generate(db, people=people, prompts=prompts, seed=7)
        print(f"generated {db.name} in {time.perf_counter() - start:.1f}s")
    with tempfile.TemporaryDirectory() as tmp:
        policy = parse_policy(demo_policy(db, Path(tmp) / "ledger.sqlite", 2), base_dir=Path(tmp))
        engine = Engine(policy)
        # The floor runs on the engine's own DuckDB instance: same file, same settings.
        def bare(sql: str) -> object:
            return engine.executor.evaluate(sql)

        print(f"\nfloor ratio, {prompts:,} prompts / {people:,} people (median of {repeat})")
        print(f"{'query':<14}{'floor s':>10}{'dpsql miss s':>14}{'ratio':>8}")
        for name, sql, floor in (("public key", PUBLIC_KEY, PUBLIC_FLOOR),
                                 ("private day", PRIVATE_KEY, PRIVATE_FLOOR),
                                 ("private month", PRIVATE_MONTH, MONTH_FLOOR)):
            bare(floor)  # warm the page cache
            t_floor = median_time(lambda f=floor: bare(f), repeat)
            counter = iter(range(10**9))
            t_dp = median_time(
                lambda s=sql, c=counter: engine.run(QueryRequest(s, epsilon=1.0 + next(c) * 1e-6)),
                repeat,
            )
            print(f"{name:<14}{t_floor:>10.3f}{t_dp:>14.3f}{t_dp / t_floor:>8.2f}x")
        engine.close()


def fixed_overhead(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = (ROOT / "sample_data" / "pums" / "policy.toml").read_text()
        text = text.replace('"PUMS_pid.csv"', f'"{ROOT / "sample_data/pums/PUMS_pid.csv"}"')
        text = text.replace('"../../state/pums-ledger.sqlite"', f'"{Path(tmp) / "l.sqlite"}"')
        text = text.replace("epsilon_cap = 10.0", "epsilon_cap = 1000000.0")
        engine = Engine(parse_policy(text, base_dir=Path(tmp)))
        sql = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"
        engine.run(QueryRequest(sql, epsilon=1.0))
        counter = iter(range(10**9))
        miss = median_time(
            lambda: engine.run(QueryRequest(sql, epsilon=1.0 + next(counter) * 1e-6)), repeat)
        hit = median_time(lambda: engine.run(QueryRequest(sql, epsilon=1.0)), repeat)
        fresh = iter(range(10**9))
        new_text = median_time(lambda: engine.run(QueryRequest(
            sql.replace("GROUP BY", f"WHERE age > {next(fresh)} GROUP BY"), epsilon=1.0)), repeat)
        variant = sql + " ORDER BY n DESC LIMIT 1"
        engine.run(QueryRequest(variant, epsilon=1.0))
        reorder = median_time(lambda: engine.run(QueryRequest(variant, epsilon=1.0)), repeat)
        bare = duckdb.connect()
        bare.execute(f"CREATE TABLE p AS SELECT * FROM read_csv_auto('{ROOT}/sample_data/pums/PUMS_pid.csv')")
        raw = median_time(lambda: bare.execute(
            "SELECT sex, COUNT(*), AVG(income) FROM p GROUP BY sex").fetchall(), repeat)
        print(f"\nfixed overhead on PUMS (1,000 rows, median of {repeat}, in-process)")
        print(f"  bare DuckDB query        {raw * 1000:8.2f} ms")
        print(f"  dpsql miss, new ε        {miss * 1000:8.2f} ms   (goal <= 10 ms)")
        print(f"  dpsql miss, new text     {new_text * 1000:8.2f} ms")
        print(f"  dpsql cache hit          {hit * 1000:8.2f} ms   (goal <= 1 ms)")
        print(f"  dpsql re-sorted hit      {reorder * 1000:8.2f} ms")
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1M prompts / 100k people")
    args = parser.parse_args()
    fixed_overhead(repeat=50 if args.quick else 200)
    if args.quick:
        floor_ratio(100_000, 1_000_000, repeat=3)
    else:
        floor_ratio(1_000_000, 10_000_000, repeat=5)


if __name__ == "__main__":
    main()
