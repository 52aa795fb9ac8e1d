"""The doors' latency on a cached query next to POST /v1/query (issue 18, last goal row).

One `dpsql serve` (bench/door_server.py: HTTPS and the PostgreSQL door with TLS, one
worker, the demo data) answers the same GROUP BY once (the one charge), then the same
release again and again through each path, from one sequential client:

* ``/v1/query``: httpx POST, JSON, one keep-alive connection (the reference);
* ``trino client``: the `trino` DBAPI cursor's execute + fetchall (its first POST
  /v1/statement and the nextUri pages it follows);
* ``trino client, no proxy lookup``: the same client on a ``requests`` session with
  ``trust_env = False``: requests then skips looking up proxies (and CA bundles, netrc)
  in the environment on every request, which is most of what this client adds to the
  same exchange by httpx (a static server replaying dpsql's bytes, 2026-12-06: 0.26 of
  0.35 ms);
* ``trino bare HTTP``: httpx POST /v1/statement, then GET on nextUri until there is none;
* ``psycopg simple``: psycopg 3's ``execute`` without parameters (simple query protocol);
* ``psycopg extended``: ``execute`` with a bound parameter (Parse/Bind/Describe/Execute/
  Sync), the same query once bound;
* ``psycopg prepared``: the same, prepared once by psycopg, then Bind/Execute/Sync.

The paths are timed in interleaved rounds (each round runs every path ``--per-round``
times, in a rotating order), so load on the shared machine falls on all of them alike; medians over all
rounds, and each door's ratio to ``/v1/query``. ``--before REV`` also serves the
repository at commit REV (exported with git archive, run with this venv) on the same
data and reports both, interleaved too. Loopback only, bounded in requests. Not a test:

    .venv/bin/python -m bench.doors [--rounds 300 --per-round 2] [--before REV] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import ssl
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench import door_server
from bench.door_server import KEY, USER, DoorServer

SQL = "SELECT region, COUNT(*) AS n, AVG(age) AS a FROM users WHERE age > 17 GROUP BY region"
SQL_PARAM = "SELECT region, COUNT(*) AS n, AVG(age) AS a FROM users WHERE age > %s GROUP BY region"
PATHS = (
    "/v1/query",
    "trino client",
    "trino client, no proxy lookup",
    "trino bare HTTP",
    "psycopg simple",
    "psycopg extended",
    "psycopg prepared",
)
REFERENCE = "/v1/query"


def _clients(server: DoorServer) -> tuple[dict[str, Callable[[], object]], Callable[[], None]]:
    """One ready-to-call query per path, all on kept-open connections."""
    import psycopg
    import trino
    from trino.auth import BasicAuthentication

    cert = str(server.cert)
    http = httpx.Client(
        base_url=server.url,
        verify=ssl.create_default_context(cafile=cert),
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    port = int(server.url.rsplit(":", 1)[1])
    cursor = trino.dbapi.connect(
        host="127.0.0.1", port=port, user=USER, catalog="dpsql", schema="main",
        http_scheme="https", auth=BasicAuthentication(USER, KEY), verify=cert,
    ).cursor()  # fmt: skip
    import requests

    plain = requests.Session()
    plain.trust_env = False  # no proxy, CA bundle or netrc lookups in the environment
    plain.verify = cert
    cursor_plain = trino.dbapi.connect(
        host="127.0.0.1", port=port, user=USER, catalog="dpsql", schema="main",
        http_scheme="https", auth=BasicAuthentication(USER, KEY), http_session=plain,
    ).cursor()  # fmt: skip
    pg_args: dict[str, Any] = dict(
        host="127.0.0.1", port=server.pg_port, dbname="dpsql", user=USER, password=KEY,
        sslmode="require", autocommit=True,
    )  # fmt: skip
    # psycopg prepares a query it has run prepare_threshold times: off for the simple
    # and extended paths, so each call is one Query, or Parse/Bind/Describe/Execute/Sync.
    pg = psycopg.connect(**pg_args, prepare_threshold=None)
    pg_prepared = psycopg.connect(**pg_args)
    trino_headers = {"X-Trino-User": USER, "X-Trino-Catalog": "dpsql", "X-Trino-Schema": "main"}

    def rest() -> object:
        r = http.post("/v1/query", json={"sql": SQL, "dialect": "trino"})
        r.raise_for_status()
        return r.json()["rows"]

    def trino_client() -> object:
        cursor.execute(SQL)
        return cursor.fetchall()

    def trino_client_plain() -> object:
        cursor_plain.execute(SQL)
        return cursor_plain.fetchall()

    def trino_bare() -> object:
        doc = http.post("/v1/statement", content=SQL, headers=trino_headers).json()
        rows = list(doc.get("data") or [])
        while doc.get("nextUri"):
            doc = http.get(doc["nextUri"], headers=trino_headers).json()
            rows += doc.get("data") or []
        if doc.get("error"):
            raise RuntimeError(doc["error"]["message"])
        return rows

    def pg_simple() -> object:
        return pg.execute(SQL).fetchall()

    def pg_extended() -> object:
        return pg.execute(SQL_PARAM, (17,)).fetchall()

    def pg_prepared_() -> object:  # Bind/Execute/Sync of a statement parsed once
        return pg_prepared.execute(SQL_PARAM, (17,), prepare=True).fetchall()

    def close() -> None:
        http.close()
        plain.close()
        pg.close()
        pg_prepared.close()

    calls = {
        "/v1/query": rest,
        "trino client": trino_client,
        "trino client, no proxy lookup": trino_client_plain,
        "trino bare HTTP": trino_bare,
        "psycopg simple": pg_simple,
        "psycopg extended": pg_extended,
        "psycopg prepared": pg_prepared_,
    }
    return calls, close


def measure(servers: dict[str, DoorServer], rounds: int, per_round: int) -> dict[str, Any]:
    """Median ms per (server, path) and each path's ratio to /v1/query on its server."""
    clients = {label: _clients(server) for label, server in servers.items()}
    samples: dict[tuple[str, str], list[float]] = {
        (label, path): [] for label in servers for path in PATHS
    }
    try:
        for label, (calls, _) in clients.items():
            for path in PATHS:  # the first pays the one charge; then every call replays
                answer = calls[path]()
                if not answer:
                    raise SystemExit(f"{label} {path}: no rows")
        order = [(label, path) for label in servers for path in PATHS]
        for i in range(rounds):
            # A rotating order: no path always follows the same one.
            for label, path in order[i % len(order) :] + order[: i % len(order)]:
                call = clients[label][0][path]
                for _ in range(per_round):
                    start = time.perf_counter()
                    call()
                    samples[label, path].append(time.perf_counter() - start)
    finally:
        for _, close in clients.values():
            close()
    out: dict[str, Any] = {"rounds": rounds, "per_round": per_round, "servers": {}}
    for label in servers:
        medians = {p: statistics.median(samples[label, p]) * 1000 for p in PATHS}
        p99 = {
            p: sorted(samples[label, p])[int(0.99 * (len(samples[label, p]) - 1))] * 1000
            for p in PATHS
        }
        out["servers"][label] = {
            p: {"p50_ms": medians[p], "p99_ms": p99[p], "ratio": medians[p] / medians[REFERENCE]}
            for p in PATHS
        }
    return out


