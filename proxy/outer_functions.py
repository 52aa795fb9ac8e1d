"""What the outer layer may compute over released rows, beyond row-level expressions.

The outer layer (select-list arithmetic over aggregates, ORDER BY, LIMIT) runs in its own
in-memory DuckDB that holds nothing but the released noisy table (proxy/release.py), so
whatever it computes is post-processing: it cannot read a private row and costs no
budget. It may therefore use more than a row-level expression may: any deterministic
function of released values (``PI()``, ``POWER(AVG(x), 2)``, ``ROUND(SUM(x) /
COUNT(*), 2)``), window functions over the released rows (``SUM(COUNT(*)) OVER ()`` for
a percent of total, ``RANK() OVER (ORDER BY COUNT(*) DESC)``) and ``RAND()``. A window
runs over the released groups exactly as SQL evaluates it after GROUP BY; ``RAND()``
there is arithmetic on released rows, not privacy noise. The list is still an allowlist:
anything not named here is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from proxy.allowlist import SCALAR_NODES

# Ranking and offset functions of a window over the released rows.
WINDOW_FUNCTIONS: tuple[type[exp.Expr], ...] = (
    exp.RowNumber,
    exp.Rank,
    exp.DenseRank,
    exp.PercentRank,
    exp.CumeDist,
    exp.Ntile,
    exp.Lag,
    exp.Lead,
    exp.FirstValue,
    exp.LastValue,
    exp.NthValue,
)
# Aggregates a window applies to released values (they are not DP aggregates).
WINDOW_AGGREGATES: tuple[type[exp.Expr], ...] = (
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Median,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
)
# Deterministic functions (and RAND) allowed over released values only.
OUTER_NODES: tuple[type[exp.Expr], ...] = (
    *SCALAR_NODES,
    exp.Rand,
    exp.Nullif,
    exp.Trunc,
    exp.Initcap,
    exp.Reverse,
    exp.Repeat,
    exp.Pad,
    exp.ToChar,
    exp.Hex,
    exp.IsNan,
    exp.IsInf,
    exp.Factorial,
    exp.Sinh,
    exp.Cosh,
    exp.Tanh,
    exp.Asinh,
    exp.Acosh,
    exp.Atanh,
    exp.BitwiseAnd,
    exp.BitwiseOr,
    exp.BitwiseXor,
    exp.BitwiseNot,
    exp.BitwiseLeftShift,
    exp.BitwiseRightShift,
    exp.ConcatWs,
    exp.Ascii,
    exp.Chr,
    exp.Levenshtein,
)
# DuckDB functions sqlglot has no node for (they parse as Anonymous), by name.
OUTER_ANONYMOUS: frozenset[str] = frozenset(
    {
        "isfinite",
        "gamma",
        "lgamma",
        "even",
        "signbit",
        "gcd",
        "lcm",
        "nextafter",
        "round_even",
        "roundbankers",
        "format",
        "printf",
        "bar",
        "xor",
    }
)


def allowed(node: exp.Expr) -> bool:
    """An outer-layer node other than a window, an aggregate or a column."""
    if isinstance(node, exp.Anonymous):
        return isinstance(node.this, str) and node.this.lower() in OUTER_ANONYMOUS
    return isinstance(node, OUTER_NODES)


def window_function_allowed(node: exp.Window) -> bool:
    return isinstance(node.this, (*WINDOW_FUNCTIONS, *WINDOW_AGGREGATES))


def window_inputs(node: exp.Window) -> Iterator[exp.Expr]:
    """What a window reads from the released rows: its function's arguments, PARTITION
    BY and ORDER BY expressions (the function itself aggregates released rows)."""
    yield from node.this.iter_expressions()
    yield from node.args.get("partition_by") or []
    order = node.args.get("order")
    if order is not None:
        for ordered in order.expressions:
            yield ordered.this if isinstance(ordered, exp.Ordered) else ordered


def _rewrite_children(node: exp.Expr, visit: Callable[[exp.Expr], exp.Expr]) -> None:
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, value.transform(visit, copy=False))
        elif isinstance(value, list):
            node.set(
                key,
                [v.transform(visit, copy=False) if isinstance(v, exp.Expr) else v for v in value],
            )


def rewrite_window(node: exp.Window, visit: Callable[[exp.Expr], exp.Expr]) -> exp.Window:
    """The window with its inputs rewritten by the outer layer's ``visit`` (aggregates to
    released columns, keys to key columns) and its own function kept: ``COUNT(*) OVER
    ()`` counts released rows even when the query also asks for a DP ``COUNT(*)``."""
    out = node.copy()
    _rewrite_children(out.this, visit)
    for key in ("partition_by", "order"):
        value = out.args.get(key)
        if isinstance(value, exp.Expr):
            out.set(key, value.transform(visit, copy=False))
        elif isinstance(value, list):
            out.set(key, [v.transform(visit, copy=False) for v in value])
    return out


def _lifted(node: exp.Expr) -> bool:
    return isinstance(node, (exp.Window, exp.Rand))


def _as_list(value: object) -> list[exp.Expr]:
    if isinstance(value, list):
        return value
    return [value] if isinstance(value, exp.Expr) else []


def lift_windows(select: exp.Select) -> exp.Select:
    """Windows and RAND() computed in a subquery over ``released``, referenced by name.

    The outer layer evaluates each item under TRY(...) so that arithmetic over released
    values yields NULL rather than failing after the charge; DuckDB allows neither a
    window nor a volatile function under TRY. Computing them first, each as a column of
    ``SELECT *, … FROM released``, keeps every item under TRY.

    SQL computes windows after HAVING, over the groups it keeps: with a HAVING (the
    outer layer's WHERE), the windows' subquery reads the rows that pass it, and the
    RAND()s of the HAVING itself are computed one level below, so that the filter sees
    them. (It once read every released row: ``COUNT(*) OVER ()`` beside ``HAVING sex =
    1`` counted both groups; an answer oracle, 2026-12-05.)"""
    before = _lift(select, ("where",), "__v")
    after = _lift(select, ("expressions", "order"), "__w")
    if not before and not after:
        return select
    source: exp.Expr = exp.to_table("released")
    if before:
        source = _over(source, before)
    where = select.args.get("where")
    if where is not None and any(node.find(exp.Window) for node in after):
        inner = exp.Select(expressions=[exp.Star(), *after]).from_(source)
        inner.set("where", where)
        select.set("where", None)
        source = _named(inner)
    elif after:
        source = _over(source, after)
    select.set("from_", exp.From(this=source))
    return select


def _lift(select: exp.Select, keys: tuple[str, ...], prefix: str) -> list[exp.Expr]:
    """Each window or RAND() in ``select``'s ``keys`` clauses replaced by a column named
    ``prefix`` and a number; returns the aliased nodes taken out."""
    lifted: list[exp.Expr] = []

    def lift(node: exp.Expr) -> exp.Expr:
        if not _lifted(node):
            return node
        name = f"{prefix}{len(lifted)}"
        lifted.append(exp.alias_(node, name, copy=False))
        return exp.column(name)

    for key in keys:
        value = select.args.get(key)
        # Most outer layers hold neither: a search is cheaper than a transform that
        # would hand every node back unchanged.
        if not any(v.find(exp.Window, exp.Rand) for v in _as_list(value)):
            continue
        if isinstance(value, list):
            select.set(key, [v.transform(lift, copy=False) for v in value])
        elif isinstance(value, exp.Expr):
            select.set(key, value.transform(lift, copy=False))
    return lifted


def _over(source: exp.Expr, lifted: list[exp.Expr]) -> exp.Expr:
    """``(SELECT *, <lifted> FROM source) AS released``."""
    return _named(exp.Select(expressions=[exp.Star(), *lifted]).from_(source))


def _named(select: exp.Select) -> exp.Expr:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier("released")))
