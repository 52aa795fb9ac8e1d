"""The stored form of the ledger, shared by every store (SQLite, PostgreSQL).

How an event, a curve and a list of populations are written and read back, the hash
chain over events, the step check of one stored own total, the admission of one spend
against a store's current state, and the full recomputation behind ``verify()``. The
stores differ only in how they talk to their database; a log written by one verifies
under the other's rules because both use the functions below.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from accounting.ledger import (
    COST_KINDS,
    EMPTY_TOTAL,
    EVENT_KINDS,
    SEPARATOR,
    BudgetExhausted,
    Event,
    InvalidRequest,
    Partitioning,
    PopulationSpec,
    Receipt,
    Spend,
    Total,
    admit,
    admit_share,
    affected_populations,
    ancestors_or_self,
    check_partition,
    check_population_name,
    epsilon_at,
    normalize_targets,
    root_of,
)
from accounting.rdp import ORDERS, ZERO, Curve, CurveError

SCHEMA_VERSION = "1"
GENESIS = "0" * 64
MAX_PROBLEMS = 200
ORDERS_JSON = json.dumps(list(ORDERS))
# The columns of an event row, in the order the hash chain covers them (``hash`` last).
EVENT_COLS = (
    "id, ts, kind, populations, curve, delta_extra, analyst, fingerprint, note, parent_id, "
    "cap, delta, hash"
)


class Inconsistent(Exception):
    """The store contradicts itself; the ledger must stop answering."""


# json.dumps with any option builds a new encoder per call (a fifth of its cost on an
# event row); one encoder with dumps' other defaults writes the same text.
_COMPACT = json.JSONEncoder(separators=(",", ":"))
# Even that encoder builds its C scanner per call (about 2 µs, four times a charge).
# The items an event holds — text, int, float, None — are written here as the C encoder
# writes them (``encode_basestring_ascii``, ``int.__repr__``, ``float.__repr__`` and
# JSON's words for NaN and the infinities); anything else goes to ``_COMPACT``. Same
# bytes, so the hash chain is unchanged (tests/accounting/test_ledger_single_caller.py).
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii
_INT_REPR, _FLOAT_REPR = int.__repr__, float.__repr__


def json_item(value: Any) -> str:
    """``_COMPACT.encode(value)`` for one item of an event row."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if kind is int:
        return _INT_REPR(value)
    if kind is float:
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        return _FLOAT_REPR(value)
    if value is None:
        return "null"
    return _COMPACT.encode(value)


def json_items(values: Iterable[Any]) -> str:
    """The items of ``_COMPACT.encode(list(values))``, without its brackets."""
    return ",".join(map(json_item, values))


def names_json(names: Sequence[str]) -> str:
    return f"[{json_items(names)}]"


# Curves are stored packed: this prefix, then the base64 of the values as little-endian
# float64 (bit-exact, a fifth of the time of writing 109 floats as JSON and half the
# bytes). Rows written before issue 18 hold a JSON list; the SQLite store's own totals
# are raw bytes (:func:`curve_blob`); all three are read.
PACKED_CURVE = "f64le:"
_PACKED_BYTES = 8 * len(ORDERS)
_NATIVE_IS_F64LE = np.dtype(float) == np.dtype("<f8")


def curve_json(curve: Curve) -> str:
    """A curve's stored text (the packed form; the name predates it)."""
    raw = binascii.b2a_base64(curve_blob(curve), newline=False)
    return PACKED_CURVE + raw.decode("ascii")


def curve_blob(curve: Curve) -> bytes:
    """A curve as raw little-endian float64 bytes: the SQLite store's form of an own
    total (totals rows are outside the hash chain). 872 bytes keep a totals row within
    one 4 KiB b-tree page, where the packed text (1,170 bytes) spilled into an overflow
    page: one more page written and fsynced per charge."""
    array = curve.as_array()
    # A curve's array is native float64: on a little-endian machine its bytes are the
    # stored form as they are (no converted copy).
    return array.tobytes() if _NATIVE_IS_F64LE else array.astype("<f8").tobytes()


def parse_curve(text: str | bytes | None) -> Curve:
    if text is None:
        return ZERO
    try:
        if isinstance(text, bytes):
            return _unpack(text)
        if text.startswith(PACKED_CURVE):
            return _unpack(base64.b64decode(text[len(PACKED_CURVE) :], validate=True))
        # json writes floats with repr, which round-trips exactly (inf as Infinity).
        values = json.loads(text)
        if not isinstance(values, list):
            raise Inconsistent(f"stored curve is not a list: {text[:40]!r}")
        return Curve.from_array(values)
    except (ValueError, TypeError, CurveError) as exc:
        raise Inconsistent(f"unreadable stored curve: {exc}") from exc


