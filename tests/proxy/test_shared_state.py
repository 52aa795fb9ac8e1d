"""The proxy's shared state behind its store interfaces, on SQLite and on PostgreSQL
(``[ledger] url``): the release cache and its single flight across "hosts" (separate
store instances, separate processes), idempotency records, pages and cursors, Trino
answers, and two engines (two hosts) on one PostgreSQL ledger and cache."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pytest

from proxy.cache import ReleaseCache, ReleaseStore
from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.server.store import Cursor, CursorError, ServerStore, SQLiteServerStore, StoredResponse
from proxy.trino.results import ResultStore, SQLiteResultStore
from tests.proxy.conftest import demo_policy

REPO = Path(__file__).resolve().parents[2]
TABLE = pa.table({"region": ["north", "south"], "n": [3, 4]})


@dataclass(frozen=True)
class Backend:
    """Where the state lives; each call opens a new store instance on it (a new "host")."""

    kind: str
    folder: Path
    dsn: str = ""

    def cache(self) -> ReleaseStore:
        if self.kind == "sqlite":
            return ReleaseCache(self.folder / "ledger-cache.sqlite")
        from proxy.cache_postgres import PostgresReleaseCache

        return PostgresReleaseCache(self.dsn)

    def server_store(self) -> ServerStore:
        if self.kind == "sqlite":
            return SQLiteServerStore(self.folder / "ledger-server.sqlite")
        from proxy.server.store_postgres import PostgresServerStore

        return PostgresServerStore(self.dsn)

    def results(self) -> ResultStore:
        if self.kind == "sqlite":
            return SQLiteResultStore(str(self.folder / "ledger-trino.sqlite"))
        from proxy.trino.results_postgres import PostgresResultStore

        return PostgresResultStore(self.dsn)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", tmp_path)
    return Backend("postgres", tmp_path, request.getfixturevalue("pg_database").dsn)


def test_release_cache_round_trip_keeps_the_first_release(backend: Backend):
    a, b = backend.cache(), backend.cache()
    assert a.get("k") is None and not a.has("k")
    a.put("k", 7, TABLE)
    got = b.get("k")
    assert got is not None and got[0] == 7 and got[1].equals(TABLE)
    assert b.has("k")
    b.put("k", 8, pa.table({"region": ["x"], "n": [1]}))  # a second release never replaces
    again = a.get("k")
    assert again is not None and again[0] == 7 and again[1].equals(TABLE)
    a.close()
    b.close()


def test_single_flight_between_two_hosts(backend: Backend):
    a, b = backend.cache(), backend.cache()
    assert a.claim("q1")
    assert not b.claim("q1")  # the other host waits
    assert not a.claim("q1")  # and so does a second caller on the same host
    a.put("q1", 11, TABLE)  # storing the release ends the flight
    assert not b.claim("q1")  # cached now: nothing to fly
    hit = b.get("q1")
    assert hit is not None and hit[0] == 11
    assert a.claim("q2")
    a.finish("q2")  # a failed flight: the key is free again, nothing stored
    a.finish("q2")  # ending it twice is harmless
    assert b.claim("q2") and not a.claim("q2")
    b.finish("q2")
    a.close()
    b.close()


_CLAIM_AND_DIE = """
import os, signal, sys
from tests.proxy.test_shared_state import Backend
from pathlib import Path
cache = Backend(sys.argv[1], Path(sys.argv[2]), sys.argv[3]).cache()
assert cache.claim("orphan")
print("claimed", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_flight_dies_with_the_host_that_held_it(backend: Backend):
    mine = backend.cache()
    died = subprocess.run(
        [sys.executable, "-c", _CLAIM_AND_DIE, backend.kind, str(backend.folder), backend.dsn],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert died.returncode == -9 and "claimed" in died.stdout, died.stderr
    # The server notices the dead client within moments; SQLite checks the owner's pid.
    deadline = time.monotonic() + 10
    while not mine.claim("orphan"):
        assert time.monotonic() < deadline, "the killed host's flight was never released"
        time.sleep(0.05)
    mine.finish("orphan")
    mine.close()


def test_idempotency_records_pages_and_cursors_are_shared(backend: Backend):
    one, two = backend.server_store(), backend.server_store()
    assert one.begin("ana", "k1", "fp", ttl_s=60) == "new"
    assert two.begin("ana", "k1", "fp", ttl_s=60) == "pending"
    assert two.begin("ana", "k1", "other", ttl_s=60) == "mismatch"
    assert two.begin("bob", "k1", "fp", ttl_s=60) == "new"  # keys are per analyst
    answer = StoredResponse(200, "application/json", {"x-a": "1"}, b'{"rows":[]}')
    one.finish("ana", "k1", answer)
    assert two.begin("ana", "k1", "fp", ttl_s=60) == answer
    two.abandon("bob", "k1")
    assert one.begin("bob", "k1", "fp2", ttl_s=60) == "new"
    rid = one.save_result("cache-key", {"sql": "SELECT 1"}, ttl_s=60)
    assert rid == two.save_result("cache-key", {"sql": "SELECT 1"}, ttl_s=60)
    stored = two.result(rid)
    assert stored is not None and stored.cache_key == "cache-key"
    assert stored.request == {"sql": "SELECT 1"}
    assert two.result("nope") is None
    # Every worker and host signs with one secret: a cursor from one opens on the other.
    cursor = Cursor(rid, 1000, 1000, "ana", time.time())
    assert two.open(one.sign(cursor), analyst="ana", ttl_s=60) == cursor
    with pytest.raises(CursorError, match="another API key"):
        two.open(one.sign(cursor), analyst="bob", ttl_s=60)
    one.close()
    two.close()


def test_trino_answers_are_shared(backend: Backend):
    one, two = backend.results(), backend.results()
    cols = [{"name": "n", "type": "bigint"}]
    one.put("q1", "slug", "ana", columns=cols, data=[[1], [2]], warnings=[], update_type=None)
    got = two.get("q1", "slug", "ana")
    assert got is not None and got.data == [[1], [2]] and got.columns == cols
    assert not got.cancelled
    assert two.get("q1", "slug", "bob") is None and two.get("q1", "other", "ana") is None
    assert two.cancel("q1", "slug", "ana") and not two.cancel("q1", "slug", "bob")
    again = one.get("q1", "slug", "ana")
    assert again is not None and again.cancelled
    one.close()
    two.close()


def test_two_engines_share_one_postgres_ledger_and_cache(pg_database, demo_db, tmp_path):
    policy = replace(demo_policy(tmp_path, demo_db, cap=10.0), ledger_url=pg_database.dsn)
    first, second = Engine(policy), Engine(policy)
    try:
        request = QueryRequest(
            "SELECT region, COUNT(*) AS n FROM users GROUP BY region", epsilon=0.5
        )
        paid = first.run(request)
        assert not paid.privacy.cached and paid.privacy.charge_id is not None
        replayed = second.run(replace(request, analyst="other"))
        assert replayed.privacy.cached and replayed.privacy.epsilon == 0.0
        assert replayed.privacy.charge_id == paid.privacy.charge_id
        assert replayed.rows == paid.rows  # the same release, post-processed alike
        kinds = [e.kind for e in second.ledger.history(limit=100)]
        assert kinds.count("charge") == 1 and kinds.count("replay") == 1
        assert first.remaining("users") == second.remaining("users") < 10.0
        assert second.ledger.verify().ok
        # Nothing was written beside the ledger path: the state lives in PostgreSQL.
        assert not any(tmp_path.glob("*.sqlite"))
    finally:
        first.close()
        second.close()


def test_a_lost_database_connection_is_refused_then_reopened(pg_database):
    """The shared state fails closed (``ledger_unavailable``, never a wrong answer) and
    the next call reconnects."""
    import psycopg

    from proxy.cache_postgres import PostgresReleaseCache
    from proxy.errors import DPSQLError

    # The test server trusts 127.0.0.1: the password is ignored, and must not be shown.
    cache = PostgresReleaseCache(pg_database.dsn.replace("dpsql@", "dpsql:hunter2@"))
    cache.put("k", 3, TABLE)
    with psycopg.connect(pg_database.admin_dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'dpsql-cache'"
        )
    with pytest.raises(DPSQLError) as refused:
        cache.get("k")
    assert refused.value.code == "ledger_unavailable"
    assert "hunter2" not in str(refused.value.to_dict())
    hit = cache.get("k")
    assert hit is not None and hit[0] == 3
    cache.close()
