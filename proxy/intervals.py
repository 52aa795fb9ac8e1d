"""Intervals for output cells that are arithmetic over released values (ratios,
differences, VAR/STDDEV, expressions in parentheses): by simulation from the known noise.

Each released statistic is a true value plus noise of a known distribution (the plan's
noise scales). Re-noising the released table R times with that distribution and
evaluating the analyst's select list on every copy gives, for each cell, the spread of
the expression around its released value; the 95th percentile of |f(copy) − f(released)|
is the cell's 95% half-width (a parametric bootstrap). It reads released values and
public scales only — post-processing — and its "draws" are fixed quantiles of the noise
in a fixed order per column (no random source), so a replay shows the same intervals. COUNT and SUM cells keep their exact widths
and AVG cells their delta-method widths; keys have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from accounting.calibrate import Mechanism
from accounting.mechanisms import simulation_draws
from proxy.outer import ROW, direct_columns
from proxy.plan import Plan
from proxy.quantile_release import quantile_outputs
from proxy.release import PostProcessor

REPLICATES = 400


def items_sql(outer: str) -> str:
    """The outer query's select list alone (no HAVING, ORDER BY, LIMIT, hidden parts),
    with the released row index: evaluated on every released row of a copy."""
    tree = sqlglot.parse_one(outer, read="duckdb")
    items = [
        e for e in tree.expressions if not (isinstance(e, exp.Alias) and e.alias.startswith("__"))
    ]
    out = exp.Select(expressions=[exp.column(ROW), *items], from_=tree.args["from_"])
    return out.sql(dialect="duckdb")


def with_row_index(table: pa.Table) -> pa.Table:
    # Built from the buffer: pa.array() asks pyarrow's pandas shim about its argument,
    # which imports pandas (half a second of a cold `dpsql query` that needs none).
    rows = np.arange(table.num_rows, dtype=np.int64)
    index = pa.Array.from_buffers(pa.int64(), table.num_rows, [None, pa.py_buffer(rows)])
    return table.append_column(ROW, index)


def simulated_columns(plan: Plan) -> tuple[int, ...]:
    """Output columns whose width is simulated: not a key, not exactly one released
    statistic (exact width), not an AVG (delta method)."""
    avg = {index for index, _, _ in plan.avg_intervals}
    direct = direct_columns(plan.outer_sql)
    # Quantile draws have no value interval; neither has arithmetic over them.
    drawn = quantile_outputs(plan)
    return tuple(
        i
        for i, (_, _, half) in enumerate(plan.column_noise)
        if half is None
        and i not in avg
        and i not in drawn
        and not (direct[i] or "").startswith("__k")
    )


def _stds(plan: Plan) -> dict[str, float]:
    stds = {
        n.statistic.column: Mechanism(n.descriptor.mechanism).std(n.descriptor.scale)
        for n in plan.noise
    }
    if plan.threshold is not None:
        stds["__persons"] = Mechanism(plan.threshold.mechanism).std(plan.threshold.scale)
    return stds


def simulated_widths(
    plan: Plan, table: pa.Table, columns: Sequence[int], post: PostProcessor
) -> dict[tuple[int, int], float | None]:
    """(released row, output column) -> 95% half-width for the output ``columns``."""
    n = table.num_rows
    if n == 0 or not columns:
        return {}
    base = with_row_index(table)
    query = items_sql(plan.outer_sql)
    stds = _stds(plan)
    copies: dict[str, Any] = {}
    stream = 0
    for name in base.column_names:
        values = base.column(name).to_numpy(zero_copy_only=False)
        tiled = np.tile(values, REPLICATES)  # copy k of row r at k·n + r
        std = stds.get(name)
        if std is not None:
            draws = simulation_draws(plan.mechanism, std, REPLICATES, stream)
            stream += 1
            tiled = tiled.astype(np.float64) + np.repeat(draws, n)
        copies[name] = tiled
    replicated = pa.table(copies)
    _, f0 = post.run(query, base)
    _, reps = post.run(query, replicated)
    value0 = {int(r[0]): r for r in f0}
    spread: dict[tuple[int, int], list[float]] = {}
    for r in reps:
        row = int(r[0])
        for c in columns:
            a, b = r[c + 1], value0[row][c + 1]
            if isinstance(a, int | float) and isinstance(b, int | float):
                spread.setdefault((row, c), []).append(abs(float(a) - float(b)))
    out: dict[tuple[int, int], float | None] = {}
    for row in range(n):
        for c in columns:
            found = spread.get((row, c), [])
            # Cells whose expression failed (NULL) in most copies have no stable width.
            ok = [d for d in found if np.isfinite(d)]
            out[(row, c)] = float(np.quantile(ok, 0.95)) if len(ok) >= REPLICATES * 0.9 else None
    return out
