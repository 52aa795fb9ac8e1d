"""Accuracy at ε = 1 (issue #12, "Benchmarks and figures"): realistic questions on the
demo data and on PUMS, answered many times, against the exact answers of plain DuckDB.

    .venv/bin/python -m bench.accuracy [--quick] [--runs R] [--only NAME ...] [--json FILE]
    .venv/bin/python -m bench.run --only accuracy      # the same, into BENCHMARKS.md

Data: the demo generator at its default size (5,000 people, 100,000 prompts, seed 7) in a
temporary folder, and PUMS (``sample_data/pums``, 1,000 people, one row each).

Per question and configuration, over R repetitions (each a fresh, charged release: ε
moves by a relative 1e-9 per repetition, so no repetition is a cache hit):

* **relative error**: per cell (released group), |released − exact| / |exact|, its
  median over the repetitions; the question's figure is the median over cells, and the
  worst cell's median is shown beside it. Cells whose exact value is 0 have no relative
  error; groups partition selection did not release count as not released, not as error.
* **bias**: the same for the *bounded* value — the noise-free core (``plan.core_sql`` on
  the engine's executor) put through the analyst's select list — against the exact one:
  what per-person bounding alone changed.
* **coverage**: the share of cells with an interval whose 95% interval contains the
  bounded value. Intervals describe the noise only, so they are checked against the
  bounded value, not the exact one. When the core samples groups per person (the L0
  step, under a secret per-query seed), the bounded value depends on that seed: the
  benchmark records the seed each release drew (it wraps ``secret_seed`` in
  ``proxy.engine``, which changes nothing else) and runs the core again with it.
* **warned**: the share of answers with at least one warning; **off cells warned**: of
  the cells more than 10% off their exact value, the share whose answer carries a
  warning that applies to the cell (one that names the cell's column, or one about the
  whole answer such as the clipping estimate or an empty release).

Configurations: ``fixed`` — the demo policy with the fixed row caps it had before issue
#12 (prompts 10, tickets 3, as in ``tests/policies.py: fixed_caps``); ``auto`` — today's
demo policy (``max_rows_per_group = "auto"``: each query's cap chosen from a DP
histogram of rows per person, released once per table); ``pums`` — the PUMS policy (one row per person, nothing to choose); and
SmartNoise SQL 1.0.10 on PUMS where it answers the same question (its own venv,
``bench/peers/smartnoise.py``; per-statistic ε chosen so its odometer charges ε = 1).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import proxy.engine as engine_module  # noqa: E402
from accounting.mechanisms import secret_seed  # noqa: E402
from bench import workloads  # noqa: E402
from bench.accuracy_questions import QUESTIONS, Data, Question  # noqa: E402
from bench.accuracy_report import print_table  # noqa: E402
from proxy.engine import Engine  # noqa: E402
from proxy.errors import DPSQLError  # noqa: E402
from proxy.intervals import items_sql, with_row_index  # noqa: E402
from proxy.plan import Plan  # noqa: E402
from proxy.policy import parse_policy  # noqa: E402
from proxy.release import PostProcessor  # noqa: E402
from proxy.request import QueryRequest  # noqa: E402
from proxy.result import Result  # noqa: E402
from proxy.rewrite.l0 import takes_seed  # noqa: E402
from sample_data.generate import generate  # noqa: E402
from tests.policies import fixed_caps  # noqa: E402

EPSILON = 1.0
DELTA = workloads.QUERY_DELTA
# Hundreds of releases per question lift the population's δ (thresholding δ adds up);
# every release is still calibrated to its own ε = 1 and δ = 1e-9.
POPULATION_DELTA = 1e-4
OFF = 0.10  # a cell this far off its exact value must carry a warning
DEMO_SIZE = {"people": 5000, "prompts": 100_000, "seed": 7}  # the generator's defaults
RUNS_FULL, RUNS_QUICK = 200, 20
DRAWS_FULL, DRAWS_QUICK = 100, 10  # independent choices of the auto caps, for their spread


class Config(Enum):
    FIXED = "fixed"  # demo policy, fixed caps (prompts 10, tickets 3)
    AUTO = "auto"  # demo policy as shipped: caps chosen from the data
    PUMS = "pums"  # PUMS policy
    SMARTNOISE = "smartnoise"


# --- measurements -----------------------------------------------------------------------
@dataclass
class Measure:
    """What one configuration did on one question over ``runs`` repetitions."""

    runs: int = 0
    error: str = ""  # the refusal, when refused
    exact_groups: int = 0
    rows_per_run: float = 0.0  # released rows matched to an exact group, per run
    median_rel_error: float = math.nan  # median over cells of the per-cell median
    worst_rel_error: float = math.nan  # max over cells of the per-cell median
    bias: float = math.nan  # median over cells of |bounded − exact| / |exact|
    worst_bias: float = math.nan
    covered: int = 0
    with_interval: int = 0
    null_intervals: int = 0
    warned_runs: int = 0
    off_cells: int = 0
    off_cells_warned: int = 0
    # ... of which the 95% interval is null or at least 10% of the value: the interval
    # alone tells the analyst the cell may be that far off (noise, not bounding).
    off_cells_wide: int = 0
    cells: int = 0  # released cells matched to an exact value ≠ 0, over all runs
    cells_wide: int = 0  # ... whose interval is null or at least 10% of the value
    clipping: float = math.nan  # median estimated share of people cut (when estimated)
    cap: int | None = None  # C
    max_groups: int | None = None  # K
    sampled: bool = False  # the core samples groups per person (bounded value per seed)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # distinct texts (shortened)
    cell_errors: dict[str, float] = field(default_factory=dict)  # per cell: median error
    common_groups: list[str] = field(default_factory=list)  # SmartNoise: released ≥ half

    @property
    def coverage(self) -> float:
        return self.covered / self.with_interval if self.with_interval else math.nan


def key_of(values: tuple[Any, ...] | list[Any]) -> str:
    """One text per group key, the same for DuckDB's, dpsql's and SmartNoise's values."""
    out = []
    for v in values:
        if v is None:
            out.append("NULL")
        elif isinstance(v, str):
            out.append(v)
        elif isinstance(v, (dt.datetime, dt.date)):
            out.append(v.isoformat())
        else:
            try:
                f = float(v)
            except (TypeError, ValueError):
                out.append(str(v))
                continue
            out.append(str(int(f)) if f.is_integer() else repr(f))
    return "|".join(out)


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, (str, bytes)):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def exact_answers(con: duckdb.DuckDBPyConnection, sql: str, keys: int) -> dict[str, float]:
    out = {}
    for r in con.execute(sql).fetchall():
        v = _number(r[keys])
        if v is not None:
            out[key_of(r[:keys])] = v
    return out


