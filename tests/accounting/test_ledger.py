"""The ledger: partition arithmetic, exhaustion, append-only store, replay, caps,
fail-closed behaviour and tamper detection (single process), on each store (``store``:
SQLite and PostgreSQL; see tests/accounting/conftest.py)."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from accounting.ledger import (
    AnalystShare,
    BudgetExhausted,
    InvalidRequest,
    Ledger,
    LedgerError,
    LedgerUnavailable,
    Partitioning,
    PopulationSpec,
    ShareExhausted,
    Spend,
    Total,
    UnknownPopulation,
    admit,
    affected_populations,
    ancestors_or_self,
    composed_total,
    normalize_targets,
)
from accounting.rdp import ORDERS, ZERO, zcdp_curve
from accounting.store_sqlite import SQLiteLedger
from tests.accounting.stores import StoreTarget

ROOT = Path(__file__).resolve().parents[2]
DELTA = 1e-6
NORTH, SOUTH, EAST = "users/region=north", "users/region=south", "users/region=east"
REGIONS = Partitioning("region", frozenset({"north", "south", "east", "west"}))


def ref_eps(rho: float, delta: float = DELTA) -> float:
    """CKS conversion of a ρ-zCDP curve on the grid, written out independently of rdp.py."""
    best = math.inf
    for a in ORDERS:
        best = min(best, rho * a + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1))
    return max(0.0, best)


@pytest.fixture
def ledger(store: StoreTarget):
    lg = store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA, REGIONS))
    yield lg
    lg.close()


def charge(lg: Ledger, pop, rho: float, dx: float = 0.0):
    return lg.charge(pop, zcdp_curve(rho), dx, analyst="alice", fingerprint=f"q{rho}")


# --- pure arithmetic --------------------------------------------------------------------


def test_reference_conversion_matches_known_values():
    assert ref_eps(0.005) == pytest.approx(0.43052764499485663, rel=1e-12)
    assert ref_eps(0.008) == pytest.approx(0.5581150002391148, rel=1e-12)
    assert zcdp_curve(0.005).epsilon(DELTA) == pytest.approx(ref_eps(0.005), rel=1e-12)


def test_names_nest_and_normalize():
    assert ancestors_or_self("a/b=1/c=2") == ("a", "a/b=1", "a/b=1/c=2")
    assert normalize_targets([NORTH, "users", NORTH]) == ("users",)
    assert normalize_targets((NORTH, SOUTH)) == (NORTH, SOUTH)
    assert affected_populations(("users",), [NORTH, SOUTH, "usersx/a=1"]) == (
        "users",
        NORTH,
        SOUTH,
    )
    for bad in ["", "users//a", " users", "users/a\n", "/users"]:
        with pytest.raises(InvalidRequest):
            normalize_targets(bad)


def test_admit_refuses_the_population_that_overshoots_most():
    specs = {"users": PopulationSpec("users", 1.0, DELTA)}
    own = {"users": Total(zcdp_curve(0.003), 0.0, 1), NORTH: Total(zcdp_curve(0.005), 0.0, 1)}
    spends = admit(("users",), zcdp_curve(0.001), 0.0, own, specs, [NORTH])
    assert [s.population for s in spends] == ["users", NORTH]
    assert spends[1].epsilon == pytest.approx(ref_eps(0.009), rel=1e-12)
    with pytest.raises(BudgetExhausted) as ei:
        admit(("users",), zcdp_curve(0.0165), 0.0, own, specs, [NORTH, SOUTH])
    assert ei.value.population == NORTH
    assert ei.value.spent == pytest.approx(ref_eps(0.008), rel=1e-12)
    assert ei.value.requested == pytest.approx(ref_eps(0.0165), rel=1e-12)
    assert ei.value.cap == 1.0


def test_spend_remaining_and_infinite_when_delta_used_up():
    s = Spend.of("users", Total(zcdp_curve(0.005), 0.0, 1), 1.0, DELTA)
    assert s.remaining == pytest.approx(1.0 - ref_eps(0.005), rel=1e-12)
    s = Spend.of("users", Total(ZERO, DELTA, 1), 1.0, DELTA)
    assert s.epsilon == math.inf and s.remaining == 0.0
    # Thresholding δ is subtracted before the conversion.
    s = Spend.of("users", Total(zcdp_curve(0.005), 5e-7, 1), 1.0, DELTA)
    assert s.epsilon == pytest.approx(ref_eps(0.005, 5e-7), rel=1e-12)


# --- the worked partition example -----------------------------------------------------


def test_worked_partition_example(ledger: Ledger, store: StoreTarget):
    def eps(p: str) -> float:
        return ledger.spent(p).epsilon

    r = charge(ledger, NORTH, 0.005)
    assert [s.population for s in r.spends] == [NORTH]
    assert r.epsilon_requested == pytest.approx(0.43052764499485663, rel=1e-12)
    assert eps(NORTH) == pytest.approx(0.43052764499485663, rel=1e-12)
    assert eps("users") == 0.0 and eps(SOUTH) == 0.0

    # A root charge reaches every partition, known or not yet known.
    r = charge(ledger, "users", 0.003)
    assert [s.population for s in r.spends] == ["users", NORTH]
    assert eps("users") == pytest.approx(0.32953144421606084, rel=1e-12)
    assert eps(NORTH) == pytest.approx(0.5581150002391148, rel=1e-12)  # own 0.005 + root 0.003
    assert eps(SOUTH) == pytest.approx(0.32953144421606084, rel=1e-12)

    # A partition charge does not reach its siblings or the root.
    charge(ledger, SOUTH, 0.002)
    assert eps(SOUTH) == pytest.approx(ref_eps(0.005), rel=1e-12)
    assert eps(NORTH) == pytest.approx(ref_eps(0.008), rel=1e-12)
    assert eps("users") == pytest.approx(ref_eps(0.003), rel=1e-12)

    # ρ_max(ε=1) ≈ 0.02417: 0.0165 fits south (→0.0215) and users (→0.0195) but not
    # north (→0.0245), so a root charge of 0.0165 must be refused because of north.
    before = store.n_events()
    with pytest.raises(BudgetExhausted) as ei:
        charge(ledger, "users", 0.0165)
    assert ei.value.population == NORTH
    assert ei.value.requested == pytest.approx(ref_eps(0.0165), rel=1e-12)
    assert ei.value.spent == pytest.approx(ref_eps(0.008), rel=1e-12)
    assert ei.value.cap == 1.0
    assert store.n_events() == before
    assert eps(SOUTH) == pytest.approx(ref_eps(0.005), rel=1e-12)

    # The same cost on south alone is fine.
    r = charge(ledger, SOUTH, 0.0165)
    assert eps(SOUTH) == pytest.approx(ref_eps(0.0215), rel=1e-12)
    assert eps(NORTH) == pytest.approx(ref_eps(0.008), rel=1e-12)

    # One event naming two partitions adds the curve once to each.
    before = store.n_events()
    r = charge(ledger, (NORTH, SOUTH), 0.001)
    assert store.n_events() == before + 1
    assert r.populations == (NORTH, SOUTH)
    assert eps(NORTH) == pytest.approx(ref_eps(0.009), rel=1e-12)
    assert eps(SOUTH) == pytest.approx(ref_eps(0.0225), rel=1e-12)
    assert eps("users") == pytest.approx(ref_eps(0.003), rel=1e-12)
    assert ledger.populations() == ("users", NORTH, SOUTH)

    # Naming a root and one of its partitions counts once for that partition's persons.
    charge(ledger, ("users", NORTH), 0.001)
    assert eps(NORTH) == pytest.approx(ref_eps(0.010), rel=1e-12)
    assert eps(EAST) == pytest.approx(ref_eps(0.004), rel=1e-12)
    assert ledger.verify().ok


def test_nesting_deeper_than_one_level_composes_along_the_ancestry():
    # The arithmetic composes any depth; the store accepts only the policy's one level
    # (see test_only_partitions_the_policy_defines_are_accepted).
    deep = NORTH + "/city=oslo"
    specs = {"users": PopulationSpec("users", 1.0, DELTA)}
    own = {
        deep: Total(zcdp_curve(0.001), 0.0, 1),
        NORTH: Total(zcdp_curve(0.002), 0.0, 1),
        "users": Total(zcdp_curve(0.004), 0.0, 1),
    }
    assert composed_total(deep, own).curve.epsilon(DELTA) == pytest.approx(ref_eps(0.007))
    # A charge on north must fit under its child too: 0.0172 fits north (0.0232) but
    # not oslo (0.0242 > 0.02417).
    with pytest.raises(BudgetExhausted) as ei:
        admit((NORTH,), zcdp_curve(0.0172), 0.0, own, specs, [NORTH, deep])
    assert ei.value.population == deep


def test_only_partitions_the_policy_defines_are_accepted(ledger: Ledger, store: StoreTarget):
    # Siblings are composed in parallel, which holds only for disjoint sets of persons:
    # plan=free and region=north share people (issue #19 §2).
    before = store.n_events()
    for bad in (
        "users/plan=free",
        "users/REGION=north",
        "users/region=nowhere",
        "users/region=north/plan=free",
        "users/region=North",
    ):
        with pytest.raises(InvalidRequest, match="not a partition the policy defines"):
            charge(ledger, bad, 0.001)
        with pytest.raises(InvalidRequest):
            ledger.external(bad, zcdp_curve(0.001), analyst="admin", note="x")
    assert store.n_events() == before
    charge(ledger, NORTH, 0.001)
    other = store.open()
    other.register(PopulationSpec("users", 1.0, DELTA))  # a policy without partitions
    with pytest.raises(InvalidRequest, match="no partitions"):
        other.charge(NORTH, zcdp_curve(0.001), analyst="a", fingerprint="f")
    other.close()


def test_verify_names_an_event_on_an_undefined_partition(store: StoreTarget):
    lg = store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA, Partitioning("plan", frozenset({"free"}))))
    lg.charge("users/plan=free", zcdp_curve(0.001), analyst="a", fingerprint="f")
    lg.close()
    fresh = store.open()
    fresh.register(PopulationSpec("users", 1.0, DELTA, REGIONS))  # the policy changed
    report = fresh.verify()
    assert not report.ok
    assert any("users/plan=free" in p and "not a partition" in p for p in report.problems)
    with pytest.raises(LedgerUnavailable):
        fresh.charge("users", zcdp_curve(0.001), analyst="a", fingerprint="f")
    fresh.close()


# --- exhaustion ------------------------------------------------------------------------


def test_exhaustion_reports_numbers_and_appends_nothing(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.02)
    before = store.n_events()
    history_before = ledger.history()
    with pytest.raises(BudgetExhausted) as ei:
        charge(ledger, "users", 0.005)
    e = ei.value
    assert (e.population, e.cap) == ("users", 1.0)
    assert e.spent == pytest.approx(ref_eps(0.02), rel=1e-12)
    assert e.requested == pytest.approx(ref_eps(0.005), rel=1e-12)
    assert "users" in str(e) and isinstance(e, LedgerError)
    assert store.n_events() == before
    assert ledger.history() == history_before
    assert ledger.spent("users").epsilon == pytest.approx(ref_eps(0.02), rel=1e-12)
    # A request that still fits is admitted.
    charge(ledger, "users", 0.004)


def test_thresholding_delta_adds_up_and_refuses_at_delta(ledger: Ledger, store: StoreTarget):
    r = charge(ledger, NORTH, 0.001, dx=6e-7)
    assert r.spends[0].delta_extra == 6e-7
    assert r.spends[0].epsilon == pytest.approx(ref_eps(0.001, DELTA - 6e-7), rel=1e-12)
    before = store.n_events()
    with pytest.raises(BudgetExhausted) as ei:
        charge(ledger, NORTH, 0.0, dx=4e-7)  # 6e-7 + 4e-7 reaches δ
    assert ei.value.population == NORTH
    assert store.n_events() == before
    charge(ledger, SOUTH, 0.001, dx=4e-7)  # siblings' δ are separate


def test_unknown_population_and_bad_arguments(ledger: Ledger):
    with pytest.raises(UnknownPopulation):
        charge(ledger, "orders", 0.001)
    with pytest.raises(UnknownPopulation):
        charge(ledger, "orders/x=1", 0.001)
    with pytest.raises(UnknownPopulation):
        ledger.spent("orders")
    with pytest.raises(InvalidRequest):
        charge(ledger, "users", 0.001, dx=-1e-9)
    with pytest.raises(InvalidRequest):
        charge(ledger, (), 0.001)
    with pytest.raises(InvalidRequest):
        ledger.register(PopulationSpec("users/region=x", 1.0, DELTA))
    assert ledger.history() and all(e.kind == "register" for e in ledger.history())


# --- registration and caps --------------------------------------------------------------


def test_register_is_idempotent_and_records_policy_cap_changes(ledger: Ledger, store: StoreTarget):
    ledger.register(PopulationSpec("users", 1.0, DELTA))
    assert store.n_events() == 1
    with pytest.raises(InvalidRequest):
        ledger.register(PopulationSpec("users", 1.0, 1e-5))
    ledger.set_cap("users", 0.5, reason="incident", analyst="admin")
    ledger.register(PopulationSpec("users", 1.0, DELTA))  # unchanged policy: set_cap stays
    assert ledger.spent("users").cap == 0.5
    ledger.register(PopulationSpec("users", 2.0, DELTA))  # policy edited: recorded
    assert ledger.spent(NORTH).cap == 2.0
    kinds = [(e.kind, e.cap) for e in ledger.history()]
    assert kinds == [("register", 1.0), ("cap_change", 0.5), ("register", 2.0)]
    assert ledger.verify().ok


def test_set_cap_below_spent_refuses_further_charges(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.01)
    charge(ledger, NORTH, 0.002)
    spent = ledger.spent("users").epsilon
    before = ledger.history()
    eid = ledger.set_cap("users", 0.3, reason="lowered by the DPO", analyst="admin")
    after = ledger.history()
    assert after[:-1] == before
    assert (after[-1].id, after[-1].kind, after[-1].cap) == (eid, "cap_change", 0.3)
    assert after[-1].note == "lowered by the DPO" and after[-1].analyst == "admin"
    assert ledger.spent("users").epsilon == spent and ledger.remaining("users") == 0.0
    count = store.n_events()
    for pop in ("users", NORTH, SOUTH, (NORTH, SOUTH)):
        with pytest.raises(BudgetExhausted) as ei:
            charge(ledger, pop, 1e-12)
        assert ei.value.cap == 0.3
    with pytest.raises(BudgetExhausted):
        ledger.external("users", ZERO, analyst="trainer", note="zero")
    assert store.n_events() == count
    with pytest.raises(InvalidRequest):
        ledger.set_cap(NORTH, 2.0, reason="x", analyst="admin")
    with pytest.raises(InvalidRequest):
        ledger.set_cap("users", 2.0, reason=" ", analyst="admin")
    ledger.set_cap("users", 1.0, reason="restored", analyst="admin")
    charge(ledger, SOUTH, 0.001)
    assert ledger.verify().ok


def test_external_uses_the_same_rule(ledger: Ledger):
    r = ledger.external("users", zcdp_curve(0.02), analyst="trainer", note="dp-sgd run 7")
    assert r.kind == "external"
    assert ledger.history()[-1].kind == "external"
    with pytest.raises(BudgetExhausted):
        ledger.external("users", zcdp_curve(0.005), analyst="trainer", note="run 8")
    assert ledger.spent(NORTH).epsilon == pytest.approx(ref_eps(0.02), rel=1e-12)


# --- replay ------------------------------------------------------------------------------


def test_replay_costs_nothing_and_needs_a_real_parent(ledger: Ledger):
    r = charge(ledger, NORTH, 0.02)
    spent = ledger.spent(NORTH)
    rid = ledger.replay(r.event_id, analyst="bob", fingerprint="fp")
    ev = ledger.history()[-1]
    assert (ev.id, ev.kind, ev.parent_id, ev.populations) == (rid, "replay", r.event_id, (NORTH,))
    assert ev.curve.is_zero() and ev.delta_extra == 0.0
    assert ledger.spent(NORTH) == spent
    with pytest.raises(BudgetExhausted):
        charge(ledger, NORTH, 0.005)
    ledger.replay(r.event_id, analyst="bob", fingerprint="fp")  # free even when exhausted
    for bad in (9999, rid, 1):  # unknown, a replay, a register event
        with pytest.raises(InvalidRequest):
            ledger.replay(bad, analyst="bob", fingerprint="fp")
    assert ledger.verify().ok


def test_history_filters_by_population(ledger: Ledger):
    ledger.register(PopulationSpec("orders", 2.0, DELTA))
    a = charge(ledger, NORTH, 0.001).event_id
    b = charge(ledger, SOUTH, 0.001).event_id
    c = charge(ledger, "users", 0.001).event_id
    d = charge(ledger, "orders", 0.001).event_id
    ids = lambda evs: [e.id for e in evs if e.kind == "charge"]  # noqa: E731
    assert ids(ledger.history(NORTH)) == [a, c]
    assert ids(ledger.history("users")) == [a, b, c]
    assert ids(ledger.history("orders")) == [d]
    assert ids(ledger.history(after_id=b)) == [c, d]
    assert len(ledger.history(limit=2)) == 2
    with pytest.raises(UnknownPopulation):
        ledger.history("nobody")


# --- the store refuses edits -------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE events SET note = 'x' WHERE id = 2",
        "DELETE FROM events WHERE id = 2",
        "DELETE FROM events",
        "INSERT OR REPLACE INTO events SELECT * FROM events WHERE id = 2",
        "UPDATE totals SET curve = '[]'",
        "DELETE FROM totals",
        "UPDATE populations SET root = 'x'",
        "DELETE FROM populations",
    ],
)
def test_sqlite_store_refuses_update_and_delete(tmp_path: Path, sql: str):
    path = tmp_path / "ledger.sqlite"
    ledger = SQLiteLedger(path)
    ledger.register(PopulationSpec("users", 1.0, DELTA, REGIONS))
    charge(ledger, NORTH, 0.001)
    with sqlite3.connect(path) as c, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute(sql)
    assert ledger.verify().ok
    charge(ledger, NORTH, 0.001)
    ledger.close()


DENIED, GUARDED = "permission denied", "append-only"
_PG_EDITS = [
    ("UPDATE events SET note = 'x' WHERE id = 2", DENIED),
    ("DELETE FROM events WHERE id = 2", DENIED),
    ("DELETE FROM events", DENIED),
    ("TRUNCATE events", DENIED),
    (
        "INSERT INTO events SELECT * FROM events WHERE id = 2 "
        "ON CONFLICT (id) DO UPDATE SET note = 'x'",
        DENIED,
    ),
    (
        "INSERT INTO events SELECT id + 100, ts, kind, populations, curve, delta_extra, "
        "analyst, fingerprint, note, parent_id, cap, delta, hash FROM events WHERE id = 2",
        GUARDED,
    ),
    ("UPDATE totals SET curve = '[]'", DENIED),
    ("DELETE FROM totals", DENIED),
    ("TRUNCATE totals", DENIED),
    (
        "INSERT INTO totals SELECT population, event_id - 1, curve, delta_extra, events "
        "FROM totals",
        GUARDED,
    ),
    ("UPDATE populations SET root = 'x'", DENIED),
    ("DELETE FROM populations", DENIED),
    ("TRUNCATE populations", DENIED),
    ("UPDATE meta SET value = '0'", DENIED),
    ("DELETE FROM meta", DENIED),
]


@pytest.mark.parametrize(("sql", "as_proxy"), _PG_EDITS)
def test_postgres_store_refuses_update_and_delete(pg_database, sql: str, as_proxy: str):
    """The proxy's own role may not edit the log (no privilege, or the insert guards),
    and the triggers refuse even a superuser."""
    import psycopg

    store = StoreTarget("postgres", pg_database.dsn, pg_database.admin_dsn)
    ledger = store.open()
    ledger.register(PopulationSpec("users", 1.0, DELTA, REGIONS))
    charge(ledger, NORTH, 0.001)
    with (
        psycopg.connect(store.location, autocommit=True) as c,
        pytest.raises(psycopg.errors.DatabaseError, match=as_proxy),
    ):
        c.execute("SET search_path = dpsql_ledger")
        c.execute(sql)
    with pytest.raises(psycopg.errors.RaiseException, match=GUARDED):
        store.execute(sql)
    assert ledger.verify().ok
    charge(ledger, NORTH, 0.001)
    ledger.close()


# --- verification and tamper detection ---------------------------------------------------


def test_verify_in_a_fresh_process(ledger: Ledger, store: StoreTarget):
    charge(ledger, NORTH, 0.003)
    charge(ledger, "users", 0.002, dx=1e-8)
    rid = charge(ledger, (NORTH, SOUTH), 0.001).event_id
    ledger.replay(rid, analyst="bob", fingerprint="fp")
    ledger.set_cap("users", 0.9, reason="r", analyst="admin")
    code = (
        "import sys; from tests.accounting.stores import StoreTarget\n"
        "r = StoreTarget(sys.argv[1], sys.argv[2]).open().verify()\n"
        "print(r.ok, r.events, r.populations, len(r.problems))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, store.kind, store.location],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert out == ["True", "6", "3", "0"]


def test_bogus_totals_row_is_detected_and_fails_closed(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.01)
    north_id = charge(ledger, NORTH, 0.001).event_id
    # Passes the insert trigger (later event id, event exists) but resets users to zero.
    zero = "[" + ",".join(["0.0"] * len(ORDERS)) + "]"
    store.execute(f"INSERT INTO totals VALUES ('users', {north_id}, '{zero}', 0.0, 0)")
    with pytest.raises(LedgerUnavailable):
        charge(ledger, "users", 0.001)
    with pytest.raises(LedgerUnavailable):
        charge(ledger, SOUTH, 0.001)  # the instance stays closed once in doubt
    fresh = store.open()
    report = fresh.verify()
    assert not report.ok and any("users" in p for p in report.problems)
    with pytest.raises(LedgerUnavailable):
        fresh.charge(SOUTH, zcdp_curve(0.001), analyst="a", fingerprint="f")
    with pytest.raises(LedgerUnavailable):
        fresh.spent("users")
    fresh.close()


def test_updated_latest_total_is_detected_on_open(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.01)
    charge(ledger, "users", 0.01)
    small = "[" + ",".join(repr(0.001 * a) for a in ORDERS) + "]"
    store.bypassing_guards("totals", f"UPDATE totals SET curve = '{small}' WHERE event_id = 3")
    fresh = store.open()
    with pytest.raises(LedgerUnavailable, match="inconsistent"):
        fresh.charge("users", zcdp_curve(0.001), analyst="a", fingerprint="f")
    assert not fresh.verify().ok
    fresh.close()


def test_updated_older_total_is_found_by_verify_which_then_closes(
    ledger: Ledger, store: StoreTarget
):
    charge(ledger, "users", 0.01)
    charge(ledger, "users", 0.001)
    charge(ledger, "users", 0.001)
    store.bypassing_guards("totals", "UPDATE totals SET delta_extra = 1e-7 WHERE event_id = 2")
    fresh = store.open()
    fresh.charge("users", zcdp_curve(0.001), analyst="a", fingerprint="f")  # cheap check passes
    report = fresh.verify()
    assert not report.ok
    assert any("'users' at event 2" in p for p in report.problems)
    with pytest.raises(LedgerUnavailable, match="verify failed"):
        fresh.charge("users", zcdp_curve(0.001), analyst="a", fingerprint="f")
    fresh.close()


def test_edited_event_breaks_the_hash_chain(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.01)
    charge(ledger, "users", 0.001)
    store.bypassing_guards("events", "UPDATE events SET analyst = 'mallory' WHERE id = 2")
    report = ledger.verify()
    assert not report.ok and any("hash chain broken at event 2" in p for p in report.problems)


_DROP_TRIGGER = {
    "sqlite": ("DROP TRIGGER events_no_delete", "events_no_delete"),
    "postgres": ("DROP TRIGGER events_no_update_delete ON events", "events_no_update_delete"),
}


def test_dropped_trigger_makes_the_store_unavailable(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.01)
    drop, name = _DROP_TRIGGER[store.kind]
    store.execute(drop)
    fresh = store.open()
    with pytest.raises(LedgerUnavailable, match=name):
        fresh.charge("users", zcdp_curve(0.001), analyst="a", fingerprint="f")
    fresh.close()


# --- fail closed -------------------------------------------------------------------------


def _assert_unavailable(lg: Ledger) -> None:
    with pytest.raises(LedgerUnavailable):
        lg.charge("users", zcdp_curve(0.001), analyst="a", fingerprint="f")
    with pytest.raises(LedgerUnavailable):
        lg.register(PopulationSpec("users", 1.0, DELTA))
    with pytest.raises(LedgerUnavailable):
        lg.replay(2, analyst="a", fingerprint="f")
    with pytest.raises(LedgerUnavailable):
        lg.spent("users")
    assert not lg.verify().ok


def test_garbage_file_is_unavailable(tmp_path: Path):
    p = tmp_path / "ledger.sqlite"
    p.write_bytes(b"this is not a database" * 100)
    _assert_unavailable(SQLiteLedger(p))


def test_missing_directory_is_unavailable(tmp_path: Path):
    _assert_unavailable(SQLiteLedger(tmp_path / "nope" / "ledger.sqlite"))


def test_foreign_database_is_unavailable(tmp_path: Path):
    p = tmp_path / "other.sqlite"
    StoreTarget("sqlite", str(p)).execute("CREATE TABLE t (x)")
    _assert_unavailable(SQLiteLedger(p))


def test_wrong_schema_version_is_unavailable(ledger: Ledger, store: StoreTarget):
    charge(ledger, "users", 0.001)
    store.bypassing_guards("meta", "UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    _assert_unavailable(store.open())


def test_closed_ledger_refuses(ledger: Ledger):
    ledger.close()
    with pytest.raises(LedgerUnavailable):
        charge(ledger, "users", 0.001)


def test_state_survives_reopening(ledger: Ledger, store: StoreTarget):
    charge(ledger, NORTH, 0.004, dx=1e-9)
    charge(ledger, "users", 0.002)
    before = (ledger.spent(NORTH), ledger.spent(SOUTH), ledger.history())
    ledger.close()
    again = store.open()
    assert (again.spent(NORTH), again.spent(SOUTH), again.history()) == before
    assert again.populations() == ("users", NORTH)
    again.close()


def test_infinite_curve_values_round_trip(ledger: Ledger, store: StoreTarget):
    vals = list(zcdp_curve(0.001).values)
    vals[0] = math.inf
    from accounting.rdp import Curve

    ledger.charge("users", Curve(tuple(vals)), analyst="a", fingerprint="f")
    assert ledger.history()[-1].curve.values == tuple(vals)
    assert ledger.verify().ok


# --- analysts' shares ----------------------------------------------------------------------


def test_an_analysts_share_limits_their_own_events_only(store: StoreTarget):
    # One analyst must not be able to lock every other analyst out (issue #19 §3).
    lg = store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA, REGIONS, (AnalystShare("alice", 0.25),)))
    spent = 0.0
    while True:
        try:
            lg.charge(NORTH, zcdp_curve(0.0002), analyst="alice", fingerprint="a")
        except ShareExhausted as exc:
            assert exc.analyst == "alice" and exc.population == NORTH
            assert exc.cap == pytest.approx(0.25)
            assert isinstance(exc, BudgetExhausted)
            break
        spent += 0.0002
    mine = lg.share_spent(NORTH, "alice")
    assert mine is not None and mine.epsilon <= 0.25 and mine.cap == pytest.approx(0.25)
    assert mine.delta == pytest.approx(DELTA * 0.25)
    assert lg.share_spent(NORTH, "bob") is None
    # Bob is not limited by alice's share, only by the population's cap.
    lg.charge(NORTH, zcdp_curve(0.0002), analyst="bob", fingerprint="b")
    # Alice's other partitions and the root see her root-level spending too.
    with pytest.raises(ShareExhausted):
        lg.charge("users", zcdp_curve(spent), analyst="alice", fingerprint="a")
    lg.charge(SOUTH, zcdp_curve(0.0002), analyst="alice", fingerprint="a")
    assert lg.verify().ok
    lg.close()
    # A fresh process reads alice's events back from the store.
    fresh = store.open()
    fresh.register(PopulationSpec("users", 1.0, DELTA, REGIONS, (AnalystShare("alice", 0.25),)))
    with pytest.raises(ShareExhausted):
        fresh.charge(NORTH, zcdp_curve(0.0002), analyst="alice", fingerprint="a")
    fresh.close()


def test_a_share_outside_0_1_is_refused(store: StoreTarget):
    lg = store.open()
    with pytest.raises(InvalidRequest):
        lg.register(PopulationSpec("users", 1.0, DELTA, None, (AnalystShare("a", 1.5),)))
    lg.close()


# --- PostgreSQL: the role and the connection --------------------------------------------


@pytest.fixture
def pg_store(pg_database) -> StoreTarget:
    return StoreTarget("postgres", pg_database.dsn, pg_database.admin_dsn)


def _pg_ledger(dsn: str):
    from accounting.store_postgres import PostgresLedger

    return PostgresLedger(dsn)


def test_postgres_refuses_a_superuser(pg_store: StoreTarget):
    lg = _pg_ledger(pg_store.admin)
    with pytest.raises(LedgerUnavailable, match="superuser"):
        lg.register(PopulationSpec("users", 1.0, DELTA))
    assert not lg.verify().ok
    lg.close()
    # It created nothing: the proxy's role creates the schema on first use.
    assert pg_store.query("SELECT count(*) FROM pg_namespace WHERE nspname = 'dpsql_ledger'") == [
        (0,)
    ]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("GRANT UPDATE ON events TO dpsql", "may UPDATE"),
        ("GRANT DELETE, TRUNCATE ON totals TO dpsql", "may DELETE, TRUNCATE"),
        ("ALTER TABLE events DISABLE TRIGGER events_no_update_delete", "events_no_update_delete"),
        ("ALTER TABLE totals DISABLE TRIGGER ALL", "totals_append_only"),
        (
            "CREATE OR REPLACE FUNCTION refuse_edit() RETURNS trigger LANGUAGE plpgsql "
            "AS $$BEGIN RETURN NULL; END$$",
            "meta_no_truncate",
        ),
        (
            "DO $$BEGIN EXECUTE format('ALTER ROLE dpsql IN DATABASE %I "
            "SET session_replication_role = replica', current_database()); END$$",
            "session_replication_role",
        ),
        ("ALTER TABLE events ADD COLUMN extra text", "columns"),
    ],
)
def test_postgres_unsafe_setups_are_unavailable(pg_store: StoreTarget, sql: str, message: str):
    lg = pg_store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA, REGIONS))
    charge(lg, NORTH, 0.001)
    lg.close()
    pg_store.execute(sql)
    fresh = pg_store.open()
    with pytest.raises(LedgerUnavailable, match=message):
        charge(fresh, NORTH, 0.001)
    assert not fresh.verify().ok
    assert fresh.populations() == ("users", NORTH)  # the raw log stays readable
    fresh.close()


def test_postgres_unreachable_server_is_unavailable():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lg = _pg_ledger(f"postgresql://dpsql@127.0.0.1:{port}/nowhere?connect_timeout=2")
    _assert_unavailable(lg)
    with pytest.raises(LedgerUnavailable, match="cannot connect"):
        lg.populations()


def test_postgres_foreign_schema_is_unavailable(pg_store: StoreTarget):
    pg_store.execute(
        "CREATE SCHEMA dpsql_ledger AUTHORIZATION dpsql",
        "CREATE TABLE dpsql_ledger.events (x int)",
        "ALTER TABLE dpsql_ledger.events OWNER TO dpsql",
    )
    lg = pg_store.open()
    _assert_unavailable(lg)
    assert "unexpected tables or columns" in lg.verify().problems[0]


def test_postgres_reconnects_after_losing_its_connection(pg_store: StoreTarget):
    lg = pg_store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA, REGIONS))
    charge(lg, NORTH, 0.001)
    pg_store.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'dpsql-ledger'"
    )
    # Nothing was sent on the dead connection: the store opens (and checks) a new one.
    charge(lg, NORTH, 0.001)
    assert lg.spent(NORTH).epsilon == pytest.approx(ref_eps(0.002), rel=1e-12)
    assert lg.verify().ok
    lg.close()


def test_postgres_schema_installed_for_a_writer_role(pg_database):
    """An administrator owns the schema; the proxy's role may only read and append."""
    import psycopg

    from accounting.store_postgres import install

    with psycopg.connect(pg_database.admin_dsn, autocommit=True) as admin:
        assert install(admin, writer="dpsql")
        assert not install(admin, writer="dpsql")  # idempotent
    store = StoreTarget("postgres", pg_database.dsn, pg_database.admin_dsn)
    lg = store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA, REGIONS))
    charge(lg, NORTH, 0.001)
    assert lg.verify().ok
    with psycopg.connect(store.location, autocommit=True) as c:
        for sql in (
            "ALTER TABLE dpsql_ledger.events DISABLE TRIGGER ALL",
            "DROP TRIGGER events_no_update_delete ON dpsql_ledger.events",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
                c.execute(sql)
        c.execute("GRANT UPDATE ON dpsql_ledger.events TO dpsql")  # only warns: no grant option
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            c.execute("UPDATE dpsql_ledger.events SET note = 'x'")
    charge(lg, NORTH, 0.001)
    assert lg.verify().ok
    lg.close()


def test_postgres_refuses_nul_in_text(pg_store: StoreTarget):
    lg = pg_store.open()
    lg.register(PopulationSpec("users", 1.0, DELTA))
    with pytest.raises(InvalidRequest, match="NUL"):
        lg.charge("users", zcdp_curve(0.001), analyst="a\x00b", fingerprint="f")
    charge(lg, "users", 0.001)
    assert lg.verify().ok
    lg.close()
