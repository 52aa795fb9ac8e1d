"""Review 3: what ``Engine.run_cached`` (the cache-hit door's engine call) may answer.
It keeps a repeat's result by (release, charge, budget token); every request it answers
must get the answer :meth:`Engine.run` would give that request, not another request's
post-processing of the same release."""

from __future__ import annotations

from dataclasses import replace

from proxy.engine import Engine
from proxy.request import QueryRequest

BASE = "SELECT region, COUNT(*) AS n FROM users WHERE age > 40 GROUP BY region"


def _held(engine: Engine, request: QueryRequest) -> None:
    """The release paid and memoised, the analyst holding a durable record of it."""
    engine.run(request)
    engine.run(request)


def test_two_outer_layers_of_one_release_keep_their_own_answers(demo_engine: Engine) -> None:
    a = QueryRequest(BASE + " ORDER BY n DESC LIMIT 1", epsilon=0.77, analyst="ana")
    b = QueryRequest(BASE + " ORDER BY region", epsilon=0.77, analyst="ana")
    _held(demo_engine, a)
    first = demo_engine.run_cached(a)
    assert first is not None and len(first.rows) == 1
    expected = demo_engine.run(b)  # the same release (one core), another outer layer
    assert expected.privacy.charge_id == first.privacy.charge_id
    assert len(expected.rows) == 4
    door = demo_engine.run_cached(b)
    assert door is not None
    assert (door.columns, door.rows) == (expected.columns, expected.rows)


def test_renamed_columns_of_one_release_keep_their_own_names(demo_engine: Engine) -> None:
    a = QueryRequest(BASE, epsilon=0.71, analyst="ana")
    b = replace(a, sql=BASE.replace("AS n", "AS people"))
    _held(demo_engine, a)
    assert demo_engine.run_cached(a) is not None
    expected = demo_engine.run(b)
    door = demo_engine.run_cached(b)
    assert door is not None and door.columns == expected.columns == ("region", "people")


def test_raw_noise_of_one_release_keeps_its_own_rendering(demo_engine: Engine) -> None:
    a = QueryRequest(BASE, epsilon=0.73, analyst="ana")
    b = replace(a, raw_noise=True)
    _held(demo_engine, a)
    assert demo_engine.run_cached(a) is not None
    expected = demo_engine.run(b)
    door = demo_engine.run_cached(b)
    assert door is not None and door.privacy.counts == expected.privacy.counts == "raw"
    assert door.rows == expected.rows
