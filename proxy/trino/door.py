"""One statement in, one Answer out: routing between the shadow catalog and the engine.

* Session and prepared-statement commands change only the client's session (headers).
* Catalog statements (SHOW …, DESCRIBE, information_schema / system tables, FROM-less
  handshakes such as ``SELECT version()``, and any ``… LIMIT 0``) run on the data-free
  shadow catalog: exact, free, never touching a private row.
* Everything else is a question for the engine (dialect ``trino``), which answers with
  noise and a charge, replays a cached release, or refuses before any charge.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from proxy import catalog_limits
from proxy.errors import DPSQLError
from proxy.memo import Memo
from proxy.parse import parse
from proxy.result import Result
from proxy.server.answers import privacy_dict
from proxy.server.auth import Caller
from proxy.trino import series_limit
from proxy.trino import session as S
from proxy.trino import types as T
from proxy.trino.adapter import EngineAdapter
from proxy.trino.answer import Answer, empty
from proxy.trino.shadow import CATALOG, ShadowCatalog
from proxy.trino.statements import (
    Kind,
    Statement,
    bind_parameters,
    classify,
    parameters,
    schema_parts,
    show_sql,
    table_parts,
    unquote,
)

VERSION = "476-dpsql"
MAX_NESTING = 3  # EXECUTE of a prepared EXECUTE IMMEDIATE ... is refused beyond this
ROUTE_MEMO_SIZE = 1024


@dataclass(frozen=True)
class ClientSession:
    """What the client's X-Trino-* headers say about its session."""

    catalog: str = CATALOG
    schema: str = "main"
    session_header: str | None = None
    prepared: Mapping[str, str] = field(default_factory=dict)
    time_zone: str | None = None  # X-Trino-Time-Zone: where the clock is read


ROW_PREVIEW_HINT = (
    "dpsql releases only noisy aggregates, never rows, so table previews and samples are "
    "refused. Run DESCRIBE <table> or SELECT * FROM <table> LIMIT 0 for the columns and "
    "their types, and SELECT <column>, COUNT(*) FROM <table> GROUP BY <column> to explore "
    "values"
)


