"""The analyst's outer layer — select-list arithmetic over aggregates, HAVING,
ORDER BY, LIMIT — rewritten to run on the released noisy table, never on private rows;
plus which output columns carry a known noise width.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from accounting import mechanisms
from accounting.calibrate import Mechanism
from accounting.partition import Threshold
from proxy import shape as S
from proxy.budget import ColumnNoise
from proxy.errors import unsupported
from proxy.outer_functions import lift_windows, rewrite_window
from proxy.render import KeyTexts, duckdb_sql, owned_duckdb_sql
from proxy.rewrite import core as C


def _number(value: float) -> exp.Expr:
    """What parsing ``repr(value)`` yields: a literal, under a unary minus if negative."""
    text = repr(value)
    if not math.isfinite(value):
        return sqlglot.parse_one(text, read="duckdb")
    if text.startswith("-"):
        return exp.Neg(this=exp.Literal.number(text[1:]))
    return exp.Literal.number(text)


# The post-processing formulas are built node by node, exactly as DuckDB SQL text such
# as ``LEAST(GREATEST(x, lo), hi)`` parses: parsing them per query was the cost.
def _greatest(this: exp.Expr, other: exp.Expr) -> exp.Expr:
    return exp.Greatest(this=this, expressions=[other], ignore_nulls=True)


def _least(this: exp.Expr, other: exp.Expr) -> exp.Expr:
    return exp.Least(this=this, expressions=[other], ignore_nulls=True)


def _div(this: exp.Expr, other: exp.Expr) -> exp.Expr:
    return exp.Div(this=this, expression=other, typed=False, safe=False)


def _count(column: exp.Expr, raw: bool) -> exp.Expr:
    """A released count as shown: below zero only by noise, so shown as 0 unless the
    caller asked for raw noise (post-processing: it reads the released value only)."""
    return column if raw else _greatest(column, exp.Literal.number(0))


def _post_expression(
    call: S.AggregateCall, core: C.Core, arg_sql: dict[str, str], threshold: bool, raw: bool
) -> exp.Expr:
    def col(kind: str) -> exp.Expr:
        return exp.column(core.statistic(kind, arg_sql.get(call.sql)).column)

    if call.kind in S.QUANTILE_KINDS:
        # The released draw itself: MIN/MAX/quantiles are post-processed no further.
        return exp.column(next(q.column for q in core.quantiles if call.sql in q.calls))
    if call.kind == S.COUNT_ROWS:
        return _count(exp.column(core.statistic(C.ROWS, None).column), raw)
    if call.kind == S.COUNT_PERSONS:
        return _count(
            exp.column("__persons")
            if threshold
            else exp.column(core.statistic(C.PERSONS, None).column),
            raw,
        )
    if call.kind == S.COUNT:
        return _count(col(C.COUNT), raw)
    if call.kind == S.COUNT_DISTINCT:
        return _count(col(C.DISTINCT), raw)
    if call.kind == S.SUM_DISTINCT:
        return col(C.DISTINCT_SUM)
    if call.kind == S.AVG_DISTINCT:
        # centre + centred sum / GREATEST(count, 1), clamped to [lower, upper]
        total = core.statistic(C.DISTINCT_CENTRED_SUM, arg_sql[call.sql])
        mean = exp.Add(
            this=_number(total.centre),
            expression=exp.Paren(
                this=_div(
                    col(C.DISTINCT_CENTRED_SUM), _greatest(col(C.DISTINCT), exp.Literal.number(1))
                )
            ),
        )
        return _least(_greatest(mean, _number(total.lower)), _number(total.upper))
    if call.kind == S.SUM:
        return col(C.SUM)
    distinct = call.kind in S.VARIANCE_DISTINCT_KINDS
    centred = C.DISTINCT_CENTRED_SUM if distinct else C.CENTRED_SUM
    stat = core.statistic(centred, arg_sql[call.sql])
    count, squares = (C.DISTINCT, C.DISTINCT_SQUARES) if distinct else (C.COUNT, C.CENTRED_SQUARES)

    def n(floor: int = 1) -> exp.Expr:  # GREATEST(count, floor)
        return _greatest(col(count), exp.Literal.number(floor))

    def mean_c() -> exp.Expr:  # (centred sum / n)
        return exp.Paren(this=_div(col(centred), n()))

    if call.kind == S.AVG:
        # LEAST(GREATEST(centre + mean_c, lower), upper)
        mean = exp.Add(this=_number(stat.centre), expression=mean_c())
        return _least(_greatest(mean, _number(stat.lower)), _number(stat.upper))
    half = (stat.upper - stat.lower) / 2.0
    # LEAST(GREATEST(squares / n - mean_c * mean_c, 0), half²)
    spread = exp.Sub(
        this=_div(col(squares), n()),
        expression=exp.Mul(this=mean_c(), expression=mean_c()),
    )
    var = _least(_greatest(spread, exp.Literal.number(0)), _number(half * half))
    if call.kind.removesuffix("_distinct") in (S.VAR_SAMP, S.STDDEV_SAMP):
        # (var * n2 / (n2 - 1)) with n2 = GREATEST(count, 2)
        minus_one = exp.Paren(this=exp.Sub(this=n(2), expression=exp.Literal.number(1)))
        var = exp.Paren(this=_div(exp.Mul(this=var, expression=n(2)), minus_one))
    return exp.Sqrt(this=var) if call.kind.startswith("stddev") else var


ROW = "__row"  # hidden: the index of the released row an output row comes from
CLIP_CUT = "__clip_cut"  # hidden: noisy number of people bounding cut in the row's group
CLIP_PEOPLE = "__clip_people"  # hidden: noisy number of people in the row's group
# hidden: an AVG item's released centred sum (s) and count (n), by the item's index
_AVG_PART = re.compile(r"__ci(\d+)_([sn])")


def hidden_name(name: str) -> bool:
    """Whether ``name`` is one of the columns dpsql carries hidden beside the analyst's
    items (any case: DuckDB's names are case-insensitive). An analyst's item of such a
    name stood for the hidden one: its numbers became the clipping estimate (an
    infinite one escaped after the charge), or planning escaped (an adversarial
    review, 2026-12-06); it is refused before the charge (:func:`check_output_names`)."""
    lower = name.lower()
    return lower in (ROW, CLIP_CUT, CLIP_PEOPLE) or _AVG_PART.fullmatch(lower) is not None


def is_hidden(item: exp.Expr) -> bool:
    """Whether a select item of an outer query is a hidden column, not an analyst's:
    only these are left out of what is shown and simulated (every alias beginning with
    ``__`` was, so a column named ``__timestamp``, Superset's time column, moved every
    later column's interval one place, and a ratio showed ± 0)."""
    if isinstance(item, exp.Alias):
        return hidden_name(item.alias)
    return isinstance(item, exp.Column) and hidden_name(item.name)


def check_output_names(names: tuple[str, ...] | None) -> None:
    """Refuse an output name that is a hidden column's, before any charge."""
    for name in names or ():
        if hidden_name(name):
            raise unsupported(
                f"the output name {name} is dpsql's own (a column it carries hidden "
                "beside the answer)",
                "name the column something else",
            )


def _is_count_shown(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.Greatest)
        and isinstance(node.this, exp.Column)
        and len(node.expressions) == 1
        and node.expressions[0] == exp.Literal.number(0)
    )


def _total(node: exp.Expr) -> exp.Expr:
    """``TRY(node)``: arithmetic over released values (an overflow, say) yields NULL
    instead of failing after the charge. Bare columns and shown counts cannot fail."""
    if isinstance(node, exp.Column) or _is_count_shown(node):
        return node
    return exp.Try(this=node)


def outer_sql(core: C.Core, names: tuple[str, ...], threshold: bool, raw: bool = False) -> str:
    """The post-processing query over the released table ``released`` (``raw``: counts
    keep their raw noise instead of being shown as at least 0)."""
    # Only the clauses rewritten below are copied (and mutated); the rest is read.
    select = core.shape.select
    arg_sql = core.argument_sql
    keys = {text: f"__k{i}" for i, text in enumerate(core.shape.key_sqls)}
    calls = {c.sql: c for c in core.shape.aggregates}

    key_texts = KeyTexts(core.shape.keys, core.shape.key_sqls)
    # WITHIN GROUP and APPROX_QUANTILES(...)[OFFSET(i)] wrap a quantile call.
    aggregate_types = (exp.Count, exp.AggFunc, exp.WithinGroup, exp.Bracket)

    # Names the binder gave select items (e.g. _col_0 for ORDER BY 1) -> output names.
    renamed = {
        item.alias.lower(): name
        for item, name in zip(select.expressions, names, strict=True)
        if isinstance(item, exp.Alias)
    }

    # Texts already rendered, by node; holding the node keeps its id from being reused.
    rendered: dict[int, tuple[exp.Expr, str]] = {}

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Window):  # over released rows: its inputs only
            return rewrite_window(node, visit)
        if (
            isinstance(node, exp.Column)
            and not node.table
            and node.name.lower() in renamed
            and duckdb_sql(node) not in keys
        ):
            return exp.column(renamed[node.name.lower()], quoted=True)
        # Render only nodes that could be a key (as the checker asked: KeyTexts) or an
        # aggregate: rendering is the cost.
        key = key_texts.could_be(node)
        if not key and not isinstance(node, aggregate_types):
            return node
        known = rendered.get(id(node))
        text = known[1] if known is not None else duckdb_sql(node)
        if key and text in keys:
            return exp.column(keys[text])
        if text in calls:
            return _post_expression(calls[text], core, arg_sql, threshold, raw)
        return node

    items = []
    hidden = []
    for index, (item, name) in enumerate(zip(select.expressions, names, strict=True)):
        body = item.this if isinstance(item, exp.Alias) else item
        copied = body.copy()
        text = core.shape.item_sqls[index]
        if text is None and isinstance(body, exp.Avg):
            text = duckdb_sql(body)
        if text is not None:
            rendered[id(copied)] = (copied, text)
        call = calls.get(text) if text is not None and isinstance(body, exp.Avg) else None
        if call is not None and call.kind == S.AVG:
            # Carry the AVG's released parts along, for its per-cell interval.
            arg = arg_sql[call.sql]
            for suffix, kind in (("s", C.CENTRED_SUM), ("n", C.COUNT)):
                column = exp.column(core.statistic(kind, arg).column)
                hidden.append(exp.alias_(column, f"__ci{index}_{suffix}", copy=False))
        body = _total(copied.transform(visit, copy=False))
        items.append(exp.alias_(body, name, quoted=True, copy=False))
    if core.clipping and not (core.shape.key_release and not threshold):
        # The clipping estimate of each released row travels with it through HAVING,
        # ORDER BY and LIMIT.
        people = (
            exp.column("__persons")
            if threshold
            else exp.column(core.statistic(C.PERSONS, None).column)
        )
        hidden.append(
            exp.alias_(exp.column(core.statistic(C.CLIPPED, None).column), CLIP_CUT, copy=False)
        )
        hidden.append(exp.alias_(people, CLIP_PEOPLE, copy=False))
    hidden.append(exp.column(ROW))  # which released row each output row comes from
    out = exp.Select(expressions=[*items, *hidden], from_=C.from_table("released"))
    having = select.args.get("having")
    if having is not None:
        out = out.where(_total(having.this.copy().transform(visit, copy=False)), copy=False)
    order = select.args.get("order")
    if order is not None:
        ordered = order.copy().transform(visit, copy=False)
        for o in ordered.expressions:
            o.set("this", _total(o.this))
        out.set("order", ordered)
    for clause in ("limit", "offset"):
        if select.args.get(clause) is not None:
            out.set(clause, select.args[clause].copy())
    if out.args.get("limit") is not None or out.args.get("offset") is not None:
        # Rows picked among ties are the first released (key order), as in the noise's
        # simulated copies (proxy/unsettled.py): DuckDB's top-N keeps ties in its heap's
        # order, not the input's.
        out = out.order_by(exp.column(ROW), append=True, copy=False)
    # Rendered in place: the tree is fresh and dropped right after.
    return owned_duckdb_sql(lift_windows(out))


