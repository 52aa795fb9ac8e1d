"""A limit on operands that are written or evaluated more than once per level.

Two allowed functions repeat one operand, so nesting them in that operand doubles the
work at every level:

* ``SAFE_DIVIDE(n, d)``: sqlglot prints ``CASE WHEN d <> 0 THEN n / d ELSE NULL END``,
  ``d`` twice, on every engine (the cores of PostgreSQL and Spark are rendered from the
  DuckDB text);
* ``NULLIF(a, b)`` (the outer layer's): DuckDB expands its macro to ``CASE WHEN a = b
  THEN NULL ELSE a END`` while binding, ``a`` twice.

A probe of 2026-12-04 (RELIABILITY.md, "Planning time on nested functions"): 16
SAFE_DIVIDEs nested in denominators, 300 characters of SQL, took 88 s to plan; 14
NULLIFs nested in first arguments took DuckDB 7 s to bind. Both before any charge and
whatever the data, but the outer layer runs after the charge, and a statement whose
evaluation doubles at every level runs into the time limit there.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.errors import DPSQLError, position_of

# At most this many repeated operands nested along one path: the work grows by 2^4 = 16
# at most. Nesting SAFE_DIVIDE inside a denominator is rare in real queries; four levels
# leave room for them.
MAX_REPEATED = 4


def _repeated_child(node: exp.Expr) -> exp.Expr | None:
    """The operand ``node`` has written or evaluated twice, if any."""
    if isinstance(node, exp.SafeDivide):
        return node.expression
    if isinstance(node, exp.Nullif):
        return node.this
    return None


def check_repeated_operands(tree: exp.Expr) -> None:
    """Refuse, before any charge, a query that nests more than :data:`MAX_REPEATED`
    repeated operands (module docstring) along one path of its tree.

    Claim: an accepted query's text and DuckDB's binding grow at most 2^MAX_REPEATED
    times from these functions. Iterative (children before parents), so a deep tree
    cannot exhaust Python's recursion limit here."""
    depth: dict[int, int] = {}
    for node in reversed(list(tree.walk())):
        repeated = _repeated_child(node)
        deepest = 0
        for child in node.iter_expressions():
            below = depth.get(id(child), 0) + (1 if child is repeated else 0)
            deepest = max(deepest, below)
        depth[id(node)] = deepest
        if deepest > MAX_REPEATED:
            name = "SAFE_DIVIDE" if isinstance(node, exp.SafeDivide) else "NULLIF"
            raise DPSQLError(
                "unsupported_sql",
                f"{name} is nested {deepest} levels deep in the operand it repeats (a "
                f"SAFE_DIVIDE's denominator, a NULLIF's first argument); the limit is "
                f"{MAX_REPEATED}: each level doubles the work of planning the query",
                "compute the inner value in a subquery or CTE column, and divide by that",
                position_of(node),
            )