def _unpack(raw: bytes) -> Curve:
    if len(raw) != _PACKED_BYTES:
        raise Inconsistent(f"stored curve has {len(raw)} bytes, not {_PACKED_BYTES}")
    values = np.frombuffer(raw, dtype="<f8").astype(float)
    # Curve's own check (>= 0 is False for NaN too), on the array already made.
    if not bool((values >= 0.0).all()):
        raise Inconsistent("stored curve has a negative or NaN value")
    return Curve._of(values)


def parse_names(text: str) -> tuple[str, ...]:
    try:
        names = json.loads(text)
    except ValueError as exc:
        raise Inconsistent(f"unreadable population list {text[:40]!r}") from exc
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise Inconsistent(f"malformed population list {text[:40]!r}")
    return tuple(names)


def digest(prev: str, row: Sequence[Any]) -> str:
    """Hash chaining an event (all columns but ``hash``, exactly as stored) to its
    predecessor, so that an edit that slips past the store's guards is still detected."""
    payload = f"[{json_item(prev)},{json_items(row)}]"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EventTail:
    """The columns of an event after ``ts`` as stored, and the text :func:`digest`
    writes for them, encoded before the event's id, time and predecessor are known
    (outside the store's write lock)."""

    columns: tuple[Any, ...]
    text: bytes

    @classmethod
    def of(cls, columns: tuple[Any, ...]) -> EventTail:
        # The list's items joined as JSON joins them, then the closing bracket.
        return cls(columns, f",{json_items(columns)}]".encode())

    @classmethod
    def of_spend(
        cls,
        kind: str,
        names: Sequence[str],
        curve: Curve,
        delta_extra: float,
        analyst: str,
        fingerprint: str,
        note: str,
    ) -> EventTail:
        """The tail of a charge or external charge, as :func:`event_row` stores it. The
        packed curve (``f64le:`` and base64: nothing JSON escapes) is quoted as is
        instead of being scanned by the encoder (most of the event's text)."""
        columns = event_row(
            0,
            0.0,
            kind,
            names,
            curve=curve,
            delta_extra=delta_extra,
            analyst=analyst,
            fingerprint=fingerprint,
            note=note,
            parent_id=None,
            cap=None,
            delta=None,
        )[2:]
        text = f',{json_items(columns[:2])},"{columns[2]}",{json_items(columns[3:])}]'
        return cls(columns, text.encode("utf-8"))

    def digest(self, prev: str, event_id: int, ts: float) -> str:
        """``digest(prev, (event_id, ts, *self.columns))``, with the tail's text already
        encoded: the same bytes hashed (a list's JSON is its items' JSON joined by
        commas, each item encoded alone as inside the list)."""
        head = f"[{json_item(prev)},{json_item(event_id)},{json_item(ts)}"
        h = hashlib.sha256(head.encode("utf-8"))
        h.update(self.text)
        return h.hexdigest()


