"""Stage 5: the frozen plan — core SQL, statistics, sensitivities, budget split, noise,
cost, populations charged, key domain and the cache key.

The plan is computed from public facts only (policy, query text, request); it reads no
private data, so `explain` can show it and a refused budget costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from accounting import mechanisms, partition, planning
from accounting.mechanisms import NoiseDescriptor
from accounting.partition import Threshold
from accounting.rdp import ZERO, Curve, CurveError, max_rho_within
from accounting.sensitivity import AggregateKind, Sensitivity, SensitivityError, sensitivity
from proxy import shape as S
from proxy.errors import DPSQLError, bad_request
from proxy.policy import Policy
from proxy.request import QueryRequest
from proxy.rewrite import core as C
from proxy.rewrite.linf import per_group_bound

_KINDS = {
    C.ROWS: AggregateKind.ROW_COUNT,
    C.COUNT: AggregateKind.ROW_COUNT,
    C.PERSONS: AggregateKind.PERSON_COUNT,
    C.SUM: AggregateKind.SUM,
    C.CENTRED_SUM: AggregateKind.CENTRED_SUM,
    C.CENTRED_SQUARES: AggregateKind.SUM_SQUARES,
}


MIN_PER_GROUP = 1e-9  # noise needs a positive sensitivity; SUM(0) gets a vanishing one


@dataclass(frozen=True)
class ColumnNoise:
    statistic: C.Statistic
    sensitivity: Sensitivity
    descriptor: NoiseDescriptor


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
    # Output columns that are one AVG: (index, noise std of its centred sum, of its count).
    # The outer SQL carries two hidden columns per entry, __ci{index}_s and __ci{index}_n.
    avg_intervals: tuple[tuple[int, float, float], ...] = ()

    @property
    def delta(self) -> float:
        return self.delta_conversion + self.delta_threshold


def _limits(request: QueryRequest, shape: S.Shape, policy: Policy) -> tuple[int, int]:
    c_vals = [
        t.policy.max_rows_per_group
        for t in shape.private_tables()
        if t.policy.max_rows_per_group is not None
    ]
    k_vals = [
        t.policy.max_groups for t in shape.private_tables() if t.policy.max_groups is not None
    ]
    c = max(c_vals) if c_vals else policy.proxy.max_rows_per_group
    k = max(k_vals) if k_vals else policy.proxy.max_groups
    for name, asked, allowed in (
        ("max_rows_per_group", request.max_rows_per_group, c),
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


def limits(request: QueryRequest, shape: S.Shape, policy: Policy) -> tuple[int, int]:
    """(C, K) for this query: the policy's, tightened by the request."""
    return _limits(request, shape, policy)


def _sensitivity(stat: C.Statistic, core: C.Core) -> Sensitivity:
    try:
        s = sensitivity(
            _KINDS[stat.kind],
            lower=stat.lower,
            upper=stat.upper,
            max_rows=core.max_rows,
            max_groups=core.max_groups,
        )
    except SensitivityError as error:
        raise bad_request(str(error), "check the column bounds in the policy") from None
    # Float statistics are summed in DECIMAL with bounds rounded outward: cover that too.
    # Float statistics are summed in DECIMAL with bounds rounded outward, and a constant
    # zero argument has no sensitivity at all: the released column must cover both.
    needed = max(per_group_bound(stat, core.max_rows), MIN_PER_GROUP)
    if needed > s.per_group:
        # Express the wider bound as a SUM over [-b, b] with one row: Δ∞ = b.
        s = sensitivity(
            AggregateKind.SUM, lower=-needed, upper=needed, max_rows=1, max_groups=core.max_groups
        )
    return s


def _delta_split(
    request: QueryRequest, policy: Policy, population: str, needs_threshold: bool
) -> tuple[float, float]:
    delta = request.delta if request.delta is not None else policy.proxy.default_delta
    pop_delta = policy.population(population).delta
    if not (0 < delta < pop_delta):
        raise bad_request(
            f"delta must lie in (0, {pop_delta:g}), the population's delta",
            f"send a smaller delta, e.g. {policy.proxy.default_delta:g}",
        )
    return (delta / 2, delta / 2) if needs_threshold else (delta, 0.0)


