"""What the fix of PostgreSQL's string work costs (2026-12-06): a query whose aggregate
arguments do string work, its bounded core rendered as now (row-level SELECTs that work
on strings fenced with OFFSET 0, proxy/engines/postgres_forms.PostgresForms.fence_rows;
a CASE's repeated string-working operand read once, render._cases_read_once) and as
before the fix, run on the same PostgreSQL database through the same executor,
interleaved round by round (medians), beside the engine's per-person floor of the same
grouping. The public-key and private-key queries of bench/engine.py hold no string work:
their SQL is unchanged (printed as such).

    .venv/bin/python -m bench.pg_fence [--rows 1000000] [--rounds 7]

Nothing here gates CI; the numbers go to BENCHMARKS.md's measurement notes.
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

from bench.engine import PRIVATE_FLOOR, PRIVATE_KEY, PUBLIC_FLOOR, PUBLIC_KEY  # noqa: E402
from bench.scale import dataset, policy_text  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.engines import postgres_forms  # noqa: E402
from proxy.engines.render import render  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from sample_data.export import to_postgres  # noqa: E402

STRING_WORK = (
    "SELECT region, SUM(CASE WHEN model LIKE '%ini%' THEN tokens_in ELSE 0 END) AS s, "
    "AVG(CASE WHEN model LIKE '%arg%' THEN tokens_out END) AS a "
    "FROM prompts JOIN users USING (user_id) GROUP BY region"
)


# 25 passes a copy: the clamp's copies pass the 64 allowed, so the CASE reads it once
LONG_PATTERN = (
    "SELECT region, AVG(CASE WHEN model LIKE '%" + "x" * 25 + "%' THEN tokens_out END) AS a "
    "FROM prompts JOIN users USING (user_id) GROUP BY region"
)


class Unfenced(postgres_forms.PostgresForms):
    def fence_rows(self, tree: object) -> None:  # type: ignore[override]
        """The forms as they were before the fix."""


def _before_the_fix(core: str, forms: Unfenced, types: object) -> object:
    """The core rendered as before the fix: no fence, a CASE's repeats written out, and
    no count of the rendered string work (which refuses that form)."""
    from proxy.engines import render as module

    saved = module._cases_read_once, module.check_rendered_rows
    module._cases_read_once = lambda tree, forms: None  # type: ignore[assignment]
    module.check_rendered_rows = lambda tree, engine: None  # type: ignore[assignment]
    try:
        return render(core, forms, types)  # type: ignore[arg-type]
    finally:
        module._cases_read_once, module.check_rendered_rows = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    from tests import postgres_server

    cluster = postgres_server.start(
        durable=False, settings={"shared_buffers": "256MB", "synchronous_commit": "off"}
    )
    try:
        db = dataset(args.rows)
        name = f"fence_{args.rows}"
        con = duckdb.connect(str(db), read_only=True)
        to_postgres(con, cluster.replace_database(name))
        con.close()
        cluster.execute(f"ALTER DATABASE {name} SET work_mem = '256MB'")
        database = f'[database]\nengine = "postgres"\ndsn = "{cluster.grant_reader(name)}"'
        with tempfile.TemporaryDirectory() as tmp:
            text = policy_text(database, Path(tmp) / "ledger.sqlite", 3600.0)
            engine = Engine(parse_policy(text, base_dir=Path(tmp)))
            executor = engine.executor
            types = executor.column_types()
            forms = executor._forms
            bare = Unfenced(forms._schema_of, forms.base_tables, forms.wide_numerics, forms._names)
            print(f"{args.rows:,} rows, {args.rounds} rounds, medians (ms)")
            print("| query | floor | core now | core before the fix | now / before |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for label, sql, floor in (
                ("public key", PUBLIC_KEY, PUBLIC_FLOOR),
                ("private key", PRIVATE_KEY, PRIVATE_FLOOR),
                ("string work in a sum and an average", STRING_WORK, PUBLIC_FLOOR),
                ("a long pattern (its CASE read once)", LONG_PATTERN, PUBLIC_FLOOR),
            ):
                core = engine.prepare(QueryRequest(sql, epsilon=1.0))[1].core_sql
                fenced = render(core, forms, types)
                unfenced = _before_the_fix(core, bare, types)
                if fenced.sql == unfenced.sql:
                    print(f"| {label} | (no string work: the same SQL, not fenced) | | | |")
                    continue
                params = [12345] if fenced.parameters else []
                times: dict[str, list[float]] = {"floor": [], "fenced": [], "unfenced": []}
                runs = {
                    "fenced": lambda f=fenced, p=params: executor._fetch(f.sql, p),
                    "unfenced": lambda u=unfenced, p=params: executor._fetch(u.sql, p),
                }
                if floor is not None:
                    runs["floor"] = lambda f=floor: executor.evaluate(f)
                for fn in runs.values():
                    fn()  # warm
                for i in range(args.rounds):
                    order = list(runs.items())
                    for key, fn in order[i % len(order) :] + order[: i % len(order)]:
                        start = time.perf_counter()
                        fn()
                        times[key].append(time.perf_counter() - start)
                med = {k: 1000 * statistics.median(v) for k, v in times.items() if v}
                print(
                    f"| {label} | {med.get('floor', float('nan')):,.1f} | {med['fenced']:,.1f} | "
                    f"{med['unfenced']:,.1f} | {med['fenced'] / med['unfenced']:.2f}x |"
                )
            engine.close()
        cluster.execute(f"DROP DATABASE {name}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
