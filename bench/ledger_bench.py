"""Durable ledger throughput: charges per second on a real file, 1 and N processes.

Each charge is a full admission (read totals, compose, CKS conversion, append event and
totals, fsync'd commit). Printed beside it: the cost of the conversion alone and of a
bare SQLite WAL + synchronous=FULL commit on the same disk, the two floors a charge sits
on. Figures are for comparison within one run; nothing here gates CI.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accounting.ledger import PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger

_POPULATION = "bench"


def _worker(path: str, seconds: float, start: Any, out: Any) -> None:
    lg = SQLiteLedger(path)
    curve = zcdp_curve(1e-12)
    start.wait(120)
    n, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        lg.charge(_POPULATION, curve, analyst="bench", fingerprint=str(n))
        n += 1
    lg.close()
    out.put(n)


def charges_per_second(path: str, processes: int, seconds: float) -> float:
    """Admitted durable charges per second with ``processes`` writers on one file."""
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec(_POPULATION, 1e9, 1e-6))
    lg.close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(path, seconds, start, out)) for _ in range(processes)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every child finish importing before the clock starts
    start.set()
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(30)
    return total / seconds


def bare_commits_per_second(path: str, seconds: float) -> float:
    """One-row INSERT commits per second with WAL + synchronous=FULL (the fsync floor)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (x TEXT)")
    n, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 2000,))
        conn.execute("COMMIT")
        n += 1
    conn.close()
    return n / seconds


def conversion_us() -> float:
    """Microseconds for one CKS conversion of a curve over the 109 orders."""
    c = zcdp_curve(0.01)
    reps = 5000
    t = time.perf_counter()
    for _ in range(reps):
        c.epsilon(1e-6)
    return (time.perf_counter() - t) / reps * 1e6


def main() -> None:
    seconds = float(os.environ.get("LEDGER_BENCH_SECONDS", "5"))
    with tempfile.TemporaryDirectory(dir=os.environ.get("LEDGER_BENCH_DIR")) as d:
        print(f"store directory: {d}")
        print(f"CKS conversion: {conversion_us():.1f} µs")
        bare = bare_commits_per_second(str(Path(d) / "bare.sqlite"), seconds)
        print(f"bare SQLite WAL+FULL commits/s: {bare:.0f}")
        for procs in (1, 4):
            rate = charges_per_second(str(Path(d) / f"ledger{procs}.sqlite"), procs, seconds)
            print(f"durable charges/s, {procs} process(es): {rate:.0f}")


if __name__ == "__main__":
    main()
