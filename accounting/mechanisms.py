"""Noise scales, their exact privacy cost, and the only place dpsql draws noise.

Every released value gets integer noise from OpenDP's secure samplers (discrete Gaussian
or discrete Laplace on ``i64``), built with ``enable_features("contrib")`` only. Integer
columns are noised as they are. Float columns are first rounded — here, in integer units,
so that the rounding slack is ours to state — to a power-of-two grid ``g`` far finer than
the noise; the integers are noised and multiplied back by ``g``, so every released value
is an exact multiple of ``g`` and carries no floating-point side channel.

The cost of each release is an RDP curve from :mod:`accounting.rdp`, computed from public
numbers only (sensitivity, scale, grid, number of coordinates a person can change), so a
dry run (:func:`describe_gaussian`, :func:`describe_laplace`) and the real release return
the very same :class:`NoiseDescriptor`. numpy is used for arrays only, never for noise.
"""

from __future__ import annotations

import functools
import math
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from accounting.rdp import Curve, discrete_laplace_curve, gaussian_curve

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


@functools.cache
def _contrib() -> None:
    """Enables OpenDP's ``contrib`` features, once. OpenDP is imported on first use, and
    only the modules used here (not its prelude, which loads its NumPy, scikit-learn and
    Polars extras): it costs about a tenth of a second, and a process that draws no noise
    (a `dpsql` command answered from the release cache, `dpsql --help`) never needs it."""
    from opendp.mod import enable_features

    enable_features("contrib")


def load_samplers() -> None:
    """Import now every module the samplers import on first use, and enable OpenDP's
    contrib features.

    Precondition: none. Privacy claim: none (no noise is drawn). For a process that will
    draw on several threads at once (a server): a package whose modules import one
    another, imported by two threads at the same moment, can hand one of them a module
    still half-built (Python breaks that deadlock so), and after a charge that would be
    a failure. A one-shot process keeps importing lazily."""
    # The helper thread's pool (concurrent.futures imports it on first access), the
    # measurements' modules, and the module OpenDP loads at its first draw.
    from concurrent.futures import ThreadPoolExecutor  # noqa: F401

    from opendp import _data, domains, measurements, measures, metrics  # noqa: F401

    _contrib()


# A float column's grid is 2^-GRID_BITS of its noise scale (rounded down to a power of two),
# so the noise is between 2^24 and 2^25 grid units: rounding is invisible next to the
# noise, and the slack it adds to the L2 sensitivity is √m·g ≤ √m·2^-24·σ (for m = 100
# changed groups and ρ = 1e-4, a 4e-5 relative increase of Δ2). The samplers' cost does
# not depend on the scale (measured: ~7-12 µs per value at any scale). Fewer bits would
# cost more slack; more bits would shrink the representable range below.
GRID_BITS = 24

# Integer units are clamped to ±2^62 before noising so that value + noise stays inside
# i64 (OpenDP saturates beyond that; its bindings offer no i128). Clamping is a
# contraction, so neighbours stay at most as far apart as before. For float columns it
# caps |value| at 2^62·g ≥ 2^37·scale, e.g. about 1.4e11 at σ = 1.
MAX_UNITS = 2**62

# Φ⁻¹(0.975): the continuous Gaussian's two-sided 95% quantile.
Z_975 = 1.959963984540054

# Scales whose grid and clamped range stay normal finite float64 numbers.
_MIN_SCALE = 1e-280
_MAX_SCALE = 1e250


class MechanismError(ValueError):
    """A release or descriptor asked for with inputs outside its preconditions."""


