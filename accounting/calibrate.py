"""Calibration: a query's budget → the noise of each released column, the partition-
selection threshold, and the exact curve to charge.

The proxy hands over what the rewrite knows (each column's sensitivity and whether its
values are integers, a weight per column, whether keys need partition selection, K and
the δ split) and the request's budget as a tagged type; this module returns a typed
:class:`Calibration`. Every comparison of mechanism names happens here (through
:class:`Mechanism`), so no module outside ``accounting/`` needs one.

Quantile columns (:class:`QuantileSpec`: MEDIAN, quantiles, MIN and MAX, drawn by the
exponential mechanism of :mod:`accounting.quantiles`) take a weighted share like any
other column; their curves and pure ε join the total.

The budget is split in proportion to the weights: in ρ (zCDP) for the Gaussian, in pure ε
for the Laplace. Equal weights give the equal split; a small declared share (e.g. the
clipping estimate) is a small weight. Float columns add rounding slack to their curves
(see :mod:`accounting.mechanisms`), so for an ε target the share is then shrunk by an
interval search until the whole curve converts to at most the requested ε.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from accounting import mechanisms, partition, planning, quantiles
from accounting.mechanisms import NoiseDescriptor
from accounting.partition import Threshold
from accounting.quantiles import Grid, QuantileDescriptor, QuantileError, TargetKind
from accounting.rdp import ZERO, Curve, CurveError, max_rho_within
from accounting.sensitivity import Sensitivity


class CalibrationError(ValueError):
    """A budget that cannot be calibrated (too small for the order grid, accuracy out of
    range, ρ with the Laplace mechanism, ...). The message says which."""


class Mechanism(StrEnum):
    """The noise a policy uses: the discrete Gaussian (zCDP, composes in ρ) or the
    discrete Laplace (pure DP)."""

    GAUSSIAN = "gaussian"
    LAPLACE = "laplace"

    @property
    def composes_in_rho(self) -> bool:
        return self is Mechanism.GAUSSIAN

    def sensitivity_of(self, sens: Sensitivity) -> float:
        """The norm this mechanism is calibrated to: Δ2 (Gaussian) or Δ1 (Laplace)."""
        return sens.l2 if self is Mechanism.GAUSSIAN else sens.l1

    def threshold_sensitivity(self, max_groups: int) -> float:
        """Of the person counts used for partition selection: √K or K."""
        return math.sqrt(max_groups) if self is Mechanism.GAUSSIAN else float(max_groups)

    def std(self, scale: float) -> float:
        """Standard deviation of noise of this scale (σ, or √2·b for the Laplace)."""
        return scale if self is Mechanism.GAUSSIAN else math.sqrt(2.0) * scale

    def half_width_95(self, scale: float) -> float:
        """Two-sided 95% half-width of integer noise of this scale."""
        if self is Mechanism.GAUSSIAN:
            return mechanisms.Z_975 * scale
        return mechanisms.laplace_half_width_95(scale)

    def scale_for_share(self, sens: Sensitivity, share: float) -> float:
        """σ for a ρ share, or b for an ε share. Preconditions: share > 0."""
        if self is Mechanism.GAUSSIAN:
            return mechanisms.gaussian_sigma_for_rho(sens.l2, share)
        return mechanisms.laplace_scale_for_epsilon(sens.l1, share)

    def describe(
        self, integer: bool, sens: Sensitivity, scale: float, max_groups: int
    ) -> NoiseDescriptor:
        """The descriptor (and exact curve) of one column noised at ``scale``, for a
        person who changes up to ``max_groups`` coordinates."""
        if self is Mechanism.GAUSSIAN:
            return mechanisms.describe_gaussian(
                l2_sensitivity=sens.l2,
                sigma=scale,
                integer=integer,
                length=max_groups,
                changed_coordinates=max_groups,
            )
        return mechanisms.describe_laplace(
            l1_sensitivity=sens.l1,
            scale=scale,
            integer=integer,
            length=max_groups,
            changed_coordinates=max_groups,
        )

    def threshold(self, share: float, max_groups: int, delta: float) -> Threshold:
        """Partition selection on person counts (sensitivity 1 per group, K groups) for a
        share of the budget, costing at most ``delta``."""
        if self is Mechanism.GAUSSIAN:
            sigma = mechanisms.gaussian_sigma_for_rho(math.sqrt(max_groups), share)
            return partition.gaussian_threshold(sigma, max_groups, delta)
        return partition.laplace_threshold(share, max_groups, delta)


@dataclass(frozen=True)
class EpsilonBudget:
    """Spend at most ``epsilon`` at the query's conversion δ."""

    epsilon: float


