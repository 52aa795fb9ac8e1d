"""Limits on what the doors' shadow catalogs run (proxy/trino/shadow.py and
proxy/pgwire/shadow.py): which functions a catalog query may call, how long it may run
and how large an answer it may fetch.

A catalog query reads no private row and is never charged, so it is the one place where
an analyst runs SQL of their own on a DuckDB at no cost. The shadow's ``memory_limit``
does not hold everywhere: a scalar that builds one value of a size its argument chooses
(``length(repeat('a', 2000000000))``) ran 118 s and took the server to 3.8 GB, past
both the time limit (DuckDB checks an interrupt between vectors, not inside one call)
and the memory limit (review of 2026-12-04); joins of table functions in FROM
(``range(1000000) a, range(100000) b``) held every worker of the PostgreSQL door.
Materialised intermediate results, aggregates and joins stay within the memory limit
(measured: a string_agg over a billion-row join and CTEs doubling a string both stop
at "Out of Memory"), so the rules below are about single values, row sources and the
answer itself:

* no call to a function that builds a value whose size an argument chooses
  (:data:`SIZED_BY_ARGUMENT`), except a row source directly in FROM, which DuckDB
  streams and interrupts;
* no lambda (nested ``transform``/``reduce`` multiply a list or double a string within
  one call);
* no table function in FROM other than :data:`ROW_SOURCES`;
* no call reading the server's own settings (:data:`SERVER_STATE`);
* string work per row bounded as the private path bounds it
  (:func:`proxy.string_growth.check_string_growth`: ``replace``, ``regexp_replace`` and
  concatenation);
* an interrupt after :data:`TIMEOUT_S` seconds, and at most :data:`MAX_ROWS` rows and
  :data:`MAX_BYTES` bytes fetched.

These refuse what is known to escape; they are not an allowlist (RELIABILITY.md §7, the
doors' review). The doors call :func:`cte_references` to tell a CTE from a table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlglot import exp

from proxy.errors import DPSQLError
from proxy.string_growth import check_string_growth

TIMEOUT_S = 10.0
MAX_ROWS = 100_000
MAX_BYTES = 16 * 2**20

# DuckDB's and the clients' names (sqlglot's class names too) of functions whose result
# has a size one of their arguments chooses, whatever the size of their input.
SIZED_BY_ARGUMENT = frozenset(
    {
        "repeat",
        "pad",
        "lpad",
        "rpad",
        "printf",
        "format",
        "bar",
        "range",
        "generate_series",
        "generateseries",
        "explodinggenerateseries",
        "sequence",
        "list_resize",
        "array_resize",
        "arrayresize",
        "array_fill",
        "repeat_row",
        "space",
        "replicate",
        "bitstring",  # bitstring('1', 2000000000): 250 MB in one call
    }
)
# Functions that read the serving process's own settings or environment (DuckDB's
# directories, paths under the server's home): not the catalog's to tell. The PostgreSQL
# door answers current_setting('x') of a literal name from the session before this check.
SERVER_STATE = frozenset({"current_setting", "getenv", "currentsetting"})
# Table functions a catalog query may read in FROM (what psql and pgjdbc send).
ROW_SOURCES = frozenset(
    {"generate_series", "generateseries", "explodinggenerateseries", "unnest", "_pg_expandarray"}
)


class Fetchable(Protocol):
    def fetchmany(self, size: int = ...) -> list[Any]: ...


@dataclass(frozen=True)
class Refusal:
    """Why a catalog query is not run (each door answers it in its own error shape)."""

    message: str
    hint: str
    too_large: bool = False  # the answer, not the query: Trino's TOO_LARGE, SQLSTATE 54000


def _names(node: exp.Expr) -> set[str]:
    names = {type(node).__name__.lower()}
    if isinstance(node, exp.Anonymous):
        names.add(str(node.name).lower())
    elif isinstance(node, exp.Func):
        names.add(node.sql_name().lower())
    return names


def _written(node: exp.Expr) -> str:
    """The function's name as DuckDB writes it (for messages)."""
    return node.sql(dialect="duckdb").split("(", 1)[0].strip().lower()


