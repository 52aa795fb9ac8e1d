"""Queries over a released answer: an outer SELECT whose only input is an inner
aggregate query (a FROM-subquery or a CTE used once), e.g.

    SELECT AVG(s) FROM (SELECT age, SUM(income) AS s FROM PUMS.PUMS GROUP BY age)
    WITH t AS (SELECT region, COUNT(*) AS n FROM users GROUP BY region)
    SELECT region, n * 100.0 / SUM(n) OVER () AS pct FROM t

The inner query is answered like any other (charged once, cached, replayed free); the
outer one runs on its released rows only — post-processing, so it costs nothing more and
may use any deterministic SQL over that table. Its intervals come from simulating the
inner answer's noise (each inner cell's 95% half-width as a normal spread) through the
outer query. An inner query grouped by the person id is not an answer to release: it is
a per-person aggregate (proxy/per_person_values.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from accounting.mechanisms import Z_975, simulation_table
from proxy import outer_functions
from proxy.cell_values import is_finite_number, is_number, same_value
from proxy.errors import position_of, unsupported
from proxy.intervals import per_copy_tree
from proxy.outer import ROW as ROW_NAME
from proxy.unsettled import SHARE, limit_per_copy

INNER = "released"  # the table name the outer query reads (the post-processor's)
REPLICATES = 400


@dataclass(frozen=True)
class NestedQuery:
    inner: exp.Select  # the inner aggregate query, as parsed
    outer: exp.Select  # the outer query, reading ``released``
    total_outer: exp.Select  # the same in forms that cannot fail (:func:`total`)
    # run in its total form, or as written where that form does not bind
    as_total: bool = True
    # The inner answer's column types, from its outer layer run on a stand-in (None
    # until validated): a column of NULLs only, or of no rows, keeps its type, so that
    # the outer query's date functions bind on it (pyarrow types it "null").
    inner_types: tuple[pa.DataType, ...] | None = None

    @property
    def run_outer(self) -> exp.Select:
        """The form of the outer query that runs."""
        return self.total_outer if self.as_total else self.outer


def _has_aggregate(select: exp.Select) -> bool:
    """An aggregate of this SELECT's rows (not one inside a window function)."""
    return any(node.find_ancestor(exp.Window) is None for node in select.find_all(exp.AggFunc))


def split(tree: exp.Expr) -> NestedQuery | None:
    """The (inner, outer) parts of a query over one aggregate subquery or CTE, or None
    when the query is not of that shape (it then goes the ordinary way)."""
    if not isinstance(tree, exp.Select) or tree.args.get("joins"):
        return None
    from_ = tree.args.get("from_")
    if from_ is None:
        return None
    source = from_.this
    inner: exp.Expr | None = None
    middle: list[exp.CTE] = []  # row-level CTEs between the outer query and the inner one
    if isinstance(source, exp.Subquery):
        inner = source.this
    elif isinstance(source, exp.Table) and tree.args.get("with_") is not None:
        found = _chain(tree.args["with_"], source)
        if found is not None:
            inner, middle = found
    if not isinstance(inner, exp.Select) or not _has_aggregate(inner):
        return None
    outer = tree.copy()
    if middle:
        # The outer query keeps the row-level CTEs (each defined before its reader); the
        # innermost reads the answer.
        kept = [c.copy() for c in reversed(middle)]
        _read_released(kept[0].this, middle[-1].this.args["from_"].this)
        outer.set("with_", exp.With(expressions=kept))
    else:
        outer.set("with_", None)
        _read_released(outer, source)
    names = {INNER} | {c.alias_or_name.lower() for c in middle}
    if any(t.name.lower() not in names for t in outer.find_all(exp.Table)) or any(
        True for _ in outer.find_all(exp.Subquery)
    ):
        raise unsupported(
            "the outer query over an aggregate subquery may read only that subquery",
            "compute the rest in the outer query from the subquery's columns",
        )
    return NestedQuery(inner.copy(), outer, total(outer))


