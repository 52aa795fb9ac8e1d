"""Partition selection: which privately-keyed groups may be released, and its δ.

A group whose key domain is not public is released only if its noisy number of distinct
persons reaches a threshold τ. A group that exists only because of one person holds
exactly one person; that person touches at most K groups, so the release reveals the
person with probability at most 1 − (1 − p)^K, p = Pr[1 + Z ≥ τ] = Pr[Z ≥ τ − 1]. That
probability is the δ this module reports. The noisy counts are drawn by
:mod:`accounting.mechanisms` with ``integer=True`` (discrete noise), so everything here
uses the exact tails of the discrete Gaussian and discrete Laplace on the integers and the
comparison ``noisy count >= τ``. Nothing here draws noise. OpenDP's own threshold
constructors are deliberately not used: they under-report δ by one step of the tail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accounting.rdp import Curve, discrete_laplace_curve, gaussian_curve

# scipy.special is imported inside the functions that use it: the import costs about
# 0.2 s (its array-API layer clones numpy), more than the rest of a `dpsql` start-up,
# and Gaussian answers on public keys (and cache hits) never call those functions.

# Up to this σ the discrete Gaussian tail is summed exactly (about 9σ terms); above it a
# rigorous upper bound is used whose relative slack is about t/σ² (< 1e-3 there).
EXACT_SIGMA_MAX = 1e4

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class ThresholdError(ValueError):
    """Threshold parameters outside their preconditions."""


@dataclass(frozen=True)
class Threshold:
    """A partition-selection rule and its cost.

    A group is released iff its noisy person count is >= ``tau``. ``scale`` is σ or b in
    person-count units, ``max_groups`` is K, ``delta`` the δ it actually costs (never more
    than requested), ``curve`` the RDP cost of noising the person counts, and
    ``tau_continuous`` the textbook (continuous-noise) threshold, for reference.
    """

    mechanism: str
    scale: float
    max_groups: int
    tau: int
    delta: float
    curve: Curve
    tau_continuous: float


def _groups(max_groups: int) -> int:
    if isinstance(max_groups, bool) or not isinstance(max_groups, int | np.integer):
        raise ThresholdError(f"max_groups must be an integer >= 1, got {max_groups!r}")
    if max_groups < 1:
        raise ThresholdError(f"max_groups must be an integer >= 1, got {max_groups!r}")
    return int(max_groups)


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ThresholdError(f"{name} must be finite and > 0, got {value!r}")
    return v


def _delta(delta: float) -> float:
    d = float(delta)
    if not 0.0 < d < 0.5:
        raise ThresholdError(
            f"delta must lie in (0, 0.5), got {delta!r}: a larger thresholding δ protects nothing"
        )
    return d


def per_group_delta(delta: float, max_groups: int) -> float:
    """δ_p = 1 − (1 − δ)^{1/K}, computed with log1p/expm1 so tiny δ keep their digits.

    Preconditions: 0 < δ < 0.5, K ≥ 1. Claim: 1 − (1 − δ_p)^K = δ.
    """
    d = _delta(delta)
    k = _groups(max_groups)
    return -math.expm1(math.log1p(-d) / k)


def _total_delta(p: float, k: int) -> float:
    return -math.expm1(k * math.log1p(-p))


# --- tails of the noise ----------------------------------------------------------------


def _dg_log_norm(sigma: float) -> float:
    """ln Σ_{x∈Z} e^{−x²/2σ²}."""
    if sigma >= 3.0:
        # Poisson summation: σ√(2π)·(1 + 2Σ_k e^{−2π²σ²k²}); the sum is < e^{−177}.
        return math.log(sigma) + _LOG_SQRT_2PI
    x = np.arange(1, math.ceil(40.0 * sigma) + 2, dtype=np.float64)
    return math.log1p(2.0 * float(np.sum(np.exp(-x * x / (2.0 * sigma * sigma)))))


def _dg_log_tail_bound(t: int, sigma: float) -> float:
    """ln of an upper bound on Pr[Z ≥ t], t ≥ 1: (f(t) + ∫_t^∞ f)/(σ√(2π)).

    Valid because f is decreasing on [t, ∞) and Σ_Z f ≥ σ√(2π) (Poisson summation).
    """
    from scipy import special

    return float(
        np.logaddexp(
            -(t * t) / (2.0 * sigma * sigma) - math.log(sigma) - _LOG_SQRT_2PI,
            special.log_ndtr(-t / sigma),
        )
    )


def _dg_log_tail_exact(t: int, sigma: float) -> float:
    """ln Pr[Z ≥ t] for the discrete Gaussian, t ≥ 1, by direct summation.

    The terms up to x² ≤ t² + 80σ² are summed; the rest is replaced by its upper bound
    f(stop) + ∫_stop^∞ f (at most ~e^{−40}·σ of the tail), so the result is exact to
    double precision and never below the true tail beyond rounding.
    """
    from scipy import special

    stop = math.ceil(math.sqrt(float(t) * t + 80.0 * sigma * sigma)) + 2
    x = np.arange(t, stop, dtype=np.float64)
    two_var = 2.0 * sigma * sigma
    # ln Σ e^{v}, v = −x²/2σ²: v[0] is the largest term (x ≥ t ≥ 1), so it is factored
    # out and the rest summed by log1p, as scipy's logsumexp does, without its ~100 µs
    # of argument handling per call (a threshold search makes several).
    v = -x * x / two_var
    head = float(v[0]) + math.log1p(float(np.sum(np.exp(v[1:] - v[0]))))
    rest = float(
        np.logaddexp(
            -(stop * stop) / two_var,
            math.log(sigma) + _LOG_SQRT_2PI + special.log_ndtr(-stop / sigma),
        )
    )
    return float(np.logaddexp(head, rest)) - _dg_log_norm(sigma)


def _dg_log_tail(t: int, sigma: float) -> float:
    if sigma <= EXACT_SIGMA_MAX:
        return _dg_log_tail_exact(t, sigma)
    return _dg_log_tail_bound(t, sigma)


def _dl_log_tail(t: int, scale: float) -> float:
    """ln Pr[Z ≥ t] = ln(r^t/(1+r)), r = e^{−1/b}, for the discrete Laplace, t ≥ 1."""
    return -t / scale - math.log1p(math.exp(-1.0 / scale))


def _tail(mechanism: str, t: int, scale: float) -> float:
    """Pr[Z ≥ t] for any integer t (symmetry for t ≤ 0: 1 − Pr[Z ≥ 1 − t])."""
    log_tail = _dg_log_tail if mechanism == "gaussian" else _dl_log_tail
    if t >= 1:
        return math.exp(log_tail(t, scale))
    return -math.expm1(log_tail(1 - t, scale))


def _smallest_t(mechanism: str, scale: float, log_target: float, guess: int) -> int:
    """The smallest integer t ≥ 1 with ln Pr[Z ≥ t] ≤ log_target (tail is decreasing)."""
    log_tail = _dg_log_tail if mechanism == "gaussian" else _dl_log_tail
    # The answer is usually within a few units of the continuous guess, so the bracket is
    # found by galloping away from the guess in steps 1, 2, 4, ... rather than bisecting
    # from 0 (about 3 tail evaluations instead of log2(guess); each exact discrete
    # Gaussian tail is a sum of thousands of terms). Invariant: tail(lo) > target (lo = 0
    # means "none yet"), tail(hi) <= target.
    lo, hi = 0, max(1, guess)
    if log_tail(hi, scale) <= log_target:
        step = 1
        while hi - step >= 1 and log_tail(hi - step, scale) <= log_target:
            hi, step = hi - step, 2 * step
        lo = max(0, hi - step)
    else:
        step = 1
        lo = hi
        while log_tail(lo + step, scale) > log_target:
            lo, step = lo + step, 2 * step
        hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 1 and log_tail(mid, scale) <= log_target:
            hi = mid
        else:
            lo = mid
    return hi


def _threshold(
    mechanism: str, scale: float, k: int, delta: float, curve: Curve, tau_continuous: float
) -> Threshold:
    d_p = per_group_delta(delta, k)
    t = _smallest_t(mechanism, scale, math.log(d_p), guess=max(1, math.floor(tau_continuous)))
    # Rounding in δ_p and in the conversion back must never report more than asked for.
    while _total_delta(_tail(mechanism, t, scale), k) > delta:
        t += 1
    return Threshold(
        mechanism=mechanism,
        scale=scale,
        max_groups=k,
        tau=t + 1,
        delta=_total_delta(_tail(mechanism, t, scale), k),
        curve=curve,
        tau_continuous=tau_continuous,
    )


def gaussian_threshold(sigma: float, max_groups: int, delta: float) -> Threshold:
    """Gaussian thresholding on noisy person counts (discrete Gaussian of std σ).

    τ is the smallest integer with Pr[Z ≥ τ − 1] ≤ δ_p = 1 − (1 − δ)^{1/K}, by the exact
    discrete tail (for σ > 1e4 by a rigorous upper bound of it); ``tau_continuous`` is the
    textbook 1 + σ·Φ⁻¹(1 − δ_p). The counts cost ρ = K/(2σ²) (L2 sensitivity √K).
    Preconditions: σ > 0, K ≥ 1 an integer, 0 < δ < 0.5.
    Privacy claim: releasing the groups whose discrete-Gaussian noisy person count is
    >= τ, together with those counts, satisfies ``curve`` plus an additive ``delta``
    (≤ δ) for user-level neighbours touching at most K groups.
    """
    from scipy import special

    s = _positive("sigma", sigma)
    k = _groups(max_groups)
    d_p = per_group_delta(delta, k)
    tau_continuous = 1.0 - s * float(special.ndtri(d_p))
    return _threshold("gaussian", s, k, delta, gaussian_curve(math.sqrt(k), s), tau_continuous)


def laplace_threshold(epsilon: float, max_groups: int, delta: float) -> Threshold:
    """Laplace thresholding on noisy person counts (discrete Laplace of scale b = K/ε).

    τ is the smallest integer with Pr[Z ≥ τ − 1] = r^{τ−1}/(1+r) ≤ δ_p, r = e^{−1/b};
    ``tau_continuous`` is the textbook 1 + b·ln(1/(2δ_p)). The counts cost the discrete
    Laplace curve at L1 sensitivity K (ε-DP). Preconditions: ε > 0, K ≥ 1 an integer,
    0 < δ < 0.5.
    Privacy claim: releasing the groups whose discrete-Laplace noisy person count is
    >= τ, together with those counts, satisfies ``curve`` plus an additive ``delta``
    (≤ δ) for user-level neighbours touching at most K groups.
    """
    e = _positive("epsilon", epsilon)
    k = _groups(max_groups)
    b = k / e
    d_p = per_group_delta(delta, k)
    tau_continuous = 1.0 + b * math.log(1.0 / (2.0 * d_p))
    return _threshold("laplace", b, k, delta, discrete_laplace_curve(k, b), tau_continuous)


def keep_probability(threshold: Threshold, persons: int) -> float:
    """Pr[persons + Z ≥ τ] under the threshold's discrete noise.

    Preconditions: persons ≥ 0 an integer. Exact for the discrete Laplace and for the
    discrete Gaussian with σ ≤ 1e4; above that the tail is a rigorous upper bound when
    τ − persons ≥ 1 (and the result a lower bound otherwise). Not a privacy claim: used
    for explain/planning, and for persons = 1 it is the per-group δ_p actually paid.
    """
    if isinstance(persons, bool) or not isinstance(persons, int | np.integer) or persons < 0:
        raise ThresholdError(f"persons must be an integer >= 0, got {persons!r}")
    return _tail(threshold.mechanism, threshold.tau - int(persons), threshold.scale)


def one_person_release_probability(threshold: Threshold) -> float:
    """Pr[Z ≥ τ − 1]: the chance a group held by one person is released (= δ_p paid)."""
    return keep_probability(threshold, 1)
