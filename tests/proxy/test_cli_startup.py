"""A cold `dpsql query` imports only what answering needs (issue 18: start-up was almost
all imports). Each run is a new process on a real PUMS policy; the modules left out are
the ones that cost most of a start-up and that a query answered from the CLI never uses:
scipy.stats and scipy.optimize (accuracy planning only), the HTTP server's stack, and,
on a cached answer, pandas (pyarrow's pandas shim loads it on any pa.array call)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.proxy.conftest import ROOT

SQL = "SELECT sex, COUNT(*) AS n, AVG(income) FROM PUMS.PUMS GROUP BY sex"
HEAVY = ("scipy.stats", "scipy.optimize", "fastapi", "uvicorn", "starlette", "pandas")

_RUN = """
import json, runpy, sys
sys.argv = ["dpsql", *sys.argv[1:]]
try:
    runpy.run_module("proxy.cli", run_name="__main__")
except SystemExit as exit_:
    code = exit_.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _policy(tmp: Path) -> Path:
    text = (ROOT / "sample_data" / "pums" / "policy.toml").read_text()
    text = text.replace('"PUMS_pid.csv"', f'"{ROOT / "sample_data" / "pums" / "PUMS_pid.csv"}"')
    text = text.replace('"../../state/pums-ledger.sqlite"', f'"{tmp / "ledger.sqlite"}"')
    path = tmp / "policy.toml"
    path.write_text(text)
    return path


def _query(policy: Path) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, "--policy", str(policy), "query", SQL, "--epsilon", "1"],
        cwd=policy.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None), proc.stderr
    assert "n:" in proc.stdout  # the answer was printed, with its interval
    return set(report["modules"])


def test_a_cold_query_leaves_the_heavy_modules_alone(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    first = _query(policy)  # planned, charged, run and noised
    assert {"duckdb", "sqlglot", "pyarrow"} <= first  # it did answer for real
    assert "opendp" in first  # the draw
    assert first.isdisjoint(HEAVY[:5]), sorted(first & set(HEAVY))
    again = _query(policy)  # answered from the release store
    assert again.isdisjoint(HEAVY), sorted(again & set(HEAVY))