def _row_level_over_one_table(select: exp.Expr) -> bool:
    """A SELECT of row-level expressions over one table: no join, grouping, aggregate,
    window, DISTINCT, LIMIT or CTE of its own — each output row is one input row."""
    return (
        isinstance(select, exp.Select)
        and isinstance((select.args.get("from_") or exp.From()).this, exp.Table)
        and not any(
            select.args.get(k) for k in ("joins", "group", "having", "distinct", "limit", "with_")
        )
        and not any(True for _ in select.find_all(exp.AggFunc, exp.Window, exp.Subquery))
    )


def _chain(with_: exp.With, source: exp.Table) -> tuple[exp.Expr, list[exp.CTE]] | None:
    """The CTE the outer query reads, through row-level CTEs each reading the next
    (``WITH a AS (<aggregate>), b AS (SELECT 2 * x AS y ... FROM a) SELECT ... FROM b``):
    the innermost CTE and the row-level ones, outermost first. None unless every CTE is
    on that one chain (used once) and the statement is not recursive."""
    if with_.args.get("recursive") or source.db:
        return None
    ctes = {c.alias_or_name.lower(): c for c in with_.expressions}
    name, middle = source.name.lower(), []
    while name in ctes and _row_level_over_one_table(ctes[name].this):
        table = ctes[name].this.args["from_"].this
        if table.db or table.name.lower() not in ctes or table.name.lower() == name:
            return None
        middle.append(ctes[name])
        name = table.name.lower()
    if name not in ctes or len(middle) + 1 != len(ctes):
        return None
    return ctes[name].this, middle


def _read_released(select: exp.Select, source: exp.Table) -> None:
    """``select`` reads the released answer instead of ``source`` (in place)."""
    alias = source.alias_or_name
    select.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(INNER))))
    for col in select.find_all(exp.Column):
        if col.table and col.table.lower() == alias.lower():
            col.set("table", exp.to_identifier(INNER))


_STRUCTURE = (
    exp.Select,
    exp.From,
    exp.Table,
    exp.TableAlias,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Offset,
    exp.Alias,
    exp.Column,
    exp.Identifier,
    exp.Star,
    exp.Distinct,
    exp.Window,
    exp.WindowSpec,
    exp.With,
    exp.CTE,
    # grouping sets over the released rows (sums of released cells: post-processing)
    exp.Rollup,
    exp.Cube,
    exp.GroupingSets,
    exp.Tuple,
)


def check_outer(outer: exp.Select) -> None:
    """The outer query is post-processing, but still an allowlist: deterministic
    functions and aggregates over the released rows, windows, no settings, files or
    environment (e.g. getenv) — anything else is refused before any charge. The name
    ``__row`` is dpsql's own (each released row's index, read by the intervals): read
    or written by the outer query, it showed that index and dropped a column."""
    for node in outer.walk():
        if isinstance(node, exp.Identifier) and node.name.lower() == ROW_NAME:
            raise unsupported(
                f"the name {ROW_NAME} is dpsql's own (each released row's index)",
                "name the column something else",
                position_of(node),
            )
        if isinstance(node, _STRUCTURE) or outer_functions.allowed(node):
            continue
        if isinstance(
            node, (*outer_functions.WINDOW_AGGREGATES, *outer_functions.WINDOW_FUNCTIONS)
        ):
            continue
        if isinstance(node, exp.Anonymous):
            name = node.name
        elif isinstance(node, exp.Func):
            name = node.sql_name()  # REGR_SLOPE (its key is regrslope)
        else:
            name = node.key.upper()
        raise unsupported(
            f"{name} is not allowed in a query over a subquery's answer",
            "use arithmetic, aggregates (COUNT, SUM, AVG, MIN, MAX) and windows over its columns",
            position_of(node),
        )


def table_of(
    columns: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    types: tuple[pa.DataType, ...] | None = None,
) -> pa.Table:
    """The released inner answer as the outer query's table, with each row's index;
    ``types``: the columns' types where known (else read from the values)."""
    data: dict[str, list[Any]] = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
    data[ROW_NAME] = list(range(len(rows)))
    known = dict(zip(columns, types, strict=False)) if types is not None else {}
    arrays = {}
    for name, values in data.items():
        kind = known.get(name)
        if kind is not None and not pa.types.is_null(kind):
            try:
                arrays[name] = pa.array(values, type=kind)
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                pass  # read from the values, as below
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays[name] = pa.array([None if v is None else str(v) for v in values])
    return pa.table(arrays)


