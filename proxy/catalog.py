"""The tables an analyst may query: policy rules joined with the engine's column types."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from proxy.errors import DPSQLError
from proxy.policy import ColumnPolicy, Policy, TablePolicy

DEFAULT_DB = "main"
# The table a query's UNION ALL of row-level subqueries becomes (proxy/union_rows.py).
UNION_TABLE = "__union"
# The one catalog a three-part name may name (the Trino door's catalog too).
CATALOG_NAME = "dpsql"

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
class DeclaredBound:
    """Bounds a value is clamped to before it is aggregated: a column's declared bounds
    (``column`` is "table.column", lower-case), or, with ``per_person``, the bounds a
    per-person subquery's aggregate is clamped to (``column`` is its SQL text, e.g.
    "COUNT(*)"; proxy/per_person_values.py)."""

    column: str
    lower: float
    upper: float
    per_person: bool = False


@dataclass(frozen=True)
class BoundedFlag:
    """Of a derived table whose values were clamped while it was derived (a per-person
    subquery's): its hidden column that is 1 on a row whose values a clamp moved, and
    the bounds those clamps apply. The clipping estimate counts the people it flags
    (proxy/rewrite/clamped_rows.py); the table's declared bounds hold by construction,
    so the outer query's own clamps of its columns never bind."""

    column: str
    bounds: tuple[DeclaredBound, ...]


@dataclass(frozen=True)
class FanOut:
    """Of a public table (public data): its row count and, per column, the most rows that
    share one value — how many of its rows one row of another table can match."""

    rows: int
    per_value: Mapping[str, int]


@dataclass(frozen=True)
class TableInfo:
    policy: TablePolicy
    db: str
    name: str
    column_types: Mapping[str, str]
    fan_out: FanOut | None = None  # public tables only
    bounded_flag: BoundedFlag | None = None  # derived tables only
    # One row per person for as long as the executor lives, checked by SQL on the data
    # it reads (proxy/engines/executor.py, frozen_unique_units); policy tables only.
    unit_unique: bool = False

    @property
    def public(self) -> bool:
        return self.policy.public

    def column(self, name: str) -> ColumnPolicy | None:
        return self.policy.column(name)

    def type_of(self, column: str) -> str:
        """The column's type as the engine names it, in upper case ("" if unknown)."""
        return self.column_types.get(column.lower(), "").upper()

    def is_integer(self, column: str) -> bool:
        return self.type_of(column) in _INTEGER_TYPES

    def is_numeric(self, column: str) -> bool:
        t = self.type_of(column)
        return t in _INTEGER_TYPES or t.startswith(_NUMERIC_PREFIXES)


def column_type(tables: Mapping[str, TableInfo], table: str, column: str) -> str:
    """The type of ``table.column`` (a bound query's alias) in upper case, "" if unknown."""
    info = tables.get(table.lower())
    return info.type_of(column) if info is not None else ""


@dataclass(frozen=True)
class ColumnView:
    """What an analyst may know of a column: policy facts and its type, no data."""

    name: str
    type: str
    lower: float | None
    upper: float | None
    values: tuple[str | int | float | bool, ...] | None
    unit: bool  # the column that identifies a person

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "lower": self.lower,
            "upper": self.upper,
            "values": None if self.values is None else list(self.values),
            "unit": self.unit,
        }


@dataclass(frozen=True)
class TableView:
    name: str
    public: bool
    population: str | None
    # "auto": chosen per query from the data (proxy/auto_groups.py, proxy/auto_bounds.py)
    # up to the limit beside it; None on a public table (and for a limit not "auto").
    max_groups: int | Literal["auto"] | None
    max_rows_per_group: int | Literal["auto"] | None
    columns: tuple[ColumnView, ...]
    max_groups_limit: int | None = None
    max_rows_per_group_limit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "public": self.public,
            "population": self.population,
            "max_groups": self.max_groups,
            "max_groups_limit": self.max_groups_limit,
            "max_rows_per_group": self.max_rows_per_group,
            "max_rows_per_group_limit": self.max_rows_per_group_limit,
            "columns": [c.to_dict() for c in self.columns],
        }


def table_view(info: TableInfo) -> TableView:
    t = info.policy
    columns = []
    for name, type_ in info.column_types.items():
        rule = t.column(name)
        columns.append(
            ColumnView(
                name=name,
                type=type_,
                lower=None if rule is None else rule.lower,
                upper=None if rule is None else rule.upper,
                values=None if rule is None or rule.values is None else tuple(rule.values),
                unit=name == t.unit,
            )
        )
    return TableView(
        name=t.name,
        public=t.public,
        population=t.population,
        max_groups="auto" if t.auto_groups_limit is not None else t.max_groups,
        max_rows_per_group="auto" if t.auto_rows_limit is not None else t.max_rows_per_group,
        columns=tuple(columns),
        max_groups_limit=t.auto_groups_limit,
        max_rows_per_group_limit=t.auto_rows_limit,
    )