class TrinoDoor:
    def __init__(self, adapter: EngineAdapter):
        self.adapter = adapter
        self._shadows: dict[frozenset[str], ShadowCatalog] = {}
        self._lock = threading.Lock()
        # Parsing and re-rendering a statement is most of what the door adds to a cached
        # answer; BI tools send the same texts again and again.
        self._routes: Memo[tuple[str, str, str], PrivateRoute] = Memo(ROUTE_MEMO_SIZE)
        # id(result) and the intervals flag -> (the result, its answer): the engine hands
        # back the same Result for a repeat while the budgets it shows are current, so
        # its answer is built once; the result is held so that its id is not reused.
        self._answers: Memo[tuple[int, bool], tuple[Result, Answer]] = Memo(ROUTE_MEMO_SIZE)

    def shadow(self, tables: frozenset[str]) -> ShadowCatalog:
        with self._lock:
            found = self._shadows.get(tables)
            if found is None:
                found = ShadowCatalog(self.adapter.visible_tables(tables))
                self._shadows[tables] = found
            return found

    def close(self) -> None:
        with self._lock:
            for shadow in self._shadows.values():
                shadow.close()
            self._shadows.clear()

    # --- dispatch ------------------------------------------------------------------------
    def execute(self, text: str, client: ClientSession, caller: Caller, depth: int = 0) -> Answer:
        if depth > MAX_NESTING:
            raise DPSQLError("bad_request", "prepared statements nest too deeply", "")
        statement = classify(text)
        kind = statement.kind
        if kind is Kind.QUERY:
            return self._query(statement.text, client, caller, [])
        if kind is Kind.EXECUTE_IMMEDIATE:
            # How the trino client binds parameters: the whole text (values included)
            # fixes the bound statement, so its route is kept under that text.
            known = self._routes.get((statement.text, client.catalog, client.schema))
            if known is not None:
                return self._private_query(known, client, caller)
            sql, values = unquote(statement.name), parameters(statement.using)
            return self._query(sql, client, caller, values, memo=statement.text)
        if kind is Kind.EXECUTE:
            prepared = {k.lower(): v for k, v in client.prepared.items()}
            body = prepared.get(statement.name.lower())
            if body is None:
                raise DPSQLError(
                    "not_found",
                    f"prepared statement {statement.name!r} does not exist",
                    "PREPARE it first (the client sends it back in X-Trino-Prepared-Statement)",
                )
            if classify(body).kind is not Kind.QUERY:
                return self.execute(body, client, caller, depth + 1)
            return self._query(body, client, caller, parameters(statement.using))
        if kind is Kind.PREPARE:
            value = urllib.parse.quote_plus(statement.body)
            name = urllib.parse.quote_plus(statement.name)
            return empty("PREPARE", (("X-Trino-Added-Prepare", f"{name}={value}"),))
        if kind is Kind.DEALLOCATE:
            name = urllib.parse.quote_plus(statement.name)
            return empty("DEALLOCATE", (("X-Trino-Deallocated-Prepare", name),))
        if kind in (Kind.SET_SESSION, Kind.RESET_SESSION, Kind.SHOW_SESSION):
            return self._session(statement, client, caller)
        if kind is Kind.USE:
            return self._use(statement, client, caller)
        if kind is Kind.SHOW_CREATE_TABLE:
            return self._show_create(statement, client, caller)
        if kind is Kind.TRANSACTION:
            raise DPSQLError(
                "unsupported_sql",
                "transactions are not supported: dpsql is read-only",
                "use autocommit (the trino client's default)",
            )
        if kind is Kind.SHOW_COLUMNS:
            cat, schema, table = table_parts(
                statement.name, catalog=client.catalog, schema=client.schema
            )
            if cat != CATALOG or not self.shadow(caller.tables).has_table(schema, table):
                raise DPSQLError(
                    "not_found",
                    f"table '{cat}.{schema}.{table}' does not exist",
                    "SHOW TABLES lists the tables you may query",
                )
        sql = show_sql(statement, catalog=client.catalog, schema=client.schema)
        return self._query(sql, client, caller, [])

    def execute_cached(self, text: str, client: ClientSession, caller: Caller) -> Answer | None:
        """The answer to a query (plain, or bound by EXECUTE IMMEDIATE) whose text this
        door has routed before and whose release the engine answers from memory
        (``run_cached``: a repeat the analyst already holds, never planned, executed or
        charged here); otherwise None, having asked nothing of the engine (then call
        :meth:`execute`). Cheap and non-blocking, so the routes may call it on the event
        loop."""
        statement = classify(text)
        if statement.kind not in (Kind.QUERY, Kind.EXECUTE_IMMEDIATE):
            return None
        route = self._routes.get((statement.text, client.catalog, client.schema))
        if route is None or route.series_limit is not None:
            return None
        current = S.from_header(
            client.session_header, self.adapter.analyst_defaults(caller.name), client.time_zone
        )
        result = self.adapter.run_cached(
            current.request(route.sql, analyst=caller.name, tables=caller.tables)
        )
        if result is None:
            return None
        key = (id(result), current.intervals)
        kept = self._answers.get(key)
        if kept is None or kept[0] is not result:
            kept = (result, _answer(result, current, ()))
            self._answers.put(key, kept)
        return kept[1]

    # --- session commands ----------------------------------------------------------------
    def _session(self, statement: Statement, client: ClientSession, caller: Caller) -> Answer:
        defaults = self.adapter.analyst_defaults(caller.name)
        name = statement.name.lower()
        if statement.kind is Kind.SHOW_SESSION:
            current = S.from_header(client.session_header, defaults, client.time_zone)
            rows = S.show_rows(current, defaults)
            if statement.body:
                # LIKE on the property name, evaluated by the shadow for exact semantics.
                names = {r[0] for r in self._like(rows, statement.body, caller)}
                rows = [r for r in rows if r[0] in names]
            names_ = ("Name", "Value", "Default", "Type", "Description")
            return Answer(names_, (T.VARCHAR,) * 5, [tuple(r) for r in rows])
        if not name.startswith(S.PREFIX):
            # Trino's own properties (clients set some): accepted, without effect.
            if statement.kind is Kind.SET_SESSION:
                text = urllib.parse.quote(statement.body.strip().strip("'"))
                quoted = urllib.parse.quote(name)
                return empty("SET SESSION", (("X-Trino-Set-Session", f"{quoted}={text}"),))
            return empty("RESET SESSION", (("X-Trino-Clear-Session", urllib.parse.quote(name)),))
        prop = name[len(S.PREFIX) :]
        if statement.kind is Kind.RESET_SESSION:
            if prop not in S.BY_NAME:
                raise DPSQLError("bad_request", f"unknown session property {name}", "SHOW SESSION")
            return empty("RESET SESSION", (("X-Trino-Clear-Session", name),))
        value = S.parse_value(prop, statement.body)
        return empty("SET SESSION", (("X-Trino-Set-Session", S.header_value(prop, value)),))

    def _like(
        self, rows: Sequence[tuple[str, ...]], like: str, caller: Caller
    ) -> list[tuple[Any, ...]]:
        values = ", ".join(exp.Literal.string(r[0]).sql(dialect="trino") for r in rows)
        sql = f"SELECT name FROM (VALUES {values}) AS t(name) WHERE name {like}"
        return self._query(sql, ClientSession(), caller, []).rows

    def _use(self, statement: Statement, client: ClientSession, caller: Caller) -> Answer:
        cat, schema = schema_parts(statement.name, catalog=client.catalog)
        if cat != CATALOG:
            raise DPSQLError("not_found", f"catalog '{cat}' does not exist", "SHOW CATALOGS")
        if schema not in self.shadow(caller.tables).schemas:
            raise DPSQLError("not_found", f"schema '{cat}.{schema}' does not exist", "SHOW SCHEMAS")
        return empty("USE", (("X-Trino-Set-Catalog", cat), ("X-Trino-Set-Schema", schema)))

    def _show_create(self, statement: Statement, client: ClientSession, caller: Caller) -> Answer:
        cat, schema, name = table_parts(
            statement.name, catalog=client.catalog, schema=client.schema
        )
        table = self.shadow(caller.tables).table(schema, name) if cat == CATALOG else None
        if table is None:
            raise DPSQLError(
                "not_found", f"table '{cat}.{schema}.{name}' does not exist", "SHOW TABLES"
            )
        columns = ",\n".join(f"   {c} {T.from_duckdb(d).name}" for c, d in table.columns)
        text = f"CREATE TABLE {CATALOG}.{schema}.{name} (\n{columns}\n)"
        return Answer(("Create Table",), (T.VARCHAR,), [(text,)])

    # --- queries ---------------------------------------------------------------------------
    def _query(
        self,
        sql: str,
        client: ClientSession,
        caller: Caller,
        values: list[exp.Expr],
        memo: str | None = None,
    ) -> Answer:
        """``memo``: the text the route is kept under when ``values`` are bound (the
        whole EXECUTE IMMEDIATE); without it, a statement with values is not kept."""
        key = (sql if memo is None else memo, client.catalog, client.schema)
        if not values and memo is None:
            known = self._routes.get(key)
            if known is not None:
                return self._private_query(known, client, caller)
        max_length, max_nodes = self.adapter.sql_limits
        tree = parse(sql, "trino", max_length=max_length, max_nodes=max_nodes)
        if values or any(True for _ in tree.find_all(exp.Placeholder)):
            tree = bind_parameters(tree, values)
        in_scope = catalog_limits.cte_references(tree)
        refs = [t for t in tree.find_all(exp.Table) if id(t) not in in_scope]
        meta = [t for t in refs if _is_meta(t, client)]
        if meta and len(meta) != len(refs):
            raise DPSQLError(
                "unsupported_sql",
                "catalog tables (information_schema, system) and data tables cannot be mixed",
                "ask the catalog and the data in separate queries",
            )
        if isinstance(tree, exp.Query) and refs and not meta and _limit_zero(tree):
            planned = self._planned_columns(_private_route(tree.copy(), client), client, caller)
            if planned is not None:
                return planned
        if isinstance(tree, exp.Query) and (not refs or meta or _limit_zero(tree)):
            return self._catalog_query(tree, client, caller)
        route = _private_route(tree, client)
        if not values or memo is not None:
            self._routes.put(key, route)
        return self._private_query(route, client, caller)

    def _planned_columns(
        self, route: PrivateRoute, client: ClientSession, caller: Caller
    ) -> Answer | None:
        """``... LIMIT 0`` over data (how Superset and JDBC learn a query's columns): the
        names and types the answer will have, from the engine's plan, free. The shadow
        typed them its own way (``SUM`` of integers a DECIMAL where the answer has a
        BIGINT: a probe, 2026-12-06). None where the plan does not say, or intervals
        add columns only the release decides: the shadow answers."""
        current = S.from_header(
            client.session_header, self.adapter.analyst_defaults(caller.name), client.time_zone
        )
        if current.intervals:
            return None
        planned = self.adapter.output_columns(
            current.request(route.sql, analyst=caller.name, tables=caller.tables)
        )
        if planned is None:
            return None
        return Answer(
            tuple(name for name, _ in planned), tuple(T.from_duckdb(t) for _, t in planned), []
        )

    def _catalog_query(self, tree: exp.Expr, client: ClientSession, caller: Caller) -> Answer:
        shadow = self.shadow(caller.tables)
        in_scope = catalog_limits.cte_references(tree)
        for table in list(tree.find_all(exp.Table)):
            if not isinstance(table.this, exp.Identifier):
                raise DPSQLError(
                    "unsupported_sql",
                    "table functions are not answered",
                    "query information_schema or the tables SHOW TABLES lists",
                )
            if id(table) in in_scope:
                continue
            table.replace(shadow.map_table(table, catalog=client.catalog, schema=client.schema))
        if isinstance(tree, exp.Select):
            # Trino names an unnamed output column _colN (DuckDB would use its text).
            for i, item in enumerate(list(tree.expressions)):
                if not isinstance(item, (exp.Alias, exp.Column, exp.Star)):
                    item.replace(exp.alias_(item.copy(), f"_col{i}"))
        tree = tree.transform(lambda node: _handshake(node, client, caller), copy=False)
        return shadow.run(tree)

    def _private_query(self, route: PrivateRoute, client: ClientSession, caller: Caller) -> Answer:
        current = S.from_header(
            client.session_header, self.adapter.analyst_defaults(caller.name), client.time_zone
        )
        part = route.series_limit
        try:
            if part is None:
                request = current.request(route.sql, analyst=caller.name, tables=caller.tables)
                result = self.adapter.run(request)
                planned = None
                if not result.rows:
                    # no value to read types from: the plan's (free; not varchar)
                    found = self.adapter.output_columns(request)
                    if found is not None and len(found) == len(result.columns):
                        planned = tuple(T.from_duckdb(t) for _, t in found)
                return _answer(result, current, (), planned)
            # The chart is checked before the ranking is charged: a chart refused for
            # its text would otherwise cost the ranking for nothing (review, 2026-12-04).
            most = self.adapter.sql_limits[1]
            self.adapter.check(
                current.request(
                    series_limit.stand_in(part, most).sql(dialect="trino"),
                    analyst=caller.name,
                    tables=caller.tables,
                )
            )
            ranking = self.adapter.run(
                current.request(
                    part.ranking.sql(dialect="trino"), analyst=caller.name, tables=caller.tables
                )
            )
            position = [c.lower() for c in ranking.columns].index(part.key_output)
            keys = [row[position] for row in ranking.rows]
            chart = series_limit.restrict(part, keys)
            result = self.adapter.run(
                current.request(
                    chart.sql(dialect="trino"), analyst=caller.name, tables=caller.tables
                )
            )
            return _answer(result, current, (ranking,))
        except DPSQLError as error:
            if error.code == "unsupported_sql" and route.row_preview:
                raise DPSQLError(
                    "unsupported_sql", f"{error.message}: a row preview", ROW_PREVIEW_HINT
                ) from None
            raise


