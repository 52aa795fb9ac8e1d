"""What a process that answers on many threads imports before its first request.

The engine imports some modules on first use, so that a one-shot `dpsql query` pays
only for what it needs: NumPy's masked arrays (DuckDB's results with NULLs), pyarrow's
compute functions, SciPy's special functions, statistics and optimisers, and OpenDP's
samplers. Python's import lock keeps one import safe, but two threads importing modules
of a package that import one another can be handed each other's module half-built (the
interpreter breaks that deadlock so), and many of those first imports come after the
charge, where no failure may depend on timing or data. A server imports them all at
start-up instead (tests/proxy/test_thread_imports.py holds the list to the code)."""

from __future__ import annotations

import importlib

# Imported inside functions on the answer path (release, confidence intervals, the
# planner's calibration) or by DuckDB when a result has NULLs.
MODULES = (
    "numpy.ma",
    "pyarrow.compute",
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
)


def import_now() -> None:
    """Import every module the engine would import on first use, on this thread."""
    from accounting.mechanisms import load_samplers

    for name in MODULES:
        importlib.import_module(name)
    load_samplers()
