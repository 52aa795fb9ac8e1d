"""The tables an analyst may query: policy rules joined with the engine's column types."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from proxy.errors import DPSQLError
from proxy.policy import ColumnPolicy, Policy, TablePolicy

DEFAULT_DB = "main"

_INTEGER_TYPES = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "INT",
    "BOOLEAN",
}
_NUMERIC_PREFIXES = ("DECIMAL", "DOUBLE", "FLOAT", "REAL", "NUMERIC")


def split_name(name: str) -> tuple[str, str]:
    """'pums.pums' -> ('pums', 'pums'); 'users' -> ('main', 'users')."""
    parts = name.lower().split(".")
    if len(parts) == 1:
        return DEFAULT_DB, parts[0]
    return parts[-2], parts[-1]


@dataclass(frozen=True)
class TableInfo:
    policy: TablePolicy
    db: str
    name: str
    column_types: Mapping[str, str]

    @property
    def public(self) -> bool:
        return self.policy.public

    def column(self, name: str) -> ColumnPolicy | None:
        return self.policy.column(name)

    def is_integer(self, column: str) -> bool:
        return self.column_types.get(column.lower(), "").upper() in _INTEGER_TYPES

    def is_numeric(self, column: str) -> bool:
        t = self.column_types.get(column.lower(), "").upper()
        return t in _INTEGER_TYPES or t.startswith(_NUMERIC_PREFIXES)


class Catalog:
    """Policy tables that exist in the database, with their column types."""

    def __init__(self, policy: Policy, column_types: Mapping[tuple[str, str], Mapping[str, str]]):
        self.policy = policy
        self._tables: dict[tuple[str, str], TableInfo] = {}
        for table in policy.tables:
            key = split_name(table.name)
            types = column_types.get(key)
            if types is None:
                raise DPSQLError(
                    "policy_error",
                    f"the policy declares table {table.name!r}, which the database does not have",
                    "fix [tables] in the policy or the [database] section",
                )
            self._tables[key] = TableInfo(table, key[0], key[1], dict(types))

    def tables(self) -> tuple[TableInfo, ...]:
        return tuple(self._tables.values())

    def get(self, db: str, name: str) -> TableInfo | None:
        return self._tables.get((db.lower() or DEFAULT_DB, name.lower()))

    def visible_to(self, allowed: frozenset[str] | None) -> tuple[TableInfo, ...]:
        """Tables the caller may query (None: all)."""
        if allowed is None:
            return self.tables()
        return tuple(t for t in self._tables.values() if t.policy.name.lower() in allowed)

    def sqlglot_schema(
        self, allowed: frozenset[str] | None
    ) -> dict[str, dict[str, dict[str, str]]]:
        schema: dict[str, dict[str, dict[str, str]]] = {}
        for t in self.visible_to(allowed):
            schema.setdefault(t.db, {})[t.name] = dict(t.column_types)
        return schema
