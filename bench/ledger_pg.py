"""Durable ledger throughput on the PostgreSQL store next to the SQLite store, same run.

Charges per second with 1 and 4 writer processes, each charge a full admission (read
totals, compose, CKS conversion, append event and totals, commit). PostgreSQL is a
throwaway local server (tests/postgres_server.py) with ``fsync=on`` and
``synchronous_commit=on``: every charge is on disk before it returns, as with SQLite's
``synchronous=FULL``. Printed beside them: the floor of a bare durable one-row commit
on each, and what storing curves as JSON text costs against ``float8[]``.

    .venv/bin/python -m bench.ledger_pg        # LEDGER_BENCH_SECONDS=5 by default

Figures are for comparison within one run; nothing here gates CI.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accounting.ledger import Ledger, PopulationSpec
from accounting.ledger_records import curve_json, parse_curve
from accounting.rdp import Curve, zcdp_curve
from bench.ledger_bench import bare_commits_per_second

_POPULATION = "bench"


def _open(kind: str, location: str) -> Ledger:
    if kind == "sqlite":
        from accounting.store_sqlite import SQLiteLedger

        return SQLiteLedger(location)
    from accounting.store_postgres import PostgresLedger

    return PostgresLedger(location)


def _worker(kind: str, location: str, seconds: float, start: Any, out: Any) -> None:
    lg = _open(kind, location)
    curve = zcdp_curve(1e-12)
    lg.spent(_POPULATION)  # connect and check before the clock starts
    start.wait(120)
    n, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        lg.charge(_POPULATION, curve, analyst="bench", fingerprint=str(n))
        n += 1
    lg.close()
    out.put(n)


def charges_per_second(kind: str, location: str, processes: int, seconds: float) -> float:
    """Admitted durable charges per second with ``processes`` writers on one store."""
    lg = _open(kind, location)
    lg.register(PopulationSpec(_POPULATION, 1e9, 1e-6))
    lg.close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(kind, location, seconds, start, out))
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    time.sleep(1.5)  # let every child import and connect before the clock starts
    start.set()
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(30)
    check = _open(kind, location)
    report = check.verify()
    check.close()
    assert report.ok, report.problems
    return total / seconds


def bare_pg_commits_per_second(dsn: str, seconds: float) -> float:
    """One-row INSERT commits per second, synchronous_commit=on (the fsync floor)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TABLE bare (x text)")
        n, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            conn.execute("INSERT INTO bare VALUES (%s)", ("x" * 2000,))
            n += 1
    return n / seconds


def curve_codecs(dsn: str, rows: int = 2000) -> dict[str, float]:
    """µs per curve to write and to read back 109-order curves: JSON text (the stores'
    format, which the hash chain covers) against float8[]; and whether both are exact."""
    import psycopg

    curves = [zcdp_curve(1e-6 * (i + 1)) + zcdp_curve(1.0 / 3 + i) for i in range(rows)]
    out: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE c_text (id int, c text)")
        conn.execute("CREATE TABLE c_array (id int, c float8[])")
        with conn.cursor() as cur:
            t = time.perf_counter()
            cur.executemany(
                "INSERT INTO c_text VALUES (%s, %s)",
                [(i, curve_json(c)) for i, c in enumerate(curves)],
            )
            out["write_json_us"] = (time.perf_counter() - t) / rows * 1e6
            t = time.perf_counter()
            cur.executemany(
                "INSERT INTO c_array VALUES (%s, %s)",
                [(i, list(c.values)) for i, c in enumerate(curves)],
            )
            out["write_array_us"] = (time.perf_counter() - t) / rows * 1e6
        t = time.perf_counter()
        back_text = [
            parse_curve(r[0]) for r in conn.execute("SELECT c FROM c_text ORDER BY id").fetchall()
        ]
        out["read_json_us"] = (time.perf_counter() - t) / rows * 1e6
        t = time.perf_counter()
        back_array = [
            Curve.from_array(r[0])
            for r in conn.execute("SELECT c FROM c_array ORDER BY id").fetchall()
        ]
        out["read_array_us"] = (time.perf_counter() - t) / rows * 1e6
    out["json_exact"] = float(back_text == curves)
    out["array_exact"] = float(back_array == curves)
    t = time.perf_counter()
    for c in curves:
        parse_curve(curve_json(c))
    out["json_codec_only_us"] = (time.perf_counter() - t) / rows * 1e6
    return out


def main() -> None:
    from tests import postgres_server

    seconds = float(os.environ.get("LEDGER_BENCH_SECONDS", "5"))
    server = postgres_server.start(durable=True)
    try:
        print(f"PostgreSQL server started in {server.start_s:.2f} s (fsync=on)")
        floor = bare_pg_commits_per_second(server.dsn(server.create_database()), seconds)
        with tempfile.TemporaryDirectory(dir=os.environ.get("LEDGER_BENCH_DIR")) as d:
            bare = bare_commits_per_second(str(Path(d) / "bare.sqlite"), seconds)
            print(f"bare durable commits/s: SQLite {bare:.0f}, PostgreSQL {floor:.0f}")
            codecs = curve_codecs(server.dsn(server.create_database()))
            print("curve storage (µs per curve): " + json.dumps(codecs))
            rows = []
            for procs in (1, 4):
                sq = charges_per_second("sqlite", str(Path(d) / f"l{procs}.sqlite"), procs, seconds)
                dsn = server.dsn(server.create_database(), postgres_server.APP_ROLE)
                pg = charges_per_second("postgres", dsn, procs, seconds)
                rows.append((procs, sq, pg))
        print("\n| writer processes | SQLite charges/s | PostgreSQL charges/s |")
        print("|---|---|---|")
        for procs, sq, pg in rows:
            print(f"| {procs} | {sq:.0f} | {pg:.0f} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
