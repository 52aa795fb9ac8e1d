"""Queries that read no person data: answered exactly and free, on a separate path.

A query whose tables are all public (``public = true`` in the policy), or that reads no
table at all (``SELECT 1``, ``SELECT 2 * PI()``), holds no information about any person:
it is answered exactly, charges nothing and writes no ledger event. ``Engine.run``
recognises such a query after its tables are resolved (:func:`classify`) and answers it
here instead of planning a release.

*By construction* the answer cannot read a private row: it runs in :class:`PublicSandbox`,
an in-memory DuckDB that holds copies of the public tables only (made once, on first
use), with external access off and its configuration locked. Its SQL is checked against
an allowlist too (query clauses, deterministic functions and aggregates, windows,
``RAND()``), so that server facts such as ``version()`` or settings are not answered
here: the doors answer those from their own catalogs.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

import duckdb
from sqlglot import exp

from proxy import outer_functions, typed_division
from proxy.bind import check_tables
from proxy.catalog import DEFAULT_DB, Catalog, TableInfo
from proxy.cte_scope import cte_references
from proxy.engines.executor import Executor, public_table
from proxy.errors import DPSQLError, position_of, query_timeout, unsupported
from proxy.execute import WATCHDOG
from proxy.policy import Policy
from proxy.result import ColumnInfo, PrivacyInfo, Result
from proxy.spellings import normalize

EXACT = "public data, no privacy cost"

# Query structure a public query may use (its expressions are checked separately).
_STRUCTURE: tuple[type[exp.Expr], ...] = (
    exp.Select,
    exp.Union,
    exp.Intersect,
    exp.Except,
    exp.From,
    exp.Join,
    exp.Table,
    exp.TableAlias,
    exp.Subquery,
    exp.CTE,
    exp.With,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Qualify,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Offset,
    exp.Distinct,
    exp.Alias,
    exp.Values,
    exp.Exists,
    exp.Window,
    exp.WindowSpec,
)


@dataclass(frozen=True)
class PublicQuery:
    """A query over public tables (or none), ready for the sandbox."""

    sql: str  # DuckDB SQL over the sandbox's copies of the public tables
    tables: tuple[tuple[str, str], ...]  # (schema, table) of the public tables it reads


def _tables(tree: exp.Expr) -> list[exp.Table]:
    """The tables ``tree`` reads (not its CTEs, by scope: proxy/cte_scope.py)."""
    ctes = cte_references(tree)
    return [t for t in tree.find_all(exp.Table) if id(t) not in ctes]


def _check_nodes(tree: exp.Expr) -> None:
    # (a recursive CTE is refused with every CTE's scope: proxy/cte_scope.py)
    for node in tree.walk():
        if isinstance(node, (exp.Column, exp.Identifier, exp.Star)):
            continue
        if isinstance(node, (*_STRUCTURE, *outer_functions.WINDOW_FUNCTIONS, exp.AggFunc)):
            continue
        if outer_functions.allowed(node):
            continue
        name = node.sql(dialect="duckdb")[:60] if isinstance(node, exp.Func) else node.key.upper()
        raise unsupported(
            f"{name} is not answered in a query over public tables or constants: only "
            "deterministic expressions, aggregates and windows are",
            "server facts (version(), settings, the current user) are answered by the "
            "Trino and PostgreSQL doors from their catalogs; here write e.g. SELECT 1 + 1",
            position_of(node),
        )


def classify(
    tree: exp.Expr, catalog: Catalog, allowed: frozenset[str] | None
) -> PublicQuery | None:
    """The query as a :class:`PublicQuery` if it reads no private table (after its
    tables are resolved: unknown or forbidden ones are refused as in the private path),
    else None (then the private path plans it)."""
    if not isinstance(tree, exp.Query):
        return None
    tables = _tables(tree)
    for table in tables:
        if not isinstance(table.this, exp.Identifier):
            return None  # table functions: the private path refuses them
    # Visibility, unknown tables and catalog names, exactly as for private queries.
    check_tables(tree, catalog, allowed)
    infos: list[TableInfo] = []
    for table in tables:
        info = catalog.get(table.db or DEFAULT_DB, table.name)
        if info is None or not info.public:
            return None
        infos.append(info)
    tree = normalize(tree.copy())  # the caller's tree is shared: respelled on a copy
    _check_nodes(tree)
    return PublicQuery(
        sql=typed_division.on_duckdb(tree).sql(dialect="duckdb"),
        tables=tuple(sorted({(i.db, i.name) for i in infos})),
    )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class PublicSandbox:
    """An in-memory DuckDB with copies of the policy's public tables and nothing else."""

    def __init__(self, policy: Policy, source: Executor, catalog: Catalog):
        self._policy = policy
        self._source = source
        self._public = [t for t in catalog.tables() if t.public]
        self._db: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self.timeout_s = policy.proxy.query_timeout_s

    def _open(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._db is not None:
                return self._db
            db = duckdb.connect(
                ":memory:",
                config={
                    "threads": self._policy.proxy.threads,
                    "memory_limit": self._policy.proxy.memory_limit,
                    "enable_external_access": False,
                    "autoinstall_known_extensions": False,
                    "autoload_known_extensions": False,
                    "allow_community_extensions": False,
                },
            )
            for info in self._public:
                data = public_table(self._source, info)
                if info.db != DEFAULT_DB:
                    db.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(info.db)}")
                db.register("__public_copy", data)
                db.execute(
                    f"CREATE TABLE {_quote(info.db)}.{_quote(info.name)} AS "
                    "SELECT * FROM __public_copy"
                )
                db.unregister("__public_copy")
            db.execute("SET lock_configuration = true")
            self._db = db
            return db

    def run(self, query: PublicQuery) -> tuple[list[str], list[tuple[Any, ...]]]:
        cursor = self._open().cursor()
        token = WATCHDOG.arm(self.timeout_s, cursor.interrupt)
        try:
            result = cursor.execute(query.sql)
            names = [str(d[0]) for d in result.description or []]
            rows = [tuple(r) for r in result.fetchall()]
        except duckdb.InterruptException:
            raise query_timeout(
                self.timeout_s, "narrow the query (it read public data only; nothing was charged)"
            ) from None
        except duckdb.Error as error:
            # Public data only: the engine's message says nothing about any person.
            first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            raise DPSQLError(
                "bad_request",
                f"the query over public tables cannot run: {first}",
                "fix the expression named above; nothing was charged",
            ) from None
        finally:
            WATCHDOG.disarm(token)
            cursor.close()
        return names, rows

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


