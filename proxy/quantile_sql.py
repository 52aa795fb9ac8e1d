"""The SQL spellings of quantiles, MEDIAN, MIN and MAX, and the level each one asks for.

Every accepted spelling becomes one :class:`proxy.shape.AggregateCall` of kind QUANTILE
(with its level q in ascending order), MINIMUM or MAXIMUM; the rewrite answers them all
with the exponential mechanism over a grid (proxy/rewrite/quantile_histogram.py,
accounting/quantiles.py). Levels 0 and 1 are MIN and MAX: at rank 0 or n every empty bin
beyond the data ties with the right one, so they aim a few rows inside instead.

Accepted (any dialect sqlglot parses into these nodes):

* ``MEDIAN(x)``; ``QUANTILE_CONT(x, q)``, ``QUANTILE_DISC(x, q)``, ``QUANTILE(x, q)``,
  ``APPROX_QUANTILE(x, q)`` (DuckDB), ``APPROX_PERCENTILE(x, q)`` (Trino, Snowflake);
* ``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x [DESC])`` and ``PERCENTILE_DISC``
  (PostgreSQL, Snowflake, T-SQL without OVER); DESC asks for level 1 − q;
* ``APPROX_QUANTILES(x, n)[OFFSET(i)]`` (also SAFE_OFFSET, ORDINAL, SAFE_ORDINAL;
  BigQuery): level i/n (ORDINAL: (i − 1)/n);
* ``MIN(x)``, ``MAX(x)`` (and with DISTINCT, which does not change them).

The CONT/DISC distinction (interpolate or not) is below the grid's resolution: both
release the drawn bin's representative value. Anything else is refused with a rewrite.
"""

from __future__ import annotations

from sqlglot import exp

from proxy import shape as S
from proxy.errors import DPSQLError, position_of, unsupported

# Nodes that take the value as ``this`` and, except MEDIAN/MIN/MAX, the level as an arg.
_LEVEL_ARG: dict[type[exp.Expr], str] = {
    exp.PercentileCont: "expression",
    exp.PercentileDisc: "expression",
    exp.Quantile: "quantile",
    exp.ApproxQuantile: "quantile",
}
_DIRECT: tuple[type[exp.Expr], ...] = (exp.Median, exp.Min, exp.Max, *_LEVEL_ARG)
# A bucket count above this is a typo or a way to make huge arrays; it changes nothing.
MAX_BUCKETS = 1_000_000

EXAMPLE = "MEDIAN(x), QUANTILE_CONT(x, 0.9), MIN(x) or MAX(x)"


def is_quantile(node: exp.Expr) -> bool:
    """True for every node this module answers or refuses with its own message."""
    if isinstance(node, (*_DIRECT, exp.ApproxQuantiles)):
        return True
    if isinstance(node, exp.WithinGroup):
        return isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc))
    return isinstance(node, exp.Bracket) and isinstance(node.this, exp.ApproxQuantiles)


def _refuse(node: exp.Expr, message: str, hint: str) -> DPSQLError:
    return unsupported(message, hint, position_of(node))


def _number(node: exp.Expr | None) -> float | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return float(node.this)
        except ValueError:
            return None
    return None


def _level(call: exp.Expr, node: exp.Expr | None) -> float:
    """The quantile level: a number literal in [0, 1]."""
    name = call.sql(dialect="duckdb")[:60]
    if isinstance(node, exp.Array):
        raise _refuse(
            call,
            f"{name}: one quantile level per call is answered, not a list of levels",
            "write one call per level, e.g. QUANTILE_CONT(x, 0.25), QUANTILE_CONT(x, 0.5)",
        )
    value = _number(node)
    if value is None or not 0.0 <= value <= 1.0:
        raise _refuse(
            call,
            f"{name}: the quantile level must be a number literal between 0 and 1",
            "write e.g. QUANTILE_CONT(x, 0.9) or PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY x)",
        )
    return value


def _value(call: exp.Expr, arg: exp.Expr | None, allow_distinct: bool) -> exp.Expr:
    name = call.sql(dialect="duckdb")[:60]
    if isinstance(arg, exp.Distinct):
        if allow_distinct and len(arg.expressions) == 1:
            return arg.expressions[0]
        raise _refuse(
            call,
            f"{name}: DISTINCT inside a quantile is not answered",
            "drop DISTINCT: the quantile of the rows is answered",
        )
    if arg is None:
        raise _refuse(call, f"{name} needs a value to aggregate", f"write e.g. {EXAMPLE}")
    return arg


