"""A serving process imports, before its first request, every module the engine would
import on first use (proxy/thread_imports.py says why). Checked against the code: every
import written inside a function of a module a server loads must name a module already
loaded once ``import_now`` has run, or be one of the few opened with the engine or store
the policy chooses (at start-up, before any request)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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

_SCAN = r"""
import ast, importlib.util, json, pathlib, sys
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
    "numpy.ma": "numpy.ma" in loaded,
}))
"""


def _scan(mode: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _SCAN, mode],
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
    # DuckDB's own lazy import, for results with NULLs: no function of ours names it.
    assert found["numpy.ma"] is True


def test_without_it_the_answer_path_would_import_on_first_use() -> None:
    """The check above is not vacuous: the server's modules alone leave the samplers'
    and the calibration's imports to the first answer."""
    not_loaded = _scan("nothing")["not_loaded"]
    assert isinstance(not_loaded, dict)
    assert {"opendp.measurements", "scipy.special"} <= set(not_loaded), not_loaded
