"""The one way to the privacy-budget ledger: registration from the policy, charges,
replays, and every view of spent / cap / remaining that a door shows.

Every door (CLI, HTTP, Trino, PostgreSQL, the console) reads budgets through this class
(via the engine), so they all report the same figures by one rule:

* a population's **spent** is what its persons who have spent the most have borne — the
  largest composed ε over the population and every known partition below it (a charge
  pinned to ``users/region=north`` reaches only north's persons, so north's persons may
  have spent more than the root's own total says);
* **remaining** is ``cap − spent`` (never below 0), so spent + remaining = cap.

Ledger failures are translated to error codes here, once (:func:`ledger_error`); the
ledger fails closed, and so does every view: an unreadable ledger is an error, never
"nothing spent".
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from accounting.ledger import (
    COST_KINDS,
    BudgetExhausted,
    Event,
    InvalidRequest,
    Ledger,
    LedgerError,
    LedgerUnavailable,
    PopulationSpec,
    Receipt,
    ShareExhausted,
    Spend,
    UnknownPopulation,
    VerifyReport,
    epsilon_at,
    is_within,
    root_of,
)
from accounting.rdp import ORDERS, Curve, CurveError, curve_from_orders, zcdp_curve
from proxy.errors import DPSQLError, bad_request
from proxy.ledger_store import open_ledger
from proxy.policy import Policy

_MAX_VIEWS = 4096  # (population, analyst) pairs kept; all are dropped past it


def ledger_error(error: LedgerError, doing: str) -> DPSQLError:
    """The one translation of a ledger refusal or failure into a dpsql error code.

    ``doing`` says what was attempted, for the message ("charge this query", ...)."""
    details = {}
    if isinstance(error, BudgetExhausted):
        # ``needed`` is what this charge would add to the population's composed total
        # (ε at the population's δ): not the query's own ε, which the engine adds as
        # ``query_epsilon`` (composition makes the two differ).
        details = {
            "population": error.population,
            "needed": error.requested,
            "spent": error.spent,
            "cap": error.cap,
        }
    if isinstance(error, ShareExhausted):
        return DPSQLError(
            "budget_exhausted",
            f"your share of the privacy budget of {error.population} cannot {doing}",
            "ask a cached query, lower epsilon, or ask the operator for a larger share",
            details={**details, "share": True},
        )
    if isinstance(error, BudgetExhausted):
        return DPSQLError(
            "budget_exhausted",
            f"the privacy budget of {error.population} cannot {doing}: it would add "
            f"ε {error.requested:.4g} to the population's total (ε {error.spent:.4g} spent "
            f"of a cap of {error.cap:.4g})",
            "ask a cached query, lower epsilon, or ask the operator for a larger cap",
            details=details,
        )
    if isinstance(error, UnknownPopulation):
        return DPSQLError("not_found", f"cannot {doing}: {error}", "see GET /v1/budget")
    if isinstance(error, InvalidRequest):
        return bad_request(f"the ledger refused to {doing}: {error}", "check the request")
    return DPSQLError(
        "ledger_unavailable",
        f"the budget ledger is unavailable, so dpsql cannot {doing}",
        "the operator must run `dpsql ledger verify` and repair the ledger",
    )


@contextmanager
def _recording_replay() -> Iterator[None]:
    """A replay the ledger cannot record fails closed: nothing is answered."""
    try:
        yield
    except LedgerError:
        raise DPSQLError(
            "ledger_unavailable",
            "the ledger could not record a replay, so nothing is answered",
            "the operator must run `dpsql ledger verify` and repair the ledger",
        ) from None


@dataclass(frozen=True)
class ShareView:
    """One analyst's own spending against their share of a population."""

    analyst: str
    epsilon_cap: float
    epsilon_spent: float
    remaining: float


@dataclass(frozen=True)
class PopulationView:
    """Spent / cap / remaining of one population (root or partition), by the one rule."""

    name: str
    epsilon_cap: float
    delta: float
    epsilon_spent: float  # by its persons who have spent the most
    remaining: float  # epsilon_cap − epsilon_spent, at least 0
    partitions: tuple[PopulationView, ...] = ()
    share: ShareView | None = None


@dataclass(frozen=True)
class EventView:
    """A ledger event with its cost as ε at its population's δ (None for zero-cost
    kinds), for listings."""

    event: Event
    epsilon: float | None


