"""Statements that are not plain queries: session, prepared statements and SHOW.

Trino clients send a handful of commands besides SELECT: ``SET/RESET SESSION``, ``USE``,
``PREPARE``/``EXECUTE``/``DEALLOCATE PREPARE``, ``EXECUTE IMMEDIATE '…' USING …`` (how
the ``trino`` client binds parameters), and the ``SHOW``/``DESCRIBE`` family. Each is
recognised here; the SHOW family is turned into ordinary SQL over
``information_schema``, which the shadow catalog answers like any catalog query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from proxy.errors import DPSQLError


class Kind(Enum):
    QUERY = "query"
    SET_SESSION = "SET SESSION"
    RESET_SESSION = "RESET SESSION"
    SHOW_SESSION = "SHOW SESSION"
    PREPARE = "PREPARE"
    EXECUTE = "EXECUTE"
    EXECUTE_IMMEDIATE = "EXECUTE IMMEDIATE"
    DEALLOCATE = "DEALLOCATE"
    USE = "USE"
    SHOW_CATALOGS = "SHOW CATALOGS"
    SHOW_SCHEMAS = "SHOW SCHEMAS"
    SHOW_TABLES = "SHOW TABLES"
    SHOW_COLUMNS = "SHOW COLUMNS"
    SHOW_CREATE_TABLE = "SHOW CREATE TABLE"
    SHOW_FUNCTIONS = "SHOW FUNCTIONS"
    TRANSACTION = "TRANSACTION"


@dataclass(frozen=True)
class Statement:
    kind: Kind
    text: str  # the whole statement, without a trailing semicolon
    name: str = ""  # property, prepared statement, table or schema named by it
    body: str = ""  # SET SESSION value, PREPARE/EXECUTE IMMEDIATE SQL, or a LIKE clause
    using: str = ""  # the USING list of EXECUTE


_F = re.IGNORECASE | re.DOTALL
_LIKE = r"(?:\s+(LIKE\s+.+))?"
_PATTERNS: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    (Kind.SET_SESSION, re.compile(r"SET\s+SESSION\s+([\w.]+)\s*=\s*(.+)", _F)),
    (Kind.RESET_SESSION, re.compile(r"RESET\s+SESSION\s+([\w.]+)", _F)),
    (Kind.SHOW_SESSION, re.compile(r"SHOW\s+SESSION()" + _LIKE, _F)),
    (Kind.PREPARE, re.compile(r"PREPARE\s+(\w+)\s+FROM\s+(.+)", _F)),
    (
        Kind.EXECUTE_IMMEDIATE,
        re.compile(r"EXECUTE\s+IMMEDIATE\s+('(?:[^']|'')*')(?:\s+USING\s+(.+))?", _F),
    ),
    (Kind.EXECUTE, re.compile(r"EXECUTE\s+(\w+)(?:\s+USING\s+(.+))?", _F)),
    (Kind.DEALLOCATE, re.compile(r"DEALLOCATE\s+PREPARE\s+(\w+)", _F)),
    (Kind.USE, re.compile(r"USE\s+(\S+)", _F)),
    (Kind.SHOW_CATALOGS, re.compile(r"SHOW\s+CATALOGS()" + _LIKE, _F)),
    (Kind.SHOW_SCHEMAS, re.compile(r"SHOW\s+SCHEMAS(?:\s+(?:FROM|IN)\s+(\S+))?" + _LIKE, _F)),
    (Kind.SHOW_TABLES, re.compile(r"SHOW\s+TABLES(?:\s+(?:FROM|IN)\s+(\S+))?" + _LIKE, _F)),
    (Kind.SHOW_COLUMNS, re.compile(r"SHOW\s+COLUMNS\s+(?:FROM|IN)\s+(\S+)" + _LIKE, _F)),
    (Kind.SHOW_COLUMNS, re.compile(r"(?:DESCRIBE|DESC)\s+(?!INPUT\b|OUTPUT\b)(\S+)()", _F)),
    (Kind.SHOW_CREATE_TABLE, re.compile(r"SHOW\s+CREATE\s+TABLE\s+(\S+)()", _F)),
    (Kind.SHOW_FUNCTIONS, re.compile(r"SHOW\s+FUNCTIONS()" + _LIKE, _F)),
    (Kind.TRANSACTION, re.compile(r"(START\s+TRANSACTION|COMMIT|ROLLBACK)\b.*()", _F)),
)


# Every pattern above starts with one of these words (compared as the patterns compare
# them): a statement that does not is a query without trying each pattern.
_COMMAND_START = re.compile(
    r"SET|RESET|SHOW|PREPARE|EXECUTE|DEALLOCATE|USE|DESC|START|COMMIT|ROLLBACK", _F
)


def classify(text: str) -> Statement:
    """What kind of statement ``text`` is (a query unless it matches a command)."""
    stripped = text.strip().rstrip(";").strip()
    if _COMMAND_START.match(stripped) is None:
        return Statement(Kind.QUERY, stripped)
    for kind, pattern in _PATTERNS:
        match = pattern.fullmatch(stripped)
        if match is None:
            continue
        groups = [g or "" for g in match.groups()]
        if kind in (Kind.EXECUTE, Kind.EXECUTE_IMMEDIATE):
            return Statement(kind, stripped, name=groups[0], using=groups[1])
        return Statement(kind, stripped, name=groups[0], body=groups[1] if len(groups) > 1 else "")
    return Statement(Kind.QUERY, stripped)


def unquote(literal: str) -> str:
    """The text of a single-quoted SQL string literal."""
    return literal[1:-1].replace("''", "'")


_PARAMETER_NODES = (exp.Literal, exp.Boolean, exp.Null, exp.Neg, exp.Cast, exp.DataType)


def parameters(using: str) -> list[exp.Expr]:
    """The values of ``USING a, b, ...``: literals only (a typed literal such as
    ``DATE '2024-01-01'`` or ``DOUBLE '1.5'`` is a cast of one)."""
    if not using.strip():
        return []
    try:
        select = sqlglot.parse_one(f"SELECT {using}", read="trino")
    except (ParseError, TokenError):
        raise _bad_parameters(using) from None
    extra = [k for k, v in select.args.items() if k != "expressions" and v not in (None, [])]
    if not isinstance(select, exp.Select) or extra:
        raise _bad_parameters(using)
    values = list(select.expressions)
    for value in values:
        for node in value.walk():
            if not isinstance(node, (*_PARAMETER_NODES, exp.DataTypeParam)):
                raise _bad_parameters(using)
    return values


def _bad_parameters(using: str) -> DPSQLError:
    return DPSQLError(
        "bad_request",
        f"the USING list must hold literals only: {using[:80]!r}",
        "bind values such as 'text', 42, DATE '2024-01-01'",
    )


def bind_parameters(tree: exp.Expr, values: list[exp.Expr]) -> exp.Expr:
    """``tree`` with its ``?`` placeholders replaced by ``values``, in order."""
    # Depth-first, children in argument order: the order the ? appear in the text.
    holes = list(tree.find_all(exp.Placeholder, bfs=False))
    if len(holes) != len(values):
        raise DPSQLError(
            "bad_request",
            f"the statement has {len(holes)} parameters but {len(values)} values were given",
            "pass one value per ?",
        )
    for hole, value in zip(holes, values, strict=True):
        hole.replace(value.copy())
    return tree


def table_parts(name: str, *, catalog: str, schema: str) -> tuple[str, str, str]:
    """(catalog, schema, table) of a possibly qualified Trino table name."""
    try:
        table = exp.to_table(name, dialect="trino")
    except (ParseError, TokenError, ValueError):
        raise DPSQLError("parse_error", f"not a table name: {name[:80]!r}", "") from None
    return (
        (table.catalog or catalog).lower(),
        (table.db or schema).lower(),
        table.name.lower(),
    )


def schema_parts(name: str, *, catalog: str) -> tuple[str, str]:
    """(catalog, schema) of ``schema`` or ``catalog.schema``."""
    parts = [p.strip('"').lower() for p in name.split(".")]
    if len(parts) == 1:
        return catalog.lower(), parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise DPSQLError("parse_error", f"not a schema name: {name[:80]!r}", "write catalog.schema")


def _literal(text: str) -> str:
    return exp.Literal.string(text).sql(dialect="trino")


def _ident(text: str) -> str:
    return exp.to_identifier(text, quoted=True).sql(dialect="trino")


def show_sql(statement: Statement, *, catalog: str, schema: str) -> str:
    """The information_schema query a SHOW statement stands for (LIKE kept verbatim:
    it is parsed with the rest and runs on the data-free shadow only)."""
    like = statement.body
    kind = statement.kind
    if kind is Kind.SHOW_CATALOGS:
        where = f" WHERE catalog_name {like}" if like else ""
        return f'SELECT catalog_name AS "Catalog" FROM system.metadata.catalogs{where} ORDER BY 1'
    if kind is Kind.SHOW_SCHEMAS:
        cat = statement.name.strip('"').lower() if statement.name else catalog
        where = f" WHERE schema_name {like}" if like else ""
        return (
            f'SELECT schema_name AS "Schema" FROM {_ident(cat)}.information_schema.schemata'
            f"{where} ORDER BY 1"
        )
    if kind is Kind.SHOW_TABLES:
        cat, sch = (
            schema_parts(statement.name, catalog=catalog) if statement.name else (catalog, schema)
        )
        extra = f" AND table_name {like}" if like else ""
        return (
            f'SELECT table_name AS "Table" FROM {_ident(cat)}.information_schema.tables '
            f"WHERE table_schema = {_literal(sch)}{extra} ORDER BY 1"
        )
    if kind is Kind.SHOW_COLUMNS:
        cat, sch, table = table_parts(statement.name, catalog=catalog, schema=schema)
        extra = f" AND column_name {like}" if like else ""
        return (
            'SELECT column_name AS "Column", data_type AS "Type", \'\' AS "Extra", '
            f"'' AS \"Comment\" FROM {_ident(cat)}.information_schema.columns "
            f"WHERE table_schema = {_literal(sch)} AND table_name = {_literal(table)}{extra} "
            "ORDER BY ordinal_position"
        )
    if kind is Kind.SHOW_FUNCTIONS:
        # dpsql lists no functions; the README says which ones queries may use.
        return (
            'SELECT CAST(NULL AS VARCHAR) AS "Function", CAST(NULL AS VARCHAR) AS "Return Type", '
            'CAST(NULL AS VARCHAR) AS "Argument Types", CAST(NULL AS VARCHAR) AS "Function Type", '
            'CAST(NULL AS BOOLEAN) AS "Deterministic", CAST(NULL AS VARCHAR) AS "Description" '
            "FROM system.metadata.catalogs WHERE 1 = 0"
        )
    raise ValueError(kind)
