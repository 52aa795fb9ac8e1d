"""The privacy-budget ledger: its interface, value objects and admission arithmetic.

Budgets follow people. A *population* is a set of persons named like a path: a root
(``users``) is registered from the policy with an ε cap at its δ; a partition
(``users/region=north``) is a subset of the root's persons, inherits the root's cap and
δ, and springs into existence on its first charge. Every person of a partition is also
a person of each of its ancestors, so the cost a person of population P has borne is

    own(P) + own(parent(P)) + … + own(root)

where ``own(X)`` composes the events that named X itself. A charge naming X therefore
reaches every person of X and of every partition below X; it is admitted only if, for
each such population, the composed curve converted at δ − Σδ_thr stays within the cap
(parallel composition across disjoint partitions, sequential composition along the
ancestry). Everything in this module is pure arithmetic; the store lives in
``store_sqlite.py``.
"""

from __future__ import annotations

import math
import weakref
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

from accounting.rdp import ZERO, Curve

EVENT_KINDS: tuple[str, ...] = ("charge", "replay", "external", "cap_change", "register")
COST_KINDS: frozenset[str] = frozenset({"charge", "external"})
SEPARATOR = "/"


class LedgerError(Exception):
    """Base of every refusal or failure raised by a ledger."""


class BudgetExhausted(LedgerError):
    """A charge would take some affected population over its cap; nothing was appended.

    All figures are ε at the population's δ (less the thresholding δ): ``requested`` is
    the request's curve alone, ``spent`` what the tightest affected population had
    already spent, ``cap`` that population's cap.
    """

    def __init__(self, population: str, requested: float, spent: float, cap: float) -> None:
        self.population = population
        self.requested = requested
        self.spent = spent
        self.cap = cap
        super().__init__(
            f"privacy budget of population {population!r} exhausted: spent ε={spent:.6g}, "
            f"requested ε={requested:.6g}, cap ε={cap:.6g}"
        )

    def __reduce__(self) -> tuple[type[BudgetExhausted], tuple[str, float, float, float]]:
        # Keeps the exception picklable across processes despite the custom __init__.
        return (type(self), (self.population, self.requested, self.spent, self.cap))


class ShareExhausted(BudgetExhausted):
    """A charge would take one analyst over their share of a population (``cap`` is the
    share's ε, ``spent`` what that analyst's own events already cost)."""

    def __init__(
        self, population: str, requested: float, spent: float, cap: float, analyst: str = ""
    ) -> None:
        super().__init__(population, requested, spent, cap)
        self.analyst = analyst
        self.args = (
            f"analyst {analyst!r}'s share of population {population!r} exhausted: spent "
            f"ε={spent:.6g}, requested ε={requested:.6g}, share ε={cap:.6g}",
        )

    def __reduce__(self) -> tuple[type[ShareExhausted], tuple[str, float, float, float, str]]:  # type: ignore[override]
        return (type(self), (self.population, self.requested, self.spent, self.cap, self.analyst))


class LedgerUnavailable(LedgerError):
    """The store cannot be read, is inconsistent or failed verification: answer nothing."""


class UnknownPopulation(LedgerError, LookupError):
    """The population's root was never registered."""


class InvalidRequest(LedgerError, ValueError):
    """An argument breaks a precondition (bad name, negative δ, unknown parent, …)."""


@dataclass(frozen=True)
class Partitioning:
    """How a root population may be split: by one column on which each person has
    exactly one value, into the partitions ``root/column=value`` for ``value`` in
    ``values`` (as :func:`partition_name` spells them). Partitions are disjoint only
    because of that, so the ledger accepts no other partition names."""

    column: str
    values: frozenset[str]


@dataclass(frozen=True)
class AnalystShare:
    """The most one analyst may spend of a root population: ``share`` of its ε cap and
    of its δ, for that analyst's own events alone (so that one analyst cannot lock the
    others out). The population's cap still holds for everyone together."""

    analyst: str
    share: float


