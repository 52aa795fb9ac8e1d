"""What the SQLite ledger keeps in memory between charges (issue 18) never stands in for
the store: a totals row slipped in behind another connection's event still fails the
store closed at the next charge, and the sums and conversions a charge keeps for the
next one (``Total.plus``, ``Curve.epsilon``) do not keep old totals alive."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

from accounting.ledger import (
    LedgerUnavailable,
    Partitioning,
    PopulationSpec,
    Total,
)
from accounting.ledger_records import curve_blob
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
from tests.accounting.test_ledger_concurrency import CAP, DELTA, RHO

REGIONS = Partitioning("region", frozenset({"north", "south"}))


def _open(path: Path) -> SQLiteLedger:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    return lg


def test_a_forged_totals_row_behind_a_foreign_event_fails_the_store_closed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.sqlite"
    a, b = _open(path), _open(path)
    first = a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a1")
    b.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="b1")
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a2")
    # Another connection appends a genuine replay event, then a totals row for `users`
    # that claims to follow it, with a smaller total (a forged refund).
    replay = b.replay(first.event_id, analyst="x", fingerprint="r")
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO totals (population, event_id, curve, delta_extra, events) "
            "VALUES (?,?,?,?,?)",
            ("users", replay, curve_blob(zcdp_curve(RHO)), 0.0, 1),
        )
    with pytest.raises(LedgerUnavailable):
        a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a3")
    a.close()
    b.close()
    fresh = SQLiteLedger(path)
    assert not fresh.verify().ok
    fresh.close()


def test_what_charges_keep_between_them_does_not_pile_up(tmp_path: Path) -> None:
    # A total keeps its last sum and a curve its ε (the next charge reuses both); an
    # early total the mirror still holds must not keep every later one alive.
    a, b = _open(tmp_path / "l.sqlite"), _open(tmp_path / "l.sqlite")
    for i in range(10):
        (a if i % 5 else b).charge("users", zcdp_curve(1e-9), analyst="x", fingerprint=str(i))
    # a re-reads after this and finds its total of `users` unchanged: it keeps that one
    # (as already checked) and charges on from it.
    b.register(PopulationSpec("orders", CAP, DELTA))
    for i in range(400):
        a.charge("users", zcdp_curve(1e-9), analyst="x", fingerprint=f"a{i}")
    gc.collect()
    assert sum(1 for o in gc.get_objects() if isinstance(o, Total)) < 50
    a.close()
    b.close()
