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


def test_run_answers_a_held_repeat_from_memory_with_its_replay(demo_engine: Engine) -> None:
    # Engine.run tries run_cached first (every door then gets the memory path): the
    # answer must be the planned path's, and the repeat still gets its replay event.
    a = QueryRequest(BASE, epsilon=0.79, analyst="ana")
    _held(demo_engine, a)
    planned = demo_engine._run(a)  # the path run takes when memory cannot answer
    mark = demo_engine.ledger.history(limit=100000)[-1].id
    calls = []
    original = demo_engine._run
    demo_engine._run = lambda request: calls.append(request) or original(request)  # type: ignore[method-assign]
    try:
        fast = demo_engine.run(a)
    finally:
        del demo_engine._run
    assert calls == []  # answered without planning
    assert (fast.columns, fast.rows, fast.intervals) == (
        planned.columns,
        planned.rows,
        planned.intervals,
    )
    assert fast.privacy == planned.privacy and fast.warnings == planned.warnings
    new = demo_engine.ledger.history(after_id=mark, limit=100)
    assert [(e.kind, e.parent_id) for e in new] == [("replay", planned.privacy.charge_id)]


def test_run_plans_for_an_analyst_who_does_not_hold_the_release(demo_engine: Engine) -> None:
    a = QueryRequest(BASE, epsilon=0.81, analyst="ana")
    _held(demo_engine, a)
    other = replace(a, analyst="bob")
    assert demo_engine.run_cached(other) is None
    mark = demo_engine.ledger.history(limit=100000)[-1].id
    answer = demo_engine.run(other)
    assert answer.privacy.cached
    new = demo_engine.ledger.history(after_id=mark, limit=100)
    assert [(e.kind, e.analyst) for e in new] == [("replay", "bob")]
    assert demo_engine.run_cached(other) is not None  # bob now holds it


def test_a_repeat_whose_answer_left_memory_is_declined_not_post_processed(
    demo_engine: Engine,
) -> None:
    # run_cached is called on the HTTP and Trino doors' event loops: it may answer from
    # what memory holds, never run the outer layer or the noise simulation (DuckDB, and
    # milliseconds to tens of them for a HAVING or a LIMIT). When the post-processed
    # answer has left its memo it declines, having recorded nothing, and run() answers
    # the same rows off the loop.
    sql = BASE + " HAVING COUNT(*) > 150 ORDER BY n DESC LIMIT 2"
    a = QueryRequest(sql, epsilon=0.83, analyst="ana")
    _held(demo_engine, a)
    expected = demo_engine.run_cached(a)
    assert expected is not None and len(expected.rows) == 2
    demo_engine._answers = type(demo_engine._answers)(8)  # evicted, as by 512 other answers
    demo_engine._hit_results = type(demo_engine._hit_results)(8)
    ran: list[str] = []
    original = demo_engine.post.run
    demo_engine.post.run = lambda sql, table: ran.append(sql) or original(sql, table)  # type: ignore[method-assign]
    mark = demo_engine.ledger.history(limit=100000)[-1].id
    try:
        assert demo_engine.run_cached(a) is None
        assert ran == []
        assert demo_engine.ledger.history(after_id=mark, limit=100) == []
        again = demo_engine.run(a)
    finally:
        del demo_engine.post.run
    assert ran  # run() post-processed it
    assert (again.columns, again.rows, again.intervals) == (
        expected.columns,
        expected.rows,
        expected.intervals,
    )
    assert again.privacy.cached and again.privacy.charge_id == expected.privacy.charge_id
    new = demo_engine.ledger.history(after_id=mark, limit=100)
    assert [(e.kind, e.parent_id) for e in new] == [("replay", expected.privacy.charge_id)]
    assert demo_engine.run_cached(a) is not None  # memoised again
