"""Counting deep copies: the planning-time tests check that work grows with a query's
nesting by counting ``copy.deepcopy`` calls rather than timing anything."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from types import FrameType


def deep_copies(action: Callable[[], object]) -> int:
    """How many times copy.deepcopy is entered while ``action`` runs."""
    calls = 0

    def count(frame: FrameType, event: str, _: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is copy.deepcopy.__code__:
            calls += 1

    sys.setprofile(count)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls
