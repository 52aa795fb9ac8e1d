"""The console's ledger views (proxy/ledger_views.py) on a real SQLite ledger: the composed
ε series ends where the ledger's own spent() is, root and partitions alike; the fold reads
only new events on each call and gives the same answer as a fresh fold; history groups an
analyst's charges and replays by release; analysts see others summed up."""

from __future__ import annotations

from pathlib import Path

import pytest

from accounting.ledger import Partitioning, PopulationSpec
from accounting.rdp import zcdp_curve
from accounting.store_sqlite import SQLiteLedger
from proxy import ledger_views
from proxy.ledger_views import OTHERS, AdminKind, ConsumerKind, LedgerViews

NORTH = "users/region=north"
SOUTH = "users/region=south"


@pytest.fixture
def ledger(tmp_path: Path):
    store = SQLiteLedger(tmp_path / "ledger.sqlite")
    store.register(
        PopulationSpec("users", 10.0, 1e-6, Partitioning("region", frozenset({"north", "south"})))
    )
    store.register(PopulationSpec("orders", 5.0, 1e-5))
    yield store
    store.close()


def fill(store: SQLiteLedger) -> dict[str, int]:
    ids = {
        "a": store.charge("users", zcdp_curve(0.01), analyst="ana", fingerprint="fa").event_id,
        "n": store.charge(NORTH, zcdp_curve(0.02), analyst="bob", fingerprint="fn").event_id,
        "s": store.charge(SOUTH, zcdp_curve(0.005), 1e-9, analyst="ana", fingerprint="fs").event_id,
        "o": store.charge("orders", zcdp_curve(0.03), analyst="bob", fingerprint="fo").event_id,
    }
    store.replay(ids["a"], analyst="ana", fingerprint="fa")
    store.replay(ids["a"], analyst="bob", fingerprint="fa")
    store.replay(ids["n"], analyst="bob", fingerprint="fn")
    ids["x"] = store.external("users", zcdp_curve(0.004), analyst="adm", note="training").event_id
    ids["cap"] = store.set_cap("users", 12.0, reason="more data", analyst="adm")
    store.charge("users", zcdp_curve(0.001), analyst="ana", fingerprint="fb")
    return ids


def test_series_end_at_the_ledgers_spend(ledger: SQLiteLedger) -> None:
    fill(ledger)
    usage = LedgerViews(ledger).usage(["users", "orders"], viewer="adm", admin=True, top=50)
    series = {s.population: s for s in usage.series}
    assert set(series) == {"users", NORTH, SOUTH, "orders"}
    for name, s in series.items():
        # The one rule of GET /v1/budget: spent by the persons who have spent the most,
        # over the population and every partition below it.
        worst = max(
            ledger.spent(p).epsilon for p in series if p == name or p.startswith(name + "/")
        )
        assert s.epsilon[-1].value == pytest.approx(worst, rel=1e-12), name
        values = [p.value for p in s.epsilon]
        assert values == sorted(values), name
    # Root events reach every partition below; a partition's events move the root's
    # spent too (its persons are the root's), but not a sibling's.
    assert len(series["users"].epsilon) == 5  # a, n, s, x and the last
    assert len(series[NORTH].epsilon) == 3  # its own charge, then the external and the last
    assert [p.value for p in series["users"].caps] == [10.0, 12.0]
    assert series[NORTH].caps == ()


def test_the_fold_reads_only_new_events_and_agrees_with_a_fresh_one(
    ledger: SQLiteLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_views, "PAGE", 3)  # several pages per call
    views = LedgerViews(ledger)
    calls: list[int] = []
    history = ledger.history

    def counted(population: str | None = None, limit: int = 100, after_id: int = 0):
        calls.append(after_id)
        return history(population, limit=limit, after_id=after_id)

    monkeypatch.setattr(ledger, "history", counted)
    first = views.usage(["users"], viewer="ana", admin=False, top=10)
    assert calls == [0]  # two register events: one short page
    fill(ledger)
    calls.clear()
    second = views.usage(["users"], viewer="ana", admin=False, top=10)
    assert calls[0] == 2, "the second call must start after the events already folded"
    assert len(calls) == 4  # ten new events, three per page: 3 + 3 + 3 + 1
    fresh = LedgerViews(ledger).usage(["users"], viewer="ana", admin=False, top=10)
    assert second == fresh and first != second
    assert views.history("ana", 10) == LedgerViews(ledger).history("ana", 10)


def test_history_groups_charges_and_replays_by_release(ledger: SQLiteLedger) -> None:
    ids = fill(ledger)
    views = LedgerViews(ledger)
    ana = {e.fingerprint: e for e in views.history("ana", 10)}
    assert set(ana) == {"fa", "fs", "fb"}
    assert ana["fa"].asks == 2 and ana["fa"].charge_id == ids["a"]
    assert ana["fa"].epsilon == pytest.approx(zcdp_curve(0.01).epsilon(1e-6))
    assert [e.fingerprint for e in views.history("ana", 10)] == ["fb", "fa", "fs"]  # newest first
    bob = {e.fingerprint: e for e in views.history("bob", 10)}
    assert bob["fa"].epsilon == 0.0 and bob["fa"].charge_id == ids["a"] and bob["fa"].asks == 1
    assert bob["fn"].asks == 2 and bob["fn"].populations == (NORTH,)
    assert len(views.history("ana", 2)) == 2
    assert views.history("nobody", 10) == ()


