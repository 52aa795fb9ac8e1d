"""The SQLite ledger's fast paths (issue 18) keep every guarantee of the slow ones:
group-committed charges and replays are durable when acknowledged, charges sharing a
commit are admitted exactly as if they came one by one, the in-memory mirror never
admits what the store would refuse when another process charges, the version token
moves with every budget-changing commit of any process, and packed curves read back
bit for bit (as do rows written before them, as JSON)."""

from __future__ import annotations

import math
import multiprocessing as mp
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from accounting.ledger import BudgetExhausted, InvalidRequest, Partitioning, PopulationSpec
from accounting.ledger_records import PACKED_CURVE, curve_json, parse_curve
from accounting.rdp import ORDERS, Curve, zcdp_curve
from accounting.store_sqlite import SQLiteLedger
from tests.accounting.stores import StoreTarget
from tests.accounting.test_ledger_concurrency import CAP, DELTA, RHO, expected_admissions

ROOT = Path(__file__).resolve().parents[2]
REGIONS = Partitioning("region", frozenset({"north", "south"}))


def _open(path: Path) -> SQLiteLedger:
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    return lg


def test_two_connections_alternating_admit_exactly_what_one_would(tmp_path: Path) -> None:
    # Each connection's mirror is stale after every charge of the other: admission must
    # re-read the store (data_version), or the second would admit past the cap.
    a, b = _open(tmp_path / "l.sqlite"), _open(tmp_path / "l.sqlite")
    admitted = 0
    refused = set()
    turn = 0
    while len(refused) < 2:
        lg = (a, b)[turn % 2]
        turn += 1
        try:
            lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint=str(turn))
            admitted += 1
        except BudgetExhausted:
            refused.add(id(lg))
    assert admitted == expected_admissions()
    assert a.spent("users").epsilon == b.spent("users").epsilon <= CAP
    assert a.verify().ok and b.verify().ok
    a.close()
    b.close()


def _version_steps(reader: SQLiteLedger, writer: SQLiteLedger, charge_id: int) -> int:
    """SQLite steps (in tens of VM instructions) of ``reader.version()`` after a commit
    of another connection, which makes it read the store's state again."""
    writer.replay(charge_id, analyst="x", fingerprint="f")
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = reader._conn  # the store's one connection
    assert conn is not None
    conn.set_progress_handler(count, 10)
    try:
        reader.version()
    finally:
        conn.set_progress_handler(None, 10)
    return steps


def test_the_version_token_reads_the_same_few_rows_however_long_the_log(tmp_path: Path) -> None:
    # Every commit of another process (a charge, or a door's replays, several a second)
    # makes version() read the store's state again; it walked back through every event
    # to find the newest cap (22 ms at 200,000 events) until it read the caps' index.
    a, b = _open(tmp_path / "l.sqlite"), _open(tmp_path / "l.sqlite")
    charge_id = b.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="f").event_id
    a.version()
    short = _version_steps(a, b, charge_id)
    for _ in range(3000):
        b.replay(charge_id, analyst="x", fingerprint="f")
    long = _version_steps(a, b, charge_id)
    assert short > 0
    assert long <= short + 5, (short, long)
    a.close()
    b.close()


def test_version_moves_with_other_connections_cost_events_only(tmp_path: Path) -> None:
    a, b = _open(tmp_path / "l.sqlite"), _open(tmp_path / "l.sqlite")
    first = a.version()
    assert first is not None and a.version() == first  # stable while nothing commits
    charge_id = b.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="f").event_id
    after_charge = a.version()
    assert after_charge != first
    b.replay(charge_id, analyst="x", fingerprint="f")
    assert a.version() == after_charge  # a replay spends nothing
    b.external("users/region=north", zcdp_curve(RHO), analyst="x", note="n")
    after_external = a.version()
    assert after_external != after_charge
    b.set_cap("users", 2.0, reason="more", analyst="admin")
    assert a.version() != after_external
    # This connection's own commits move its token too.
    mine = a.version()
    a.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="g")
    assert a.version() != mine
    a.close()
    b.close()


def test_concurrent_replays_each_get_their_own_durable_event(tmp_path: Path) -> None:
    lg = _open(tmp_path / "l.sqlite")
    parent = lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="f").event_id
    ids: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(25):
            try:
                got = lg.replay(parent, analyst=f"a{k}", fingerprint=f"{k}-{i}")
            except BaseException as exc:  # collected: a thread's failure must fail the test
                with lock:
                    errors.append(exc)
                return
            with lock:
                ids.append(got)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(ids) == len(set(ids)) == 200
    # A fresh connection finds every acknowledged replay, with its own fingerprint.
    rows = StoreTarget("sqlite", str(tmp_path / "l.sqlite")).query(
        "SELECT id, kind, parent_id, fingerprint FROM events WHERE kind = 'replay'"
    )
    assert {r[0] for r in rows} == set(ids)
    assert {r[2] for r in rows} == {parent}
    assert len({r[3] for r in rows}) == 200
    assert lg.verify().ok
    lg.close()