@dataclass(frozen=True)
class PrivateRoute:
    """How a statement text reaches the engine from one client catalog and schema: the
    engine's SQL, or a series-limit chart's two parts; kept per text (the translation
    reads only the text and the client's catalog and schema, never the caller)."""

    sql: str
    series_limit: series_limit.SeriesLimit | None
    row_preview: bool


def _private_route(tree: exp.Expr, client: ClientSession) -> PrivateRoute:
    """The engine's SQL for a data query (dpsql's one catalog dropped, bare names in the
    client's schema); another catalog is refused."""
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # the engine refuses table functions with its own message
        if table.catalog:
            if table.catalog.lower() != CATALOG:
                raise DPSQLError(
                    "not_found",
                    f"catalog '{table.catalog}' does not exist",
                    f"the only catalog is {CATALOG}",
                )
            table.set("catalog", None)
        if not table.db and client.schema != "main":
            table.set("db", exp.to_identifier(client.schema))
    return PrivateRoute(tree.sql(dialect="trino"), series_limit.split(tree), _is_row_preview(tree))


def _is_meta(table: exp.Table, client: ClientSession) -> bool:
    catalog = (table.catalog or client.catalog).lower()
    return (table.db or "").lower() == "information_schema" or catalog == "system"


def _limit_zero(tree: exp.Expr) -> bool:
    limit = tree.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    return isinstance(value, exp.Literal) and value.is_int and int(value.this) == 0


