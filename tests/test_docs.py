"""The README documents what the code does: every error code, the two set-up commands,
and the CI entry point runs the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

from proxy.errors import CODES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_every_error_code_is_documented_with_its_status() -> None:
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", README, flags=re.M))
    assert set(rows) == set(CODES)
    for code, status in CODES.items():
        assert int(rows[code]) == status, code


def test_quick_start_is_two_make_commands_and_ci_runs_the_tests() -> None:
    quick = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
