"""PostgreSQL's own spelling of the names dpsql's catalog holds in lower case.

dpsql reads SQL as DuckDB does: names are matched without regard to case, and the
catalog keys every schema, table and column in lower case. PostgreSQL folds an unquoted
name to lower case but keeps a quoted one as written, so a table made by a tool that
quotes its names (``"User"`` with a column ``"createdAt"``, as ORMs such as Prisma
write them) can only be read under its exact spelling. The executor keeps that spelling
here, from its start-up introspection, and the renderer writes every name of a catalog
table quoted in it (proxy/engines/render.py, ``Forms.column``).

Two names that differ only in case (``"Ev"`` beside ``ev``, or columns ``"V"`` and
``v`` in one table) fold to one catalog name: a table the policy names with such a pair
is refused at start, as dpsql could not say which one a query means.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from proxy.catalog import split_name
from proxy.errors import DPSQLError
from proxy.policy import Policy


def catalog_db(schema: str) -> str:
    """The catalog's database of a PostgreSQL schema ("public" is DuckDB's "main")."""
    return "main" if schema == "public" else schema.lower()


@dataclass(frozen=True)
class PostgresNames:
    # (db, table) in the catalog's naming -> (schema, table) as PostgreSQL spells them
    tables: dict[tuple[str, str], tuple[str, str]]
    # (db, table, column) in the catalog's naming -> the column as PostgreSQL spells it
    columns: dict[tuple[str, str, str], str]
    # (db, table) whose own name or one of whose columns folds onto another's
    folded: frozenset[tuple[str, str]]

    @classmethod
    def from_columns(cls, rows: Iterable[tuple[str, str, str]]) -> PostgresNames:
        """From (schema, table, column) rows, as information_schema.columns writes them."""
        tables: dict[tuple[str, str], tuple[str, str]] = {}
        columns: dict[tuple[str, str, str], str] = {}
        folded: set[tuple[str, str]] = set()
        for schema, table, column in rows:
            key = (catalog_db(schema), table.lower())
            if tables.setdefault(key, (schema, table)) != (schema, table):
                folded.add(key)
            if columns.setdefault((*key, column.lower()), column) != column:
                folded.add(key)
        return cls(tables, columns, frozenset(folded))

    def table(self, db: str, name: str) -> tuple[str, str]:
        """(schema, table) to quote for the catalog's ``db.name``."""
        return self.tables.get((db, name), ("public" if db == "main" else db, name))

    def column(self, db: str, table: str, column: str) -> str:
        """The column to quote for the catalog's ``db.table.column``."""
        return self.columns.get((db, table, column), column)

    def refuse_folded(self, policy: Policy) -> None:
        """Refuse to start when a table the policy names has a name, or a column name,
        that differs from another only in case (see the module's text).

        Precondition: none. Privacy claim: none (a refusal at start, before any query)."""
        for declared in policy.tables:
            key = split_name(declared.name)
            if key in self.folded:
                schema, table = self.table(*key)
                raise DPSQLError(
                    "policy_error",
                    f'PostgreSQL has names that differ only in case for table "{schema}"."'
                    f'{table}" (the table itself, or two of its columns), which dpsql reads '
                    "without case",
                    "rename one of each pair (ALTER TABLE ... RENAME) or point the policy "
                    "at a view whose names differ in more than case",
                )