def _carried(outer: exp.Select, names: tuple[str, ...]) -> exp.Select:
    """A copy whose row-level CTEs pass the hidden columns ``names`` through."""
    out = outer.copy()
    with_ = out.args.get("with_")
    for cte in with_.expressions if with_ is not None else []:
        body = cte.this
        if not any(isinstance(e, exp.Star) for e in body.expressions):
            body.set("expressions", [*body.expressions, *(exp.column(n) for n in names)])
    return out


def _stars_without(select: exp.Select, names: tuple[str, ...]) -> exp.Select:
    """``select`` (changed in place) with every ``*`` and ``t.*`` of its list leaving out
    the hidden columns ``names``: a star over the released table would also show
    ``__row`` (and over the copies ``__rep``), which put the shown columns one place off
    their simulated copies and showed the hidden index as a column (a review,
    2026-12-06)."""
    for item in select.expressions:
        star = item.this if isinstance(item, exp.Column) else item
        if isinstance(star, exp.Star):
            kept = list(star.args.get("except_") or [])
            have = {c.name for c in kept if isinstance(c, exp.Column)}
            kept += [exp.column(n) for n in names if n not in have]
            star.set("except_", kept)
    return select


def _replicated_sql(query: NestedQuery) -> exp.Select:
    """The outer query per copy: its select list and grouping, with the copy's index (and
    the inner row's index when nothing aggregates), its ORDER BY … LIMIT applied within
    each copy (so that the rows a LIMIT chooses by noisy values are simulated too)."""
    outer = query.outer
    rep = _stars_without(_carried(query.run_outer, ("__rep", "__row")), ("__row", "__rep"))
    per_copy_tree(rep)  # a window spans one copy, never several
    grouping = _has_aggregate(outer) or outer.args.get("group") is not None
    whole = aggregated(outer)  # no __row: the rows are not the inner rows one for one
    if whole:
        rep = _ties_broken(rep, whole=True)  # as displayed
    limit_per_copy(rep, None if whole else exp.column("__row"))
    items = list(rep.expressions)
    extra = [exp.column("__rep")] if whole else [exp.column("__rep"), exp.column("__row")]
    rep.set("expressions", [*extra, *items])
    if grouping:
        # The keys as expressions: an ordinal (GROUP BY 1) would name the copy's index
        # once it leads the list, and GROUP BY ALL would group by it too (both failed to
        # bind, silencing the simulation: a review, 2026-12-06).
        group = rep.args.get("group")
        grouped = group.copy() if group is not None else exp.Group()

        def item(i: int) -> exp.Expr:
            found = items[i]
            return (found.this if isinstance(found, exp.Alias) else found).copy()

        if grouped.args.get("all"):
            keys = [
                item(i)
                for i, e in enumerate(items)
                if e.find(exp.AggFunc) is None and e.find(exp.Window) is None
            ]
            grouped.set("all", None)
        else:
            keys = [
                item(int(k.this) - 1) if isinstance(k, exp.Literal) and k.is_int else k
                for k in grouped.expressions
            ]
        grouped.set("expressions", [exp.column("__rep"), *keys])
        rep.set("group", grouped)
    return rep


# Nodes a TRY cannot stand for: parts of a clause, not values.
_NOT_VALUES = (exp.DataType, exp.Identifier, exp.Var, exp.WindowSpec, exp.TableAlias)
# What DuckDB allows no TRY around (ROW_NUMBER is no AggFunc in sqlglot).
_COMPUTING = (exp.AggFunc, exp.Window, exp.RowNumber)


@dataclass(frozen=True)
class _Scope:
    """One SELECT's facts for making its parts total: its GROUP BY expressions (text ->
    total form) and the names of its select items that aggregate or window (a HAVING or
    ORDER BY may name them, or a later select item)."""

    grouped: dict[str, exp.Expr]
    computed: frozenset[str]