def _is_row_preview(tree: exp.Expr) -> bool:
    """A SELECT of rows (no aggregate, no GROUP BY): a table preview or sample."""
    if not isinstance(tree, exp.Select) or tree.args.get("group") or tree.args.get("distinct"):
        return False
    return not any(True for _ in tree.find_all(exp.AggFunc))


def _handshake(node: exp.Expr, client: ClientSession, caller: Caller) -> exp.Expr:
    """Session functions the shadow cannot know, as literals."""
    if isinstance(node, exp.CurrentUser):
        return exp.Literal.string(caller.name)
    if isinstance(node, exp.CurrentCatalog):
        return exp.Literal.string(client.catalog)
    if isinstance(node, exp.CurrentVersion):
        return exp.Literal.string(VERSION)
    if isinstance(node, exp.CurrentSchema) or (
        isinstance(node, exp.Column)
        and not node.table
        and not node.this.quoted
        and node.name.lower() == "current_schema"
    ):
        return exp.Literal.string(client.schema)
    if isinstance(node, exp.CurrentTimezone):
        return exp.Literal.string("UTC")
    return node


def _answer(
    result: Result,
    current: S.Session,
    earlier: tuple[Result, ...],
    planned: tuple[T.TrinoType, ...] | None = None,
) -> Answer:
    """An engine result as a Trino answer, with its privacy metadata as warnings and
    headers (a series-limit chart also reports the ranking it was filtered by);
    ``planned``: the columns' types where no value says (an answer of no rows)."""
    names = list(result.columns)
    columns = (
        [list(col) for col in zip(*result.rows, strict=True)]
        if result.rows
        else [[] for _ in names]
    )
    types = [T.infer(col) for col in columns]
    if planned is not None:
        types = [
            known if all(v is None for v in col) else inferred
            for known, inferred, col in zip(planned, types, columns, strict=True)
        ]
    if current.intervals and result.intervals:
        widths = list(zip(*result.intervals, strict=True))
        out_names: list[str] = []
        out_cols: list[list[Any]] = []
        out_types: list[T.TrinoType] = []
        for i, name in enumerate(names):
            out_names.append(name)
            out_cols.append(columns[i])
            out_types.append(types[i])
            if i < len(widths) and any(w is not None for w in widths[i]):
                out_names.append(f"{name}_ci95")
                out_cols.append(list(widths[i]))
                out_types.append(T.DOUBLE)
        names, columns, types = out_names, out_cols, out_types
    rows = [tuple(r) for r in zip(*columns, strict=True)] if result.rows else []
    privacy = privacy_dict(result.privacy)
    parts = [*(privacy_dict(e.privacy) for e in earlier), privacy]
    epsilon = sum(float(p["epsilon"]) for p in parts)
    delta = sum(float(p["delta"]) for p in parts)
    cached = all(p["cached"] for p in parts)
    remaining = dict(privacy["remaining"])
    warnings = [_privacy_line(p, len(parts) > 1 and i == 0) for i, p in enumerate(parts)]
    for info in result.privacy.columns:
        if info.half_width_95 is not None:
            warnings.append(
                f"dpsql: column {info.name!r} has noise of scale {info.noise_scale:.4g}; "
                f"95% of answers lie within ±{info.half_width_95:.4g} of the true value"
            )
    # The ranking chose the series by noisy values: what it says of that choice is the
    # chart's too (a review, 2026-12-06: Superset's "top N series" said nothing of it).
    warnings.extend(f"dpsql: series ranking: {w}" for e in earlier for w in e.doubts)
    warnings.extend(result.warnings)
    headers = (
        ("X-DPSQL-Epsilon", repr(epsilon)),
        ("X-DPSQL-Delta", repr(delta)),
        ("X-DPSQL-Cached", "true" if cached else "false"),
        ("X-DPSQL-Mechanism", str(privacy["mechanism"])),
        ("X-DPSQL-Charge-Id", ",".join(str(p["charge_id"]) for p in parts)),
        ("X-DPSQL-Remaining", ",".join(f"{k}={v!r}" for k, v in remaining.items())),
    )
    return Answer(
        names=tuple(names),
        types=tuple(types),
        rows=rows,
        warnings=tuple(warnings),
        headers=headers,
        privacy={"epsilon": epsilon, "delta": delta, "cached": cached, "releases": parts},
    )


def _privacy_line(p: dict[str, Any], ranking: bool) -> str:
    what = "series ranking" if ranking else "answer"
    if p.get("exact"):
        return f"dpsql: {what} is exact: {p['exact']}"
    remaining = ", ".join(f"{k} {v:.4g}" for k, v in p["remaining"].items())
    if p["cached"]:
        return (
            f"dpsql: {what} replayed from the cache of charge {p['charge_id']}: nothing "
            f"charged; ε remaining: {remaining}"
        )
    return (
        f"dpsql: {what} charged ε={p['epsilon']:.4g}, δ={p['delta']:.3g} ({p['mechanism']}, "
        f"charge {p['charge_id']}); ε remaining: {remaining}"
    )
