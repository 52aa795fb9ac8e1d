"""Hash flooding, measured: one planted person whose values collide in DuckDB's own hash,
and the bounded core's time on D against D′ = D minus that person.

Run: `python -m bench.hash_flooding` (demo data of 2,000 people and 100,000 prompts, one
more person with 32,768 prompts whose `prompt_id`s and `model` texts are built to collide:
tests/hash_collisions.py; about two minutes) or `--quick` (8,192). For each query the core
dpsql runs (its groupings keyed, proxy/rewrite/keyed_groups.py) and the same core with
the keys taken out (`keyed_groups.plain`, what ran before) run on D and D′ alternately,
`--repeats` times after a warm-up, and the medians are printed side by side: the plain
core's D/D′ ratio is the signal the keys remove. A plain core past `--limit` seconds is
stopped and shown as a timeout. (Joins are not timed here: at this size DuckDB builds a
join's table on the 4-row public table whatever the filter; RELIABILITY.md §7 has the
probe's measurement on 1M prompts.)

`--engine postgres` loads D and D′ into a throwaway PostgreSQL server
(tests/postgres_server.py) and times what the PostgreSQL executor sends: the keyed core
rendered for PostgreSQL, against the plain core rendered as before this round (the L0
hash ``hash_record_extended``, which folds a BIGINT to 32 bits). The planted
``prompt_id``s are then BIGINTs that PostgreSQL's fold maps to one value (2^32 of them
share each hash); the planted texts are DuckDB's collisions, harmless there. One more
query lists 1,000 more such BIGINTs in an IN list (PostgreSQL looks a long list up in a
hash table of its own; PostgresForms.in_lists keys it).

`--engine spark` writes D and D′ as Parquet (sample_data/export.py) and reads each with
its own dpsql Spark executor (`local[2]`); the keyed core and the plain core (no keyed
columns: the grouping is by the values alone) are both rendered with Spark's forms.
Spark's hash aggregation looks a grouping key up by its UnsafeRow's Murmur3 hash, so
the planted ``prompt_id``s are built to give the rows (person, ``prompt_id``) one and
the same hash (:func:`tests.hash_collisions.spark_colliding_integers`), and the planted
person is :func:`~tests.hash_collisions.spark_aligned_user`, whose id leaves that hash's
state as it found it, so that the rows (``prompt_id``) collide as well; their low 17
bits are one value, so that the first-level "fast" map of Spark's generated code takes
two of them and hands the rest to the flooded one. The planted texts are DuckDB's
collisions again. (32,768 values with `--limit 60`: about six minutes on two cores.)
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import sqlglot  # noqa: E402

from proxy.errors import DPSQLError  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from proxy.rewrite import keyed_groups  # noqa: E402
from proxy.rewrite.l0 import takes_seed  # noqa: E402
from sample_data.generate import generate  # noqa: E402
from tests.hash_collisions import (  # noqa: E402
    colliding_integers,
    colliding_texts,
    pg_folded_integers,
    spark_aligned_user,
    spark_colliding_integers,
)
from tests.reliability.conftest import fz_demo_policy  # noqa: E402
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours  # noqa: E402

if TYPE_CHECKING:
    from proxy.policy import Policy

PLANTED = 99_999_999  # the planted person's id (on Spark: spark_aligned_user())
QUERIES = (
    "SELECT COUNT(DISTINCT prompt_id) FROM prompts",
    "SELECT COUNT(*) FROM prompts GROUP BY prompt_id",
    "SELECT model, COUNT(*) FROM prompts GROUP BY model",
    "SELECT COUNT(DISTINCT model) FROM prompts",
    "SELECT AVG(n) FROM (SELECT user_id, COUNT(DISTINCT prompt_id) AS n FROM prompts "
    "GROUP BY user_id) t",
    "SELECT AVG(n) FROM (SELECT user_id, COUNT(DISTINCT model) AS n FROM prompts "
    "GROUP BY user_id) t",
    "SELECT model, MEDIAN(tokens_in) FROM prompts GROUP BY model",
    "SELECT MEDIAN(tokens_in) FROM prompts GROUP BY prompt_id",
)


# Constants of the IN-list query on PostgreSQL: BIGINTs that fold as the planted ones do
# (PostgreSQL hashes a list of 9 or more constants; 1,000 fit the 20,000-character limit).
LISTED = 1000


def _queries(engine: str, n: int) -> tuple[str, ...]:
    if engine != "postgres":
        return QUERIES
    listed = ", ".join(str(v) for v in pg_folded_integers(n + LISTED)[n:])
    return (*QUERIES, f"SELECT COUNT(*) FROM prompts WHERE prompt_id IN ({listed})")


def _person(engine: str) -> int:
    return spark_aligned_user() if engine == "spark" else PLANTED


def _plant(db: Path, n: int, engine: str) -> None:
    if engine == "postgres":
        ids = pg_folded_integers(n)
    elif engine == "spark":
        ids = spark_colliding_integers(n)
    else:
        ids = colliding_integers(n)
    texts = colliding_texts(n)
    person = _person(engine)
    con = duckdb.connect(str(db))
    try:
        con.execute(
            f"INSERT INTO users SELECT {person}, region, plan, age, signup_month "
            "FROM users LIMIT 1"
        )
        con.execute(
            f"INSERT INTO prompts SELECT unnest($1), {person}, TIMESTAMP '2024-06-01', "
            "unnest($2), 100, 100, 100, false",
            [ids, texts],
        )

        con.execute("CHECKPOINT")
    finally:
        con.close()


def _runner(engine: Any, plain: bool, limit: float) -> Any:
    """How one side runs a DuckDB-dialect core: DuckDB's or Spark's executor itself (on
    Spark the plain core is rendered with the same forms: it has no keyed columns), or on
    PostgreSQL the text its executor sends (``plain``: rendered with the forms before
    this round), run with the time limit."""
    if engine.executor.dialect == "duckdb":
        return engine.executor.run
    if engine.executor.dialect == "spark":
        spark = engine.executor

        def run_spark(core: str, params: list[int]) -> None:
            # A plain core reads its seed as a ``?``, and the forms copy it wherever they
            # read it more than once (a text's secret prefix): each copy is a parameter.
            count = spark._render(core).parameters
            spark.run(core, params[:1] * count)

        return run_spark
    import psycopg

    from proxy.engines.render import render

    executor = engine.executor
    forms = _before_forms()(base_tables=executor._forms.base_tables) if plain else executor._forms

    rendered_once: dict[str, Any] = {}

    def run(core: str, params: list[int]) -> None:
        # rendered once, outside the timing, as the executor caches it (a 1,000-constant
        # IN list takes sqlglot about 0.15 s to render keyed)
        if core not in rendered_once:
            rendered_once[core] = render(core, forms, executor.column_types())
        rendered = rendered_once[core]
        text = rendered.sql
        if rendered.own_seed and not params:
            params = [12345]  # a seed of its own (a long IN list), as the executor binds
        with psycopg.connect(executor._dsn, cursor_factory=psycopg.RawCursor) as conn:
            conn.execute(f"SET statement_timeout = {int(limit * 1000)}")
            try:
                conn.execute(text, params).fetchall()
            except psycopg.errors.QueryCanceled:
                raise DPSQLError("timeout", "past the limit", "") from None

    return run


@functools.cache
def _before_forms() -> type:
    from sqlglot import exp

    from proxy.engines.postgres_forms import PostgresForms

    class Before(PostgresForms):
        """PostgreSQL's forms before this round: the record hash of the L0 cut."""

        def keyed_hash(self, values: list[exp.Expr], kinds: Any, seed: exp.Expr) -> exp.Expr:
            row = exp.Anonymous(this="ROW", expressions=values)
            return exp.Anonymous(this="hash_record_extended", expressions=[row, seed])

        def in_lists(self, tree: exp.Expr, typer: Any) -> None:
            """IN lists as they were: PostgreSQL's own unkeyed hash of the constants."""

    return Before


