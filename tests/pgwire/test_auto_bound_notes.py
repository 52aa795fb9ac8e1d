"""The PostgreSQL door's catalog notes for columns whose bounds are chosen from the data.

A one-sided ``upper = "auto"`` (with a numeric ``lower``) has ``upper`` None in the
parsed policy; the door formatted it with ``:g`` and raised TypeError while building the
caller's shadow catalog, so every connection of an analyst who could see such a column
was closed during the handshake (found 2026-12-05 with the policy's own README example,
``columns.latency_ms = { lower = 0, upper = "auto", upper_limit = 600000 }``)."""

from __future__ import annotations

from pathlib import Path

from proxy.engine import Engine
from proxy.pgwire.adapter import EngineDoor, _bounds_note
from proxy.policy import ColumnPolicy, parse_policy
from proxy.server.auth import Caller
from sample_data.generate import generate
from tests.proxy.test_auto_values import AUTO_LATENCY, policy_text


def test_notes_for_fixed_and_auto_bounds() -> None:
    assert _bounds_note(ColumnPolicy("x", lower=0.0, upper=10.0)) == "clamped to [0, 10]"
    assert (
        _bounds_note(ColumnPolicy("x", lower=0.0, upper=None, upper_limit=600000.0))
        == "clamped to [0, auto (up to 600000)]"
    )
    assert (
        _bounds_note(ColumnPolicy("x", lower=None, upper=500.0, lower_limit=-1000.0))
        == "clamped to [auto (from -1000), 500]"
    )
    assert _bounds_note(ColumnPolicy("x")) == ""


def test_the_door_lists_a_one_sided_auto_column(tmp_path: Path) -> None:
    """The whole path a connection takes: the caller's tables read from an engine whose
    policy has the README's one-sided "auto" bound."""
    db = generate(tmp_path / "usage.duckdb", people=50, prompts=200, seed=3)
    text = policy_text(tmp_path, db, AUTO_LATENCY)
    door = EngineDoor(Engine(parse_policy(text, base_dir=tmp_path)))
    try:
        tables = door.visible_tables(Caller("ana", "analyst", frozenset({"prompts"})))
    finally:
        door.close()
    notes = {c.name: c.note for t in tables for c in t.columns}
    assert notes["latency_ms"] == "clamped to [0, auto (up to 600000)]"
