"""Fixtures every suite may use: one real PostgreSQL server per test session, and a check
of every SQL text the engine prints in the test process.

``pg_server_session`` starts it on first use (initdb + pg_ctl in a temp dir, 127.0.0.1 only;
see tests/postgres_server.py) and stops it at the end of the session; tests that need it are
skipped with the reason when the PostgreSQL binaries or psycopg are missing (CI
installs both: .ci/run, ``make install``). ``pg_database`` gives each test a fresh,
empty database owned by the non-superuser role ``dpsql``.

``render_check`` (autouse) wraps the printers of the core (DuckDB's, the rows-first L0
cut's, PostgreSQL's and Spark's) and of the outer layer: a test fails if any text
printed while it ran groups its operators otherwise than the tree it was printed from
(tests/render_check.py).

Under pytest-xdist (``make test`` runs ``-n 2``) the tests are handed out file by file
(:func:`pytest_xdist_make_scheduler`): each file runs whole on one worker in its own order,
as in a single process, and its module fixtures start once. The files that start Spark
go to one worker together, so one JVM starts, and the first Spark session of its process
is dpsql's own (tests/engines/test_spark.py reads the heap the first session gave the
JVM); a test outside them that starts Spark fails. Session fixtures run once per worker:
each worker has its own PostgreSQL server (a free port, its own temp dir) and its own
``tmp_path_factory`` root.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import pytest

from tests import postgres_server
from tests.render_check import RenderCheck

_FAILED: list[str] = []
_RENDERS = RenderCheck()

# The test files (in tests/engines) that start a Spark JVM: one worker runs them all, in
# the collection order (the order of a single process).
SPARK_FILES = (
    "test_clamped_counts.py",
    "test_neighbours_engines.py",
    "test_spark.py",
    "test_spark_per_person_forms.py",
)
_SPARK_BEFORE = pytest.StashKey[bool]()


def worker_unit(nodeid: str) -> str:
    """The unit one xdist worker runs whole: the test's file, or "spark"."""
    path = PurePosixPath(nodeid.split("::", 1)[0])
    if path.parent.name == "engines" and path.name in SPARK_FILES:
        return "spark"
    return str(path)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook (the dev extra installs it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's --dist loadfile with the Spark files as one unit. (Grouping by the
    xdist_group mark, --dist loadgroup, is silently lost with pytest 9.2: it rewrites
    a node id field that pytest no longer reads, pytest-xdist issue 1386.)"""
    if config.getvalue("dist") == "each":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_unit(nodeid)

    return FileGroupScheduling(config, log)


def _spark_running() -> bool:
    context = sys.modules.get("pyspark.core.context")
    return context is not None and context.SparkContext._active_spark_context is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_SPARK_BEFORE] = _spark_running()
    return (yield)


@pytest.fixture(autouse=True)
def _spark_in_its_files(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test outside SPARK_FILES that starts a Spark JVM (in its fixtures too)."""
    yield
    node = request.node
    if not node.stash.get(_SPARK_BEFORE, True) and _spark_running():
        assert worker_unit(node.nodeid) == "spark", (
            f"{node.nodeid} started Spark: add its file to SPARK_FILES in tests/conftest.py"
        )


@pytest.fixture(scope="session", autouse=True)
def _printers_checked() -> Iterator[None]:
    from proxy import outer
    from proxy.engines import render, rows_first_cut
    from proxy.rewrite import cross_person

    patched = [
        (outer, "owned_duckdb_sql"),
        (cross_person, "owned_duckdb_sql"),
        (rows_first_cut, "owned_duckdb_sql"),
        (render, "printed"),
    ]
    originals = [getattr(module, name) for module, name in patched]
    for (module, name), original in zip(patched, originals, strict=True):
        wrapped = _RENDERS.wrap_dialect(original) if name == "printed" else _RENDERS.wrap(original)
        setattr(module, name, wrapped)
    try:
        yield
    finally:
        for (module, name), original in zip(patched, originals, strict=True):
            setattr(module, name, original)


@pytest.fixture(autouse=True)
def render_check(_printers_checked: None) -> Iterator[RenderCheck]:
    """Fails the test if a core or outer-layer text printed during it regroups the
    operators of its tree."""
    _RENDERS.regrouped.clear()
    yield _RENDERS
    found = list(_RENDERS.regrouped)
    _RENDERS.regrouped.clear()
    assert not found, f"printed SQL groups its operators otherwise than its tree: {found[:3]}"


@dataclass(frozen=True)
class PgDatabase:
    server: postgres_server.PgServer
    name: str

    @property
    def dsn(self) -> str:
        """For the stores: the non-superuser role that owns the database."""
        return self.server.dsn(self.name, postgres_server.APP_ROLE)

    @property
    def admin_dsn(self) -> str:
        """A superuser in the same database (to tamper with the store in tests)."""
        return self.server.dsn(self.name)


@pytest.fixture(scope="session")
def pg_server_session() -> Iterator[postgres_server.PgServer]:
    if _FAILED:
        pytest.skip(_FAILED[0])
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _FAILED.append("psycopg is not installed (pip install -e '.[postgres]')")
        pytest.skip(_FAILED[0])
    try:
        server = postgres_server.start(durable=os.environ.get("DPSQL_TEST_PG_FSYNC") == "1")
    except postgres_server.PgUnavailable as exc:
        _FAILED.append(f"no PostgreSQL for the tests: {exc}")
        pytest.skip(_FAILED[0])
    print(f"\nPostgreSQL test server started in {server.start_s:.2f} s on port {server.port}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server_session: postgres_server.PgServer) -> PgDatabase:
    return PgDatabase(pg_server_session, pg_server_session.create_database())