def _time(pair: NeighbourPair, sql: str, repeats: int, limit: float) -> list[float | None]:
    """Medians in seconds: keyed core on D, on D′, plain core on D, on D′ (None: timeout)."""
    _, plan = pair.d.prepare(QueryRequest(sql, epsilon=1.0))
    keyed = plan.core_sql
    plain = keyed_groups.plain(sqlglot.parse_one(keyed, read="duckdb")).sql("duckdb")
    out: list[float | None] = []
    for is_plain, core in ((False, keyed), (True, plain)):
        params = [12345] if takes_seed(core) else []
        runners = [_runner(engine, is_plain, limit) for engine in pair.engines]
        runs: tuple[list[float], list[float]] = ([], [])
        stopped = [False, False]
        for i in range(repeats + 1):
            for side, run in enumerate(runners):
                if stopped[side]:
                    continue
                start = time.perf_counter()
                try:
                    run(core, params)
                except DPSQLError as error:
                    if error.code != "timeout":
                        raise
                    stopped[side] = True
                    continue
                if i:
                    runs[side].append(time.perf_counter() - start)
        out += [None if stopped[s] else statistics.median(runs[s]) for s in (0, 1)]
    return out


def _moved(policy: Policy, settings: Any, limit: float) -> Policy:
    import dataclasses

    proxy = dataclasses.replace(policy.proxy, query_timeout_s=limit)
    return dataclasses.replace(
        policy, database=settings, duckdb_path=None, csv_tables=(), csv_types=(), proxy=proxy
    )