@dataclass(frozen=True)
class PopulationSpec:
    """A root population from the policy: ε cap over the life of the data, at δ, its
    partitioning, if any (without one, no partition of it is accepted), and the shares
    of analysts who are limited to part of it."""

    name: str
    epsilon_cap: float
    delta: float
    partitioning: Partitioning | None = None
    shares: tuple[AnalystShare, ...] = ()

    def share_of(self, analyst: str) -> float | None:
        return next((s.share for s in self.shares if s.analyst == analyst), None)


@dataclass(frozen=True)
class Total:
    """Own accumulated cost of one population: the cost-bearing events that named it."""

    curve: Curve = ZERO
    delta_extra: float = 0.0
    events: int = 0

    def plus(self, curve: Curve, delta_extra: float) -> Total:
        """This total composed with one more event (order-wise sum, additive δ).

        The last result is kept with the total (immutable, like its arguments): a
        charge asks for the same sum twice, for admission (:func:`admit`) and for the
        new own total it stores, and sharing the result lets the ε that admission
        converted be found on the curve again (:meth:`Curve.epsilon`) when the next
        charge reads that total back as its "before"."""
        last = self.__dict__.get("_last_plus")
        if (
            last is not None
            and last[0] is curve
            and last[1] == delta_extra
            and math.copysign(1.0, last[1]) == math.copysign(1.0, delta_extra)
            and (kept := last[2]()) is not None
        ):
            return kept
        out = Total(self.curve + curve, self.delta_extra + delta_extra, self.events + 1)
        # Weakly: each total would otherwise keep every later one alive (a process's
        # mirror holds an early total for as long as it runs).
        object.__setattr__(self, "_last_plus", (curve, delta_extra, weakref.ref(out)))
        return out


EMPTY_TOTAL = Total()


def epsilon_at(curve: Curve, delta: float, delta_extra: float) -> float:
    """ε of ``curve`` at ``delta`` less the thresholding δ; +inf once that δ is used up.

    Preconditions: 0 < delta < 1, delta_extra ≥ 0. Privacy claim: a mechanism with this
    curve plus δ_thr-approximate thresholding is (ε, delta)-DP (δ's add up); the zero
    curve reveals nothing, so its ε is 0.
    """
    if delta_extra >= delta:
        return math.inf
    # A curve with a positive last order is not zero (the common case: no array scan).
    if curve.as_array()[-1] == 0.0 and curve.is_zero():
        # Exactly 0: the grid-limited CKS bound of the zero curve is not (≈0.03 at 1e-6).
        return 0.0
    return curve.epsilon(delta - delta_extra)


@dataclass(frozen=True)
class Spend:
    """What the persons of one population have spent, as a curve and as ε at δ."""

    population: str
    curve: Curve
    delta_extra: float
    epsilon: float
    cap: float
    delta: float
    moved: float = 0.0  # on a receipt: how much this charge raised ``epsilon``

    @property
    def remaining(self) -> float:
        return max(0.0, self.cap - self.epsilon)

    @classmethod
    def of(cls, population: str, total: Total, cap: float, delta: float) -> Spend:
        """The spend of a population whose composed (own + ancestors) total is ``total``."""
        eps = epsilon_at(total.curve, delta, total.delta_extra)
        return cls(population, total.curve, total.delta_extra, eps, cap, delta)


@dataclass(frozen=True)
class Receipt:
    """Proof of an admitted charge: its event id and the spends after it.

    ``epsilon_requested`` is the request's curve alone at the first named population's δ
    less ``delta_extra``; ``spends`` covers every affected population (named ones and the
    known partitions below them).
    """

    event_id: int
    kind: str
    populations: tuple[str, ...]
    curve: Curve
    delta_extra: float
    epsilon_requested: float
    spends: tuple[Spend, ...]


