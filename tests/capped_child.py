"""A Python snippet run in a child process under an address-space limit (RLIMIT_AS):
for tests whose failure would allocate without bound, so that a regression fails the
test instead of exhausting the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 2_500_000_000
_PROLOGUE = (
    "import resource\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({LIMIT_BYTES}, {LIMIT_BYTES}))\n"
)


def run_capped(script: str, *args: str, timeout: float = 120) -> dict[str, object]:
    """The JSON object ``script`` prints last, run with ``args`` as sys.argv[1:] and the
    repository first on its path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _PROLOGUE + script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))
