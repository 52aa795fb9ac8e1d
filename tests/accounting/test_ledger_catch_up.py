"""A connection's mirror of the SQLite ledger is brought up to the store by folding in
the few events other connections appended (issue 18, ``SQLiteLedger._caught_up``):
admission stays exact, the hash chain and the stored totals rows are checked on the
way, and anything else (a row that does not follow, a registration, a new partition)
takes the re-reading path, which fails closed on a forged row as before."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

from accounting.ledger import (
    BudgetExhausted,
    LedgerUnavailable,
    Partitioning,
    PopulationSpec,
    Total,
)
from accounting.ledger_records import curve_blob
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger, _Mirror
from tests.accounting.test_ledger_concurrency import CAP, DELTA, RHO, expected_admissions

REGIONS = Partitioning("region", frozenset({"north", "south"}))


def _open(path: Path) -> SQLiteLedger:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    return lg


def _count_rereads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = _Mirror.refreshed

    def counting(self: _Mirror, data_version: int) -> _Mirror:
        calls[0] += 1
        return real(self, data_version)

    monkeypatch.setattr(_Mirror, "refreshed", counting)
    return calls


def test_alternating_connections_fold_each_others_charges_and_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _open(tmp_path / "l.sqlite"), _open(tmp_path / "l.sqlite")
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="warm a")
    b.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="warm b")
    rereads = _count_rereads(monkeypatch)
    admitted, refused, turn = 2, 0, 0
    while refused < 2:
        lg = (a, b)[turn % 2]
        turn += 1
        try:
            lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint=str(turn))
            admitted += 1
        except BudgetExhausted:
            refused += 1
    assert admitted == expected_admissions()
    # Every charge followed one of the other connection's: all were folded in.
    assert rereads[0] == 0
    assert a.spent("users").epsilon == b.spent("users").epsilon <= CAP
    a.close()
    b.close()
    fresh = _open(tmp_path / "l.sqlite")
    assert fresh.verify().ok
    fresh.close()


def test_a_registration_or_new_partition_takes_the_rereading_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _open(tmp_path / "l.sqlite"), _open(tmp_path / "l.sqlite")
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a1")
    b.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="b1")
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a2")
    rereads = _count_rereads(monkeypatch)
    b.charge("users/region=north", zcdp_curve(RHO), analyst="x", fingerprint="b2")
    assert rereads[0] == 0  # b folded in a2
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a3")
    assert rereads[0] == 1  # a new partition: a re-reads
    b.register(PopulationSpec("orders", CAP, DELTA))
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="a4")
    assert rereads[0] == 2  # a registration: a re-reads
    # Both see the partition's spend (its own charge plus the root's four).
    assert a.spent("users/region=north").epsilon == b.spent("users/region=north").epsilon
    assert a.spent("users/region=north").epsilon > a.spent("users").epsilon
    assert a.verify().ok
    a.close()
    b.close()


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
