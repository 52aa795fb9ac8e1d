"""Seeded coverage of the intervals an answer states (issue #12 §6, finding 5).

Intervals are post-processing of released values, so their coverage can be measured
without OpenDP's (unseedable) samplers: the noise-free released table of a plan (the
core run without noise, a public domain completed with zeros) is noised here with a
seeded numpy generator at the plan's scales, each copy goes through the engine's own
post-processing and interval code, and each stated interval is checked against the
select list evaluated on the noise-free table (the *bounded* value intervals claim to
cover). Tests only: it reads the exact core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from accounting.calibrate import Mechanism
from proxy.engine import Engine
from proxy.intervals import simulated_columns, simulated_widths, with_row_index
from proxy.plan import Plan
from proxy.request import QueryRequest
from proxy.result import build_result
from proxy.rewrite.l0 import takes_seed


@dataclass
class Coverage:
    """Per output column: cells with an interval, how many covered, cells with null."""

    stated: dict[str, int] = field(default_factory=dict)
    covered: dict[str, int] = field(default_factory=dict)
    null: dict[str, int] = field(default_factory=dict)

    def rate(self, column: str) -> float:
        return self.covered.get(column, 0) / max(1, self.stated.get(column, 0))


def noise_free(plan: Plan, exact: dict[str, np.ndarray]) -> pa.Table:
    """The released table a plan with a public domain would build, without noise."""
    assert plan.domain is not None, "the harness covers public-domain keys"
    keys = [list(exact[k]) for k in plan.key_columns]
    rows = len(keys[0]) if keys else len(next(iter(exact.values())))
    index = {tuple(_plain(k[i]) for k in keys): i for i in range(rows)}
    columns: dict[str, Any] = {}
    for j, name in enumerate(plan.key_columns):
        columns[name] = pa.array([d[j] for d in plan.domain])
    for n in plan.noise:
        col = list(exact[n.statistic.column])
        values = [col[index[d]] if d in index else 0 for d in plan.domain]
        values = [0 if v is None else _plain(v) for v in values]
        if n.statistic.integer:
            columns[n.statistic.column] = pa.array([int(v) for v in values], pa.int64())
        else:
            columns[n.statistic.column] = pa.array([float(v) for v in values], pa.float64())
    return pa.table(columns)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def noisy_copy(plan: Plan, table: pa.Table, rng: np.random.Generator) -> pa.Table:
    """``table`` with seeded noise of the plan's distribution on every statistic."""
    out = table
    for n in plan.noise:
        name = n.statistic.column
        values = np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=float)
        scale = n.descriptor.scale
        if Mechanism(n.descriptor.mechanism) is Mechanism.GAUSSIAN:
            noise = rng.normal(0.0, scale, len(values))
        else:
            noise = rng.laplace(0.0, scale, len(values))
        noisy = values + noise
        at = out.column_names.index(name)
        if n.statistic.integer:
            column = pa.array(np.rint(noisy).astype(np.int64))
        else:
            column = pa.array(noisy)
        out = out.set_column(at, name, column)
    return out


def measure(engine: Engine, request: QueryRequest, runs: int, seed: int) -> Coverage:
    """Coverage of every output column of ``request`` over ``runs`` seeded releases."""
    plan = engine.prepare(request)[1]
    exact = engine.executor.run(plan.core_sql, [0] if takes_seed(plan.core_sql) else [])
    base = noise_free(plan, exact)
    _, truth_rows = engine.post.run(plan.outer_sql, with_row_index(base))
    truth = {int(r[-1]): r for r in truth_rows}  # by released row (the hidden __row)
    rng = np.random.default_rng(seed)
    cov = Coverage()
    shown = len(plan.output_names)
    for _ in range(runs):
        table = noisy_copy(plan, base, rng)
        names, rows = engine.post.run(plan.outer_sql, with_row_index(table))
        simulated = simulated_widths(plan, table, simulated_columns(plan), engine.post)
        result = build_result(
            plan, names, rows, charge_id=None, cached=False, remaining={}, simulated=simulated
        )
        at_row = names.index("__row")
        for row, full, widths in zip(result.rows, rows, result.intervals, strict=True):
            want = truth[int(full[at_row])]
            for c in range(shown):
                if plan.column_noise[c][1] is None and widths[c] is None:
                    value = row[c]
                    if isinstance(value, int | float) and c not in _keys(plan):
                        name = plan.output_names[c]
                        cov.null[name] = cov.null.get(name, 0) + 1
                    continue
                width, value, bounded = widths[c], row[c], want[c]
                if width is None or not isinstance(bounded, int | float):
                    continue
                name = plan.output_names[c]
                cov.stated[name] = cov.stated.get(name, 0) + 1
                cov.covered[name] = cov.covered.get(name, 0) + (abs(value - bounded) <= width)
    return cov


def _keys(plan: Plan) -> set[int]:
    from proxy.outer import direct_columns

    return {i for i, d in enumerate(direct_columns(plan.outer_sql)) if (d or "").startswith("__k")}
