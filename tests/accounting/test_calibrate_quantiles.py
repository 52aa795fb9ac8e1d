"""Quantile columns in the weighted budget split (accounting/calibrate.py): their curves
and pure ε join the total, an ε budget is used up (not wasted on the gap between a draw's
ρ share and its tighter pure-ε bound), and no budget is exceeded."""

from __future__ import annotations

import math

import pytest

from accounting.calibrate import (
    ColumnSpec,
    EpsilonBudget,
    Mechanism,
    QuantileSpec,
    RhoBudget,
    calibrate,
)
from accounting.quantiles import TargetKind, grid_for
from accounting.rdp import ZERO, zcdp_curve
from accounting.sensitivity import AggregateKind, sensitivity

GRID = grid_for(0, 100, integer=True)
MEDIAN = QuantileSpec(GRID, TargetKind.QUANTILE, 0.5, max_rows=3)
MAXIMUM = QuantileSpec(grid_for(0.0, 1.0, integer=False), TargetKind.MAX, None, max_rows=3)
COUNT = ColumnSpec(
    integer=True,
    sensitivity=sensitivity(AggregateKind.ROW_COUNT, max_rows=3, max_groups=2),
    count=True,
)


def _calibrate(mechanism: Mechanism, budget, columns, quantiles):
    return calibrate(
        mechanism,
        columns,
        budget,
        threshold_weight=None,
        max_groups=2,
        delta_conversion=1e-9,
        delta_threshold=0.0,
        quantile_columns=quantiles,
    )


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize(
    ("columns", "quantiles"),
    [((), (MEDIAN,)), ((COUNT,), (MEDIAN,)), ((COUNT,), (MEDIAN, MAXIMUM))],
)
def test_gaussian_epsilon_budget_is_used_and_never_exceeded(epsilon, columns, quantiles):
    cal = _calibrate(Mechanism.GAUSSIAN, EpsilonBudget(epsilon), columns, quantiles)
    total = ZERO
    for d in cal.descriptors:
        total = total + d.curve
    for q in cal.quantiles:
        total = total + q.curve
    assert cal.curve.values == pytest.approx(total.values, rel=1e-12)
    assert len(cal.quantiles) == len(quantiles)
    assert [q.target.kind for q in cal.quantiles] == [q.kind for q in quantiles]
    assert cal.epsilon <= epsilon
    assert cal.epsilon >= epsilon * (1 - 1e-4)  # the budget is spent, not wasted
    assert cal.curve.epsilon(1e-9) == pytest.approx(cal.epsilon)


def test_a_lone_median_draws_near_its_pure_epsilon():
    """Its ρ share alone (ε_g = √(8ρ)) would draw at ε_g ≈ 0.3 for ε = 1 at δ = 1e-9;
    the curve's pure bound lets the search raise it close to 1."""
    cal = _calibrate(Mechanism.GAUSSIAN, EpsilonBudget(1.0), (), (MEDIAN,))
    [median] = cal.quantiles
    per_group = median.epsilon_per_group
    assert per_group * 2 <= 1.0 + 1e-9  # K = 2 groups compose to at most ε
    assert per_group * 2 > 0.9


def test_laplace_splits_pure_epsilon_equally():
    cal = _calibrate(Mechanism.LAPLACE, EpsilonBudget(1.0), (COUNT,), (MEDIAN, MAXIMUM))
    pure = sum(d.pure_epsilon or math.inf for d in cal.descriptors) + sum(
        q.pure_epsilon for q in cal.quantiles
    )
    assert pure <= 1.0 + 1e-9 and cal.epsilon <= 1.0 + 1e-9
    shares = [q.pure_epsilon for q in cal.quantiles] + [cal.descriptors[0].pure_epsilon]
    assert max(shares) == pytest.approx(min(shares), rel=1e-3)


def test_a_rho_budget_is_split_and_each_draw_stays_within_its_share():
    cal = _calibrate(Mechanism.GAUSSIAN, RhoBudget(0.03), (COUNT,), (MEDIAN, MAXIMUM))
    for q in cal.quantiles:
        bound = zcdp_curve(0.01 * (1 + 1e-9))
        assert all(a <= b for a, b in zip(q.curve.values, bound.values, strict=True))
    assert cal.rho == pytest.approx(0.03)


def test_weights_scale_a_quantile_share():
    heavy = QuantileSpec(GRID, TargetKind.QUANTILE, 0.5, max_rows=3, weight=4.0)
    cal = _calibrate(Mechanism.LAPLACE, EpsilonBudget(1.0), (COUNT,), (heavy,))
    assert cal.quantiles[0].pure_epsilon == pytest.approx(0.8, rel=1e-3)
