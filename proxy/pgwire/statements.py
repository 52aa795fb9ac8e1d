"""What one statement is, and where it goes.

* transaction control, SET/SHOW/RESET and a few session commands: answered by the
  connection;
* catalog queries (pg_catalog, information_schema) and SELECTs that read no table
  (``SELECT 1``, ``SELECT version()``): answered by the data-free shadow catalog;
* everything else: the engine, with the ``postgres`` dialect. PostgreSQL's ``public``
  schema (and a ``<database>.public`` prefix) is dropped so that ``public.prompts`` and
  ``prompts`` name the same table, and bound parameters become SQL literals.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import sqlglot
from sqlglot import exp

from proxy import catalog_limits
from proxy.memo import Memo
from proxy.pgwire import codec
from proxy.pgwire.shadow import PUBLIC, is_catalog_table, parse_catalog
from proxy.pgwire.sqlstate import FEATURE_NOT_SUPPORTED, WireError
from proxy.pgwire.sqltext import strip_comments


class Kind(Enum):
    EMPTY = "empty"
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"  # SAVEPOINT, RELEASE, ROLLBACK TO: no-ops (nothing to undo)
    SET = "set"
    RESET = "reset"
    RESET_ALL = "reset_all"
    SHOW = "show"
    SHOW_ALL = "show_all"
    DISCARD = "discard"
    DEALLOCATE = "deallocate"
    NOOP = "noop"  # SET TRANSACTION ..., SET SESSION CHARACTERISTICS ...
    DECLARE = "declare"  # DECLARE name CURSOR FOR <query>: answered once, fetched in pages
    FETCH = "fetch"
    MOVE = "move"
    CLOSE = "close"
    CATALOG = "catalog"
    ENGINE = "engine"


@dataclass(frozen=True)
class Statement:
    kind: Kind
    sql: str
    tag: str  # CommandComplete tag (SELECT adds its row count)
    name: str = ""  # SET/SHOW/RESET parameter, DEALLOCATE statement name
    value: str | None = None  # SET value (None: DEFAULT)
    tree: exp.Expr | None = None  # parsed catalog query
    inner: Statement | None = None  # DECLARE's query
    count: int = 1  # FETCH/MOVE row count (-1: ALL)
    binary: bool = False  # DECLARE ... BINARY CURSOR
    local: bool = False  # SET LOCAL: until the end of the transaction

    @property
    def returns_rows(self) -> bool:
        return self.kind in (Kind.SHOW, Kind.SHOW_ALL, Kind.CATALOG, Kind.ENGINE, Kind.FETCH)


_TX = (
    (re.compile(r"^(BEGIN|START\s+TRANSACTION)\b", re.I), Kind.BEGIN, "BEGIN"),
    (re.compile(r"^(COMMIT|END)\b(?!\s+PREPARED)", re.I), Kind.COMMIT, "COMMIT"),
    (
        re.compile(r"^(ROLLBACK|ABORT)(\s+(WORK|TRANSACTION))?\s+TO\b", re.I),
        Kind.SAVEPOINT,
        "ROLLBACK",
    ),
    (re.compile(r"^(ROLLBACK|ABORT)\b(?!\s+PREPARED)", re.I), Kind.ROLLBACK, "ROLLBACK"),
    (re.compile(r"^SAVEPOINT\b", re.I), Kind.SAVEPOINT, "SAVEPOINT"),
    (re.compile(r"^RELEASE\b", re.I), Kind.SAVEPOINT, "RELEASE"),
)
_SET_NOOP = re.compile(
    r"^SET\s+(SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\b|^SET\s+CONSTRAINTS\b", re.I
)
_SET_TIMEZONE = re.compile(r"^SET\s+(SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+(.+?)$", re.I | re.S)
_SET_NAMES = re.compile(r"^SET\s+NAMES\s+(.+?)$", re.I | re.S)
_SET = re.compile(
    r'^SET\s+(SESSION\s+|LOCAL\s+)?("[^"]+"|[\w.$]+)\s*(?:=|\bTO\b)\s*(.+?)$', re.I | re.S
)
_RESET = re.compile(r'^RESET\s+("[^"]+"|[\w.$ ]+?)$', re.I)
_SHOW = re.compile(r"^SHOW\s+(.+?)$", re.I | re.S)
_DISCARD = re.compile(r"^DISCARD\s+(ALL|PLANS|SEQUENCES|TEMP|TEMPORARY)$", re.I)
_DEALLOCATE = re.compile(r'^DEALLOCATE\s+(?:PREPARE\s+)?("[^"]+"|\w+)$', re.I)
_NAME = r'("[^"]+"|\w+)'
_DECLARE = re.compile(
    rf"^DECLARE\s+{_NAME}\s+(BINARY\s+)?((?:ASENSITIVE|INSENSITIVE)\s+)?(NO\s+)?(SCROLL\s+)?"
    r"CURSOR\s+(?:WITH(?:OUT)?\s+HOLD\s+)?FOR\s+(.+)$",
    re.I | re.S,
)
_FETCH = re.compile(
    rf"^(FETCH|MOVE)\s+(?:(NEXT|FORWARD\s+ALL|FORWARD\s+\d+|FORWARD|ALL|\d+)\s+)?"
    rf"(?:(?:FROM|IN)\s+)?{_NAME}$",
    re.I,
)
_CLOSE = re.compile(rf"^CLOSE\s+(ALL|{_NAME})$", re.I)
_UNSUPPORTED = re.compile(r"^(LISTEN|UNLISTEN|NOTIFY|COPY|PREPARE|EXECUTE)\b", re.I)


def classify(sql: str, user_tables: frozenset[tuple[str, str]]) -> Statement:
    """``user_tables``: the (schema, name) pairs of policy tables, PostgreSQL-named."""
    text = strip_comments(sql).rstrip(";").strip()
    if not text:
        return Statement(Kind.EMPTY, sql, "")
    for pattern, kind, tag in _TX:
        if pattern.match(text):
            return Statement(kind, sql, tag)
    if _SET_NOOP.match(text):
        return Statement(Kind.NOOP, sql, "SET")
    match = _SET_TIMEZONE.match(text)
    if match:
        return Statement(
            Kind.SET, sql, "SET", "timezone", _value(match.group(2)), local=_is_local(match)
        )
    match = _SET_NAMES.match(text)
    if match:
        return Statement(Kind.SET, sql, "SET", "client_encoding", _value(match.group(1)))
    match = _SET.match(text)
    if match:
        return Statement(
            Kind.SET, sql, "SET", match.group(2), _value(match.group(3)), local=_is_local(match)
        )
    match = _RESET.match(text)
    if match:
        name = match.group(1)
        if name.strip().upper() == "ALL":
            return Statement(Kind.RESET_ALL, sql, "RESET")
        return Statement(Kind.RESET, sql, "RESET", name)
    match = _SHOW.match(text)
    if match:
        name = match.group(1).strip()
        if name.upper() == "ALL":
            return Statement(Kind.SHOW_ALL, sql, "SHOW")
        return Statement(Kind.SHOW, sql, "SHOW", name)
    match = _DISCARD.match(text)
    if match:
        return Statement(Kind.DISCARD, sql, f"DISCARD {match.group(1).upper()}")
    match = _DEALLOCATE.match(text)
    if match:
        if match.group(1).upper() == "ALL":  # (a statement named "ALL" is quoted)
            return Statement(Kind.DEALLOCATE, sql, "DEALLOCATE ALL")
        return Statement(Kind.DEALLOCATE, sql, "DEALLOCATE", match.group(1).strip('"'))
    match = _DECLARE.match(text)
    if match:
        inner = classify(match.group(6), user_tables)
        if inner.kind not in (Kind.ENGINE, Kind.CATALOG):
            raise WireError(FEATURE_NOT_SUPPORTED, "a cursor must be declared for a SELECT")
        return Statement(
            Kind.DECLARE,
            sql,
            "DECLARE CURSOR",
            match.group(1).strip('"'),
            inner=inner,
            binary=bool(match.group(2)),
        )
    match = _FETCH.match(text)
    if match:
        how = " ".join((match.group(2) or "NEXT").upper().split())
        digits = re.search(r"\d+", how)
        count = -1 if how.endswith("ALL") else int(digits.group(0)) if digits else 1
        kind = Kind.FETCH if match.group(1).upper() == "FETCH" else Kind.MOVE
        return Statement(kind, sql, kind.value.upper(), match.group(3).strip('"'), count=count)
    match = _CLOSE.match(text)
    if match:
        name = match.group(1)
        tag = "CLOSE CURSOR ALL" if name.upper() == "ALL" else "CLOSE CURSOR"
        return Statement(Kind.CLOSE, sql, tag, "" if name.upper() == "ALL" else name.strip('"'))
    if _UNSUPPORTED.match(text):
        raise WireError(
            FEATURE_NOT_SUPPORTED,
            f"dpsql does not support {text.split()[0].upper()}",
            hint="dpsql answers one SELECT at a time; use the extended protocol for "
            "prepared statements and a row limit for paging",
        )
    return _query(sql, user_tables)


def _is_local(match: re.Match[str]) -> bool:
    return (match.group(1) or "").strip().upper() == "LOCAL"


def _value(text: str) -> str | None:
    from proxy.pgwire.session_settings import unquote

    raw = text.strip().rstrip(";").strip()
    return None if raw.upper() in ("DEFAULT", "LOCAL") else unquote(raw)


# Parsing dominates what the door adds to a cached answer, and clients send the same
# text again and again: both functions below are pure in their arguments, so they are
# memoised (a raised WireError is not kept). Their trees are never changed in place.
_MEMO_SIZE = 1024


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _query(sql: str, user_tables: frozenset[tuple[str, str]]) -> Statement:
    try:
        tree: exp.Expr | None = sqlglot.parse_one(sql, dialect="postgres")
    except sqlglot.errors.SqlglotError:  # (TokenError too)
        tree = None
    if tree is None:
        # psql's and pgjdbc's catalog SQL needs rewrites before sqlglot can read it.
        lowered = sql.lower()
        if "pg_catalog" in lowered or "information_schema" in lowered:
            prepared = parse_catalog(sql)
            if prepared is not None:
                return Statement(Kind.CATALOG, sql, "SELECT", tree=prepared)
        return Statement(Kind.ENGINE, sql, "SELECT")
    if not isinstance(tree, exp.Query):
        return Statement(Kind.ENGINE, sql, "SELECT")
    # A CTE's name counts only where the CTE is visible (elsewhere it is a table: the
    # Trino door's review found DuckDB's own views reachable that way).
    in_scope = catalog_limits.cte_references(tree)
    tables = [t for t in tree.find_all(exp.Table) if id(t) not in in_scope]
    functions = [t for t in tables if not t.name]
    named = [t for t in tables if t.name]
    catalog = [t for t in named if is_catalog_table(t, user_tables)]
    if catalog and len(catalog) < len(named):
        raise WireError(
            FEATURE_NOT_SUPPORTED,
            "a query cannot read catalog tables and data tables together",
            hint="ask the catalog and the data in separate queries",
        )
    if catalog or (not named and not functions):
        # pg_catalog.f() and OPERATOR(pg_catalog.~) read better after the text rewrites
        prepared = parse_catalog(sql) or tree
        return Statement(Kind.CATALOG, sql, "SELECT", tree=prepared)
    return Statement(Kind.ENGINE, sql, "SELECT")


def engine_sql(
    sql: str,
    params: Sequence[Any],
    param_oids: Sequence[int],
    *,
    database: str,
    search_path: Sequence[str],
    user_tables: frozenset[tuple[str, str]],
) -> str:
    """The SQL the engine receives: ``public.`` (and ``<database>.public.``) dropped,
    bare names qualified by the first search_path schema that holds them, and ``$n``
    replaced by literals. Untouched text is passed as written."""
    # A value is keyed by its type and repr: True == 1 and Decimal("1") == Decimal("1.0"),
    # yet each binds as a different literal.
    key = (
        sql,
        tuple((type(v).__name__, repr(v)) for v in params),
        tuple(param_oids),
        database,
        tuple(search_path),
        user_tables,
    )
    found = _ENGINE_SQL.get(key)
    if found is None:
        found = _engine_sql(sql, params, param_oids, database, search_path, user_tables)
        _ENGINE_SQL.put(key, found)
    return found


_ENGINE_SQL: Memo[tuple[Any, ...], str] = Memo(_MEMO_SIZE)


def _engine_sql(
    sql: str,
    params: Sequence[Any],
    param_oids: Sequence[int],
    database: str,
    search_path: Sequence[str],
    user_tables: frozenset[tuple[str, str]],
) -> str:
    try:
        tree = sqlglot.parse_one(sql, dialect="postgres")
    except sqlglot.errors.SqlglotError:  # (TokenError too)
        if params:
            raise WireError(
                "42601", "dpsql could not parse this statement to bind its parameters"
            ) from None
        return sql  # the engine reports the syntax error with its position
    changed = False
    for table in list(tree.find_all(exp.Table)):
        if not table.name:
            continue
        bare = not table.db  # (a name written public.x stays in public)
        changed |= _dequalified(table, database)
        if bare and (PUBLIC, table.name.lower()) not in user_tables:
            for schema in search_path:
                if (schema, table.name.lower()) in user_tables:
                    table.set("db", exp.to_identifier(schema))
                    changed = True
                    break
    for column in list(tree.find_all(exp.Column)):
        # Metabase writes every column "public"."prompts"."model": its schema and
        # database go as a table's do.
        changed |= _dequalified(column, database)
    for node in list(tree.find_all(exp.Parameter, exp.Placeholder)):
        index = _param_index(node)
        if index is None or not 1 <= index <= len(params):
            raise WireError(
                "08P01", f"the statement uses ${index} but {len(params)} parameters were bound"
            )
        oid = param_oids[index - 1] if index - 1 < len(param_oids) else 0
        node.replace(literal(params[index - 1], oid))
        changed = True
    return tree.sql(dialect="postgres") if changed else sql


def _dequalified(node: exp.Table | exp.Column, database: str) -> bool:
    """Drop ``<database>.`` before a schema and the ``public`` schema (dpsql's "main")
    from a table or column name, in place; whether anything was dropped."""
    catalog, db = node.text("catalog").lower(), node.text("db").lower()
    changed = False
    if catalog and catalog == database.lower() and db:
        node.set("catalog", None)
        changed = True
    if db == PUBLIC:
        node.set("db", None)
        changed = True
    return changed


def _param_index(node: exp.Expr) -> int | None:
    inner = node.this
    text = inner.name if isinstance(inner, exp.Expr) else str(inner or "")
    return int(text) if text.isdigit() else None


_INTEGERS = {codec.INT2, codec.INT4, codec.INT8, codec.OID}
_NUMBERS = {codec.FLOAT4, codec.FLOAT8, codec.NUMERIC}


def literal(value: Any, oid: int) -> exp.Expr:
    """A bound parameter as a SQL literal of its declared type (text when unknown)."""
    if value is None:
        return exp.Null()
    if isinstance(value, list):
        return exp.Array(expressions=[literal(v, _element_oid(oid)) for v in value])
    text = str(value)
    if oid in _INTEGERS and re.fullmatch(r"[+-]?\d+", text):
        return exp.Literal.number(int(text))
    if oid in _NUMBERS and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        return exp.Literal.number(text)
    if oid == codec.BOOL:
        return exp.Boolean(this=text.lower() in ("t", "true", "1", "on", "yes"))
    if oid in (codec.DATE, codec.TIMESTAMP, codec.TIMESTAMPTZ):
        kind = {codec.DATE: "DATE", codec.TIMESTAMP: "TIMESTAMP"}.get(oid, "TIMESTAMPTZ")
        return exp.cast(exp.Literal.string(text), exp.DataType.build(kind))
    return exp.Literal.string(text)


def _element_oid(array_oid: int) -> int:
    from proxy.pgwire.pgtypes import ARRAY_ELEMENT

    element = ARRAY_ELEMENT.get(array_oid)
    return element.oid if element else 0


def catalog_params(params: Sequence[Any], param_oids: Sequence[int]) -> list[Any]:
    """Bound parameters as DuckDB values for the shadow catalog."""
    out: list[Any] = []
    for i, value in enumerate(params):
        oid = param_oids[i] if i < len(param_oids) else 0
        text = None if value is None else str(value)
        if text is None:
            out.append(None)
        elif oid in _INTEGERS and re.fullmatch(r"[+-]?\d+", text):
            out.append(int(text))
        elif oid in _NUMBERS:
            out.append(float(text))
        elif oid == codec.BOOL:
            out.append(text.lower() in ("t", "true", "1", "on"))
        elif oid == codec.DATE:
            out.append(dt.date.fromisoformat(text))
        else:
            out.append(value)
    return out
