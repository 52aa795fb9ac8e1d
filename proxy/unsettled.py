"""What another draw of the noise could have answered otherwise, beyond a number's
interval: cells that are not numbers but are computed from noisy ones, and the rows that
HAVING and ORDER BY … LIMIT choose by noisy values.

A number carries its 95% interval (proxy/intervals.py). A comparison (``COUNT(*) > 1000
AS big``), a CASE label (``CASE WHEN n > 100 THEN 'many' ELSE 'few' END``) or a NULL a CASE
gives has none, and neither has the choice of rows: ``HAVING COUNT(*) > 19000`` kept one
region at 19,150 ± 5,790 and dropped another at 18,501 ± 5,790, with no word (a review,
2026-12-06). Both are decided here the way the windows' intervals are: the released table
re-noised in fixed copies (``intervals.noisy_copies``: fixed quantiles of each column's
noise, no random source, so a replay says the same), the outer query run on each copy,
its windows within the copy and its LIMIT per copy. A cell is *unsettled* when its value
differs from the released one in at least 1 copy in 40 (for ``n > t`` that is when t lies
within the 95% interval of n), a row when it is shown in the copies, or left out of them,
against the answer, as often; a number is unsettled when a CASE could have made it NULL.
Rows chosen by a DP median, quantile, MIN or MAX are said to be chosen by a value whose
error is in ranks, which this does not simulate. Everything here reads released values
and public noise scales only: post-processing, free; it runs only when the outer query
has a WHERE (HAVING), a LIMIT shorter than the answer or an OFFSET, a CASE, or a cell
that is not a number.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

import sqlglot
from sqlglot import exp

from proxy.cell_values import is_finite_number, same_value
from proxy.intervals import (
    REP,
    REPLICATES,
    noisy_copies,
    per_copy_tree,
    stds_of,
    with_row_index,
)
from proxy.outer import ROW, direct_columns
from proxy.plan import Plan
from proxy.quantile_release import quantile_outputs
from proxy.release import PostProcessor

# One-sided: a choice that flips in at least this share of the copies is unsettled (for
# a comparison with a constant, the constant lies within the value's 95% interval).
SHARE = 0.025
# Copies x released rows simulated at most (a long answer gets fewer copies, at least 40).
MAX_SIMULATED = 50_000


@dataclass(frozen=True)
class Unsettled:
    """Released rows and cells another draw of the noise could have answered otherwise."""

    cells: frozenset[tuple[int, int]]  # (released row, output column)
    shown: frozenset[int]  # released rows shown that could have been left out
    left_out: frozenset[int]  # released rows left out that could have been shown
    left_out_total: int  # released rows the outer query left out
    chooser: str  # the clauses that choose rows by value ("" when none)
    failed: bool = False  # the simulation could not run: said in words instead
    # the clauses read a MEDIAN/quantile/MIN/MAX draw, whose error is in ranks and is not
    # simulated: said in words (a review, 2026-12-06: HAVING MEDIAN(x) > t was silent)
    by_quantile: bool = False


NOTHING = Unsettled(frozenset(), frozenset(), frozenset(), 0, "")


@dataclass(frozen=True)
class _Outer:
    """What this module reads off an outer query's text (kept per text)."""

    where: bool  # a WHERE (the analyst's HAVING) chooses rows by value
    limited: bool  # a LIMIT or OFFSET
    limit: int | None  # its rows (None: no LIMIT, or not a literal)
    offset: int
    ordered: bool  # an ORDER BY
    keys: frozenset[int]  # output columns that show a key bare
    windows: bool  # a window reads other released rows
    conditional: frozenset[int]  # output columns a CASE, IF or NULLIF may turn NULL
    choosing: frozenset[str]  # released columns the WHERE and ORDER BY read

    def chooser(self, rows: int) -> str:
        """The clauses that choose among ``rows`` released rows by value ("" when none:
        a LIMIT at least as long as the answer, as BI tools append, chooses nothing)."""
        parts = ["HAVING"] if self.where else []
        if self.limited and not (
            self.offset == 0 and self.limit is not None and self.limit >= rows
        ):
            clause = "LIMIT" if self.limit is not None else "OFFSET"
            parts.append(f"ORDER BY … {clause}" if self.ordered else clause)
        return " and ".join(parts)


