"""The server's log configuration: every dpsql logger writes one JSON line per record,
with an exception's type and code locations but never its message."""

from __future__ import annotations

import json
import logging
import logging.config
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from proxy.server.logs import uvicorn_log_config

# Every logger a door of the served process writes to.
DPSQL_LOGGERS = ("dpsql.server", "dpsql.pgwire")


@pytest.fixture
def configured() -> Iterator[None]:
    names = (*DPSQL_LOGGERS, "uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {
        n: (
            list(logging.getLogger(n).handlers),
            logging.getLogger(n).level,
            logging.getLogger(n).propagate,
        )
        for n in names
    }
    try:
        yield
    finally:
        for n, (handlers, level, propagate) in saved.items():
            logger = logging.getLogger(n)
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate


def _apply(config: dict[str, Any], name: str) -> None:
    """What ``logging.config.dictConfig(config)`` sets up for the logger ``name``, set up
    for it alone: dictConfig itself shuts down every handler in the process first, and
    within a test run that closed pytest's own capture file (the rest of the run then
    failed on "I/O operation on closed file")."""
    entry = config["loggers"][name]
    configurator = logging.config.BaseConfigurator(config)
    handlers = []
    for handler_name in entry["handlers"]:
        spec = config["handlers"][handler_name]
        assert spec["class"] == "logging.StreamHandler" and spec["stream"] == "ext://sys.stderr"
        handler = logging.StreamHandler(sys.stderr)
        factory = configurator.resolve(config["formatters"][spec["formatter"]]["()"])
        handler.setFormatter(factory())
        handlers.append(handler)
    logger = logging.getLogger(name)
    logger.handlers[:] = handlers
    logger.setLevel(entry["level"])
    logger.propagate = entry["propagate"]


@pytest.mark.parametrize("name", DPSQL_LOGGERS)
def test_an_exception_is_logged_as_one_json_line_without_its_message(
    name: str, configured: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(uvicorn_log_config("INFO"), name)

    def fails() -> None:
        raise ValueError("a value from the data: 31337")

    try:
        fails()
    except ValueError:
        logging.getLogger(name).exception("engine failure")
    err = capsys.readouterr().err
    assert "31337" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    record = json.loads(lines[0])
    assert record["exception"] == "ValueError"
    assert record["at"][-1].startswith("test_logs.py:") and record["at"][-1].endswith(" in fails")
