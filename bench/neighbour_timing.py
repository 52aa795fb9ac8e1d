"""The residual timing signal (issue #10 §3): how much longer a bounded core runs on D than
on D′ = D minus one person, for every answered shape of the neighbour corpus.

Run: `python -m bench.neighbour_timing` (the demo generator's default size: 5,000 people,
100,000 prompts; about two minutes) or `--quick` (the 300-person fuzz size). For each
corpus entry and each neighbour (the heaviest person by rows, and a person with rows in
every table) the core runs on D and D′ alternately, `--repeats` times each after one
warm-up run of both, and the ratio of the medians is printed, worst first. Only
the bounded core is timed: planning reads no private data and the release step's time
depends on the released table, whose size is public.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.errors import DPSQLError  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from proxy.rewrite.l0 import takes_seed  # noqa: E402
from sample_data.generate import generate  # noqa: E402
from tests.reliability import neighbour_corpus as corpus  # noqa: E402
from tests.reliability.conftest import fz_demo_policy  # noqa: E402
from tests.reliability.neighbours import (  # noqa: E402
    DEFAULT_SEED,
    NeighbourPair,
    Removal,
    build_neighbours,
)


@dataclass(frozen=True)
class Timing:
    entry: str
    removal: str
    d_ms: float
    d_prime_ms: float

    @property
    def ratio(self) -> float:
        return self.d_ms / max(self.d_prime_ms, 1e-3)


def _time(pair: NeighbourPair, sql: str, repeats: int) -> tuple[float, float] | None:
    try:
        _, plan = pair.d.prepare(QueryRequest(sql, epsilon=1.0))
    except DPSQLError:
        return None
    params = [DEFAULT_SEED] if takes_seed(plan.core_sql) else []
    runs: tuple[list[float], list[float]] = ([], [])
    for i in range(repeats + 1):
        for side, engine in enumerate(pair.engines):
            start = time.perf_counter()
            engine.executor.run(plan.core_sql, params)
            if i:  # the first round warms both sides
                runs[side].append((time.perf_counter() - start) * 1000)
    return statistics.median(runs[0]), statistics.median(runs[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 people instead of 5,000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    people, prompts = (300, 6000) if args.quick else (5000, 100_000)
    started = time.perf_counter()
    timings: list[Timing] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = generate(folder / "usage.duckdb", people=people, prompts=prompts, seed=7)
        policy = fz_demo_policy(folder, db)
        for removal in (Removal.HEAVIEST, Removal.EVERYWHERE):
            neighbours = build_neighbours(policy, folder / str(removal), removal, timeout_s=60)
            with NeighbourPair(neighbours) as pair:
                facts = corpus.demo_facts(pair.exact_rows, neighbours.person)
                for entry in corpus.DEMO:
                    found = _time(pair, entry.render(facts), args.repeats)
                    if found is not None:
                        timings.append(Timing(entry.name, str(removal), *found))
    timings.sort(key=lambda t: t.ratio, reverse=True)
    print(f"{len(timings)} answered cases, {people:,} people, median of {args.repeats} runs")
    print("| shape | neighbour | core on D, ms | core on D′, ms | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for t in timings[: args.top]:
        print(f"| {t.entry} | {t.removal} | {t.d_ms:.1f} | {t.d_prime_ms:.1f} | {t.ratio:.2f} |")
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