@dataclass(frozen=True)
class Event:
    """One immutable ledger entry. ``cap`` is set on register/cap_change, ``delta`` on
    register, ``parent_id`` on replay; zero-cost kinds carry the zero curve."""

    id: int
    ts: float
    kind: str
    populations: tuple[str, ...]
    curve: Curve
    delta_extra: float
    analyst: str
    fingerprint: str
    note: str
    parent_id: int | None
    cap: float | None
    delta: float | None = None


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    events: int
    populations: int
    problems: tuple[str, ...]


# --- names ---------------------------------------------------------------------------


def check_population_name(name: str) -> str:
    """Return ``name`` if it is a well-formed population path, else raise InvalidRequest.

    Segments are non-empty, contain no control characters and no surrounding blanks;
    a partition value containing ``/`` must be escaped by the caller.
    """
    if type(name) is str and name in _WELL_FORMED:
        return name
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"population name must be a non-empty string, got {name!r}")
    for seg in name.split(SEPARATOR):
        if not seg or seg != seg.strip() or any(ord(c) < 32 or ord(c) == 127 for c in seg):
            raise InvalidRequest(f"malformed population name {name!r}")
    if type(name) is str and len(_WELL_FORMED) < 4096:
        _WELL_FORMED.add(name)
    return name


# Names already found well formed (a pure test of an immutable str; every charge names
# the same few populations, whose character-by-character scan cost more than the rest
# of the check).
_WELL_FORMED: set[str] = set()


def partition_name(root: str, column: str, value: object) -> str:
    """Ledger name of one partition, e.g. ``users/region=north``: the column as given,
    the value as text with ``%`` and ``/`` percent-escaped, so that a value can never
    name a deeper population."""
    escaped = str(value).replace("%", "%25").replace("/", "%2F")
    return f"{root}{SEPARATOR}{column}={escaped}"


def check_partition(name: str, partitioning: Partitioning | None) -> None:
    """Refuse a partition name the root's partitioning does not define.

    Parallel composition charges sibling partitions independently, which is sound only
    when they are disjoint sets of persons: one declared column with one value per
    person, spelled exactly as :func:`partition_name` does, a value from its domain, and
    one level deep. Preconditions: ``name`` is well formed. Raises InvalidRequest.
    """
    segs = name.split(SEPARATOR)
    if len(segs) == 1:
        return
    root = segs[0]
    if partitioning is None:
        raise InvalidRequest(f"{name!r}: population {root!r} has no partitions in the policy")
    allowed = sorted(partition_name(root, partitioning.column, v) for v in partitioning.values)
    if len(segs) != 2 or name not in allowed:
        shown = ", ".join(allowed[:6]) + (", …" if len(allowed) > 6 else "")
        raise InvalidRequest(
            f"{name!r} is not a partition the policy defines; {root!r} is partitioned "
            f"by {partitioning.column!r} only: {shown}"
        )


def root_of(name: str) -> str:
    return name.split(SEPARATOR, 1)[0]


def ancestors_or_self(name: str) -> tuple[str, ...]:
    """``a/b/c`` → (``a``, ``a/b``, ``a/b/c``): the root first."""
    if SEPARATOR not in name:
        return (name,)
    segs = name.split(SEPARATOR)
    return tuple(SEPARATOR.join(segs[: i + 1]) for i in range(len(segs)))


def is_within(name: str, ancestor: str) -> bool:
    """Whether every person of ``name`` is a person of ``ancestor``."""
    return name == ancestor or name.startswith(ancestor + SEPARATOR)


def normalize_targets(names: str | Sequence[str]) -> tuple[str, ...]:
    """The named populations of one event, deduplicated, without names already covered.

    One event reaches each person at most once: naming ``users`` and
    ``users/region=north`` together is the same as naming ``users``. Order of first
    appearance is kept. Preconditions: at least one well-formed name.
    """
    if isinstance(names, str):
        return (check_population_name(names),)
    raw = tuple(names)
    if not raw:
        raise InvalidRequest("a charge must name at least one population")
    uniq: list[str] = []
    for n in raw:
        check_population_name(n)
        if n not in uniq:
            uniq.append(n)
    return tuple(n for n in uniq if not any(o != n and is_within(n, o) for o in uniq))


