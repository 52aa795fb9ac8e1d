"""The frozen plan — core SQL, statistics, sensitivities, budget split, noise,
cost, populations charged, key domain and the cache key.

The plan is computed from public facts only (policy, query text, request); it reads no
private data, so `explain` can show it and a refused budget costs nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accounting.ledger import partition_name
from accounting.partition import Threshold
from accounting.rdp import Curve
from proxy import shape as S
from proxy.budget import ColumnNoise, QuantileNoise, budget_noise
from proxy.errors import bad_request
from proxy.outer import AvgInterval, avg_intervals, column_noise, outer_sql
from proxy.policy import Policy, TablePolicy
from proxy.request import QueryRequest
from proxy.rewrite import core as C


@dataclass(frozen=True)
class ChosenBound:
    """An "auto" bound this query's plan chose from a released histogram (free): which
    (``max_rows_per_group``, ``max_groups``, a column's ``upper`` or ``lower``), of what (a table,
    tables by keys, or table.column), the value and the limit, each candidate's estimated
    relative error (bias and noise, as accounting/bounds.py, group_bounds.py and
    value_bounds.py estimate it), and the estimated share of rows (person-group pairs, or
    a column's mass) and of people it cuts; for K with private keys, the candidate of the
    largest release ratio, above which none is chosen (accounting/group_bounds.py:
    release_peak)."""

    bound: str
    subject: str
    chosen: float
    limit: float
    errors: tuple[tuple[float, float], ...]
    cut: float
    people_cut: float | None = None
    release_peak: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bound": self.bound,
            "of": self.subject,
            "chosen": self.chosen,
            "limit": self.limit,
            "candidates": [
                {"value": v, "estimated_relative_error": round(e, 6)} for v, e in self.errors
            ],
            "share_cut": round(self.cut, 6),
            "people_cut": None if self.people_cut is None else round(self.people_cut, 6),
            "release_peak": self.release_peak,
        }


@dataclass(frozen=True)
class Plan:
    core_sql: str
    key_columns: tuple[str, ...]
    statistics: tuple[C.Statistic, ...]
    noise: tuple[ColumnNoise, ...]  # one per noised statistic
    threshold: Threshold | None  # partition selection (private keys)
    domain: tuple[tuple[Any, ...], ...] | None  # public key domain (None: partition selection)
    mechanism: str
    curve: Curve
    epsilon: float  # the query's ε at delta_conversion
    delta_conversion: float
    delta_threshold: float
    rho: float | None
    population: str
    charge_targets: tuple[str, ...]  # ledger populations (root or pinned partitions)
    max_rows: int
    max_groups: int
    cache_key: str
    outer_sql: str
    output_names: tuple[str, ...]
    column_noise: tuple[tuple[str, float | None, float | None], ...]  # (name, scale, 95% hw)
    # Output columns that are one AVG (noise of its centred sum and count, its bounds).
    # The outer SQL carries two hidden columns per entry, __ci{index}_s and __ci{index}_n.
    avg_intervals: tuple[AvgInterval, ...] = ()
    data_version: str = ""  # the data this plan's releases describe (part of cache_key)
    raw_noise: bool = False  # counts keep raw noise (else shown as at least 0)
    # Tables whose "auto" row cap is not chosen yet (the plan assumes their limit): a
    # run first pays for and releases their histograms, then plans again.
    pending_bounds: tuple[Any, ...] = ()
    released_columns: tuple[tuple[str, str], ...] = ()  # names and types of the release
    # MEDIAN, quantiles, MIN, MAX: one exponential-mechanism draw per released group.
    quantiles: tuple[QuantileNoise, ...] = ()
    # "auto" bounds chosen for this query (explain shows their candidates' errors).
    chosen_bounds: tuple[ChosenBound, ...] = ()
    # Said with every answer whatever the data (e.g. the bounds of per-person values).
    notes: tuple[str, ...] = ()
    # Declared bounds the core clamps values to; the clipping estimate counts the people
    # whose values they moved, beside those the caps cut.
    declared_bounds: tuple[C.DeclaredBound, ...] = ()

    @property
    def delta(self) -> float:
        return self.delta_conversion + self.delta_threshold

    @property
    def free(self) -> bool:
        """Nothing to release: the answer is the public key domain itself."""
        return self.domain is not None and not self.noise and not self.quantiles


def limits(
    request: QueryRequest,
    shape: S.Shape,
    policy: Policy,
    chosen: Callable[[TablePolicy], int | None] = lambda table: None,
) -> tuple[int, int]:
    """(C, K) for this query: the policy's, tightened by the request. A table whose C is
    "auto" contributes the C chosen from its data (``chosen``), or its limit while none
    has been chosen yet; a request may ask for any C up to that limit."""
    c_vals = [
        t.policy.max_rows_per_group
        for t in shape.private_tables()
        if t.policy.max_rows_per_group is not None
    ]
    allowed_c = list(c_vals)
    for t in shape.private_tables():
        if t.policy.auto_rows_limit is not None:
            picked = chosen(t.policy)
            c_vals.append(t.policy.auto_rows_limit if picked is None else picked)
            allowed_c.append(t.policy.auto_rows_limit)
    # A table whose K is "auto" allows its limit; the K chosen from the data reaches the
    # plan as a request's max_groups (proxy/engine.py, _choose_groups).
    k_vals = [
        k
        for t in shape.private_tables()
        if (k := t.policy.max_groups or t.policy.auto_groups_limit) is not None
    ]
    c = max(c_vals) if c_vals else policy.proxy.max_rows_per_group
    k = max(k_vals) if k_vals else policy.proxy.max_groups
    for name, asked, allowed in (
        ("max_rows_per_group", request.max_rows_per_group, max(allowed_c, default=c)),
        ("max_groups", request.max_groups, k),
    ):
        if asked is None:
            continue
        if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
            raise bad_request(
                f"{name} must be an integer >= 1", f"send {name} between 1 and {allowed}"
            )
        if asked > allowed:
            raise bad_request(
                f"{name} {asked} exceeds the policy's {allowed}",
                f"a request may only tighten limits: send {name} <= {allowed}",
            )
    return (request.max_rows_per_group or c), (request.max_groups or k)


def cache_key(plan_facts: dict[str, Any]) -> str:
    blob = json.dumps(plan_facts, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def partition_population(population: str, partition_column: str, value: str) -> str:
    """Ledger name of one partition, e.g. ``users/region=north`` (see
    :func:`accounting.ledger.partition_name`)."""
    return partition_name(population, partition_column.rpartition(".")[2], value)


def build_plan(
    core: C.Core,
    request: QueryRequest,
    policy: Policy,
    *,
    domain: tuple[tuple[Any, ...], ...] | None,
    names: tuple[str, ...],
    data_version: str,
    outer: str | None = None,
) -> Plan:
    """The plan of a rewritten query for one request's budget (``outer``: the outer SQL
    if already made for this structure)."""
    needs_threshold = domain is None
    calibrated = budget_noise(core, request, policy, needs_threshold)
    noise, thr = list(calibrated.columns), calibrated.threshold
    shape = core.shape
    targets = (
        tuple(partition_population(shape.population, shape.partition_column, v) for v in shape.pins)
        if shape.pins and shape.partition_column
        else (shape.population,)
    )
    facts: dict[str, Any] = {
        "core": core.sql,
        "stats": [
            (s.kind, s.arg_sql, s.lower, s.upper, s.integer, s.column) for s in core.statistics
        ],
        "limits": (core.max_rows, core.max_groups),
        "noise": [
            (n.statistic.column, n.descriptor.mechanism, n.descriptor.scale, n.descriptor.grid)
            for n in noise
        ],
        "threshold": None if thr is None else (thr.mechanism, thr.scale, thr.tau),
        "domain": None if domain is None else hashlib.sha256(repr(domain).encode()).hexdigest(),
        "data_version": data_version,
        "targets": targets,
    }
    if calibrated.quantiles:
        # Only queries with quantiles carry the key, so other cache keys stay as they were.
        facts["quantiles"] = [
            (
                q.statistic.column,
                q.statistic.kind.value,
                q.statistic.q,
                q.statistic.grid,
                q.descriptor.target.offset,
                q.descriptor.scale,
                q.descriptor.max_rows,
            )
            for q in calibrated.quantiles
        ]
    if outer is None:
        outer = outer_sql(core, names, needs_threshold, request.raw_noise)
    return Plan(
        core_sql=core.sql,
        key_columns=core.key_columns(),
        statistics=core.statistics,
        noise=tuple(noise),
        threshold=thr,
        domain=domain,
        mechanism=policy.proxy.mechanism,
        curve=calibrated.curve,
        epsilon=calibrated.epsilon,
        delta_conversion=calibrated.delta_conversion,
        delta_threshold=thr.delta if thr is not None else 0.0,
        rho=calibrated.rho,
        population=shape.population,
        charge_targets=targets,
        max_rows=core.max_rows,
        max_groups=core.max_groups,
        cache_key=cache_key(facts),
        outer_sql=outer,
        output_names=names,
        column_noise=column_noise(outer, names, noise, thr),
        avg_intervals=avg_intervals(outer, noise),
        data_version=data_version,
        raw_noise=request.raw_noise,
        quantiles=calibrated.quantiles,
        declared_bounds=core.declared_bounds,
    )
