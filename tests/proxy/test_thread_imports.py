"""A serving process imports, before its first request, every module the engine would
import on first use (proxy/thread_imports.py says why). Checked against the code: every
import written inside a function of a module a server loads must name a module already
loaded once ``import_now`` has run, or be one of the few opened with the engine or store
the policy chooses (at start-up, before any request)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from proxy.parse import DIALECTS

ROOT = Path(__file__).resolve().parents[2]

# Imported when the policy chooses PostgreSQL or Spark, by the engine's or the store's
# opening in the server's start-up, before the first request.
OPENED_WITH_THE_POLICY = {
    "accounting.store_postgres",
    "proxy.cache_postgres",
    "proxy.engines.postgres",
    "proxy.engines.spark",
    "proxy.server.store_postgres",
    "proxy.trino.results_postgres",
}

# Modules of other packages first imported inside them on the answer path: DuckDB's
# masked arrays for NULLs, the noise helper's pool, OpenDP's data module (its first
# draw), pyarrow's probe for pandas (its first list conversion), strptime's module, and
# the dialects a request may name.
THIRD_PARTY = (
    "numpy.ma",
    "concurrent.futures.thread",
    "opendp._data",
    "pandas",
    "_strptime",
    *(f"sqlglot.dialects.{d}" for d in DIALECTS),
)

_SCAN = r"""
import ast, importlib.util, json, pathlib, sys
THIRD_PARTY = %r
import proxy.server.app, proxy.pgwire.server, proxy.pgwire.adapter
before = set(sys.modules)
if sys.argv[1] == "import_now":
    from proxy import thread_imports
    thread_imports.import_now()
loaded = set(sys.modules)

def is_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False

lazy = {}
files = [*pathlib.Path("proxy").rglob("*.py"), *pathlib.Path("accounting").rglob("*.py")]
for path in sorted(files):
    name = ".".join(path.with_suffix("").parts).removesuffix(".__init__")
    if name not in before:
        continue
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [
                    f"{node.module}.{a.name}" for a in node.names
                    if is_module(f"{node.module}.{a.name}")
                ]
            else:
                continue
            for n in names:
                lazy.setdefault(n, f"{path}:{node.lineno}")
print(json.dumps({
    "not_loaded": {n: where for n, where in lazy.items() if n not in loaded},
    "third_party": sorted(n for n in THIRD_PARTY if n in loaded),
}))
"""


def _scan(mode: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _SCAN % (THIRD_PARTY,), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: dict[str, object] = json.loads(out.stdout)
    return found


def test_a_server_imports_every_lazily_imported_module_before_its_first_request() -> None:
    found = _scan("import_now")
    not_loaded = found["not_loaded"]
    assert isinstance(not_loaded, dict)
    assert set(not_loaded) <= OPENED_WITH_THE_POLICY, {
        n: w for n, w in not_loaded.items() if n not in OPENED_WITH_THE_POLICY
    }
    # Other packages' first imports: no function of ours names them (pandas counts only
    # where it is installed: pyarrow probes for it).
    wanted = {n for n in THIRD_PARTY if n != "pandas" or importlib.util.find_spec(n)}
    assert set(found["third_party"]) == wanted  # type: ignore[arg-type]


def test_without_it_the_answer_path_would_import_on_first_use() -> None:
    """The check above is not vacuous: the server's modules alone leave the samplers'
    and the calibration's imports to the first answer."""
    found = _scan("nothing")
    not_loaded = found["not_loaded"]
    assert isinstance(not_loaded, dict)
    assert {"opendp.measurements", "scipy.special"} <= set(not_loaded), not_loaded
    assert "opendp._data" not in found["third_party"]  # type: ignore[operator]
