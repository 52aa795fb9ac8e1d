"""Every SQL text dpsql runs must mean the tree it was printed from.

sqlglot prints a tree as written: a ``Not`` over an ``Or`` built without a ``Paren``
between them prints as ``NOT a OR b``, which DuckDB reads as ``(NOT a) OR b``. The parser
puts a ``Paren`` wherever the text had parentheses, and sqlglot's builders (``exp.not_``,
``exp.and_``) add one where needed, but a tree rebuilt from parts with the node classes
themselves can lose one (semijoins.normalize did, 2026-12-05: ``NOT (age < 30 OR sex =
1)`` counted 883 people where the filter keeps 369).

:func:`operator_edges` lists, for each operator node (arithmetic, comparison, AND/OR,
NOT, unary minus, BETWEEN, IN, IS), which operator sits directly under it and in which
argument. A text whose parse has an operator directly under another, without
parentheses, where the tree has no such pair groups the operators differently: a wrong
answer, whatever the data (:func:`regrouped`). The tests' conftest checks every core and
outer-layer text the engine prints in the test process (:class:`RenderCheck`): the
DuckDB core, the rows-first L0 cut, the outer layer, and the PostgreSQL and Spark texts
the engine renderer prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import sqlglot
from sqlglot import exp

OPERATORS: tuple[type[exp.Expr], ...] = (
    exp.Binary,  # arithmetic, comparisons, AND / OR (Connector), LIKE, ...
    exp.Not,
    exp.Neg,
    exp.BitwiseNot,
    exp.Between,
    exp.In,
    exp.Is,
)


def _unwrapped(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _operator(node: exp.Expr) -> bool:
    # A negative number is a literal, whether the tree holds Literal('-1') or, as the
    # parser builds it, a minus over Literal('1'). A field access (``o.f``, a Dot when
    # parsed in a lambda, a Column in the tree) binds tighter than any operator.
    return (
        isinstance(node, OPERATORS)
        and not isinstance(node, exp.Dot)
        and not (isinstance(node, exp.Neg) and isinstance(_unwrapped(node.this), exp.Literal))
    )


def operator_edges(tree: exp.Expr, *, through_parentheses: bool = True) -> list[tuple[str, str, str]]:
    """(parent operator, argument, child operator) for every operator directly under
    another, sorted; with ``through_parentheses`` a child in parentheses counts too
    (looked through), else only a bare one."""
    out: list[tuple[str, str, str]] = []
    for node in tree.walk():
        if isinstance(node, exp.Paren) or not _operator(node):
            continue
        for child in node.iter_expressions():
            if isinstance(child, exp.Paren) and not through_parentheses:
                continue
            inner = _unwrapped(child)
            if _operator(inner):
                out.append((type(node).__name__, str(child.arg_key), type(inner).__name__))
    return sorted(out)


def regrouped(tree: exp.Expr, text: str, dialect: str = "duckdb") -> bool:
    """Whether ``text`` (printed from ``tree``) groups its operators differently: its
    parse has an operator directly under another, without parentheses, where the tree
    has no such pair. (Parentheses in the text make its grouping explicit, and some
    function nodes print as operators inside them, ``DATE_ADD`` as ``(ts + INTERVAL
    ...)``: those pairs are not compared.)"""
    printed = Counter(
        operator_edges(sqlglot.parse_one(text, dialect=dialect), through_parentheses=False)
    )
    return bool(printed - Counter(operator_edges(tree)))


class RenderCheck:
    """Wraps a printing function (tree -> text): records each text that regroups its
    tree's operators. The tree is copied before printing, since the printers may rewrite
    what they print."""

    def __init__(self) -> None:
        self.regrouped: list[str] = []

    def wrap(self, render: Callable[[exp.Expr], str]) -> Callable[[exp.Expr], str]:
        def checked(tree: exp.Expr) -> str:
            before = tree.copy()
            text = render(tree)
            if regrouped(before, text):
                self.regrouped.append(text)
            return text

        return checked

    def wrap_dialect(
        self, render: Callable[[exp.Expr, str], str]
    ) -> Callable[[exp.Expr, str], str]:
        """As :meth:`wrap`, for a printer of another engine's dialect (PostgreSQL,
        Spark): the text is parsed back in that dialect."""

        def checked(tree: exp.Expr, dialect: str) -> str:
            before = tree.copy()
            text = render(tree, dialect)
            if regrouped(before, text, dialect):
                self.regrouped.append(text)
            return text

        return checked
