"""Issue 18, fourth round: a lone caller's charge skips the group commit's hand-off,
and events are written by a JSON encoder of the ledger's own. Both must change nothing
a store holds: a single caller and concurrent callers store the same events and
totals, a failure on the lone caller's path fails that caller closed and leaves the
next call free to commit, and the hash chain's bytes are json's bytes."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from accounting.ledger import (
    BudgetExhausted,
    InvalidRequest,
    LedgerUnavailable,
    Partitioning,
    PopulationSpec,
    check_population_name,
)
from accounting.ledger_records import (
    EventTail,
    curve_json,
    digest,
    event_row,
    json_item,
    json_items,
    names_json,
)
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger

REGIONS = Partitioning("region", frozenset({"north", "south"}))
# (population, ρ) of each charge; every population always gets the same curve, so its
# total does not depend on the order in which concurrent callers were admitted.
PLAN = [("users", 1e-4), ("users/region=north", 3e-4), ("users/region=south", 2e-4)] * 12


def _open(path: Path, **kw: Any) -> SQLiteLedger:
    lg = SQLiteLedger(path, **kw)
    lg.register(PopulationSpec("users", 50.0, 1e-6, REGIONS))
    return lg


def _stored(path: Path) -> tuple[list[tuple[Any, ...]], dict[str, tuple[Any, ...]]]:
    """Charge events as (populations, curve, analyst, fingerprint), sorted, and each
    population's newest totals row (curve, delta_extra, events)."""
    with sqlite3.connect(path) as c:
        events = sorted(
            c.execute(
                "SELECT populations, curve, analyst, fingerprint FROM events "
                "WHERE kind = 'charge'"
            ).fetchall()
        )
        newest = {
            str(p): tuple(r)
            for p, *r in c.execute(
                "SELECT population, curve, delta_extra, events FROM totals t WHERE event_id = "
                "(SELECT max(event_id) FROM totals WHERE population = t.population)"
            )
        }
    return events, newest


def test_a_single_caller_and_concurrent_callers_store_the_same_events_and_totals(
    tmp_path: Path,
) -> None:
    one = _open(tmp_path / "one.sqlite")
    for k, (pop, rho) in enumerate(PLAN):
        one.charge(pop, zcdp_curve(rho), analyst=f"a{k % 3}", fingerprint=str(k))
    assert one.verify().ok
    one.close()

    many = _open(tmp_path / "many.sqlite")
    batches: list[int] = []
    real = many._commit_batch

    def observed(batch: list[Any]) -> None:
        batches.append(len(batch))
        if len(batches) == 1:
            time.sleep(0.05)  # the first commit is slow: the other callers queue
        real(batch)

    many._commit_batch = observed  # type: ignore[method-assign]
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def work(part: int) -> None:
        start.wait()
        try:
            for k in range(part, len(PLAN), 6):
                pop, rho = PLAN[k]
                many.charge(pop, zcdp_curve(rho), analyst=f"a{k % 3}", fingerprint=str(k))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p,)) for p in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sum(batches) == len(PLAN)
    assert max(batches) > 1  # some charges shared a commit: the queued path ran too
    assert batches[0] == 1  # and the first caller found nothing queued
    assert many.verify().ok
    many.close()

    assert _stored(tmp_path / "one.sqlite") == _stored(tmp_path / "many.sqlite")


def test_a_refusal_on_the_single_caller_path_appends_nothing_and_frees_the_next_call(
    tmp_path: Path,
) -> None:
    lg = _open(tmp_path / "l.sqlite")
    lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="ok")
    with pytest.raises(BudgetExhausted):
        lg.charge("users", zcdp_curve(1e3), analyst="a", fingerprint="too much")
    with pytest.raises(InvalidRequest):
        lg.charge("users/region=east", zcdp_curve(1e-3), analyst="a", fingerprint="bad")
    receipt = lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="next")
    assert receipt.event_id == 3  # register, ok, next: the refusals appended nothing
    assert [e.fingerprint for e in lg.history() if e.kind == "charge"] == ["ok", "next"]
    assert lg.verify().ok
    lg.close()