class ValueBounds(Protocol):
    """A column's bounds chosen from the data (proxy/auto_values.py, ColumnBounds)."""

    @property
    def lower(self) -> float | None: ...

    @property
    def upper(self) -> float | None: ...


class Catalog:
    """Policy tables that exist in the database, with their column types."""

    def __init__(
        self,
        policy: Policy,
        column_types: Mapping[tuple[str, str], Mapping[str, str]],
        fan_out: Callable[[str, str, tuple[str, ...]], FanOut] | None = None,
        unique_units: frozenset[tuple[str, str]] = frozenset(),
    ):
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
            facts = (
                fan_out(key[0], key[1], tuple(types))
                if table.public and fan_out is not None
                else None
            )
            self._tables[key] = TableInfo(
                table, key[0], key[1], dict(types), facts, unit_unique=key in unique_units
            )
        _check_unit_types(self._tables.values())
        # Tables one query derives from others (proxy/per_person_values.py): visible to
        # whoever may read that query, since their rows come from tables it already read.
        self._derived: frozenset[tuple[str, str]] = frozenset()

    def with_derived(self, info: TableInfo) -> Catalog:
        """This catalog plus one table derived within a query (not in the policy)."""
        other = copy.copy(self)
        key = (info.db, info.name)
        other._tables = {**self._tables, key: info}
        other._derived = self._derived | {key}
        return other

    def with_value_bounds(self, bounds: Mapping[tuple[str, str], ValueBounds]) -> Catalog:
        """This catalog with the bounds of "auto" columns filled in, by (table name,
        column): each side is a released (or, until released, the declared limit's)
        public number, so planning reads it as if the policy had declared it; a side
        that is None keeps the policy's number."""
        if not bounds:
            return self
        other = copy.copy(self)
        tables = dict(self._tables)
        for key, info in self._tables.items():
            mine = {c: b for (t, c), b in bounds.items() if t == info.policy.name}
            if not mine:
                continue
            columns = tuple(
                replace(
                    c,
                    lower=c.lower if mine[c.name].lower is None else mine[c.name].lower,
                    upper=c.upper if mine[c.name].upper is None else mine[c.name].upper,
                )
                if c.name in mine
                else c
                for c in info.policy.columns
            )
            tables[key] = replace(info, policy=replace(info.policy, columns=columns))
        other._tables = tables
        return other

    def tables(self) -> tuple[TableInfo, ...]:
        return tuple(self._tables.values())

    def get(self, db: str, name: str) -> TableInfo | None:
        return self._tables.get((db.lower() or DEFAULT_DB, name.lower()))

    def visible_to(self, allowed: frozenset[str] | None) -> tuple[TableInfo, ...]:
        """Tables the caller may query (None: all)."""
        if allowed is None:
            return self.tables()
        return tuple(
            t
            for key, t in self._tables.items()
            if t.policy.name.lower() in allowed or key in self._derived
        )

    def views(self, allowed: frozenset[str] | None) -> tuple[TableView, ...]:
        """The schema a caller may see (GET /v1/schema, `dpsql schema`, the doors'
        catalogs), sorted by table name."""
        return tuple(
            sorted((table_view(t) for t in self.visible_to(allowed)), key=lambda v: v.name)
        )

    def sqlglot_schema(
        self, allowed: frozenset[str] | None
    ) -> dict[str, dict[str, dict[str, str]]]:
        schema: dict[str, dict[str, dict[str, str]]] = {}
        for t in self.visible_to(allowed):
            schema.setdefault(t.db, {})[t.name] = dict(t.column_types)
        return schema


def _unit_kind(type_name: str) -> str:
    """What a person id's type compares as: its family (integers of any width meet
    exactly), or the type itself where the family is not known."""
    from proxy.engines.kinds import Family, of_type_name

    family = of_type_name(type_name).family
    return type_name.upper() if family is Family.UNKNOWN else family.value


def _check_unit_types(tables: Iterable[TableInfo]) -> None:
    """Refuse a population whose tables' person ids are of different kinds. A join on
    the person id compares them after a cast (DuckDB reads '07' and '7' as 7), so one
    person's rows in a text id column could be under many spellings, each bounded by the
    core as a person of its own: one person moved a count declared Δ∞ = 1 by 41 (a
    review, 2026-12-06; tests/reliability/test_unit_type_neighbours.py). A DOUBLE id
    beside a BIGINT one would, the other way, make two people one."""
    kinds: dict[str, dict[str, str]] = {}
    for info in tables:
        policy = info.policy
        if info.public or not policy.unit or not policy.population:
            continue
        kind = info.column_types.get(policy.unit.lower())
        if kind is None:
            continue
        kinds.setdefault(policy.population, {})[policy.name] = _unit_kind(kind)
    for population, found in kinds.items():
        if len(set(found.values())) > 1:
            listed = ", ".join(f"{t}: {k}" for t, k in sorted(found.items()))
            raise DPSQLError(
                "policy_error",
                f"the person ids of population {population} are of different types ({listed})",
                "store every table's person id in one type (e.g. BIGINT everywhere), or "
                "read a table through a view that casts it",
            )