def _noise_free_table(plan: Plan, exact: dict[str, np.ndarray]) -> pa.Table:
    """What ``proxy.release.release`` builds, without noise and without partition
    selection: every group the core returned (a public domain completed with zeros)."""
    def value(v: Any, integer: bool) -> Any:
        if v is None:
            return 0
        if isinstance(v, np.generic):
            v = v.item()
        return int(v) if integer else float(v)

    columns: dict[str, Any] = {}
    stats = [(n.statistic.column, n.statistic.integer) for n in plan.noise]
    if plan.domain is not None:
        keys = [list(exact[k]) for k in plan.key_columns]
        index = {tuple(_plain(k[i]) for k in keys): i
                 for i in range(len(keys[0]) if keys else len(next(iter(exact.values()))))}
        for j, name in enumerate(plan.key_columns):
            columns[name] = pa.array([d[j] for d in plan.domain])
        for name, integer in stats:
            col = list(exact[name])
            columns[name] = pa.array(
                [value(col[index[d]], integer) if d in index else 0 for d in plan.domain],
                type=pa.int64() if integer else pa.float64())
    else:
        for name in plan.key_columns:
            columns[name] = pa.array([_plain(v) for v in exact[name]])
        for name, integer in stats:
            columns[name] = pa.array([value(v, integer) for v in exact[name]],
                                     type=pa.int64() if integer else pa.float64())
        columns["__persons"] = pa.array([value(v, True) for v in exact["__persons"]],
                                        type=pa.int64())
    return pa.table(columns)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def bounded_answers(engine: Engine, post: PostProcessor, plan: Plan, seed: int,
                    keys: int) -> dict[str, float]:
    """The answer without noise: the core (with ``seed`` for its per-person sampling)
    through the analyst's select list, by group key. A quantile is drawn from a
    histogram by the exponential mechanism: it has no noise-free value (none returned)."""
    if plan.quantiles:
        return {}
    exact = engine.executor.run(plan.core_sql, [seed] if takes_seed(plan.core_sql) else [])
    table = _noise_free_table(plan, exact)
    _, rows = post.run(items_sql(plan.outer_sql), with_row_index(table))
    out = {}
    for r in rows:
        v = _number(r[1 + keys])
        if v is not None:
            out[key_of(r[1:1 + keys])] = v
    return out


