"""The PostgreSQL door next to the HTTP API: latency and throughput of cached and
uncached queries (issue 15).

Starts one `dpsql serve --pg-port` on a private copy of the demo policy (its own ledger
in a temporary folder, a cap high enough never to run out, rate limit off) so both doors
share one process, ledger and release cache, then measures through psycopg 3 and
through httpx against ``/v1/query``:

* cached: one query answered once, then asked again sequentially (p50/p99 latency),
  and by several client threads at once (answers/s);
* uncached: distinct queries (a new WHERE literal each), each planned, charged, run
  on DuckDB and noised (p50/p99 and answers/s from one client).

Loopback only, bounded in requests and seconds; the clients share the 2 cores with the
server, so answers/s are a floor. Not a test: nothing here gates CI.

    .venv/bin/python -m bench.pgwire [--requests 300] [--threads 4] [--seconds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
DPSQL = ROOT / ".venv" / "bin" / "dpsql"
USER, KEY = "bench", "bench-key-0123456789"
HIT_SQL = "SELECT region, COUNT(*) AS n FROM users GROUP BY region"
MISS_SQL = "SELECT model, COUNT(*) AS n FROM prompts WHERE tokens_in > {} GROUP BY model"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _policy(folder: Path, db: Path) -> Path:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{folder / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    text += f'\n[analysts.{USER}]\nkey_sha256 = "{digest}"\nrole = "analyst"\n'
    path = folder / "policy.toml"
    path.write_text(text)
    return path


def _ready(log: Path, http_port: int) -> bool:
    if "PostgreSQL door" not in log.read_text():
        return False
    try:
        return httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"p50 {statistics.median(ordered) * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms"


def _timed(ask: Callable[[str], object], sqls: list[str]) -> list[float]:
    out = []
    for sql in sqls:
        start = time.perf_counter()
        ask(sql)
        out.append(time.perf_counter() - start)
    return out


def _throughput(make: Callable[[], Callable[[str], object]], threads: int, seconds: float) -> float:
    done = [0] * threads
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        ask = make()
        while time.monotonic() < stop and done[i] < 1_000_000:
            ask(HIT_SQL)
            done[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    start = time.monotonic()
    for t in pool:
        t.start()
    for t in pool:
        t.join(seconds + 60)
    return sum(done) / (time.monotonic() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="sequential queries per case")
    parser.add_argument("--threads", type=int, default=4, help="clients for answers/s")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--people", type=int, default=5000)
    parser.add_argument("--prompts", type=int, default=100000)
    args = parser.parse_args()

    from sample_data.generate import generate

    folder = Path(tempfile.mkdtemp(prefix="dpsql-bench-pg-"))
    db = generate(folder / "usage.duckdb", people=args.people, prompts=args.prompts, seed=7)
    policy = _policy(folder, db)
    http_port, pg_port = _free_port(), _free_port()
    log = folder / "serve.log"
    proc = subprocess.Popen(
        [str(DPSQL), "serve", "--policy", str(policy), "--port", str(http_port),
         "--pg-port", str(pg_port)],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env={**os.environ, "DPSQL_RATE_LIMIT": "off", "DPSQL_LOG_LEVEL": "WARNING"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _ready(log, http_port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"dpsql serve did not start:\n{log.read_text()}")
            time.sleep(0.2)
        dsn = f"host=127.0.0.1 port={pg_port} dbname=dpsql user={USER} password={KEY}"
        url = f"http://127.0.0.1:{http_port}/v1/query"
        headers = {"Authorization": f"Bearer {KEY}"}
        literals = count(1)

        def pg_client() -> Callable[[str], object]:
            conn = psycopg.connect(dsn, autocommit=True)
            return lambda sql: conn.execute(sql).fetchall()

        def http_client() -> Callable[[str], object]:
            client = httpx.Client(timeout=60)

            def ask(sql: str) -> object:
                response = client.post(url, headers=headers, json={"sql": sql, "dialect": "postgres"})
                response.raise_for_status()
                return response.json()

            return ask

        print(f"dpsql bench: PG door vs HTTP /v1/query, {args.people} people, "
              f"{args.prompts} prompts, {os.cpu_count()} cores (clients share them)")
        for door, make in (("psycopg", pg_client), ("HTTP", http_client)):
            ask = make()
            ask(HIT_SQL)  # paid once (the first door), then a cache hit
            hits = _timed(ask, [HIT_SQL] * args.requests)
            misses = _timed(ask, [MISS_SQL.format(next(literals)) for _ in range(args.requests // 3)])
            rate = _throughput(make, args.threads, args.seconds)
            print(f"{door:8s} cached   {_percentiles(hits)}   {rate:8.0f} answers/s "
                  f"({args.threads} clients)")
            print(f"{door:8s} uncached {_percentiles(misses)}   {len(misses) / sum(misses):8.0f} "
                  "answers/s (1 client)")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