@dataclass(frozen=True)
class NoiseDescriptor:
    """What a release added and what it costs.

    ``scale`` is σ (Gaussian) or b (Laplace) in value units; ``grid`` the spacing of the
    released values (1.0 for integer columns); ``l1_sensitivity``/``l2_sensitivity`` the
    sensitivities in value units (the one the mechanism was given, the other the bound it
    implies); ``curve`` the exact RDP cost including the rounding slack; ``half_width_95``
    the two-sided 95% half-width of the noise in value units; ``pure_epsilon`` the pure-DP
    ε of a Laplace release (its L1 distance in grid units over the scale in grid units,
    slack included), None for the Gaussian.
    """

    mechanism: str
    scale: float
    grid: float
    l1_sensitivity: float
    l2_sensitivity: float
    curve: Curve
    half_width_95: float
    pure_epsilon: float | None = None


def _finite(name: str, value: float, *, positive: bool) -> float:
    if isinstance(value, bool):
        raise MechanismError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise MechanismError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        bound = "> 0" if positive else ">= 0"
        raise MechanismError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def _scale(name: str, value: float) -> float:
    s = _finite(name, value, positive=True)
    if not _MIN_SCALE <= s <= _MAX_SCALE:
        raise MechanismError(f"{name} must lie in [{_MIN_SCALE:g}, {_MAX_SCALE:g}], got {s!r}")
    return s


def gaussian_sigma_for_rho(l2_sensitivity: float, rho: float) -> float:
    """σ = Δ2/√(2ρ): the Gaussian scale whose (discrete) release costs exactly ρ-zCDP.

    Preconditions: Δ2 > 0, ρ > 0. Privacy claim: integer Gaussian noise of this σ on a
    query of L2 sensitivity Δ2 is ρ-zCDP (float columns add the grid slack on top, see
    :func:`describe_gaussian`).
    """
    d = _finite("l2_sensitivity", l2_sensitivity, positive=True)
    r = _finite("rho", rho, positive=True)
    return d / math.sqrt(2.0 * r)


def laplace_scale_for_epsilon(l1_sensitivity: float, epsilon: float) -> float:
    """b = Δ1/ε: the Laplace scale whose release is ε-DP.

    Preconditions: Δ1 > 0, ε > 0. Privacy claim: discrete Laplace noise of scale b on an
    integer query of L1 sensitivity Δ1 is ε-DP (float columns add the grid slack).
    """
    d = _finite("l1_sensitivity", l1_sensitivity, positive=True)
    e = _finite("epsilon", epsilon, positive=True)
    return d / e


def secret_seed() -> int:
    """A 63-bit seed from the OS CSPRNG, e.g. for the per-query L0 sampling hash.

    Privacy claim: unpredictable to anyone who does not read it from this process;
    nothing the analyst sends can influence it.
    """
    return secrets.randbits(63)


def grid_for_scale(scale: float) -> float:
    """The power-of-two grid of a float column noised at ``scale`` (σ or b).

    g = 2^(⌊log2 scale⌋ − GRID_BITS), computed exactly with frexp. Depends on the scale
    only, never on data. Preconditions: scale within the supported range.
    """
    s = _scale("scale", scale)
    _, exponent = math.frexp(s)  # s = mantissa·2^exponent, mantissa in [0.5, 1)
    return math.ldexp(1.0, exponent - 1 - GRID_BITS)


def _changed(changed_coordinates: int | None, length: int) -> int:
    if isinstance(length, bool) or not isinstance(length, int | np.integer) or length < 0:
        raise MechanismError(f"length must be an integer >= 0, got {length!r}")
    if changed_coordinates is None:
        return int(length)
    if (
        isinstance(changed_coordinates, bool)
        or not isinstance(changed_coordinates, int | np.integer)
        or changed_coordinates < 1
    ):
        raise MechanismError(
            f"changed_coordinates must be an integer >= 1, got {changed_coordinates!r}"
        )
    return int(changed_coordinates)


