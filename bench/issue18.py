"""Issue 18's rows, measured before and after in one run (interleaved, same machine).

    .venv/bin/python bench/issue18.py --before DIR [--after DIR] [--rounds 2] [--quick]

``DIR`` is a source tree of dpsql (e.g. ``git archive <commit> | tar -x -C DIR``); each
measurement runs in a fresh process of this venv with that tree first on the path, so
both trees share the interpreter, the libraries and the disk. Rounds alternate which
tree goes first. Rows: the in-process PUMS cache hit and never-seen-text miss, durable
charges/s with 1 and 2 processes (one charging thread each, and 8 each: what the group
commit shares one fsync between), the HTTP cache-hit throughput over a bare FastAPI
route with 1 and 2 workers (bench/http.py --hits-only, wrk when installed), and the
wall time of a cold ``dpsql query`` on PUMS, the cache miss of the private daily key and
the public key over their per-person floors at 1M and 10M rows (bench/scale.py's data
and queries), and a cached query through each door over ``/v1/query`` (bench/doors.py's
paths; both trees served at once and called in turn, as ``bench.doors --before`` does).
The in-process, ledger and HTTP rows run again with their files in RAM (/dev/shm),
which separates the CPU path from the disk's fsync. Writes ``bench/out/issue18.json``, stores
the summary under ``issue18`` in bench/results.json (BENCHMARKS.md renders it) and
prints a Markdown table. Nothing here gates CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TREE = Path(os.environ.get("ISSUE18_TREE", ROOT)).resolve()
# The tree under test heads sys.path (never bench/ itself: it would shadow `http`).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(TREE))

SQL = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"
ROWS = ("inproc", "ledger", "http", "cli", "scale", "doors")
# A RAM-backed directory: the same measurement with the ledger where fsync costs almost
# nothing separates the CPU path from this machine's disk (its fsync is the floor of a
# durable event: hundreds per second when the disk is shared).
RAM_DIR = Path("/dev/shm")


def _folders() -> list[tuple[str, str | None]]:
    """(suffix, parent directory) of each variant: the disk, then RAM when present."""
    return [("", None)] + ([("_ram", str(RAM_DIR))] if RAM_DIR.is_dir() else [])


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def _pums_policy(folder: Path) -> str:
    from bench import workloads

    return workloads.pums_policy(
        workloads.PUMS_CSV, folder / "ledger.sqlite", mechanism="gaussian", population_delta=1e-4
    )


# --- measurements (run in a child process, in the tree under test) ----------------------
def _inproc_in(parent: str | None, repeat: int) -> dict[str, float]:
    from proxy.engine import Engine
    from proxy.policy import parse_policy
    from proxy.request import QueryRequest

    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        engine = Engine(parse_policy(_pums_policy(Path(tmp)), base_dir=Path(tmp)))
        engine.run(QueryRequest(SQL, epsilon=1.0))
        hit = _median_ms(lambda: engine.run(QueryRequest(SQL, epsilon=1.0)), repeat)
        fresh = iter(range(10**9))
        new_text = _median_ms(
            lambda: engine.run(
                QueryRequest(SQL.replace("GROUP BY", f"WHERE age > {next(fresh)} GROUP BY"),
                             epsilon=1.0)
            ),
            repeat // 5,
        )
        counter = iter(range(1, 10**9))
        new_eps = _median_ms(
            lambda: engine.run(QueryRequest(SQL, epsilon=1.0 + next(counter) * 1e-6)),
            repeat // 5,
        )
        engine.close()
    return {"hit_ms": hit, "new_text_ms": new_text, "new_epsilon_ms": new_eps}


def measure_inproc(quick: bool) -> dict[str, float]:
    repeat = 200 if quick else 1000
    out: dict[str, float] = {}
    for suffix, parent in _folders():
        out |= {k + suffix: v for k, v in _inproc_in(parent, repeat).items()}
    return out


THREADS = 8  # charging threads per process in the concurrent rows


def _charging_process(path: str, threads: int, seconds: float, start: Any, out: Any) -> None:
    """``threads`` threads of one process charging one ledger for ``seconds`` (spawned:
    module level). What a server worker does under concurrent misses."""
    import threading

    from accounting.rdp import zcdp_curve
    from accounting.store_sqlite import SQLiteLedger

    lg = SQLiteLedger(path)
    curve = zcdp_curve(1e-12)
    counts = [0] * threads
    start.wait(120)
    deadline = time.perf_counter() + seconds

    def work(k: int) -> None:
        n = 0
        while time.perf_counter() < deadline:
            lg.charge("bench", curve, analyst="bench", fingerprint=f"{k}-{n}")
            n += 1
        counts[k] = n

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    lg.close()
    out.put(sum(counts))


def _threaded_charges_per_second(path: str, processes: int, seconds: float) -> float:
    import multiprocessing as mp

    from accounting.ledger import PopulationSpec
    from accounting.store_sqlite import SQLiteLedger

    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("bench", 1e9, 1e-6))
    lg.close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_charging_process, args=(path, THREADS, seconds, start, out))
             for _ in range(processes)]
    for p in procs:
        p.start()
    time.sleep(1.5)  # every child imported before the clock starts
    start.set()
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(30)
    return total / seconds


def _bare_process(path: str, seconds: float, start: Any, out: Any) -> None:
    """One process of the bare loop below (spawned: module level). The loop is
    bench/ledger_bench.py's, written out here: the yardstick must be this file's own
    code for both trees, and the child imports ``bench`` from the tree under test."""
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None, timeout=60)
    conn.execute("PRAGMA synchronous=FULL")
    start.wait(120)
    n, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 2000,))
        conn.execute("COMMIT")
        n += 1
    conn.close()
    out.put(n)


def _bare_commits_per_second(path: str, processes: int, seconds: float) -> float:
    """bench/ledger_bench.py's bare WAL + synchronous=FULL INSERT loop, run by
    ``processes`` processes on one file at once: SQLite's own floor for as many
    writers (defined here, so that it runs the same for any tree under test)."""
    import multiprocessing as mp
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_bare_process, args=(path, seconds, start, out))
             for _ in range(processes)]
    for p in procs:
        p.start()
    time.sleep(1.0)
    start.set()
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(30)
    return total / seconds


def measure_ledger(quick: bool) -> dict[str, float]:
    from bench import ledger_bench as lb

    seconds = 2.0 if quick else 5.0
    out: dict[str, float] = {}
    for suffix, parent in _folders():
        with tempfile.TemporaryDirectory(dir=parent) as tmp:
            out[f"bare_commits_per_s{suffix}"] = lb.bare_commits_per_second(
                str(Path(tmp) / "b.sqlite"), seconds
            )
            out[f"bare_commits_per_s_2{suffix}"] = _bare_commits_per_second(
                str(Path(tmp) / "b2.sqlite"), 2, seconds
            )
            for procs in (1, 2):
                out[f"charges_per_s_{procs}{suffix}"] = lb.charges_per_second(
                    str(Path(tmp) / f"l{procs}.sqlite"), procs, seconds
                )
                out[f"charges_per_s_{procs}_threads{suffix}"] = _threaded_charges_per_second(
                    str(Path(tmp) / f"t{procs}.sqlite"), procs, seconds
                )
    return out


def measure_http(quick: bool) -> dict[str, Any]:
    # Five seconds even when quick: in three the bare route's own second-worker gain
    # read 1.16x, against 1.63x in five (BENCHMARKS.md, "Cache hits in two processes").
    seconds = 5
    out: dict[str, Any] = {}
    for suffix, parent in _folders():
        # bench/http.py keeps the policy, ledger and release store in a temporary folder.
        env = {**os.environ, "PYTHONPATH": str(TREE), "TMPDIR": parent or tempfile.gettempdir()}
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "http.py"), "--hits-only",
             "--seconds", str(seconds)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=True,
        )
        report = json.loads(proc.stdout)
        out[f"summary{suffix}"] = report["summary"]
        out[f"report{suffix}"] = report
    return out


def measure_cli(quick: bool) -> dict[str, float]:
    """Wall time of `dpsql query` in a new process: with empty state (the query is
    planned, charged, run and noised) and again (answered from the release cache)."""
    import resource

    def cpu() -> float:
        use = resource.getrusage(resource.RUSAGE_CHILDREN)
        return use.ru_utime + use.ru_stime

    runs = 3 if quick else 5
    dpsql = str(Path(sys.executable).with_name("dpsql"))
    # Bytecode is written and used, as for an installed package (pip compiles it at
    # install): a PYTHONDONTWRITEBYTECODE inherited from the shell would otherwise make
    # every run compile the modules edited since their last .pyc.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(TREE)
    times: dict[str, list[float]] = {"first_s": [], "cached_s": [],
                                     "first_cpu_s": [], "cached_cpu_s": []}
    with tempfile.TemporaryDirectory() as tmp:  # one untimed run writes the .pyc files
        policy = Path(tmp) / "policy.toml"
        policy.write_text(_pums_policy(Path(tmp)))
        subprocess.run([dpsql, "--policy", str(policy), "query", SQL, "--epsilon", "1"],
                       cwd=tmp, env=env, check=True, capture_output=True)
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            policy = Path(tmp) / "policy.toml"
            policy.write_text(_pums_policy(Path(tmp)))
            cmd = [dpsql, "--policy", str(policy), "query", SQL, "--epsilon", "1"]
            for name in ("first", "cached"):
                t, c = time.perf_counter(), cpu()
                subprocess.run(cmd, cwd=tmp, env=env, check=True, capture_output=True)
                times[f"{name}_s"].append(time.perf_counter() - t)
                # CPU time (user + system) of the process: what the wall time is when
                # the machine is idle, and much less moved than it by other jobs.
                times[f"{name}_cpu_s"].append(cpu() - c)
    return {k: statistics.median(v) for k, v in times.items()}


# bench/engine.py's queries, copied so that an older tree's bench/ cannot change them.
SCALE_QUERIES = (
    (
        "private",
        "SELECT date_trunc('day', ts) AS d, COUNT(*) FROM prompts GROUP BY date_trunc('day', ts)",
        "SELECT d, SUM(c), COUNT(*) FROM (SELECT user_id, date_trunc('day', ts) AS d, "
        "COUNT(*) AS c FROM prompts GROUP BY user_id, date_trunc('day', ts)) GROUP BY d",
    ),
    (
        "public",
        "SELECT region, COUNT(*), SUM(tokens_in) FROM prompts JOIN users USING (user_id) "
        "GROUP BY region",
        "SELECT region, SUM(c), SUM(s), COUNT(*) FROM (SELECT p.user_id, u.region, COUNT(*) AS c, "
        "SUM(p.tokens_in) AS s FROM prompts p JOIN users u ON p.user_id = u.user_id "
        "GROUP BY p.user_id, u.region) GROUP BY region",
    ),
)
SCALE_ROWS = (1_000_000, 10_000_000)


def _floor_and_miss(engine: Any, sql: str, floor: str, pairs: int) -> tuple[float, float]:
    """Median ms of the floor and of a cache miss (a new ε each time), in pairs whose
    order alternates, after one untimed run of each (the page cache, first-use costs)."""
    from proxy.request import QueryRequest

    fresh = iter(range(1, 10**9))

    def miss() -> object:
        return engine.run(QueryRequest(sql, epsilon=1.0 + next(fresh) * 1e-6))

    def bare() -> object:
        return engine.executor.evaluate(floor)

    bare()
    miss()
    floors: list[float] = []
    misses: list[float] = []
    for i in range(pairs):
        pair = [(floors, bare), (misses, miss)]
        for times, fn in pair[:: 1 if i % 2 == 0 else -1]:
            times.append(_median_ms(fn, 1))
    return statistics.median(floors), statistics.median(misses)


def measure_scale(quick: bool) -> dict[str, float]:
    """The cache miss of each query over its per-person floor on the engine's own
    connection, interleaved pair by pair (as bench/scale.py), at each size; the data
    files come from the driver (ISSUE18_SCALE_DBS), the policy from the tree's own demo
    policy."""
    from proxy.engine import Engine
    from proxy.policy import parse_policy

    out: dict[str, float] = {}
    for rows, db in zip(SCALE_ROWS, os.environ["ISSUE18_SCALE_DBS"].split(","), strict=True):
        pairs = (5 if quick else 9) if rows < 10**7 else (3 if quick else 5)
        with tempfile.TemporaryDirectory() as tmp:
            text = (TREE / "sample_data" / "policy.toml").read_text()
            text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
            text = text.replace(
                'path = "../state/ledger.sqlite"', f'path = "{Path(tmp) / "ledger.sqlite"}"'
            )
            text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
            text = text.replace("[proxy]", "[proxy]\nthreads = 2\nquery_timeout_s = 3600", 1)
            engine = Engine(parse_policy(text, base_dir=Path(tmp)))
            try:
                for name, sql, floor in SCALE_QUERIES:
                    floor_ms, miss_ms = _floor_and_miss(engine, sql, floor, pairs)
                    key = f"{name}_{rows // 10**6}m"
                    out[f"{key}_floor_ms"], out[f"{key}_miss_ms"] = floor_ms, miss_ms
                    out[f"{key}_ratio"] = miss_ms / floor_ms
            finally:
                engine.close()
    return out


MEASURES: dict[str, Callable[[bool], dict[str, Any]]] = {
    "inproc": measure_inproc,
    "ledger": measure_ledger,
    "http": measure_http,
    "cli": measure_cli,
    "scale": measure_scale,
}


def measure_doors(trees: dict[str, Path], quick: bool) -> dict[str, dict[str, Any]]:
    """A cached query through every door of each tree, both servers up at once and
    called in turn (bench/doors.py's interleaving), run by this process: the clients
    are this tree's, each server runs its tree's code."""
    from bench import door_server, doors
    from sample_data.generate import generate

    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # as bench/doors.py
        os.environ.pop(name, None)
    folder = Path(tempfile.mkdtemp(prefix="dpsql-issue18-doors-"))
    servers: dict[str, Any] = {}
    try:
        db = generate(folder / "usage.duckdb", people=5000, prompts=100_000, seed=7)
        cert, key = door_server.certificate(folder)
        for i, (name, tree) in enumerate(trees.items()):
            state = folder / f"state{i}"
            state.mkdir()
            servers[name] = door_server.start(
                door_server.bench_policy(state, db),
                cert,
                key,
                state / "serve.log",
                source=None if tree == ROOT else tree,
            )
        found = doors.measure(servers, 100 if quick else 300, 2)["servers"]
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return {
        name: {
            "ratio": {path: m["ratio"] for path, m in found[name].items()},
            "p50_ms": {path: m["p50_ms"] for path, m in found[name].items()},
            "load_avg": [round(x, 2) for x in os.getloadavg()],
        }
        for name in trees
    }


# --- the driver -------------------------------------------------------------------------
def _run(tree: Path, row: str, quick: bool) -> dict[str, Any]:
    env = {**os.environ, "ISSUE18_TREE": str(tree), "PYTHONPATH": str(tree)}
    load = os.getloadavg()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", row]
        + (["--quick"] if quick else []),
        cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{row} in {tree} failed:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["load_avg"] = [round(x, 2) for x in load]
    return data


def _git(tree: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        marker = tree / "COMMIT"
        return marker.read_text().strip() if marker.exists() else tree.name


def _med(runs: list[dict[str, Any]], *path: str) -> float:
    values = []
    for r in runs:
        x: Any = r
        for p in path:
            x = x[p]
        values.append(float(x))
    return statistics.median(values)


# (label, unit, path into a row's data, goal text)
TABLE: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("in-process cache hit (PUMS)", "ms", ("inproc", "hit_ms"), "≤ 0.15 ms"),
    ("in-process cache hit, ledger in RAM", "ms", ("inproc", "hit_ms_ram"), "—"),
    ("HTTP cache-hit req/s over bare FastAPI, 2 workers", "×",
     ("http", "summary", "hit_over_bare_2"), "≥ 0.5"),
    ("HTTP cache-hit req/s over bare FastAPI, 1 worker", "×",
     ("http", "summary", "hit_over_bare_1"), "—"),
    ("second worker's gain on cache hits", "×", ("http", "summary", "second_worker_gain"),
     "≥ 1.6×"),
    ("HTTP cache hits over bare FastAPI, 2 workers, ledger in RAM", "×",
     ("http", "summary_ram", "hit_over_bare_2"), "—"),
    ("second worker's gain on cache hits, ledger in RAM", "×",
     ("http", "summary_ram", "second_worker_gain"), "—"),
    ("bare FastAPI: second worker's gain", "×", ("http", "summary", "bare_second_worker_gain"),
     "—"),
    ("PUMS miss on never-seen text", "ms", ("inproc", "new_text_ms"), "≤ 5 ms"),
    ("PUMS miss on never-seen text, ledger in RAM", "ms", ("inproc", "new_text_ms_ram"), "—"),
    ("PUMS miss, same text at a new ε", "ms", ("inproc", "new_epsilon_ms"), "—"),
    ("durable charges/s, 1 process", "/s", ("ledger", "charges_per_s_1"), "≥ 3,000"),
    ("durable charges/s, 2 processes", "/s", ("ledger", "charges_per_s_2"), "≥ 4,000"),
    (f"durable charges/s, 1 process × {THREADS} threads", "/s",
     ("ledger", "charges_per_s_1_threads"), "≥ 3,000"),
    (f"durable charges/s, 2 processes × {THREADS} threads", "/s",
     ("ledger", "charges_per_s_2_threads"), "≥ 4,000"),
    ("bare SQLite WAL+FULL commits/s (the fsync floor)", "/s",
     ("ledger", "bare_commits_per_s"), "—"),
    ("bare SQLite WAL+FULL commits/s, 2 processes", "/s",
     ("ledger", "bare_commits_per_s_2"), "—"),
    ("durable charges/s, 1 process, ledger in RAM", "/s", ("ledger", "charges_per_s_1_ram"),
     "—"),
    ("durable charges/s, 2 processes, ledger in RAM", "/s", ("ledger", "charges_per_s_2_ram"),
     "—"),
    ("bare SQLite commits/s, in RAM", "/s", ("ledger", "bare_commits_per_s_ram"), "—"),
    ("`dpsql query` on PUMS, cold process, empty state", "s", ("cli", "first_s"), "≤ 0.5 s"),
    ("`dpsql query` on PUMS, cold process, cached", "s", ("cli", "cached_s"), "≤ 0.5 s"),
    ("`dpsql query` on PUMS, cold process, empty state, CPU time", "s", ("cli", "first_cpu_s"),
     "—"),
    ("`dpsql query` on PUMS, cold process, cached, CPU time", "s", ("cli", "cached_cpu_s"), "—"),
    ("private daily key, cache miss / per-person floor, 10M rows", "×",
     ("scale", "private_10m_ratio"), "≤ 1.3×"),
    ("public key, cache miss / floor, 10M rows", "×", ("scale", "public_10m_ratio"),
     "≤ 1.05×"),
    ("private daily key, cache miss / per-person floor, 1M rows", "×",
     ("scale", "private_1m_ratio"), "—"),
    ("public key, cache miss / floor, 1M rows", "×", ("scale", "public_1m_ratio"), "—"),
    ("private daily key, cache miss, 10M rows", "ms", ("scale", "private_10m_miss_ms"), "—"),
    ("private daily key, per-person floor, 10M rows", "ms", ("scale", "private_10m_floor_ms"),
     "—"),
    *(
        (f"{path}, cached query, / `/v1/query`", "×", ("doors", "ratio", path), "≤ 1.2×")
        for path in ("trino client", "trino client, no proxy lookup", "trino bare HTTP",
                     "psycopg simple", "psycopg extended", "psycopg prepared")
    ),
    ("`/v1/query`, cached query (the doors' yardstick)", "ms",
     ("doors", "p50_ms", "/v1/query"), "—"),
)


def markdown(result: dict[str, Any]) -> str:
    b, a = result["before"], result["after"]
    lines = [
        f"| measure | before ({result['before_commit']}) | after ({result['after_commit']}) "
        "| after / before | goal |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for label, unit, (row, *path), goal in TABLE:
        if row not in b or row not in a:
            continue
        try:
            x, y = _med(b[row], *path), _med(a[row], *path)
        except KeyError:
            continue
        digits = 3 if unit in ("ms", "s", "×") and max(x, y) < 10 else 0
        fmt = f"{{:,.{digits}f}}"
        lines.append(f"| {label} | {fmt.format(x)} {unit} | {fmt.format(y)} {unit} | "
                     f"{y / x:.2f} | {goal} |")
    # The disk's fsync rate moves with other jobs on the machine between measurements:
    # charges per bare commit, each measured in the same child process, compare fairly.
    # Two processes compare with the bare loop run by two processes (SQLite's own floor
    # for two writers, measured since 2026-12-01; older runs lack it).
    for label, key, bare in (
        ("1 process", "charges_per_s_1", "bare_commits_per_s"),
        (f"1 process × {THREADS} threads", "charges_per_s_1_threads", "bare_commits_per_s"),
        (f"2 processes × {THREADS} threads", "charges_per_s_2_threads", "bare_commits_per_s"),
        ("2 processes, over the bare loop in 2 processes", "charges_per_s_2",
         "bare_commits_per_s_2"),
    ):
        if "ledger" not in b or "ledger" not in a:
            break
        try:
            x, y = (statistics.median(r[key] / r[bare] for r in runs)
                    for runs in (b["ledger"], a["ledger"]))
        except KeyError:
            continue
        lines.append(f"| durable charges per bare fsync'd commit, {label} (disk) | {x:.2f} | "
                     f"{y:.2f} | {y / x:.2f} | — |")
    return "\n".join(lines)


def _store(result: dict[str, Any]) -> None:
    """The summary into bench/results.json (BENCHMARKS.md §5a renders it)."""
    results_path = ROOT / "bench" / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results["issue18"] = {k: v for k, v in result.items() if k not in ("before", "after")} | {
        "loads": {name: {row: [r["load_avg"] for r in runs] for row, runs in result[name].items()}
                  for name in ("before", "after")},
    }
    results_path.write_text(json.dumps(results, indent=1, default=str, ensure_ascii=False) + "\n")


def compare(before: Path, after: Path, rounds: int, rows: tuple[str, ...], quick: bool) -> None:
    result: dict[str, Any] = {
        "before_commit": _git(before), "after_commit": _git(after),
        "rounds": rounds, "quick": quick, "cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_at_start": [round(x, 2) for x in os.getloadavg()],
        "wrk": shutil.which("wrk") is not None,
        "before": {}, "after": {},
    }
    if "scale" in rows:
        from bench.scale import dataset

        os.environ["ISSUE18_SCALE_DBS"] = ",".join(str(dataset(n)) for n in SCALE_ROWS)
    for row in rows:
        if row == "doors":  # both trees at once, in this process
            for k in range(rounds):
                print(
                    f"[{time.strftime('%H:%M:%S')}] doors round {k + 1}: both",
                    file=sys.stderr,
                    flush=True,
                )
                for name, data in measure_doors({"before": before, "after": after}, quick).items():
                    result[name].setdefault(row, []).append(data)
            continue
        for k in range(rounds):
            order = (("before", before), ("after", after))
            for name, tree in order if k % 2 == 0 else order[::-1]:
                print(f"[{time.strftime('%H:%M:%S')}] {row} round {k + 1}: {name}",
                      file=sys.stderr, flush=True)
                result[name].setdefault(row, []).append(_run(tree, row, quick))
    result["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["markdown"] = markdown(result)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "issue18.json").write_text(json.dumps(result, indent=1))
    _store(result)
    print(result["markdown"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--measure", choices=ROWS, help=argparse.SUPPRESS)
    parser.add_argument("--render", action="store_true",
                        help="only rebuild the table from bench/out/issue18.json")
    args = parser.parse_args()
    if args.render:
        result = json.loads((ROOT / "bench" / "out" / "issue18.json").read_text())
        result["markdown"] = markdown(result)
        (ROOT / "bench" / "out" / "issue18.json").write_text(json.dumps(result, indent=1))
        _store(result)
        print(result["markdown"])
        return
    if args.measure:
        print(json.dumps(MEASURES[args.measure](args.quick)))
        return
    if args.before is None:
        parser.error("--before DIR is required")
    compare(args.before.resolve(), args.after.resolve(), args.rounds, tuple(args.rows), args.quick)


if __name__ == "__main__":
    main()
