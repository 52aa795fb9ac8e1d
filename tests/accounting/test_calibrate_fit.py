"""The share search of an ε budget (accounting/calibrate.py: _fit and _largest_fit).

Float columns put rounding slack on top of their share, so an ε budget is met by the
largest share whose whole curve converts to at most ε. The search must return a share
that fits, lands within 1e-6 of one that does not, and (the reason it is not plain
bisection) do so in a few attempts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accounting import calibrate as calibration
from accounting.calibrate import ColumnSpec, EpsilonBudget, Mechanism
from accounting.sensitivity import Sensitivity

DELTA_CONVERSION = 1e-7
DELTA_THRESHOLD = 1e-8


def _cases(
    seed: int, n: int
) -> list[tuple[Mechanism, tuple[ColumnSpec, ...], float | None, int, float]]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        mechanism = Mechanism(str(rng.choice(["gaussian", "laplace"])))
        k = int(rng.integers(1, 12))
        columns = []
        for j in range(int(rng.integers(1, 4))):
            # The first column is a float one, so the slack search always runs.
            integer = bool(rng.integers(0, 2)) if j else False
            per_group = float(10 ** rng.uniform(-2, 4))
            if integer:
                per_group = float(max(1, round(per_group)))
            sens = Sensitivity(per_group, k * per_group, math.sqrt(k) * per_group, k, 1)
            columns.append(ColumnSpec(integer, sens, weight=float(rng.uniform(0.05, 1.5))))
        threshold = float(rng.uniform(0.1, 1.0)) if rng.integers(0, 2) else None
        cases.append((mechanism, tuple(columns), threshold, k, float(10 ** rng.uniform(-2, 1))))
    return cases


def _at(mechanism, columns, threshold, k, unit):
    """The calibration at a given unit share, no search."""
    return calibration._fit(
        mechanism, unit, None, columns, threshold, k, DELTA_CONVERSION, DELTA_THRESHOLD
    )


def _search(mechanism, columns, threshold, k, epsilon):
    """calibrate() from a cold memo: the calibration, the unit share of the attempt it
    returned (keyed by its descriptors' identity) and how many attempts it made."""
    calibration._fit.cache_clear()
    units: dict[int, float] = {}
    attempts = 0
    original = calibration._noise_for

    def recording(mech, unit, *rest):
        nonlocal attempts
        attempts += 1
        found = original(mech, unit, *rest)
        units[id(found[0])] = unit
        return found

    calibration._noise_for = recording
    try:
        found = calibration.calibrate(
            mechanism,
            columns,
            EpsilonBudget(epsilon),
            threshold_weight=threshold,
            max_groups=k,
            delta_conversion=DELTA_CONVERSION,
            delta_threshold=DELTA_THRESHOLD,
        )
    finally:
        calibration._noise_for = original
    return found, units[id(found.descriptors)], attempts


@pytest.mark.parametrize("case", _cases(11, 60))
def test_the_share_fits_and_is_within_the_tolerance_of_one_that_does_not(case):
    mechanism, columns, threshold, k, epsilon = case
    try:
        found, unit, _ = _search(*case)
    except calibration.CalibrationError:
        pytest.skip("a budget too small for this case's noise")
    assert found.epsilon <= epsilon
    assert _at(mechanism, columns, threshold, k, unit).epsilon == found.epsilon
    assert _at(mechanism, columns, threshold, k, unit * (1 + 2e-6)).epsilon > epsilon


def test_the_search_takes_few_attempts():
    # Plain bisection from the shrink step's bracket took about 12 attempts per search;
    # the secant steps need about 4 (the first try, the shrink, a step and its probe).
    attempts = searches = 0
    for case in _cases(5, 80):
        try:
            _, _, made = _search(*case)
        except calibration.CalibrationError:
            continue
        searches += 1
        attempts += made
        assert made <= 40
    assert searches >= 60
    assert attempts / searches <= 6