def refusal(tree: exp.Expr, *, session_values: bool = False) -> Refusal | None:
    """Why ``tree`` may not run on a shadow catalog, or None. Reads the tree only.
    ``session_values``: the door substitutes its session's own values for some calls
    later (the PostgreSQL door's current_setting), so those are checked after it, by
    :func:`server_state` on what it runs."""
    if tree.find(exp.Lambda) is not None:
        # list_transform / flatten / list_reduce: one call builds a list or string whose
        # size multiplies with each nested lambda (100^4 elements from 1.6 KB of SQL)
        return Refusal(
            "lambda functions are not answered in a catalog query",
            "ask the catalog for names and types; build lists in the client",
        )
    for node in tree.find_all(exp.Func):
        names = _names(node)
        in_from = isinstance(node.parent, exp.Table) and node.parent.this is node
        if in_from and not names & ROW_SOURCES:
            name = _written(node)
            return Refusal(
                f"the table function {name} is not answered in a catalog query",
                "catalog queries read pg_catalog, information_schema or system tables "
                "(generate_series and unnest are allowed in FROM)",
            )
        if not in_from and names & SIZED_BY_ARGUMENT:
            name = _written(node)
            return Refusal(
                f"{name}() builds a value whose size its argument chooses; catalog "
                "queries do not call it",
                "ask the catalog for names and types; build text in the client",
            )
    server = None if session_values else server_state(tree)
    if server is not None:
        return server
    try:
        check_string_growth(tree, "the catalog query")
    except DPSQLError as error:
        return Refusal(error.message, error.hint)
    return None


def cte_references(tree: exp.Expr) -> set[int]:
    """The ids of the Table nodes of ``tree`` that name a CTE visible where they stand
    (a CTE's name outside its scope is DuckDB's own view: pg_settings, duckdb_tables)."""
    from sqlglot.optimizer.scope import traverse_scope

    found: set[int] = set()
    for scope in traverse_scope(tree):
        visible = {name.lower() for name in scope.cte_sources}
        for table in scope.tables:
            if not table.db and not table.catalog and table.name.lower() in visible:
                found.add(id(table))
    return found


def server_state(tree: exp.Expr) -> Refusal | None:
    """The refusal of a call in ``tree`` that reads the server's settings, or None."""
    for node in tree.find_all(exp.Func):
        if _names(node) & SERVER_STATE:
            return Refusal(
                f"{_written(node)}() reads the server's own settings; catalog queries do "
                "not call it",
                "SHOW SESSION (Trino) or SHOW (PostgreSQL) lists the session's settings",
            )
    return None


@contextmanager
def interrupted_after(interrupt: Any, seconds: float | None = None) -> Iterator[None]:
    """Call ``interrupt()`` (a DuckDB cursor's) if the block still runs after ``seconds``."""
    timer = threading.Timer(TIMEOUT_S if seconds is None else seconds, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _size(value: Any) -> int:
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return 8 + sum(_size(v) for v in value)
    if isinstance(value, dict):
        return 8 + sum(_size(k) + _size(v) for k, v in value.items())
    return 8


def fetch_bounded(result: Fetchable) -> tuple[list[tuple[Any, ...]], Refusal | None]:
    """The rows of ``result``, fetched a batch at a time, or the refusal of an answer
    past :data:`MAX_ROWS` rows or :data:`MAX_BYTES` bytes (then the rows are dropped)."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while batch := result.fetchmany(1024):
        for row in batch:
            size += sum(_size(v) for v in row)
        rows.extend(tuple(r) for r in batch)
        if len(rows) > MAX_ROWS:
            return [], Refusal(
                f"the catalog query returns more than {MAX_ROWS} rows",
                "add a WHERE clause or a LIMIT",
                too_large=True,
            )
        if size > MAX_BYTES:
            return [], Refusal(
                f"the catalog query's answer is larger than {MAX_BYTES // 2**20} MB",
                "select fewer or narrower columns, or add a LIMIT",
                too_large=True,
            )
    return rows, None
