"""PostgreSQL's and Trino's ``/`` on two integers, kept as integer division.

sqlglot reads ``a / b`` in those dialects as a *typed* division: integer division when
both operands are integers, exact or float division otherwise. Its DuckDB generator
writes DuckDB's ``/``, which always divides as floats: ``WHERE age / 100 = 0`` counted
nobody instead of everyone under 100 (an honest-answers defect: the answer was of
another query, and its cache key was shared with DuckDB's own reading of the text).

Whether an operand is an integer is decided here, after binding, from what the two
dialects agree on: integer columns of the catalog, integer literals and casts, the
arithmetic of integers, COUNT and LENGTH (integers in both), and a float, DECIMAL or AVG
anywhere making a non-integer. Anything else (EXTRACT, which PostgreSQL returns as
NUMERIC and Trino as BIGINT; SUM, whose type follows its argument's width; a date
difference; ``sign``) is refused before any charge with a cast as the hint, rather than
typed by DuckDB's rules, which gave wrong answers (a probe, 2026-12-02). sqlglot's own
type annotation follows DuckDB's or its own return types, not these engines', so it is
not used.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.engines.kinds import choices
from proxy.errors import position_of, unsupported

_INTEGER_NAMES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "HUGEINT"}
    | {"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
)
_INTEGER_TYPES = tuple(exp.DataType.INTEGER_TYPES)
_REAL_TYPES = tuple(exp.DataType.REAL_TYPES)

# Column type ("" when unknown) of a bound query's column.
ColumnType = Callable[[exp.Column], str]


_NARROW = frozenset({"TINYINT", "SMALLINT", "INTEGER", "INT"})


_TRINO_BIGINTS = (
    exp.DateDiff,
    exp.Year,
    exp.Month,
    exp.Day,
    exp.Quarter,
    exp.Week,
    exp.DayOfWeek,
    exp.DayOfYear,
)


def _narrow(node: exp.Expr, column_type: ColumnType) -> bool:
    """An integer expression of 32 bits at most in PostgreSQL: no BIGINT column or cast,
    no literal past 2^31 (its SUM is then a BIGINT, not a NUMERIC)."""
    for sub in node.walk():
        if isinstance(sub, exp.Column) and column_type(sub).upper() not in _NARROW:
            return False
        if isinstance(sub, (exp.Cast, exp.TryCast)) and sub.to.sql(dialect="duckdb").upper() not in _NARROW:
            return False
        if isinstance(sub, exp.Literal) and sub.is_int and abs(int(sub.this)) >= 2**31:
            return False
    return True


def _dated(node: exp.Expr, column_type: ColumnType) -> bool:
    if isinstance(node, exp.Column):
        return column_type(node).upper() == "DATE"
    return isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(exp.DType.DATE)


def _dialect_integer(node: exp.Expr, column_type: ColumnType, dialect: str) -> bool | None:
    """What one dialect's own return types say where the two differ: Trino's EXTRACT,
    date_diff, year() and the like and SUM of integers are BIGINT; PostgreSQL's EXTRACT
    is NUMERIC, its SUM a BIGINT of a narrower integer and a NUMERIC of a BIGINT, and
    its difference of two dates an integer number of days."""
    if isinstance(node, exp.Extract):
        return {"trino": True, "postgres": False}.get(dialect)
    if dialect == "trino" and isinstance(node, _TRINO_BIGINTS):
        return True
    if (
        dialect == "postgres"
        and isinstance(node, exp.Sub)
        and _dated(node.left, column_type)
        and _dated(node.right, column_type)
    ):
        return True
    if isinstance(node, exp.Sum):
        inner = _integer(node.this, column_type, dialect)
        if inner is False:
            # a sum of non-integers is none in either dialect (Metabase's share metric,
            # SUM(CASE WHEN c THEN 1 ELSE 0.0 END) / COUNT(*), was refused)
            return False
        if inner and dialect == "trino":
            return True
        if inner and dialect == "postgres":
            return _narrow(node.this, column_type)
    return None


def _integer(node: exp.Expr, column_type: ColumnType, dialect: str = "") -> bool | None:
    """True: an integer in the request's dialect (PostgreSQL and Trino alike when it is
    not given); False: not an integer; None: not known here, or the dialects differ."""
    found = _dialect_integer(node, column_type, dialect)
    if found is not None:
        return found
    if isinstance(node, (exp.Paren, exp.Neg, exp.Abs)):
        return _integer(node.this, column_type, dialect)
    if isinstance(node, exp.Literal):
        return None if node.is_string else node.is_int
    if isinstance(node, exp.Column):
        kind = column_type(node).upper()
        if kind in _INTEGER_NAMES:
            return True
        if kind.startswith(("DECIMAL", "DOUBLE", "FLOAT", "REAL", "NUMERIC")):
            return False
        return None
    if isinstance(node, (exp.Cast, exp.TryCast)):
        if node.to.is_type(*_INTEGER_TYPES):
            return True
        if node.to.is_type(*_REAL_TYPES):
            return False
        return None
    if isinstance(node, (exp.Count, exp.Length)):
        return True
    if isinstance(node, exp.Avg):
        return False
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.IntDiv, exp.Div)):
        if isinstance(node, exp.Div) and not node.args.get("typed"):
            return False  # an exact or float division already
        parts = [
            _integer(node.left, column_type, dialect),
            _integer(node.right, column_type, dialect),
        ]
        if False in parts:
            return False
        return True if all(parts) else None
    if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Greatest, exp.Least)):
        branches = choices(node)
        kinds = [
            _integer(b, column_type, dialect)
            for b in branches
            if b is not None and not isinstance(b, exp.Null)
        ]
        if False in kinds:
            return False
        return True if kinds and all(kinds) else None
    return None


def resolve(tree: exp.Expr, column_type: ColumnType, dialect: str = "") -> None:
    """Replace, in place, every typed division of the bound ``tree``: by ``IntDiv`` when
    both operands are integers, by an ordinary division when either is not, and refuse
    one whose operand cannot be placed. Reads only the query and the catalog's types;
    a refusal is raised before any charge."""
    typed = [d for d in tree.find_all(exp.Div) if d.args.get("typed")]
    # Deepest first (find_all is breadth first): an outer division sees what its
    # operands became.
    for div in reversed(typed):
        left = _integer(div.left, column_type, dialect)
        right = _integer(div.right, column_type, dialect)
        if left is False or right is False:
            div.set("typed", False)
        elif left and right:
            div.replace(exp.IntDiv(this=div.this, expression=div.expression))
        else:
            raise unsupported(
                "in this dialect '/' divides integers as integers, and whether an operand "
                f"of {div.sql(dialect='duckdb')} is an integer differs between engines or "
                "cannot be known here",
                "cast an operand: CAST(x AS DOUBLE) / y for a fraction, or "
                "CAST(x AS BIGINT) / y for integer division",
                position_of(div),
            )


def on_duckdb(tree: exp.Expr) -> exp.Expr:
    """``tree`` for a statement DuckDB runs as it is (a query over public tables, an
    outer query over a released table): every typed division as DuckDB's ``//``, which
    truncates two integers towards zero and divides two floats exactly as ``/`` does
    (pinned by tests/proxy/test_typed_division.py). A copy when anything changes; the
    tree itself otherwise."""
    if not any(d.args.get("typed") for d in tree.find_all(exp.Div)):
        return tree
    tree = tree.copy()
    for div in reversed([d for d in tree.find_all(exp.Div) if d.args.get("typed")]):
        div.replace(exp.IntDiv(this=div.this, expression=div.expression))
    return tree


def of_known_integers(tree: exp.Expr) -> exp.Expr:
    """``tree`` (a statement of no catalog table: the doors' table-less and catalog
    queries) with every typed division of two operands known to be integers (literals,
    integer casts, their arithmetic) as DuckDB's ``//``: ``SELECT 7/2`` is 3, as in
    PostgreSQL and Trino, where DuckDB's ``/`` gave 3.5 (a probe of the doors,
    2026-12-06). Others stay DuckDB's division: a column's type is not known here. A
    copy when anything changes."""
    typed = [d for d in tree.find_all(exp.Div) if d.args.get("typed")]
    if not typed:
        return tree
    tree = tree.copy()
    for div in reversed([d for d in tree.find_all(exp.Div) if d.args.get("typed")]):
        unknown: ColumnType = lambda _column: ""  # noqa: E731
        if _integer(div.left, unknown) and _integer(div.right, unknown):
            div.replace(exp.IntDiv(this=div.this, expression=div.expression))
    return tree
