"""An answer's privacy metadata as PostgreSQL notices (psql prints them) and as the
JSON of ``SHOW dpsql.last_release``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from proxy.result import Result


@dataclass(frozen=True)
class Notice:
    severity: str  # NOTICE | WARNING
    code: str
    message: str
    detail: str = ""
    hint: str = ""

    def fields(self) -> dict[str, str]:
        out = {"S": self.severity, "V": self.severity, "C": self.code, "M": self.message}
        if self.detail:
            out["D"] = self.detail
        if self.hint:
            out["H"] = self.hint
        return out


def _remaining(remaining: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in sorted(remaining.items())) or "n/a"


def notices(result: Result) -> list[Notice]:
    p = result.privacy
    if p.exact:
        message = f"dpsql: exact answer: {p.exact}"
    elif p.cached:
        message = (
            f"dpsql: replayed from the cache, charged nothing (paid by charge "
            f"#{p.charge_id} at ε={p.query_epsilon:.4g}); remaining ε {_remaining(p.remaining)}"
        )
    else:
        message = (
            f"dpsql: charged ε={p.epsilon:.4g} δ={p.delta:.3g} ({p.mechanism}) to "
            f"{', '.join(p.populations)} as charge #{p.charge_id}; remaining ε "
            f"{_remaining(p.remaining)}"
        )
    detail = "; ".join(
        f"{c.name}: noise scale {c.noise_scale:.4g}, ±{c.half_width_95:.4g} at 95%"
        for c in p.columns
        if c.noise_scale is not None and c.half_width_95 is not None
    )
    out = [
        Notice(
            "NOTICE",
            "00000",
            message,
            detail=detail,
            hint="SHOW dpsql.last_release gives the full privacy metadata as JSON",
        )
    ]
    out += [Notice("WARNING", "01000", f"dpsql: {w}") for w in result.warnings]
    return out


def release_json(result: Result) -> str:
    p = asdict(result.privacy)
    body: dict[str, Any] = {**p, "warnings": list(result.warnings)}
    return json.dumps(body, default=list, sort_keys=True)
