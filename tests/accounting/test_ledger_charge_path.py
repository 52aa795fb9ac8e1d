"""The charge path of the SQLite ledger, third round of issue 18: the event's tail is
encoded before the write lock and hashes to the same chain; a total re-read after another process's commit reuses the one it checked."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

from accounting.ledger import PopulationSpec
from accounting.ledger_records import EventTail, digest, event_row
from accounting.rdp import ZERO, zcdp_curve
from accounting.store_sqlite import SQLiteLedger

CAP, DELTA, RHO = 10.0, 1e-6, 1e-4


def _open(path: Path) -> SQLiteLedger:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA))
    return lg


def _fingerprints(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT fingerprint FROM events WHERE kind = 'charge' ORDER BY id")
        return [str(f) for (f,) in rows]


def test_an_event_tail_hashes_exactly_as_the_whole_row() -> None:
    rng = random.Random(18)
    texts = ["", "bob", 'quote " and \\ backslash', "ä ü ☃", "\x00\n\t", "\u2028", "\ud83d"]
    for i in range(300):
        curve = zcdp_curve(rng.random() * 10)
        names = rng.choice([("users",), ("users/region=n", "other"), ('a/b="c%2F"',)])
        kind = rng.choice(["charge", "external"])
        dx, ts = rng.choice([0.0, rng.random() * 1e-7]), time.time() * rng.random()
        analyst, fingerprint, note = (rng.choice(texts) for _ in range(3))
        row = event_row(
            i + 1, ts, kind, names, curve=curve, delta_extra=dx, analyst=analyst,
            fingerprint=fingerprint, note=note, parent_id=None, cap=None, delta=None,
        )  # fmt: skip
        tail = EventTail.of_spend(kind, names, curve, dx, analyst, fingerprint, note)
        assert tail.columns == tuple(row[2:])
        assert EventTail.of(tuple(row[2:])).text == tail.text
        prev = f"{rng.getrandbits(256):064x}"
        assert tail.digest(prev, i + 1, ts) == digest(prev, row)


def test_two_writers_alternating_keep_exact_totals(tmp_path: Path) -> None:
    # Each charge of one instance follows a commit of the other: its total is re-read,
    # the previous total reused from its own last check, the new one step-checked.
    path = tmp_path / "l.sqlite"
    first, second = _open(path), _open(path)
    curve = zcdp_curve(RHO)
    for i in range(20):
        (first if i % 2 == 0 else second).charge("users", curve, analyst="a", fingerprint=str(i))
    expected = ZERO
    for _ in range(20):
        expected = expected + curve  # composed one charge at a time, as stored
    for lg in (first, second):
        spend = lg.spent("users")
        assert spend.curve == expected
        assert lg.verify().ok
        lg.close()
    fresh = _open(path)
    assert fresh.verify().ok
    assert fresh.spent("users").curve == expected
    fresh.close()