def _laplace_half_width(scale_units: float, integer: bool) -> float:
    """Two-sided 95% half-width of the discrete Laplace, in units of the scale's grid."""
    if not integer:
        return scale_units * math.log(20.0)
    # Pr[|Z| > h] = 2 r^(h+1)/(1+r), r = e^(-1/b); the smallest integer h with <= 0.05.
    log1r = math.log1p(math.exp(-1.0 / scale_units))

    def outside(h: int) -> float:
        return math.log(2.0) - (h + 1) / scale_units - log1r

    h = max(0, math.ceil(scale_units * (math.log(40.0) - log1r)) - 1)
    while outside(h) > math.log(0.05):
        h += 1
    while h > 0 and outside(h - 1) <= math.log(0.05):
        h -= 1
    return float(h)


# Multipliers of the deterministic permutations below (coprime with any replicate count
# that is a product of 2s and 5s, such as 400).
_STREAMS = (1, 3, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)


def simulation_draws(mechanism: str, scale: float, replicates: int, stream: int) -> np.ndarray:
    """``replicates`` values spread like (the continuous version of) a release's noise,
    for simulating the spread of arithmetic over released values — never a released
    value, and not random: the quantiles of the noise at evenly spaced probabilities,
    in an order fixed by ``stream`` (columns get different orders, so that a ratio of two
    columns sees their noise combined in many ways). Deterministic, so an answer's
    intervals are the same on every replay. Preconditions: scale within the supported
    range, replicates ≥ 1 a product of 2s and 5s.
    """
    # scipy.special costs a fifth of a second to import (its array-API layer clones
    # numpy); only this simulation needs it here.
    from scipy import special

    s = _scale("scale", scale)
    u = (np.arange(replicates) + 0.5) / replicates
    if mechanism == "gaussian":
        quantiles = special.ndtri(u) * s
    else:
        quantiles = -s * np.sign(u - 0.5) * np.log1p(-2.0 * np.abs(u - 0.5))
    a = _STREAMS[stream % len(_STREAMS)]
    order = (a * np.arange(replicates) + 97 * stream) % replicates
    return np.asarray(quantiles[order], dtype=np.float64)


def simulation_table(
    mechanism: str, scale: float, replicates: int, rows: int, first_stream: int
) -> np.ndarray:
    """A (replicates, rows) array of values spread like a release's noise, for
    simulating arithmetic over the rows of a released table: each column holds the
    quantiles of :func:`simulation_draws` in an order of its own, so that each row gets
    noise of its own (each released cell is noised independently; one draw shared by
    every row made a window over the rows, such as a percent of total, look almost
    noise-free). Each order sorts the copies by a fixed mix (splitmix64's finaliser) of
    (stream, copy): no random source, and rows far apart get unrelated orders, where
    simulation_draws' arithmetic orders repeat a multiplier every 20 streams (two such
    columns can be shifted copies of each other). Deterministic, so an answer's
    intervals are the same on every replay; never a released value. Preconditions: as
    simulation_draws, rows ≥ 0.
    """
    base = simulation_draws(mechanism, scale, replicates, 0)  # stream 0: quantile order
    streams = (first_stream + np.arange(rows, dtype=np.uint64)).astype(np.uint64)
    copies = np.arange(replicates, dtype=np.uint64)
    with np.errstate(over="ignore"):
        keys = _mix64(_mix64(streams)[None, :] + copies[:, None])
    order = np.argsort(keys, axis=0, kind="stable")  # column r: a permutation of copies
    return np.asarray(base[order], dtype=np.float64)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping): a fixed bijection that scatters
    nearby inputs, used only to order simulation copies."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def laplace_half_width_95(scale: float) -> float:
    """Exact two-sided 95% half-width of discrete Laplace noise of scale ``scale`` (in
    integer units). Preconditions: scale within the supported range."""
    return _laplace_half_width(_scale("scale", scale), integer=True)


