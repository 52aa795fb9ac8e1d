"""Latency of the Trino door next to POST /v1/query (issue 14), on loopback over HTTPS.

Starts `dpsql serve --tls-cert/--tls-key` (one worker, rate limit off, a private ledger
in a temporary folder, a self-signed certificate made with the openssl CLI) on a
generated dataset, then times from one sequential client:

* cached: the same GROUP BY query again and again (a replay: no charge, no DuckDB run);
* uncached: distinct queries (a new WHERE literal each), each planned, charged, run and
  noised;

through the `trino` DBAPI client (POST /v1/statement; one connection, as a BI tool
keeps) and through httpx on /v1/query (one keep-alive client). Prints p50/p99 in ms.
Not part of any test run:

    .venv/bin/python -m bench.trino_latency [--runs 200] [--people 2000 --prompts 20000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "bench-trino-key-0123456789abcdef"
SQL = "SELECT region, COUNT(*) AS n, AVG(age) AS a FROM users WHERE age > {k} GROUP BY region"


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


def _certificate(folder: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        sys.exit("the openssl CLI is needed (apt-get install openssl)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return (
        ordered[len(ordered) // 2] * 1000,
        ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000,
    )


def _time(call: Callable[[str], object], sqls: list[str]) -> list[float]:
    out = []
    for sql in sqls:
        start = time.perf_counter()
        call(sql)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--prompts", type=int, default=20000)
    args = parser.parse_args()
    import trino
    from trino.auth import BasicAuthentication

    from sample_data.generate import generate

    # requests would prefer REQUESTS_CA_BUNDLE over the client's own `verify`.
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    folder = Path(tempfile.mkdtemp(prefix="dpsql-trino-bench-"))
    db = generate(folder / "usage.duckdb", people=args.people, prompts=args.prompts, seed=7)
    policy = _policy(folder, db)
    cert, key = _certificate(folder)
    port = _free_port()
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("dpsql")), "serve", "--policy", str(policy),
         "--port", str(port), "--tls-cert", str(cert), "--tls-key", str(key)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "DPSQL_RATE_LIMIT": "off"},
    )  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    http = httpx.Client(
        base_url=url,
        verify=ssl.create_default_context(cafile=str(cert)),
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                sys.exit("the server did not start")
            time.sleep(0.2)
        cursor = trino.dbapi.connect(
            host="127.0.0.1", port=port, user="bench", catalog="dpsql", schema="main",
            http_scheme="https", auth=BasicAuthentication("bench", KEY), verify=str(cert),
        ).cursor()  # fmt: skip

        def via_trino(sql: str) -> object:
            cursor.execute(sql)
            return cursor.fetchall()

        def via_rest(sql: str) -> object:
            r = http.post("/v1/query", json={"sql": sql, "dialect": "trino"})
            r.raise_for_status()
            return r.json()

        n = args.runs
        results = {}
        for label, call, offset in (("trino client", via_trino, 0), ("POST /v1/query", via_rest, n)):
            cached_sql = SQL.format(k=17 + offset)
            call(cached_sql)  # the one charge; every later run replays it
            results[label, "cached"] = _percentiles(_time(call, [cached_sql] * n))
            fresh = [SQL.format(k=1000 + offset + i) for i in range(n)]
            results[label, "uncached"] = _percentiles(_time(call, fresh))
    finally:
        http.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{n} sequential queries each, HTTPS on 127.0.0.1, one worker")
    print(f"{'door':<16} {'query':<9} {'p50 ms':>8} {'p99 ms':>8}")
    for (label, kind), (p50, p99) in results.items():
        print(f"{label:<16} {kind:<9} {p50:>8.1f} {p99:>8.1f}")


if __name__ == "__main__":
    main()
