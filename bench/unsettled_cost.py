"""What saying what the noise could change costs (proxy/unsettled.py, 2026-12-06): a
cache miss of a query whose outer layer chooses rows by noisy values (HAVING, ORDER BY …
LIMIT) or shows a comparison, against the same query without that clause, interleaved
round by round (medians; each miss a new release, ε moved by 1e-6), on the demo data
(5,000 people, 100,000 prompts; 4 regions) and on 1M prompts by day (bench/scale.py's
data; about 570 days). Also the time of the simulation alone (``unsettled``) per miss.

    .venv/bin/python -m bench.unsettled_cost [--rounds 15] [--rows 1000000]

Nothing here gates CI; the numbers go to BENCHMARKS.md's measurement notes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale import dataset, policy_text  # noqa: E402
from proxy import engine as engine_module  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from sample_data.generate import generate  # noqa: E402

REGIONS = "SELECT region, COUNT(*) AS n FROM prompts JOIN users USING (user_id) GROUP BY region"
DAYS = "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n FROM prompts GROUP BY 1"
CASES = (
    ("demo", "HAVING", REGIONS, REGIONS + " HAVING COUNT(*) > 19000"),
    ("demo", "ORDER BY … LIMIT 2", REGIONS, REGIONS + " ORDER BY n DESC LIMIT 2"),
    (
        "demo",
        "a comparison",
        REGIONS,
        REGIONS.replace("COUNT(*) AS n", "COUNT(*) AS n, COUNT(*) > 19000 AS big"),
    ),
    ("scale", "HAVING", DAYS, DAYS + " HAVING COUNT(*) > 1700"),
    ("scale", "ORDER BY … LIMIT 10", DAYS, DAYS + " ORDER BY n DESC LIMIT 10"),
)


def _timed_unsettled(spent: list[float]) -> None:
    original = engine_module.unsettled

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    engine_module.unsettled = timed  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    spent: list[float] = []
    _timed_unsettled(spent)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        demo_db = generate(root / "usage.duckdb", people=5000, prompts=100_000, seed=7)
        engines = {
            "demo": Engine(
                parse_policy(
                    policy_text(f'[database]\nduckdb = "{demo_db}"', root / "l1.sqlite", 60.0),
                    base_dir=root,
                )
            ),
            "scale": Engine(
                parse_policy(
                    policy_text(
                        f'[database]\nduckdb = "{dataset(args.rows)}"', root / "l2.sqlite", 600.0
                    ),
                    base_dir=root,
                )
            ),
        }
        step = iter(range(1, 10**9))
        print(f"{'data':<7}{'clause':<22}{'without ms':>11}{'with ms':>9}{'ratio':>7}"
              f"{'simulation ms':>15}")
        try:
            for data, clause, plain, chosen in CASES:
                engine = engines[data]

                def miss(sql: str, e: Engine = engine) -> Callable[[], object]:
                    return lambda: e.run(QueryRequest(sql, epsilon=1.0 + next(step) * 1e-6))

                miss(plain)()
                miss(chosen)()  # warm: the histogram, the outer layer's check
                without: list[float] = []
                with_: list[float] = []
                simulated: list[float] = []
                for i in range(args.rounds):
                    pair = [(without, miss(plain)), (with_, miss(chosen))]
                    for times, fn in pair[:: 1 if i % 2 == 0 else -1]:
                        spent.clear()
                        start = time.perf_counter()
                        fn()
                        times.append(time.perf_counter() - start)
                        if times is with_:
                            simulated.append(sum(spent))
                a, b = statistics.median(without), statistics.median(with_)
                print(
                    f"{data:<7}{clause:<22}{a * 1e3:>11.2f}{b * 1e3:>9.2f}{b / a:>6.2f}x"
                    f"{statistics.median(simulated) * 1e3:>15.2f}",
                    flush=True,
                )
        finally:
            for e in engines.values():
                e.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
