"""r's clamped integer columns and the bounds they give the per-person sums over them.

The rewrite clamps every bounded argument where it is read (proxy/rewrite/clamp_inputs.py:
``CASE WHEN a < L THEN L WHEN a > U THEN U ELSE a END``, under a cast to an integer type,
which keeps a value of [L, U] in [L, U]) and the rows CTE ``r`` carries it as a column.
An engine whose exact integer sum is slow may sum such a column in a cheaper type where
the bound proves it exact (proxy/engines/spark_per_person.py: DOUBLE on Spark;
proxy/engines/postgres_per_person.py: INTEGER on PostgreSQL). The bounds are read back
from the SQL's literals, so they are the ones the SQL enforces.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.engines.kinds import Family, Typer


def rows_and_per_person(tree: exp.Expr) -> tuple[exp.With, exp.CTE, exp.CTE] | None:
    """The core's WITH, its rows CTE ``r`` and its per-person CTE ``pp`` (a SELECT), or
    None when the tree has no such pair."""
    with_ = tree.args.get("with_")
    if not isinstance(with_, exp.With):
        return None
    ctes = {cte.alias: cte for cte in with_.expressions}
    r, pp = ctes.get("r"), ctes.get("pp")
    if r is None or pp is None or not isinstance(pp.this, exp.Select):
        return None
    return with_, r, pp


def column_families(r: exp.Expr, typer: Typer) -> dict[str, Family]:
    """r's column name -> its type family (``typer`` types r's expressions)."""
    return {
        item.alias: typer.kind(item.this).family
        for item in r.expressions
        if isinstance(item, exp.Alias)
    }


def integer_literal(node: exp.Expr) -> int | None:
    """The value of an integer literal (signed, parenthesised), else None."""
    if isinstance(node, exp.Paren):
        return integer_literal(node.this)
    if isinstance(node, exp.Neg):
        inner = integer_literal(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.this)
    return None


def column_bounds(r: exp.Expr, kinds: dict[str, Family]) -> dict[str, int]:
    """r's integer columns clamped to literal bounds, as name -> max |value|."""
    out: dict[str, int] = {}
    for item in r.expressions:
        if not isinstance(item, exp.Alias) or kinds.get(item.alias) != Family.INT:
            continue
        value = item.this
        while isinstance(value, (exp.Cast, exp.TryCast, exp.Try, exp.Paren)):
            value = value.this
        if not isinstance(value, exp.Case) or len(value.args.get("ifs") or []) != 2:
            continue
        low, high = value.args["ifs"]
        a = value.args.get("default")
        if not (
            a is not None
            and isinstance(low.this, exp.LT)
            and isinstance(high.this, exp.GT)
            and low.this.this == a
            and high.this.this == a
        ):
            continue
        ends = [
            integer_literal(low.this.expression),
            integer_literal(low.args["true"]),
            integer_literal(high.this.expression),
            integer_literal(high.args["true"]),
        ]
        if any(e is None for e in ends) or ends[0] != ends[1] or ends[2] != ends[3]:
            continue
        out[item.alias] = max(abs(e) for e in ends if e is not None)
    return out


def bound(node: exp.Expr, bounds: dict[str, int]) -> int | None:
    """max |node| over r's bounded columns and integer literals (None: not bounded)."""
    if isinstance(node, exp.Paren):
        return bound(node.this, bounds)
    if isinstance(node, exp.Column) and not node.table:
        return bounds.get(node.name)
    literal = integer_literal(node)
    if literal is not None:
        return abs(literal)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        a, b = bound(node.left, bounds), bound(node.right, bounds)
        if a is None or b is None:
            return None
        return a * b if isinstance(node, exp.Mul) else a + b
    if isinstance(node, exp.Neg):
        return bound(node.this, bounds)
    return None
