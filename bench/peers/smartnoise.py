"""SmartNoise SQL in a virtual environment of its own, driven through JSON.

smartnoise-sql pins its own OpenDP release, older than dpsql's, so it is never installed
in the project's environment (nor in the ``bench`` extra). ``ensure_venv`` creates
``bench/out/sn-venv`` with ``python -m venv`` and installs the pinned requirements with
pip; ``run_job`` starts ``bench/smartnoise_runner.py`` with that venv's Python.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "bench" / "out" / "sn-venv"
RUNNER = ROOT / "bench" / "smartnoise_runner.py"
REQUIREMENTS = ("smartnoise-sql==1.0.10", "pandas>=2,<3")


def python() -> Path:
    return VENV / "bin" / "python"


def ensure_venv() -> Path:
    """Create the SmartNoise venv once (a stamp records what it was built with)."""
    stamp = VENV / ".bench-requirements"
    wanted = "\n".join(REQUIREMENTS)
    if stamp.exists() and stamp.read_text() == wanted and python().exists():
        return python()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    stamp.write_text(wanted)
    return python()


def run_job(job: dict[str, Any], timeout: float = 3600) -> dict[str, Any]:
    """Run one job (see ``smartnoise_runner.py``) and return its JSON answer."""
    proc = subprocess.run(
        [str(ensure_venv()), str(RUNNER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"SmartNoise runner failed:\n{proc.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer
