"""MEDIAN, quantiles, MIN and MAX after the charge: each released group's draw from its
histogram, and what `explain` and answers say about them.

The core returns, per group, the sparse histogram of each quantile argument
(proxy/rewrite/quantile_histogram.py). For the groups the release step keeps (the whole
public domain, empty groups included, or the groups partition selection chose) the
histograms are made dense and each quantile column is drawn by
:func:`accounting.quantiles.release_quantiles` — the exponential mechanism through
OpenDP; nothing here draws. Groups that partition selection dropped are never drawn.

Every step is total on what the core can return: missing histograms are empty groups
(an empty group gets a uniform draw over the grid, which is what the mechanism
promises), and bins or counts outside their range, which the SQL cannot produce, are
dropped rather than failing after the charge.

Intervals: none. The guarantee is in ranks (the released value's bin is within τ rows of
the target rank with 95% probability, for every dataset); turning it into a value
interval needs the data's density, which is private (accounting.quantiles.INTERVAL_NOTE).
Cells computed from a quantile therefore have no interval either, and the answer says
so in words.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from accounting import mechanisms
from accounting.quantiles import (
    DENOMINATOR,
    Grid,
    QuantileError,
    TargetKind,
    accuracy,
    dense_histograms,
    release_quantiles,
)
from proxy.budget import QuantileNoise
from proxy.errors import DPSQLError
from proxy.outer import direct_columns, is_hidden
from proxy.plan import Plan

# Group sizes explain shows the predicted error at (rows of bounded values per group).
EXPLAIN_ROWS = (100, 1_000, 10_000)


def _sparse(
    exact: Mapping[str, np.ndarray], name: str, rows: Sequence[int | None], grid: Grid
) -> np.ndarray:
    """The dense (released groups × B) histograms of histogram ``name``."""
    bins_col = exact.get(f"{name}_b")
    counts_col = exact.get(f"{name}_n")
    groups: list[np.ndarray] = []
    bins: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for i, row in enumerate(rows):
        if row is None or bins_col is None or counts_col is None:
            continue
        b, n = bins_col[row], counts_col[row]
        if b is None or n is None:
            continue
        try:
            b = np.asarray(b, dtype=np.int64).ravel()
            n = np.asarray(n, dtype=np.int64).ravel()
        except (TypeError, ValueError, OverflowError):
            continue
        if b.size != n.size:
            continue
        ok = (b >= 0) & (b < grid.bins) & (n > 0)
        groups.append(np.full(int(ok.sum()), i, dtype=np.int64))
        bins.append(b[ok])
        counts.append(n[ok])
    if not groups:
        return np.zeros((len(rows), grid.bins), dtype=np.int64)
    return dense_histograms(
        np.concatenate(groups),
        np.concatenate(bins),
        np.concatenate(counts),
        n_groups=len(rows),
        grid=grid,
    )


def released_columns(
    plan: Plan, exact: Mapping[str, np.ndarray], rows: Sequence[int | None]
) -> dict[str, np.ndarray]:
    """One released column per quantile statistic, for the released groups: ``rows``
    gives, per released row, its row in ``exact`` (None: a public-domain key with no
    data). Integer grids release whole numbers (int64), float grids float64."""
    out: dict[str, np.ndarray] = {}
    dense: dict[str, np.ndarray] = {}
    for drawn in plan.quantiles:
        stat = drawn.statistic
        histograms = dense.get(stat.histogram)
        if histograms is None:
            histograms = dense[stat.histogram] = _sparse(exact, stat.histogram, rows, stat.grid)
        try:
            values = release_quantiles(histograms, drawn.descriptor).values
        except (QuantileError, mechanisms.MechanismError):
            # The plan and the draw disagree: a defect, and the charge already stands.
            raise DPSQLError(
                "internal", "a quantile draw differs from the plan", "report this"
            ) from None
        out[stat.column] = values.astype(np.int64) if stat.grid.integer else values
    return out


# --- what explain and answers say -------------------------------------------------------


def _what(drawn: QuantileNoise) -> str:
    stat = drawn.statistic
    if stat.kind is TargetKind.MIN:
        return "MIN"
    if stat.kind is TargetKind.MAX:
        return "MAX"
    return "median" if stat.q == 0.5 else f"quantile {stat.q:g}"


def _grid(grid: Grid) -> dict[str, Any]:
    return {
        "lower": grid.lower,
        "upper": grid.upper,
        "bins": grid.bins,
        "integer": grid.integer,
        "width": grid.width,
        "half_bin": grid.half_bin(),
    }


def _meaning(drawn: QuantileNoise) -> str:
    d = drawn.descriptor
    tau = d.rank_error
    # τ is proportional to C: say so where a smaller cap would help.
    cap = (
        f" (each person counts up to {d.max_rows} values per group; a smaller "
        "max_rows_per_group shrinks it)"
        if d.max_rows > 1
        else ""
    )
    if d.target.kind is TargetKind.QUANTILE:
        # The bound is in rows: a group not much larger than it can get any of its values
        # (an honesty probe: a median of 6,394 where the true one was 98, in groups of
        # 54-231 rows under a rank error of ±309, with no word).
        return (
            f"with {d.confidence:.0%} probability the released value's rank is within "
            f"±{tau:.3g} rows of the target rank q·n, whatever the data{cap}; in a group "
            f"of fewer than about {2 * tau:.3g} rows that is any value of the group or "
            "beyond it, so there it says next to nothing"
        )
    end, side = ("smallest", "below") if d.target.kind is TargetKind.MIN else ("largest", "above")
    t = d.target.offset
    return (
        f"released as the value about {t} rows from the {end} (the exact extreme is one "
        f"person's value and is never released); with {d.confidence:.0%} probability at most "
        f"{t + tau:.3g} rows lie {side} it, and in groups of at least {2 * t} rows it is not "
        f"beyond the {end} value's bin{cap}"
    )


def explain(plan: Plan) -> list[dict[str, Any]]:
    """The quantile columns of a plan: grid, target, cost and predicted rank error."""
    out = []
    for drawn in plan.quantiles:
        stat, d = drawn.statistic, drawn.descriptor
        out.append(
            {
                "column": stat.column,
                "kind": stat.kind.value,
                "q": stat.q,
                "argument": stat.arg_sql,
                "calls": list(stat.calls),
                "grid": _grid(stat.grid),
                "mechanism": d.mechanism,
                "max_rows_per_group": d.max_rows,
                "max_groups": d.max_groups,
                "epsilon_per_group": d.epsilon_per_group,
                "pure_epsilon": d.pure_epsilon,
                "rho": d.rho_per_group * d.max_groups,
                "score_sensitivity_rows": d.sensitivity / DENOMINATOR,
                "scale_rows": d.scale / DENOMINATOR,
                "offset_rows": d.target.offset,
                "rank_error_95": d.rank_error,
                "expected_rank_error": d.expected_rank_error,
                "accuracy": [
                    {
                        "rows": rows,
                        "rank_error": a.rank_error,
                        "quantile_error": a.quantile_error,
                        "value_error_if_uniform": a.value_error_uniform,
                    }
                    for rows in EXPLAIN_ROWS
                    for a in (accuracy(d, rows),)
                ],
                "half_width_95": None,
                "interval_note": d.interval_note,
                "note": f"{_what(drawn)} of {stat.arg_sql[:80]}: {_meaning(drawn)}",
            }
        )
    return out


@functools.lru_cache(maxsize=1024)
def _reads(outer: str, names: tuple[str, ...]) -> tuple[frozenset[str], ...]:
    """Per shown output column of an outer query: the released columns among ``names``
    it reads."""
    tree = sqlglot.parse_one(outer, read="duckdb")
    out = []
    for item in tree.expressions:
        if is_hidden(item):
            continue
        out.append(frozenset(c.name for c in item.find_all(exp.Column) if c.name in names))
    return tuple(out)


def quantile_outputs(plan: Plan) -> dict[int, tuple[QuantileNoise, ...]]:
    """Output column index -> the quantile draws it reads (bare or in arithmetic)."""
    if not plan.quantiles:
        return {}
    by_column = {q.statistic.column: q for q in plan.quantiles}
    reads = _reads(plan.outer_sql, tuple(by_column))
    return {
        i: tuple(by_column[c] for c in sorted(cols))
        for i, cols in enumerate(reads[: len(plan.output_names)])
        if cols
    }


def answer_notes(plan: Plan) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """Per output column that reads a quantile: its metadata (for the privacy block)
    and one sentence saying what it is and why it has no interval."""
    infos: list[dict[str, Any]] = []
    notes: list[str] = []
    for index, drawn_all in quantile_outputs(plan).items():
        name = plan.output_names[index]
        for drawn in drawn_all:
            d = drawn.descriptor
            infos.append(
                {
                    "name": name,
                    "kind": drawn.statistic.kind.value,
                    "q": drawn.statistic.q,
                    "grid": _grid(drawn.statistic.grid),
                    "offset_rows": d.target.offset,
                    "rank_error_95": d.rank_error,
                    "half_width_95": None,
                    "interval_note": d.interval_note,
                }
            )
        first = drawn_all[0]
        bare = direct_columns(plan.outer_sql)[index] == first.statistic.column
        grid = first.statistic.grid
        if bare:
            notes.append(
                f"column {name!r} is a DP {_what(first)} (exponential mechanism on "
                f"{grid.bins} bins over [{grid.lower:g}, {grid.upper:g}]): "
                f"{_meaning(first)}; no value interval (ranks, not values, are guaranteed)"
            )
        else:
            notes.append(
                f"column {name!r} is computed from a DP quantile, MIN or MAX: no interval "
                "(their guarantee is in ranks, not values)"
            )
    return tuple(infos), tuple(notes)
