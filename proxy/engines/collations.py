"""Refuse to start on text columns whose collation merges distinct strings.

Under a collation such as DuckDB's ``NOCASE`` (or a PostgreSQL nondeterministic ICU
collation), ``NORTH`` and ``north`` are one value: GROUP BY makes them one group and the
engine releases one spelling for it, the one it meets first. When one person's rows are
the only ones spelled ``NORTH``, a group of many people is labelled with that person's
spelling on D and with ``north`` on D' = D minus that person (review 3, RELIABILITY.md
§7). The analyst cannot write COLLATE (it is outside the allowlist), so the collation can
only come from the schema, and no catalog view reports it as part of the type. The
engine therefore refuses to start on such a database, before any query, rather than
rewrite every text key: an operator who needs case-insensitive groups can store the
folded value in a column of its own.

DuckDB: the DDL of every table and view in the database is searched for a COLLATE clause
(a view over a collated column inherits the collation, so every relation counts, not
only the policy's). PostgreSQL: any column whose collation is nondeterministic
(deterministic collations only order differently; equal means equal bytes, so groups
are unchanged). Spark reads Parquet, whose strings carry no collation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from proxy.errors import DPSQLError

Evaluate = Callable[[str], Sequence[tuple[Any, ...]]]

_COLLATE = re.compile(r"\bCOLLATE\b", re.IGNORECASE)

# The database the connection opened (not the temporary one, which a starting engine has
# left empty, nor the system catalog): the filter on database_name is pushed into the
# scan, which otherwise builds every default view and macro of the system catalog first
# (see DuckDBExecutor.column_types).
DUCKDB_DDL = (
    "SELECT schema_name, table_name, sql FROM duckdb_tables() "
    "WHERE database_name = current_database() AND NOT internal "
    "UNION ALL SELECT schema_name, view_name, sql FROM duckdb_views() "
    "WHERE database_name = current_database() AND NOT internal"
)

POSTGRES_NONDETERMINISTIC = (
    "SELECT n.nspname, c.relname, a.attname, co.collname FROM pg_attribute a "
    "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_collation co ON co.oid = a.attcollation "
    "WHERE NOT co.collisdeterministic AND a.attnum > 0 AND NOT a.attisdropped "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1, 2, 3"
)


def _collates(ddl: str) -> bool:
    """Whether a DuckDB CREATE statement sets a collation anywhere (a column constraint
    or an expression); unparsable text counts when it names COLLATE at all."""
    if not _COLLATE.search(ddl):
        return False
    try:
        tree = sqlglot.parse_one(ddl, read="duckdb")
    except sqlglot.errors.ParseError:
        return True
    return any(
        isinstance(node, (exp.CollateColumnConstraint, exp.Collate)) for node in tree.walk()
    )


def refuse_duckdb_collations(evaluate: Evaluate) -> None:
    """Raise policy_error if a table or view of the DuckDB database declares a collation."""
    found = [
        f"{schema}.{name}"
        for schema, name, ddl in evaluate(DUCKDB_DDL)
        if isinstance(ddl, str) and _collates(ddl)
    ]
    if found:
        raise DPSQLError(
            "policy_error",
            f"{', '.join(found)} declare a collation (COLLATE): GROUP BY would release one "
            "person's spelling of a group that the collation merges",
            "recreate the columns without COLLATE (store a folded copy, e.g. lower(x), "
            "in a column of its own if groups should ignore case)",
        )


def refuse_postgres_collations(evaluate: Evaluate) -> None:
    """Raise policy_error if a column of the PostgreSQL database has a nondeterministic
    collation."""
    found = [f"{s}.{t}.{c} ({coll})" for s, t, c, coll in evaluate(POSTGRES_NONDETERMINISTIC)]
    if found:
        raise DPSQLError(
            "policy_error",
            f"columns with a nondeterministic collation: {', '.join(found)}; GROUP BY would "
            "release one person's spelling of a group that the collation merges",
            "give these columns a deterministic collation (the database default, or "
            '"C"), or expose a view that casts them with COLLATE "C"',
        )
