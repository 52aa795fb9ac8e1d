"""Several processes opening one new SQLite ledger at the same moment (the server's
workers at start-up) all get a working store: SQLite does not wait for the lock that
switching a new file to WAL and creating the schema take, so a worker that gave up at
once stayed unavailable ("database is locked") until restarted."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from accounting.ledger import PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger

PROCESSES = 8


def _open_and_charge(path: str, start: mp.synchronize.Barrier, out: mp.Queue) -> None:
    start.wait()
    lg = SQLiteLedger(path)
    try:
        lg.register(PopulationSpec("users", 100.0, 1e-6))
        lg.charge("users", zcdp_curve(1e-4), analyst="a", fingerprint="f")
        out.put("ok")
    except Exception as exc:  # reported to the test, which names it
        out.put(f"{type(exc).__name__}: {exc}")
    finally:
        lg.close()


def test_workers_opening_a_new_store_at_once_all_get_it(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    for attempt in range(20):  # the race is narrow: give it several chances to show
        path = str(tmp_path / f"ledger-{attempt}.sqlite")
        if attempt % 2:
            # As `dpsql serve` does: the parent opens (creates) the store and closes it
            # before the workers start, so each worker opens an existing WAL store.
            SQLiteLedger(path).close()
        start, out = ctx.Barrier(PROCESSES), ctx.Queue()
        procs = [
            ctx.Process(target=_open_and_charge, args=(path, start, out)) for _ in range(PROCESSES)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(60)
        assert results == ["ok"] * PROCESSES, results
        check = SQLiteLedger(path)
        assert check.verify().ok
        assert len([e for e in check.history(limit=100) if e.kind == "charge"]) == PROCESSES
        check.close()
