"""The commonest outer layers answered without DuckDB, where the answer is provably the
one DuckDB gives.

Every miss post-processes its release with the outer layer (proxy/outer.py) in the
post-processing DuckDB (proxy/release.py): about 1 ms even for two rows (registering the
Arrow table, then binding and planning the statement). Most outer layers are only what
dpsql itself writes for plain aggregates, so this module answers those in Python:

* a bare released column (a key, a SUM, a hidden part), or a rename of one;
* ``GREATEST(c, 0)``: a released count shown as at least 0 (``outer._count``);
* ``TRY(LEAST(GREATEST(centre + (s / GREATEST(n, 1)), lower), upper))``: an AVG
  (``outer._post_expression``);

and no WHERE, HAVING, GROUP BY, ORDER BY, LIMIT, OFFSET, DISTINCT, window or join. Any
other outer layer, or an input outside the cases below, returns None: the caller then
runs DuckDB as before.

Why the answers are DuckDB's own, value for value and type for type:

* Rows: a projection over one Arrow table scanned by one thread keeps the table's order
  (the post-processing DuckDB runs with ``threads = 1``); here, the same order.
* Bare columns: only Arrow types whose values DuckDB returns as the Python objects
  ``pyarrow`` gives (64-bit integers, doubles, text, booleans, dates, and timestamps in
  microseconds without a time zone: a daily or monthly key; NULL as None). A date or
  timestamp past Python's range raises in ``pyarrow`` (DuckDB gives text): DuckDB
  answers that table.
* ``GREATEST(c, 0)`` over a BIGINT column without NULLs is ``max(c, 0)``, an int.
* The AVG form over a DOUBLE (or BIGINT, below 2^53) sum ``s`` and a BIGINT count ``n``
  without NULLs: DuckDB types it DOUBLE (the literals are DECIMALs cast to DOUBLE,
  ``s / BIGINT`` is a DOUBLE division) and computes IEEE double operations, as Python
  does. Each literal's DOUBLE value is asked of DuckDB once (``literal``), not read by
  Python. Where any step is not finite (infinities and NaN are not reasoned about
  here) or a comparison ties between zeros of different signs, the table goes to
  DuckDB.

tests/proxy/test_outer_direct.py compares both on every golden fixture's outer layer
and on random and edge-case released tables, value, type and sign alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

# Arrow types whose values DuckDB fetches as the Python objects pyarrow gives.
_BARE_TYPES = (
    pa.int64(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.bool_(),
    pa.date32(),
    pa.timestamp("us"),
)
_EXACT_INT = 2**53  # integers a double holds exactly


@dataclass(frozen=True)
class Bare:
    column: str


@dataclass(frozen=True)
class ShownCount:
    """``GREATEST(column, 0)``."""

    column: str


@dataclass(frozen=True)
class Mean:
    """``TRY(LEAST(GREATEST(centre + (total / GREATEST(count, 1)), lower), upper))``,
    the literals as DuckDB's DOUBLE values."""

    centre: float
    total: str
    count: str
    lower: float
    upper: float


Item = Bare | ShownCount | Mean


class _Fallback(Exception):
    """This table is not answered here: DuckDB answers it."""


def _column(node: exp.Expr) -> str:
    if isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier):
        return node.name
    raise _Fallback


def _literal(node: exp.Expr, literal: Callable[[str], float]) -> float:
    """A numeric literal (under at most one minus) as DuckDB's DOUBLE."""
    inner = node.this if isinstance(node, exp.Neg) else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string):
        raise _Fallback
    value = literal(node.sql(dialect="duckdb"))
    if not math.isfinite(value):
        raise _Fallback
    return value


def _greatest_with(node: exp.Expr) -> tuple[exp.Expr, exp.Expr]:
    if isinstance(node, exp.Greatest) and len(node.expressions) == 1:
        return node.this, node.expressions[0]
    raise _Fallback


def _least_with(node: exp.Expr) -> tuple[exp.Expr, exp.Expr]:
    if isinstance(node, exp.Least) and len(node.expressions) == 1:
        return node.this, node.expressions[0]
    raise _Fallback


def _is_int(node: exp.Expr, value: int) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string and node.this == str(value)