def test_a_bad_replay_in_a_batch_fails_alone(tmp_path: Path) -> None:
    lg = _open(tmp_path / "l.sqlite")
    parent = lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="f").event_id
    good: list[int] = []
    bad: list[BaseException] = []
    barrier = threading.Barrier(6)

    def work(k: int) -> None:
        barrier.wait()
        try:
            # Event 1 is the registration: no charge, so it cannot be replayed.
            good.append(lg.replay(1 if k == 0 else parent, analyst="a", fingerprint=str(k)))
        except InvalidRequest as exc:
            bad.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(bad) == 1 and "not a charge" in str(bad[0])
    assert len(good) == 5
    assert lg.verify().ok
    lg.close()


_REPLAYER = """
import sys, threading
from accounting.ledger import PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
lg = SQLiteLedger(sys.argv[1])
lg.register(PopulationSpec("users", 1e6, 1e-6))
parent = lg.charge("users", zcdp_curve(1e-7), analyst="c", fingerprint="p").event_id
out = threading.Lock()
print("ready", flush=True)
def work(k):
    i = 0
    while True:
        eid = lg.replay(parent, analyst="c", fingerprint=f"{k}-{i}")
        with out:  # acknowledged: the event id leaves only after replay() returned
            sys.stdout.write(f"{eid}\\n")
            sys.stdout.flush()
        i += 1
for k in range(6):
    threading.Thread(target=work, args=(k,), daemon=True).start()
threading.Event().wait()
"""


def test_no_acknowledged_replay_is_lost_to_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", _REPLAYER, str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(0.3 + 0.2 * round_)
            proc.send_signal(signal.SIGKILL)
            acknowledged = [int(line) for line in proc.stdout.read().split()]
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -signal.SIGKILL
        assert len(acknowledged) > 10  # the child did replay before it was killed
        stored = {
            r[0]
            for r in StoreTarget("sqlite", str(path)).query(
                "SELECT id FROM events WHERE kind = 'replay'"
            )
        }
        assert set(acknowledged) <= stored
    lg = SQLiteLedger(path)
    report = lg.verify()
    assert report.ok, report.problems
    lg.close()


@pytest.mark.parametrize(
    "values",
    [
        tuple(0.001 * a for a in ORDERS),
        tuple(math.inf if i % 3 == 0 else 1 / (i + 3) for i in range(len(ORDERS))),
        tuple(5e-324 * (i + 1) for i in range(len(ORDERS))),
    ],
)
def test_packed_curves_round_trip_bit_for_bit(values: tuple[float, ...]) -> None:
    curve = Curve(values)
    text = curve_json(curve)
    assert text.startswith(PACKED_CURVE)
    assert parse_curve(text).values == values
    # Rows written before issue 18 hold JSON and still read the same.
    legacy = "[" + ",".join("Infinity" if math.isinf(v) else repr(v) for v in values) + "]"
    assert parse_curve(legacy).values == values


def test_a_store_with_json_curves_keeps_working(tmp_path: Path) -> None:
    # A totals row in the pre-issue-18 form (JSON) is the step base of the next charge.
    path = tmp_path / "l.sqlite"
    lg = _open(path)
    lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="f")
    lg.close()
    target = StoreTarget("sqlite", str(path))
    (packed,) = target.query("SELECT curve FROM totals WHERE population = 'users'")[0]
    legacy = "[" + ",".join(repr(v) for v in parse_curve(packed).values) + "]"
    target.bypassing_guards(
        "totals", f"UPDATE totals SET curve = '{legacy}' WHERE population = 'users'"
    )
    again = SQLiteLedger(path)
    again.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    again.charge("users", zcdp_curve(RHO), analyst="x", fingerprint="g")
    assert again.spent("users").curve.values == (zcdp_curve(RHO) + zcdp_curve(RHO)).values
    assert again.verify().ok
    again.close()


def test_threads_charging_at_once_admit_exactly_the_budget(tmp_path: Path) -> None:
    # 2k threads charge once each, together: the group commit admits each in queue order
    # against the totals the earlier ones left, so exactly k fit and the rest are refused
    # without disturbing the batch they were in.
    lg = _open(tmp_path / "l.sqlite")
    k = expected_admissions()
    admitted: list[int] = []
    refused: list[BaseException] = []
    other: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2 * k)

    def work(i: int) -> None:
        barrier.wait()
        try:
            got = lg.charge("users", zcdp_curve(RHO), analyst="x", fingerprint=str(i)).event_id
        except BudgetExhausted as exc:
            with lock:
                refused.append(exc)
            return
        except BaseException as exc:  # collected: a thread's failure must fail the test
            with lock:
                other.append(exc)
            return
        with lock:
            admitted.append(got)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2 * k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not other
    assert len(admitted) == len(set(admitted)) == k
    assert len(refused) == k
    assert lg.spent("users").epsilon <= CAP
    charges, counted, _ = StoreTarget("sqlite", str(tmp_path / "l.sqlite")).facts()
    assert charges == counted == k
    assert lg.verify().ok
    lg.close()