@functools.lru_cache(maxsize=256)
def _outer(outer_sql: str) -> _Outer:
    tree = sqlglot.parse_one(outer_sql, read="duckdb")
    keys = frozenset(
        i for i, name in enumerate(direct_columns(outer_sql)) if (name or "").startswith("__k")
    )
    try:
        limit, offset = _count(tree.args.get("limit")), _count(tree.args.get("offset")) or 0
    except ValueError:
        limit, offset = None, 1  # not literals: simulated (and refused there)
    conditional = frozenset(
        i
        for i, item in enumerate(tree.expressions)
        if item.find(exp.Case, exp.If, exp.Nullif) is not None
    )
    # What the choosing clauses read: the WHERE, and the ORDER BY with the items it may
    # name by alias or position (all of them: a few names too many only adds words).
    choosing: set[str] = set()
    for where in tree.find_all(exp.Where):
        choosing.update(c.name for c in where.find_all(exp.Column))
    if tree.args.get("order") is not None:
        for part in (tree.args["order"], *tree.expressions):
            choosing.update(c.name for c in part.find_all(exp.Column))
    return _Outer(
        where=tree.find(exp.Where) is not None,
        limited=tree.args.get("limit") is not None or tree.args.get("offset") is not None,
        limit=limit,
        offset=offset,
        ordered=tree.args.get("order") is not None,
        keys=keys,
        windows=tree.find(exp.Window) is not None,
        conditional=conditional,
        choosing=frozenset(choosing),
    )


def has_window(outer_sql: str) -> bool:
    """Whether the outer query has a window: its cells read other released rows (False
    if its text cannot be read again: this runs after the charge, and must not fail)."""
    try:
        return _outer(outer_sql).windows
    except Exception:  # (the text ran once already; a defect, not the data)
        return False


def _count(node: exp.Expr | None) -> int | None:
    """A LIMIT's or OFFSET's row count, when it is an integer literal."""
    if node is None:
        return None
    value = node.args.get("expression") or node.this
    if isinstance(value, exp.Literal) and value.is_int:
        return int(value.this)
    raise ValueError("a LIMIT that is not a number")


def unsettled(
    plan: Plan,
    table: Any,
    names: list[str],
    rows: list[tuple[Any, ...]],
    post: PostProcessor,
) -> Unsettled:
    """The unsettled rows and cells of the answer ``rows`` (hidden columns included,
    ``__row`` among them) that ``plan.outer_sql`` gave over the released ``table``.
    Never raises (it runs after the charge): a failure is reported as ``failed``."""
    chooser, by_quantile = "", False
    try:
        if ROW not in names or table.num_rows == 0 or not plan.noise:
            return NOTHING
        outer = _outer(plan.outer_sql)
        drawn = quantile_outputs(plan)
        candidates = [
            c
            for c in range(len(plan.output_names))
            if c not in outer.keys
            and c not in drawn
            and (c in outer.conditional or any(not is_finite_number(r[c]) for r in rows))
        ]
        chooser = outer.chooser(table.num_rows)
        if not chooser and not candidates:
            return NOTHING
        by_quantile = bool(chooser) and any(
            q.statistic.column in outer.choosing for q in plan.quantiles
        )
        found = _simulate(
            plan, table, names.index(ROW), candidates, rows, chooser, stds_of(plan), post
        )
        return replace(found, by_quantile=by_quantile)
    except Exception:  # released values only: the answer stands, the doubt is said in words
        return Unsettled(
            frozenset(), frozenset(), frozenset(), 0, chooser, failed=True, by_quantile=by_quantile
        )


@functools.lru_cache(maxsize=256)
def _per_copy_query(outer_sql: str, candidates: tuple[int, ...]) -> tuple[str, frozenset[str]]:
    """The outer query over the copies: its windows within a copy, its ORDER BY … LIMIT
    as each copy's rank (a QUALIFY), and only ``__row``, ``__rep`` and the ``candidates``
    columns returned; with the released columns it reads (only those are copied)."""
    tree = per_copy_tree(sqlglot.parse_one(outer_sql, read="duckdb"))
    assert isinstance(tree, exp.Select)
    items = list(tree.expressions)
    # deep: the released table's columns are all dpsql's own (``__k0``, ``__s0``, …), so
    # a name the select list aliases is the alias wherever the ORDER BY reads it
    limit_per_copy(tree, exp.column(ROW), deep=True)
    tree.set(
        "expressions",
        [exp.column(ROW), exp.column(REP), *(items[c].copy() for c in candidates)],
    )
    return tree.sql(dialect="duckdb"), frozenset(c.name for c in tree.find_all(exp.Column))


