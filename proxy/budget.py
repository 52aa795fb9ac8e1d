"""The budget of one query as the proxy states it: which statistics are released, with
which sensitivity (from ``accounting.sensitivity``) and weight, and the request's budget
checked and tagged. All arithmetic — the split, noise scales, the threshold, the exact
curve — is ``accounting.calibrate``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accounting.calibrate import (
    AccuracyBudget,
    Calibration,
    CalibrationError,
    ColumnSpec,
    EpsilonBudget,
    Mechanism,
    QuantileSpec,
    QueryBudget,
    RhoBudget,
    calibrate,
)
from accounting.mechanisms import NoiseDescriptor
from accounting.partition import Threshold
from accounting.quantiles import QuantileDescriptor
from accounting.rdp import ZERO, Curve
from accounting.sensitivity import AggregateKind, Sensitivity, SensitivityError, sensitivity
from proxy import shape as S
from proxy.errors import bad_request
from proxy.memo import Memo
from proxy.policy import Policy
from proxy.request import QueryRequest
from proxy.rewrite import core as C
from proxy.rewrite.linf import per_group_bound

_KINDS = {
    C.ROWS: AggregateKind.ROW_COUNT,
    C.COUNT: AggregateKind.ROW_COUNT,
    C.DISTINCT: AggregateKind.DISTINCT_COUNT,
    C.DISTINCT_SUM: AggregateKind.DISTINCT_SUM,
    C.DISTINCT_CENTRED_SUM: AggregateKind.DISTINCT_CENTRED_SUM,
    C.DISTINCT_SQUARES: AggregateKind.DISTINCT_SQUARES,
    C.PERSONS: AggregateKind.PERSON_COUNT,
    C.CLIPPED: AggregateKind.PERSON_COUNT,
    C.SUM: AggregateKind.SUM,
    C.CENTRED_SUM: AggregateKind.CENTRED_SUM,
    C.CENTRED_SQUARES: AggregateKind.SUM_SQUARES,
}


MIN_PER_GROUP = 1e-9  # noise needs a positive sensitivity; SUM(0) gets a vanishing one

# Calibration is a pure function of its inputs and costs more than the rest of the noise
# planning (curves over the order grid, the ε conversion): queries that differ only in
# their filters release the same statistics at the same budget, so they share it. Keyed
# by the inputs' repr, which tells 1 from 1.0 (equal as keys, not as recorded numbers).
_CALIBRATIONS: Memo[str, Calibration] = Memo(512)


def _calibrate(
    mechanism: Mechanism,
    columns: tuple[ColumnSpec, ...],
    budget: QueryBudget,
    *,
    threshold_weight: float | None,
    max_groups: int,
    delta_conversion: float,
    delta_threshold: float,
    quantile_columns: tuple[QuantileSpec, ...],
) -> Calibration:
    """``accounting.calibrate.calibrate``, memoised (its refusals are not kept)."""
    key = repr(
        (
            mechanism,
            columns,
            budget,
            threshold_weight,
            max_groups,
            delta_conversion,
            delta_threshold,
            quantile_columns,
        )
    )
    found = _CALIBRATIONS.get(key)
    if found is None:
        found = calibrate(
            mechanism,
            columns,
            budget,
            threshold_weight=threshold_weight,
            max_groups=max_groups,
            delta_conversion=delta_conversion,
            delta_threshold=delta_threshold,
            quantile_columns=quantile_columns,
        )
        _CALIBRATIONS.put(key, found)
    return found


@dataclass(frozen=True)
class ColumnNoise:
    statistic: C.Statistic
    sensitivity: Sensitivity
    descriptor: NoiseDescriptor


@dataclass(frozen=True)
class QuantileNoise:
    """One quantile column (MEDIAN, a level, MIN or MAX) and its exponential mechanism:
    grid, target, score sensitivity, scale, cost and rank error (accounting.quantiles)."""

    statistic: C.QuantileStatistic
    descriptor: QuantileDescriptor


# A statistic's sensitivity is a pure function of its public bounds and the caps, and
# costs exact Decimal arithmetic: queries that differ only in their filters share it.
# Keyed by repr, as _CALIBRATIONS (1 and 1.0 are equal keys but not equal records).
_SENSITIVITIES: Memo[str, Sensitivity] = Memo(1024)


def _sensitivity(stat: C.Statistic, core: C.Core) -> Sensitivity:
    key = repr((stat, core.max_rows, core.max_groups))
    found = _SENSITIVITIES.get(key)
    if found is None:
        found = _sensitivity_of(stat, core.max_rows, core.max_groups)
        _SENSITIVITIES.put(key, found)
    return found


def _sensitivity_of(stat: C.Statistic, max_rows: int, max_groups: int) -> Sensitivity:
    try:
        s = sensitivity(
            _KINDS[stat.kind],
            lower=stat.lower,
            upper=stat.upper,
            max_rows=max_rows,
            max_groups=max_groups,
        )
    except SensitivityError as error:
        raise bad_request(str(error), "check the column bounds in the policy") from None
    # Float statistics are summed in DECIMAL with bounds rounded outward: cover that too.
    # Float statistics are summed in DECIMAL with bounds rounded outward, and a constant
    # zero argument has no sensitivity at all: the released column must cover both.
    needed = max(per_group_bound(stat, max_rows), MIN_PER_GROUP)
    if needed > s.per_group:
        # Express the wider bound as a SUM over [-b, b] with one row: Δ∞ = b.
        s = sensitivity(
            AggregateKind.SUM, lower=-needed, upper=needed, max_rows=1, max_groups=max_groups
        )
    return s


def _delta_split(
    request: QueryRequest, policy: Policy, population: str, needs_threshold: bool
) -> tuple[float, float]:
    delta = request.delta if request.delta is not None else policy.proxy.default_delta
    ceiling = policy.population(population).max_query_delta
    if not (isinstance(delta, float | int) and 0 < delta <= ceiling):
        raise bad_request(
            f"delta must lie in (0, {ceiling:g}], the most one query of population "
            f"{population} may spend",
            f"send a smaller delta, e.g. {min(policy.proxy.default_delta, ceiling):g}",
        )
    return (delta / 2, delta / 2) if needs_threshold else (delta, 0.0)


# What a request may ask for: below, the noise is too large to describe; above, the
# guarantee means nothing (and a cap that allows it should be questioned).
BUDGET_RANGES = {"epsilon": (1e-6, 1e4), "rho": (1e-12, 1e6)}


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
    for name, (low, high) in BUDGET_RANGES.items():
        value = getattr(request, name)
        if value is not None and (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            raise bad_request(
                f"{name} must be a number between {low:g} and {high:g}",
                f"send e.g. {name}=0.5",
            )


def _request_budget(request: QueryRequest, policy: Policy) -> QueryBudget:
    if request.accuracy is not None:
        a = request.accuracy
        return AccuracyBudget(a.rel_error, a.at_count, a.confidence)
    if request.rho is not None:
        return RhoBudget(request.rho)
    return EpsilonBudget(
        request.epsilon if request.epsilon is not None else policy.proxy.default_epsilon
    )


@dataclass(frozen=True)
class QueryNoise:
    """The calibrated noise of one query: per released column, the threshold (private
    keys), the curve the ledger is charged and its ε at the conversion δ."""

    columns: tuple[ColumnNoise, ...]
    threshold: Threshold | None
    curve: Curve
    epsilon: float
    delta_conversion: float
    delta_threshold: float
    rho: float | None
    quantiles: tuple[QuantileNoise, ...] = ()


def budget_noise(
    core: C.Core, request: QueryRequest, policy: Policy, needs_threshold: bool
) -> QueryNoise:
    """Split the query's budget over its noised columns (and the threshold) by weight:
    every statistic the analyst asked for weighs 1 (the equal split)."""
    _choose(request)
    mechanism = Mechanism(policy.proxy.mechanism)
    delta_conv, delta_thr = _delta_split(request, policy, core.shape.population, needs_threshold)
    if core.shape.key_release and not needs_threshold:
        # The keys of a public domain come from the policy: nothing is released.
        return QueryNoise(
            (), None, ZERO, 0.0, delta_conv, 0.0, 0.0 if mechanism.composes_in_rho else None
        )
    stats = [
        (s, _sensitivity(s, core))
        for s in core.statistics
        if not (needs_threshold and s.kind == C.PERSONS)
    ]
    asked_persons = any(a.kind == S.COUNT_PERSONS for a in core.shape.aggregates)
    clip = [
        stat.kind == C.CLIPPED or (stat.kind == C.PERSONS and not asked_persons)
        for stat, _ in stats
    ]
    # Each quantile column (MEDIAN, a level, MIN, MAX) takes one share like a statistic.
    quantile_specs = tuple(QuantileSpec(q.grid, q.kind, q.q, core.max_rows) for q in core.quantiles)
    # The clipping estimate gets its declared share of the whole budget; everything the
    # analyst asked for (and the threshold) splits the rest equally.
    main = len(stats) - sum(clip) + (1 if needs_threshold else 0) + len(quantile_specs)
    share = policy.proxy.clipping_share
    clip_weight = share / (1 - share) * main / max(1, sum(clip)) if share > 0 else 0.0
    specs = tuple(
        ColumnSpec(
            integer=stat.integer,
            sensitivity=sens,
            weight=clip_weight if is_clip else 1.0,
            count=stat.kind in (C.ROWS, C.COUNT, C.DISTINCT, C.PERSONS) and not is_clip,
        )
        for (stat, sens), is_clip in zip(stats, clip, strict=True)
    )
    try:
        cal = _calibrate(
            mechanism,
            specs,
            _request_budget(request, policy),
            threshold_weight=1.0 if needs_threshold else None,
            max_groups=core.max_groups,
            delta_conversion=delta_conv,
            delta_threshold=delta_thr,
            quantile_columns=quantile_specs,
        )
    except CalibrationError as error:
        raise bad_request(
            str(error),
            "send a larger epsilon or delta, or relax the accuracy target "
            "(rel_error > 0, at_count > 0, 0 < confidence < 1)",
        ) from None
    columns = tuple(
        ColumnNoise(stat, sens, d) for (stat, sens), d in zip(stats, cal.descriptors, strict=True)
    )
    drawn = tuple(QuantileNoise(q, d) for q, d in zip(core.quantiles, cal.quantiles, strict=True))
    return QueryNoise(
        columns, cal.threshold, cal.curve, cal.epsilon, delta_conv, delta_thr, cal.rho, drawn
    )