def affected_populations(targets: Sequence[str], known: Iterable[str]) -> tuple[str, ...]:
    """Every population whose persons an event naming ``targets`` reaches, sorted:
    the targets and each known population below one of them."""
    out = set(targets)
    for k in known:
        if any(is_within(k, t) for t in targets):
            out.add(k)
    return tuple(sorted(out))


def composed_total(name: str, own: Mapping[str, Total]) -> Total:
    """The cost borne by a person of ``name``: own totals of the root down to ``name``.

    Summed root first, so the result is bit-for-bit reproducible from the same own totals.
    """
    found = [t for a in ancestors_or_self(name) if (t := own.get(a)) is not None]
    if len(found) == 1:
        # The sum below would be ZERO + the one total: the same values (x + 0.0 == x),
        # and keeping the object keeps what was computed on it (see Total.plus).
        return found[0]
    curve, dx, n = ZERO, 0.0, 0
    for a in ancestors_or_self(name):
        t = own.get(a, EMPTY_TOTAL)
        curve, dx, n = curve + t.curve, dx + t.delta_extra, n + t.events
    return Total(curve, dx, n)


def check_request(curve: Curve, delta_extra: float) -> float:
    """Validate a cost: a Curve and a finite thresholding δ ≥ 0. Returns δ_thr as float."""
    if not isinstance(curve, Curve):
        raise InvalidRequest(f"curve must be an accounting.rdp.Curve, got {type(curve).__name__}")
    dx = float(delta_extra)
    if math.isnan(dx) or math.isinf(dx) or dx < 0:
        raise InvalidRequest(f"delta_extra must be finite and >= 0, got {delta_extra!r}")
    return dx


def admit(
    targets: Sequence[str],
    curve: Curve,
    delta_extra: float,
    own: Mapping[str, Total],
    specs: Mapping[str, PopulationSpec],
    known: Iterable[str],
    affected: tuple[str, ...] | None = None,
) -> tuple[Spend, ...]:
    """Admission rule of the ledger; returns the spends after the charge or refuses.

    Preconditions: ``targets`` normalized (see :func:`normalize_targets`); ``own`` holds
    the current own totals (missing means none); ``specs`` maps every root involved to
    its current cap and δ; ``known`` lists the existing partitions of those roots.
    Privacy claim: if this returns, every person reached by the event — a person of a
    target or of any known population below it — has a composed curve whose conversion
    at δ − Σδ_thr is ≤ the cap of their root; otherwise BudgetExhausted is raised for the
    population that overshoots most, and the caller must append nothing. ``affected``:
    ``affected_populations(targets, known)`` when the caller has it already.
    """
    targets = tuple(targets)
    if affected is None:
        affected = affected_populations(targets, known)
    after: list[Spend] = []
    worst: tuple[float, str, float, float, float] | None = None
    for pop in affected:
        spec = specs[root_of(pop)]
        before = composed_total(pop, own)
        new = before.plus(curve, delta_extra)
        eps = epsilon_at(new.curve, spec.delta, new.delta_extra)  # as Spend.of
        spent = epsilon_at(before.curve, spec.delta, before.delta_extra)
        after.append(
            Spend(pop, new.curve, new.delta_extra, eps, spec.epsilon_cap, spec.delta, eps - spent)
        )
        if not eps <= spec.epsilon_cap:
            over = eps - spec.epsilon_cap
            if worst is None or over > worst[0]:
                requested = epsilon_at(curve, spec.delta, delta_extra)
                worst = (over, pop, requested, spent, spec.epsilon_cap)
    if worst is not None:
        _, pop, requested, spent, cap = worst
        raise BudgetExhausted(pop, requested, spent, cap)
    return tuple(after)