def _called(call: exp.Expr, text: str, arg: exp.Expr, q: float | None) -> S.AggregateCall:
    if q is None:  # MIN(x) or MAX(x)
        return S.AggregateCall(S.MINIMUM if isinstance(call, exp.Min) else S.MAXIMUM, arg, text)
    if q == 0.0:
        return S.AggregateCall(S.MINIMUM, arg, text)
    if q == 1.0:
        return S.AggregateCall(S.MAXIMUM, arg, text)
    return S.AggregateCall(S.QUANTILE, arg, text, q)


def _within_group(node: exp.WithinGroup, text: str) -> S.AggregateCall:
    inner = node.this
    assert isinstance(inner, (exp.PercentileCont, exp.PercentileDisc))
    order = node.expression
    items = order.expressions if isinstance(order, exp.Order) else []
    if inner.args.get("expression") is not None or len(items) != 1:
        raise _refuse(
            node,
            f"{text[:60]}: WITHIN GROUP needs PERCENTILE_CONT(q) and one ORDER BY value",
            "write PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x)",
        )
    q = _level(node, inner.this)
    ordered = items[0]
    descending = bool(ordered.args.get("desc")) if isinstance(ordered, exp.Ordered) else False
    value = ordered.this if isinstance(ordered, exp.Ordered) else ordered
    return _called(node, text, _value(node, value, False), 1.0 - q if descending else q)


def _approx_quantiles(node: exp.Bracket, text: str) -> S.AggregateCall:
    inner = node.this
    assert isinstance(inner, exp.ApproxQuantiles)
    buckets = _number(inner.args.get("expression"))
    indices = node.expressions
    index = _number(indices[0]) if len(indices) == 1 else None
    base = int(node.args.get("offset") or 0)
    hint = "write APPROX_QUANTILES(x, 100)[OFFSET(50)] for the median, or MEDIAN(x)"
    if buckets is None or not buckets.is_integer() or not 1 <= buckets <= MAX_BUCKETS:
        raise _refuse(
            node,
            f"{text[:60]}: the number of quantiles must be a whole number literal "
            f"between 1 and {MAX_BUCKETS}",
            hint,
        )
    if index is None or not index.is_integer() or not 0 <= index - base <= buckets:
        raise _refuse(
            node,
            f"{text[:60]}: the element must be a whole number literal within the "
            f"{int(buckets) + 1} quantiles",
            hint,
        )
    value = _value(node, inner.this, False)
    return _called(node, text, value, (index - base) / buckets)


def aggregate_call(node: exp.Expr, text: str) -> S.AggregateCall:
    """The call a quantile spelling asks for; ``text`` is the node's canonical SQL.

    Refuses (before any charge) list-valued forms, levels that are not literals in
    [0, 1], DISTINCT quantiles and extra arguments, each with a rewrite that works."""
    if isinstance(node, exp.WithinGroup):
        return _within_group(node, text)
    if isinstance(node, exp.Bracket):
        return _approx_quantiles(node, text)
    if isinstance(node, exp.ApproxQuantiles):
        raise _refuse(
            node,
            f"{text[:60]} returns an array of quantiles, which is not released whole",
            "pick one element: APPROX_QUANTILES(x, 100)[OFFSET(50)] is the median",
        )
    if isinstance(node, (exp.Min, exp.Max)):
        if node.expressions or node.args.get("count") is not None:
            raise _refuse(
                node,
                f"{text[:60]}: MIN/MAX with a second argument returns a list of values",
                "write MIN(x) or MAX(x): one value per group",
            )
        return _called(node, text, _value(node, node.this, True), None)
    if isinstance(node, exp.Median):
        return _called(node, text, _value(node, node.this, False), 0.5)
    extra = [
        k
        for k, v in node.args.items()
        if v is not None and k not in ("this", _LEVEL_ARG[type(node)])
    ]
    if extra:
        raise _refuse(
            node,
            f"{text[:60]}: weights and accuracy arguments are not answered",
            "write APPROX_QUANTILE(x, q) or QUANTILE_CONT(x, q) with two arguments",
        )
    level = node.args.get(_LEVEL_ARG[type(node)])
    if level is None:
        raise _refuse(
            node,
            f"{text[:60]} needs a level",
            "write PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY x), or QUANTILE_CONT(x, 0.5)",
        )
    return _called(node, text, _value(node, node.this, False), _level(node, level))
