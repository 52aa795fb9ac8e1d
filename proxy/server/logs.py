"""Structured JSON logs. Callers pass only operational facts (route, status, timing,
analyst name, error code, ε charged, a query fingerprint); never SQL text, rows or
values, so nothing derived from private data can reach a log."""

from __future__ import annotations

import json
import logging
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

LOGGER = "dpsql.server"
PGWIRE_LOGGER = "dpsql.pgwire"


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            body.update(fields)
        if record.exc_info and record.exc_info[0] is not None:
            # The type and where it was raised, never its message or the traceback's
            # text: a message could quote data, a code location cannot.
            body["exception"] = record.exc_info[0].__name__
            body["at"] = code_locations(record.exc_info[2])
        return json.dumps(body, default=str, separators=(",", ":"))


def code_locations(tb: TracebackType | None, frames: int = 8) -> list[str]:
    """The innermost ``frames`` frames of a traceback as "file.py:line in function":
    enough for an operator to find an internal error, and nothing a message or a
    variable's value could carry."""
    return [
        f"{Path(f.filename).name}:{f.lineno} in {f.name}"
        for f in traceback.extract_tb(tb)[-frames:]
    ]


class TextFormatter(logging.Formatter):
    """The same facts as JSONFormatter, as one readable line."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        extra = " ".join(f"{k}={v}" for k, v in fields.items()) if isinstance(fields, dict) else ""
        when = time.strftime("%H:%M:%S", time.localtime(record.created))
        return f"{when} {record.levelname.lower()} {record.getMessage().strip()} {extra}".rstrip()


def uvicorn_log_config(level: str = "INFO", *, json_lines: bool = True) -> dict[str, Any]:
    """logging.dictConfig for uvicorn and the app: JSON lines (or plain text, with the
    same fields) on stderr, and no access log (it would show query strings)."""
    formatter = {"()": f"{__name__}.{'JSONFormatter' if json_lines else 'TextFormatter'}"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            LOGGER: {"handlers": ["stderr"], "level": level, "propagate": False},
            # The PostgreSQL door's logger: without it, Python's last-resort handler would
            # print its records' tracebacks, messages included, to stderr.
            PGWIRE_LOGGER: {"handlers": ["stderr"], "level": level, "propagate": False},
        },
    }


def log(event: str, level: int = logging.INFO, **fields: Any) -> None:
    logger = logging.getLogger(LOGGER)
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})