def admit_share(
    analyst: str,
    targets: Sequence[str],
    curve: Curve,
    delta_extra: float,
    own: Mapping[str, Total],
    spec: PopulationSpec,
    share: float,
    known: Iterable[str],
) -> None:
    """Admission rule of an analyst's share: the same rule as :func:`admit`, applied to
    that analyst's own events alone, with ``share``·cap at ``share``·δ.

    Preconditions: as :func:`admit`, with ``own`` the analyst's own totals and every
    target under ``spec``'s root; 0 < share ≤ 1. Privacy claim: none beyond :func:`admit`
    (which must also pass): this only keeps one analyst within their part of the budget.
    Raises ShareExhausted for the population that overshoots most.
    """
    cap, delta = spec.epsilon_cap * share, spec.delta * share
    worst: tuple[float, str, float, float] | None = None
    for pop in affected_populations(tuple(targets), known):
        before = composed_total(pop, own)
        new = before.plus(curve, delta_extra)
        eps = epsilon_at(new.curve, delta, new.delta_extra)
        if not eps <= cap and (worst is None or eps - cap > worst[0]):
            spent = epsilon_at(before.curve, delta, before.delta_extra)
            worst = (eps - cap, pop, epsilon_at(curve, delta, delta_extra), spent)
    if worst is not None:
        _, pop, requested, spent = worst
        raise ShareExhausted(pop, requested, spent, cap, analyst)


# --- the interface ---------------------------------------------------------------------