def _noise_std(descriptor: mechanisms.NoiseDescriptor) -> float:
    return Mechanism(descriptor.mechanism).std(descriptor.scale)


@functools.lru_cache(maxsize=1024)
def _columns_of(outer: str) -> tuple[tuple[str | None, ...], tuple[tuple[int, str, str], ...]]:
    """From an outer query: the released column each select item reads bare (or None),
    and the hidden (index, centred-sum column, count column) of each AVG item."""
    tree = sqlglot.parse_one(outer, read="duckdb")
    direct: list[str | None] = []
    parts: dict[int, dict[str, str]] = {}
    for item in tree.expressions:
        body = item.this if isinstance(item, exp.Alias) else item
        avg_part = _AVG_PART.fullmatch(item.alias) if isinstance(item, exp.Alias) else None
        if avg_part is not None:
            parts.setdefault(int(avg_part.group(1)), {})[avg_part.group(2)] = body.name
        elif is_hidden(item):
            continue
        else:
            if _is_count_shown(body):
                body = body.this  # a count shown as at least 0: the same noise width
            direct.append(body.name if isinstance(body, exp.Column) else None)
    return tuple(direct), tuple((i, p["s"], p["n"]) for i, p in sorted(parts.items()))


def direct_columns(outer: str) -> tuple[str | None, ...]:
    """The released column each shown output column reads bare (or None)."""
    return _columns_of(outer)[0]


