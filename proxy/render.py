"""DuckDB text of a subtree, without the generator's defensive copy when it is not needed.

``node.sql()`` deep-copies the subtree first, because some DuckDB handlers rewrite the
nodes they print (e.g. ``DataType``: DuckDB's ``datatype_sql`` drops parameters in
place). Planning renders small pieces of a tree that is read again later (keys,
aggregate calls, select items), and that copy was most of each render's cost on a cache
miss (issue 18). Here a subtree made only of node types whose DuckDB handler is known to
print without writing — the base generator's own methods, DuckDB's ``rename_func`` and
the generic function fallback, checked in tests/proxy/test_render.py against the
installed sqlglot — is printed in place; anything else is copied as before. The text is
the same either way.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

# dpsql's handlers in sqlglot's DuckDB generator (imported for that effect): every DuckDB
# text dpsql prints goes through them.
from proxy import duckdb_dialect  # noqa: F401

# One shared instance: ``sql(dialect="duckdb")`` builds a new dialect object from the name
# on every call, and a dialect holds only settings fixed at construction.
DUCKDB = Dialect.get_or_raise("duckdb")

# Node types printed by a handler that only reads its node (see the module docstring);
# tests/proxy/test_render.py fails if sqlglot's DuckDB generator starts handling one of
# them differently.
READ_ONLY_TYPES: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Column,
        exp.Identifier,
        exp.Literal,
        exp.Star,
        exp.Alias,
        exp.Paren,
        exp.Count,
        exp.Sum,
        exp.Avg,
        exp.Min,
        exp.Max,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.And,
        exp.Or,
        exp.Not,
        exp.Is,
        exp.Null,
        exp.Boolean,
        exp.Case,
        exp.If,
        exp.Add,
        exp.Sub,
        exp.Mul,
    }
)


def duckdb_sql(node: exp.Expr) -> str:
    """``node.sql(dialect="duckdb")``, copying the subtree only when some node in it may
    be rewritten while printed. The tree is never changed."""
    copy = any(type(n) not in READ_ONLY_TYPES for n in node.walk())
    return DUCKDB.generate(node, copy=copy)


def output_name(item: exp.Expr) -> str:
    """The name a select-list item's column is answered under: its alias, a column's
    own name, else its DuckDB text."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return duckdb_sql(item)


def owned_duckdb_sql(node: exp.Expr) -> str:
    """``node.sql(dialect="duckdb", copy=False)``: for a tree its caller built and never
    reads again (the generator may rewrite it while printing)."""
    return DUCKDB.generate(node, copy=False)


class KeyTexts:
    """The GROUP BY keys' texts, and which nodes of the outer layer could print as one.

    The outer layer (select list, HAVING, ORDER BY) matches a key by its text, and
    printing every node of a nested expression to compare it is quadratic in the depth
    (a probe, 2026-12-04: 480 nested ``COUNT(*) / 2`` in HAVING, 1,440 nodes, took 18 s
    to check). A node prints as a key only if it has as many nodes as that key (both are
    parsed from the same query in the same dialect): nodes of one size never hold one
    another, so printing only those prints each node of a clause at most once a key size.

    The checker (proxy/check.py) and the outer layer (proxy/outer.py) ask the same
    question, so they agree on which nodes are keys."""

    def __init__(self, keys: tuple[exp.Expr, ...], texts: tuple[str, ...]) -> None:
        self.texts = frozenset(texts)
        self._sizes = frozenset(_size(k) for k in keys)
        # the size of each node seen, computed a whole subtree at a time (asked top
        # down, every node of a clause is counted once); entries hold their node
        self._known: dict[int, tuple[exp.Expr, int]] = {}

    def could_be(self, node: exp.Expr) -> bool:
        """Whether ``node`` could print as one of the keys (printing it tells)."""
        if not self.texts:
            return False
        found = self._known.get(id(node))
        if found is None or found[0] is not node:
            for below in reversed(list(node.walk())):
                size = 1 + sum(self._known[id(c)][1] for c in below.iter_expressions())
                self._known[id(below)] = (below, size)
            found = self._known[id(node)]
        return found[1] in self._sizes


def _size(node: exp.Expr) -> int:
    return sum(1 for _ in node.walk())
