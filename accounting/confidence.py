"""Confidence intervals for functions of released values, from the known noise alone.

Every released statistic is its bounded value plus noise of a known scale. An output
that is a function ``f`` of a few released statistics (a ratio, a difference, VAR,
STDDEV, an AVG) gets the **profile interval**: the range of ``f`` over the statistics
within ``z`` noise standard deviations of the released ones (an ellipsoid), where ``z``
is the mechanism's own two-sided 95% quantile in standard deviations. For a linear ``f``
this is exactly the 95% interval; for a smooth non-linear one it is the profile
likelihood interval (whose coverage stays close to 95% where the delta method and a
bootstrap centred on the released point fall short: a variance clamped at 0, a ratio
over a count that noise pushed down).

* :func:`ratio_interval` — Fieller's interval for ``a / b`` (the centred sum over the
  count of an AVG): the closed form of the profile interval of a ratio, exact for
  Gaussian noise; unbounded (None) when the count is within ``z`` noise of 0.
* :func:`profile_offsets` — deterministic points on and inside the unit sphere in ``k``
  dimensions; scaled by ``z·σ`` per coordinate they are where the proxy evaluates ``f``.

Post-processing of released values and public scales: no privacy cost, no random
source (the points are fixed), so a replay shows the same intervals.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from accounting.calibrate import Mechanism

# Directions per dimension: the largest value of a linear f over the sphere is found to
# within 0.1% in 2 dimensions, 0.5% in 3, a few percent beyond (few outputs read more
# than 3 statistics: a ratio reads 2, a variance 3).
_DIRECTIONS = {1: 2, 2: 72, 3: 200}
_DIRECTIONS_MANY = 300
# Shells: the sphere, where a function without a critical point inside takes its
# extremes, and one inner shell with the centre for those that have one.
_SHELLS = (1.0, 0.5)


@functools.lru_cache(maxsize=64)
def profile_offsets(k: int) -> np.ndarray:
    """Points (rows) of the closed unit ball in ``k`` dimensions, the centre first: the
    ± axes, evenly spread directions (a circle in 2-D, a Fibonacci sphere in 3-D, a
    fixed low-discrepancy set beyond) on two shells. Deterministic.

    Preconditions: k ≥ 1. Claim: the first row is 0; every point has norm ≤ 1/r, where
    r (≤ 1, about 0.99 in 3 dimensions) is how far the directions reach in the worst
    probed direction, so the points reach at least the unit sphere in every probed one."""
    if k < 1:
        raise ValueError(f"dimension must be >= 1, got {k}")
    count = _DIRECTIONS.get(k, _DIRECTIONS_MANY)
    axes = np.vstack([np.eye(k), -np.eye(k)])
    if k == 1:
        directions = axes
    elif k == 2:
        angles = 2.0 * math.pi * np.arange(count) / count
        directions = np.vstack([np.column_stack([np.cos(angles), np.sin(angles)]), axes])
    elif k == 3:
        i = np.arange(count) + 0.5
        z = 1.0 - 2.0 * i / count
        r = np.sqrt(1.0 - z * z)
        phi = math.pi * (3.0 - math.sqrt(5.0)) * i
        directions = np.vstack([np.column_stack([r * np.cos(phi), r * np.sin(phi), z]), axes])
    else:
        directions = np.vstack([_spread(k, count, 1), axes])
    # A finite set of directions reaches a little less far than the sphere between its
    # points: stretch it so that it reaches at least 1 in every direction (checked on a
    # fixed set of probe directions), so the range found is never narrower than the
    # sphere's for a linear f.
    probes = _spread(k, 4000, 10_001)
    reach = float((probes @ directions.T).max(axis=1).min()) if k > 1 else 1.0
    shells = [directions * (s / reach) for s in _SHELLS]
    return np.vstack([np.zeros((1, k)), *shells])


def _spread(k: int, count: int, start: int) -> np.ndarray:
    """``count`` unit vectors in ``k`` dimensions from a Halton sequence (from index
    ``start``) mapped through the normal quantile, then normalised: deterministic and
    spread out in any dimension (no random source: accounting/mechanisms.py is the only
    module that draws)."""
    from scipy import special

    primes = _primes(k)
    u = np.array([[_halton(start + i, p) for p in primes] for i in range(count)])
    normal = special.ndtri(u)
    return normal / np.linalg.norm(normal, axis=1, keepdims=True)


def _halton(index: int, base: int) -> float:
    result, f = 0.0, 1.0
    while index > 0:
        f /= base
        result += f * (index % base)
        index //= base
    return result


def _primes(count: int) -> list[int]:
    found: list[int] = []
    candidate = 2
    while len(found) < count:
        if all(candidate % p for p in found):
            found.append(candidate)
        candidate += 1
    return found


def ratio_interval(
    a: float, b: float, std_a: float, std_b: float, z: float
) -> tuple[float, float] | None:
    """Fieller's interval for a / b from released a, b with independent noise of
    standard deviations std_a, std_b: every r with |a − r·b| ≤ z·√(std_a² + r²·std_b²).

    Preconditions: finite inputs, stds ≥ 0, z > 0. Returns (low, high), or None when the
    set is unbounded (b within z·std_b of 0: the count may be 0). Claim: for Gaussian
    noise and z = Φ⁻¹(0.975), it contains the true ratio with probability 0.95."""
    lead = b * b - z * z * std_b * std_b
    if not lead > 0:
        return None
    root = z * math.sqrt(max(0.0, std_b * std_b * a * a + std_a * std_a * lead))
    return (a * b - root) / lead, (a * b + root) / lead


def z_95(mechanism: Mechanism) -> float:
    """The mechanism's two-sided 95% quantile in standard deviations: 1.96 for the
    Gaussian, ln(20)/√2 ≈ 2.12 for the Laplace (an upper bound for sums of Laplace
    noises, whose tails are lighter relative to their spread)."""
    return mechanism.half_width_95(1e6) / mechanism.std(1e6)
