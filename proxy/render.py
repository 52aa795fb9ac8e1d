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


def owned_duckdb_sql(node: exp.Expr) -> str:
    """``node.sql(dialect="duckdb", copy=False)``: for a tree its caller built and never
    reads again (the generator may rewrite it while printing)."""
    return DUCKDB.generate(node, copy=False)
