"""Intervals for output cells that are arithmetic over released values (ratios,
differences, VAR/STDDEV, expressions in parentheses), from the known noise.

Each released statistic is a true (bounded) value plus noise of a known distribution
(the plan's noise scales). A cell that reads a few statistics of its own row gets the
**profile interval** (``accounting.confidence``): the range of its expression over the
statistics within z noise standard deviations of the released ones (an ellipsoid; z is
the mechanism's 95% quantile in standard deviations), evaluated by the analyst's select
list on fixed points of that ellipsoid; the half-width is the larger distance from the
released value to either end. For a linear expression that is the exact 95% interval;
where the expression bends or is clamped (a variance near 0, a ratio over a small
count) it keeps its coverage where a spread measured around the noisy released point
did not (BENCHMARKS.md §8: 85–89% before). A cell whose expression reads other rows
(a window: percent of total, rank, lag) is simulated instead (a parametric bootstrap:
the whole released table re-noised 400 times with fixed quantiles of the noise, each
copy's windows over that copy only; the 95th percentile of |f(copy) − f(released)|).
It reads released values and public scales only — post-processing — and uses no random
source, so a replay shows the same intervals. COUNT and SUM cells keep their exact
widths and AVG cells Fieller's interval (proxy/result.py); keys have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from accounting.calibrate import Mechanism
from accounting.confidence import profile_offsets, z_95
from accounting.mechanisms import simulation_table
from proxy.cell_values import is_finite_number
from proxy.errors import DPSQLError
from proxy.outer import ROW, direct_columns, is_hidden
from proxy.plan import Plan
from proxy.quantile_release import quantile_outputs
from proxy.release import PostProcessor

REPLICATES = 400


def items_sql(outer: str) -> str:
    """The outer query's select list alone (no HAVING, ORDER BY, LIMIT, hidden parts),
    with the released row index: evaluated on every released row of a copy."""
    tree = sqlglot.parse_one(outer, read="duckdb")
    items = [e for e in tree.expressions if not is_hidden(e)]
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
    avg = {a.index for a in plan.avg_intervals}
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


def stds_of(plan: Plan) -> dict[str, float]:
    stds = {
        n.statistic.column: Mechanism(n.descriptor.mechanism).std(n.descriptor.scale)
        for n in plan.noise
    }
    if plan.threshold is not None:
        stds["__persons"] = Mechanism(plan.threshold.mechanism).std(plan.threshold.scale)
    return stds


def _reads(outer: str, stds: dict[str, float]) -> list[tuple[str, ...] | None]:
    """Per shown item of the outer query: the noised released columns it reads, or None
    when it reads other rows too (a window, lifted into ``__w`` columns)."""
    tree = sqlglot.parse_one(outer, read="duckdb")
    out: list[tuple[str, ...] | None] = []
    for e in tree.expressions:
        if is_hidden(e):
            continue
        names = {c.name for c in e.find_all(exp.Column)}
        if any(n.startswith("__w") for n in names) or e.find(exp.Window) is not None:
            out.append(None)
        else:
            out.append(tuple(sorted(n for n in names if n in stds)))
    return out


def simulated_widths(
    plan: Plan, table: pa.Table, columns: Sequence[int], post: PostProcessor
) -> dict[tuple[int, int], float | None]:
    """(released row, output column) -> 95% half-width for the output ``columns``."""
    n = table.num_rows
    if n == 0 or not columns:
        return {}
    stds = stds_of(plan)
    reads = _reads(plan.outer_sql, stds)
    query = items_sql(plan.outer_sql)
    base = with_row_index(table)
    _, f0 = post.run(query, base)
    value0 = {int(r[0]): r for r in f0}
    out: dict[tuple[int, int], float | None] = {}
    groups: dict[tuple[str, ...], list[int]] = {}
    windowed = []
    for c in columns:
        found = reads[c] if c < len(reads) else None
        if found is None:
            windowed.append(c)
        else:
            groups.setdefault(found, []).append(c)
    for read, cols in groups.items():
        if not read:  # reads no noised value: exact
            out.update({(row, c): 0.0 for row in range(n) for c in cols})
            continue
        try:
            out.update(_profile(plan, base, read, cols, stds, query, value0, post))
        except DPSQLError:
            # The expression fails somewhere near the released values (e.g. SQRT of a
            # difference that noise could make negative): the answer itself stands
            # (it is paid for), these cells get no interval.
            out.update({(row, c): None for row in range(n) for c in cols})
    if windowed:
        try:
            out.update(_bootstrap(plan, base, windowed, stds, value0, post))
        except DPSQLError:
            out.update({(row, c): None for row in range(n) for c in windowed})
    return out


def _profile(
    plan: Plan,
    base: pa.Table,
    read: tuple[str, ...],
    columns: list[int],
    stds: dict[str, float],
    query: str,
    value0: dict[int, tuple[Any, ...]],
    post: PostProcessor,
) -> dict[tuple[int, int], float | None]:
    """Profile intervals of cells that read the noised columns ``read`` of their row:
    the expression evaluated at fixed points of the z-σ ellipsoid around the released
    values (accounting.confidence), each row's points in one copy of the table."""
    n = base.num_rows
    offsets = profile_offsets(len(read)) * z_95(Mechanism(plan.mechanism))
    points = offsets.shape[0]
    copies: dict[str, Any] = {}
    for name in base.column_names:
        column = base.column(name).to_numpy(zero_copy_only=False)
        tiled = np.tile(column, points)  # point p of row r at p·n + r
        if name in read:
            shift = offsets[:, read.index(name)] * stds[name]
            tiled = tiled.astype(np.float64) + np.repeat(shift, n)
        copies[name] = tiled
    _, rows = post.run(query, pa.table(copies))
    values: dict[tuple[int, int], list[float]] = {}
    failed: dict[tuple[int, int], int] = {}
    for r in rows:
        row = int(r[0])
        for c in columns:
            v = r[c + 1]
            if is_finite_number(v):
                values.setdefault((row, c), []).append(float(v))
            else:
                failed[(row, c)] = failed.get((row, c), 0) + 1
    out: dict[tuple[int, int], float | None] = {}
    for row in range(n):
        released = value0.get(row)
        for c in columns:
            at: Any = None if released is None else released[c + 1]
            found = values.get((row, c), [])
            if (
                not found
                or failed.get((row, c), 0) > 0.1 * points
                or not is_finite_number(at)
            ):
                # The expression fails (NULL) over much of the region, or the row is not
                # in the outer query's FROM (a HAVING beside a window filters there,
                # outer_functions.lift_windows, and may drop a point): no stable width.
                out[(row, c)] = None
                continue
            out[(row, c)] = max(max(found) - float(at), float(at) - min(found), 0.0)
    return out


