"""Real engines for the executor tests: the session's PostgreSQL server (tests/
postgres_server.py, started by tests/conftest.py) and a Spark session in local mode, each
loaded with the same small demo and PUMS data the DuckDB tests use."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from sample_data.export import source, to_parquet, to_postgres
from sample_data.generate import generate
from tests.postgres_server import PgServer
from tests.proxy.conftest import ROOT, demo_policy, pums_policy

CAP = 1e7


def demo_text(tmp: Path, db: Path) -> str:
    text = (ROOT / "sample_data" / "policy.toml").read_text()
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", f"epsilon_cap = {CAP}")
    return text.replace("delta = 1e-6 ", "delta = 1e-4 ")


def pums_text(tmp: Path) -> str:
    pums = ROOT / "sample_data" / "pums"
    text = (pums / "policy.toml").read_text()
    text = text.replace('"PUMS_pid.csv"', f'"{pums / "PUMS_pid.csv"}"')
    text = text.replace('"../../state/pums-ledger.sqlite"', f'"{tmp / "ledger.sqlite"}"')
    return text.replace("epsilon_cap = 10.0", f"epsilon_cap = {CAP}")


def with_database(text: str, database: str) -> str:
    # The section and its sub-tables ([database.csv_types...]) give way to ``database``.
    return re.sub(r"(?ms)^\[database\]\n.*?(?=^\[(?!database\.))", database + "\n\n", text)


@pytest.fixture(scope="session")
def engine_demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(
        tmp_path_factory.mktemp("engines-data") / "usage.duckdb", people=300, prompts=3000, seed=5
    )


@pytest.fixture(scope="session")
def pg_cluster(pg_server_session: PgServer) -> PgServer:
    """The one test server of the session (skipped, with the reason, where there is none)."""
    return pg_server_session


@pytest.fixture(scope="session")
def pg_sources(
    pg_cluster: PgServer, engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The demo and PUMS data loaded into two databases; name -> read-only DSN."""
    tmp = tmp_path_factory.mktemp("pg-load")
    out = {}
    for name, policy in (
        ("demo", demo_policy(tmp, engine_demo_db)),
        ("pums", pums_policy(tmp)),
    ):
        with source(policy) as con:
            to_postgres(con, pg_cluster.replace_database(name))
        out[name] = pg_cluster.grant_reader(name)
    return out


def database_section(kind: str, location: str) -> str:
    if kind == "duckdb":
        return f'[database]\nduckdb = "{location}"'
    if kind == "postgres":
        return f'[database]\nengine = "postgres"\ndsn = "{location}"'
    return f'[database]\nengine = "spark"\nmaster = "local[2]"\nparquet = "{location}"'


@pytest.fixture(scope="session")
def spark_sources(
    engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The demo and PUMS data as Parquet folders; name -> folder."""
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (pip install -e '.[spark]')")
    tmp = tmp_path_factory.mktemp("spark-data")
    out = {}
    for name, policy in (
        ("demo", demo_policy(tmp, engine_demo_db)),
        ("pums", pums_policy(tmp)),
    ):
        with source(policy) as con:
            to_parquet(con, tmp / name)
        out[name] = tmp / name
    return out