class SeedRecorder:
    """Stands in for ``proxy.engine.secret_seed`` during the benchmark: draws the same
    secret seed and remembers it, so the bounded value of a release can be recomputed."""

    def __init__(self) -> None:
        self.last: int | None = None

    def __call__(self) -> int:
        self.last = secret_seed()
        return self.last


@contextlib.contextmanager
def recording_seeds() -> Iterator[SeedRecorder]:
    recorder = SeedRecorder()
    saved = engine_module.secret_seed
    engine_module.secret_seed = recorder  # type: ignore[assignment]
    try:
        yield recorder
    finally:
        engine_module.secret_seed = saved  # type: ignore[assignment]


def _applies(warning: str, column: str) -> bool:
    """Does ``warning`` speak about cells of ``column``? Warnings about one column name
    it ("... in column 'n' ..."); the others (clipping, rows cut, empty) are about all."""
    return "column '" not in warning or f"column {column!r}" in warning


def _short(text: str) -> str:
    return text if len(text) <= 160 else text[:157] + "..."


def measure(engine: Engine, post: PostProcessor, recorder: SeedRecorder, q: Question,
            exact: dict[str, float], runs: int) -> Measure:
    m = Measure(runs=runs, exact_groups=len(exact))
    t0 = time.perf_counter()
    rel: dict[str, list[float]] = {}
    bounded_by_seed: dict[int | None, dict[str, float]] = {}
    released = 0
    clip: list[float] = []
    seen_warnings: dict[str, None] = {}
    fixed_bounded: dict[str, float] | None = None
    for i in range(runs):
        request = QueryRequest(q.sql, epsilon=EPSILON * (1 + (i + 1) * 1e-9), delta=DELTA)
        recorder.last = None
        try:
            result: Result = engine.run(request)
        except DPSQLError as error:
            m.error = f"{error.code}: {str(error).splitlines()[0][:200]}"
            m.runs = i
            break
        assert not result.privacy.cached, "every repetition must be a fresh release"
        plan = engine.prepare(request)[1]
        m.cap, m.max_groups = plan.max_rows, plan.max_groups
        m.sampled = takes_seed(plan.core_sql)
        if m.sampled:
            seed = recorder.last
            assert seed is not None
            bounded = bounded_answers(engine, post, plan, seed, q.keys)
        else:
            if fixed_bounded is None:
                fixed_bounded = bounded_answers(engine, post, plan, 0, q.keys)
            bounded = fixed_bounded
        bounded_by_seed.setdefault(recorder.last if m.sampled else None, bounded)
        if result.privacy.clipping is not None:
            clip.append(result.privacy.clipping.fraction)
        for w in result.warnings:
            seen_warnings.setdefault(_short(w), None)
        m.warned_runs += bool(result.warnings)
        column = result.columns[q.keys]
        warned_here = any(_applies(w, column) for w in result.warnings)
        for row, widths in zip(result.rows, result.intervals, strict=True):
            k = key_of(row[:q.keys])
            if k not in exact:
                continue
            released += 1
            value, truth = _number(row[q.keys]), exact[k]
            width = widths[q.keys]
            if value is None:
                continue
            if truth != 0:
                e = abs(value - truth) / abs(truth)
                rel.setdefault(k, []).append(e)
                wide = width is None or width >= OFF * abs(value)
                m.cells += 1
                m.cells_wide += wide
                if e > OFF:
                    m.off_cells += 1
                    m.off_cells_warned += warned_here
                    m.off_cells_wide += wide
            b = bounded.get(k)
            if width is None:
                m.null_intervals += 1
            elif b is not None:
                m.with_interval += 1
                m.covered += abs(value - b) <= width
    m.seconds = time.perf_counter() - t0
    if m.runs:
        m.rows_per_run = released / m.runs
    m.cell_errors = {k: statistics.median(v) for k, v in rel.items()}
    if m.cell_errors:
        m.median_rel_error = statistics.median(m.cell_errors.values())
        m.worst_rel_error = max(m.cell_errors.values())
    biases = [abs(b - exact[k]) / abs(exact[k]) for bounded in bounded_by_seed.values()
              for k, b in bounded.items() if k in exact and exact[k] != 0]
    if biases:
        m.bias = statistics.median(biases)
        m.worst_bias = max(biases)
    if clip:
        m.clipping = statistics.median(clip)
    m.warnings = list(seen_warnings)[:6]
    return m


