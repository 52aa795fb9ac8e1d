"""Shared real-data fixtures: the PUMS sample and a small generated demo database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from proxy.engine import Engine
from proxy.policy import Policy, parse_policy
from sample_data.generate import generate
from tests.policies import fixed_caps

ROOT = Path(__file__).resolve().parents[2]
PUMS_CSV = ROOT / "sample_data" / "pums" / "PUMS_pid.csv"


def pums_policy(tmp: Path, *, cap: float = 1000.0, mechanism: str = "gaussian") -> Policy:
    text = (ROOT / "sample_data" / "pums" / "policy.toml").read_text()
    text = text.replace('"PUMS_pid.csv"', f'"{ROOT / "sample_data" / "pums" / "PUMS_pid.csv"}"')
    text = text.replace('"../../state/pums-ledger.sqlite"', f'"{tmp / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 10.0", f"epsilon_cap = {cap}")
    text = text.replace('mechanism = "gaussian"', f'mechanism = "{mechanism}"')
    return parse_policy(text, base_dir=tmp)


def demo_policy(tmp: Path, db: Path, *, cap: float = 1000.0) -> Policy:
    text = fixed_caps((ROOT / "sample_data" / "policy.toml").read_text())
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", f"epsilon_cap = {cap}")
    return parse_policy(text, base_dir=tmp)


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-data") / "usage.duckdb"
    return generate(out, people=2000, prompts=20000, seed=11)


@pytest.fixture(scope="module")
def pums_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = Engine(pums_policy(tmp_path_factory.mktemp("pums")))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def demo_engine(tmp_path_factory: pytest.TempPathFactory, demo_db: Path) -> Iterator[Engine]:
    engine = Engine(demo_policy(tmp_path_factory.mktemp("demo"), demo_db))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """300 people and 3,000 prompts (seed 5) under a cap that allows near-exact answers
    (ε in the thousands), for tests that compare answers with the data's own values."""
    tmp = tmp_path_factory.mktemp("small-demo")
    db = generate(tmp / "usage.duckdb", people=300, prompts=3000, seed=5)
    engine = Engine(demo_policy(tmp, db, cap=1e6))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def pums_near_exact(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The PUMS engine with a population cap that allows rho = 1e6 per query (a count's
    noise below 0.01): its answers are compared with ``pums_exact``'s."""
    engine = Engine(pums_policy(tmp_path_factory.mktemp("pums-near-exact"), cap=1e12))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def pums_exact() -> Iterator[duckdb.DuckDBPyConnection]:
    """The PUMS rows in a plain DuckDB (``pums.pums``): SQL's own answers."""
    con = duckdb.connect()
    con.execute("CREATE SCHEMA pums")
    con.execute(f"CREATE TABLE pums.pums AS SELECT * FROM read_csv('{PUMS_CSV}')")
    yield con
    con.close()
