"""Server settings: a frozen value built from arguments or from ``DPSQL_*`` variables.

Workers started by uvicorn from an import string cannot receive Python objects, so
``dpsql serve`` writes its flags to the environment and every worker reads them back
with :meth:`Settings.from_env`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

ENV_PREFIX = "DPSQL_"


@dataclass(frozen=True)
class Settings:
    policy: Path
    max_body_bytes: int = 256 * 1024  # the SQL cap itself is the policy's max_sql_length
    rate_limit: str = "50/second;2000/minute"  # per API key, per worker process; "off"
    page_size: int = 1000  # rows per page when the request names none
    max_page_size: int = 100_000
    idempotency_ttl_s: float = 24 * 3600.0
    cursor_ttl_s: float = 24 * 3600.0
    trino_page_rows: int = 1000  # rows per page of the Trino door's answers (nextUri)
    log_level: str = "INFO"
    json_logs: bool = True

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        if not 1 <= self.page_size <= self.max_page_size:
            raise ValueError("page_size must lie in [1, max_page_size]")
        if self.trino_page_rows < 1:
            raise ValueError("trino_page_rows must be at least 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read ``DPSQL_POLICY`` (required) and the optional ``DPSQL_<FIELD>`` overrides."""
        env = os.environ if env is None else env
        policy = env.get(ENV_PREFIX + "POLICY")
        if not policy:
            raise ValueError("set DPSQL_POLICY to the policy file the server enforces")
        values: dict[str, object] = {"policy": Path(policy)}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if f.name == "policy" or raw is None or raw == "":
                continue
            default = getattr(cls, f.name)
            if isinstance(default, bool):
                values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                values[f.name] = int(raw)
            elif isinstance(default, float):
                values[f.name] = float(raw)
            else:
                values[f.name] = raw
        return cls(**values)  # type: ignore[arg-type]

    def to_env(self) -> dict[str, str]:
        """The variables that make :meth:`from_env` return these settings."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[ENV_PREFIX + f.name.upper()] = (
                ("1" if value else "0") if isinstance(value, bool) else str(value)
            )
        return out