def _bootstrap(
    plan: Plan,
    base: pa.Table,
    columns: list[int],
    stds: dict[str, float],
    value0: dict[int, tuple[Any, ...]],
    post: PostProcessor,
) -> dict[tuple[int, int], float | None]:
    """Cells that read other rows (windows): the whole table re-noised REPLICATES times
    with fixed quantiles of the noise, each copy's windows over that copy only."""
    n = base.num_rows
    copies = noisy_copies(plan.mechanism, base, stds, REPLICATES)
    _, reps = post.run(per_copy(items_sql(plan.outer_sql)), copies)
    spread: dict[tuple[int, int], list[float]] = {}
    for r in reps:
        row = int(r[0])
        released = value0.get(row)  # None: the HAVING beside a window dropped it
        if released is None:
            continue
        for c in columns:
            a, b = r[c + 1], released[c + 1]
            if is_finite_number(a) and is_finite_number(b):
                spread.setdefault((row, c), []).append(abs(float(a) - float(b)))
    out: dict[tuple[int, int], float | None] = {}
    for row in range(n):
        for c in columns:
            found = spread.get((row, c), [])
            # Cells whose expression failed (NULL) in most copies have no stable width.
            ok = [d for d in found if np.isfinite(d)]
            out[(row, c)] = float(np.quantile(ok, 0.95)) if len(ok) >= REPLICATES * 0.9 else None
    return out


REP = "__rep"  # the copy a replicated row belongs to


def noisy_copies(
    mechanism: str, base: pa.Table, stds: dict[str, float], replicates: int
) -> pa.Table:
    """``base`` (a released table with ``__row``) tiled ``replicates`` times with a
    ``__rep`` column, each noised column of each copy moved by fixed quantiles of its
    noise (``stds``: the noise's standard deviation by column name), each row by noise of
    its own, since each released cell was noised independently. Deterministic."""
    n = base.num_rows
    copies: dict[str, Any] = {REP: np.repeat(np.arange(replicates), n)}
    stream = 0
    for name in base.column_names:
        values = base.column(name).to_numpy(zero_copy_only=False)
        tiled = np.tile(values, replicates)  # copy k of row r at k·n + r
        std = stds.get(name)
        if std is not None:
            # each row's own noise (row r of copy k at k·n + r): a window reads rows
            # whose released values were noised independently
            draws = simulation_table(mechanism, std, replicates, n, stream)
            stream += n
            tiled = tiled.astype(np.float64) + draws.reshape(-1)
        copies[name] = tiled
    return pa.table(copies)


def per_copy(query: str) -> str:
    """``query`` with every window partitioned by the copy: a window spans one copy."""
    return per_copy_tree(sqlglot.parse_one(query, read="duckdb")).sql(dialect="duckdb")


def per_copy_tree(tree: exp.Expr) -> exp.Expr:
    """``tree`` (changed in place) with every window partitioned by the copy."""
    for window in tree.find_all(exp.Window):
        parts = list(window.args.get("partition_by") or [])
        window.set("partition_by", [exp.column(REP), *parts])
    return tree