@dataclass(frozen=True)
class RhoBudget:
    """Spend ``rho`` (zCDP), split by weight; the Gaussian mechanism only."""

    rho: float


@dataclass(frozen=True)
class AccuracyBudget:
    """Spend what a count of ``at_count`` needs for relative error ``rel_error`` with
    probability ``confidence`` (applied to the weight-1 columns)."""

    rel_error: float
    at_count: float
    confidence: float = 0.95


QueryBudget = EpsilonBudget | RhoBudget | AccuracyBudget


@dataclass(frozen=True)
class ColumnSpec:
    """One released column as calibration needs it: its sensitivity, whether its values
    are integers (discrete noise, no grid), its weight in the split, and whether it is a
    count (accuracy targets are stated for counts)."""

    integer: bool
    sensitivity: Sensitivity
    weight: float = 1.0
    count: bool = False


@dataclass(frozen=True)
class QuantileSpec:
    """One released column of per-group quantiles as calibration needs it: the public
    grid of its argument, the target (``q`` for a quantile, none for MIN and MAX), the
    rows each person keeps per group (C) and its weight in the split. K is the query's."""

    grid: Grid
    kind: TargetKind
    q: float | None
    max_rows: int
    weight: float = 1.0


@dataclass(frozen=True)
class Calibration:
    """Noise per column (same order as the specs), the threshold if any, the curve the
    ledger is charged, its ε at the conversion δ, and ρ for the Gaussian; ``quantiles``:
    one descriptor per quantile spec, in their order."""

    descriptors: tuple[NoiseDescriptor, ...]
    threshold: Threshold | None
    curve: Curve
    epsilon: float
    rho: float | None
    quantiles: tuple[QuantileDescriptor, ...] = ()


def _noise_for(
    mechanism: Mechanism,
    unit: float,
    columns: tuple[ColumnSpec, ...],
    threshold_weight: float | None,
    k: int,
    delta_threshold: float,
) -> tuple[tuple[NoiseDescriptor, ...], Threshold | None]:
    descriptors = tuple(
        mechanism.describe(
            c.integer, c.sensitivity, mechanism.scale_for_share(c.sensitivity, unit * c.weight), k
        )
        for c in columns
    )
    thr = (
        None
        if threshold_weight is None
        else mechanism.threshold(unit * threshold_weight, k, delta_threshold)
    )
    return descriptors, thr


def _quantiles_for(
    mechanism: Mechanism, unit: float, specs: tuple[QuantileSpec, ...], k: int
) -> tuple[QuantileDescriptor, ...]:
    """Each quantile column at its share: ρ (ε_g = √(8ρ/K)) or pure ε (ε_g = ε/K)."""
    return tuple(
        quantiles.quantile_for_share(
            mechanism=mechanism.value,
            share=unit * q.weight,
            grid=q.grid,
            kind=q.kind,
            q=q.q,
            max_rows=q.max_rows,
            max_groups=k,
        )
        for q in specs
    )


def _curve(
    descriptors: tuple[NoiseDescriptor, ...],
    thr: Threshold | None,
    selections: tuple[QuantileDescriptor, ...] = (),
) -> Curve:
    total = ZERO
    for d in descriptors:
        total = total + d.curve
    for s in selections:
        total = total + s.curve
    return total + thr.curve if thr is not None else total


def _epsilon(
    mechanism: Mechanism,
    descriptors: tuple[NoiseDescriptor, ...],
    thr: Threshold | None,
    curve: Curve,
    delta_conversion: float,
    selections: tuple[QuantileDescriptor, ...] = (),
) -> float:
    eps = curve.epsilon(delta_conversion)
    if mechanism is Mechanism.LAPLACE:
        # Pure ε by basic composition is also a valid statement; report the smaller.
        pure = sum(d.pure_epsilon or math.inf for d in descriptors)
        pure += sum(s.pure_epsilon for s in selections)
        if thr is not None:
            pure += thr.max_groups / thr.scale
        eps = min(eps, pure)
    return eps