@contextmanager
def _on_engine(neighbours: Any, engine: str, limit: float, folder: Path) -> Iterator[Any]:
    """``neighbours`` as they are (DuckDB), or with D and D′ loaded into a throwaway
    PostgreSQL server and read through dpsql's PostgreSQL executor, or written as
    Parquet under ``folder`` and read through dpsql's Spark executor."""
    if engine == "duckdb":
        yield neighbours
        return
    import dataclasses

    from proxy.policy import DatabaseSettings, EngineKind
    from sample_data.export import source, to_parquet, to_postgres

    if engine == "spark":
        moved: list[Policy] = []
        for label, policy in (("d", neighbours.d), ("dp", neighbours.d_prime)):
            with source(policy) as con:
                to_parquet(con, folder / f"parquet-{label}")
            settings = DatabaseSettings(
                engine=EngineKind.SPARK, master="local[2]", parquet=folder / f"parquet-{label}"
            )
            moved.append(_moved(policy, settings, limit))
        yield dataclasses.replace(neighbours, d=moved[0], d_prime=moved[1])
        return
    from tests.postgres_server import start

    server = start()
    try:
        on_pg: list[Policy] = []
        for label, policy in (("d", neighbours.d), ("dp", neighbours.d_prime)):
            name = f"flood_{label}"
            with source(policy) as con:
                to_postgres(con, server.replace_database(name))
            settings = DatabaseSettings(engine=EngineKind.POSTGRES, dsn=server.grant_reader(name))
            on_pg.append(_moved(policy, settings, limit))
        yield dataclasses.replace(neighbours, d=on_pg[0], d_prime=on_pg[1])
    finally:
        server.stop()


def _cell(seconds: float | None, limit: float) -> str:
    return f"> {limit:.0f} (timeout)" if seconds is None else f"{seconds:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8,192 planted values")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=float, default=10.0, help="seconds per core run")
    parser.add_argument("--only", help="only the queries containing this text")
    parser.add_argument("--engine", choices=("duckdb", "postgres", "spark"), default="duckdb")
    args = parser.parse_args()
    n = 8192 if args.quick else 32768
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = generate(folder / "usage.duckdb", people=2000, prompts=100_000, seed=7)
        _plant(db, n, args.engine)
        policy = fz_demo_policy(folder, db)
        neighbours = build_neighbours(
            policy, folder / "nb", Removal.CHOSEN, person=_person(args.engine), timeout_s=args.limit
        )
        rows = []
        with _on_engine(neighbours, args.engine, args.limit, folder) as moved, NeighbourPair(moved) as pair:
            for sql in _queries(args.engine, n):
                if args.only and args.only not in sql:
                    continue
                rows.append((sql, _time(pair, sql, args.repeats, args.limit)))
    print(f"{args.engine}: {n:,} planted values, median of {args.repeats} runs, seconds")
    print("| query | keyed: D | keyed: D′ | plain: D | plain: D′ |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for sql, (kd, kp, pd, pp) in rows:
        cells = " | ".join(_cell(v, args.limit) for v in (kd, kp, pd, pp))
        shown = sql if len(sql) < 200 else sql[:60] + f" ... ({LISTED:,} constants))"
        print(f"| `{shown}` | {cells} |")
    print(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
