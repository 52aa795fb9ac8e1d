"""What the SQLite ledger keeps in memory between charges (issue 18) never stands in for
the store: a totals row slipped in behind another connection's event still fails the
store closed at the next charge, and the sums and conversions a charge keeps for the
next one (``Total.plus``, ``Curve.epsilon``) do not keep old totals alive."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from accounting.ledger import (
    LedgerUnavailable,
    Partitioning,
    PopulationSpec,
    Total,
)
from accounting.ledger_records import Inconsistent, curve_blob, curve_json, names_json, total_step
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


# The row the total before was read from (its curve unused: the total is passed as known).
_BEFORE_ROW = (6, b"", 0.0, 2)


def _step_rows(stored: bytes | str) -> tuple[tuple[object, ...], Total, tuple[object, ...]]:
    """A totals row holding ``stored`` as its curve, the total before it and the event
    it claims to follow (the charge of zcdp_curve(RHO) after two earlier ones)."""
    before = Total().plus(zcdp_curve(RHO), 0.0).plus(zcdp_curve(RHO), 0.0)
    event = ("charge", names_json(["users"]), curve_json(zcdp_curve(RHO)), 0.0)
    return (7, stored, 0.0, 3), before, event


def test_the_step_check_accepts_the_stored_sum_in_either_form() -> None:
    """One step of verify (``total_step``): a schema-2 row whose bytes are the sum's is
    accepted without unpacking it, a row written as text (schema 1) through the
    comparison of values, as before."""
    expected = Total().plus(zcdp_curve(RHO), 0.0).plus(zcdp_curve(RHO), 0.0)
    expected = expected.plus(zcdp_curve(RHO), 0.0)
    for stored in (curve_blob(expected.curve), curve_json(expected.curve)):
        latest, before, event = _step_rows(stored)
        assert total_step("users", latest, _BEFORE_ROW, event, before) == expected


def test_the_step_check_refuses_a_sum_off_by_one_ulp_or_a_wrong_count() -> None:
    expected = Total().plus(zcdp_curve(RHO), 0.0).plus(zcdp_curve(RHO), 0.0)
    expected = expected.plus(zcdp_curve(RHO), 0.0)
    off = np.array(expected.curve.as_array())
    off[50] = np.nextafter(off[50], np.inf)
    latest, before, event = _step_rows(off.astype("<f8").tobytes())
    with pytest.raises(Inconsistent, match="does not follow from the events"):
        total_step("users", latest, _BEFORE_ROW, event, before)
    latest, before, event = _step_rows(curve_blob(expected.curve))
    for bad in ((*latest[:3], 4), (*latest[:2], 1e-9, 3)):
        with pytest.raises(Inconsistent, match="does not follow from the events"):
            total_step("users", bad, _BEFORE_ROW, event, before)
    with pytest.raises(Inconsistent, match="does not follow from the events"):
        total_step(
            "users", latest, _BEFORE_ROW, ("charge", names_json(["other"]), *event[2:]), before
        )


def test_a_totals_row_that_holds_no_number_fails_the_store_closed(tmp_path: Path) -> None:
    """SQLite keeps text in a REAL column: a totals row whose delta_extra reads 'abc' is an
    inconsistent store (the ledger opens unavailable, saying why), not an error that
    escapes the constructor."""
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a1")
    lg.close()
    with sqlite3.connect(path, isolation_level=None) as raw:
        (trigger,) = raw.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'totals_no_update'"
        ).fetchone()
        raw.execute("DROP TRIGGER totals_no_update")
        raw.execute("UPDATE totals SET delta_extra = 'abc'")
        raw.execute(trigger)
    reopened = SQLiteLedger(path)
    with pytest.raises(LedgerUnavailable, match="not a total"):
        reopened.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a2")
    reopened.close()
    latest = (7, curve_blob(zcdp_curve(RHO)), "abc", 1)
    event = ("charge", names_json(["users"]), curve_json(zcdp_curve(RHO)), 0.0)
    with pytest.raises(Inconsistent, match="not a total"):
        total_step("users", latest, None, event)