def test_a_store_error_on_the_single_caller_path_fails_that_caller_closed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.sqlite"
    lg = _open(path, timeout_s=0.2)
    lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="before")
    # Another connection holds the write lock past the store's timeout.
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(LedgerUnavailable):
        lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="locked out")
    other.execute("ROLLBACK")
    other.close()
    # The failed call handed the lead back: the next one commits, the failed one is absent.
    lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="after")
    assert [e.fingerprint for e in lg.history() if e.kind == "charge"] == ["before", "after"]
    assert lg.verify().ok
    lg.close()


def test_a_failed_sync_on_the_single_caller_path_fails_the_store_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = _open(tmp_path / "l.sqlite")

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(LedgerUnavailable):
        lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="unsynced")
    monkeypatch.undo()
    with pytest.raises(LedgerUnavailable):
        lg.charge("users", zcdp_curve(1e-3), analyst="a", fingerprint="later")
    lg.close()
    again = SQLiteLedger(tmp_path / "l.sqlite")
    # The charge whose sync failed stands (spent, never answered); nothing after it.
    assert [e.fingerprint for e in again.history() if e.kind == "charge"] == ["unsynced"]
    assert again.verify().ok
    again.close()


ITEMS: list[Any] = [
    "", "users/region=north", 'quo"te\\', "\x00\x1f\x7f", "é", "\u2028", "😀", "\ud800",
    0, 7, -3, 2**70, True, False, None, 0.0, -0.0, 1.5, 1e-320, 1e300, 0.1 + 0.2,
    math.inf, -math.inf, math.nan, 1_700_000_000.123456,
]


@pytest.mark.parametrize("item", ITEMS, ids=repr)
def test_each_item_is_written_as_json_writes_it(item: Any) -> None:
    assert json_item(item) == json.dumps(item, separators=(",", ":"))


def test_rows_names_and_digests_are_json_s_bytes() -> None:
    assert json_items(ITEMS) == json.dumps(ITEMS, separators=(",", ":"))[1:-1]
    assert names_json(["users", "users/région=n%2F"]) == json.dumps(
        ["users", "users/région=n%2F"], separators=(",", ":")
    )
    import hashlib

    for k in range(50):
        curve = zcdp_curve(k / 7.0)
        row = event_row(
            k + 1, 1.7e9 + k / 3, "charge", ["users", f"users/region=n{k}"], curve=curve,
            delta_extra=k / 11, analyst=f"an\u00e9{k}", fingerprint=f"f\n{k}", note="n\"",
            parent_id=None, cap=None, delta=None,
        )
        text = json.dumps(["ab" * 32, *row], separators=(",", ":"))
        expected = hashlib.sha256(text.encode()).hexdigest()
        assert digest("ab" * 32, row) == expected
        tail = EventTail.of_spend(
            "charge", ["users", f"users/region=n{k}"], curve, k / 11, f"an\u00e9{k}",
            f"f\n{k}", "n\"",
        )
        assert tail.columns == row[2:]
        assert tail.digest("ab" * 32, k + 1, 1.7e9 + k / 3) == expected
        assert row[4] == curve_json(curve)


def test_population_names_checked_once_are_still_checked_each_time() -> None:
    assert check_population_name("users/region=north") == "users/region=north"
    assert check_population_name("users/region=north") == "users/region=north"
    for bad in ("", "users/", " users", "us\x00ers", "users//x"):
        with pytest.raises(InvalidRequest):
            check_population_name(bad)
        with pytest.raises(InvalidRequest):
            check_population_name(bad)


def test_a_sum_s_values_made_on_first_use_are_the_curve_s_values() -> None:
    import pickle

    from accounting.rdp import Curve

    total = zcdp_curve(0.25) + zcdp_curve(0.5)
    pairs = zip(zcdp_curve(0.25).values, zcdp_curve(0.5).values, strict=True)
    built = Curve(tuple(a + b for a, b in pairs))
    assert "values" not in vars(total)  # not made until asked for
    assert total == built and hash(total) == hash(built)
    assert total.values == built.values and all(type(v) is float for v in total.values)
    assert pickle.loads(pickle.dumps(total)) == built
    with pytest.raises(AttributeError):
        total.no_such_attribute  # type: ignore[attr-defined]  # noqa: B018
