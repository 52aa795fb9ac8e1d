"""The number of groups per person K chosen from the data, for queries on tables whose
policy says ``max_groups = "auto"`` (with a ``max_groups_limit``; method and citation:
accounting/group_bounds.py).

K depends on the query's GROUP BY keys, so the release is per *grouping*: the query's
FROM and JOINs (canonical aliases, WHERE left out) and the canonical text of its keys.
The first query with a grouping not seen before releases, once, a DP histogram of how
many distinct groups each person has in it (over all their rows: a filter only lowers
that count, so K never comes out too small for a filtered query), charged to the
population at ``[proxy] auto_bounds_epsilon`` and stored in the release cache under a key
of (population, grouping, data version, bins, mechanism, ε). Every later query with the
same grouping — any analyst, any door — reads it and picks ITS OWN K from it for free, by
what it releases and at what budget (totals want a large K, means and small budgets a
small one: accounting/group_bounds.py); K reaches the plan as the request's max_groups
would, so it is part of the plan's cache key.

No release is needed when K cannot matter or is public: one group per person (the core
uses K = 1), no keys, or a public key domain (K = min(limit, domain size): nobody can be
in more groups than the domain has). Until the histogram is released, ``explain``
shows the limit and says what the first query will pay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from accounting.bounds import CapTarget, RowHistogram
from accounting.calibrate import Mechanism
from accounting.group_bounds import GroupChoice, Selection, choose_groups
from proxy.budgets import Budgets
from proxy.cache import ReleaseStore
from proxy.engines.executor import Executor
from proxy.policy import Policy
from proxy.released_once import AUTOMATIC_NOTE, StoredHistograms, person_bins
from proxy.rewrite import keyed_groups
from proxy.rewrite.total_forms import total_predicate, total_value
from proxy.shape import Shape


@dataclass(frozen=True)
class Grouping:
    """One query's grouping as the release sees it: the population, the distinct
    (person, keys) pairs of its FROM and JOINs (canonical aliases, no WHERE), the keys'
    text and the limit K may not exceed."""

    population: str
    tables: tuple[str, ...]
    pairs_sql: str
    key_sqls: tuple[str, ...]
    limit: int
    # The same pairs as DuckDB runs them: grouped first by their keyed hash, as in the
    # core (proxy/rewrite/keyed_groups.py); ``pairs_sql`` stays the grouping's identity.
    keyed_pairs_sql: str | None = None


@dataclass(frozen=True)
class PendingGroups:
    """What the first query with a grouping pays to choose its K."""

    grouping: Grouping
    epsilon: float


def grouping(shape: Shape, dialect: str) -> Grouping | None:
    """The grouping of a query whose K is "auto" (some private table it reads says so),
    or None when it reads none such. The caller decides whether a release is needed."""
    tables = shape.private_tables()
    limits = [t.policy.auto_groups_limit for t in tables if t.policy.auto_groups_limit]
    if not limits or not shape.keys:
        return None
    select = shape.select.copy()
    for arg in ("group", "having", "order", "limit", "offset", "qualify"):
        select.set(arg, None)
    # Keys and ON conditions in their total forms, as the core runs them: the release
    # reads rows the query's WHERE would drop, and an error there (after the charge)
    # would tell whether such a row exists. Rendered as DuckDB SQL, the executors' input
    # language: they render TRY for their own engine (another dialect drops it).
    by_alias = dict(shape.tables)
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            join.set("on", total_predicate(on, by_alias))
    select.set(
        "expressions",
        [
            exp.alias_(shape.unit.copy(), "__u"),
            *(exp.alias_(total_value(k), f"__k{i}") for i, k in enumerate(shape.keys)),
        ],
    )
    select.set(
        "where", exp.Where(this=exp.Not(this=exp.Is(this=shape.unit.copy(), expression=exp.Null())))
    )
    # the same pairs grouped keyed first (every engine: proxy/engines/render.py keys it
    # the engine's way)
    typer = keyed_groups.typer(shape)
    by_bytes = [keyed_groups.hashed_by_bytes(typer.kind(e.this)) for e in select.expressions]
    grouped = select.copy()
    if grouped.args.get("joins"):
        grouped.set("joins", keyed_groups.keyed_joins(grouped.args["joins"], shape))
    grouped.set(
        "group",
        exp.Group(
            expressions=keyed_groups.keyed_first([e.this.copy() for e in select.expressions], by_bytes)
        ),
    )
    keyed = grouped.sql(dialect="duckdb")
    select.set("distinct", exp.Distinct())
    return Grouping(
        population=shape.population,
        tables=tuple(sorted(t.policy.name for t in tables)),
        pairs_sql=select.sql(dialect="duckdb"),
        key_sqls=tuple(k.sql(dialect=dialect) for k in shape.keys),
        limit=max(limits),
        keyed_pairs_sql=keyed,
    )


class AutoGroups:
    """Release and store the histograms of groups per person; choose each grouping's K."""

    def __init__(self, policy: Policy, executor: Executor, cache: ReleaseStore, budgets: Budgets):
        self.policy = policy
        self._executor = executor
        self._stored = StoredHistograms(policy, cache, budgets)

    def key(self, g: Grouping) -> str:
        return self._stored.person.key("auto-groups", g.population, g.pairs_sql)

    def histogram(self, g: Grouping) -> RowHistogram | None:
        """The released histogram of groups per person, read, or None before release."""
        return self._stored.get(self.key(g), _note(g))

    def choose(
        self,
        g: Grouping,
        targets: Sequence[CapTarget],
        groups: float,
        mechanism: Mechanism,
        selection: Selection | None,
    ) -> GroupChoice | None:
        """K of one query with grouping ``g`` (None before its histogram is released):
        the candidate minimising the estimated error of ``targets`` (their noise at
        K = 1) over about ``groups`` groups, with the partition selection of the query at
        K = 1 when its keys are private (accounting/group_bounds.py)."""
        hist = self.histogram(g)
        if hist is None:
            return None
        l2 = mechanism is Mechanism.GAUSSIAN
        return choose_groups(hist, targets, groups, g.limit, l2=l2, selection=selection)

    def pending(self, g: Grouping) -> PendingGroups | None:
        if self.histogram(g) is not None:
            return None
        return PendingGroups(g, self.policy.proxy.auto_bounds_epsilon)

    def release(self, g: Grouping, analyst: str) -> RowHistogram:
        """Charge for, release and store the histogram of ``g`` (once: a second caller
        finds it stored); returns it, read."""
        return self._stored.release(
            self.key(g),
            _note(g),
            population=g.population,
            analyst=analyst,
            counts=lambda: self.exact_counts(g),
        )

    def exact_counts(self, g: Grouping) -> list[int]:
        """People per power-of-two bin of their number of distinct groups (the last bin
        open above). A NULL key is a group like any other, as GROUP BY makes it; each
        person is one row of the inner count, so removing one moves one bin by one (the
        checker's person-id joins keep every row within its person)."""
        return person_bins(
            self._executor,
            f"SELECT __u, COUNT(*) AS n FROM ({g.keyed_pairs_sql or g.pairs_sql}) AS __g "
            "GROUP BY __u",
        )


def _note(g: Grouping) -> str:
    """The histogram of ``g`` as the ledger and calibration errors name it."""
    return f"{AUTOMATIC_NOTE}max_groups of {', '.join(g.tables)} by {', '.join(g.key_sqls)}"