def check_text(name: str, value: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string, got {type(value).__name__}")
    return value


def check_cap(epsilon_cap: float) -> float:
    cap = float(epsilon_cap)
    if math.isnan(cap) or math.isinf(cap) or cap < 0:
        raise InvalidRequest(f"epsilon_cap must be finite and >= 0, got {epsilon_cap!r}")
    return cap


def check_registration(spec: PopulationSpec) -> tuple[str, float, float]:
    """Validate a root's spec before registering it: (name, cap, δ) or InvalidRequest."""
    name = check_population_name(spec.name)
    if SEPARATOR in name:
        raise InvalidRequest(f"only roots are registered; {name!r} is a partition")
    cap = check_cap(spec.epsilon_cap)
    delta = float(spec.delta)
    if not 0.0 < delta < 1.0:
        raise InvalidRequest(f"delta must lie in (0, 1), got {spec.delta!r}")
    for s in spec.shares:
        if not (isinstance(s.share, float | int) and 0 < s.share <= 1):
            raise InvalidRequest(f"share of {s.analyst!r} must lie in (0, 1], got {s.share!r}")
    return name, cap, delta


def event_row(
    event_id: int,
    ts: float,
    kind: str,
    names: Sequence[str],
    *,
    curve: Curve | None,
    delta_extra: float,
    analyst: str,
    fingerprint: str,
    note: str,
    parent_id: int | None,
    cap: float | None,
    delta: float | None,
    texts: tuple[str, str] | None = None,
) -> tuple[Any, ...]:
    """The columns of a new event as stored (all but ``hash``), in ``EVENT_COLS`` order.
    ``texts``: ``names_json(names)`` and ``curve_json(curve)``, when already encoded."""
    curve_text: str | None
    if texts is not None:
        names_text, curve_text = texts
    else:
        names_text = names_json(names)
        curve_text = None if curve is None else curve_json(curve)
    return (
        event_id,
        ts,
        kind,
        names_text,
        curve_text,
        float(delta_extra),
        check_text("analyst", analyst),
        check_text("fingerprint", fingerprint),
        check_text("note", note),
        parent_id,
        cap,
        delta,
    )


def event_from_row(r: Sequence[Any]) -> Event:
    return Event(
        id=int(r[0]),
        ts=float(r[1]),
        kind=str(r[2]),
        populations=parse_names(r[3]),
        curve=parse_curve(r[4]),
        delta_extra=float(r[5]),
        analyst=str(r[6]),
        fingerprint=str(r[7]),
        note=str(r[8]),
        parent_id=None if r[9] is None else int(r[9]),
        cap=None if r[10] is None else float(r[10]),
        delta=None if r[11] is None else float(r[11]),
    )


def check_head(head: Sequence[Sequence[Any]]) -> None:
    """The newest one or two event rows (newest first, ``EVENT_COLS``): the last link
    of the hash chain holds."""
    if not head:
        return
    prev = head[1][-1] if len(head) > 1 else GENESIS
    if len(head) == 1 and head[0][0] != 1:
        raise Inconsistent("the first event is missing")
    if digest(prev, head[0][:-1]) != head[0][-1]:
        raise Inconsistent(f"hash chain broken at event {head[0][0]}")


def total_step(
    name: str,
    latest: Sequence[Any],
    previous: Sequence[Any] | None,
    event: Sequence[Any] | None,
    known: Total | None = None,
) -> Total:
    """The latest own total of ``name`` after checking that it is the previous one plus
    the event it claims to follow (one step of verify, per charge).

    ``latest``/``previous`` are totals rows (event_id, curve, delta_extra, events);
    ``event`` is that event's (kind, populations, curve, delta_extra), None if missing;
    ``known``, when given, is ``previous`` as already read (the caller has checked the
    row is the one it read it from). A row whose fields are not numbers of their kind
    (SQLite keeps any value in any column) is Inconsistent, as any other bad row.
    """
    try:
        return _total_step(name, latest, previous, event, known)
    except (TypeError, ValueError, OverflowError) as exc:
        raise Inconsistent(
            f"stored total of {name!r} at event {latest[0]} is not a total: {exc}"
        ) from None


def _total_step(
    name: str,
    latest: Sequence[Any],
    previous: Sequence[Any] | None,
    event: Sequence[Any] | None,
    known: Total | None,
) -> Total:
    prev = (
        EMPTY_TOTAL
        if previous is None
        else known
        if known is not None
        else Total(parse_curve(previous[1]), float(previous[2]), int(previous[3]))
    )
    if event is None or event[0] not in COST_KINDS or name not in parse_names(event[1]):
        raise _unfollowed(name, latest)
    expected = prev.plus(parse_curve(event[2]), float(event[3]))
    stored = latest[1]
    if (
        type(stored) is bytes
        and stored == curve_blob(expected.curve)
        and float(latest[2]) == expected.delta_extra
        and int(latest[3]) == expected.events
    ):
        # The stored row holds exactly the bytes of the sum (schema 2's raw curve):
        # equal to it, without unpacking and comparing 109 values.
        return expected
    total = Total(parse_curve(stored), float(latest[2]), int(latest[3]))
    if expected != total:
        raise _unfollowed(name, latest)
    return total


def _unfollowed(name: str, latest: Sequence[Any]) -> Inconsistent:
    return Inconsistent(
        f"stored total of {name!r} at event {latest[0]} does not follow from the events"
    )


def fold_analyst_events(
    totals: Mapping[str, Total], rows: Iterable[Sequence[Any]]
) -> tuple[int | None, dict[str, Total]]:
    """Own totals of one analyst's cost events, folded forward over event rows
    (id, populations, curve, delta_extra) in id order; returns (last id read, totals)."""
    out = dict(totals)
    last: int | None = None
    for eid, names, curve, dx in rows:
        for name in parse_names(names):
            out[name] = out.get(name, EMPTY_TOTAL).plus(parse_curve(curve), float(dx))
        last = int(eid)
    return last, out


# --- admission of one spend ------------------------------------------------------------


class StoreState(Protocol):
    """What admission reads from a store, inside its serialised write transaction."""

    def spec(self, root: str) -> PopulationSpec: ...

    def known(self, roots: Sequence[str]) -> list[str]: ...

    def own_totals(self, names: Sequence[str]) -> dict[str, Total]:
        """The latest own total of each name (EMPTY_TOTAL if none), step-checked."""
        ...

    def analyst_totals(self, analyst: str) -> dict[str, Total]: ...


@dataclass(frozen=True)
class Admission:
    """An admitted spend, before it is appended: the spends after it, the new own total
    of each target, the targets that become known partitions, and the first target's
    spec (the δ of the receipt's ε)."""

    targets: tuple[str, ...]
    curve: Curve
    delta_extra: float
    spends: tuple[Spend, ...]
    totals: tuple[tuple[str, Total], ...]
    created: tuple[str, ...]
    first: PopulationSpec

    def receipt(self, event_id: int, kind: str) -> Receipt:
        return Receipt(
            event_id=event_id,
            kind=kind,
            populations=self.targets,
            curve=self.curve,
            delta_extra=self.delta_extra,
            epsilon_requested=epsilon_at(self.curve, self.first.delta, self.delta_extra),
            spends=self.spends,
        )


# What a spend naming some targets reaches among some known populations: a pure function
# of the two name lists (immutable strings), asked for by every charge with the same few.
_Reach = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
_REACHES: dict[tuple[tuple[str, ...], tuple[str, ...]], _Reach] = {}


def _reach(targets: tuple[str, ...], known: Sequence[str]) -> _Reach:
    """(affected populations, the populations whose own totals admission reads, sorted,
    the targets not yet known) of a spend naming ``targets`` among ``known``."""
    key = (targets, tuple(known))
    found = _REACHES.get(key)
    if found is None:
        known_set = set(known)
        affected = affected_populations(targets, known)
        needed = {a for p in affected for a in ancestors_or_self(p)} & (known_set | set(targets))
        created = tuple(t for t in targets if t not in known_set)
        found = (affected, tuple(sorted(needed)), created)
        if len(_REACHES) < 4096:
            _REACHES[key] = found
    return found


def admit_spend(
    state: StoreState,
    targets: tuple[str, ...],
    curve: Curve,
    dx: float,
    analyst: str,
    registered: Mapping[str, PopulationSpec],
    check_target: Callable[[str], None],
) -> Admission:
    """Admit a spend naming ``targets`` (normalized) against the store's state, or raise
    (UnknownPopulation, InvalidRequest, BudgetExhausted, ShareExhausted, Inconsistent).

    Preconditions: called inside the store's serialised write transaction; ``registered``
    holds the roots this process registered (with the analysts' shares).
    """
    roots = [root_of(targets[0])] if len(targets) == 1 else sorted({root_of(t) for t in targets})
    specs = {r: state.spec(r) for r in roots}
    for t in targets:
        check_target(t)
    known = state.known(roots)
    affected, needed, created = _reach(targets, known)
    own = state.own_totals(needed)
    # The new own totals first: admit() asks for the same sums (Total.plus keeps the
    # last one while it lives), so the ε it converts stays on the stored total's curve.
    totals = tuple((t, own.get(t, EMPTY_TOTAL).plus(curve, dx)) for t in targets)
    spends = admit(targets, curve, dx, own, specs, known, affected)
    for root in roots:
        spec = registered.get(root)
        share = None if spec is None or not spec.shares else spec.share_of(analyst)
        if spec is not None and share is not None:
            mine = state.analyst_totals(analyst)
            under = [t for t in targets if root_of(t) == root]
            admit_share(analyst, under, curve, dx, mine, spec, share, known)
    return Admission(
        targets=targets,
        curve=curve,
        delta_extra=dx,
        spends=spends,
        totals=totals,
        created=created,
        first=specs[root_of(targets[0])],
    )


def check_target(
    name: str,
    partitionings: Mapping[str, Partitioning | None],
) -> None:
    """Refuse a partition of a root this process did not register with its partitioning,
    or one that partitioning does not define."""
    root = root_of(name)
    if SEPARATOR in name and root not in partitionings:
        raise InvalidRequest(
            f"{name!r}: population {root!r} was not registered with its partitioning "
            "by this process"
        )
    check_partition(name, partitionings.get(root))


# --- verify ------------------------------------------------------------------------------


def recompute(
    events: Iterable[Sequence[Any]],
    totals: Iterator[Sequence[Any]],
    populations: Callable[[], Iterable[Sequence[Any]]],
    problems: list[str],
    partitionings: Mapping[str, Partitioning | None],
) -> tuple[int, int]:
    """Replay every event from the start: hash chain, kinds, admission under the caps in
    force at the time, own totals (bit-exact), the populations they created, and — for
    the roots whose partitioning this process registered — that every partition named
    is one the policy defines. Appends a message per problem; returns (events,
    populations) seen.

    ``events`` yields event rows (``EVENT_COLS``) in id order; ``totals`` yields totals
    rows (population, event_id, curve, delta_extra, events) ordered by (event_id,
    population); ``populations()`` reads (name, root, delta, created_event) rows, once
    the events are done.
    """
    prev_hash, prev_id = GENESIS, 0
    own: dict[str, Total] = {}
    caps: dict[str, float] = {}
    deltas: dict[str, float] = {}
    created: dict[str, tuple[str, float | None, int]] = {}
    charges: set[int] = set()
    pending = next(totals, None)
    n_events = 0

    def problem(msg: str) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(msg)

    for r in events:
        n_events += 1
        eid, kind = int(r[0]), str(r[2])
        if eid != prev_id + 1:
            problem(f"event ids jump from {prev_id} to {eid}")
        if digest(prev_hash, r[:-1]) != r[-1]:
            problem(f"hash chain broken at event {eid}")
        prev_hash, prev_id = str(r[-1]), eid
        stored: dict[str, Total] = {}
        while pending is not None and int(pending[1]) <= eid:
            if int(pending[1]) < eid:
                problem(f"totals row ({pending[0]!r}, {pending[1]}) follows no cost event")
            else:
                try:
                    stored[str(pending[0])] = Total(
                        parse_curve(pending[2]), float(pending[3]), int(pending[4])
                    )
                except Inconsistent as exc:
                    problem(f"totals row ({pending[0]!r}, {eid}): {exc}")
            pending = next(totals, None)
        try:
            ev = event_from_row(r)
        except (Inconsistent, ValueError, TypeError) as exc:
            problem(f"event {eid} is unreadable: {exc}")
            continue
        expected: dict[str, Total] = {}
        if kind not in EVENT_KINDS:
            problem(f"event {eid} has unknown kind {kind!r}")
        elif kind in ("register", "cap_change"):
            root = ev.populations[0]
            if len(ev.populations) != 1 or SEPARATOR in root or ev.cap is None:
                problem(f"{kind} event {eid} is malformed")
            elif kind == "register":
                if ev.delta is None:
                    problem(f"register event {eid} has no delta")
                elif root not in created:
                    created[root] = (root, ev.delta, eid)
                    deltas[root] = ev.delta
                elif deltas[root] != ev.delta:
                    problem(f"register event {eid} changes the delta of {root!r}")
                caps[root] = ev.cap
            elif root not in caps:
                problem(f"cap_change event {eid} names unregistered {root!r}")
            else:
                caps[root] = ev.cap
        elif kind == "replay":
            if ev.parent_id not in charges or not ev.curve.is_zero():
                problem(f"replay event {eid} does not point at an earlier charge")
        else:
            roots = sorted({root_of(p) for p in ev.populations})
            unknown = [x for x in roots if x not in caps]
            if unknown:
                problem(f"event {eid} charges unregistered populations {unknown}")
                continue
            try:
                targets = normalize_targets(ev.populations)
            except InvalidRequest as exc:
                problem(f"event {eid}: {exc}")
                continue
            if targets != ev.populations:
                problem(f"event {eid} names populations that are not normalized")
            for t in targets:
                if root_of(t) in partitionings:
                    try:
                        check_partition(t, partitionings[root_of(t)])
                    except InvalidRequest as exc:
                        problem(f"event {eid}: {exc}")
            known = [n for n, c in created.items() if c[0] in roots]
            specs = {x: PopulationSpec(x, caps[x], deltas[x]) for x in roots}
            try:
                admit(targets, ev.curve, ev.delta_extra, own, specs, known)
            except BudgetExhausted as exc:
                problem(f"event {eid} was admitted over the cap: {exc}")
            for t in targets:
                own[t] = own.get(t, EMPTY_TOTAL).plus(ev.curve, ev.delta_extra)
                expected[t] = own[t]
                created.setdefault(t, (root_of(t), None, eid))
            if kind == "charge":
                charges.add(eid)
        if stored != expected:
            for p in sorted(set(stored) | set(expected)):
                if stored.get(p) != expected.get(p):
                    problem(f"stored total of {p!r} at event {eid} differs from recomputation")
    while pending is not None:
        problem(f"totals row ({pending[0]!r}, {pending[1]}) follows no event")
        pending = next(totals, None)
    table = {
        str(n): (str(root), None if d is None else float(d), int(c))
        for n, root, d, c in populations()
    }
    for name in sorted(set(table) | set(created)):
        if table.get(name) != created.get(name):
            problem(f"population {name!r} in the store differs from its events")
    return n_events, len(created)
