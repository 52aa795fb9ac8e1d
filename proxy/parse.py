"""SQL text to one sqlglot statement, within size limits, in any supported dialect."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from proxy import dialect_dates, spellings
from proxy.dropped_arguments import check_arguments
from proxy.errors import DPSQLError
from proxy.repeated_operands import check_repeated_operands

DIALECTS = ("duckdb", "postgres", "bigquery", "trino", "snowflake")

# The keys sqlglot's parser records a node's place in the text under (meta).
POSITION_KEYS = ("line", "col", "start", "end")


def _position(error: ParseError) -> dict[str, int] | None:
    for detail in error.errors:
        line, col = detail.get("line"), detail.get("col")
        if isinstance(line, int) and isinstance(col, int):
            return {"line": line, "column": col}
    return None


def parse(sql: str, dialect: str = "duckdb", *, max_length: int, max_nodes: int) -> exp.Expr:
    """Parse exactly one statement; refuse empty input, several statements, or oversize SQL.
    T-SQL's ``SELECT TOP n`` is read as ``LIMIT n`` in every dialect (proxy/spellings.py)."""
    if dialect not in DIALECTS:
        raise DPSQLError(
            "bad_request",
            f"unknown SQL dialect {dialect!r}",
            f"use one of: {', '.join(DIALECTS)}",
        )
    if len(sql) > max_length:
        raise DPSQLError(
            "too_large",
            f"the SQL text is {len(sql)} characters long; the limit is {max_length}",
            "send a shorter query",
        )
    sql, top = spellings.strip_top(sql, dialect)
    try:
        reader = dialect_dates.reader(dialect)
        tokens = reader.tokenize(sql)
        statements = [s for s in reader.parser().parse(tokens, sql) if s is not None]
    except ParseError as error:
        first = error.errors[0]["description"] if error.errors else str(error)
        raise DPSQLError(
            "parse_error",
            f"could not parse the SQL: {first}",
            f"check the syntax near the position given ({dialect} dialect)",
            _position(error),
        ) from None
    except (TokenError, RecursionError, ValueError) as error:
        raise DPSQLError(
            "parse_error",
            f"could not parse the SQL: {type(error).__name__}",
            "check quotes, brackets and comments",
        ) from None
    if not statements:
        raise DPSQLError("parse_error", "no SQL statement was given", "send one SELECT query")
    if len(statements) > 1:
        raise DPSQLError(
            "unsupported_sql",
            f"{len(statements)} statements were sent; dpsql answers exactly one",
            "send one SELECT per request",
        )
    check_arguments(tokens, statements[0], dialect)
    tree = statements[0] if top is None else spellings.apply_top(statements[0], top)
    tree = dialect_dates.respell(tree, dialect)
    for nodes, _ in enumerate(tree.walk(), start=1):
        if nodes > max_nodes:
            raise DPSQLError(
                "too_large",
                f"the query has more than {max_nodes} syntax nodes",
                "simplify the query or split it",
            )
    check_repeated_operands(tree)
    return tree


def forget_positions(tree: exp.Expr) -> None:
    """Drop the parser's text positions from every node of ``tree`` (in place), keeping
    any other meta sqlglot set. Positions only place a refusal in the text; once a tree
    is checked, none is raised from it, and each later copy of a node would deep-copy
    its position dict with Python's copy module (more than half of a parsed tree's copy
    time, and the rewrite copies subtrees of the checked query a few dozen times)."""
    for node in tree.walk():
        meta = node._meta
        if meta:
            for key in POSITION_KEYS:
                meta.pop(key, None)
        if meta is not None and not meta:
            node._meta = None
