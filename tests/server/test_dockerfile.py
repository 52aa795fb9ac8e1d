"""Docker cannot run here, so the Dockerfile is checked against the project itself: it
installs with the Makefile's (CI's) command and starts the real console script with
flags the real argparse accepts."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

from proxy.cli import build_parser, cmd_serve
from tests.server.conftest import REPO


def instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # line continuations
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_base_image_user_and_volume() -> None:
    ins = instructions()
    assert ins[0] == ("FROM", "python:3.11-slim")
    users = [arg for word, arg in ins if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    volumes = [json.loads(arg) for word, arg in ins if word == "VOLUME"]
    assert volumes == [["/var/lib/dpsql"]]
    # The user switch comes after the install and before the server starts.
    words = [w for w, _ in ins]
    assert words.index("RUN", words.index("COPY")) < words.index("USER") < words.index("CMD")
    for word, arg in ins:
        if word == "COPY":
            *sources, _ = shlex.split(arg)
            assert all((REPO / s).exists() for s in sources), sources


def test_the_image_installs_only_what_the_server_needs() -> None:
    # A regular install of the package itself: no editable install, and none of the
    # extras (linters, type checker, test tools, BI clients) in the production image.
    runs = [shlex.split(arg) for word, arg in instructions() if word == "RUN"]
    installs = [r for r in runs if "install" in r and "pip" in r]
    assert installs == [["python", "-m", "pip", "install", "--quiet", ".[postgres]"]]
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_entry_command_is_the_real_console_script() -> None:
    cmd = json.loads(next(arg for word, arg in instructions() if word == "CMD"))
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[cmd[0]] == "proxy.cli:main"
    args = build_parser().parse_args(cmd[1:])
    assert args.func is cmd_serve
    assert args.host == "0.0.0.0" and args.workers == 1
    assert args.port == 8000 and "EXPOSE" in dict(instructions())
    assert dict(instructions())["EXPOSE"] == str(args.port)
    assert Path(args.policy).is_absolute() and args.policy.startswith("/data/")


def test_dockerignore_keeps_state_and_venv_out() -> None:
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".venv", "state", ".git", "*.sqlite"} <= ignored
