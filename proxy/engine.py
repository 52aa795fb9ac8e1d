"""The one flow every interface shares: parse → bind → check → rewrite → plan → cache →
charge → execute → release → cache → post-process.

docs/ARCHITECTURE.md walks through it. Every door (CLI, HTTP, Trino, PostgreSQL wire)
calls only this class and the budget façade beside it (proxy/budgets.py), so they can
never disagree about what is answered or charged.
"""

from __future__ import annotations

import datetime
import functools
import re
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError

from accounting.calibrate import Mechanism
from accounting.group_bounds import Selection, group_count
from accounting.ledger import Ledger, LedgerError, Receipt
from accounting.mechanisms import secret_seed
from accounting.value_bounds import (
    LowerTarget,
    ValueTarget,
    ValueUse,
    choose_lower,
    choose_upper,
)
from proxy import (
    bigquery_dp,
    catalog_types,
    comma_joins,
    constant_keys,
    domains,
    grouping_sets,
    joined_facts,
    nested,
    per_person_values,
    public_subqueries,
    quantile_release,
    typed_division,
    union_rows,
)
from proxy.auto_bounds import AutoBounds, PendingBounds, cap_targets, filter_keep, totals_use
from proxy.auto_groups import AutoGroups, PendingGroups, grouping
from proxy.auto_values import (
    AutoValues,
    ColumnBounds,
    PendingValueBound,
    Side,
    aggregated_columns,
)
from proxy.bind import bind
from proxy.budget import budget_noise
from proxy.budgets import Budgets, ledger_error
from proxy.cache import ReleaseStore, open_release_cache
from proxy.catalog import Catalog, TableView
from proxy.check import check_key_types, check_shape, check_statement, distinct_as_group_by
from proxy.clock import read_clock
from proxy.data_version import released_version
from proxy.engines import open_executor
from proxy.engines.executor import Executor, frozen_unique_units
from proxy.errors import DPSQLError
from proxy.execute import DuckDBExecutor
from proxy.in_list_layout import check_in_lists
from proxy.intervals import ROW, simulated_columns, simulated_widths, with_row_index
from proxy.memo import Memo
from proxy.outer import check_output_names, outer_sql
from proxy.outer_direct import DirectOuter, compile_outer
from proxy.parse import forget_positions, parse
from proxy.plan import ChosenBound, Plan, build_plan, limits
from proxy.policy import Policy
from proxy.public_queries import (
    PublicExplanation,
    PublicQuery,
    PublicSandbox,
    classify,
    public_result,
)
from proxy.release import PostProcessor, release, release_keys
from proxy.render import output_name
from proxy.request import QueryRequest
from proxy.result import Result, build_result, doubt_warnings
from proxy.rewrite import Core, rewrite
from proxy.rewrite import core as C
from proxy.rewrite.l0 import describe_params, takes_seed
from proxy.shape import Shape
from proxy.unsettled import Unsettled, unsettled

if TYPE_CHECKING:
    from proxy.ledger_views import HistoryEntry, LedgerViews, Usage

PLAN_MEMO_SIZE = 512
# Parsed texts kept for read-only steps: only needed within one new text's first run.
READ_TREES = 64
ROWS_CUT_WARNING = 0.05  # an answer says so when the cap leaves out more of a table
# ... and when the histogram's upper reading of the rows an auto cap leaves out passes this
ROWS_CUT_NOTE = 0.01
# A release an "auto" bound still waits for (paid by the first run that needs it).
Pending = PendingBounds | PendingValueBound | PendingGroups

@dataclass(frozen=True)
class Answer:
    """A post-processed answer (kept per release and outer text)."""

    names: list[str]  # output names, hidden columns included
    rows: list[tuple[Any, ...]]
    # simulated interval half-widths by (released row, output column)
    simulated: dict[tuple[int, int], float | None]
    unsettled: Unsettled  # what the noise could have answered otherwise


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _route_key(request: QueryRequest) -> QueryRequest:
    """What decides a request's route (public or private, nested or not): its text,
    dialect and tables, not who asks or at what budget (nor the session's zone: a text
    with the clock in it never reaches the memos)."""
    return replace(
        request,
        time_zone=None,
        analyst="",
        epsilon=None,
        delta=None,
        rho=None,
        accuracy=None,
        max_groups=None,
        max_rows_per_group=None,
        raw_noise=False,
    )


@dataclass(frozen=True)
class KeyKinds:
    """The keys (by index) the rewrite reads specially: DATE ones, TIMESTAMP ones (both
    within the years 1-9999) and DECIMAL ones (as their text): Core.dated_keys,
    Core.text_keys."""

    dated: frozenset[int] = frozenset()
    timed: frozenset[int] = frozenset()
    text: frozenset[int] = frozenset()

    @staticmethod
    def of(key_types: tuple[str, ...]) -> KeyKinds:
        kinds = [t.upper() for t in key_types]

        def where(test: Callable[[str], bool]) -> frozenset[int]:
            return frozenset(i for i, t in enumerate(kinds) if test(t))

        return KeyKinds(
            where(lambda t: t == "DATE"),
            where(lambda t: t.startswith("TIMESTAMP")),
            where(lambda t: t.startswith("DECIMAL")),
        )


@dataclass(frozen=True, eq=False)
class Structure:
    """The budget-independent part of a plan, memoised per query text and limits."""

    core: Core
    names: tuple[str, ...]
    domain: tuple[tuple[Any, ...], ...] | None
    outer: str
    # "auto" row caps and value bounds not chosen yet: the core assumes their limits
    # until a run pays.
    pending: tuple[Pending, ...] = ()
    # The released table's columns and types (a stand-in row of them validates an outer
    # query before any charge).
    released_columns: tuple[tuple[str, str], ...] = ()
    # What the answer must say whatever the data (the bounds of per-person values).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckedShape:
    """A query parsed, bound and checked: its shape, the output names it gave (if it
    named them all), the derived tables it reads and the request its caps come from."""

    shape: Shape
    names: tuple[str, ...] | None
    per_person: per_person_values.PerPersonQuery | None
    union: union_rows.UnionQuery | None
    outer_request: QueryRequest


@dataclass(frozen=True)
class Route:
    """How a query text is answered: as a release (public None) or exactly, from public
    data only (proxy/public_queries.py)."""

    public: PublicQuery | None


@dataclass(frozen=True)
class Explanation:
    plan: Plan
    shape: Shape
    cached: bool

    def to_dict(self) -> dict[str, Any]:
        """The dry run as plain data, shared by `dpsql explain` and POST /v1/explain."""
        plan = self.plan
        return {
            "core_sql": plan.core_sql,
            "outer_sql": plan.outer_sql,
            "statistics": [
                {
                    "column": n.statistic.column,
                    "kind": n.statistic.kind,
                    "argument": n.statistic.arg_sql,
                    "bounds": [n.statistic.lower, n.statistic.upper],
                    "sensitivity": {
                        "per_group": n.sensitivity.per_group,
                        "l1": n.sensitivity.l1,
                        "l2": n.sensitivity.l2,
                    },
                    "noise": {
                        "mechanism": n.descriptor.mechanism,
                        "scale": n.descriptor.scale,
                        "grid": n.descriptor.grid,
                        "half_width_95": n.descriptor.half_width_95,
                    },
                }
                for n in plan.noise
            ],
            "partition": None
            if plan.threshold is None
            else {
                "mechanism": plan.threshold.mechanism,
                "scale": plan.threshold.scale,
                "tau": plan.threshold.tau,
                "delta": plan.threshold.delta,
                "note": f"a group is shown only if its noisy count of people reaches "
                f"{plan.threshold.tau}: groups of fewer than about {plan.threshold.tau} "
                "people are not shown, larger ones almost always are",
            },
            "quantiles": quantile_release.explain(plan),
            "public_domain_size": None if plan.domain is None else len(plan.domain),
            "limits": {"max_rows_per_group": plan.max_rows, "max_groups": plan.max_groups},
            "auto_bounds": [_pending_dict(p) for p in plan.pending_bounds],
            "chosen_bounds": [c.to_dict() for c in plan.chosen_bounds],
            "cost": {"epsilon": plan.epsilon, "delta": plan.delta, "rho": plan.rho},
            "charges": list(plan.charge_targets),
            "cache": "hit" if self.cached else "miss",
            "cache_key": plan.cache_key,
        }