def _computes(node: exp.Expr, scope: _Scope) -> bool:
    """An aggregate or window function inside ``node``, or the name of a select item
    that holds one: DuckDB refuses TRY around either."""
    for found in node.find_all(*_COMPUTING, exp.Column):
        if not isinstance(found, exp.Column) or (
            not found.table and found.name.lower() in scope.computed
        ):
            return True
    return False


def _grouped_inside(node: exp.Expr, scope: _Scope) -> exp.Expr:
    """``node`` with every part equal to a GROUP BY expression as that expression's total
    form, so that DuckDB still finds the grouping inside a larger expression."""
    if not scope.grouped:
        return node

    def swap(n: exp.Expr) -> exp.Expr:
        same = scope.grouped.get(n.sql(dialect="duckdb"))
        return same.copy() if same is not None else n

    return node.transform(swap, copy=False)


def _total_value(node: exp.Expr, scope: _Scope) -> exp.Expr:
    """``node`` with each largest part that holds no aggregate or window under TRY."""
    if isinstance(node, (exp.Column, exp.Literal, exp.Star, exp.Null, exp.Try, *_NOT_VALUES)):
        return node
    same = scope.grouped.get(node.sql(dialect="duckdb"))
    if same is not None:
        return same.copy()
    if not _computes(node, scope):
        return exp.Try(this=_grouped_inside(node, scope))
    if isinstance(node, exp.Window):
        # the function itself stays a window's function; its inputs and the window's
        # partition and order are values
        _children_total(node.this, scope)
        for key in ("partition_by", "order"):
            value = node.args.get(key)
            if isinstance(value, list):
                node.set(key, [_total_part(v, scope) for v in value])
            elif isinstance(value, exp.Expr):
                node.set(key, _total_part(value, scope))
        return node
    return _children_total(node, scope)


