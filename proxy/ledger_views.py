"""Read-only views of the ledger for the web console (issue 17): an analyst's own query
history, the composed ε of each population over time, the top consumers and the cache
hit rate.

The ledger is append-only and its event ids grow in commit order (every write is one
serialised transaction), so the views fold the events once, in id order, and on each
call read only the events appended since: a dashboard refresh costs the new events, not
the whole history. Everything here goes through the ledger's public methods
(``history``); nothing is written.

What each view releases is bookkeeping the API already gives in another form (ε spent
per population from GET /v1/budget, an analyst's own charges from the answers it got):
no value computed from private rows. Who asked what is admin-only (GET /v1/ledger), so an
analyst's view names only the analyst itself and sums everybody else up.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum

from accounting.ledger import (
    COST_KINDS,
    Event,
    Ledger,
    Total,
    composed_total,
    epsilon_at,
    is_within,
    root_of,
)
from proxy.released_once import AUTOMATIC_NOTE

PAGE = 1000  # events read per ledger call
MAX_POINTS = 400  # per population series, after thinning
KEEP_POINTS = 4000  # per population in memory: past this, every other point is dropped
OTHERS = "(other analysts)"
_ADMIN_KINDS = frozenset({"register", "cap_change", "external"})
EXTERNAL = "(external charges)"


class ConsumerKind(Enum):
    QUERY = "query"
    EXTERNAL = "external"


class AdminKind(Enum):
    REGISTER = "register"  # a cap set by the policy file
    CAP_CHANGE = "cap_change"  # a cap set through the API
    EXTERNAL = "external"  # budget spent outside dpsql


@dataclass(frozen=True)
class HistoryEntry:
    """One release an analyst asked for (grouped by its cache key)."""

    fingerprint: str  # the plan's cache key, as in the ledger
    charge_id: int  # the charge that paid for the release
    first_ts: float
    last_ts: float
    asks: int  # answers this analyst got: its charge (if it paid) and its replays
    epsilon: float  # ε this analyst's charge cost; 0 when it only replayed
    populations: tuple[str, ...]
    cached: bool = False  # filled in by the engine: the release is still stored
    # What the release was when dpsql made it itself (the histogram behind an "auto"
    # cap, charged to the analyst whose query needed it): its ledger note; "" for the
    # analyst's own queries, whose text the ledger does not keep.
    automatic: str = ""


@dataclass(frozen=True)
class Point:
    ts: float
    value: float


@dataclass(frozen=True)
class Series:
    """Composed ε of one population after each event that reached its persons; the cap
    in force over time (roots only)."""

    population: str
    epsilon: tuple[Point, ...]
    caps: tuple[Point, ...]


@dataclass(frozen=True)
class Consumer:
    analyst: str
    fingerprint: str  # "" for external charges and for summed-up rows
    kind: ConsumerKind
    epsilon: float  # sum of the events' own ε (an upper bound on their composed ε)
    charges: int
    replays: int


@dataclass(frozen=True)
class CacheStats:
    charges: int
    replays: int

    @property
    def hit_rate(self) -> float | None:
        asked = self.charges + self.replays
        return None if asked == 0 else self.replays / asked


@dataclass(frozen=True)
class AdminEvent:
    """A cap change (register or cap_change) or an external charge."""

    id: int
    ts: float
    kind: AdminKind
    population: str
    analyst: str
    note: str
    cap: float | None
    epsilon: float | None


@dataclass(frozen=True)
class Usage:
    series: tuple[Series, ...]
    consumers: tuple[Consumer, ...]
    cache: CacheStats  # every query on the populations in view
    own_cache: CacheStats  # the viewer's own queries
    cap_changes: tuple[AdminEvent, ...]  # empty for analysts
    externals: tuple[AdminEvent, ...]  # empty for analysts


@dataclass
class _Asked:
    charge_id: int
    first_ts: float
    last_ts: float
    asks: int = 0
    epsilon: float = 0.0
    populations: tuple[str, ...] = ()
    automatic: str = ""


@dataclass
class _Tally:
    epsilon: float = 0.0
    charges: int = 0
    replays: int = 0


@dataclass
class _Fold:
    """Everything folded from events 1..after."""

    after: int = 0
    deltas: dict[str, float] = field(default_factory=dict)  # root -> δ
    own: dict[str, Total] = field(default_factory=dict)
    points: dict[str, list[Point]] = field(default_factory=dict)
    caps: dict[str, list[Point]] = field(default_factory=dict)
    # analyst -> fingerprint -> what it asked
    asked: dict[str, dict[str, _Asked]] = field(default_factory=dict)
    # (root, analyst, fingerprint, kind) -> ε, charges, replays
    tallies: dict[tuple[str, str, str, ConsumerKind], _Tally] = field(default_factory=dict)
    admin_events: list[AdminEvent] = field(default_factory=list)


def _thin(points: list[Point], limit: int) -> tuple[Point, ...]:
    """At most ``limit`` points, evenly spaced, always keeping the first and the last."""
    if len(points) <= limit:
        return tuple(points)
    step = (len(points) - 1) / (limit - 1)
    return tuple(points[round(i * step)] for i in range(limit))


class LedgerViews:
    def __init__(self, ledger: Ledger, *, max_points: int = MAX_POINTS):
        self._ledger = ledger
        self._max_points = max_points
        self._fold = _Fold()
        self._lock = threading.Lock()

    # --- reading -----------------------------------------------------------------------
    def _refresh(self) -> _Fold:
        with self._lock:
            fold = self._fold
            while True:
                events = self._ledger.history(None, limit=PAGE, after_id=fold.after)
                for event in events:
                    self._add(fold, event)
                    fold.after = event.id
                if len(events) < PAGE:
                    return fold

    def _epsilon(self, fold: _Fold, population: str, total: Total) -> float:
        delta = fold.deltas.get(root_of(population))
        if delta is None:
            return float("nan")
        return epsilon_at(total.curve, delta, total.delta_extra)

    def _add(self, fold: _Fold, e: Event) -> None:
        if e.kind == "register" and e.delta is not None:
            fold.deltas[e.populations[0]] = e.delta
        if e.cap is not None:
            fold.caps.setdefault(e.populations[0], []).append(Point(e.ts, e.cap))
        root = root_of(e.populations[0]) if e.populations else ""
        alone = None
        if e.kind in COST_KINDS:
            alone = self._add_cost(fold, e, root)
        elif e.kind == "replay":
            key = (root, e.analyst, e.fingerprint, ConsumerKind.QUERY)
            fold.tallies.setdefault(key, _Tally()).replays += 1
            self._asked(fold, e, e.parent_id or 0, 0.0)
        if e.kind in _ADMIN_KINDS:
            fold.admin_events.append(
                AdminEvent(
                    id=e.id,
                    ts=e.ts,
                    kind=AdminKind(e.kind),
                    population=e.populations[0],
                    analyst=e.analyst,
                    note=e.note,
                    cap=e.cap,
                    epsilon=alone,
                )
            )

    def _add_cost(self, fold: _Fold, e: Event, root: str) -> float:
        """Fold a charge or external event; returns its own ε at its population's δ."""
        alone = self._epsilon(fold, e.populations[0], Total().plus(e.curve, e.delta_extra))
        kind = ConsumerKind.EXTERNAL if e.kind == "external" else ConsumerKind.QUERY
        tally = fold.tallies.setdefault((root, e.analyst, e.fingerprint, kind), _Tally())
        tally.epsilon += alone
        tally.charges += 1
        if e.kind == "charge":
            self._asked(fold, e, e.id, alone)
        for name in e.populations:
            fold.own[name] = fold.own.get(name, Total()).plus(e.curve, e.delta_extra)
            fold.points.setdefault(name, [])
        # Every population whose spent this event may move gets a point: the named ones,
        # the partitions below them, and the populations above them (whose spent is that
        # of their persons who have spent the most, as GET /v1/budget reports it).
        spent = {
            name: self._epsilon(fold, name, composed_total(name, fold.own)) for name in fold.points
        }
        for name, points in fold.points.items():
            if any(is_within(name, t) or is_within(t, name) for t in e.populations):
                worst = max(v for q, v in spent.items() if is_within(q, name))
                points.append(Point(e.ts, worst))
                if len(points) > KEEP_POINTS:
                    # Memory stays bounded on a long ledger; the chart shows MAX_POINTS.
                    last = points[-1]
                    del points[1::2]
                    if points[-1] is not last:
                        points.append(last)
        return alone

    @staticmethod
    def _asked(fold: _Fold, e: Event, charge_id: int, epsilon: float) -> None:
        mine = fold.asked.setdefault(e.analyst, {})
        entry = mine.get(e.fingerprint)
        if entry is None:
            entry = mine[e.fingerprint] = _Asked(charge_id, e.ts, e.ts, populations=e.populations)
        entry.asks += 1
        entry.last_ts = e.ts
        entry.epsilon += epsilon
        entry.charge_id = charge_id or entry.charge_id
        if e.kind == "charge" and e.note.startswith(AUTOMATIC_NOTE):
            entry.automatic = e.note

    # --- the views -------------------------------------------------------------------
    def history(self, analyst: str, limit: int) -> tuple[HistoryEntry, ...]:
        """The releases ``analyst`` asked for, the most recently asked first."""
        fold = self._refresh()
        with self._lock:
            mine = sorted(
                fold.asked.get(analyst, {}).items(), key=lambda kv: (-kv[1].last_ts, kv[0])
            )[:limit]
            return tuple(
                HistoryEntry(
                    fingerprint=fp,
                    charge_id=a.charge_id,
                    first_ts=a.first_ts,
                    last_ts=a.last_ts,
                    asks=a.asks,
                    epsilon=a.epsilon,
                    populations=a.populations,
                    automatic=a.automatic,
                )
                for fp, a in mine
            )

    def usage(self, roots: Collection[str], *, viewer: str, admin: bool, top: int) -> Usage:
        """What the dashboard shows for the root populations ``roots``. An admin sees
        every analyst and fingerprint; anybody else sees its own rows by fingerprint and
        one summed row for all other analysts (and one for external charges)."""
        fold = self._refresh()
        scope = set(roots)
        with self._lock:
            series = tuple(
                Series(
                    population=name,
                    epsilon=_thin(points, self._max_points),
                    caps=tuple(fold.caps.get(name, ())),
                )
                for name, points in sorted(fold.points.items())
                if root_of(name) in scope
            ) + tuple(
                Series(population=name, epsilon=(), caps=tuple(caps))
                for name, caps in sorted(fold.caps.items())
                if name in scope and name not in fold.points
            )
            merged: dict[tuple[str, str, ConsumerKind], _Tally] = {}
            everyone, own = _Tally(), _Tally()
            for (root, analyst, fp, kind), t in fold.tallies.items():
                if root not in scope:
                    continue
                if kind is ConsumerKind.QUERY:
                    everyone.charges += t.charges
                    everyone.replays += t.replays
                    if analyst == viewer:
                        own.charges += t.charges
                        own.replays += t.replays
                if admin or analyst == viewer:
                    key = (analyst, fp, kind)
                else:
                    key = (OTHERS if kind is ConsumerKind.QUERY else EXTERNAL, "", kind)
                m = merged.setdefault(key, _Tally())
                m.epsilon += t.epsilon
                m.charges += t.charges
                m.replays += t.replays
            consumers = sorted(
                (
                    Consumer(a, fp, kind, t.epsilon, t.charges, t.replays)
                    for (a, fp, kind), t in merged.items()
                    if t.charges or t.replays
                ),
                key=lambda c: (-c.epsilon, -(c.charges + c.replays), c.analyst, c.fingerprint),
            )[:top]
            admin_events = (
                [e for e in fold.admin_events if root_of(e.population) in scope] if admin else []
            )
            return Usage(
                series=series,
                consumers=tuple(consumers),
                cache=CacheStats(everyone.charges, everyone.replays),
                own_cache=CacheStats(own.charges, own.replays),
                cap_changes=tuple(e for e in admin_events if e.kind is not AdminKind.EXTERNAL)[
                    -top:
                ],
                externals=tuple(e for e in admin_events if e.kind is AdminKind.EXTERNAL)[-top:],
            )
