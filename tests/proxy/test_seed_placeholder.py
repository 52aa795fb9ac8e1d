"""The L0 seed's placeholder is found outside quotes (proxy/rewrite/l0.py `takes_seed`).

A ``?`` in a string literal made planning pass a parameter the core did not take: the
query was refused as a binder error, or, when the catalog typed its keys and no DESCRIBE
ran first, it failed after the charge (a probe's side note, 2026-12-02)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed
from sample_data.generate import generate
from tests.policies import fixed_caps

REPO = Path(__file__).resolve().parents[2]


def test_takes_seed() -> None:
    assert takes_seed("SELECT HASH(a, ?) FROM t")
    assert takes_seed("SELECT HASH(a, ?) FROM t WHERE m = 'a?b'")
    assert not takes_seed("SELECT COUNT(*) FROM t WHERE m = 'a?b'")
    assert not takes_seed("SELECT 'it''s ?' AS \"col?\" FROM t")
    assert not takes_seed("SELECT 1")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("demo")
    db = generate(tmp / "usage.duckdb", people=200, prompts=2000, seed=5)
    text = fixed_caps((REPO / "sample_data" / "policy.toml").read_text())
    text = text.replace('duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = text.replace('path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"')
    text = text.replace("epsilon_cap = 4.0", "epsilon_cap = 1000000.0")
    engine = Engine(parse_policy(text, base_dir=tmp))
    yield engine
    engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n FROM prompts WHERE model LIKE '%?%'",
        "SELECT COUNT(*) AS n FROM prompts WHERE model = 'a?b'",
        "SELECT model, COUNT(*) AS n FROM prompts WHERE model <> 'x?' GROUP BY model",
        "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n FROM prompts "
        "WHERE model <> 'it''s ?' GROUP BY d",
    ],
)
def test_question_marks_in_literals_are_answered(demo: Engine, sql: str) -> None:
    result = demo.run(QueryRequest(sql, epsilon=1.0))
    assert result.columns
