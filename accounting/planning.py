"""Accuracy-first budgeting: from an error target to the budget it costs, and back.

An analyst states "the answer should be within r·c of the truth with probability q for a
group of about c persons"; this module finds the smallest budget that meets it
(:func:`budget_for_accuracy`), the error a given budget buys (:func:`accuracy_for_budget`)
and how many releases of one shape still fit under a population's cap
(:func:`releases_within_cap`), using the same curves and the same CKS conversion as the
ledger. Everything here is arithmetic on distributions: no noise is drawn.

The quantity whose error is planned is the sum of ``cells`` independently noised cells
(``cells = 1`` for a single count or sum). Each cell carries noise of the same scale; the
``sensitivity`` is that of the whole release (L2 for the Gaussian, L1 for the Laplace),
which is what the privacy cost depends on.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from accounting.rdp import ZERO, Curve, laplace_curve, max_rho_within, zcdp_curve

# scipy.special is imported inside the functions that use it: the import costs about
# 0.2 s (its array-API layer clones numpy), more than the rest of a `dpsql` start-up,
# and Gaussian answers on public keys (and cache hits) never call those functions.

MECHANISMS: tuple[str, ...] = ("gaussian", "laplace")

ABSURD_EPSILON = 10.0
"""Above this ε a "privacy" guarantee says next to nothing; planning answers say so."""

# Relative share of the tail that the Laplace-sum tail may drop from its negligible
# low-order terms (the dropped mass is added back as an upper bound, so nothing is lost).
_TAIL_DROP = 1e-12

# Beyond 2^53 the count n is no longer exact in float arithmetic (n·ε(α)).
_MAX_RELEASES = 2**53


@dataclass(frozen=True)
class Budget:
    """The smallest budget meeting an accuracy target, as the ledger would charge it.

    ``epsilon`` is the quoted ε at ``delta``: for the Gaussian the CKS conversion of
    ``curve`` (exactly what the ledger applies); for the Laplace the pure ε0 = Δ/b, which
    holds at every δ. ``ledger_epsilon`` is ``curve.epsilon(delta)`` for both: for a single
    Laplace release it reads slightly above ε0 (the RDP conversion costs a little at one
    release and wins only under composition). ``rho`` is set for the Gaussian only.
    ``scale`` is σ or b per cell. ``absurd`` flags ε > 10; ``note`` explains the quote.
    """

    mechanism: str
    epsilon: float
    rho: float | None
    scale: float
    curve: Curve
    absurd: bool
    note: str
    ledger_epsilon: float


@dataclass(frozen=True)
class Accuracy:
    """The error a budget buys: ``|error| ≤ absolute_error`` with probability ``confidence``.

    ``relative_error_at_count`` is ``absolute_error / at_count``; ``scale`` is the noise
    scale per cell (σ or b) the budget pays for.
    """

    mechanism: str
    absolute_error: float
    relative_error_at_count: float
    confidence: float
    scale: float


# --- argument checks -----------------------------------------------------------------


def _positive(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _non_negative(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}") from None
    if not math.isfinite(v) or v < 0.0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _open_unit(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")
    return v


def _cells(value: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"cells must be an integer >= 1, got {value!r}")
    try:
        m = operator.index(value)
    except TypeError:
        raise ValueError(f"cells must be an integer >= 1, got {value!r}") from None
    if m < 1:
        raise ValueError(f"cells must be an integer >= 1, got {value!r}")
    return m


def _mechanism(value: str) -> str:
    if value not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {value!r}")
    return value


# --- tails ---------------------------------------------------------------------------


def _gaussian_quantile(confidence: float) -> float:
    """z with P(|N(0,1)| ≤ z) = confidence."""
    from scipy import special

    return float(special.ndtri((1.0 + confidence) / 2.0))


def laplace_sum_tail(u: float, cells: int) -> float:
    """P(|L_1 + … + L_m| > u·b) for m i.i.d. Laplace(0, b) variables (exact).

    Why exact and cheap: each Laplace is the difference of two exponentials, so the sum is
    G1 − G2 with G1, G2 ~ Gamma(m, b). Conditioning on G2 and expanding the Gamma tail
    gives the finite mixture

        P(S > u·b) = Σ_{i=0}^{m−1} NB(i; m, ½) · Q(m − i, u),

    with NB the negative-binomial pmf and Q the regularised upper incomplete gamma; the
    two-sided tail is twice that. All terms are positive, so there is no cancellation.
    Low-order terms whose total negative-binomial mass is below 1e-12 of the result are not
    evaluated but their mass is added back, so the value is never an underestimate.

    Preconditions: u ≥ 0, cells ≥ 1. Privacy claim: none (a property of the noise).
    """
    m = _cells(cells)
    x = _non_negative("u", u)
    return _laplace_tail_with(x, m, drop=0.0)


def _laplace_tail_with(u: float, m: int, *, drop: float) -> float:
    if m == 1:
        return math.exp(-u)
    # Imported here: scipy.stats costs more than the rest of a CLI start-up.
    from scipy import special, stats

    i_min = 0
    if drop > 0.0:
        i_min = int(stats.nbinom.ppf(drop, m, 0.5))
        # ppf gives the first index whose CDF reaches `drop`; step back one so the dropped
        # mass is strictly below it.
        i_min = max(0, min(i_min - 1, m - 1))
    dropped = float(stats.nbinom.cdf(i_min - 1, m, 0.5)) if i_min > 0 else 0.0
    i = np.arange(i_min, m)
    w = stats.nbinom.pmf(i, m, 0.5)
    one_sided = float(np.sum(w * special.gammaincc(m - i, u))) + dropped
    return min(1.0, 2.0 * one_sided)


def _laplace_quantile(confidence: float, m: int) -> float:
    """Smallest u (to ~1e-12 relative) with P(|S_m| > u·b) ≤ 1 − confidence."""
    target = 1.0 - confidence
    if m == 1:
        # For one Laplace, P(|L| > u·b) = e^{−u} exactly.
        return -math.log1p(-confidence)
    drop = _TAIL_DROP * target

    def excess(u: float) -> float:
        return _laplace_tail_with(u, m, drop=drop) - target

    hi = max(1.0, math.sqrt(2.0 * m) * _gaussian_quantile(confidence))
    while excess(hi) > 0.0:
        hi *= 2.0
    from scipy import optimize  # lazily, like scipy.stats above

    u = float(optimize.brentq(excess, 0.0, hi, xtol=1e-14, rtol=1e-14))
    # Root finding may land a hair on the wrong side; only ever round towards more width.
    while excess(u) > 0.0:
        u = u * (1.0 + 1e-13) + 1e-300
    return u


def _width_factor(mechanism: str, confidence: float, m: int) -> float:
    """t_q / scale: the half-width of the summed noise per unit of per-cell scale."""
    if mechanism == "gaussian":
        return math.sqrt(m) * _gaussian_quantile(confidence)
    return _laplace_quantile(confidence, m)


# --- planning --------------------------------------------------------------------------


# Noise scales an accuracy target may ask for, relative to the sensitivity: beyond them
# the target is meaningless (ε below 1e-12 or above 1e12) and the arithmetic would
# underflow or overflow.
_SCALE_RANGE = (1e-12, 1e12)


def _budget(mechanism: str, scale: float, sensitivity: float, delta: float) -> Budget:
    ratio = scale / sensitivity if sensitivity > 0 else math.inf
    if not (math.isfinite(ratio) and _SCALE_RANGE[0] <= ratio <= _SCALE_RANGE[1]):
        raise ValueError(
            f"the target needs a noise scale of {scale:.3g} for a sensitivity of "
            f"{sensitivity:.3g}; only {_SCALE_RANGE[0]:g} to {_SCALE_RANGE[1]:g} times the "
            "sensitivity can be planned"
        )
    if mechanism == "gaussian":
        gaussian_rho = sensitivity * sensitivity / (2.0 * scale * scale)
        rho: float | None = gaussian_rho
        curve = zcdp_curve(gaussian_rho)
        epsilon = curve.epsilon(delta)
        ledger_epsilon = epsilon
        what = f"Gaussian σ = {scale:.6g} per cell, ρ = {gaussian_rho:.6g}"
    else:
        rho = None
        curve = laplace_curve(sensitivity, scale)
        epsilon = sensitivity / scale
        ledger_epsilon = curve.epsilon(delta)
        what = (
            f"Laplace b = {scale:.6g} per cell, pure ε = {epsilon:.6g} "
            f"(ledger curve reads {ledger_epsilon:.6g} at this δ)"
        )
    absurd = epsilon > ABSURD_EPSILON
    note = f"{what}; ε = {epsilon:.6g} at δ = {delta:.3g}."
    if absurd:
        note += (
            f" ABSURD: ε > {ABSURD_EPSILON:g} gives no meaningful protection; loosen the"
            " error target, ask about larger groups, or bound contributions more tightly."
        )
    return Budget(
        mechanism=mechanism,
        epsilon=epsilon,
        rho=rho,
        scale=scale,
        curve=curve,
        absurd=absurd,
        note=note,
        ledger_epsilon=ledger_epsilon,
    )


def budget_for_accuracy(
    *,
    rel_error: float,
    at_count: float,
    confidence: float = 0.95,
    sensitivity: float,
    mechanism: str = "gaussian",
    cells: int = 1,
    delta: float = 1e-9,
) -> Budget:
    """The smallest budget whose noise keeps |error| ≤ rel_error·at_count w.p. ≥ confidence.

    The error is that of the sum of ``cells`` independently noised cells. Gaussian: the sum
    is N(0, m·σ²), so σ = r·c / (√m·Φ⁻¹((1+q)/2)), ρ = Δ2²/(2σ²), the curve is ρ-zCDP and ε
    is its CKS conversion at δ (the ledger's). Laplace: b is the largest scale for which the
    exact tail of the sum of m Laplace(b) (:func:`laplace_sum_tail`; for m = 1,
    t_q = −b·ln(1−q)) meets the target; ε = Δ1/b (pure DP, so valid at any δ) and the curve
    is :func:`accounting.rdp.laplace_curve` (Δ1, b).

    Preconditions: rel_error > 0, at_count > 0, 0 < confidence < 1, sensitivity > 0 (the
    whole release's L2 or L1 sensitivity), cells ≥ 1 an integer, 0 < delta < 1 (the δ at
    which ε is quoted), mechanism in {"gaussian", "laplace"}; anything else raises
    ValueError naming the argument.
    Privacy claim: the returned ``curve`` is an RDP curve of the described mechanism
    (exact for the continuous noise, an upper bound for the discrete Gaussian), so
    charging it accounts for the release; ``epsilon`` is a valid (ε, δ) statement for it.
    The accuracy claim is exact for continuous noise (the proxy's discretisation adds at
    most its grid step).
    """
    mech = _mechanism(mechanism)
    r = _positive("rel_error", rel_error)
    c = _positive("at_count", at_count)
    q = _open_unit("confidence", confidence)
    s = _positive("sensitivity", sensitivity)
    m = _cells(cells)
    d = _open_unit("delta", delta)
    width = _width_factor(mech, q, m)
    if not (math.isfinite(width) and width > 0):
        raise ValueError(f"confidence {q!r} is too close to 0 or 1 to plan for")
    scale = r * c / width
    return _budget(mech, scale, s, d)


def accuracy_for_budget(
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    at_count: float,
    confidence: float = 0.95,
    sensitivity: float,
    mechanism: str = "gaussian",
    cells: int = 1,
    delta: float = 1e-9,
) -> Accuracy:
    """The error half-width at ``confidence`` that a budget buys (inverse of the above).

    Exactly one of ``epsilon`` or ``rho`` is given. Gaussian: ρ is taken as given or as
    :func:`accounting.rdp.max_rho_within` (ε, δ), the ledger's own calibration; then
    σ = Δ2/√(2ρ) and the half-width is σ·√m·Φ⁻¹((1+q)/2). Laplace (``epsilon`` only, read as
    pure ε): b = Δ1/ε and the half-width is the exact quantile of the sum of m Laplace(b).

    Preconditions: as for :func:`budget_for_accuracy`, plus epsilon > 0 or rho > 0, and
    ``rho`` only with the Gaussian. Violations raise ValueError naming the argument.
    Privacy claim: none by itself; the noise it describes is the noise
    :func:`budget_for_accuracy` would charge for the same error.
    """
    mech = _mechanism(mechanism)
    c = _positive("at_count", at_count)
    q = _open_unit("confidence", confidence)
    s = _positive("sensitivity", sensitivity)
    m = _cells(cells)
    d = _open_unit("delta", delta)
    if (epsilon is None) == (rho is None):
        raise ValueError("give exactly one of epsilon or rho")
    if mech == "gaussian":
        if rho is not None:
            total_rho = _positive("rho", rho)
        else:
            assert epsilon is not None
            total_rho = max_rho_within(_positive("epsilon", epsilon), d)
        scale = s / math.sqrt(2.0 * total_rho)
    else:
        if rho is not None:
            raise ValueError("rho applies to the gaussian mechanism only; give epsilon")
        assert epsilon is not None
        scale = s / _positive("epsilon", epsilon)
    width = scale * _width_factor(mech, q, m)
    return Accuracy(
        mechanism=mech,
        absolute_error=width,
        relative_error_at_count=width / c,
        confidence=q,
        scale=scale,
    )


def releases_within_cap(
    per_release: Curve,
    *,
    cap: float,
    delta: float,
    spent: Curve = ZERO,
    delta_extra_each: float = 0.0,
    delta_extra_spent: float = 0.0,
) -> int:
    """How many more releases of curve ``per_release`` fit under ``cap`` (exact integer).

    n releases fit when δ' = delta − delta_extra_spent − n·delta_extra_each > 0 and
    (spent + n·per_release).epsilon(δ') ≤ cap — the ledger's composition and CKS
    conversion, with thresholding δ taken off the target as the ledger does. That
    predicate only gets harder as n grows, so the answer is found by galloping then
    bisection. Returns 0 when not even one more fits (including when ``spent`` is already
    over the cap).

    Preconditions: cap ≥ 0, 0 < delta < 1, delta_extra_* ≥ 0, and a release that costs
    something (a curve that never reaches the cap, e.g. zero at some order, with no δ
    cost would fit without limit: ValueError).
    Privacy claim: after the returned number of releases the population's (ε, δ) is
    within (cap, delta); one more would exceed it.
    """
    if not isinstance(per_release, Curve):
        raise ValueError("per_release must be a Curve")
    if not isinstance(spent, Curve):
        raise ValueError("spent must be a Curve")
    cap_v = _non_negative("cap", cap)
    d = _open_unit("delta", delta)
    each = _non_negative("delta_extra_each", delta_extra_each)
    extra = _non_negative("delta_extra_spent", delta_extra_spent)
    if per_release.is_zero() and each == 0.0:
        raise ValueError("per_release costs nothing: any number of releases fits")

    def fits(n: int) -> bool:
        d_left = d - extra - n * each
        if d_left <= 0.0:
            return False
        total = spent + per_release * n if n > 0 else spent
        return total.epsilon(d_left) <= cap_v

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
        if hi > _MAX_RELEASES:
            # A curve that is zero at some order never exhausts the cap there.
            raise ValueError("per_release fits without practical limit (> 2^53 releases)")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
