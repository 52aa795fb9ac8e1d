"""What an answer carries: the rows, per-cell intervals, and its privacy metadata."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from accounting.mechanisms import Z_975
from proxy.plan import Plan


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    noise_scale: float | None  # σ or b of the column's noise, when it is one statistic
    half_width_95: float | None  # 95% two-sided half-width of that noise


@dataclass(frozen=True)
class PrivacyInfo:
    epsilon: float  # charged by this answer (0 on a cache hit)
    delta: float
    rho: float | None
    mechanism: str
    cached: bool
    charge_id: int | None  # the charge that paid for these values
    populations: tuple[str, ...]
    remaining: dict[str, float]  # ε left per charged population
    partition: dict[str, Any]
    columns: tuple[ColumnInfo, ...]
    query_epsilon: float  # what the release cost when it was first paid for
    data_version: str = ""  # the data the release describes
    counts: str = "at_least_zero"  # how counts are shown: "at_least_zero" or "raw"
    # How much this answer raised the composed ε of each charged population's persons
    # who have spent the most (0 on a replay). Composition makes it smaller than
    # ``epsilon`` once a population has spent something.
    population_epsilon_moved: dict[str, float] | None = None
    # Set for answers that read no person data (public tables, constants): exact and
    # free, e.g. "public data, no privacy cost" (proxy/public_queries.py).
    exact: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The one rendering of an answer's privacy metadata, shared by every door."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "mechanism": self.mechanism,
            "cached": self.cached,
            "charge_id": self.charge_id,
            "populations": list(self.populations),
            "remaining": dict(self.remaining),
            "partition": dict(self.partition),
            "columns": [asdict(c) for c in self.columns],
            "query_epsilon": self.query_epsilon,
            "data_version": self.data_version,
            "counts": self.counts,
            "population_epsilon_moved": dict(self.population_epsilon_moved or {}),
            "exact": self.exact,
        }


@dataclass(frozen=True)
class Result:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    privacy: PrivacyInfo
    warnings: tuple[str, ...] = ()
    cache_key: str = ""
    # Per cell: the 95% half-width of the noise where dpsql can state it (COUNT and SUM
    # columns exactly; AVG by the delta method on its noisy sum and count), else None.
    intervals: tuple[tuple[float | None, ...], ...] = ()


def build_result(
    plan: Plan,
    names: list[str],
    rows: list[tuple[Any, ...]],
    *,
    charge_id: int,
    cached: bool,
    remaining: dict[str, float],
    moved: dict[str, float] | None = None,
) -> Result:
    """The answer to a plan from its post-processed rows (hidden AVG parts included)."""
    names, rows, intervals, unreliable = _intervals(plan, names, rows)
    partition: dict[str, Any]
    if plan.threshold is None:
        partition = {
            "strategy": "public_domain" if plan.key_columns else "none",
            "groups": len(plan.domain or ()),
        }
    else:
        partition = {
            "strategy": "threshold",
            "mechanism": plan.threshold.mechanism,
            "tau": plan.threshold.tau,
            "scale": plan.threshold.scale,
            "delta": plan.threshold.delta,
        }
    columns = _column_infos(plan)
    return Result(
        columns=tuple(names),
        rows=rows,
        privacy=PrivacyInfo(
            epsilon=0.0 if cached else plan.epsilon,
            delta=0.0 if cached else plan.delta,
            rho=None if cached or plan.rho is None else plan.rho,
            mechanism=plan.mechanism,
            cached=cached,
            charge_id=charge_id,
            populations=plan.charge_targets,
            remaining=remaining,
            partition=partition,
            columns=columns,
            query_epsilon=plan.epsilon,
            data_version=plan.data_version,
            counts="raw" if plan.raw_noise else "at_least_zero",
            population_epsilon_moved=dict(moved or {}),
        ),
        warnings=_warnings(columns, names, rows) + unreliable,
        cache_key=plan.cache_key,
        intervals=intervals,
    )


def _column_infos(plan: Plan) -> tuple[ColumnInfo, ...]:
    return tuple(ColumnInfo(name, scale, half) for name, scale, half in plan.column_noise)


def _intervals(
    plan: Plan, names: list[str], rows: list[tuple[Any, ...]]
) -> tuple[list[str], list[tuple[Any, ...]], tuple[tuple[float | None, ...], ...], tuple[str, ...]]:
    """Strip the hidden AVG parts from the answer and turn them into half-widths; AVG
    cells whose noisy count is within its own noise of 0 get no interval and a warning."""
    shown = len(plan.output_names)
    base = [half for _, _, half in plan.column_noise]
    position = {name: i for i, name in enumerate(names)}
    cells = []
    tiny = dict.fromkeys((index for index, _, _ in plan.avg_intervals), 0)
    for row in rows:
        widths: list[float | None] = list(base)
        for index, std_sum, std_count in plan.avg_intervals:
            s = row[position[f"__ci{index}_s"]]
            n = row[position[f"__ci{index}_n"]]
            if s is None or n is None:
                continue
            if float(n) < Z_975 * std_count:
                # The mean divides by a count that may well be 0 or negative: no
                # interval the delta method could state holds.
                tiny[index] += 1
                widths[index] = None
                continue
            count = max(float(n), 1.0)
            mean = float(s) / count
            # hypot: no overflow for huge released means (an infinite width becomes null).
            widths[index] = Z_975 * math.hypot(std_sum, mean * std_count) / count
        cells.append(tuple(widths))
    warnings = tuple(
        f"{k} of {len(rows)} values in column {plan.output_names[index]!r} average over a "
        f"noisy count below its 95% noise half-width ({Z_975 * std:.3g}): they are unreliable "
        "and have no interval"
        for (index, _, std), k in zip(plan.avg_intervals, tiny.values(), strict=True)
        if k
    )
    return names[:shown], [tuple(r[:shown]) for r in rows], tuple(cells), warnings


def _warnings(
    columns: tuple[ColumnInfo, ...], names: list[str], rows: list[tuple[Any, ...]]
) -> tuple[str, ...]:
    warnings = []
    for i, info in enumerate(columns):
        if info.half_width_95 is None:
            continue
        small = sum(
            1 for r in rows if isinstance(r[i], (int, float)) and abs(r[i]) < info.half_width_95
        )
        if small:
            warnings.append(
                f"{small} of {len(rows)} values in column {info.name!r} are smaller than their "
                f"95% noise half-width ({info.half_width_95:.3g}): treat them as indistinguishable from 0"
            )
    return tuple(warnings)