def run(
    *, rounds: int, per_round: int, before: str | None, people: int, prompts: int
) -> dict[str, Any]:
    from sample_data.generate import generate

    # requests (under the trino client) would prefer these over the client's `verify`.
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    folder = Path(tempfile.mkdtemp(prefix="dpsql-bench-doors-"))
    servers: dict[str, DoorServer] = {}
    try:
        db = generate(folder / "usage.duckdb", people=people, prompts=prompts, seed=7)
        cert, key = door_server.certificate(folder)
        sources: dict[str, Path | None] = {}
        if before is not None:
            sources[f"before ({before})"] = door_server.export_commit(before, folder / "before")
        sources["after" if before is not None else "now"] = None
        for i, (label, source) in enumerate(sources.items()):
            state = folder / f"state{i}"
            state.mkdir()
            policy = door_server.bench_policy(state, db)
            servers[label] = door_server.start(
                policy, cert, key, state / "serve.log", source=source
            )
        result = measure(servers, rounds, per_round)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    result.update(people=people, prompts=prompts, sql=SQL)
    return result


def table(result: dict[str, Any]) -> str:
    """Markdown: one row per path, p50 and ratio per server."""
    labels = list(result["servers"])
    head = ["path"] + [f"{x} {c}" for x in labels for c in ("p50 ms", "p99 ms", "/ /v1/query")]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for path in PATHS:
        if any(path not in result["servers"][label] for label in labels):
            continue  # (a path added since these figures were measured)
        cells = [path]
        for label in labels:
            m = result["servers"][label][path]
            cells += [f"{m['p50_ms']:.2f}", f"{m['p99_ms']:.2f}", f"{m['ratio']:.2f}×"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--per-round", type=int, default=2)
    parser.add_argument("--before", help="also serve this commit (e.g. main) and compare")
    parser.add_argument("--people", type=int, default=5000)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    result = run(
        rounds=args.rounds,
        per_round=args.per_round,
        before=args.before,
        people=args.people,
        prompts=args.prompts,
    )
    print(
        f"cached query, HTTPS / TLS on 127.0.0.1, one worker, one sequential client; "
        f"{args.rounds} interleaved rounds x {args.per_round} calls per path"
    )
    print(table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
