"""What a process that answers on many threads imports before its first request.

The engine imports some modules on first use, so that a one-shot `dpsql query` pays
only for what it needs: NumPy's masked arrays (DuckDB's results with NULLs), pyarrow's
compute functions and its probe for pandas, SciPy's special functions, statistics and
optimisers, OpenDP's samplers, the SQL dialects a request may name, and the C library's
time parsing behind ``datetime.strptime``. Python's import lock keeps one import safe,
but two threads importing modules of a package that import one another can be handed
each other's module half-built (the interpreter breaks that deadlock so), a lookup in
``sys.modules`` can find a module half-built (2026-12-05: a 500 after the charge), and
many of those first imports come after the charge, where no failure may depend on
timing or data. A server imports them all at start-up instead
(tests/proxy/test_thread_imports.py holds the list to the code)."""

from __future__ import annotations

import importlib

from proxy.parse import DIALECTS

# Imported inside functions on the answer path (release, confidence intervals, the
# planner's calibration), by DuckDB when a result has NULLs, or by ``strptime``.
MODULES = (
    "numpy.ma",
    "pyarrow.compute",
    "scipy.special",
    "scipy.stats",
    "scipy.optimize",
    "_strptime",
)


def import_now() -> None:
    """Import every module the engine would import on first use, on this thread."""
    import pyarrow as pa
    from sqlglot.dialects.dialect import Dialect

    from accounting.mechanisms import load_samplers

    for name in MODULES:
        importlib.import_module(name)
    # pyarrow's first conversion of a Python list probes for pandas (importing it when
    # installed): the release converts its keys so, after the charge.
    pa.array([0])
    for dialect in DIALECTS:
        Dialect.get_or_raise(dialect)
    load_samplers()
