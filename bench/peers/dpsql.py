"""dpsql on a PUMS-shaped CSV, in process: the same calls a server would make."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from accounting.ledger import epsilon_at
from accounting.rdp import ZERO, Curve
from bench import workloads
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest

POPULATION = "pums"


@dataclass(frozen=True)
class Answer:
    ok: bool
    seconds: float
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    epsilon: float = 0.0  # charged by this answer (0 when cached)
    cached: bool = False
    error: str = ""


class PumsEngine:
    """An Engine over one PUMS CSV with its own temporary ledger and cache.

    ``population_delta``: the population's total δ. The per-query comparisons run the
    same query hundreds of times, which would use up the real policy's δ = 1e-6 in
    thresholding δ alone; they lift it (each query is still calibrated to its own
    request's ε and δ). The session keeps the policy's 1e-6.
    """

    def __init__(self, rows: int, *, mechanism: str, population_delta: float = 1e-6):
        self._tmp = tempfile.TemporaryDirectory()
        folder = Path(self._tmp.name)
        text = workloads.pums_policy(
            workloads.dataset(rows), folder / "ledger.sqlite",
            mechanism=mechanism, population_delta=population_delta,
        )
        t0 = time.perf_counter()
        self.engine = Engine(parse_policy(text, base_dir=folder))
        self.load_seconds = time.perf_counter() - t0

    def run(self, sql: str, epsilon: float, delta: float = workloads.QUERY_DELTA) -> Answer:
        t0 = time.perf_counter()
        try:
            r = self.engine.run(QueryRequest(sql, epsilon=epsilon, delta=delta))
        except DPSQLError as error:
            return Answer(False, time.perf_counter() - t0,
                          error=f"{error.code}: {str(error).splitlines()[0][:300]}")
        seconds = time.perf_counter() - t0
        return Answer(True, seconds, tuple(r.columns), tuple(tuple(x) for x in r.rows),
                      r.privacy.epsilon, r.privacy.cached)

    def plan_curve(self, sql: str, epsilon: float,
                   delta: float = workloads.QUERY_DELTA) -> tuple[Curve, float]:
        """The RDP curve and thresholding δ the query would be charged if it missed."""
        _, plan = self.engine.prepare(QueryRequest(sql, epsilon=epsilon, delta=delta))
        return plan.curve, plan.delta_threshold

    def spent(self, delta: float | None = None) -> float:
        """The population's ε so far, at its δ or at ``delta``."""
        spend = self.engine.ledger.spent(POPULATION)
        if delta is None:
            return spend.epsilon
        return epsilon_at(spend.curve, delta, spend.delta_extra)

    def close(self) -> None:
        self.engine.close()
        self._tmp.cleanup()

    def __enter__(self) -> PumsEngine:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def compose(curves: list[tuple[Curve, float]], delta: float) -> float:
    """ε at ``delta`` of charging every one of ``curves`` (no cache)."""
    total, extra = ZERO, 0.0
    for c, d in curves:
        total, extra = total + c, extra + d
    return epsilon_at(total, delta, extra)
