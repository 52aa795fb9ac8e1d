"""PostgreSQL's and Trino's ``/`` on two integers, kept as integer division.

sqlglot reads ``a / b`` in those dialects as a *typed* division: integer division when
both operands are integers, float division otherwise. Its DuckDB generator can honour
that only when it knows the operands' types, and without them it writes DuckDB's ``/``,
which always divides as floats: ``WHERE age / 100 = 0`` counted nobody instead of
everyone under 100 (an honest-answers defect: the answer was of another query, and its
cache key was shared with DuckDB's own reading of the text).

After the query is qualified, its columns' types are the catalog's; sqlglot's type
annotation then types each operand, and each typed division becomes what it means:
``IntDiv`` (DuckDB's ``//``, which truncates towards zero like PostgreSQL and Trino) for
two integers, an ordinary division otherwise. An operand whose type cannot be known is
refused before any charge rather than guessed.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.schema import Schema

from proxy.errors import position_of, unsupported

_UNKNOWN = (exp.DType.UNKNOWN, exp.DType.NULL)


def _integer(node: exp.Expr) -> bool | None:
    """True for an integer type, False for another known type, None when unknown."""
    kind = node.type
    if kind is None or kind.is_type(*_UNKNOWN):
        return None
    return kind.is_type(*exp.DataType.INTEGER_TYPES)


def resolve(tree: exp.Expr, schema: Schema) -> None:
    """Replace, in place, every typed division of the qualified ``tree`` by an integer
    or a float division, by its operands' types under ``schema``. Reads only the query
    and the catalog's types; a refusal is raised before any charge."""
    typed = [d for d in tree.find_all(exp.Div) if d.args.get("typed")]
    if not typed:
        return
    # Annotated on a copy, whose nodes walk in the same order: the tree itself keeps no
    # types for later steps to trust after they rewrite it.
    copy = tree.copy()
    annotate_types(copy, schema=schema, dialect="duckdb")
    kinds: dict[int, tuple[bool | None, bool | None]] = {}
    for original, annotated in zip(tree.walk(), copy.walk(), strict=True):
        if isinstance(original, exp.Div) and original.args.get("typed"):
            assert isinstance(annotated, exp.Div)
            kinds[id(original)] = (_integer(annotated.left), _integer(annotated.right))
    # Deepest first (find_all is breadth first), so an outer division's operands are
    # still the nodes its kinds were read from when it is replaced.
    for div in reversed(typed):
        left, right = kinds[id(div)]
        if left is None or right is None:
            raise unsupported(
                "in this dialect '/' divides integers as integers, and the type of an "
                f"operand of {div.sql(dialect='duckdb')} cannot be known here",
                "cast an operand: CAST(x AS DOUBLE) / y for a fraction, or "
                "CAST(x AS BIGINT) / y for integer division",
                position_of(div),
            )
        if left and right:
            div.replace(exp.IntDiv(this=div.this, expression=div.expression))
        else:
            div.set("typed", False)


def on_duckdb(tree: exp.Expr) -> exp.Expr:
    """``tree`` for a statement DuckDB runs as it is (a query over public tables, an
    outer query over a released table): every typed division as DuckDB's ``//``, which
    truncates two integers towards zero and divides anything else exactly as ``/`` does
    (pinned by tests/proxy/test_typed_division.py), so no types are needed. A copy when
    anything changes; the tree itself otherwise."""
    if not any(d.args.get("typed") for d in tree.find_all(exp.Div)):
        return tree
    tree = tree.copy()
    for div in reversed([d for d in tree.find_all(exp.Div) if d.args.get("typed")]):
        div.replace(exp.IntDiv(this=div.this, expression=div.expression))
    return tree