def _unit_share(
    mechanism: Mechanism,
    budget: QueryBudget,
    columns: tuple[ColumnSpec, ...],
    total_weight: float,
    delta_conversion: float,
) -> float:
    """The budget per unit of weight, before the rounding slack is fitted."""
    if isinstance(budget, RhoBudget):
        if not mechanism.composes_in_rho:
            raise CalibrationError("rho applies to the gaussian mechanism only")
        return budget.rho / total_weight
    if isinstance(budget, EpsilonBudget):
        if mechanism is Mechanism.GAUSSIAN:
            try:
                return max_rho_within(budget.epsilon, delta_conversion) / total_weight
            except CurveError as error:
                raise CalibrationError(str(error)) from None
        return budget.epsilon / total_weight
    counts = [c for c in columns if c.count]
    if not counts:
        raise CalibrationError("an accuracy target needs a COUNT in the query")
    widest = max(counts, key=lambda c: mechanism.sensitivity_of(c.sensitivity))
    try:
        planned = planning.budget_for_accuracy(
            rel_error=budget.rel_error,
            at_count=budget.at_count,
            confidence=budget.confidence,
            sensitivity=mechanism.sensitivity_of(widest.sensitivity),
            mechanism=mechanism.value,
            delta=delta_conversion,
        )
    except ValueError as error:
        raise CalibrationError(f"bad accuracy target: {error}") from None
    if planned.absurd:
        raise CalibrationError(
            f"that accuracy needs epsilon {planned.epsilon:.3g} per released column, "
            "which is not a meaningful privacy guarantee"
        )
    share = planned.rho if mechanism.composes_in_rho else planned.epsilon
    assert share is not None
    return share / widest.weight


def calibrate(
    mechanism: Mechanism,
    columns: tuple[ColumnSpec, ...],
    budget: QueryBudget,
    *,
    threshold_weight: float | None,
    max_groups: int,
    delta_conversion: float,
    delta_threshold: float,
    quantile_columns: tuple[QuantileSpec, ...] = (),
) -> Calibration:
    """The noise of every column, the quantile draws and the threshold, for ``budget``.

    Preconditions: every weight > 0; sensitivities finite; K ≥ 1; 0 < δ's < 1.
    Privacy claim: releasing every column with its descriptor's noise, every quantile
    column with its descriptor's draws (:func:`accounting.quantiles.release_quantiles`),
    and partition selection with the threshold, costs exactly ``curve`` (composition of
    the parts' exact curves) for neighbours within the stated sensitivities; for an ε
    budget, ``curve`` converts to at most that ε at ``delta_conversion``. Raises
    CalibrationError for budgets that cannot be met.
    """
    total_weight = (
        sum(c.weight for c in columns)
        + sum(q.weight for q in quantile_columns)
        + (threshold_weight or 0.0)
    )
    if not total_weight > 0:
        raise CalibrationError("nothing to release")
    unit = _unit_share(mechanism, budget, columns, total_weight, delta_conversion)
    target = budget.epsilon if isinstance(budget, EpsilonBudget) else None
    try:
        return _fit(
            mechanism,
            unit,
            target,
            columns,
            threshold_weight,
            max_groups,
            delta_conversion,
            delta_threshold,
            quantile_columns,
        )
    except (
        mechanisms.MechanismError,
        partition.ThresholdError,
        CurveError,
        QuantileError,
    ) as error:
        raise CalibrationError(f"the budget cannot be calibrated: {error}") from None


@functools.lru_cache(maxsize=4096)
def _fit(
    mechanism: Mechanism,
    unit: float,
    target_eps: float | None,
    columns: tuple[ColumnSpec, ...],
    threshold_weight: float | None,
    k: int,
    delta_conversion: float,
    delta_threshold: float,
    quantile_columns: tuple[QuantileSpec, ...] = (),
) -> Calibration:
    """The calibration at the largest unit share that fits ``target_eps`` (if any).

    A pure function of numbers, memoised: queries of the same statistics at the same
    budget share one search."""
    weights = (
        sum(c.weight for c in columns)
        + sum(q.weight for q in quantile_columns)
        + (threshold_weight or 0.0)
    )

    def attempt(u: float) -> Calibration:
        descriptors, thr = _noise_for(mechanism, u, columns, threshold_weight, k, delta_threshold)
        selections = _quantiles_for(mechanism, u, quantile_columns, k)
        curve = _curve(descriptors, thr, selections)
        eps = _epsilon(mechanism, descriptors, thr, curve, delta_conversion, selections)
        total = u * weights
        return Calibration(
            descriptors,
            thr,
            curve,
            eps,
            total if mechanism.composes_in_rho else None,
            selections,
        )

    best = attempt(unit)
    if target_eps is None:
        return best
    if best.epsilon <= target_eps:
        if quantile_columns:
            return _grow(attempt, unit, best, target_eps)
        return best
    # The float grid's rounding slack (and the discrete Laplace's whole units) sit on top
    # of the share: find the largest share that fits, by shrinking, then searching
    # the bracket.
    fits, too_big, eps_too_big = unit, unit, best.epsilon
    while best.epsilon > target_eps and fits > unit * 1e-3:
        # ε grows about like √share: this step usually fits at the first try.
        too_big, eps_too_big = fits, best.epsilon
        fits = fits * min(0.999, (target_eps / best.epsilon) ** 2)
        best = attempt(fits)
    if best.epsilon > target_eps:
        raise CalibrationError("could not fit the noise within the budget")
    return _largest_fit(attempt, target_eps, best, fits, too_big, eps_too_big)


