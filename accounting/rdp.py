"""Rényi-DP curves on a fixed order grid, their composition and conversion to (ε, δ).

Every release dpsql makes is described by an RDP curve ε(α) evaluated at the orders in
``ORDERS``. Curves compose by adding order by order; they are converted to an (ε, δ)
statement once, at report or admission time, never before composing. Everything here
is pure arithmetic: no noise is drawn and nothing outside the standard library, numpy
and scipy is imported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

# scipy.special is imported inside the functions that use it: the import costs about
# 0.2 s (its array-API layer clones numpy), more than the rest of a `dpsql` start-up,
# and Gaussian answers on public keys (and cache hits) never call those functions.

ORDERS: tuple[float, ...] = (
    *(round(1.1 + 0.1 * i, 1) for i in range(99)),
    12.0,
    14.0,
    16.0,
    20.0,
    24.0,
    32.0,
    48.0,
    64.0,
    128.0,
    256.0,
)

_ALPHA = np.asarray(ORDERS, dtype=float)
# The δ-independent parts of the CKS conversion, computed once; ε(δ) below performs the
# same floating-point operations on them as the formula written out, so it is bit-exact.
_LOG1P = np.log1p(-1.0 / _ALPHA)
_LOG_ALPHA = np.log(_ALPHA)
_ALPHA_M1 = _ALPHA - 1.0
_CKS_DELTA_TERMS: dict[float, np.ndarray] = {}
# ndarray.min() without its Python wrapper (the same reduction).
_MIN = np.minimum.reduce


def _cks_delta_term(d: float) -> np.ndarray:
    """(ln δ + ln α)/(α − 1) for every order, memoised per δ (a handful are in use)."""
    term = _CKS_DELTA_TERMS.get(d)
    if term is None:
        term = (math.log(d) + _LOG_ALPHA) / _ALPHA_M1
        term.flags.writeable = False
        if len(_CKS_DELTA_TERMS) < 4096:
            _CKS_DELTA_TERMS[d] = term
    return term


class CurveError(ValueError):
    """A curve or conversion was asked for with inputs outside its preconditions."""


def _check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    v = float(value)
    if math.isnan(v) or math.isinf(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise CurveError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def _check_delta(delta: float) -> float:
    d = float(delta)
    if not 0.0 < d < 1.0:
        raise CurveError(f"delta must lie in (0, 1), got {delta!r}")
    return d


@dataclass(frozen=True)
class Curve:
    """An RDP curve: ``values[i]`` is ε(α) at ``ORDERS[i]``.

    Preconditions: one finite, non-negative value per order (``+inf`` is allowed and
    means "no guarantee at this order").
    Privacy claim: a mechanism described by this curve is (α, ε(α))-RDP at every order
    of the grid; ``a + b`` describes the adaptive composition of both mechanisms and
    ``a * k`` the k-fold composition of one.

    The values are also held as a read-only float64 array, so that composing and
    converting are numpy operations (the ledger does both inside its write lock);
    equality and hashing use ``values`` alone.
    """

    values: tuple[float, ...]
    _array: np.ndarray = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        array = np.array(self.values, dtype=float)
        if array.shape != (len(ORDERS),):
            raise CurveError(f"a curve needs {len(ORDERS)} values, got {len(self.values)}")
        # `v >= 0` is False for NaN too: one pass catches both.
        if not bool(np.all(array >= 0.0)):
            bad = next(v for v in self.values if not v >= 0.0)
            raise CurveError(f"curve values must be >= 0 and not NaN, got {bad!r}")
        array.flags.writeable = False
        object.__setattr__(self, "_array", array)
        if type(self.values) is not tuple or not all(type(v) is float for v in self.values):
            object.__setattr__(self, "values", tuple(array.tolist()))

    @classmethod
    def _of(cls, array: np.ndarray) -> Curve:
        """A curve from an array already known to be valid (a sum or multiple of valid
        curves: non-negative, no NaN, one value per order): skips re-validation."""
        curve = object.__new__(cls)
        array.flags.writeable = False
        # ``values`` is made from the array on first use (__getattr__): the ledger's
        # sums are converted and stored from the array, and most never need the tuple.
        object.__setattr__(curve, "_array", array)
        return curve

    if not TYPE_CHECKING:  # (type checkers keep seeing every other name as unknown)

        def __getattr__(self, name: str) -> tuple[float, ...]:
            # Called only for an attribute not set: ``values`` of a curve made by _of.
            if name != "values" or "_array" not in self.__dict__:
                raise AttributeError(name)
            values = tuple(self._array.tolist())
            object.__setattr__(self, "values", values)
            return values

    @classmethod
    def from_array(cls, values: Iterable[float]) -> Curve:
        """Build a curve from any iterable of per-order values (e.g. a stored JSON list)."""
        return cls(tuple(float(v) for v in values))

    def as_array(self) -> np.ndarray:
        """The values as a read-only float64 array (shared: copy it to modify)."""
        return self._array

    def __add__(self, other: Curve) -> Curve:
        if not isinstance(other, Curve):
            return NotImplemented
        # IEEE addition, element by element: the same bits as adding the floats in Python.
        return Curve._of(self._array + other._array)

    def __mul__(self, k: int) -> Curve:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise CurveError(f"a curve scales by a non-negative integer count, got {k!r}")
        if k == 0:
            # Zero-fold composition reveals nothing, even for +inf entries (0·inf is NaN).
            return ZERO
        return Curve._of(self._array * float(k))

    __rmul__ = __mul__

    def __getstate__(self) -> dict[str, object]:
        return {"values": self.values}

    def __setstate__(self, state: dict[str, object]) -> None:
        object.__setattr__(self, "values", state["values"])
        self.__post_init__()

    def is_zero(self) -> bool:
        # The array's own method: np.any's dispatch costs more than the test itself.
        return not self._array.any()

    def epsilon(self, delta: float) -> float:
        """(ε, δ)-DP implied by this curve, by the Canonne–Kamath–Steinke conversion.

        ε = min_α [ ε(α) + ln(1 − 1/α) − (ln δ + ln α)/(α − 1) ], floored at 0.
        Preconditions: 0 < δ < 1. Privacy claim: the mechanism is (ε, δ)-DP.
        """
        # Kept per δ with the curve (immutable): the ledger converts a total when it
        # admits a charge and again, as the spend before, when it admits the next one.
        known = self.__dict__.get("_epsilons")
        if known is not None and (found := known.get(delta)) is not None:
            return found
        d = _check_delta(delta)
        # (values + ln(1 − 1/α)) − term, as written out, in one temporary array.
        terms = self._array + _LOG1P
        np.subtract(terms, _cks_delta_term(d), out=terms)
        eps = max(0.0, float(_MIN(terms)))
        if known is None:
            known = {}
            object.__setattr__(self, "_epsilons", known)
        known[delta] = eps
        return eps

    def epsilon_textbook(self, delta: float) -> float:
        """The classic conversion min_α ε(α) + ln(1/δ)/(α − 1) (Mironov 2017, Prop. 3).

        Kept for cross-checks: it is never smaller than :meth:`epsilon`.
        """
        d = _check_delta(delta)
        eps = self._array + math.log(1.0 / d) / (_ALPHA - 1.0)
        return max(0.0, float(np.min(eps)))

    def best_order(self, delta: float) -> float:
        """The order at which the CKS conversion attains its minimum (for reports)."""
        d = _check_delta(delta)
        eps = self._array + _LOG1P - _cks_delta_term(d)
        return ORDERS[int(np.argmin(eps))]


ZERO = Curve(tuple(0.0 for _ in ORDERS))


def compose(curves: Iterable[Curve]) -> Curve:
    """Adaptive composition of any number of curves (order-wise sum)."""
    total = ZERO
    for c in curves:
        total = total + c
    return total


def zcdp_curve(rho: float) -> Curve:
    """Curve of a ρ-zCDP mechanism: ε(α) = ρ·α.

    Preconditions: ρ ≥ 0. Privacy claim: ρ-zCDP implies (α, ρα)-RDP for every α > 1.
    """
    r = _check_positive("rho", rho, allow_zero=True)
    # One IEEE product per order, as ``r * a`` in Python gives (same bits); calibration
    # builds thousands of these at a new ε, and the tuple form dominated its cost. The
    # product of a finite r >= 0 and the positive orders is >= 0 and never NaN: valid
    # (+inf past the largest double, as in Python, without numpy's warning).
    if r * ORDERS[-1] < math.inf:
        return Curve._of(_ALPHA * r)
    with np.errstate(over="ignore"):
        return Curve._of(_ALPHA * r)


def gaussian_curve(l2_sensitivity: float, sigma: float) -> Curve:
    """Curve of the (continuous or discrete) Gaussian mechanism: ε(α) = αΔ²/(2σ²).

    Preconditions: Δ ≥ 0, σ > 0. Privacy claim: exact for the continuous Gaussian and an
    upper bound for the discrete Gaussian on integer-valued queries (Canonne et al. 2020).
    """
    d = _check_positive("l2_sensitivity", l2_sensitivity, allow_zero=True)
    s = _check_positive("sigma", sigma)
    return zcdp_curve(d * d / (2.0 * s * s))


def laplace_curve(l1_sensitivity: float, scale: float) -> Curve:
    """Exact RDP curve of the continuous Laplace mechanism (Mironov 2017, Table II).

    ε(α) = 1/(α−1)·ln( α/(2α−1)·e^{(α−1)ε0} + (α−1)/(2α−1)·e^{−αε0} ), ε0 = Δ/b,
    evaluated in log space. Preconditions: Δ ≥ 0, b > 0. Privacy claim: exact for the
    continuous Laplace. It is NOT an upper bound for the discrete Laplace (whose loss at
    Δ = 1 is that of randomized response); use :func:`discrete_laplace_curve` there.
    For ε0 < 1e-5 it returns the upper bound αε0²/2 (see :func:`_pure_zcdp_bound`).
    """
    from scipy import special

    d = _check_positive("l1_sensitivity", l1_sensitivity, allow_zero=True)
    b = _check_positive("scale", scale)
    e0 = d / b
    if e0 == 0.0:
        return ZERO
    if e0 < TINY_EPSILON:
        return _pure_zcdp_bound(e0)
    a = _ALPHA
    terms = np.stack(
        [
            np.log(a / (2 * a - 1)) + (a - 1) * e0,
            np.log((a - 1) / (2 * a - 1)) - a * e0,
        ]
    )
    vals = special.logsumexp(terms, axis=0) / (a - 1)
    # Never above the pure-DP bound ε0 (rounding can push the last digit over).
    return Curve(tuple(float(min(v, e0)) for v in vals))


# Below this pure ε, curves use the zCDP bound αε²/2 (exact to a relative 1e-10 there).
TINY_EPSILON = 1e-5


def _pure_zcdp_bound(epsilon: float) -> Curve:
    """ε(α) = min(αε²/2, ε): an ε-DP mechanism is ε²/2-zCDP (Bun & Steinke 2016,
    Prop. 3.3), and no RDP order exceeds ε. Monotone in ε and free of cancellation."""
    return Curve(tuple(float(min(v, epsilon)) for v in _ALPHA * epsilon * epsilon / 2.0))


def discrete_laplace_curve(l1_sensitivity_units: int, scale_units: float) -> Curve:
    """Exact RDP curve of the discrete Laplace on the integers (two-sided geometric).

    P(x) ∝ e^{−|x|/b}; the neighbour is shifted by n = Δ1 integer units. The privacy
    loss is +ε0 for x ≤ 0, −ε0 for x ≥ n and (n − 2x)/b in between, which gives the
    closed form (r = e^{−1/b}, q = e^{−(2α−1)/b}, ε0 = n/b)

        M(α) = e^{(α−1)ε0}/(1+r) + r^n e^{−(α−1)ε0}/(1+r)
               + (1−r)/(1+r) · e^{(α−1)ε0} · q(1 − q^{n−1})/(1 − q),
        ε(α) = ln M(α) / (α − 1).

    Preconditions: n ≥ 0 an integer, b > 0 (both in the same integer units). Privacy
    claim: exact for an L1 shift of n units in one coordinate and an upper bound for any
    shift of L1 norm n spread over several coordinates (the loss is jointly convex).
    At n = 1 it equals the randomized-response curve, the largest of any ε0-DP mechanism.
    For ε0 < 1e-5 it returns the upper bound αε0²/2 (see :func:`_pure_zcdp_bound`).
    """
    from scipy import special

    if isinstance(l1_sensitivity_units, bool) or int(l1_sensitivity_units) != l1_sensitivity_units:
        raise CurveError(f"discrete sensitivity must be an integer, got {l1_sensitivity_units!r}")
    n = int(l1_sensitivity_units)
    if n < 0:
        raise CurveError(f"discrete sensitivity must be >= 0, got {n}")
    b = _check_positive("scale_units", scale_units)
    if n == 0:
        return ZERO
    e0 = n / b
    a = _ALPHA
    if e0 < TINY_EPSILON:
        # ln M(α) is then below 1e-10 and the closed form loses it to rounding (it could
        # come out below the truth); use the bound every ε0-DP mechanism meets instead.
        return _pure_zcdp_bound(e0)
    log1r = math.log1p(math.exp(-1.0 / b))  # ln(1 + r)
    parts = [
        (a - 1) * e0 - log1r,
        np.full_like(a, -n / b) - (a - 1) * e0 - log1r,
    ]
    if n >= 2:
        # ln[(1−r)/(1+r)] + (α−1)ε0 + ln q + ln(1 − q^{n−1}) − ln(1 − q)
        log_q = -(2 * a - 1) / b
        log_c = math.log(-math.expm1(-1.0 / b)) - log1r
        middle = (
            log_c
            + (a - 1) * e0
            + log_q
            + np.log(-np.expm1((n - 1) * log_q))
            - np.log(-np.expm1(log_q))
        )
        parts.append(middle)
    vals = special.logsumexp(np.stack(parts), axis=0) / (a - 1)
    return Curve(tuple(float(min(max(v, 0.0), e0)) for v in vals))


def pure_dp_curve(epsilon: float) -> Curve:
    """The largest RDP curve of any ε-DP mechanism (that of randomized response).

    ε(α) = 1/(α−1)·ln( (e^{αε} + e^{(1−α)ε}) / (1 + e^{ε}) ). Preconditions: ε ≥ 0.
    Privacy claim: every ε-DP mechanism satisfies this curve (Bun & Steinke 2016, Prop. 3.3
    and its tight form for randomized response); used for external pure-DP charges.
    """
    from scipy import special

    e = _check_positive("epsilon", epsilon, allow_zero=True)
    if e == 0.0:
        return ZERO
    if e < TINY_EPSILON:
        return _pure_zcdp_bound(e)
    a = _ALPHA
    # log(1 + e^ε) as logaddexp: math.exp overflows past ε ≈ 709, which a quantile at
    # ε = 2,000 reached (an OverflowError, HTTP 500, before any charge: a probe, 2026-12-02).
    vals = (special.logsumexp(np.stack([a * e, (1 - a) * e]), axis=0) - np.logaddexp(0.0, e)) / (
        a - 1
    )
    return Curve(tuple(float(min(max(v, 0.0), e)) for v in vals))


def curve_from_orders(orders: Sequence[float], values: Sequence[float]) -> Curve:
    """Accept a curve submitted at exactly the ledger's orders (external consumers).

    Preconditions: ``orders`` equals ``ORDERS`` element-wise (to 1e-9). Refuses anything
    else rather than interpolating, because interpolating an RDP curve can understate it.
    """
    if len(orders) != len(ORDERS) or any(
        abs(float(o) - p) > 1e-9 for o, p in zip(orders, ORDERS, strict=False)
    ):
        raise CurveError("external curves must be given at exactly the ledger's ORDERS")
    return Curve.from_array(values)


# --- closed forms for zCDP and the analytic Gaussian ---------------------------------


def zcdp_epsilon_closed_form(rho: float, delta: float) -> float:
    """The closed form ρ + 2√(ρ ln 1/δ) (Bun & Steinke 2016, Prop. 1.3)."""
    r = _check_positive("rho", rho, allow_zero=True)
    d = _check_delta(delta)
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))


def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """Inverse of ρ + 2√(ρ ln 1/δ): the ρ whose closed-form conversion is exactly ε.

    ρ = (√(L + ε) − √L)², L = ln(1/δ). Preconditions: ε ≥ 0, 0 < δ < 1.
    """
    e = _check_positive("epsilon", epsilon, allow_zero=True)
    log_inv = math.log(1.0 / _check_delta(delta))
    # (√(L+ε) − √L)² written as ε²/(√(L+ε)+√L)² to avoid cancellation for small ε.
    return e * e / (math.sqrt(log_inv + e) + math.sqrt(log_inv)) ** 2


def max_rho_within(epsilon: float, delta: float) -> float:
    """The largest ρ whose curve, converted by :meth:`Curve.epsilon` (CKS), is ≤ ε.

    This is the calibration used for a query's (ε, δ): its noise then costs a zCDP curve
    whose conversion is exactly the one the ledger applies. Preconditions: ε > 0 and above
    ``ZERO.epsilon(δ)`` (the grid's floor, ≈0.0285 at δ = 1e-6; else CurveError),
    0 < δ < 1. Privacy claim: zcdp_curve(result).epsilon(δ) ≤ ε.
    """
    e = _check_positive("epsilon", epsilon)
    d = _check_delta(delta)
    floor = ZERO.epsilon(d)
    if floor >= e:
        # The grid stops at α = 256, so even a vanishing ρ converts to about
        # (ln(1/δ) − ln 256)/255; returning ρ = 0 would break the claim below.
        raise CurveError(
            f"epsilon {e!r} is below {floor:.4g}, the smallest the order grid can certify "
            f"at delta {d!r}"
        )
    # min_α [ρα + c_α] ≤ ε  ⟺  ρ ≤ (ε − c_α)/α for some α, so the largest such ρ is
    # max_α (ε − c_α)/α: exact on the grid, no search needed.
    c = np.log1p(-1.0 / _ALPHA) - (math.log(d) + np.log(_ALPHA)) / (_ALPHA - 1.0)
    rho = float(np.max((e - c) / _ALPHA))
    while rho > 0.0 and zcdp_curve(rho).epsilon(d) > e:  # last-ulp rounding only
        rho = math.nextafter(rho, 0.0)
    if rho <= 0.0:
        raise CurveError(f"epsilon {e!r} is too close to the grid's floor at delta {d!r}")
    return rho


def _analytic_delta(mu: float, eps: float) -> float:
    """δ(ε) of the Gaussian mechanism with μ = Δ/σ (Balle & Wang 2018, Thm. 8)."""
    from scipy import special

    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    first = special.ndtr(a)
    second = math.exp(eps + special.log_ndtr(b))
    return float(first - second)


def analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε for which the Gaussian mechanism with μ = Δ/σ is (ε, δ)-DP (exact).

    Preconditions: μ > 0, 0 < δ < 1. Privacy claim: exact for the continuous Gaussian
    (and for any composition of Gaussians, with μ = √(Σ μ_i²) = √(2ρ)).
    """
    m = _check_positive("mu", mu)
    d = _check_delta(delta)
    if _analytic_delta(m, 0.0) <= d:
        return 0.0
    hi = 1.0
    while _analytic_delta(m, hi) > d:
        hi *= 2.0
    from scipy import optimize  # lazily: a third of a CLI start-up, rarely needed

    return float(optimize.brentq(lambda e: _analytic_delta(m, e) - d, 0.0, hi, xtol=1e-12))


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest σ for which the Gaussian mechanism with L2 sensitivity Δ is (ε, δ)-DP.

    Preconditions: ε > 0, 0 < δ < 1, Δ > 0. Privacy claim: exact for the continuous
    Gaussian; dpsql's discrete noise is calibrated by :func:`max_rho_within` instead.
    """
    e = _check_positive("epsilon", epsilon)
    d = _check_delta(delta)
    s = _check_positive("l2_sensitivity", l2_sensitivity)
    lo, hi = 1e-12, 1.0
    while _analytic_delta(hi, e) < d:
        hi *= 2.0
    from scipy import optimize  # lazily: a third of a CLI start-up, rarely needed

    mu = float(optimize.brentq(lambda m: _analytic_delta(m, e) - d, lo, hi, xtol=1e-14))
    return s / mu
