"""The server's log configuration: every dpsql logger writes one JSON line per record,
with an exception's type and code locations but never its message."""

from __future__ import annotations

import json
import logging
import logging.config
from collections.abc import Iterator

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


@pytest.mark.parametrize("name", DPSQL_LOGGERS)
def test_an_exception_is_logged_as_one_json_line_without_its_message(
    name: str, configured: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logging.config.dictConfig(uvicorn_log_config("INFO"))

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
