"""Structured JSON logs. Callers pass only operational facts (route, status, timing,
analyst name, error code, ε charged, a query fingerprint); never SQL text, rows or
values, so nothing derived from private data can reach a log."""

from __future__ import annotations

import json
import logging
from typing import Any

LOGGER = "dpsql.server"


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
            # The type only: a message or traceback could quote data.
            body["exception"] = record.exc_info[0].__name__
        return json.dumps(body, default=str, separators=(",", ":"))


def uvicorn_log_config(level: str = "INFO") -> dict[str, Any]:
    """logging.dictConfig for uvicorn and the app: JSON lines on stderr, no access log."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JSONFormatter"}},
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
        },
    }


def log(event: str, level: int = logging.INFO, **fields: Any) -> None:
    logger = logging.getLogger(LOGGER)
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})
