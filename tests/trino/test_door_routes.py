"""The Trino door's memo of statement routes, over a real engine: a text seen before
skips parsing but is still answered for the client's own schema, refused where it was
refused, and charged once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.server.auth import Caller
from proxy.trino.adapter import EngineAdapter
from proxy.trino.door import ClientSession, TrinoDoor
from sample_data.generate import generate
from tests.proxy.conftest import demo_policy

SQL = "SELECT region, COUNT(*) AS n FROM users GROUP BY region"
CALLER = Caller("ana", "analyst", frozenset({"users", "prompts", "tickets", "regions"}))


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrinoDoor]:
    tmp = tmp_path_factory.mktemp("trino-routes")
    db = generate(tmp / "usage.duckdb", people=300, prompts=3000, seed=5)
    engine = Engine(demo_policy(tmp, db))
    door = TrinoDoor(EngineAdapter(engine))
    yield door
    door.close()
    engine.close()


def test_a_repeated_text_is_one_route_and_one_charge(door: TrinoDoor) -> None:
    first = door.execute(SQL, ClientSession(), CALLER)
    assert first.privacy is not None and first.privacy["cached"] is False
    assert len(door._routes._entries) == 1
    again = door.execute(SQL + " ", ClientSession(), CALLER)  # classify strips the blank
    assert again.privacy is not None and again.privacy["cached"] is True
    assert again.rows == first.rows
    assert len(door._routes._entries) == 1


def test_the_route_depends_on_the_clients_schema(door: TrinoDoor) -> None:
    door.execute(SQL, ClientSession(), CALLER)
    with pytest.raises(DPSQLError) as info:
        door.execute(SQL, ClientSession(schema="elsewhere"), CALLER)
    assert "elsewhere" in info.value.message


def test_refusals_are_not_remembered_as_routes(door: TrinoDoor) -> None:
    before = len(door._routes._entries)
    sql = "SELECT COUNT(*) AS n FROM hive.main.users"
    for _ in range(2):
        with pytest.raises(DPSQLError) as info:
            door.execute(sql, ClientSession(), CALLER)
        assert info.value.code == "not_found"
    preview = "SELECT * FROM users LIMIT 100"
    for _ in range(2):  # the engine refuses it each time; the door adds its hint each time
        with pytest.raises(DPSQLError) as info:
            door.execute(preview, ClientSession(), CALLER)
        assert "a row preview" in info.value.message
    assert len(door._routes._entries) == before + 1  # only the preview's route is kept


def test_execute_cached_answers_only_a_routed_repeat_from_memory(door: TrinoDoor) -> None:
    sql = "SELECT plan, COUNT(*) AS n FROM users WHERE age > 25 GROUP BY plan"
    # never seen: nothing asked of the engine, so the first execute is the charge
    assert door.execute_cached(sql, ClientSession(), CALLER) is None
    first = door.execute(sql, ClientSession(), CALLER)
    assert first.privacy is not None and first.privacy["cached"] is False
    # the engine answers from memory once it has replayed the release itself
    again = door.execute(sql, ClientSession(), CALLER)
    assert again.privacy is not None and again.privacy["cached"] is True
    hit = door.execute_cached(sql + " ;", ClientSession(), CALLER)
    assert hit is not None and hit.privacy is not None
    assert hit.privacy["cached"] is True and hit.privacy["epsilon"] == 0.0
    assert (hit.names, hit.types, hit.rows) == (first.names, first.types, first.rows)
    assert (hit.warnings, hit.headers) == (again.warnings, again.headers)
    assert door.execute_cached(sql, ClientSession(), CALLER) is hit  # rendered once
    # the client's session still shapes it: intervals add columns; another ε is a miss
    wide = door.execute_cached(sql, ClientSession(session_header="dpsql.intervals=true"), CALLER)
    assert wide is not None and wide.names == ("plan", "n", "n_ci95")
    other = ClientSession(session_header="dpsql.epsilon=0.3")
    assert door.execute_cached(sql, other, CALLER) is None
    # another analyst does not hold the release
    bob = Caller("bob", "analyst", CALLER.tables)
    assert door.execute_cached(sql, ClientSession(), bob) is None


@pytest.mark.parametrize(
    "text",
    [
        "SET SESSION dpsql.epsilon = 0.3",
        "SHOW TABLES",
        "SELECT 1",
        "SELECT * FROM users LIMIT 0",
        "EXECUTE IMMEDIATE 'SELECT plan, COUNT(*) AS n FROM users GROUP BY plan'",
        "SELECT COUNT(*) AS n FROM hive.main.users",
    ],
)
def test_execute_cached_leaves_everything_else_to_execute(door: TrinoDoor, text: str) -> None:
    # refused or not, execute_cached must not answer it
    with contextlib.suppress(DPSQLError):
        door.execute(text, ClientSession(), CALLER)
    assert door.execute_cached(text, ClientSession(), CALLER) is None


def test_a_bad_session_header_is_refused_like_execute_refuses_it(door: TrinoDoor) -> None:
    door.execute(SQL, ClientSession(), CALLER)
    client = ClientSession(session_header="dpsql.epsilon=lots")
    with pytest.raises(DPSQLError) as slow:
        door.execute(SQL, client, CALLER)
    with pytest.raises(DPSQLError) as fast:
        door.execute_cached(SQL, client, CALLER)
    assert fast.value.to_dict() == slow.value.to_dict()


def test_execute_immediate_repeats_are_kept_under_their_whole_text(door: TrinoDoor) -> None:
    inner = "SELECT plan, COUNT(*) AS n FROM users WHERE age > ? GROUP BY plan"
    bound = f"EXECUTE IMMEDIATE '{inner}' USING 33"
    other = f"EXECUTE IMMEDIATE '{inner}' USING 34"
    first = door.execute(bound, ClientSession(), CALLER)
    assert first.privacy is not None and first.privacy["cached"] is False
    again = door.execute(bound, ClientSession(), CALLER)  # the route kept under the text
    assert again.privacy is not None and again.privacy["cached"] is True
    assert again.rows == first.rows
    hit = door.execute_cached(bound, ClientSession(), CALLER)
    assert hit is not None and hit.rows == first.rows and hit.privacy is not None
    assert hit.privacy["cached"] is True
    # other values are another statement: not answered from the first one's route
    assert door.execute_cached(other, ClientSession(), CALLER) is None
    fresh = door.execute(other, ClientSession(), CALLER)
    assert fresh.privacy is not None and fresh.privacy["cached"] is False
    # the same query written with its literal is the same release
    plain = door.execute(inner.replace("?", "33"), ClientSession(), CALLER)
    assert plain.rows == first.rows and plain.privacy is not None and plain.privacy["cached"]
    # a bad parameter list is refused each time, never kept
    for _ in range(2):
        with pytest.raises(DPSQLError):
            door.execute(f"EXECUTE IMMEDIATE '{inner}' USING (SELECT 1)", ClientSession(), CALLER)