def _children_total(node: exp.Expr, scope: _Scope) -> exp.Expr:
    """``node`` with each child made total by :func:`_total_part` (in place)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, _total_part(value, scope))
        elif isinstance(value, list):
            node.set(key, [_total_part(v, scope) if isinstance(v, exp.Expr) else v for v in value])
    return node


def _total_part(node: exp.Expr, scope: _Scope) -> exp.Expr:
    """A child of a node that holds an aggregate or a window: clauses (ORDER BY inside a
    window, DISTINCT inside an aggregate) are entered, values made total."""
    if isinstance(node, (exp.Ordered, exp.Order, exp.Distinct, exp.Alias)):
        return _children_total(node, scope)
    return _total_value(node, scope)


def total(outer: exp.Select) -> exp.Select:
    """The outer query in forms that cannot fail on the released values it reads: casts
    as TRY_CAST, and every part without an aggregate or window under TRY (NULL where it
    would raise), as the ordinary outer layer (proxy/outer.py). It runs after the inner
    answer is charged; the refusal of what cannot bind still comes first (the engine runs
    it on a stand-in row before the charge, and falls back to the query as written where
    this form does not bind: :func:`displayed`). What sits above an aggregate
    (``CHR(SUM(x))``) cannot be under TRY in DuckDB; such a failure is reported, and the
    inner answer it read is cached: re-running a corrected outer query costs nothing."""
    out = outer.transform(
        lambda n: exp.TryCast(this=n.this, to=n.to)
        if isinstance(n, exp.Cast) and not isinstance(n, exp.TryCast)
        else n
    )
    assert isinstance(out, exp.Select)
    for select in list(out.find_all(exp.Select)):
        computed = frozenset(
            e.alias.lower()
            for e in select.expressions
            if isinstance(e, exp.Alias) and any(True for _ in e.this.find_all(*_COMPUTING))
        )
        scope = _Scope({}, computed)
        group = select.args.get("group")
        if group is not None:
            totals = [_total_value(g.copy(), scope) for g in group.expressions]
            scope = _Scope(
                {
                    g.sql(dialect="duckdb"): t
                    for g, t in zip(group.expressions, totals, strict=True)
                    if not isinstance(g, (exp.Literal, exp.Column))
                },
                computed,
            )
            group.set("expressions", totals)
        select.set("expressions", [_total_part(e, scope) for e in select.expressions])
        for clause in ("where", "having"):
            found = select.args.get(clause)
            if found is not None:
                found.set("this", _total_value(found.this, scope))
        order = select.args.get("order")
        if order is not None:
            for o in order.expressions:
                o.set("this", _total_value(o.this, scope))
    return out


def aggregated(outer: exp.Select) -> bool:
    """Whether the outer query's rows are not the inner answer's rows one for one: it
    aggregates, groups, or keeps DISTINCT rows (which the hidden ``__row`` would keep
    apart: SELECT DISTINCT showed duplicates, a review, 2026-12-06). Its rows are then
    matched with their simulated copies by their items that aggregate nothing."""
    return (
        _has_aggregate(outer)
        or outer.args.get("group") is not None
        or outer.args.get("distinct") is not None
    )


def displayed(query: NestedQuery) -> exp.Select:
    """The outer query as shown (:attr:`NestedQuery.run_outer`); a row-wise one carries
    the inner row's index last (hidden), so that its cells can be matched with their
    simulated copies. Rows a LIMIT or OFFSET picks among ties are picked as in the
    copies (:func:`_ties_broken`)."""
    if aggregated(query.outer):
        return _ties_broken(query.run_outer, whole=True)
    shown = _stars_without(_carried(query.run_outer, ("__row",)), ("__row",))
    shown.set("expressions", [*shown.expressions, exp.column("__row")])
    return _ties_broken(shown, whole=False)


def _ties_broken(select: exp.Select, *, whole: bool) -> exp.Select:
    """``select`` whose ORDER BY, where a LIMIT or OFFSET picks rows, ends in a total
    order: every item of the select list (``whole``: the rows are not the inner rows one
    for one) or the inner row's index. Otherwise the rows picked among ties were those
    DuckDB happened to read or group first, which another run of the same release could
    change, and which the simulated copies (ranked the same way) did not match."""
    if select.args.get("limit") is None and select.args.get("offset") is None:
        return select
    if whole:
        if any(isinstance(e, exp.Star) for e in select.expressions):
            return select  # (a star's columns are not numbered here; ORDER BY ALL is one key)
        # (a window item is left out: a copy's rank cannot order by another window)
        last: list[exp.Expr] = [
            exp.Literal.number(i + 1)
            for i, e in enumerate(select.expressions)
            if e.find(exp.Window) is None
        ]
    else:
        last = [exp.column("__row")]
    return select.order_by(*last, append=True)


@dataclass(frozen=True)
class Spread:
    """The outer query's answer under the inner answer's simulated noise: per shown row
    the 95% half-width of each cell (None where none can be stated), and what the noise
    could have answered otherwise (proxy/unsettled.py's rule: in at least 1 copy in 40)."""

    widths: list[tuple[float | None, ...]]
    cells: tuple[tuple[int, int], ...] = ()  # (shown row, column) not numbers, unsettled
    rows: tuple[int, ...] = ()  # shown rows the noise could have left out
    could_show: int = 0  # rows (groups) not shown that the noise could have shown
    failed: bool = False  # the outer query did not run over the copies: said in words
    # a grouped outer query's keys that read no noisy value: exact, no width by design
    exact: frozenset[int] = frozenset()


def simulated_widths(
    nested: NestedQuery,
    inner: pa.Table,
    inner_widths: tuple[tuple[float | None, ...], ...],
    shown_rows: list[tuple[Any, ...]],
    width: int,
    run: Any,
    drawn: tuple[frozenset[str], ...] = (),
) -> Spread:
    """Per shown cell of the outer query (``width`` columns), the 95% half-width of its
    spread when the inner answer's noise is simulated (None where it cannot be stated),
    with the cells and rows that noise could change. ``inner`` carries ``__row``;
    ``run(sql, table)`` evaluates SQL over ``released``. ``drawn``: per shown column,
    whether it reads an inner MEDIAN/quantile/MIN/MAX draw (a non-empty set of their
    names): its error is in ranks, not simulated, so it gets no width (it showed ± 0).
    Never raises (it runs after the inner answer is charged): a failure is reported as
    ``failed`` (a LIST key escaped as a TypeError: an adversarial review, 2026-12-06)."""
    try:
        return _simulated_widths(nested, inner, inner_widths, shown_rows, width, run, drawn)
    except Exception:  # released values only: the answer stands, the doubt is said in words
        return Spread([(None,) * width for _ in shown_rows], failed=True)


def _hashable(value: Any) -> Any:
    """``value`` as a dictionary key: a LIST, MAP or STRUCT cell by its text."""
    try:
        hash(value)
    except TypeError:
        return ("__unhashable", repr(value))
    return value


def _simulated_widths(
    nested: NestedQuery,
    inner: pa.Table,
    inner_widths: tuple[tuple[float | None, ...], ...],
    shown_rows: list[tuple[Any, ...]],
    width: int,
    run: Any,
    drawn: tuple[frozenset[str], ...],
) -> Spread:
    none = Spread([(None,) * width for _ in shown_rows])
    n = inner.num_rows
    if n == 0:
        return none
    copies: dict[str, Any] = {"__rep": np.repeat(np.arange(REPLICATES), n)}
    stream = 0
    noised = False
    noisy: set[str] = set()  # the inner columns noised in the copies
    for c, name in enumerate(inner.column_names):
        values = inner.column(name).to_pylist()
        widths = [w[c] if c < len(w) else None for w in inner_widths] + [None]
        # numbers: ints, floats and DECIMALs (a DECIMAL column was neither noised in the
        # copies nor given a width: a review, 2026-12-06)
        numeric = all(is_number(v) for v in values)
        if name != "__row" and numeric and any(w is not None for w in widths[:n]):
            noised = True
            noisy.add(name.lower())
            noise = np.zeros(n * REPLICATES)
            # each row's own order of the quantiles (simulation_table), scaled to its width
            unit = simulation_table("gaussian", 1.0, REPLICATES, n, stream)
            stream += n
            for i, w in enumerate(widths[:n]):
                if w is not None and w > 0:
                    noise[i::n] = unit[:, i] * (w / Z_975)
            copies[name] = np.tile(np.asarray(values, dtype=np.float64), REPLICATES) + noise
        else:
            copies[name] = np.tile(np.asarray(values, dtype=object), REPLICATES)
    try:
        _, rows = run(_replicated_sql(nested).sql(dialect="duckdb"), pa.table(copies))
    except Exception:  # the outer query over a noisier copy failed: no width stated
        return replace(none, failed=True)
    grouped = aggregated(nested.outer)
    skip = 1 if grouped else 2
    # A grouped outer query's rows are matched with their simulated copies by its keys:
    # the items that aggregate nothing. (Matching by the values that are not numbers
    # pooled every row of a numeric key into one, so that a year key showed "2022 ± 3"
    # and each year's sum the spread of all years; and a NULL cell, such as an average
    # over no rows, unmatched its row's copies and dropped every interval of the row.)
    items = nested.run_outer.expressions[:width]
    keyed = [j for j, item in enumerate(items) if item.find(exp.AggFunc) is None]

    def key_of(cells: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(_hashable(cells[j]) for j in keyed)

    spreads: dict[Any, list[tuple[Any, ...]]] = {}
    for r in rows:
        cells = tuple(r[skip : skip + width])
        key = key_of(cells) if grouped else (r[1],)
        spreads.setdefault(key, []).append(cells)
    least = math.ceil(SHARE * REPLICATES)
    out: list[tuple[float | None, ...]] = []
    doubtful: list[tuple[int, int]] = []
    unsure: list[int] = []
    shown_keys = set()
    for i, r in enumerate(shown_rows):
        cells = tuple(r[:width])
        key = key_of(cells) if grouped else (r[width],)
        shown_keys.add(key)
        found = spreads.get(key, [])
        if noised and REPLICATES - len(found) >= least:
            unsure.append(i)  # a WHERE or HAVING on noisy values could drop it
        widths_out: list[float | None] = []
        for j, v in enumerate(cells):
            if grouped and j in keyed:
                widths_out.append(None)  # a key: the same in every copy
                continue
            if not is_finite_number(v):
                if noised and sum(1 for c in found if not same_value(c[j], v)) >= least:
                    doubtful.append((i, j))
                widths_out.append(None)
                continue
            if j < len(drawn) and drawn[j]:
                widths_out.append(None)  # a DP quantile's draw: no value interval
                continue
            diffs = [abs(float(c[j]) - float(v)) for c in found if is_number(c[j])]
            # Among the copies that show the row: a row a WHERE on noisy values keeps in
            # only some copies still has a width (it had none, and no word said so).
            enough = len(found) >= REPLICATES * 0.5 and len(diffs) >= 0.9 * len(found)
            widths_out.append(float(np.quantile(diffs, 0.95)) if enough else None)
        out.append(tuple(widths_out))
    could_show = sum(
        1 for key, found in spreads.items() if key not in shown_keys and len(found) >= least
    )
    exact = frozenset(
        j
        for j in (keyed if grouped else ())
        if not (j < len(drawn) and drawn[j])
        and items[j].find(exp.Star) is None  # (a star's columns are not numbered here)
        and not any(c.name.lower() in noisy for c in items[j].find_all(exp.Column))
    )
    return Spread(out, tuple(doubtful), tuple(unsure), could_show, exact=exact)


def chooser(query: NestedQuery) -> str:
    """The outer query's clauses that choose its rows by value, in words."""
    outer = query.outer
    parts = [c.upper() for c in ("where", "having") if outer.args.get(c) is not None]
    if outer.args.get("group") is not None:
        parts.append("GROUP BY")
    if outer.args.get("distinct") is not None:
        parts.append("DISTINCT")
    if outer.args.get("limit") is not None:
        parts.append("ORDER BY … LIMIT" if outer.args.get("order") is not None else "LIMIT")
    elif outer.args.get("offset") is not None:
        parts.append("ORDER BY … OFFSET" if outer.args.get("order") is not None else "OFFSET")
    return f"the outer query's {' and '.join(parts)}" if parts else "the outer query"


def drawn_columns(
    query: NestedQuery, names: list[str], quantiles: frozenset[str]
) -> tuple[frozenset[str], ...]:
    """Per shown output column (``names``): the inner answer's quantile columns
    (``quantiles``: MEDIAN, a level, MIN or MAX draws) it shows or reads."""
    # By output name: a star's columns are the inner ones, by their names.
    items = {
        e.alias_or_name: e
        for e in query.run_outer.expressions
        if not isinstance(e, exp.Star) and not isinstance(e.this, exp.Star)
    }
    out = []
    for name in names:
        reads = {name} & quantiles
        item = items.get(name)
        if item is not None:
            reads |= {c.name for c in item.find_all(exp.Column)} & quantiles
        out.append(frozenset(reads))
    return tuple(out)


def missing_widths(
    names: list[str],
    rows: list[tuple[Any, ...]],
    widths: list[tuple[float | None, ...]],
    keys: frozenset[int] = frozenset(),
) -> tuple[str, ...]:
    """One warning per column with numbers the simulation gave no width: every number
    carries its uncertainty, or a word on why it has none. ``keys``: columns that are
    a grouped outer query's keys reading no noisy value (:attr:`Spread.exact`), exact by
    design: no warning."""
    out = []
    for c, name in enumerate(names):
        if c in keys:
            continue
        k = sum(
            1
            for row, w in zip(rows, widths, strict=True)
            if c < len(w) and w[c] is None and is_finite_number(row[c])
        )
        if k:
            out.append(
                f"{k} of {len(rows)} values in column {name!r} have no interval: the "
                "outer query fails near the released values, or keeps their row in "
                "fewer than half of the simulated draws of the noise; treat them as "
                "imprecise (a larger epsilon narrows the noise)"
            )
    return tuple(out)