def _item(node: exp.Expr, literal: Callable[[str], float]) -> Item:
    if isinstance(node, exp.Column):
        return Bare(_column(node))
    if isinstance(node, exp.Greatest):
        this, other = _greatest_with(node)
        if _is_int(other, 0):
            return ShownCount(_column(this))
        raise _Fallback
    if isinstance(node, exp.Try):
        clamped, upper = _least_with(node.this)
        mean, lower = _greatest_with(clamped)
        if not isinstance(mean, exp.Add) or not isinstance(mean.expression, exp.Paren):
            raise _Fallback
        div = mean.expression.this
        if not isinstance(div, exp.Div) or div.args.get("typed") or div.args.get("safe"):
            raise _Fallback
        count, one = _greatest_with(div.expression)
        if not _is_int(one, 1):
            raise _Fallback
        return Mean(
            _literal(mean.this, literal),
            _column(div.this),
            _column(count),
            _literal(lower, literal),
            _literal(upper, literal),
        )
    raise _Fallback


@dataclass(frozen=True)
class DirectOuter:
    """An outer layer of the forms above: output names and one item per output."""

    names: tuple[str, ...]
    items: tuple[Item, ...]

    def run(self, table: pa.Table) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """The outer layer's answer over ``table`` (as PostProcessor.run gives it), or
        None when this table must go to DuckDB."""
        try:
            columns = [self._values(item, table) for item in self.items]
        except (_Fallback, ValueError, OverflowError):
            # (A value Python cannot hold, e.g. a date past year 9999: DuckDB answers it,
            # as text, so it goes there.)
            return None
        return list(self.names), list(zip(*columns, strict=True)) if columns else []

    @staticmethod
    def _values(item: Item, table: pa.Table) -> list[Any]:
        if isinstance(item, Bare):
            return _typed(table, item.column, _BARE_TYPES).to_pylist()
        if isinstance(item, ShownCount):
            return [max(v, 0) for v in _numbers(table, item.column, (pa.int64(),))]
        return _means(item, table)


def _typed(table: pa.Table, name: str, types: tuple[pa.DataType, ...]) -> pa.ChunkedArray:
    if name not in table.column_names or table.column_names.count(name) != 1:
        raise _Fallback
    column = table.column(name)
    if column.type not in types:
        raise _Fallback
    return column


def _numbers(table: pa.Table, name: str, types: tuple[pa.DataType, ...]) -> list[Any]:
    column = _typed(table, name, types)
    if column.null_count:
        raise _Fallback
    return column.to_pylist()


def _max(a: float, b: float) -> float:
    """DuckDB's GREATEST of two finite doubles (ties between ±0 go to DuckDB)."""
    if a == b and math.copysign(1.0, a) != math.copysign(1.0, b):
        raise _Fallback
    return a if a >= b else b


def _min(a: float, b: float) -> float:
    if a == b and math.copysign(1.0, a) != math.copysign(1.0, b):
        raise _Fallback
    return a if a <= b else b


def _means(item: Mean, table: pa.Table) -> list[float]:
    totals = _numbers(table, item.total, (pa.float64(), pa.int64()))
    counts = _numbers(table, item.count, (pa.int64(),))
    out = []
    for s, n in zip(totals, counts, strict=True):
        if isinstance(s, int) and abs(s) >= _EXACT_INT:
            raise _Fallback  # DuckDB's cast to DOUBLE rounds: not reproduced here
        if abs(n) >= _EXACT_INT:
            raise _Fallback
        s = float(s)
        if not math.isfinite(s):
            raise _Fallback
        mean = item.centre + s / float(max(n, 1))
        if not math.isfinite(mean):
            raise _Fallback
        out.append(_min(_max(mean, item.lower), item.upper))
    return out


def compile_outer(outer_sql: str, literal: Callable[[str], float]) -> DirectOuter | None:
    """The outer layer as a :class:`DirectOuter` when it has only the forms above, else
    None. ``literal`` gives DuckDB's DOUBLE value of a numeric literal's text."""
    try:
        tree = sqlglot.parse_one(outer_sql, read="duckdb")
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Select):
        return None
    allowed = {"expressions", "from_"}
    if any(v for k, v in tree.args.items() if k not in allowed and v not in (None, [], False)):
        return None
    source = tree.args.get("from_")
    table = source.this if isinstance(source, exp.From) else None
    if not (
        isinstance(table, exp.Table)
        and table.name == "released"
        and not table.args.get("db")
        and not table.args.get("catalog")
        and not table.alias
    ):
        return None
    names = []
    items = []
    try:
        for node in tree.expressions:
            if isinstance(node, exp.Alias):
                names.append(node.alias)
                items.append(_item(node.this, literal))
            elif isinstance(node, exp.Column):
                names.append(_column(node))
                items.append(Bare(node.name))
            else:
                return None
    except _Fallback:
        return None
    if len({n.lower() for n in names}) != len(names):
        return None  # DuckDB's naming of repeated outputs is not reproduced here
    return DirectOuter(tuple(names), tuple(items))
