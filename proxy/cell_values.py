"""What counts as a number among the cells an answer's post-processing returns.

The post-processing DuckDB hands a cell back as a Python int, float or Decimal (a
DECIMAL, as in ``SUM(income)::DECIMAL(18, 2)``), or as something else (text, a date,
None). Intervals, the low-precision warning and the within-noise warning are computed for
numbers; a DECIMAL once counted as none, so its cells got no interval and no word (an
answer oracle, 2026-12-05). Booleans are ints in Python and are not numbers here.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any


def is_number(value: Any) -> bool:
    """An int, float or Decimal, not a bool."""
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """A number with a finite float value: a Python int past 2^64 (DuckDB's HUGEINT) made
    np.isfinite raise a TypeError after the charge (a probe, 2026-12-02); past a
    double's range it has no width to speak of."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def same_value(a: Any, b: Any) -> bool:
    """Whether two cells hold the same value (NULL only equals NULL; values of kinds that
    do not compare are not the same)."""
    if a is None or b is None:
        return a is None and b is None
    try:
        return bool(a == b)
    except Exception:  # e.g. a date against a number
        return False
