"""HTTP service throughput and latency on loopback (DESIGN §10, issue 4).

Starts `dpsql serve` on the demo data (a private copy of the policy with its own ledger
in a temporary folder, rate limit off) with 1 and then 2 workers, and measures:

* cache-hit latency p50/p99 from one sequential client (unloaded), and cache-hit
  requests/s from several client processes on keep-alive connections;
* cache-miss requests/s: distinct queries, each planned, charged, run on DuckDB and
  noised.

The load generator talks to 127.0.0.1 only and is bounded in both requests and seconds.
It runs on the same 2 cores as the server, so requests/s are a floor. Nothing here
gates CI.

    .venv/bin/python bench/http.py [--seconds 5] [--clients 4]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _fix_path() -> None:
    """This file is named http.py: keep its folder off sys.path so that the standard
    library's ``http`` (used by httpx) is the one imported; httpx is imported late."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


_fix_path()

KEY = "bench-key-0123456789"
HIT_SQL = "SELECT region, COUNT(*) AS n FROM users GROUP BY region"
MAX_REQUESTS = 200_000  # per client process, on top of the time bound


def _policy(folder: Path, db: Path) -> Path:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{folder / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    text += f'\n[analysts.bench]\nkey_sha256 = "{digest}"\nrole = "analyst"\n'
    path = folder / "policy.toml"
    path.write_text(text)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(policy: Path, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = _free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("dpsql")), "serve", "--policy", str(policy),
         "--port", str(port), "--workers", str(workers), "--rate-limit", "off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "DPSQL_LOG_LEVEL": "WARNING"},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    _stop(proc)
    raise RuntimeError("server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _client(url: str, bodies: list[dict[str, Any]], seconds: float, start: Any, out: Any) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {KEY}"}
    latencies: list[float] = []
    errors = 0
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        start.wait(60)
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline and i < min(MAX_REQUESTS, len(bodies)):
            t0 = time.perf_counter()
            r = c.post("/v1/query", json=bodies[i])
            latencies.append(time.perf_counter() - t0)
            errors += r.status_code != 200
            i += 1
    out.put((latencies, errors))


def _load(url: str, bodies_per_client: list[list[dict[str, Any]]], seconds: float) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(url, b, seconds, start, out)) for b in bodies_per_client]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every client import httpx and connect
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join(timeout=30)
    lat = sorted(x for r in results for x in r[0])
    errors = sum(r[1] for r in results)
    return {
        "requests": len(lat),
        "errors": errors,
        "rps": len(lat) / wall,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan"),
    }


_WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = '%s'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
"""


def _wrk(url: str, body: dict[str, Any], seconds: float, connections: int) -> dict[str, float]:
    """Cache-hit load from wrk (one thread; it is far cheaper per request than Python)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(_WRK_SCRIPT % (json.dumps(body), KEY))
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency",
             "-s", f.name, url + "/v1/query"],
            capture_output=True, text=True, timeout=seconds + 60, check=True,
        ).stdout
    finally:
        os.unlink(f.name)

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m is None:
            return float("nan")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return {
        "requests": int(total.group(1)) if total else 0,
        "errors": int(bad.group(1)) if bad else 0,
        "rps": float(rps.group(1)) if rps else float("nan"),
        "p50_ms": ms("50"),
        "p99_ms": ms("99"),
    }


def _miss_bodies(client: int, n: int, workers: int) -> list[dict[str, Any]]:
    # Distinct plans: a different filter constant and ε per request, never seen before.
    return [
        {"sql": f"SELECT plan, COUNT(*) AS n, AVG(latency_ms) AS ms FROM prompts "
                f"JOIN users USING (user_id) WHERE tokens_in > {client * 100000 + i} "
                f"GROUP BY plan", "epsilon": 0.1 + 1e-7 * workers}
        for i in range(n)
    ]


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--sequential", type=int, default=2000, help="requests for p50/p99")
    args = parser.parse_args()
    db = ROOT / "sample_data" / "usage.duckdb"
    if not db.exists():
        from sample_data.generate import generate

        generate(db, people=5000, prompts=100000, seed=7)
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        policy = _policy(Path(tmp), db)
        for workers in (1, 2):
            proc, url = _start(policy, workers)
            try:
                hit = {"sql": HIT_SQL, "epsilon": 0.5}
                with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as c:
                    assert c.post("/v1/query", json=hit).status_code == 200  # warm the cache
                seq = _load(url, [[hit] * args.sequential], args.seconds * 4)
                par = _load(url, [[hit] * MAX_REQUESTS] * args.clients, args.seconds)
                wrk = _wrk(url, hit, args.seconds, args.clients) if shutil.which("wrk") else None
                miss = _load(
                    url,
                    [_miss_bodies(k, 5000, workers) for k in range(args.clients)],
                    args.seconds,
                )
            finally:
                _stop(proc)
            report[f"workers={workers}"] = {
                "cache_hit_sequential": seq,
                f"cache_hit_{args.clients}_clients": par,
                f"cache_miss_{args.clients}_clients": miss,
                f"cache_hit_wrk_{args.clients}_connections": wrk,
            }
            print(f"workers={workers}", file=sys.stderr)
            print(f"  cache hit, 1 client : p50 {seq['p50_ms']:.2f} ms  p99 {seq['p99_ms']:.2f} ms"
                  f"  {seq['rps']:.0f} req/s", file=sys.stderr)
            print(f"  cache hit, {args.clients} clients: p50 {par['p50_ms']:.2f} ms  "
                  f"p99 {par['p99_ms']:.2f} ms  {par['rps']:.0f} req/s  errors {par['errors']}",
                  file=sys.stderr)
            if wrk is not None:
                print(f"  cache hit, wrk {args.clients} conns: p50 {wrk['p50_ms']:.2f} ms  "
                      f"p99 {wrk['p99_ms']:.2f} ms  {wrk['rps']:.0f} req/s  errors {wrk['errors']}",
                      file=sys.stderr)
            print(f"  cache miss, {args.clients} clients: p50 {miss['p50_ms']:.1f} ms  "
                  f"{miss['rps']:.0f} req/s  errors {miss['errors']}", file=sys.stderr)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