PUBLIC_KEY_PREFIX = "public:"


def cache_key(query: PublicQuery) -> str:
    """An identity for the answer (no release is cached: it is recomputed, exactly)."""
    return PUBLIC_KEY_PREFIX + hashlib.sha256(query.sql.encode()).hexdigest()


def _width(value: Any) -> float | None:
    """An exact number has a 95% half-width of 0; other cells have none."""
    return 0.0 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def public_result(
    query: PublicQuery, names: list[str], rows: list[tuple[Any, ...]], data_version: str
) -> Result:
    """The exact answer with metadata that says so: nothing charged, no population."""
    return Result(
        columns=tuple(names),
        rows=rows,
        privacy=PrivacyInfo(
            epsilon=0.0,
            delta=0.0,
            rho=None,
            mechanism="none",
            cached=False,
            charge_id=None,
            populations=(),
            remaining={},
            partition={"strategy": "public"},
            columns=tuple(ColumnInfo(n, None, None) for n in names),
            query_epsilon=0.0,
            data_version=data_version,
            exact=EXACT,
        ),
        cache_key=cache_key(query),
        intervals=tuple(tuple(_width(v) for v in row) for row in rows),
    )


@dataclass(frozen=True)
class PublicExplanation:
    """``explain`` of a public query: what runs, and that it costs nothing."""

    query: PublicQuery
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "core_sql": self.query.sql,
            "outer_sql": "",
            "statistics": [],
            "partition": None,
            "public_domain_size": None,
            "limits": {},
            "cost": {"epsilon": 0.0, "delta": 0.0, "rho": None},
            "charges": [],
            "cache": "exact",
            "cache_key": cache_key(self.query),
            "exact": EXACT,
        }