@dataclass(frozen=True)
class AvgInterval:
    """One output column that is one AVG: the noise of its released centred sum and
    count, and the bounds its value is clamped to (its interval is Fieller's)."""

    index: int
    std_sum: float
    std_count: float
    centre: float
    lower: float
    upper: float


def avg_intervals(outer: str, noise: list[ColumnNoise]) -> tuple[AvgInterval, ...]:
    """The :class:`AvgInterval` of each AVG output column."""
    by_column = {n.statistic.column: n for n in noise}
    out = []
    for i, s, c in _columns_of(outer)[1]:
        stat = by_column[s].statistic
        out.append(
            AvgInterval(
                i,
                _noise_std(by_column[s].descriptor),
                _noise_std(by_column[c].descriptor),
                stat.centre,
                stat.lower,
                stat.upper,
            )
        )
    return tuple(out)


def column_noise(
    outer: str, names: tuple[str, ...], noise: list[ColumnNoise], thr: Threshold | None
) -> tuple[tuple[str, float | None, float | None], ...]:
    """Noise of output columns that are exactly one released statistic (COUNT, SUM)."""
    by_column: dict[str, tuple[float | None, float | None]] = {
        n.statistic.column: (n.descriptor.scale, n.descriptor.half_width_95) for n in noise
    }
    if thr is not None:
        by_column["__persons"] = (thr.scale, Mechanism(thr.mechanism).half_width_95(thr.scale))
    direct = _columns_of(outer)[0]
    return tuple(
        (name, *by_column.get(column or "", (None, None)))
        for name, column in zip(names, direct, strict=False)
    )