def test_analysts_see_themselves_and_one_sum_for_the_others(ledger: SQLiteLedger) -> None:
    fill(ledger)
    views = LedgerViews(ledger)
    mine = views.usage(["users"], viewer="ana", admin=False, top=50)
    names = {(c.analyst, c.fingerprint, c.kind) for c in mine.consumers}
    assert names == {
        ("ana", "fa", ConsumerKind.QUERY),
        ("ana", "fs", ConsumerKind.QUERY),
        ("ana", "fb", ConsumerKind.QUERY),
        (OTHERS, "", ConsumerKind.QUERY),
        (ledger_views.EXTERNAL, "", ConsumerKind.EXTERNAL),
    }
    others = next(c for c in mine.consumers if c.analyst == OTHERS)
    # bob's north charge and his two replays on users; his orders charge is out of view.
    assert (others.charges, others.replays) == (1, 2)
    assert mine.cap_changes == () and mine.externals == ()
    assert (mine.own_cache.charges, mine.own_cache.replays) == (3, 1)
    assert (mine.cache.charges, mine.cache.replays) == (4, 3)
    assert mine.cache.hit_rate == pytest.approx(3 / 7)

    admin = views.usage(["users", "orders"], viewer="adm", admin=True, top=50)
    assert {c.analyst for c in admin.consumers} == {"ana", "bob", "adm"}
    assert [e.kind for e in admin.cap_changes] == [
        AdminKind.REGISTER,
        AdminKind.REGISTER,
        AdminKind.CAP_CHANGE,
    ]
    (external,) = admin.externals
    assert external.note == "training" and external.epsilon == pytest.approx(
        zcdp_curve(0.004).epsilon(1e-6)
    )
    eps = [c.epsilon for c in admin.consumers]
    assert eps == sorted(eps, reverse=True)
    assert len(views.usage(["users"], viewer="adm", admin=True, top=2).consumers) == 2
    only_orders = views.usage(["orders"], viewer="bob", admin=False, top=50)
    assert [s.population for s in only_orders.series] == ["orders"]


def test_long_series_are_thinned_keeping_the_ends(ledger: SQLiteLedger) -> None:
    for i in range(30):
        ledger.charge("users", zcdp_curve(0.0001), analyst="ana", fingerprint=f"f{i}")
    usage = LedgerViews(ledger, max_points=7).usage(["users"], viewer="ana", admin=False, top=5)
    (series,) = usage.series
    assert len(series.epsilon) == 7
    assert series.epsilon[-1].value == pytest.approx(ledger.spent("users").epsilon)
    full = LedgerViews(ledger).usage(["users"], viewer="ana", admin=False, top=5).series[0]
    assert series.epsilon[0] == full.epsilon[0] and len(full.epsilon) == 30


def test_memory_keeps_a_bounded_series_with_its_ends(
    ledger: SQLiteLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_views, "KEEP_POINTS", 8)
    for i in range(20):
        ledger.charge("users", zcdp_curve(0.0001), analyst="ana", fingerprint=f"f{i}")
    views = LedgerViews(ledger)
    (series,) = views.usage(["users"], viewer="ana", admin=False, top=5).series
    assert 4 <= len(series.epsilon) <= 8
    first = ledger.history("users", limit=10)
    first_charge = next(e for e in first if e.kind == "charge")
    assert series.epsilon[0].ts == first_charge.ts
    assert series.epsilon[-1].value == pytest.approx(ledger.spent("users").epsilon)
    assert [p.ts for p in series.epsilon] == sorted(p.ts for p in series.epsilon)


def test_history_names_the_releases_dpsql_made_itself(ledger: SQLiteLedger) -> None:
    """A charge whose note is an automatic release's (proxy/released_once.py) carries
    that note into the history; the analyst's own queries carry none, and a replay of
    either keeps what its charge said."""
    q = ledger.charge("users", zcdp_curve(0.01), analyst="ana", fingerprint="fq", note="query fq")
    h = ledger.charge(
        "users", zcdp_curve(0.01), analyst="ana", fingerprint="fh", note="auto bounds of t"
    )
    ledger.replay(h.event_id, analyst="ana", fingerprint="fh")
    ledger.replay(q.event_id, analyst="ana", fingerprint="fq")
    ana = {e.fingerprint: e for e in LedgerViews(ledger).history("ana", 10)}
    assert (ana["fh"].automatic, ana["fh"].asks) == ("auto bounds of t", 2)
    assert (ana["fq"].automatic, ana["fq"].asks) == ("", 2)