def _largest_fit(
    attempt: Callable[[float], Calibration],
    target_eps: float,
    best: Calibration,
    fits: float,
    too_big: float,
    eps_too_big: float,
) -> Calibration:
    """A calibration whose share is within 1e-6 of the largest that fits, given a share
    ``fits`` that fits (``best``) and a larger ``too_big`` (ε ``eps_too_big``) that does
    not.

    Why not plain bisection: from the shrink step's bracket (about 1e-3 wide) it takes
    about ten attempts, each a full set of curves. ε is nearly linear in the share across
    so narrow a bracket, so a secant step aimed half a tolerance under the target usually
    fits, and a probe one tolerance above it then closes the bracket: two attempts. A
    secant step that leaves the bracket more than half as wide is followed by a bisection
    (the discrete Laplace's whole units make ε a staircase). Every answer returned is an
    attempt whose ε was computed and fits, so the search decides only how close to the
    budget the share lands, never the privacy claim."""
    eps_fits = best.epsilon
    secant = True
    for _ in range(60):
        width = too_big - fits
        tolerance = 1e-6 * fits
        if width <= tolerance:
            break
        if secant and eps_too_big > eps_fits and width > 2 * tolerance:
            aim = fits + width * (target_eps - eps_fits) / (eps_too_big - eps_fits)
            middle = min(max(aim - tolerance / 2, fits + tolerance / 2), too_big - tolerance)
        else:
            middle = (fits + too_big) / 2
        trial = attempt(middle)
        if trial.epsilon <= target_eps:
            fits, best, eps_fits = middle, trial, trial.epsilon
            probe = middle * (1 + 1e-6)
            if secant and probe < too_big:
                above = attempt(probe)
                if above.epsilon <= target_eps:
                    fits, best, eps_fits = probe, above, above.epsilon
                else:
                    too_big, eps_too_big = probe, above.epsilon
        else:
            too_big, eps_too_big = middle, trial.epsilon
        secant = not secant or too_big - fits <= width / 2
    return best


def _grow(
    attempt: Callable[[float], Calibration], unit: float, best: Calibration, target_eps: float
) -> Calibration:
    """The largest unit share whose curve still converts to at most ``target_eps`` (to
    within 1e-4 of that ε), searching upwards from ``unit`` (which fits).

    Why: a quantile column's curve is the minimum of its ρ share's zCDP line and its
    pure ε bound, so at the orders that convert at small δ it costs less than the share
    it was given; without this the query would spend a fraction of its ε (a lone median
    at ε = 1, δ = 1e-9 would draw at ε_g ≈ 0.3). ε grows at least like √share, so the
    first step (the share times the squared ratio) brackets the answer; then secant
    steps on log ε against log share, kept inside the bracket. ``best`` always fits."""
    errors = (mechanisms.MechanismError, partition.ThresholdError, CurveError, QuantileError)
    low, eps_low = unit, best.epsilon
    high, eps_high = math.inf, math.inf
    for _ in range(60):
        if eps_low >= target_eps * (1.0 - 1e-4) or high - low <= 1e-6 * low:
            break
        if not math.isfinite(high):
            trial_share = low * min(1e6, max(1.01, (target_eps / max(eps_low, 1e-300)) ** 2))
        else:
            t = (math.log(target_eps) - math.log(eps_low)) / (
                math.log(eps_high) - math.log(eps_low)
            )
            t = min(0.9, max(0.1, t * 0.999))  # stay inside, a little on the safe side
            trial_share = math.exp(math.log(low) + t * (math.log(high) - math.log(low)))
        try:
            trial = attempt(trial_share)
        except errors:
            high, eps_high = trial_share, math.inf if not math.isfinite(high) else eps_high
            if not math.isfinite(eps_high):
                eps_high = target_eps * 4.0  # too large to describe: treat as far over
            continue
        if trial.epsilon <= target_eps:
            low, eps_low, best = trial_share, trial.epsilon, trial
        else:
            high, eps_high = trial_share, trial.epsilon
    return best
