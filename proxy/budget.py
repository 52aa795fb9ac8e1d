"""Stage 5a: the budget of one query — sensitivities, the equal ρ (or ε) split over the
released statistics and partition selection, and the noise each column gets.

Privacy arithmetic comes from ``accounting``: sensitivities from
``accounting.sensitivity``, noise scales and exact costs from ``accounting.mechanisms``
and ``accounting.partition``, calibration from ``accounting.rdp`` and ``planning``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from accounting import mechanisms, partition, planning
from accounting.mechanisms import NoiseDescriptor
from accounting.partition import Threshold
from accounting.rdp import ZERO, Curve, CurveError, max_rho_within
from accounting.sensitivity import AggregateKind, Sensitivity, SensitivityError, sensitivity
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


def _describe(
    mechanism: str, integer: bool, sens: Sensitivity, scale: float, k: int
) -> NoiseDescriptor:
    if mechanism == "gaussian":
        return mechanisms.describe_gaussian(
            l2_sensitivity=sens.l2,
            sigma=scale,
            integer=integer,
            length=k,
            changed_coordinates=k,
        )
    return mechanisms.describe_laplace(
        l1_sensitivity=sens.l1, scale=scale, integer=integer, length=k, changed_coordinates=k
    )


# What the noise search needs to know of one released column.
Spec = tuple[bool, Sensitivity]  # (integer-valued, sensitivity)


def _noise_for_share(
    mechanism: str,
    share: float,
    specs: tuple[Spec, ...],
    k: int,
    delta_thr: float,
    threshold: bool,
) -> tuple[tuple[NoiseDescriptor, ...], Threshold | None]:
    descriptors: list[NoiseDescriptor] = []
    for integer, sens in specs:
        if mechanism == "gaussian":
            scale = mechanisms.gaussian_sigma_for_rho(sens.l2, share)
        else:
            scale = mechanisms.laplace_scale_for_epsilon(sens.l1, share)
        descriptors.append(_describe(mechanism, integer, sens, scale, k))
    thr: Threshold | None = None
    if threshold:
        if mechanism == "gaussian":
            sigma = mechanisms.gaussian_sigma_for_rho(math.sqrt(k), share)
            thr = partition.gaussian_threshold(sigma, k, delta_thr)
        else:
            thr = partition.laplace_threshold(share, k, delta_thr)
    return tuple(descriptors), thr


def _total(noise: tuple[NoiseDescriptor, ...], thr: Threshold | None) -> Curve:
    total = ZERO
    for n in noise:
        total = total + n.curve
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

    specs = tuple((stat.integer, sens) for stat, sens in stats)
    descriptors, thr, curve, eps, share = _fit(
        mechanism, share, target_eps, specs, k, delta_conv, delta_thr, needs_threshold
    )
    noise = [ColumnNoise(stat, sens, d) for (stat, sens), d in zip(stats, descriptors, strict=True)]
    rho = share * shares if mechanism == "gaussian" else None
    return noise, thr, curve, eps, delta_conv, delta_thr, rho


@functools.lru_cache(maxsize=4096)
def _fit(
    mechanism: str,
    share: float,
    target_eps: float | None,
    specs: tuple[Spec, ...],
    k: int,
    delta_conv: float,
    delta_thr: float,
    threshold: bool,
) -> tuple[tuple[NoiseDescriptor, ...], Threshold | None, Curve, float, float]:
    """The noise of every column at the largest share that fits ``target_eps``.

    A pure function of numbers (memoised: queries of the same statistics at the same
    budget share one search). Returns descriptors, threshold, total curve, its ε and the
    share used.
    """

    def attempt(
        share: float,
    ) -> tuple[tuple[NoiseDescriptor, ...], Threshold | None, Curve, float]:
        noise, thr = _noise_for_share(mechanism, share, specs, k, delta_thr, threshold)
        curve = _total(noise, thr)
        eps = curve.epsilon(delta_conv)
        if mechanism == "laplace":
            # Pure ε by basic composition is also a valid statement; report the smaller.
            pure = sum(n.pure_epsilon or math.inf for n in noise)
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
            # ε grows about like √share: this step usually fits at the first try.
            too_big, fits = fits, fits * min(0.999, (target_eps / eps) ** 2)
            noise, thr, curve, eps = attempt(fits)
        if eps > target_eps:  # pragma: no cover - guards against a logic error
            raise DPSQLError("internal", "could not fit the noise within the budget", "")
        best = (noise, thr, curve, eps)
        for _ in range(30):  # until the share is within 1e-6 of the largest that fits
            if too_big - fits <= 1e-6 * fits:
                break
            middle = (fits + too_big) / 2
            trial = attempt(middle)
            if trial[3] <= target_eps:
                fits, best = middle, trial
            else:
                too_big = middle
        noise, thr, curve, eps = best
        share = fits
    return noise, thr, curve, eps, share