def limit_per_copy(tree: exp.Select, tiebreak: exp.Expr | None, *, deep: bool = False) -> None:
    """``tree`` (a query over re-noised copies, changed in place) with its ORDER BY …
    LIMIT / OFFSET applied within each copy: the rank of a row in its copy by the ORDER
    BY (select-list aliases and positions read as the items they name, and with ``deep``
    an alias inside an expression too, ``ORDER BY n + 0``, where the caller drops the
    select list and no input column's name can be an alias's; ``tiebreak`` last), kept
    between OFFSET and OFFSET + LIMIT by a QUALIFY; ORDER BY, LIMIT and OFFSET then
    removed. Raises ValueError for a LIMIT that is not an integer literal."""
    limit = _count(tree.args.get("limit"))
    offset = _count(tree.args.get("offset")) or 0
    if limit is not None or offset:
        items = list(tree.expressions)
        by_alias = {e.alias: e.this for e in items if isinstance(e, exp.Alias)}
        order = []
        for ordered in tree.args["order"].expressions if tree.args.get("order") else []:
            key = ordered.this
            if isinstance(key, exp.Column) and not key.table and key.name in by_alias:
                key = by_alias[key.name]
            elif isinstance(key, exp.Literal) and key.is_int:
                found = items[int(key.this) - 1]
                key = found.this if isinstance(found, exp.Alias) else found
            elif deep:
                key = key.transform(
                    lambda node: by_alias[node.name].copy()
                    if isinstance(node, exp.Column) and not node.table and node.name in by_alias
                    else node
                )
            placed = ordered.copy()
            placed.set("this", key.copy())
            order.append(placed)
        if tiebreak is not None:
            order.append(exp.Ordered(this=tiebreak))
        rank = exp.Window(
            this=exp.RowNumber(),
            partition_by=[exp.column(REP)],
            order=exp.Order(expressions=order) if order else None,
        )
        bounds: exp.Expr = exp.GT(this=rank, expression=exp.Literal.number(offset))
        if limit is not None:
            bounds = exp.and_(
                bounds, exp.LTE(this=rank.copy(), expression=exp.Literal.number(offset + limit))
            )
        tree.set("qualify", exp.Qualify(this=bounds))
    tree.set("limit", None)
    tree.set("offset", None)
    tree.set("order", None)


def _simulate(
    plan: Plan,
    table: Any,
    at: int,
    candidates: list[int],
    rows: list[tuple[Any, ...]],
    chooser: str,
    stds: dict[str, float],
    post: PostProcessor,
) -> Unsettled:
    n = table.num_rows
    replicates = min(REPLICATES, max(40, MAX_SIMULATED // n))
    query, reads = _per_copy_query(plan.outer_sql, tuple(candidates))
    base = with_row_index(table)
    base = base.select([c for c in base.column_names if c in reads or c == ROW])
    copies = noisy_copies(plan.mechanism, base, stds, replicates)
    _, found = post.run(query, copies)
    released = {int(r[at]): r for r in rows}
    shown_in: dict[int, int] = {}
    differs: dict[tuple[int, int], int] = {}
    for r in found:
        row = int(r[0])
        shown_in[row] = shown_in.get(row, 0) + 1
        mine = released.get(row)
        if mine is None:
            continue
        for j, c in enumerate(candidates):
            # A number's own spread is its interval's; what is unsettled here is a value
            # of another kind (a number a CASE could have made NULL, and back) or another
            # value that is not a number.
            if is_finite_number(mine[c]):
                changed = not is_finite_number(r[2 + j])
            else:
                changed = not same_value(r[2 + j], mine[c])
            if changed:
                differs[(row, c)] = differs.get((row, c), 0) + 1
    least = math.ceil(SHARE * replicates)
    shown = frozenset(r for r in released if replicates - shown_in.get(r, 0) >= least)
    left_out = frozenset(
        r for r in range(n) if r not in released and shown_in.get(r, 0) >= least
    )
    cells = frozenset(key for key, k in differs.items() if k >= least)
    return Unsettled(cells, shown, left_out, n - len(released), chooser)
