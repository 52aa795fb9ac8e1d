"""Suite 3c: defence in depth. The escapes of the corpus that reach files, the network,
settings or the catalog are sent straight to the execution connection, bypassing every
proxy check; the sandbox (read-only, external access off, locked configuration, no
extension install or load) must stop each one, on a DuckDB-file policy and a CSV policy.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from proxy.engine import Engine
from tests.reliability.escape_corpus import CORPUS, Escape

SANDBOXED = [pytest.param(e, id=e.id) for e in CORPUS if e.sandbox]
# The reasons the sandbox gives; anything else (a missing table, a syntax error) would
# mean the statement failed by luck rather than by the sandbox.
SANDBOX_REASON = re.compile(
    r"file system operations are disabled by configuration"
    r"|the configuration has been locked"
    r"|attached in read-only mode"
    r"|in read-only mode"
    r"|Loading external extensions is disabled",
)
TABLE = {"demo": "users", "pums": "PUMS.PUMS"}
WRITTEN = (
    "/tmp/dpsql-fz-copy.csv",
    "/tmp/dpsql-fz-export",
    "/tmp/dpsql-fz-attach.db",
)


@pytest.fixture(params=["demo", "pums"])
def fz_sandboxed(
    request: pytest.FixtureRequest, fz_demo_engine: Engine, fz_pums_engine: Engine
) -> tuple[str, Engine]:
    return request.param, fz_demo_engine if request.param == "demo" else fz_pums_engine


def _rows(engine: Engine, table: str) -> int:
    return int(engine.executor.evaluate(f"SELECT COUNT(*) FROM {table}")[0][0])


def test_the_corpus_has_enough_sandbox_escapes() -> None:
    assert len(SANDBOXED) >= 30


@pytest.mark.parametrize("escape", SANDBOXED)
def test_sandbox_stops_escape_on_the_raw_connection(
    fz_sandboxed: tuple[str, Engine], escape: Escape
) -> None:
    name, engine = fz_sandboxed
    table = TABLE[name]
    rows = _rows(engine, table)
    with pytest.raises(duckdb.Error) as info:
        engine.executor.evaluate(escape.sql.replace("{t}", table))
    assert SANDBOX_REASON.search(str(info.value)), str(info.value)
    assert _rows(engine, table) == rows
    assert not any(Path(p).exists() for p in WRITTEN)


def test_sandbox_settings_are_in_force(fz_sandboxed: tuple[str, Engine]) -> None:
    _, engine = fz_sandboxed
    settings = dict(
        engine.executor.evaluate(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access',"
            " 'lock_configuration', 'autoinstall_known_extensions', 'autoload_known_extensions',"
            " 'allow_community_extensions', 'access_mode')"
        )
    )
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
        "allow_community_extensions": "false",
        "access_mode": "read_only",
    }


def test_temporary_objects_do_not_outlive_their_call(fz_sandboxed: tuple[str, Engine]) -> None:
    # The temp catalogue stays writable on a read-only database, but every call gets its
    # own cursor, so nothing one call creates is visible to the next (or to a query).
    _, engine = fz_sandboxed
    engine.executor.evaluate("CREATE TEMP TABLE dpsql_fz_tmp AS SELECT 1 AS x")
    with pytest.raises(duckdb.CatalogException):
        engine.executor.evaluate("SELECT * FROM dpsql_fz_tmp")


def test_harmless_reads_still_run_on_the_raw_connection(fz_sandboxed: tuple[str, Engine]) -> None:
    # The sandbox is the second line only: the checker refuses these at the proxy.
    _, engine = fz_sandboxed
    assert engine.executor.evaluate("SELECT 1") == [(1,)]
    assert str(engine.executor.evaluate("SELECT version()")[0][0]).startswith("v")