class Budgets:
    """The ledger façade: the policy's populations registered once, every read by the
    one rule above, every failure translated once."""

    def __init__(self, policy: Policy, ledger: Ledger | None = None):
        self.policy = policy
        if ledger is None:
            ledger = open_ledger(policy)  # SQLite beside the policy, or PostgreSQL
        self._ledger = ledger
        try:
            for pop in policy.populations:
                ledger.register(
                    PopulationSpec(
                        pop.name,
                        pop.epsilon_cap,
                        pop.delta,
                        policy.partitioning(pop.name),
                        policy.shares(pop.name),
                    )
                )
        except LedgerUnavailable:
            # Registration needs the store: without it every later call fails closed.
            pass
        # Views by (population, analyst), each with the ledger's version token it was read
        # under: kept until a charge, cap change or registration in any process changes
        # the token (Ledger.version). Display only: admission always reads the store.
        self._views: dict[tuple[str, str | None], tuple[object, PopulationView]] = {}

    @property
    def orders(self) -> tuple[float, ...]:
        """The RDP orders every curve in the ledger is stated at."""
        return tuple(ORDERS)

    @property
    def ledger(self) -> Ledger:
        """The store itself: for the engine and tests; doors use the methods below."""
        return self._ledger

    # --- writes ------------------------------------------------------------------------
    def charge(
        self,
        targets: Sequence[str],
        curve: Curve,
        delta_extra: float,
        *,
        analyst: str,
        fingerprint: str,
        note: str,
    ) -> Receipt:
        try:
            return self._ledger.charge(
                targets, curve, delta_extra, analyst=analyst, fingerprint=fingerprint, note=note
            )
        except LedgerError as error:
            raise ledger_error(error, "pay for this query") from None

    def replay(self, charge_id: int, *, analyst: str, fingerprint: str) -> int:
        """Record a cache hit: durable before the answer the first time ``analyst``
        receives this release; on repeats, appended without waiting for the disk
        (:meth:`Ledger.record_replay`)."""
        with _recording_replay():
            return self._ledger.record_replay(charge_id, analyst=analyst, fingerprint=fingerprint)

    def defer_repeat(self, charge_id: int, *, analyst: str, fingerprint: str) -> bool:
        """Queue the record of a cache hit if ``analyst`` already holds this release,
        waiting for nothing; False, with nothing recorded, otherwise
        (:meth:`Ledger.defer_repeat`)."""
        with _recording_replay():
            return self._ledger.defer_repeat(charge_id, analyst=analyst, fingerprint=fingerprint)

    def external(
        self,
        population: str,
        *,
        rho: float | None = None,
        curve: tuple[Sequence[float], Sequence[float]] | None = None,
        delta_extra: float = 0.0,
        analyst: str,
        note: str,
    ) -> Receipt:
        """An external consumer's spend (e.g. a DP training run), given as a zCDP ρ or
        an RDP curve (orders, values) at exactly the ledger's orders, admitted like a
        query."""
        if (curve is None) == (rho is None):
            raise bad_request(
                "give exactly one of curve and rho", "send an RDP curve or a zCDP rho"
            )
        try:
            cost = zcdp_curve(rho) if rho is not None else curve_from_orders(*curve)  # type: ignore[misc]
        except (CurveError, ValueError) as error:
            raise bad_request(
                f"bad curve: {error}", "values at exactly the orders of GET /v1/ledger, each >= 0"
            ) from None
        try:
            return self._ledger.external(population, cost, delta_extra, analyst=analyst, note=note)
        except LedgerError as error:
            raise ledger_error(error, "record this charge") from None

    def set_cap(self, population: str, epsilon_cap: float, *, reason: str, analyst: str) -> int:
        try:
            return self._ledger.set_cap(population, epsilon_cap, reason=reason, analyst=analyst)
        except LedgerError as error:
            raise ledger_error(error, "change this cap") from None

    # --- reads -------------------------------------------------------------------------
    def _spends(self, population: str) -> tuple[Spend, list[Spend]]:
        known = self._ledger.populations()
        if root_of(population) not in known:
            raise UnknownPopulation(f"population {root_of(population)!r} is not registered")
        own = self._ledger.spent(population)
        below = [
            self._ledger.spent(p) for p in known if p != population and is_within(p, population)
        ]
        return own, below

    def version(self) -> Hashable | None:
        """The ledger's budget token (:meth:`Ledger.version`): figures read under an
        equal token are still current; None when the store cannot tell."""
        try:
            return self._ledger.version()
        except LedgerError as error:
            raise ledger_error(error, "read the budget") from None

    def view(self, population: str, analyst: str | None = None) -> PopulationView:
        """Spent / cap / remaining of ``population`` and its known partitions (and the
        analyst's share of it, if they have one). Raises DPSQLError if unreadable."""
        try:
            token = self._ledger.version()
        except LedgerError as error:
            raise ledger_error(error, "read the budget") from None
        key = (population, analyst)
        if token is not None:
            found = self._views.get(key)
            if found is not None and found[0] == token:
                return found[1]
        # The token is read before the figures, so figures kept under it are never older
        # than the state it names.
        view = self._read_view(population, analyst)
        if token is not None:
            if len(self._views) >= _MAX_VIEWS:
                self._views.clear()
            self._views[key] = (token, view)
        return view

    def _read_view(self, population: str, analyst: str | None) -> PopulationView:
        try:
            own, below = self._spends(population)
            share = None if analyst is None else self._ledger.share_spent(population, analyst)
        except LedgerError as error:
            raise ledger_error(error, "read the budget") from None
        spent = max([own.epsilon, *(s.epsilon for s in below)])
        partitions = tuple(
            PopulationView(s.population, s.cap, s.delta, s.epsilon, s.remaining)
            for s in sorted(below, key=lambda s: s.population)
        )
        return PopulationView(
            name=population,
            epsilon_cap=own.cap,
            delta=own.delta,
            epsilon_spent=spent,
            remaining=max(0.0, own.cap - spent),
            partitions=partitions,
            share=None
            if share is None
            else ShareView(analyst or "", share.cap, share.epsilon, share.remaining),
        )

    def views(
        self, populations: Iterable[str], analyst: str | None = None
    ) -> tuple[PopulationView, ...]:
        return tuple(self.view(p, analyst) for p in populations)

    def remaining(self, population: str) -> float:
        """ε left to the persons of ``population`` who have spent the most."""
        return self.view(population).remaining

    def remaining_after(self, receipt: Receipt, targets: Sequence[str]) -> dict[str, float]:
        """:meth:`remaining` of each target, read off a charge's receipt (it holds the
        spend of every population the charge touched) instead of the ledger."""
        out: dict[str, float] = {}
        for target in targets:
            spends = [s for s in receipt.spends if is_within(s.population, target)]
            if spends:
                cap = spends[0].cap
                out[target] = max(0.0, cap - max(s.epsilon for s in spends))
            else:
                out[target] = self.remaining(target)
        return out

    def moved(self, receipt: Receipt, targets: Sequence[str]) -> dict[str, float]:
        """How much each target's spent (by the one rule) moved with this charge: per
        target, the largest rise among the populations it covers. Composition makes this
        smaller than the query's own ε."""
        out: dict[str, float] = {}
        for target in targets:
            rises = [s.moved for s in receipt.spends if is_within(s.population, target)]
            out[target] = max(rises) if rises else 0.0
        return out

    def populations(self) -> tuple[str, ...]:
        try:
            return self._ledger.populations()
        except LedgerError as error:
            raise ledger_error(error, "read the budget") from None

    def events(
        self, population: str | None = None, limit: int = 100, after_id: int = 0
    ) -> list[EventView]:
        """Ledger events in id order, each cost event with its ε at its root's δ."""
        deltas = {p.name: p.delta for p in self.policy.populations}
        try:
            events = self._ledger.history(population, limit=limit, after_id=after_id)
        except LedgerError as error:
            raise ledger_error(error, "list the ledger") from None
        out = []
        for e in events:
            delta = deltas.get(root_of(e.populations[0])) if e.populations else None
            eps = (
                epsilon_at(e.curve, delta, e.delta_extra)
                if e.kind in COST_KINDS and delta is not None
                else None
            )
            out.append(EventView(e, eps))
        return out

    def verify(self) -> VerifyReport:
        """Recompute every total from the raw events, and check every partition named
        against the policy's."""
        return self._ledger.verify()

    def close(self) -> None:
        self._ledger.close()