def _pending_dict(p: Pending) -> dict[str, Any]:
    if isinstance(p, PendingGroups):
        g = p.grouping
        return {
            "tables": list(g.tables),
            "keys": list(g.key_sqls),
            "limit": g.limit,
            "epsilon": p.epsilon,
            "note": f"max_groups (groups per person) for this GROUP BY is chosen from the "
            f"data by the first query with these keys, which also pays epsilon "
            f"{p.epsilon:g} once for a histogram of groups per person; until then the "
            f"limit {g.limit} is used here",
        }
    if isinstance(p, PendingValueBound):
        return {
            "table": p.table,
            "column": p.column,
            "limit": p.limit,
            "epsilon": p.epsilon,
            "side": str(p.side),
            "note": f"the {p.side} bound of {p.table}.{p.column} is chosen from the data by "
            f"the first query that needs it, which also pays epsilon {p.epsilon:g} once "
            f"for a DP histogram of its values (one for both sides when both are auto); "
            f"until then the limit {p.limit:g} is used here",
        }
    return {
        "table": p.table,
        "limit": p.limit,
        "epsilon": p.epsilon,
        "note": f"the row cap of {p.table} is chosen from the data by the first "
        f"query on it, which also pays epsilon {p.epsilon:g} once for a histogram "
        f"of rows per person; until then the limit {p.limit} is shown here",
    }


def output_names(tree: exp.Expr) -> tuple[str, ...] | None:
    if not isinstance(tree, exp.Select):
        return None
    return tuple(output_name(item) for item in tree.expressions)


# A time key's next coarser unit, for the hint when nothing was released.
_COARSER = {
    "second": "minute",
    "minute": "hour",
    "hour": "day",
    "day": "week",
    "week": "month",
    "month": "quarter",
    "quarter": "year",
}
_TRUNC_UNIT = re.compile(r"DATE_TRUNC\(\s*'(\w+)'", re.IGNORECASE)


def _coarser(key_sqls: tuple[str, ...]) -> str:
    """An example of a coarser key: a time key's next unit (more people in each group),
    or a general one."""
    for sql in key_sqls:
        found = _TRUNC_UNIT.search(sql)
        unit = found.group(1).lower() if found else None
        if unit in _COARSER:
            return f"e.g. date_trunc('{_COARSER[unit]}', …) instead of '{unit}'"
    return "e.g. month instead of day"


