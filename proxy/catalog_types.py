"""Key types read from the catalog, for the queries the catalog types completely.

Planning binds the rewritten core in the engine (``DESCRIBE``) before any charge, both to
refuse what the engine cannot bind and to learn the GROUP BY keys' types; on PUMS that
is about an eighth of a miss on new query text. The catalog holds the engine's own
column types (information_schema), so for a query made only of the plainest parts —
one table, keys that are bare columns, filters that compare numbers with numbers or text
with text, COUNT/SUM/AVG of numeric columns — the keys' types are the columns' types and
nothing the analyst wrote can fail to bind. Anything else (a function, a cast, a join, a
subquery, a date, a division, a string in arithmetic, a quantile...) answers None, and
planning binds the core in the engine as before: the refusal before any charge is
unchanged for every query the catalog cannot vouch for.
"""

from __future__ import annotations

import math
from enum import Enum

from sqlglot import exp

from proxy.catalog import TableInfo
from proxy.shape import AVG, COUNT, COUNT_ROWS, SUM, Shape

# Column types whose values compare and add as numbers in every context of the core.
_NUMBERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE"})
# Key column types the released table carries as they are (DESCRIBE names them the same).
_KEY_TYPES = _NUMBERS - {"FLOAT", "DOUBLE"} | {"VARCHAR", "BOOLEAN", "DATE"}
_KINDS = frozenset({COUNT_ROWS, COUNT, SUM, AVG})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_LONGEST_LITERAL = 18  # digits: an exact BIGINT or DOUBLE literal, never HUGEINT
# Every node the query may hold at all (the select list's arithmetic over aggregates,
# HAVING and ORDER BY run in the outer layer, which is validated on a stand-in row of the
# released table either way). Anything else, anywhere: bind the core in the engine.
_NODES = (
    exp.Select,
    exp.From,
    exp.Table,
    exp.TableAlias,
    exp.Identifier,
    exp.Column,
    exp.Alias,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Literal,
    exp.Paren,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    *_COMPARISONS,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Between,
    exp.In,
    exp.Is,
    exp.Null,
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Star,
)


class Kind(Enum):
    """What an expression of the plain subset evaluates to."""

    NUMBER = "number"
    TEXT = "text"
    TRUTH = "truth"


def key_types(shape: Shape) -> tuple[str, ...] | None:
    """The keys' engine types when the catalog types the whole query (then the core
    binds for certain), else None: bind the core in the engine."""
    select = shape.select
    if len(shape.tables) != 1 or shape.key_release:
        return None
    if any(select.args.get(part) for part in ("joins", "with_", "qualify", "distinct")):
        return None
    if not all(type(node) in _NODES for node in select.walk()):
        return None
    ((alias, table),) = shape.tables.items()
    types = []
    for key in shape.keys:
        type_ = _column_type(key, alias, table)
        if type_ is None or type_ not in _KEY_TYPES:
            return None
        types.append(type_)
    for call in shape.aggregates:
        if call.kind not in _KINDS:
            return None
        if call.arg is None:
            if call.kind != COUNT_ROWS:
                return None
        elif _kind(call.arg, alias, table) is not Kind.NUMBER:
            return None
    where = select.args.get("where")
    if where is not None and _kind(where.this, alias, table) is not Kind.TRUTH:
        return None
    return tuple(types)


def _column_type(node: exp.Expr | None, alias: str, table: TableInfo) -> str | None:
    """The engine type of a column of the query's one table (None if not one)."""
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    if node.table != alias or node.args.get("db") or node.args.get("catalog"):
        return None
    type_ = table.column_types.get(node.name.lower())
    return None if type_ is None else type_.upper()


def _number_literal(node: exp.Literal) -> bool:
    text = node.this
    if len(text) > _LONGEST_LITERAL:
        return False
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _kind(node: exp.Expr | None, alias: str, table: TableInfo) -> Kind | None:
    """The node's kind if every part of it is in the plain subset, else None."""
    if isinstance(node, exp.Paren):
        return _kind(node.this, alias, table)
    if isinstance(node, exp.Column):
        type_ = _column_type(node, alias, table)
        if type_ in _NUMBERS:
            return Kind.NUMBER
        return Kind.TEXT if type_ == "VARCHAR" else None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return Kind.TEXT
        return Kind.NUMBER if _number_literal(node) else None
    if isinstance(node, exp.Neg):
        return Kind.NUMBER if _kind(node.this, alias, table) is Kind.NUMBER else None
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        both = (_kind(node.this, alias, table), _kind(node.expression, alias, table))
        return Kind.NUMBER if both == (Kind.NUMBER, Kind.NUMBER) else None
    if isinstance(node, _COMPARISONS):
        left, right = _kind(node.this, alias, table), _kind(node.expression, alias, table)
        return Kind.TRUTH if left is not None and left is right and left is not Kind.TRUTH else None
    if isinstance(node, (exp.And, exp.Or)):
        both = (_kind(node.this, alias, table), _kind(node.expression, alias, table))
        return Kind.TRUTH if both == (Kind.TRUTH, Kind.TRUTH) else None
    if isinstance(node, exp.Not):
        return Kind.TRUTH if _kind(node.this, alias, table) is Kind.TRUTH else None
    if isinstance(node, exp.Between):
        kinds = {_kind(node.args.get(k), alias, table) for k in ("this", "low", "high")}
        return Kind.TRUTH if kinds == {Kind.NUMBER} else None
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            return None
        this = _kind(node.this, alias, table)
        items = node.expressions
        ok = (
            this in (Kind.NUMBER, Kind.TEXT)
            and items
            and all(isinstance(i, exp.Literal) and _kind(i, alias, table) is this for i in items)
        )
        return Kind.TRUTH if ok else None
    if isinstance(node, exp.Is):
        plain = isinstance(node.expression, exp.Null) and _kind(node.this, alias, table) in (
            Kind.NUMBER,
            Kind.TEXT,
        )
        return Kind.TRUTH if plain else None
    return None