class Ledger(ABC):
    """A durable, append-only privacy-budget ledger keyed by populations of persons.

    Every method that could let a release happen fails closed: if the store cannot be
    read or is inconsistent, it raises LedgerUnavailable and appends nothing.
    """

    @abstractmethod
    def register(self, spec: PopulationSpec) -> None:
        """Make a root population known (idempotent, called at startup per policy root).

        Preconditions: a root name (no ``/``), 0 ≤ cap < ∞, 0 < δ < 1; δ never changes
        once registered. A cap that differs from the one last registered is recorded as
        a new ``register`` event and becomes the current cap (the policy file changed);
        re-registering the same cap leaves any later ``set_cap`` in force.
        """

    def charge(
        self,
        population: str | Sequence[str],
        curve: Curve,
        delta_extra: float = 0.0,
        *,
        analyst: str,
        fingerprint: str,
        note: str = "",
    ) -> Receipt:
        """Append one ``charge`` event adding ``curve`` (and δ_thr) to each named population.

        Preconditions: every named population's root is registered. Privacy claim: the
        event is durably committed only if :func:`admit` accepts it for every affected
        population at the moment of commit (serialised against all other writers);
        otherwise BudgetExhausted is raised and nothing is appended.
        """
        return self._spend("charge", population, curve, delta_extra, analyst, fingerprint, note)

    def external(
        self,
        population: str,
        curve: Curve,
        delta_extra: float = 0.0,
        *,
        analyst: str,
        note: str,
    ) -> Receipt:
        """Append an ``external`` event (a curve spent by another consumer), same rule as
        :meth:`charge`."""
        if not isinstance(population, str):
            raise InvalidRequest("an external charge names exactly one population")
        return self._spend("external", population, curve, delta_extra, analyst, "", note)

    @abstractmethod
    def _spend(
        self,
        kind: str,
        population: str | Sequence[str],
        curve: Curve,
        delta_extra: float,
        analyst: str,
        fingerprint: str,
        note: str,
    ) -> Receipt:
        """Append one ``charge`` or ``external`` event (``kind``) under :func:`admit`'s rule:
        what :meth:`charge` and :meth:`external` promise, for each store."""

    @abstractmethod
    def replay(self, parent_id: int, *, analyst: str, fingerprint: str, note: str = "") -> int:
        """Append a zero-cost ``replay`` event pointing at the ``charge`` that paid,
        durably before returning, whatever was recorded before (doors record cache hits
        through :meth:`record_replay`, which need not wait for the disk on repeats).

        Preconditions: ``parent_id`` is a charge event. Privacy claim: re-serving a
        released answer is post-processing and costs nothing. Returns the new event id.
        """

    def record_replay(
        self, parent_id: int, *, analyst: str, fingerprint: str, note: str = ""
    ) -> int:
        """Record that ``analyst`` was served charge ``parent_id``'s release (a cache
        hit): a ``replay`` event, whose id is returned.

        The privacy-relevant fact is which analyst has received which release
        (RELIABILITY.md, "Replay records"). The first time an analyst receives a given
        release — the paying charge counts for its own analyst — the event is durable
        before this returns, exactly as :meth:`replay`. A later repeat of the same
        release to the same analyst adds no disclosure: a store may then append its
        event without waiting for the disk to sync it, provided the sync follows within
        about 100 ms, at :meth:`close` and at interpreter exit. Counts of asks and
        replays are then exact after a clean stop, and a crash of the machine may lose
        the last repeats, never a first receipt. A store that cannot tell what it has
        recorded makes every replay durable (this default).

        Preconditions and refusals: as :meth:`replay`; fails closed like it.
        """
        found = self.record_repeat(parent_id, analyst=analyst, fingerprint=fingerprint, note=note)
        if found is not None:
            return found
        return self.replay(parent_id, analyst=analyst, fingerprint=fingerprint, note=note)

    def record_repeat(
        self, parent_id: int, *, analyst: str, fingerprint: str, note: str = ""
    ) -> int | None:
        """The repeat case of :meth:`record_replay` alone: when ``analyst`` already has a
        durable record of charge ``parent_id``'s release, append the ``replay`` event
        without waiting for the disk and return its id; otherwise append nothing and
        return None (the caller then uses :meth:`record_replay`). This default knows no
        pair: always None."""
        return None

    def defer_repeat(
        self, parent_id: int, *, analyst: str, fingerprint: str, note: str = ""
    ) -> bool:
        """:meth:`record_repeat` for a caller that must not wait for the store (a door
        answering on its event loop): when ``analyst`` already has a durable record of
        charge ``parent_id``'s release, queue the ``replay`` event for a commit within
        about 20 ms (its sync follows as for any repeat) and return True; otherwise
        record nothing and return False. A queued repeat the store then fails to commit
        is logged, not raised: the answer is out, and only a count of repeats is short,
        never a first receipt. This default records the repeat at once."""
        found = self.record_repeat(parent_id, analyst=analyst, fingerprint=fingerprint, note=note)
        return found is not None

    @abstractmethod
    def set_cap(self, population: str, epsilon_cap: float, *, reason: str, analyst: str) -> int:
        """Append a ``cap_change`` event for a registered root; returns its id.

        A cap below what was spent is allowed and recorded; every later charge reaching
        that population is then refused.
        """

    @abstractmethod
    def spent(self, population: str) -> Spend:
        """The composed spend of a root or partition (own events plus its ancestors')."""

    def remaining(self, population: str) -> float:
        """ε still available to the persons of ``population`` (0 when over the cap)."""
        return self.spent(population).remaining

    def version(self) -> Hashable | None:
        """A token that changes whenever any process commits an event that can change
        what has been spent or its cap (a charge, an external charge, a cap change, a
        registration); replays need not change it. Equal tokens mean equal
        :meth:`spent`, :meth:`share_spent` and :meth:`populations`, so readers may keep
        figures read under a token until it changes. None: the store cannot tell
        cheaply, and nothing may be kept. Admission never relies on it."""
        return None

    @abstractmethod
    def share_spent(self, population: str, analyst: str) -> Spend | None:
        """What ``analyst``'s own events cost the persons of ``population``, against the
        analyst's share of its root (None when the analyst has no share there)."""

    @abstractmethod
    def populations(self) -> tuple[str, ...]:
        """Registered roots and known partitions, sorted."""

    @abstractmethod
    def history(
        self, population: str | None = None, limit: int = 100, after_id: int = 0
    ) -> list[Event]:
        """Events with id > ``after_id`` in id order, at most ``limit``; with a
        population, only events naming it, an ancestor or a population below it."""

    @abstractmethod
    def verify(self) -> VerifyReport:
        """Recompute every total from the raw events and compare with the stored ones."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; later calls raise LedgerUnavailable."""

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
