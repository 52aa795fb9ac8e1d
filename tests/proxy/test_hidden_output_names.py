"""An analyst's output name never stands for a column dpsql carries hidden beside the
answer (an adversarial review, 2026-12-06).

The outer layer appends hidden columns to the analyst's items: ``__row`` (the released
row each output row comes from), ``__clip_cut``/``__clip_people`` (the clipping
estimate) and ``__ci<i>_s``/``__ci<i>_n`` (an AVG's released parts), and the answer
found them by name, or skipped every item aliased ``__…``. So an item named like one of
them replaced the DP clipping estimate and its words with the analyst's own numbers
(an infinite one escaped as an OverflowError after the charge), escaped at planning as
a ValueError or KeyError, and an item named ``__timestamp`` (Superset's time column)
moved every later column's interval one place: a noisy ratio was shown ± 0.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest
from tests.proxy.conftest import demo_policy


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, demo_db: Path):
    root = tmp_path_factory.mktemp("hidden-names")
    db = root / "copy.duckdb"
    shutil.copy(demo_db, db)
    e = Engine(demo_policy(root, db))
    yield e
    e.close()


def _charges(engine: Engine) -> int:
    return len([e for e in engine.ledger.history() if e.kind == "charge"])


@pytest.mark.parametrize(
    "item",
    [
        "COUNT(*) * 1e308 * 10 AS __clip_cut",
        "'nan'::DOUBLE AS __clip_cut",
        'COUNT(*) AS "__CLIP_PEOPLE"',
        "COUNT(*) AS __row",
        "COUNT(*) AS __ci0_s",
        "COUNT(*) AS __ci2_N",
    ],
)
def test_a_hidden_columns_name_is_refused_before_the_charge(engine: Engine, item: str) -> None:
    before = _charges(engine)
    with pytest.raises(DPSQLError) as caught:
        engine.run(
            QueryRequest(
                f"SELECT model, AVG(tokens_in) AS a, {item} FROM prompts GROUP BY model",
                epsilon=0.7,
            )
        )
    assert caught.value.code == "unsupported_sql"
    assert _charges(engine) == before


def test_a_name_that_only_starts_like_a_hidden_one_is_answered(engine: Engine) -> None:
    r = engine.run(
        QueryRequest(
            "SELECT model, COUNT(*) AS __cix, COUNT(*) * 2 AS __row_count FROM prompts "
            "GROUP BY model",
            epsilon=0.7,
        )
    )
    assert r.columns == ("model", "__cix", "__row_count")
    assert all(w[1] is not None and w[2] is not None for w in r.intervals)


def test_a_double_underscore_name_keeps_the_intervals_in_their_columns(engine: Engine) -> None:
    """Superset names its time column ``__timestamp``: the ratio beside it keeps the
    interval it has under any other name (it was ± 0)."""
    ratio = "SUM(tokens_in) / COUNT(*) AS r, MEDIAN(latency_ms) AS m"
    plain = engine.run(
        QueryRequest(f"SELECT model AS k, {ratio} FROM prompts GROUP BY model", epsilon=0.9)
    )
    named = engine.run(
        QueryRequest(
            f"SELECT model AS __timestamp, {ratio} FROM prompts GROUP BY model", epsilon=0.9
        )
    )
    assert named.rows == plain.rows
    assert named.intervals == plain.intervals
    assert all(w[1] is not None and w[1] > 0 for w in named.intervals)
    # the median's note names the median's column
    assert [q["name"] for q in named.privacy.quantiles] == ["m"]