class Engine:
    def __init__(
        self,
        policy: Policy,
        *,
        ledger: Ledger | None = None,
        executor: Executor | None = None,
        cache: ReleaseStore | None = None,
        post: PostProcessor | None = None,
        version_key: bytes | None = None,
        _unsafe_disable_bounding_for_audit: bool = False,
    ):
        # The flag above skips per-person bounding while charging as if it ran: only the
        # empirical privacy audit sets it, to prove the audit catches a violation.
        self._bounding = not _unsafe_disable_bounding_for_audit
        self.policy = policy
        self.executor: Executor = executor or open_executor(policy)
        self.catalog = Catalog(
            policy,
            self.executor.column_types(),
            self.executor.fan_out,
            frozen_unique_units(self.executor),
        )
        # The only way to the ledger: registration, charges, replays and budget views.
        # Shared state: SQLite files beside the ledger, or PostgreSQL ([ledger] url).
        self.budgets = Budgets(policy, ledger)
        self.cache = cache or open_release_cache(policy)
        # The data version as released: keyed (proxy/data_version.py). ``version_key``
        # replaces the store's key (two engines that must name their data alike).
        key = version_key if version_key is not None else self.cache.version_key()
        policy = replace(policy, data_version=released_version(policy.data_version, key))
        self.policy = policy
        # Row caps chosen from the data for "auto" tables (a stored, paid-once release).
        self.auto_bounds = AutoBounds(policy, self.executor, self.cache, self.budgets)
        self.auto_values = AutoValues(policy, self.executor, self.cache, self.budgets)
        # K chosen from the data per GROUP BY for "auto" tables (paid once per grouping).
        self.auto_groups = AutoGroups(policy, self.executor, self.cache, self.budgets)
        self.post = post or PostProcessor()
        # The clock a request's now() reads (proxy/clock.py); tests set another.
        self.clock: Callable[[], datetime.datetime] = _utc_now
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # Plans depend only on the request and the policy, so repeats skip planning.
        self._plans: Memo[QueryRequest, tuple[Shape, Plan]] = Memo(PLAN_MEMO_SIZE)
        # A query's structure does not depend on its budget.
        self._structures: Memo[QueryRequest, Structure] = Memo(PLAN_MEMO_SIZE)
        # The outer layer reads only released columns, so its check on a stand-in table
        # of the same column types is shared by queries that differ in their filters.
        self._valid_outers: Memo[tuple[str, tuple[tuple[str, str], ...]], bool] = Memo(
            PLAN_MEMO_SIZE
        )
        # Post-processing is deterministic in (released table, outer SQL): keep answers.
        self._answers: Memo[tuple[str, str], Answer] = Memo(PLAN_MEMO_SIZE)
        # Outer layers answered without DuckDB (proxy/outer_direct.py), by text.
        self._direct_outers: Memo[str, tuple[DirectOuter | None]] = Memo(PLAN_MEMO_SIZE)
        # Repeat-hit results by (request without its analyst, charge id, budget token): a
        # cached answer is a pure function of the plan (keyed as _plans is: requests that
        # share a release may differ in their outer layer, names and raw_noise), the
        # release and the remaining budgets it shows, and the token moves whenever those
        # could (Ledger.version). Shared between analysts (results are immutable), so a
        # door may keep what it rendered from one.
        self._hit_results: Memo[tuple[QueryRequest, int, Hashable], Result] = Memo(PLAN_MEMO_SIZE)
        # Read-only folds of the ledger for the web console (see the end of the class),
        # made on first use: a one-shot `dpsql` command never reads them, and importing
        # them was about 5 ms of its start-up.
        self._views_made: LedgerViews | None = None
        self._views_guard = threading.Lock()
        # Queries that read no person data run here, on copies of the public tables.
        self.public = PublicSandbox(policy, self.executor, self.catalog)
        self._routes: Memo[QueryRequest, Route] = Memo(PLAN_MEMO_SIZE)
        # Whether a text is a nested query (and its split), by (sql, dialect): asked on
        # every run, and a parse costs more than the rest of a cache hit.
        self._splits: Memo[
            tuple[str, str, frozenset[str] | None], tuple[nested.NestedQuery | None]
        ] = Memo(PLAN_MEMO_SIZE)
        # The parsed text for the steps that only read it (the nested-query split, the
        # columns whose bounds a query needs): one parse shared by a new text's first
        # run. Never mutated; the steps that rewrite a tree parse their own.
        self._read_trees: Memo[tuple[str, str], exp.Expr] = Memo(READ_TREES)
        # Released tables by cache key, as stored: a release never changes once stored
        # (the first one stored under a key stays), so a hit need not read the store.
        self._released: Memo[str, tuple[int, pa.Table]] = Memo(PLAN_MEMO_SIZE)

    # --- planning (no private data is read) ----------------------------------------
    def _with_defaults(self, request: QueryRequest) -> QueryRequest:
        """The request with the analyst's policy defaults filled in where it names
        nothing (every door alike): a budget only when it names none of epsilon, rho and
        accuracy; delta and the limits field by field."""
        analyst = self.policy.analyst(request.analyst)
        if analyst is None or not analyst.defaults:
            return request
        fill: dict[str, Any] = {}
        no_budget = request.epsilon is None and request.rho is None and request.accuracy is None
        for name in ("epsilon", "rho") if no_budget else ():
            value = analyst.default(name)
            if value is not None:
                fill[name] = float(value)
                break
        for name in ("delta", "max_groups", "max_rows_per_group"):
            value = analyst.default(name)
            if value is not None and getattr(request, name) is None:
                fill[name] = value
        return replace(request, **fill) if fill else request

    def _read_clock(self, request: QueryRequest) -> tuple[QueryRequest, tuple[str, ...]]:
        """now(), CURRENT_DATE …: the time this request arrived, written into its text
        before any memo or cache reads it (proxy/clock.py), with the answer's note."""
        if not isinstance(request.sql, str) or len(request.sql) > self.policy.proxy.max_sql_length:
            return request, ()  # (too long: parsing refuses it, unread)
        clock = read_clock(request.sql, request.dialect, self.clock(), request.time_zone)
        if clock is None:
            return replace(request, time_zone=None) if request.time_zone else request, ()
        return replace(request, sql=clock.sql, time_zone=None), (clock.note,)

    def _translate(self, request: QueryRequest) -> tuple[QueryRequest, tuple[str, ...]]:
        """The request with its clock calls replaced by the time it arrived
        (proxy/clock.py), and BigQuery's ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS
        (...)`` as an ordinary request (proxy/bigquery_dp.py), with notes for the answer;
        others unchanged. The DP statement is read as BigQuery SQL unless the request
        names another dialect."""
        if not isinstance(request.sql, str):
            return request, ()
        request, notes = self._read_clock(request)
        dialect = "bigquery" if request.dialect == "duckdb" else request.dialect
        found = bigquery_dp.translate(request.sql, dialect)
        if found is None:
            return request, notes
        translated, more = bigquery_dp.to_request(request, found, self.catalog, self.policy)
        return translated, (*notes, *more)

    def prepare(self, request: QueryRequest) -> tuple[Shape, Plan]:
        request = self._with_defaults(self._translate(request)[0])
        key = replace(request, analyst="")
        found = self._plans.get(key)
        if found is not None:
            return found
        try:
            prepared = self._prepare(request)
        except RecursionError:
            # A call nested hundreds deep parses, then generating the core or the outer
            # layer runs out of Python's stack: a refusal, not an internal error.
            raise DPSQLError(
                "too_large",
                "the query nests too deeply to be planned",
                "nest fewer calls inside one another",
            ) from None
        if not prepared[1].pending_bounds:  # plans with caps still to choose are temporary
            self._plans.put(key, prepared)
        return prepared

    def _prepare(self, request: QueryRequest) -> tuple[Shape, Plan]:
        if not isinstance(request.sql, str):
            raise DPSQLError("bad_request", "sql must be a string", "send the query text")
        found = self._structure_for(request)
        chosen: list[ChosenBound] = []
        if request.max_groups is None:
            # K of an "auto" table: chosen per query from its grouping's released
            # histogram (or the public domain's size), then planned as if the request had
            # asked for it (never above the limit, so the request stays a tightening one).
            k = self._choose_groups(found, request, chosen)
            if k is not None:
                request = replace(request, max_groups=k)
                if k != found.core.max_groups:
                    found = self._structure_for(request)
        structured = request
        if not found.pending and request.max_rows_per_group is None:
            # An "auto" table's cap is chosen per query from its released histogram:
            # plan again with it as if the request had asked for it (it never exceeds
            # the limit, so the request stays a tightening one).
            cap = self._choose_cap(found, request, chosen)
            if cap is not None and cap != found.core.max_rows:
                structured = replace(request, max_rows_per_group=cap)
                found = self._structure_for(structured)
        # Then each "auto" value bound the query's sums read, at that cap.
        values = self._choose_values(found, structured, chosen)
        if values:
            found = self._structure_for(replace(structured, value_bounds=values))
        plan = build_plan(
            found.core,
            request,
            self.policy,
            domain=found.domain,
            names=found.names,
            data_version=self.policy.data_version,
            outer=found.outer,
        )
        plan = replace(
            plan,
            released_columns=found.released_columns,
            chosen_bounds=tuple(chosen),
            notes=found.notes,
        )
        if found.pending:
            plan = replace(plan, pending_bounds=found.pending)
        return found.core.shape, plan

    def _structure_for(self, request: QueryRequest) -> Structure:
        """The query's structure, memoised: it does not depend on the budget, so asking
        again at another ε re-plans only the noise."""
        key = replace(request, analyst="", epsilon=None, delta=None, rho=None, accuracy=None)
        found = self._structures.get(key)
        if found is None:
            try:
                found = self._structure(request)
            except SqlglotError as error:
                # sqlglot raised outside parsing (e.g. rendering an unusual tree): still
                # a refusal of the query text, before any charge, never an HTTP 500.
                raise DPSQLError(
                    "unsupported_sql",
                    f"dpsql cannot plan this query ({type(error).__name__})",
                    "simplify the expression named in GROUP BY or the select list",
                ) from None
            if not found.pending:
                self._structures.put(key, found)
        return found

    def _choose_groups(
        self, found: Structure, request: QueryRequest, chosen: list[ChosenBound]
    ) -> int | None:
        """K of this query when it groups a table whose max_groups is "auto" (else
        None): min(limit, domain size) for a public key domain, else the K that minimises
        the estimated error of what this query releases at its budget, from the
        grouping's released histogram (accounting/group_bounds.py) and the noise of the
        same query planned at K = 1 and C = 1 — every input is released or public, so the
        choice is free. Never below a fixed K of another table it reads (the largest
        wins, as in plan.limits). The choice is appended to ``chosen``."""
        core = found.core
        if core.one_group_per_person:
            return None
        g = grouping(core.shape, self.executor.dialect)
        if g is None:
            return None
        if found.domain is not None:
            k = min(g.limit, max(1, len(found.domain)))
        else:
            hist = self.auto_groups.histogram(g)
            if hist is None:
                return None
            if request.accuracy is not None:
                # The noise is then fixed and ε follows K: weigh K as at the default ε.
                request = replace(request, accuracy=None, epsilon=None, rho=None)
            one = self._structure_for(replace(request, max_groups=1, max_rows_per_group=1))
            try:
                noise = budget_noise(one.core, request, self.policy, one.domain is None)
            except DPSQLError:
                return None  # the real plan refuses it with its own message
            mechanism = Mechanism(self.policy.proxy.mechanism)
            targets = cap_targets(noise.columns, mechanism, totals_use(core.shape))
            tau = noise.threshold.tau if noise.threshold is not None else None
            # The number of groups from the histogram and the threshold.
            groups = group_count(hist, tau)
            selection = (
                None
                if noise.threshold is None
                else Selection(noise.threshold, noise.delta_threshold)
            )
            choice = self.auto_groups.choose(g, targets, groups, mechanism, selection)
            if choice is None:
                return None
            k = choice.k
            chosen.append(
                ChosenBound(
                    "max_groups",
                    f"{', '.join(g.tables)} by {', '.join(g.key_sqls)}",
                    k,
                    g.limit,
                    choice.errors,
                    choice.pairs_cut_upper,
                    choice.people_cut,
                    choice.release_peak,
                )
            )
        fixed = [t.policy.max_groups for t in core.shape.private_tables() if t.policy.max_groups]
        return max([k, *fixed])

    def _choose_cap(
        self, found: Structure, request: QueryRequest, chosen: list[ChosenBound]
    ) -> int | None:
        """The row cap of this query when it reads "auto" tables whose histograms are
        released (else None): per table, the cap that minimises the estimated error of
        what this query releases at its budget (accounting/bounds.py), from the noise of
        the same query planned at C = 1 — every input is released or public, so the
        choice is free. The largest over the tables, as for fixed caps (plan.limits)."""
        shape = found.core.shape
        tables = [t.policy for t in shape.private_tables()]
        auto = [t for t in tables if t.auto_rows_limit is not None]
        if not auto:
            return None
        if request.accuracy is not None:
            # The noise is then fixed and ε follows C: weigh the caps as at the default ε.
            request = replace(request, accuracy=None, epsilon=None, rho=None)
        one = self._structure_for(replace(request, max_rows_per_group=1))
        try:
            noise = budget_noise(one.core, request, self.policy, one.domain is None)
        except DPSQLError:
            return None  # the real plan refuses it with its own message
        targets = cap_targets(
            noise.columns,
            Mechanism(self.policy.proxy.mechanism),
            totals_use(shape),
            noise.quantiles,
        )
        caps = [t.max_rows_per_group for t in tables if t.max_rows_per_group is not None]
        for table in auto:
            hist = self.auto_bounds.histogram(table)
            if hist is None:
                return None
            if found.domain is not None:
                groups = float(len(found.domain))
            elif noise.threshold is not None:
                # Private keys: a released group has at least about tau people; take
                # the typical group at that size (the most groups the people allow).
                # (K's estimate, accounting/group_bounds.py: group_count, also bounds G
                # below by the heaviest people's groups; the rows-per-person histogram
                # cannot, as a person's rows may all fall in one group.)
                groups = max(1.0, hist.people / max(1.0, float(noise.threshold.tau)))
            else:
                groups = 1.0
            choice = self.auto_bounds.choose(table, targets, groups, filter_keep(shape))
            if choice is None:
                return None
            caps.append(choice.cap)
            chosen.append(
                ChosenBound(
                    "max_rows_per_group",
                    table.name,
                    choice.cap,
                    choice.limit,
                    choice.errors,
                    choice.rows_cut_upper,
                )
            )
        return max(caps)

    def _value_bounds(self, request: QueryRequest) -> dict[tuple[str, str], ColumnBounds]:
        """The planning bounds of "auto" columns: released (or the limits), with the
        bounds this request was planned with by _choose_values."""
        bounds = self.auto_values.bounds()
        for table, column, side, value in request.value_bounds:
            found = bounds.get((table, column))
            if found is not None:
                if side == Side.UPPER:
                    bounds[(table, column)] = replace(found, upper=value)
                else:
                    bounds[(table, column)] = replace(found, lower=value)
        return bounds

    def _choose_values(
        self, found: Structure, request: QueryRequest, chosen: list[ChosenBound]
    ) -> tuple[tuple[str, str, str, float], ...]:
        """The bounds of the "auto" columns this query sums (SUM, AVG: statistics whose
        argument is the column itself), each the candidate of least estimated error for
        this query's noise at its budget (accounting/value_bounds.py: choose_upper, then
        choose_lower at the upper bound so chosen), from the column's released histogram
        — free, as every input is released or public. Each choice is appended to
        ``chosen``; () when there is none."""
        if request.value_bounds or found.pending:
            return ()
        core = found.core
        # The auto columns with a released histogram, by alias (the policy's own table:
        # the planning catalog's carries the bounds in use).
        auto = []
        for alias, info in core.shape.tables.items():
            table = None if info.public else self.policy.table(info.policy.name)
            if table is None:
                continue
            for column in table.columns:
                if column.upper_limit is not None or column.lower_limit is not None:
                    hist = self.auto_values.histogram(table, column)
                    if hist is not None:
                        auto.append((alias, table, column, hist))
        if not auto:
            return ()  # the common case: no budget split to compute
        if request.accuracy is not None:
            request = replace(request, accuracy=None, epsilon=None, rho=None)
        try:
            noise = budget_noise(core, request, self.policy, found.domain is None)
        except DPSQLError:
            return ()  # the real plan refuses it with its own message
        mechanism = Mechanism(self.policy.proxy.mechanism)
        uses = {C.SUM: ValueUse.TOTAL, C.CENTRED_SUM: ValueUse.CENTRED}
        out: list[tuple[str, str, str, float]] = []
        for alias, table, column, hist in auto:
            if any(t == table.name and c == column.name for t, c, _, _ in out):
                continue  # the same table under another alias: chosen once
            # The bounds the query was planned with: each auto side's default, else the
            # declared number.
            upper_at = (
                column.upper
                if column.upper_limit is None
                else self.auto_values.released(table, column, Side.UPPER)
            )
            lower_at = (
                column.lower
                if column.lower_limit is None
                else self.auto_values.released(table, column, Side.LOWER)
            )
            if upper_at is None or lower_at is None:
                continue
            reads = f"{alias}.{column.name}"
            stats = [
                (uses[n.statistic.kind], mechanism.std(n.descriptor.scale))
                for n in noise.columns
                if n.statistic.kind in uses
                and n.statistic.upper == upper_at
                and n.statistic.lower == lower_at
                and reads in (n.statistic.arg_sql or "")
            ]
            if not stats:
                continue
            if found.domain is not None:
                groups = float(max(1, len(found.domain)))
            elif noise.threshold is not None:
                # As for the row cap: groups of about tau people, the people being
                # at least the histogram's rows over the C values each may add.
                people = hist.rows() / self.auto_values.rows_per_person(table)
                groups = max(1.0, people / max(1.0, float(noise.threshold.tau)))
            else:
                groups = 1.0
            subject = f"{table.name}.{column.name}"
            upper = upper_at
            if column.upper_limit is not None:
                targets = [ValueTarget(use, std, upper_at) for use, std in stats]
                choice = choose_upper(hist, targets, groups, lower_at)
                upper = choice.bound
                out.append((table.name, column.name, str(Side.UPPER), upper))
                chosen.append(
                    ChosenBound(
                        "upper", subject, upper, choice.limit, choice.errors, choice.clipped
                    )
                )
            if column.lower_limit is not None:
                # At the upper bound just chosen: the noise the lower bound weighs is
                # the one this query's plan will have.
                lows = [LowerTarget(use, std, lower_at, upper_at) for use, std in stats]
                low = choose_lower(hist, lows, groups, upper)
                out.append((table.name, column.name, str(Side.LOWER), low.bound))
                chosen.append(
                    ChosenBound("lower", subject, low.bound, low.limit, low.errors, low.clipped)
                )
        return tuple(out)

    def checked_shape(self, request: QueryRequest) -> CheckedShape:
        """Parse, bind and check (refusing what is not answered), with the derived
        tables a per-person aggregate or a UNION ALL in FROM reads."""
        # A copy of the shared parse (the steps below change their tree): a third of
        # the cost of parsing the text again.
        tree = self._read_only_tree(request).copy()
        # Subqueries of public tables in conditions, as the constants they are (read in
        # the public sandbox: proxy/public_subqueries.py)
        tree = public_subqueries.fold(tree, self.catalog, request.tables, self.public.run)
        # "auto" columns carry their released bounds (their limits until then), or the
        # bounds this query chose from the column's histogram (_choose_values).
        planning = self.catalog.with_value_bounds(self._value_bounds(request))
        # UNION ALL of row-level arms in FROM: a derived row-level table of the arms'
        # population (proxy/union_rows.py); other set operations are refused below.
        union = union_rows.derive_query(
            tree,
            planning,
            request.tables,
            self.executor,
            lambda arm: limits(
                replace(request, max_rows_per_group=None, max_groups=None),
                arm,
                self.policy,
            ),
        )
        base = planning
        if union is not None:
            tree, base = union.outer, union.catalog
        check_statement(tree)
        tree = distinct_as_group_by(tree)
        # A per-person aggregate joined to the people's table, written with the aggregate
        # as the FROM anchor the per-person step below answers
        tree = joined_facts.push(tree, base)
        names = output_names(tree)
        check_output_names(names)  # no item may stand for a hidden column
        # An inner query grouped by the person id: the outer one reads a derived table
        # of bounded per-person values (proxy/per_person_values.py).
        per_person = per_person_values.derive_query(
            tree,
            base,
            request.tables,
            self.executor,
            lambda inner: limits(request, inner, self.policy)[0],
        )
        catalog = base
        outer_request = request
        if per_person is not None:
            tree, catalog = per_person.outer, per_person.catalog
            # The request's caps are the inner tables' (the derived table has C = K = 1).
            outer_request = replace(request, max_rows_per_group=None, max_groups=None)
        select = bind(tree, catalog, request.tables, request.dialect)
        # FROM a, b WHERE a.id = b.id: the inner join it is (proxy/comma_joins.py)
        select = comma_joins.as_inner_joins(select)
        # GROUP BY 'All', model: the constant splits no group (proxy/constant_keys.py)
        select = constant_keys.dropped(select)
        shape = check_shape(select, catalog)
        # Checked: nothing later refuses with a position in the text, and the rewrite
        # copies this tree's parts many times (proxy/parse.py: forget_positions).
        forget_positions(shape.select)
        return CheckedShape(shape, names, per_person, union, outer_request)

    def _structure(self, request: QueryRequest) -> Structure:
        """Parse, bind, check, rewrite and validate: everything but the budget."""
        settings = self.policy.proxy
        checked = self.checked_shape(request)
        shape, names, per_person, union = (
            checked.shape,
            checked.names,
            checked.per_person,
            checked.union,
        )
        select = shape.select
        if names is None or len(names) != len(select.expressions):
            names = tuple(e.alias_or_name for e in select.expressions)
        max_rows, max_groups = limits(checked.outer_request, shape, self.policy)
        read = shape.private_tables()
        # Row caps are chosen for the tables the core cuts by rows (``_choose_cap``
        # reads these): a per-person subquery's tables are clamped per person instead,
        # and a UNION ALL's arms are planned at their limits, so their histograms would
        # be paid for and never read (a probe, 2026-12-02).
        capped = read
        if per_person is not None:
            per_person_values.embed(shape, per_person)
            read = (*read, *per_person.inner.private_tables())
        if union is not None:
            union_rows.embed(shape, union)
            read = (*read, *(t for arm in union.arms for t in arm.private_tables()))
        pending: tuple[Pending, ...] = tuple(
            p for t in capped if (p := self.auto_bounds.pending(t.policy)) is not None
        )
        needed = aggregated_columns(self._read_only_tree(request))
        read_names = {t.policy.name for t in read}
        pending += tuple(
            p
            for table in self.policy.tables
            if table.name in read_names
            for p in self.auto_values.pending(table, needed)
        )
        bounded = functools.partial(
            rewrite,
            shape,
            max_rows=max_rows,
            max_groups=max_groups,
            bounding=self._bounding,
            # A per-person subquery's values are clamped, not cut by row caps: estimated
            # when a clamp can move a value the outer query reads (its table's flag).
            clipping=settings.clipping_share > 0
            and (per_person is None or per_person.table.bounded_flag is not None),
            # Every engine's hash tables are unkeyed: group first by a keyed hash
            # (rewrite/keyed_groups.py; the renderers key it the engine's way).
            keyed_grouping=True,
        )
        # Bind the core first: refuses what the engine cannot run (or cannot run with
        # the reference semantics), and gives the key types — unless the catalog types
        # the whole query, which then binds for certain in DuckDB (proxy/catalog_types.py;
        # other engines render the core first, and their describe refuses what a render
        # cannot express).
        plain = (
            catalog_types.key_types(shape)
            if self.executor.dialect == "duckdb" and per_person is None and union is None
            else None
        )

        # Date and time keys are read within the years every later step can hold (their
        # types stand): per_person.DATE_KEY_RANGE; DECIMAL keys as their text. Known
        # from the catalog, the core is written once; learnt from the engine, again once
        # they are known.
        def bounded_with(kinds: KeyKinds) -> Core:
            return bounded(dated_keys=kinds.dated, timed_keys=kinds.timed, text_keys=kinds.text)

        core = bounded_with(KeyKinds.of(plain or ()))
        key_types = plain if plain is not None else self._key_types(core.sql, core.key_columns())
        check_key_types(shape.key_sqls, key_types)
        if plain is None:
            kinds = KeyKinds.of(key_types)
            if kinds != KeyKinds():
                core = bounded_with(kinds)
        where = shape.select.args.get("where")
        domain = (
            domains.public_domain(
                shape.keys,
                dict(shape.tables),
                self.executor,
                settings.max_partition_groups,
                where.this if where is not None else None,
                key_types,
            )
            if shape.keys
            else ((),)
        )
        if checked.outer_request.max_groups is None and domain is None:
            # Private keys on an "auto" K table: the first run releases the histogram of
            # groups per person for these keys (none needed with one group per person).
            g = None if core.one_group_per_person else grouping(shape, self.executor.dialect)
            waiting = None if g is None else self.auto_groups.pending(g)
            if waiting is not None:
                pending += (waiting,)
        if self.executor.dialect == "duckdb":
            check_in_lists(core.sql, self.executor)
        if isinstance(self.executor, DuckDBExecutor):
            self.executor.guard(core.sql)
        outer = outer_sql(core, names, domain is None, request.raw_noise)
        columns = self._validate_outer(core, outer, key_types)
        # The CTE trees were rendered into core.sql by the last rule and are never read
        # again; memoised structures would otherwise keep about 380 tracked objects each,
        # which every full garbage collection pass walks.
        notes = () if per_person is None else per_person_values.bounds_note(per_person)
        if domain is not None:
            notes += domains.bounds_note(
                shape.keys, dict(shape.tables), settings.max_partition_groups
            )
        return Structure(replace(core, ctes=()), names, domain, outer, pending, columns, notes)

    def _key_types(self, core_sql: str, keys: tuple[str, ...]) -> tuple[str, ...]:
        """Refuse, before any charge, a core the engine cannot bind (reads no data)."""
        described = dict(self.executor.describe(core_sql, describe_params(core_sql)))
        return tuple(described[k] for k in keys)

    def _validate_outer(
        self, core: Core, outer: str, key_types: tuple[str, ...]
    ) -> tuple[tuple[str, str], ...]:
        """Run the outer layer once on a stand-in row so its mistakes are refused before
        the charge rather than after it (the outer layer reads released values only).
        Returns the released table's columns and types."""
        columns = list(zip(core.key_columns(), key_types, strict=True))
        # (a sum of integers noised on a float grid is released whole: release.release)
        columns += [
            (
                s.column,
                "BIGINT" if s.integer or (s.kind == C.SUM and s.values_integer) else "DOUBLE",
            )
            for s in core.statistics
        ]
        columns += [(q.column, "BIGINT" if q.grid.integer else "DOUBLE") for q in core.quantiles]
        columns.append(("__persons", "BIGINT"))
        columns.append((ROW, "BIGINT"))
        key = (outer, tuple(columns))
        if not self._valid_outers.get(key):
            self.post.validate(outer, columns)
            self._valid_outers.put(key, True)
        return tuple(columns)

    def _public_query(self, request: QueryRequest) -> PublicQuery | None:
        """The query as a public one if it reads no private table (such queries are
        answered exactly and free, on their own path), else None."""
        if not isinstance(request.sql, str):
            return None  # prepare refuses it
        key = _route_key(request)
        route = self._routes.get(key)
        if route is None:
            tree = self._read_only_tree(request)  # classify copies before it respells
            try:
                route = Route(classify(tree, self.catalog, request.tables))
            except SqlglotError as error:
                raise DPSQLError(
                    "unsupported_sql",
                    f"dpsql cannot read this query ({type(error).__name__})",
                    "simplify the expression",
                ) from None
            self._routes.put(key, route)
        return route.public

    def _read_only_tree(self, request: QueryRequest) -> exp.Expr:
        """The request's text parsed once for the steps that never change a tree."""
        assert isinstance(request.sql, str)
        key = (request.sql, request.dialect)
        tree = self._read_trees.get(key)
        if tree is None:
            tree = self._parse(request)
            self._read_trees.put(key, tree)
        return tree

    def _parse(self, request: QueryRequest) -> exp.Expr:
        """The request's text as a tree, within the policy's length and size limits."""
        settings = self.policy.proxy
        return parse(
            request.sql,
            request.dialect,
            max_length=settings.max_sql_length,
            max_nodes=settings.max_nodes,
        )

    def explain(self, request: QueryRequest) -> Explanation | PublicExplanation:
        request = self._translate(request)[0]
        found = self._nested(request)
        if found is not None:
            # What is charged is the inner query's release; the outer is post-processing.
            return self.explain(replace(request, sql=found.inner.sql(dialect=request.dialect)))
        public = self._public_query(request)
        if public is not None:
            return PublicExplanation(public)
        shape, plan = self.prepare(request)
        return Explanation(
            plan=plan, shape=shape, cached=self.cache.get(plan.cache_key) is not None
        )

    def output_columns(self, request: QueryRequest) -> tuple[tuple[str, str], ...] | None:
        """The answer's columns, (name, DuckDB type), from its plan and its outer layer
        run on a stand-in of the release: nothing runs on the data, nothing is charged.
        None for a public query (its own run types it) or a refused one (its run says
        why). For a door that must describe a query before running it: the PostgreSQL
        door's statement Describe, the Trino door's ``LIMIT 0``."""
        try:
            request = self._translate(request)[0]
            found = self._nested(request)
            inner = request
            if found is not None:
                inner = replace(request, sql=found.inner.sql(dialect=request.dialect))
            if self._public_query(inner) is not None:
                return None
            plan = self.prepare(inner)[1]
            if not plan.released_columns:
                return None
            table, described = self._stand_in_answer(plan)
            if found is None:
                return tuple(zip(plan.output_names, (d for d, _ in described), strict=False))
            # the outer query over the stand-in, as checked before its charge
            found = self._validate_nested(inner, found)
            outer_sql = typed_division.on_duckdb(nested.displayed(found)).sql(dialect="duckdb")
            outer_names = self._run_outer(found, table)[0]
            outer_types = [d for d, _ in self.post.described(outer_sql, table)]
            # (the hidden row index is not shown: _run_nested counts names alike)
            width = sum(1 for n in outer_names if n != "__row")
            return tuple(zip(outer_names[:width], outer_types[:width], strict=False))
        except DPSQLError:
            return None

    # --- answering ------------------------------------------------------------------
    def run(self, request: QueryRequest, *, from_memory: bool = True) -> Result:
        """The answer to ``request``: charged, or replayed from the cache.

        With ``from_memory`` (the default), a repeat of a release the analyst already
        holds is answered by :meth:`run_cached`: the same result and replay event, the
        event committed within about 20 ms instead of before the answer. A door whose
        callers must find every repeat's event in the store the moment its answer is out
        passes False (the PostgreSQL door, docs/ARCHITECTURE.md)."""
        if from_memory:
            kept = self.run_cached(request)
            if kept is not None:
                return kept
        asked = request.sql
        request, read = self._read_clock(request)
        clocked = request.sql if request.sql != asked else None
        request, notes = self._translate(request)
        notes = (*read, *notes)
        result = self._run(request)
        if notes:  # e.g. a BigQuery bound looser than the policy, which the policy's replaced
            result = replace(result, warnings=(*notes, *result.warnings))
        if isinstance(clocked, str):
            # what a door stores to serve this answer again (the HTTP door's next pages)
            result = replace(result, answered_sql=clocked)
        return result

    def run_cached(self, request: QueryRequest) -> Result | None:
        """The answer to ``request`` when it is a repeat cache hit that memory alone can
        answer — its structure, plan and release memoised in this process and the
        analyst already holding a durable ledger record of that release — with the
        same result and replay event as :meth:`run` (the event queued and committed
        within about 20 ms, :meth:`Ledger.defer_repeat`); otherwise None, having done
        and recorded nothing (then call :meth:`run`). It never plans, executes, charges,
        post-processes (the outer layer and the noise simulation: an answer that has left
        its memo is declined), waits for the disk or for the store's write lock, so a
        door may call it on its event loop.

        The hit/miss decision and every refusal stay :meth:`run`'s: this answers only
        requests that :meth:`run` has already answered from the same release."""
        if not isinstance(request.sql, str) or bigquery_dp.translate(
            request.sql, "bigquery" if request.dialect == "duckdb" else request.dialect
        ):
            return None
        if self._splits.get((request.sql, request.dialect, request.tables)) != (None,):
            return None  # a nested query, or text never seen
        route = self._routes.get(_route_key(request))
        if route is None or route.public is not None:
            return None
        # (a session's zone matters only to a text that reads the clock, which never
        # reaches the memos: they hold the text with the time written in)
        asked = replace(self._with_defaults(request), analyst="", time_zone=None)
        found = self._plans.get(asked)
        if found is None:
            return None
        plan = found[1]
        if plan.free or plan.pending_bounds:
            return None
        hit = self._released.get(plan.cache_key)
        if hit is None:
            return None
        charge_id, table = hit
        if plan.threshold is not None and table.num_rows == 0:
            return None  # the empty answer's hint plans again: run() says it
        # The token is read before the figures (as Budgets.view does): a kept result is
        # never older than its token. (Queuing the replay below changes no figure.)
        token = self.budgets.version()
        key = None if token is None else (asked, charge_id, token)
        kept = None if key is None else self._hit_results.get(key)
        # Post-processing runs the outer layer on DuckDB and simulates the noise (tens
        # of milliseconds for a HAVING or a LIMIT): never here, on a door's event loop.
        # An answer that has left its memo is run()'s to recompute, off the loop.
        answer = None if kept is not None else self._answers.get((plan.cache_key, plan.outer_sql))
        if kept is None and answer is None:
            return None
        if not self.budgets.defer_repeat(
            charge_id, analyst=request.analyst, fingerprint=plan.cache_key
        ):
            return None
        if kept is not None:
            return kept
        result = self._answer(
            plan, table, charge_id=charge_id, cached=True, request=request, answer=answer
        )
        if key is not None:
            self._hit_results.put(key, result)
        return result

    def _nested(self, request: QueryRequest) -> nested.NestedQuery | None:
        if not isinstance(request.sql, str):
            return None
        # The tables are in the key: whether the query groups by the person depends on
        # which tables the analyst may read.
        key = (request.sql, request.dialect, request.tables)
        found = self._splits.get(key)
        if found is None:
            tree = self._read_only_tree(request)
            # ROLLUP / CUBE / GROUPING SETS: the finest grouping released once, the
            # subtotals summed from its cells (proxy/grouping_sets.py)
            columns = frozenset(
                c.lower() for t in self.catalog.visible_to(request.tables) for c in t.column_types
            )
            cells = grouping_sets.as_cells(tree, columns)
            split = nested.split(cells if cells is not None else tree)
            if split is not None and per_person_values.groups_by_person(
                tree, self.catalog, request.tables
            ):
                split = None  # a per-person aggregate: answered by _structure
            found = (split,)
            self._splits.put(key, found)
        return found[0]

    def _stored(self, key: str) -> tuple[int, pa.Table] | None:
        """The release stored under ``key`` (charge id, table), or None."""
        found = self._released.get(key)
        if found is None:
            found = self.cache.get(key)
            if found is not None:
                self._released.put(key, found)
        return found

    def _validate_nested(
        self, inner: QueryRequest, found: nested.NestedQuery
    ) -> nested.NestedQuery:
        """The outer query, run on a stand-in of the inner answer (one row of zeros and
        NULL keys of the right types) before the inner one is charged: its mistakes are
        refusals that cost nothing. Its total form where that binds, else as written
        (the form the run uses)."""
        nested.check_outer(found.outer)
        if self._public_query(inner) is not None:
            return found
        _, plan = self.prepare(inner)
        if plan.free or not plan.released_columns:
            return found
        table, described = self._stand_in_answer(plan)
        found = replace(found, inner_types=tuple(t for _, t in described) or None)
        try:
            self._run_outer(found, table)
            return found
        except DPSQLError:
            written = replace(found, as_total=False)
        try:
            self._run_outer(written, table)
        except DPSQLError as error:
            raise DPSQLError(
                "bad_request",
                f"the outer query over the subquery cannot run: {error.message}",
                "use the subquery's column names and arithmetic over them",
            ) from None
        return written

    def _stand_in_answer(self, plan: Plan) -> tuple[pa.Table, tuple[tuple[str, pa.DataType], ...]]:
        """The answer a release of one stand-in row (NULL keys, zero statistics) gives,
        as the table an outer query reads, with its shown columns' types."""
        stand_in = self.post.stand_in(plan.released_columns)
        names, rows = self.post.run(plan.outer_sql, stand_in)
        shown = len(plan.output_names)
        described = self.post.described(plan.outer_sql, stand_in)[:shown]
        table = nested.table_of(
            tuple(names[:shown]),
            [tuple(r[:shown]) for r in rows],
            tuple(t for _, t in described) or None,
        )
        return table, described

    def _run_outer(
        self, found: nested.NestedQuery, table: pa.Table
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The outer query (the form ``found`` runs) over ``table``, the released rows."""
        shown = typed_division.on_duckdb(nested.displayed(found))
        return self.post.run(shown.sql(dialect="duckdb"), table)

    def _run_nested(self, request: QueryRequest, found: nested.NestedQuery) -> Result:
        """The inner aggregate answered (charged once, cached), then the outer query over
        its released rows: post-processing, free, with simulated intervals."""
        inner_request = replace(request, sql=found.inner.sql(dialect=request.dialect))
        found = self._validate_nested(inner_request, found)
        inner = self._run(inner_request)
        table = nested.table_of(inner.columns, inner.rows, found.inner_types)
        try:
            try:
                names, rows = self._run_outer(found, table)
            except DPSQLError:
                if not found.as_total:
                    raise
                # (a free inner answer is not validated on a stand-in first)
                found = replace(found, as_total=False)
                names, rows = self._run_outer(found, table)
        except DPSQLError as error:
            # Only above an aggregate or window (nested.total), or in a query whose
            # total form does not bind: a function of released values, which the
            # analyst already holds.
            raise DPSQLError(
                "bad_request",
                f"the outer query failed on the released answer of its subquery: {error.message}",
                "the subquery's answer is paid for and kept: the same subquery with a "
                "corrected outer query costs nothing (keep arguments in range, e.g. with "
                "GREATEST or CASE)",
            ) from None
        # The shown columns: ``SELECT *`` expands to the released ones (and the hidden
        # ``__row``, which a row-wise outer query also carries last), so count names, not
        # select items.
        width = sum(1 for n in names if n != "__row")
        drawn = nested.drawn_columns(
            found, names[:width], frozenset(str(q["name"]) for q in inner.privacy.quantiles)
        )
        spread = nested.simulated_widths(
            found, table, inner.intervals, rows, width, self.post.run, drawn
        )
        notes = [
            "the outer query ran on the released answer of the inner one (post-processing: "
            "no further privacy cost); its intervals simulate the inner answer's noise",
            *doubt_warnings(
                names[:width],
                len(rows),
                spread.cells,
                spread.rows,
                spread.could_show,
                None,
                nested.chooser(found),
            ),
            *nested.missing_widths(names[:width], rows, spread.widths, spread.exact),
        ]
        if spread.failed:
            notes.append(
                "dpsql could not run the outer query over simulated copies of the inner "
                "answer: its values have no intervals, and the rows it chooses and the "
                "values that are not numbers, where they read noisy values, may be otherwise"
            )
        partition = inner.privacy.partition
        if partition.get("strategy") == "public_domain" and partition.get("groups"):
            # A public domain releases every declared key, those no one has included (an
            # audit: COUNT(*) of PUMS's age groups gave 101 where the data has 73).
            notes.append(
                f"the inner answer has a row for each of the {partition['groups']} declared "
                "values of its key, empty ones included (as noisy values near 0), and the "
                "outer query reads them all: a count or average over its rows counts the "
                "empty groups too; filter them out in the outer query (e.g. WHERE n > a few "
                "half-widths) if that is not what you mean"
            )
        inherited = tuple(w for w in inner.warnings if w not in inner.doubts)
        if inner.doubts:
            # The inner answer's own words count its rows and columns, not these (a
            # review, 2026-12-06: "1 of the 3 rows shown" under a one-row total).
            notes.append(
                "the inner answer's rows or values were chosen by noisy values (its "
                "HAVING, LIMIT or a comparison near its threshold): another draw of the "
                "noise could have given the outer query other rows to read, which its "
                "intervals do not count"
            )
        return replace(
            inner,
            columns=tuple(names[:width]),
            rows=[tuple(r[:width]) for r in rows],
            intervals=tuple(spread.widths),
            warnings=(*inherited, *notes),
            doubts=(),
            unsettled_cells=spread.cells,
            unsettled_rows=spread.rows,
        )

    def _run(self, request: QueryRequest) -> Result:
        found = self._nested(request)
        if found is not None:
            return self._run_nested(request, found)
        public = self._public_query(request)
        if public is not None:
            # No person data: exact, free, and no ledger event (nothing was released).
            names, rows = self.public.run(public)
            return public_result(public, names, rows, self.policy.data_version)
        _, plan = self.prepare(request)
        if plan.free:
            return self._from_domain(plan, request)
        if plan.pending_bounds:
            # The first query on an "auto" table pays once for its row cap, chosen from
            # a released histogram; then it is planned with that cap.
            # Row caps first: a value bound's draw reads each person's rows.
            for pending in plan.pending_bounds:
                if isinstance(pending, PendingGroups):
                    self.auto_groups.release(pending.grouping, request.analyst)
            for pending in plan.pending_bounds:
                if isinstance(pending, PendingBounds):
                    table = next(t for t in self.policy.tables if t.name == pending.table)
                    self.auto_bounds.release(table, request.analyst)
            for pending in plan.pending_bounds:
                if isinstance(pending, PendingValueBound):
                    self.auto_values.release(pending, request.analyst)
            _, plan = self.prepare(request)
        hit = self._stored(plan.cache_key)
        if hit is not None:
            return self._replay(plan, request, *hit)
        with self._single_flight(plan.cache_key) as cached:
            if cached is not None:
                return self._replay(plan, request, *cached)
            receipt = self._charge(plan, request)
            exact = self.executor.run(
                plan.core_sql, [secret_seed()] if takes_seed(plan.core_sql) else []
            )
            table = release(plan, exact)
            # Not memoised here: if another process stored first, the store keeps its
            # release, and later hits must replay that one (see _stored).
            self.cache.put(plan.cache_key, receipt.event_id, table)
        return self._answer(
            plan,
            table,
            charge_id=receipt.event_id,
            cached=False,
            remaining=self.budgets.remaining_after(receipt, plan.charge_targets),
            moved=self.budgets.moved(receipt, plan.charge_targets),
            request=request,
        )

    def _from_domain(self, plan: Plan, request: QueryRequest) -> Result:
        """Keys with a public domain and no aggregate (SELECT DISTINCT region): the
        policy's values, answered exactly with no charge and no ledger event."""
        assert plan.domain is not None
        table = pa.table(
            {
                k: release_keys([row[i] for row in plan.domain])
                for i, k in enumerate(plan.key_columns)
            }
        )
        answer = self._post_process(plan, table)
        names, rows = answer.names, answer.rows
        result = build_result(
            plan,
            names,
            rows,
            charge_id=None,
            cached=False,
            remaining={t: self.budgets.remaining(t) for t in plan.charge_targets},
        )
        note = (
            "these are the values the policy declares for the key (every possible value, "
            "whether present in the data or not): no private data was read and nothing "
            "was charged"
        )
        return replace(result, warnings=(*result.warnings, note))

    def _charge(self, plan: Plan, request: QueryRequest) -> Receipt:
        try:
            return self.budgets.charge(
                plan.charge_targets,
                plan.curve,
                plan.delta_threshold,
                analyst=request.analyst,
                fingerprint=plan.cache_key,
                note=f"query {plan.cache_key[:12]}",
            )
        except DPSQLError as error:
            if error.code == "budget_exhausted":
                # The query's own ε beside what it would add to the population's total.
                error.details["query_epsilon"] = float(f"{plan.epsilon:.12g}")
                error.details["query_delta"] = float(
                    f"{plan.delta_conversion + plan.delta_threshold:.12g}"
                )
            raise

    def _replay(self, plan: Plan, request: QueryRequest, charge_id: int, table: pa.Table) -> Result:
        self.budgets.replay(charge_id, analyst=request.analyst, fingerprint=plan.cache_key)
        return self._answer(plan, table, charge_id=charge_id, cached=True, request=request)

    @contextmanager
    def _single_flight(self, key: str) -> Iterator[tuple[int, pa.Table] | None]:
        with self._locks_guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            deadline = time.monotonic() + self.policy.proxy.query_timeout_s * 2
            while not self.cache.claim(key):
                hit = self.cache.get(key)
                if hit is not None:
                    yield hit
                    return
                if time.monotonic() > deadline:
                    raise DPSQLError(
                        "timeout",
                        "an identical query is still running elsewhere",
                        "retry in a moment; it will be answered from the cache",
                    )
                time.sleep(0.05)
            try:
                yield None
            finally:
                self.cache.finish(key)

    def _answer(
        self,
        plan: Plan,
        table: pa.Table,
        *,
        charge_id: int,
        cached: bool,
        remaining: dict[str, float] | None = None,
        moved: dict[str, float] | None = None,
        request: QueryRequest | None = None,
        answer: Answer | None = None,
    ) -> Result:
        """The result of a release: ``answer`` is its post-processing when the caller
        holds it already (``run_cached``), else it is computed (or read from its memo)."""
        if answer is None:
            answer = self._post_process(plan, table)
        names, rows = answer.names, answer.rows
        if remaining is None:
            remaining = {t: self.budgets.remaining(t) for t in plan.charge_targets}
        hint = () if request is None else self._empty_hint(plan, table, request)
        if request is not None:
            hint += self._rows_cut_note(request, plan)
        result = build_result(
            plan,
            names,
            rows,
            charge_id=charge_id,
            cached=cached,
            remaining=remaining,
            moved=moved or dict.fromkeys(plan.charge_targets, 0.0),
            simulated=answer.simulated,
            unsettled=answer.unsettled,
        )
        return replace(result, warnings=result.warnings + hint) if hint else result

    def _rows_cut_note(self, request: QueryRequest, plan: Plan) -> tuple[str, ...]:
        """For "auto" tables: the share of their rows the cap leaves out, estimated from
        the released histogram of rows per person (free), when it is above 5%; and the
        share of people in more groups than an "auto" K, from the grouping's histogram."""
        shape, _ = self.prepare(request)
        notes = []
        for info in shape.private_tables():
            cut = self.auto_bounds.rows_cut_reading(info.policy, plan.max_rows)
            if cut is None:
                continue
            limit = info.policy.auto_rows_limit
            hidden = (
                "This reads the released histogram of rows per person, whose noise hides "
                f"fewer than about {cut.hidden_people:.0f} people in a bin, so a few heavier "
                "people can hold more (an honesty probe: 0.8% of the people held 8.4% of "
                "the rows beyond a cap of 256, read as 0%)"
            )
            # The upper reading too: the histogram's noise hides a thin tail.
            if cut.upper > ROWS_CUT_NOTE:
                notes.append(
                    f"about {cut.point:.0%} to {cut.upper:.0%} of the rows of "
                    f"{info.policy.name} belong to people above the cap of {plan.max_rows} "
                    f"rows per group (chosen from the data; the policy's limit is {limit}) "
                    "and are left out: counts and sums over them are lower than the true "
                    f"totals by about that share. {hidden}; and it is the whole table's "
                    "share, which a filter or a grouping can change. A higher limit keeps "
                    "more of them, at the cost of more noise"
                )
            elif limit is not None and plan.max_rows >= limit:
                notes.append(
                    f"the cap of {plan.max_rows} rows per group on {info.policy.name} is the "
                    "policy's limit: the rows of people above it are left out, and the "
                    "released histogram of rows per person sees too few such people to say "
                    f"how many rows that is. {hidden}. Counts and sums can be lower than the "
                    "true totals by their share; a higher limit keeps more of them, at the "
                    "cost of more noise"
                )
        for chosen in plan.chosen_bounds:
            people = chosen.people_cut
            if chosen.bound == "max_groups" and people is not None and people > ROWS_CUT_WARNING:
                notes.append(
                    f"about {people:.0%} of the people of {chosen.subject} are in more "
                    f"than {chosen.chosen} groups (max_groups, chosen from the data; the "
                    f"policy's limit is {chosen.limit}): dpsql kept {chosen.chosen} of each "
                    f"one's groups, which left out about {chosen.cut:.0%} of the "
                    "(person, group) pairs, so counts and sums are about that much lower "
                    "than the true totals; ask with a larger max_groups (up to the limit) "
                    "to keep more of them, at the cost of more noise"
                )
        return tuple(notes)

    def _empty_hint(self, plan: Plan, table: pa.Table, request: QueryRequest) -> tuple[str, ...]:
        """When partition selection released nothing, say why and what would help: the
        threshold in people now and at four times the budget (planning only: free)."""
        if plan.threshold is None or table.num_rows > 0:
            return ()
        more: str = ""
        try:
            if request.rho is not None:
                bigger = replace(request, rho=request.rho * 4)
            elif request.accuracy is None:
                eps = request.epsilon or self.policy.proxy.default_epsilon
                bigger = replace(request, epsilon=eps * 4)
            else:
                bigger = None
            if bigger is not None:
                tau = self.prepare(bigger)[1].threshold
                if tau is not None:
                    more = f"; at four times the budget it would be about {tau.tau}"
        except DPSQLError:
            more = ""
        return (
            f"no group was released: a group is shown only when its noisy count of people "
            f"reaches {plan.threshold.tau} at this budget{more}. Group by a coarser key "
            f"({_coarser(self.prepare(request)[0].key_sqls)}), filter less, or ask with a "
            "larger epsilon.",
        )

    def _post_process(self, plan: Plan, table: pa.Table) -> Answer:
        """The outer layer over the released table, and the simulated intervals of its
        arithmetic cells; deterministic in (release, outer SQL), so kept."""
        key = (plan.cache_key, plan.outer_sql)
        found = self._answers.get(key)
        if found is not None:
            return found
        released = with_row_index(table)
        direct = self._direct_outer(plan.outer_sql)
        found_direct = None if direct is None else direct.run(released)
        names, rows = (
            found_direct if found_direct is not None else self.post.run(plan.outer_sql, released)
        )
        simulated = simulated_widths(plan, table, simulated_columns(plan), self.post)
        answer = Answer(names, rows, simulated, unsettled(plan, table, names, rows, self.post))
        self._answers.put(key, answer)
        return answer

    def _direct_outer(self, outer: str) -> DirectOuter | None:
        """The outer layer in the forms answered without DuckDB (proxy/outer_direct.py),
        compiled once per text; None for any other."""
        found = self._direct_outers.get(outer)
        if found is None:
            found = (compile_outer(outer, self.post.double),)
            self._direct_outers.put(outer, found)
        return found[0]

    def schema(self, tables: frozenset[str] | None) -> tuple[TableView, ...]:
        """The tables a caller may query (None: all), with columns, bounds and domains.
        An "auto" column shows the upper bound planning uses: the released one, else its
        limit (as `explain` does)."""
        return self.catalog.with_value_bounds(self.auto_values.bounds()).views(tables)

    def remaining(self, population: str) -> float:
        """ε left to the persons of ``population`` who have spent the most (see
        proxy/budgets.py for the one rule every door shows)."""
        return self.budgets.remaining(population)

    @property
    def ledger(self) -> Ledger:
        """The ledger store, for tests and the engine's own views; doors go through
        :attr:`budgets`."""
        return self.budgets.ledger

    def close(self) -> None:
        self.public.close()
        self.post.close()
        self.cache.close()
        self.budgets.close()
        self.executor.close()

    # --- console views ------------------------------------------------------------------
    # Read-only: they read the ledger through its public history and never charge.

    @property
    def _views(self) -> LedgerViews:
        with self._views_guard:
            if self._views_made is None:
                from proxy.ledger_views import LedgerViews

                self._views_made = LedgerViews(self.budgets.ledger)
            return self._views_made

    def query_history(self, analyst: str, limit: int = 50) -> tuple[HistoryEntry, ...]:
        """The releases ``analyst`` asked for, most recent first, each with its cost to
        this analyst and whether it is still stored (then asking again is free)."""
        try:
            entries = self._views.history(analyst, limit)
        except LedgerError as error:
            raise ledger_error(error, "read the query history") from None
        return tuple(replace(e, cached=self.cache.has(e.fingerprint)) for e in entries)

    def usage(
        self, populations: Collection[str], *, viewer: str, admin: bool, top: int = 20
    ) -> Usage:
        """Composed ε over time, top consumers and cache hit rate for the root
        ``populations``; only an admin view names other analysts and their queries."""
        try:
            return self._views.usage(populations, viewer=viewer, admin=admin, top=top)
        except LedgerError as error:
            raise ledger_error(error, "read the budget usage") from None
