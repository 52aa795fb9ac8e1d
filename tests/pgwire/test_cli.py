"""`dpsql serve --pg-port` runs both doors over one ledger and cache; `dpsql keys create`
prints a SCRAM verifier the PostgreSQL door accepts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from proxy.pgwire.auth import ScramVerifier
from proxy.policy import parse_policy
from tests.pgwire.conftest import ANA, pg_policy
from tests.server.conftest import DPSQL, auth, free_port

psycopg = pytest.importorskip("psycopg", reason="the pg extra (psycopg) is not installed")


def test_serve_with_pg_port_shares_ledger_and_cache(tmp_path: Path, pg_dataset: Path) -> None:
    policy = pg_policy(tmp_path, pg_dataset, cap=100.0)
    http_port, pg_port = free_port(), free_port()
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        [
            str(DPSQL),
            "serve",
            "--policy",
            str(policy),
            "--port",
            str(http_port),
            "--pg-port",
            str(pg_port),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "DPSQL_RATE_LIMIT": "off"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while "PostgreSQL door" not in log.read_text() or '"started"' not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        sql = "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"
        dsn = f"host=127.0.0.1 port={pg_port} dbname=dpsql user={ANA[0]} password={ANA[1]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            over_pg = conn.execute(sql).fetchall()
        answer = httpx.post(
            f"http://127.0.0.1:{http_port}/v1/query",
            headers=auth("ana"),
            json={"sql": sql, "dialect": "postgres"},
            timeout=60,
        ).json()
        assert answer["privacy"]["cached"] is True  # paid once, through the PG door
        assert [tuple(r) for r in answer["rows"]] == over_pg
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_keys_create_prints_a_scram_verifier() -> None:
    out = subprocess.run(
        [str(DPSQL), "keys", "create", "carol"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    lines = out.split("Add to the policy:\n", 1)[1]
    verifier = re.search(r'scram_sha256 = "([^"]+)"', lines)
    assert verifier is not None
    parsed = ScramVerifier.parse(verifier.group(1))
    assert parsed.iterations == 4096 and len(parsed.stored_key) == 32
    text = "[ledger]\npath = 'l.sqlite'\n[database]\nduckdb = 'x.duckdb'\n" + lines
    assert parse_policy(text, base_dir=Path("/tmp")).analysts[0].scram_sha256 == verifier.group(1)
