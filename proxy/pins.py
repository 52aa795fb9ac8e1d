"""Literal values a WHERE clause pins an expression to (`x = lit`, `x IN (lits)`).

Used for parallel composition (a partition column pinned to some values charges only
those partitions) and to narrow a public key domain. Only top-level conjuncts count: a
pin under OR or NOT restricts nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp


def pinned_values(
    condition: exp.Expr | None, target: Callable[[exp.Expr], bool]
) -> set[Any] | None:
    """The values every row must take on an expression ``target`` accepts, or None."""
    if condition is None:
        return None
    pinned: set[Any] | None = None
    for conj in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        conj = conj.unnest()
        values: set[Any] | None = None
        if (
            isinstance(conj, exp.EQ)
            and isinstance(conj.expression, exp.Literal)
            and target(conj.this)
        ):
            values = {conj.expression.to_py()}
        elif (
            isinstance(conj, exp.In)
            and target(conj.this)
            and conj.expressions
            and all(isinstance(e, exp.Literal) for e in conj.expressions)
        ):
            values = {e.to_py() for e in conj.expressions}
        if values is not None:
            pinned = values if pinned is None else pinned & values
    return pinned