# A pure function of public numbers, memoised (typed: a NumPy float is kept apart from
# a Python one): calibration asks for the same columns at each step of its search, and
# the release asks again for what was planned.
@functools.lru_cache(maxsize=4096, typed=True)
def describe_gaussian(
    *,
    l2_sensitivity: float,
    sigma: float,
    integer: bool,
    length: int,
    changed_coordinates: int | None = None,
) -> NoiseDescriptor:
    """The descriptor :func:`release_gaussian` returns for these public parameters.

    Integer columns: discrete Gaussian of std σ; curve ρ = Δ2²/(2σ²). Float columns: grid
    g = :func:`grid_for_scale` (σ); each of the m = ``changed_coordinates`` (default
    ``length``) coordinates one person can change may round one extra unit apart, so the
    L2 distance in grid units is at most Δ2/g + √m and the curve is that of the discrete
    Gaussian of std σ/g at that distance: ρ = (Δ2 + √m·g)²/(2σ²). Pass
    ``changed_coordinates`` (e.g. K) whenever ``length`` could depend on the data, so that
    the cost does not. ``half_width_95`` = 1.959964·σ, the continuous approximation (good
    once σ is at least a grid unit or so).

    Preconditions: Δ2 ≥ 0 finite, σ > 0 within [1e-280, 1e250], length ≥ 0.
    Privacy claim: the release is (α, curve(α))-RDP at every order for neighbours whose
    per-column vectors differ by at most Δ2 in L2 norm in at most m coordinates.
    """
    d2 = _finite("l2_sensitivity", l2_sensitivity, positive=False)
    s = _scale("sigma", sigma)
    m = _changed(changed_coordinates, length)
    if integer:
        grid = 1.0
        curve = gaussian_curve(d2, s)
    else:
        grid = grid_for_scale(s)
        curve = gaussian_curve(d2 / grid + math.sqrt(m), s / grid)
    return NoiseDescriptor(
        mechanism="gaussian",
        scale=s,
        grid=grid,
        l1_sensitivity=math.sqrt(m) * d2,
        l2_sensitivity=d2,
        curve=curve,
        half_width_95=Z_975 * s,
    )


# A pure function of public numbers, memoised (typed: a NumPy float is kept apart from
# a Python one): calibration asks for the same columns at each step of its search, and
# the release asks again for what was planned.
@functools.lru_cache(maxsize=4096, typed=True)
def describe_laplace(
    *,
    l1_sensitivity: float,
    scale: float,
    integer: bool,
    length: int,
    changed_coordinates: int | None = None,
) -> NoiseDescriptor:
    """The descriptor :func:`release_laplace` returns for these public parameters.

    Integer columns: discrete Laplace of scale b; the curve is the exact discrete Laplace
    curve at ⌈Δ1⌉ (not the continuous Laplace curve, which understates it). Float
    columns: grid g = :func:`grid_for_scale` (b); the L1 distance in grid units is at most
    ⌈Δ1/g⌉ + m with m = ``changed_coordinates`` (default ``length``), and the curve is the
    discrete Laplace curve of scale b/g there. ``half_width_95``: exact two-sided 95%
    quantile of the discrete Laplace for integer columns, b·ln 20 for float columns.

    Preconditions: Δ1 ≥ 0 finite, b > 0 within [1e-280, 1e250], length ≥ 0.
    Privacy claim: the release is (α, curve(α))-RDP at every order (and max-curve-DP) for
    neighbours whose per-column vectors differ by at most Δ1 in L1 norm in at most m
    coordinates.
    """
    d1 = _finite("l1_sensitivity", l1_sensitivity, positive=False)
    b = _scale("scale", scale)
    m = _changed(changed_coordinates, length)
    if integer:
        grid = 1.0
        units = math.ceil(d1)
        curve = discrete_laplace_curve(units, b)
        pure = units / b
        half = _laplace_half_width(b, integer=True)
    else:
        grid = grid_for_scale(b)
        units = math.ceil(d1 / grid) + m
        curve = discrete_laplace_curve(units, b / grid)
        pure = units / (b / grid)
        half = _laplace_half_width(b, integer=False)
    return NoiseDescriptor(
        mechanism="laplace",
        scale=b,
        grid=grid,
        l1_sensitivity=d1,
        l2_sensitivity=d1,
        curve=curve,
        half_width_95=half,
        pure_epsilon=pure,
    )