# --- engines ----------------------------------------------------------------------------
def demo_policy_text(db: Path, ledger: Path, config: Config) -> str:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    if config is Config.FIXED:
        text = fixed_caps(text)
    for old, new in (
        ('duckdb = "usage.duckdb"', f'duckdb = "{db}"'),
        ('path = "../state/ledger.sqlite"', f'path = "{ledger}"'),
        ("epsilon_cap = 4.0", "epsilon_cap = 1000000.0"),
        ("delta = 1e-6 ", f"delta = {POPULATION_DELTA!r} "),
    ):
        if old not in text:
            raise RuntimeError(f"sample_data/policy.toml changed: {old!r} not found")
        text = text.replace(old, new)
    return text


@contextlib.contextmanager
def demo_engine(db: Path, config: Config) -> Iterator[Engine]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        engine = Engine(parse_policy(demo_policy_text(db, folder / "ledger.sqlite", config),
                                     base_dir=folder))
        try:
            yield engine
        finally:
            engine.close()


@contextlib.contextmanager
def pums_engine() -> Iterator[Engine]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = workloads.pums_policy(workloads.PUMS_CSV, folder / "ledger.sqlite",
                                     mechanism="gaussian", population_delta=POPULATION_DELTA)
        engine = Engine(parse_policy(text, base_dir=folder))
        try:
            yield engine
        finally:
            engine.close()


def pums_exact(sql: str, keys: int) -> dict[str, float]:
    con = duckdb.connect()
    try:
        con.execute("CREATE SCHEMA PUMS")
        con.execute("CREATE TABLE PUMS.PUMS AS SELECT * FROM read_csv_auto(?)",
                    [str(workloads.PUMS_CSV)])
        return exact_answers(con, sql, keys)
    finally:
        con.close()


def smartnoise_measures(questions: list[Question], runs: int,
                        log: Callable[[str], None]) -> tuple[dict[str, Measure], dict[str, Any]]:
    """SmartNoise's median relative error per PUMS question it is asked (no intervals,
    no warnings: it reports neither)."""
    from bench.peers import smartnoise as sn

    asked = [q for q in questions if q.smartnoise_sql]
    if not asked:
        return {}, {}
    try:
        answer = sn.run_job({"csv": str(workloads.PUMS_CSV), "rows": 1000, "delta": DELTA,
                             "tasks": [{"kind": "runs", "queries": [q.smartnoise_sql
                                                                    for q in asked],
                                        "epsilon": EPSILON, "runs": runs,
                                        "keep_rows": True}]})
    except (OSError, RuntimeError, ValueError) as error:  # no venv offline, runner failed
        log(f"SmartNoise skipped: {error}")
        return {}, {"skipped": str(error).splitlines()[0][:300]}
    out = {}
    for q, item in zip(asked, answer["results"][0], strict=True):
        truth = pums_exact(q.smartnoise_truth or q.truth, q.keys)
        m = Measure(runs=runs if item["ok"] else 0, exact_groups=len(truth))
        if not item["ok"]:
            m.error = item["error"]
            out[q.name] = m
            continue
        rel: dict[str, list[float]] = {}
        released = 0
        seen: dict[str, int] = {}
        for rows in item["rows"]:
            for r in rows:
                seen[key_of(r[:q.keys])] = seen.get(key_of(r[:q.keys]), 0) + 1
                k = key_of(r[:q.keys])
                value = _number(r[q.keys])
                if k not in truth or value is None:
                    continue
                released += 1
                if truth[k] != 0:
                    e = abs(value - truth[k]) / abs(truth[k])
                    rel.setdefault(k, []).append(e)
                    m.off_cells += e > OFF
        m.rows_per_run = released / max(runs, 1)
        m.common_groups = sorted(k for k, n in seen.items() if n >= runs / 2 and k in truth)
        m.cell_errors = {k: statistics.median(v) for k, v in rel.items()}
        if m.cell_errors:
            m.median_rel_error = statistics.median(m.cell_errors.values())
            m.worst_rel_error = max(m.cell_errors.values())
        m.seconds = sum(item["seconds"])
        out[q.name] = m
    return out, {"versions": answer["versions"], "python": answer["python"]}


