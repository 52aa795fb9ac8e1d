"""accounting/confidence.py: Fieller's ratio interval and the profile points."""

from __future__ import annotations

import numpy as np
import pytest

from accounting.calibrate import Mechanism
from accounting.confidence import profile_offsets, ratio_interval, z_95


def test_fieller_is_the_set_of_ratios_within_the_noise() -> None:
    a, b, sa, sb, z = 120.0, 40.0, 15.0, 6.0, 1.96
    low, high = ratio_interval(a, b, sa, sb, z) or (0.0, 0.0)
    grid = np.linspace(-10, 20, 300_001)
    inside = grid[np.abs(a - grid * b) <= z * np.sqrt(sa**2 + grid**2 * sb**2)]
    assert low == pytest.approx(inside.min(), abs=1e-3)
    assert high == pytest.approx(inside.max(), abs=1e-3)
    assert low < a / b < high
    # A count within its noise of 0: the set is unbounded.
    assert ratio_interval(a, 5.0, sa, sb, z) is None


def test_fieller_covers_95_percent_where_the_delta_method_does_not() -> None:
    rng = np.random.default_rng(3)
    true_a, true_b, sa, sb = 30.0, 12.0, 10.0, 5.0  # a count 2.4 σ from 0
    z = z_95(Mechanism.GAUSSIAN)
    covered = delta = stated = 0
    for _ in range(20_000):
        a, b = true_a + rng.normal(0, sa), true_b + rng.normal(0, sb)
        found = ratio_interval(a, b, sa, sb, z)
        if found is None:
            covered += 1  # unbounded: it contains everything
            continue
        stated += 1
        covered += found[0] <= true_a / true_b <= found[1]
        width = z * np.hypot(sa, a / b * sb) / b
        delta += abs(a / b - true_a / true_b) <= width
    # Exactly 95% for the set; unbounded sets count as covered (the proxy then states
    # the whole range the mean is clamped to), hence a little more.
    assert 0.945 <= covered / 20_000 <= 0.98
    assert delta / stated < 0.93  # what the delta method gave on the stated cells


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_profile_points_fill_the_unit_ball(k: int) -> None:
    points = profile_offsets(k)
    norms = np.linalg.norm(points, axis=1)
    stretch = {1: 1e-9, 2: 1e-3, 3: 0.02}.get(k, 0.25)  # beyond the sphere, by at most
    assert norms[0] == 0 and 1.0 <= norms.max() <= 1.0 + stretch
    # A linear function's range over the points is at least its range over the ball,
    # and not much more.
    for g in (np.arange(1, k + 1, dtype=float), np.ones(k), np.eye(k)[0]):
        values = points @ g
        assert 1.0 - 1e-9 <= values.max() / np.linalg.norm(g) <= 1.0 + stretch
    assert profile_offsets(k) is points  # deterministic, computed once


def test_z_is_the_mechanisms_quantile() -> None:
    assert z_95(Mechanism.GAUSSIAN) == pytest.approx(1.959964, abs=1e-5)
    assert z_95(Mechanism.LAPLACE) == pytest.approx(np.log(20) / np.sqrt(2), rel=1e-3)