def _to_units(values: Sequence[float] | np.ndarray, *, integer: bool, grid: float) -> np.ndarray:
    """The column as i64 grid units, clamped to ±MAX_UNITS (a contraction)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise MechanismError(f"values must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if integer and arr.dtype.kind == "u":
        return np.minimum(arr, np.uint64(MAX_UNITS)).astype(np.int64)
    if integer and arr.dtype.kind == "i":
        return np.clip(arr.astype(np.int64), -MAX_UNITS, MAX_UNITS)
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        raise MechanismError("values must be numbers") from None
    if not np.all(np.isfinite(arr)):
        raise MechanismError("values must be finite (clamp before releasing)")
    if integer:
        if not np.all(arr == np.floor(arr)):
            raise MechanismError("integer=True needs integer values")
        scaled = arr
    else:
        # Division by a power of two is exact; rint is a deterministic rounding to nearest.
        scaled = np.rint(np.clip(arr, -MAX_UNITS * grid, MAX_UNITS * grid) / grid)
    return np.clip(scaled, -MAX_UNITS, MAX_UNITS).astype(np.int64)


@functools.lru_cache(maxsize=256)
def _measurement(mechanism: str, scale_units: float) -> Any:
    """One OpenDP vector measurement on i64 (discrete noise of ``scale_units``).

    Kept for reuse: a measurement is an immutable description (OpenDP's functions are
    ``Send + Sync``); each invocation draws fresh noise from its sampler."""
    from opendp.measurements import make_gaussian, make_laplace

    domain, metric = _space(mechanism)
    if mechanism == "gaussian":
        return make_gaussian(domain, metric, scale=scale_units)
    return make_laplace(domain, metric, scale=scale_units)


@functools.cache
def _space(mechanism: str) -> tuple[Any, Any]:
    """The input domain and metric of :func:`_measurement`: the same for every scale,
    so built once (a new ε builds new measurements, and these were half their cost)."""
    from opendp.domains import atom_domain, vector_domain
    from opendp.metrics import l1_distance, l2_distance

    _contrib()
    domain = vector_domain(atom_domain(T="i64"))
    metric = l2_distance(T="f64") if mechanism == "gaussian" else l1_distance(T="i64")
    return domain, metric


def _release(
    values: Sequence[float] | np.ndarray, descriptor: NoiseDescriptor, integer: bool
) -> np.ndarray:
    units = _to_units(values, integer=integer, grid=descriptor.grid)
    return _from_units(_draw(descriptor, units), descriptor, integer)


# Columns up to this many values are handed to OpenDP as a Python list (see _invoke).
_LIST_ARGUMENT = 256

# Columns of at least this many values are drawn in two halves, one on a helper thread.
# OpenDP's exact samplers cost about 10 µs per value and run in Rust with the GIL
# released, so on two cores the halves take 0.6-0.8 of the whole from 128 values up
# (measured here: 0.78 at 128, 0.70 at 512, 0.61 at 1,024); the hand-over costs about
# as much as it saves near 50 values (1.15 at 32, 0.92 at 64).
_SPLIT_AT = 128
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
# Held while the helper draws: a release that finds it busy (another query's noise)
# draws its whole column itself rather than queue behind it.
_helper_free = threading.Lock()
_helper: tuple[int, ThreadPoolExecutor] | None = None


def _helper_pool() -> ThreadPoolExecutor:
    """The helper thread of this process (a forked child makes its own: threads do not
    survive a fork)."""
    from concurrent.futures import ThreadPoolExecutor  # only when a long column comes

    global _helper
    if _helper is None or _helper[0] != os.getpid():
        _helper = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="dpsql-noise"))
    return _helper[1]


def _invoke(meas: Any, units: np.ndarray) -> np.ndarray:
    """One OpenDP call: ``units`` plus independent noise per coordinate."""
    # A short column crosses into OpenDP as a list: its NumPy path costs about 15 µs
    # more per call (a few columns of a few groups is the usual release); a long one as
    # the array, where the conversions cost the same and the sampler dominates.
    arg = units.tolist() if units.size <= _LIST_ARGUMENT else units
    return np.asarray(meas(arg), dtype=np.int64)


def _draw(descriptor: NoiseDescriptor, units: np.ndarray) -> np.ndarray:
    """``units`` plus one independent draw of the descriptor's noise per coordinate.

    A long column is drawn in two OpenDP calls at once, its first half on the helper
    thread: every coordinate still gets its own independent draw from the same sampler
    (OpenDP's vector measurement draws each coordinate independently), so the output is
    distributed exactly as from one call."""
    if units.size == 0:
        return np.zeros(0, dtype=np.int64)
    meas = _measurement(descriptor.mechanism, descriptor.scale / descriptor.grid)
    if units.size < _SPLIT_AT or (_CORES or 1) < 2 or not _helper_free.acquire(blocking=False):
        return _invoke(meas, units)
    try:
        half = units.size // 2
        try:
            first = _helper_pool().submit(_invoke, meas, units[:half])
        except RuntimeError:  # no thread to be had (e.g. at interpreter exit): one call
            return _invoke(meas, units)
        rest = _invoke(meas, units[half:])
        return np.concatenate([first.result(), rest])
    finally:
        _helper_free.release()


def _from_units(noisy: np.ndarray, descriptor: NoiseDescriptor, integer: bool) -> np.ndarray:
    if integer:
        return noisy
    # units·g is exact (power-of-two scaling), so every value is a multiple of g.
    return noisy.astype(np.float64) * descriptor.grid


def release_gaussian(
    values: Sequence[float] | np.ndarray,
    *,
    l2_sensitivity: float,
    sigma: float,
    integer: bool,
    changed_coordinates: int | None = None,
) -> tuple[np.ndarray, NoiseDescriptor]:
    """Add discrete Gaussian noise to a whole column in one OpenDP call.

    Returns the noisy column (int64 for integer columns, float64 multiples of the grid
    otherwise) and the descriptor :func:`describe_gaussian` gives for
    ``length=len(values)``. Preconditions: as :func:`describe_gaussian`; values finite,
    and integers when ``integer`` (refused otherwise: the caller must clamp first, since a
    refusal here reveals that a non-finite value was present).
    Privacy claim: the descriptor's curve, for inputs whose neighbours satisfy the stated
    sensitivity; noise comes from OpenDP's discrete Gaussian sampler only.
    """
    desc = describe_gaussian(
        l2_sensitivity=l2_sensitivity,
        sigma=sigma,
        integer=integer,
        length=len(values),
        changed_coordinates=changed_coordinates,
    )
    return _release(values, desc, integer), desc


def release_laplace(
    values: Sequence[float] | np.ndarray,
    *,
    l1_sensitivity: float,
    scale: float,
    integer: bool,
    changed_coordinates: int | None = None,
) -> tuple[np.ndarray, NoiseDescriptor]:
    """Add discrete Laplace noise to a whole column in one OpenDP call.

    Returns the noisy column (int64 for integer columns, float64 multiples of the grid
    otherwise) and the descriptor :func:`describe_laplace` gives for
    ``length=len(values)``. Preconditions: as :func:`describe_laplace`; values finite,
    and integers when ``integer``.
    Privacy claim: the descriptor's curve, for inputs whose neighbours satisfy the stated
    sensitivity; noise comes from OpenDP's discrete Laplace sampler only.
    """
    desc = describe_laplace(
        l1_sensitivity=l1_sensitivity,
        scale=scale,
        integer=integer,
        length=len(values),
        changed_coordinates=changed_coordinates,
    )
    return _release(values, desc, integer), desc


def release_planned(
    values: Sequence[float] | np.ndarray,
    *,
    mechanism: str,
    sensitivity: float,
    scale: float,
    integer: bool,
    changed_coordinates: int,
    planned: Curve,
) -> np.ndarray:
    """Noise a column exactly as planned: the mechanism's own release, refused unless its
    curve equals ``planned`` (the curve the ledger was charged for).

    ``sensitivity`` is Δ2 for "gaussian" and Δ1 for "laplace". Preconditions: as
    :func:`release_gaussian` / :func:`release_laplace`. Privacy claim: the release costs
    exactly ``planned``; nothing is drawn that the charge does not cover.
    """
    if mechanism == "gaussian":
        out, desc = release_gaussian(
            values,
            l2_sensitivity=sensitivity,
            sigma=scale,
            integer=integer,
            changed_coordinates=changed_coordinates,
        )
    elif mechanism == "laplace":
        out, desc = release_laplace(
            values,
            l1_sensitivity=sensitivity,
            scale=scale,
            integer=integer,
            changed_coordinates=changed_coordinates,
        )
    else:
        raise MechanismError(f"unknown mechanism {mechanism!r}")
    if desc.curve != planned:
        raise MechanismError("the release would cost a different curve than was charged")
    return out


@dataclass(frozen=True)
class PlannedColumn:
    """One column to noise as planned: the arguments of :func:`release_planned`."""

    values: np.ndarray
    mechanism: str
    sensitivity: float
    scale: float
    integer: bool
    changed_coordinates: int
    planned: Curve


def _describe_planned(column: PlannedColumn) -> NoiseDescriptor:
    """The descriptor :func:`release_planned` would release ``column`` with, refused
    unless its curve is the planned one."""
    integer, length, k = column.integer, len(column.values), column.changed_coordinates
    if column.mechanism == "gaussian":
        desc = describe_gaussian(
            l2_sensitivity=column.sensitivity,
            sigma=column.scale,
            integer=integer,
            length=length,
            changed_coordinates=k,
        )
    elif column.mechanism == "laplace":
        desc = describe_laplace(
            l1_sensitivity=column.sensitivity,
            scale=column.scale,
            integer=integer,
            length=length,
            changed_coordinates=k,
        )
    else:
        raise MechanismError(f"unknown mechanism {column.mechanism!r}")
    if desc.curve != column.planned:
        raise MechanismError("the release would cost a different curve than was charged")
    return desc


def release_planned_columns(columns: Sequence[PlannedColumn]) -> list[np.ndarray]:
    """Noise several columns of one release, each exactly as :func:`release_planned`
    would (same descriptor, same curve check, same output types).

    Columns whose noise has the same mechanism and the same scale in grid units are
    drawn in one sampler call over their concatenated units: every coordinate still
    gets its own independent draw from the same distribution, so the output is
    distributed exactly as column by column, with one crossing into OpenDP per distinct
    scale instead of one per column (a large share of a small release's time). Every
    curve is checked before anything is drawn. Privacy claim: as
    :func:`release_planned`, column by column."""
    descriptors = [_describe_planned(c) for c in columns]
    units = [
        _to_units(c.values, integer=c.integer, grid=d.grid)
        for c, d in zip(columns, descriptors, strict=True)
    ]
    groups: dict[tuple[str, float], list[int]] = {}
    for i, d in enumerate(descriptors):
        groups.setdefault((d.mechanism, d.scale / d.grid), []).append(i)
    noisy: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(columns)
    for members in groups.values():
        drawn = _draw(descriptors[members[0]], np.concatenate([units[i] for i in members]))
        start = 0
        for i in members:
            noisy[i] = drawn[start : start + units[i].size]
            start += units[i].size
    return [
        _from_units(n, d, c.integer) for n, d, c in zip(noisy, descriptors, columns, strict=True)
    ]


# --- selection: the exponential mechanism on integer scores ------------------------------
#
# Quantiles (accounting.quantiles) are released by the exponential mechanism over the bins
# of a public grid. Its draw is OpenDP's report-noisy-max with Gumbel noise: adding i.i.d.
# Gumbel(scale) noise to every score and reporting the best index samples exactly
# P(i) ∝ exp(−score_i/scale) (when the lowest score is best), which is the exponential
# mechanism. OpenDP 0.16 uses Gumbel noise only when the output measure is zCDP
# (``zero_concentrated_divergence``); with ``max_divergence`` it adds exponential noise
# instead, i.e. permute-and-flip, a different output distribution. So the measurement is
# always built with the zCDP measure, and the pure-DP reading of the same distribution is
# stated by the caller (accounting.quantiles), not by OpenDP's map.


@functools.lru_cache(maxsize=256)
def _selection(scale: float) -> Any:
    """OpenDP's exponential mechanism on u64 scores, lowest score best (``negate``).

    Cached like :func:`_measurement`: an immutable description; each call draws afresh."""
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_noisy_max
    from opendp.measures import zero_concentrated_divergence
    from opendp.metrics import linf_distance

    _contrib()
    return make_noisy_max(
        vector_domain(atom_domain(T="u64")),
        linf_distance(T="u64"),
        zero_concentrated_divergence(),
        scale=scale,
        negate=True,
    )


# Scores travel as u64; keeping them below 2^63 leaves OpenDP's arithmetic all the room.
MAX_SCORE = 2**63 - 1


@functools.lru_cache(maxsize=4096)
def exponential_mechanism_rho(sensitivity: int, scale: float) -> float:
    """OpenDP's zCDP map of :func:`report_noisy_min` at score sensitivity Δ.

    ρ = (2Δ/scale)²/8, rounded up by OpenDP: scores that are not monotone in the data
    have range distance 2Δ, and the Gumbel (exponential) mechanism is (2Δ/scale)-bounded
    range, hence ρ-zCDP (Cesar & Rogers 2021). Preconditions: Δ ≥ 1 an integer, scale
    within [1e-280, 1e250]. Privacy claim: that of OpenDP's own proof of the measurement.
    """
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int | np.integer):
        raise MechanismError(f"sensitivity must be an integer >= 1, got {sensitivity!r}")
    if not 1 <= sensitivity <= MAX_SCORE:
        raise MechanismError(f"sensitivity must lie in [1, 2^63), got {sensitivity!r}")
    s = _scale("scale", scale)
    return float(_selection(s).map(int(sensitivity)))


def report_noisy_min(scores: Sequence[int] | np.ndarray, *, scale: float) -> int:
    """The exponential mechanism: index i drawn with probability ∝ exp(−scores[i]/scale).

    One OpenDP ``make_noisy_max`` call (Gumbel noise, ``negate=True``) on the scores as
    u64. Preconditions: a non-empty one-dimensional array of integers in [0, 2^63), scale
    within [1e-280, 1e250]. Privacy claim: if one person moves every score by at most Δ
    (in any direction), the draw is (2Δ/scale)-DP, (2Δ/scale)-bounded-range and
    :func:`exponential_mechanism_rho` (Δ, scale)-zCDP; noise comes from OpenDP only.
    """
    s = _scale("scale", scale)
    arr = np.asarray(scores)
    if arr.ndim != 1 or arr.size == 0:
        raise MechanismError(f"scores must be a non-empty vector, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise MechanismError("scores must be integers")
    if arr.dtype.kind == "i" and int(arr.min()) < 0:
        raise MechanismError("scores must be >= 0")
    if int(arr.max()) > MAX_SCORE:
        raise MechanismError("scores must be below 2^63")
    return int(_selection(s)(np.ascontiguousarray(arr, dtype=np.uint64)))