DRAW_QUESTIONS = ("prompts by region", "mean tokens_out by plan", "mean resolution by category")


def cap_draws(db: Path, draws: int) -> dict[str, dict[str, int]]:
    """How often each row cap is chosen for a few reference questions, over ``draws``
    independent releases of the histograms (each in a fresh ledger and cache, as a new
    deployment would): the benchmark's auto column rests on one such draw."""
    seen: dict[str, dict[str, int]] = {}
    questions = [q for q in QUESTIONS if q.name in DRAW_QUESTIONS]
    for _ in range(draws):
        with demo_engine(db, Config.AUTO) as engine:
            for t in engine.policy.tables:
                if t.auto_rows_limit is not None:
                    engine.auto_bounds.release(t, "bench")
            for q in questions:
                request = QueryRequest(q.sql, epsilon=EPSILON, delta=DELTA)
                cap = str(engine.prepare(request)[1].max_rows)
                seen.setdefault(q.name, {})[cap] = seen.setdefault(q.name, {}).get(cap, 0) + 1
    return {t: dict(sorted(c.items(), key=lambda kv: int(kv[0]))) for t, c in seen.items()}


def run(runs: int, only: list[str] | None = None, *, smartnoise: bool = True,
        draws: int = 0, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure every question (or those named in ``only``) in every configuration."""
    questions = [q for q in QUESTIONS if not only or q.name in only]
    results: dict[str, dict[str, Any]] = {q.name: {} for q in questions}
    chosen: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, recording_seeds() as recorder:
        post = PostProcessor()
        demo = [q for q in questions if q.data is Data.DEMO]
        if demo:
            db = generate(Path(tmp) / "usage.duckdb", **DEMO_SIZE)
            con = duckdb.connect(str(db), read_only=True)
            exact = {q.name: exact_answers(con, q.truth, q.keys) for q in demo}
            con.close()
            if draws:
                log(f"auto caps: {draws} independent histogram releases")
                chosen["draws"] = cap_draws(db, draws)
            for config in (Config.FIXED, Config.AUTO):
                with demo_engine(db, config) as engine:
                    for q in demo:
                        log(f"{config.value:<5} {q.name} ({runs} runs)")
                        m = measure(engine, post, recorder, q, exact[q.name], runs)
                        results[q.name][config.value] = asdict(m)
                    # The cap is chosen per query: record each question's.
                    chosen[config.value] = {
                        q.name: results[q.name][config.value]["cap"] for q in demo}
        pums = [q for q in questions if q.data is Data.PUMS]
        if pums:
            with pums_engine() as engine:
                for q in pums:
                    log(f"pums  {q.name} ({runs} runs)")
                    m = measure(engine, post, recorder, q, pums_exact(q.truth, q.keys), runs)
                    results[q.name][Config.PUMS.value] = asdict(m)
            if smartnoise:
                log(f"SmartNoise: {sum(1 for q in pums if q.smartnoise_sql)} questions "
                    f"({runs} runs)")
                sn, sn_info = smartnoise_measures(pums, runs, log)
                for name, m in sn.items():
                    results[name][Config.SMARTNOISE.value] = asdict(m)
                chosen["smartnoise"] = sn_info
        post.close()
    return {
        "runs": runs, "epsilon": EPSILON, "delta": DELTA, "off": OFF,
        "demo_size": DEMO_SIZE, "auto_caps": chosen.get("auto", {}),
        "auto_cap_draws": chosen.get("draws", {}),
        "smartnoise": chosen.get("smartnoise", {}),
        "questions": [{"name": q.name, "data": q.data.value, "sql": q.sql, "what": q.what,
                       "keys": q.keys, "smartnoise_sql": q.smartnoise_sql,
                       "results": results[q.name]} for q in questions],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true",
                        help=f"{RUNS_QUICK} repetitions instead of {RUNS_FULL}")
    parser.add_argument("--runs", type=int, help="repetitions per question")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these questions only")
    parser.add_argument("--no-smartnoise", action="store_true", help="skip SmartNoise")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args(argv)
    runs = args.runs or (RUNS_QUICK if args.quick else RUNS_FULL)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    data = run(runs, args.only, smartnoise=not args.no_smartnoise,
               draws=DRAWS_QUICK if args.quick else DRAWS_FULL, log=log)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
    print_table(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