_CHARGER = """
import sys, threading
from accounting.ledger import PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
lg = SQLiteLedger(sys.argv[1])
lg.register(PopulationSpec("users", 1e6, 1e-6))
out = threading.Lock()
print("ready", flush=True)
def work(k):
    i = 0
    while True:
        receipt = lg.charge("users", zcdp_curve(1e-7), analyst="c", fingerprint=f"{k}-{i}")
        with out:  # acknowledged: the id leaves only after charge() returned
            sys.stdout.write(f"{receipt.event_id}\\n")
            sys.stdout.flush()
        i += 1
for k in range(6):
    threading.Thread(target=work, args=(k,), daemon=True).start()
threading.Event().wait()
"""


def test_no_acknowledged_charge_is_lost_to_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    store = StoreTarget("sqlite", str(path))
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHARGER, str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(0.3 + 0.2 * round_)
            proc.send_signal(signal.SIGKILL)
            acknowledged = [int(line) for line in proc.stdout.read().split()]
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -signal.SIGKILL
        assert len(acknowledged) > 10  # the child did charge before it was killed
        stored = {r[0] for r in store.query("SELECT id FROM events WHERE kind = 'charge'")}
        assert set(acknowledged) <= stored
        charges, counted, _ = store.facts()  # every stored charge is in the totals
        assert charges == counted == len(stored)
    lg = SQLiteLedger(path)
    report = lg.verify()
    assert report.ok, report.problems
    lg.close()


def _threads_charge_until_refused(path: str, threads: int, start: Any, out: Any) -> None:
    """Worker process (module level for spawn): ``threads`` threads share one ledger
    instance, so their charges share group commits, while other processes commit too."""
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA, REGIONS))
    ids: list[int] = []
    lock = threading.Lock()
    start.wait(60)

    def work(k: int) -> None:
        mine = []
        try:
            while True:
                receipt = lg.charge("users", zcdp_curve(RHO), analyst="p", fingerprint=str(k))
                mine.append(receipt.event_id)
        except BudgetExhausted:
            pass
        with lock:
            ids.extend(mine)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    lg.close()
    out.put(ids)


def test_processes_of_threads_never_overspend(tmp_path: Path) -> None:
    # Group commits inside each process, mirrors invalidated by the others' commits:
    # together they still admit exactly what one sequential ledger would.
    path = str(tmp_path / "l.sqlite")
    _open(tmp_path / "l.sqlite").close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_threads_charge_until_refused, args=(path, 4, start, out))
        for _ in range(3)
    ]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    ids = [i for r in results for i in r]
    assert len(ids) == len(set(ids)) == expected_admissions()
    charges, counted, _ = StoreTarget("sqlite", path).facts()
    assert charges == counted == len(ids)
    lg = SQLiteLedger(path)
    assert lg.spent("users").epsilon <= CAP
    assert lg.verify().ok
    lg.close()


def _hold_a_recovery(shm: str, ready: Any, hold_s: float) -> None:
    """What another process recovering the log looks like to a reader: the write and
    recover locks of the shared index held, its header's two copies different."""
    import fcntl
    import os

    fd = os.open(shm, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 120)  # WAL_WRITE_LOCK
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 122)  # WAL_RECOVER_LOCK
    head = os.pread(fd, 48, 0)
    os.pwrite(fd, bytes([head[16] ^ 0xFF]), 16)
    ready.set()
    time.sleep(hold_s)
    os.pwrite(fd, head[16:17], 16)
    os.close(fd)  # the locks go with it


def test_the_version_after_a_write_waits_for_a_recovering_process(tmp_path: Path) -> None:
    # Review 5: _begin_write leaves the connection's busy timeout at 0 after a write
    # (fcb57db), and version() read PRAGMA data_version before restoring it, so while
    # another process recovered the log (after one was killed mid-commit) the budget
    # token, read by every answer's remaining budget, failed at once with 'database is
    # locked' instead of waiting as every other read does: a refusal after a replay was
    # recorded. It must wait, as it did before.
    path = str(tmp_path / "l.sqlite")
    lg = SQLiteLedger(path)
    lg.register(PopulationSpec("users", CAP, DELTA))
    lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="f")
    before = lg.version()
    lg.charge("users", zcdp_curve(RHO), analyst="a", fingerprint="g")  # busy timeout 0
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_a_recovery, args=(path + "-shm", ready, 0.3))
    holder.start()
    assert ready.wait(60)
    started = time.monotonic()
    after = lg.version()
    assert time.monotonic() - started >= 0.1  # it waited for the lock
    holder.join(60)
    assert holder.exitcode == 0
    assert after != before and lg.version() == after
    assert lg.verify().ok
    lg.close()
