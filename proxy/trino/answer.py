"""What the door sends back for one statement, before it is cut into protocol pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.trino.types import TrinoType, encode


@dataclass(frozen=True)
class Answer:
    names: tuple[str, ...]
    types: tuple[TrinoType, ...]
    rows: list[tuple[Any, ...]]
    # Trino warnings (privacy metadata, accuracy notes) and extra response headers
    # (X-DPSQL-*, X-Trino-Set-Session, ...).
    warnings: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    update_type: str | None = None  # e.g. "SET SESSION": statements that return no rows
    privacy: dict[str, Any] | None = field(default=None)

    def columns(self) -> list[dict[str, Any]]:
        return [kind.column(name) for name, kind in zip(self.names, self.types, strict=True)]

    def data(self) -> list[list[Any]]:
        return [
            [encode(v, kind) for v, kind in zip(row, self.types, strict=True)] for row in self.rows
        ]


def empty(update_type: str, headers: tuple[tuple[str, str], ...] = ()) -> Answer:
    """A statement with no result set (SET SESSION, PREPARE, USE, ...)."""
    return Answer(names=(), types=(), rows=[], headers=headers, update_type=update_type)