def _choose(request: QueryRequest) -> None:
    given = [
        n
        for n, v in (
            ("epsilon", request.epsilon),
            ("rho", request.rho),
            ("accuracy", request.accuracy),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise bad_request(
            f"give only one of epsilon, rho, accuracy (got {', '.join(given)})",
            "choose how to state the budget",
        )
    for name in ("epsilon", "rho"):
        value = getattr(request, name)
        if value is not None and (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise bad_request(f"{name} must be a positive number", f"send e.g. {name}=0.5")


def _describe(
    mechanism: str, stat: C.Statistic, sens: Sensitivity, scale: float, k: int
) -> NoiseDescriptor:
    if mechanism == "gaussian":
        return mechanisms.describe_gaussian(
            l2_sensitivity=sens.l2,
            sigma=scale,
            integer=stat.integer,
            length=k,
            changed_coordinates=k,
        )
    return mechanisms.describe_laplace(
        l1_sensitivity=sens.l1, scale=scale, integer=stat.integer, length=k, changed_coordinates=k
    )


def _noise_for_share(
    mechanism: str,
    share: float,
    stats: list[tuple[C.Statistic, Sensitivity]],
    k: int,
    delta_thr: float,
    threshold: bool,
) -> tuple[list[ColumnNoise], Threshold | None]:
    noise: list[ColumnNoise] = []
    for stat, sens in stats:
        if mechanism == "gaussian":
            scale = mechanisms.gaussian_sigma_for_rho(sens.l2, share)
        else:
            scale = mechanisms.laplace_scale_for_epsilon(sens.l1, share)
        noise.append(ColumnNoise(stat, sens, _describe(mechanism, stat, sens, scale, k)))
    thr: Threshold | None = None
    if threshold:
        if mechanism == "gaussian":
            sigma = mechanisms.gaussian_sigma_for_rho(math.sqrt(k), share)
            thr = partition.gaussian_threshold(sigma, k, delta_thr)
        else:
            thr = partition.laplace_threshold(share, k, delta_thr)
    return noise, thr


def _total(noise: list[ColumnNoise], thr: Threshold | None) -> Curve:
    total = ZERO
    for n in noise:
        total = total + n.descriptor.curve
    if thr is not None:
        total = total + thr.curve
    return total


def _accuracy_share(
    request: QueryRequest,
    mechanism: str,
    stats: list[tuple[C.Statistic, Sensitivity]],
    k: int,
    delta_conv: float,
) -> float:
    target = request.accuracy
    assert target is not None
    counts = [s for s in stats if s[0].kind in (C.ROWS, C.COUNT, C.PERSONS)]
    if not counts:
        raise bad_request(
            "an accuracy target needs a COUNT in the query", "add COUNT(*) or state epsilon instead"
        )
    sens = max((s[1] for s in counts), key=lambda s: s.l2)
    try:
        budget = planning.budget_for_accuracy(
            rel_error=target.rel_error,
            at_count=target.at_count,
            confidence=target.confidence,
            sensitivity=sens.l2 if mechanism == "gaussian" else sens.l1,
            mechanism=mechanism,
            delta=delta_conv,
        )
    except ValueError as error:
        raise bad_request(
            f"bad accuracy target: {error}", "rel_error > 0, at_count > 0, 0 < confidence < 1"
        ) from None
    if budget.absurd:
        raise bad_request(
            f"that accuracy needs epsilon {budget.epsilon:.3g} per released column, "
            "which is not a meaningful privacy guarantee",
            "relax rel_error or ask about larger counts (at_count)",
        )
    if mechanism == "gaussian":
        assert budget.rho is not None
        return budget.rho
    return budget.epsilon


def budget_noise(
    core: C.Core, request: QueryRequest, policy: Policy, needs_threshold: bool
) -> tuple[list[ColumnNoise], Threshold | None, Curve, float, float, float, float | None]:
    """Split the query's budget equally over its noised columns (and the threshold)."""
    _choose(request)
    mechanism = policy.proxy.mechanism
    delta_conv, delta_thr = _delta_split(request, policy, core.shape.population, needs_threshold)
    stats = [
        (s, _sensitivity(s, core))
        for s in core.statistics
        if not (needs_threshold and s.kind == C.PERSONS)
    ]
    shares = len(stats) + (1 if needs_threshold else 0)
    k = core.max_groups
    target_eps: float | None = None
    if request.accuracy is not None:
        share = _accuracy_share(request, mechanism, stats, k, delta_conv)
    elif request.rho is not None:
        if mechanism != "gaussian":
            raise bad_request("rho applies to the gaussian mechanism only", "send epsilon")
        share = request.rho / shares
    else:
        target_eps = (
            request.epsilon if request.epsilon is not None else policy.proxy.default_epsilon
        )
        if mechanism == "gaussian":
            try:
                share = max_rho_within(target_eps, delta_conv) / shares
            except CurveError as error:
                raise bad_request(str(error), "send a larger epsilon or a larger delta") from None
        else:
            share = target_eps / shares

    def attempt(share: float) -> tuple[list[ColumnNoise], Threshold | None, Curve, float]:
        noise, thr = _noise_for_share(mechanism, share, stats, k, delta_thr, needs_threshold)
        curve = _total(noise, thr)
        eps = curve.epsilon(delta_conv)
        if mechanism == "laplace":
            # Pure ε by basic composition is also a valid statement; report the smaller.
            pure = sum(n.descriptor.pure_epsilon or math.inf for n in noise)
            if thr is not None:
                pure += thr.max_groups / thr.scale
            eps = min(eps, pure)
        return noise, thr, curve, eps

    noise, thr, curve, eps = attempt(share)
    if target_eps is not None and eps > target_eps:
        # The float grid's rounding slack (and the discrete Laplace's whole units) sit on
        # top of the share: find the largest share that fits, by halving an interval.
        fits, too_big = share, share
        while eps > target_eps and fits > share * 1e-3:
            too_big, fits = fits, fits * 0.99
            noise, thr, curve, eps = attempt(fits)
        if eps > target_eps:  # pragma: no cover - guards against a logic error
            raise DPSQLError("internal", "could not fit the noise within the budget", "")
        best = (noise, thr, curve, eps)
        for _ in range(30):
            middle = (fits + too_big) / 2
            trial = attempt(middle)
            if trial[3] <= target_eps:
                fits, best = middle, trial
            else:
                too_big = middle
        noise, thr, curve, eps = best
        share = fits
    rho = share * shares if mechanism == "gaussian" else None
    return noise, thr, curve, eps, delta_conv, delta_thr, rho


def _post_expression(
    call: S.AggregateCall, core: C.Core, arg_sql: dict[str, str], threshold: bool
) -> exp.Expr:
    def col(kind: str) -> exp.Expr:
        return exp.column(core.statistic(kind, arg_sql.get(call.sql)).column)

    if call.kind == S.COUNT_ROWS:
        return exp.column(core.statistic(C.ROWS, None).column)
    if call.kind == S.COUNT_PERSONS:
        return (
            exp.column("__persons")
            if threshold
            else exp.column(core.statistic(C.PERSONS, None).column)
        )
    if call.kind == S.COUNT:
        return col(C.COUNT)
    if call.kind == S.SUM:
        return col(C.SUM)
    stat = core.statistic(C.CENTRED_SUM, arg_sql[call.sql])
    n = f"GREATEST({col(C.COUNT).sql()}, 1)"
    mean_c = f"({col(C.CENTRED_SUM).sql()} / {n})"
    if call.kind == S.AVG:
        text = f"LEAST(GREATEST({stat.centre!r} + {mean_c}, {stat.lower!r}), {stat.upper!r})"
    else:
        half = (stat.upper - stat.lower) / 2.0
        var = (
            f"LEAST(GREATEST({col(C.CENTRED_SQUARES).sql()} / {n} - {mean_c} * {mean_c}, 0), "
            f"{half * half!r})"
        )
        if call.kind in (S.VAR_SAMP, S.STDDEV_SAMP):
            n2 = f"GREATEST({col(C.COUNT).sql()}, 2)"
            var = f"({var} * {n2} / ({n2} - 1))"
        text = f"SQRT({var})" if call.kind.startswith("stddev") else var
    return sqlglot.parse_one(text, read="duckdb")


def outer_sql(core: C.Core, names: tuple[str, ...], threshold: bool) -> str:
    """The post-processing query over the released table ``released``."""
    select = core.shape.select.copy()
    arg_sql = {sql: arg.sql(dialect="duckdb") for sql, arg in core.arguments.items()}
    keys = {k.sql(dialect="duckdb"): f"__k{i}" for i, k in enumerate(core.shape.keys)}
    calls = {c.sql: c for c in core.shape.aggregates}

    key_types = tuple({type(k) for k in core.shape.keys})
    aggregate_types = (exp.Count, exp.AggFunc)

    # Names the binder gave select items (e.g. _col_0 for ORDER BY 1) -> output names.
    renamed = {
        item.alias.lower(): name
        for item, name in zip(select.expressions, names, strict=True)
        if isinstance(item, exp.Alias)
    }

    def visit(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Column)
            and not node.table
            and node.name.lower() in renamed
            and node.sql(dialect="duckdb") not in keys
        ):
            return exp.column(renamed[node.name.lower()], quoted=True)
        # Render only nodes that could be a key or an aggregate: rendering is the cost.
        if not isinstance(node, (*key_types, *aggregate_types)):
            return node
        text = node.sql(dialect="duckdb")
        if text in keys:
            return exp.column(keys[text])
        if text in calls:
            return _post_expression(calls[text], core, arg_sql, threshold)
        return node

    items = []
    hidden = []
    for index, (item, name) in enumerate(zip(select.expressions, names, strict=True)):
        body = item.this if isinstance(item, exp.Alias) else item
        call = calls.get(body.sql(dialect="duckdb")) if isinstance(body, exp.Avg) else None
        if call is not None:
            # Carry the AVG's released parts along, for its per-cell interval.
            arg = arg_sql[call.sql]
            for suffix, kind in (("s", C.CENTRED_SUM), ("n", C.COUNT)):
                column = exp.column(core.statistic(kind, arg).column)
                hidden.append(exp.alias_(column, f"__ci{index}_{suffix}", copy=False))
        items.append(exp.alias_(body.transform(visit, copy=False), name, quoted=True, copy=False))
    out = exp.select(*items, *hidden).from_("released")
    having = select.args.get("having")
    if having is not None:
        out = out.where(having.this.transform(visit, copy=False), copy=False)
    order = select.args.get("order")
    if order is not None:
        out.set("order", order.transform(visit, copy=False))
    for clause in ("limit", "offset"):
        if select.args.get(clause) is not None:
            out.set(clause, select.args[clause].copy())
    return out.sql(dialect="duckdb")


def cache_key(plan_facts: dict[str, Any]) -> str:
    blob = json.dumps(plan_facts, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def partition_population(population: str, partition_column: str, value: str) -> str:
    """Ledger name of one partition, e.g. ``users/region=north``; '/' and '%' in the
    value are percent-escaped so a value can never name a deeper population."""
    column = partition_column.rpartition(".")[2]
    escaped = str(value).replace("%", "%25").replace("/", "%2F")
    return f"{population}/{column}={escaped}"


def build_plan(
    core: C.Core,
    request: QueryRequest,
    policy: Policy,
    *,
    domain: tuple[tuple[Any, ...], ...] | None,
    names: tuple[str, ...],
    data_version: str,
) -> Plan:
    needs_threshold = domain is None
    noise, thr, curve, eps, d_conv, _d_thr, rho = budget_noise(
        core, request, policy, needs_threshold
    )
    shape = core.shape
    targets = (
        tuple(partition_population(shape.population, shape.partition_column, v) for v in shape.pins)
        if shape.pins and shape.partition_column
        else (shape.population,)
    )
    facts = {
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
    outer = outer_sql(core, names, needs_threshold)
    return Plan(
        core_sql=core.sql,
        key_columns=core.key_columns(),
        statistics=core.statistics,
        noise=tuple(noise),
        threshold=thr,
        domain=domain,
        mechanism=policy.proxy.mechanism,
        curve=curve,
        epsilon=eps,
        delta_conversion=d_conv,
        delta_threshold=thr.delta if thr is not None else 0.0,
        rho=rho,
        population=shape.population,
        charge_targets=targets,
        max_rows=core.max_rows,
        max_groups=core.max_groups,
        cache_key=cache_key(facts),
        outer_sql=outer,
        output_names=names,
        column_noise=_column_noise(outer, names, noise, thr),
        avg_intervals=_avg_intervals(outer, noise),
    )


def _noise_std(descriptor: mechanisms.NoiseDescriptor) -> float:
    if descriptor.mechanism == "gaussian":
        return descriptor.scale
    return math.sqrt(2.0) * descriptor.scale


def _avg_intervals(outer: str, noise: list[ColumnNoise]) -> tuple[tuple[int, float, float], ...]:
    std = {n.statistic.column: _noise_std(n.descriptor) for n in noise}
    tree = sqlglot.parse_one(outer, read="duckdb")
    parts: dict[int, dict[str, float]] = {}
    for item in tree.expressions:
        if isinstance(item, exp.Alias) and item.alias.startswith("__ci"):
            index, suffix = item.alias[4:].split("_")
            parts.setdefault(int(index), {})[suffix] = std[item.this.name]
    return tuple((i, p["s"], p["n"]) for i, p in sorted(parts.items()))


def _column_noise(
    outer: str, names: tuple[str, ...], noise: list[ColumnNoise], thr: Threshold | None
) -> tuple[tuple[str, float | None, float | None], ...]:
    """Noise of output columns that are exactly one released statistic (COUNT, SUM)."""
    by_column = {
        n.statistic.column: (n.descriptor.scale, n.descriptor.half_width_95) for n in noise
    }
    if thr is not None and thr.mechanism == "gaussian":
        by_column["__persons"] = (thr.scale, mechanisms.Z_975 * thr.scale)
    out = []
    tree = sqlglot.parse_one(outer, read="duckdb")
    for name, item in zip(names, tree.expressions, strict=False):
        body = item.this if isinstance(item, exp.Alias) else item
        scale, half = (
            by_column.get(body.name, (None, None)) if isinstance(body, exp.Column) else (None, None)
        )
        out.append((name, scale, half))
    return tuple(out)
