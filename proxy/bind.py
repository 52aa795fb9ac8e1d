"""Bind every column to a table, expand `*`, and inline row-level CTEs/subqueries.

After binding, the query is one SELECT over base tables whose every column is qualified,
so no alias, `*` or CTE can hide which column of which table an expression reads.
"""

from __future__ import annotations

import functools
from decimal import Decimal, InvalidOperation

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from proxy import semijoins, typed_division
from proxy.catalog import CATALOG_NAME, DEFAULT_DB, Catalog
from proxy.constant_times import fold_constant_times
from proxy.cte_scope import cte_references
from proxy.errors import DPSQLError, position_of, unsupported
from proxy.literal_times import fold_literal_times
from proxy.render import DUCKDB, duckdb_sql
from proxy.spellings import normalize


def check_tables(tree: exp.Expr, catalog: Catalog, allowed: frozenset[str] | None) -> None:
    """Refuse unknown, forbidden and table-function FROM items, and strip dpsql's own
    catalog name from three-part names (in place)."""
    visible = {(t.db, t.name) for t in catalog.visible_to(allowed)}
    ctes = cte_references(tree, (name for db, name in visible if db == DEFAULT_DB))
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise unsupported(
                "table functions and file readers are not allowed",
                "query the tables listed by `dpsql schema` / GET /v1/schema",
                position_of(table),
            )
        name = table.name.lower()
        db = (table.db or "").lower()
        if id(table) in ctes:
            continue
        if table.catalog:
            # catalog.schema.table: the catalog can only be dpsql's own (one database).
            if table.catalog.lower() != CATALOG_NAME:
                raise DPSQLError(
                    "not_found",
                    f"unknown catalog {table.catalog} in {table.sql()}: the only catalog "
                    f"is {CATALOG_NAME}",
                    f"write {CATALOG_NAME}.{table.db}.{table.name} or {table.db}.{table.name}",
                    position_of(table),
                )
            table.set("catalog", None)
        key = (db or DEFAULT_DB, name)
        # A table the caller may not read is answered exactly like one that does not
        # exist, so that refusals do not reveal the names of other analysts' tables.
        if catalog.get(*key) is None or key not in visible:
            raise DPSQLError(
                "not_found",
                f"unknown table {table.sql()}",
                "query the tables listed by `dpsql schema` / GET /v1/schema; ask the "
                "operator if a table you need is missing",
                position_of(table),
            )
    for column in tree.find_all(exp.Column):
        # "dpsql"."main"."prompts"."model" (Trino clients and Tableau qualify columns
        # as fully as tables): the catalog is dpsql's own, as for a table above.
        if column.args.get("catalog") and column.args["catalog"].name.lower() == CATALOG_NAME:
            column.set("catalog", None)


SchemaKey = tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]


@functools.lru_cache(maxsize=64)
def _mapping_schema(key: SchemaKey) -> MappingSchema:
    """sqlglot's schema of these tables, built once: qualify builds one from a dict on
    every call, normalising every name of every visible table (a third of its time on
    a one-table catalog). qualify only reads it."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    for db, name, columns in key:
        tables.setdefault(db, {})[name] = dict(columns)
    schema: dict[str, object] = dict(tables)
    return MappingSchema(schema, dialect="duckdb")


def _schema_of(catalog: Catalog, allowed: frozenset[str] | None) -> MappingSchema:
    # By content: planning uses a new Catalog per request (with the query's value bounds),
    # whose tables and column types are the policy's.
    tables = catalog.sqlglot_schema(allowed)
    return _mapping_schema(
        tuple(
            (db, name, tuple(columns.items()))
            for db, names in tables.items()
            for name, columns in names.items()
        )
    )


def _column_types(tree: exp.Expr, catalog: Catalog) -> typed_division.ColumnType:
    """The catalog type of a bound column ("" when its table is not a catalog table)."""
    infos = {}
    for table in tree.find_all(exp.Table):
        info = catalog.get(table.db or DEFAULT_DB, table.name)
        if info is not None:
            infos[table.alias_or_name.lower()] = info

    def column_type(column: exp.Column) -> str:
        info = infos.get(column.table.lower())
        return info.type_of(column.name) if info is not None else ""

    return column_type


def bind(
    tree: exp.Expr, catalog: Catalog, allowed: frozenset[str] | None, dialect: str = ""
) -> exp.Select:
    """Qualify against the policy catalog and inline row-level CTEs and FROM-subqueries.
    ``dialect`` (the request's) decides what its typed divisions mean where PostgreSQL
    and Trino differ (proxy/typed_division.py); without it, only what both agree on."""
    check_tables(tree, catalog, allowed)
    tree = normalize(fold_constant_times(fold_literal_times(tree)))
    try:
        qualified = qualify(
            tree,
            schema=_schema_of(catalog, allowed),
            db=DEFAULT_DB,
            dialect=DUCKDB,
            quote_identifiers=False,
            validate_qualify_columns=True,
            identify=False,
        )
    except OptimizeError as error:
        raise DPSQLError(
            "bad_request",
            f"could not bind the query: {error}",
            "check column and table names against the schema",
        ) from None
    except (OverflowError, ValueError, KeyError, IndexError, TypeError):
        # sqlglot failing on a shape it parsed (e.g. GROUP BY 9223372036854775808 in its
        # compiled build): the query text alone decides it, so refuse it plainly.
        raise DPSQLError(
            "bad_request",
            "could not bind the query",
            "check positional references (GROUP BY 1) and column names",
        ) from None
    try:
        merged = merge_subqueries(qualified)
    except (KeyError, ValueError, TypeError, AttributeError, OptimizeError):
        # sqlglot could not inline a shape it parsed (e.g. DuckDB's FROM-first query
        # nested in FROM): refuse it as unsupported rather than fail.
        raise unsupported(
            "this FROM clause could not be inlined",
            "write subqueries as (SELECT ... FROM table) with an alias",
        ) from None
    if not isinstance(merged, exp.Select):
        raise unsupported("only a single SELECT is answered", "send one SELECT query")
    typed_division.resolve(merged, _column_types(merged, catalog), dialect)
    semijoins.normalize(merged)
    for node in merged.find_all(exp.Subquery, exp.CTE):
        if semijoins.in_semi_join(node, merged):
            continue  # a filter on the person, checked by the shape checker
        raise _not_inlined(node)
    if merged.args.get("with_"):
        raise unsupported("a CTE could not be inlined", "use a FROM-subquery or plain WHERE")
    return canonicalize(merged)


def _not_inlined(node: exp.Expr) -> DPSQLError:
    """The refusal of a subquery that is not row-level, with the rewrite that answers
    its shape (a corpus of BI SQL, 2026-12-06: "move aggregation to the outer query" was
    wrong for most of those met, per-person facts joined to a table and percents of a
    total by a scalar subquery)."""
    message = (
        "a subquery or CTE could not be inlined: it must be row-level "
        "(no aggregation, DISTINCT, LIMIT or window inside) and used once in FROM"
    )
    body = node.this if isinstance(node, (exp.Subquery, exp.CTE)) else None
    aggregated = isinstance(body, exp.Select) and (
        body.args.get("group") is not None or body.find(exp.AggFunc) is not None
    )
    joined = _in_a_join(node)
    if aggregated and joined:
        hint = (
            "join the other table inside the subquery and group by its columns there, "
            "then aggregate the one row per person outside: SELECT plan, AVG(n) FROM "
            "(SELECT p.user_id, u.plan, COUNT(*) AS n FROM prompts p JOIN users u ON "
            "u.user_id = p.user_id GROUP BY p.user_id, u.plan) t GROUP BY plan"
        )
    elif aggregated and not isinstance(node.parent, (exp.From, exp.Join, exp.With)):
        hint = (
            "for a share of the total use a window over the released groups: "
            "COUNT(*) * 100.0 / SUM(COUNT(*)) OVER (); otherwise ask the total as a query "
            "of its own"
        )
    else:
        hint = "move aggregation to the outer query; filter rows in WHERE"
    return unsupported(message, hint, position_of(node))


def _in_a_join(node: exp.Expr) -> bool:
    """Whether a FROM subquery, or a CTE read in FROM, is joined with another table."""
    if isinstance(node, exp.CTE):
        query = node.find_ancestor(exp.Select)
        if query is None:
            return False
        name = node.alias.lower()
        reads = [t for t in query.find_all(exp.Table) if t.name.lower() == name and not t.db]
        return any(
            isinstance(t.parent, exp.Join)
            or (isinstance(t.parent, exp.From) and bool(query.args.get("joins")))
            for t in reads
        )
    if isinstance(node.parent, exp.Join):
        return True
    outer = node.parent.parent if isinstance(node.parent, exp.From) else None
    return isinstance(outer, exp.Select) and bool(outer.args.get("joins"))


def _canonical_number(literal: exp.Literal) -> exp.Expr:
    if len(literal.this) > 40:  # beyond any exact numeric type: leave it for DuckDB
        return literal
    try:
        value = Decimal(literal.this)
    except InvalidOperation:
        return literal
    if value == value.to_integral_value():
        return exp.Literal.number(str(int(value)))
    return exp.Literal.number(format(value.normalize(), "f"))


def _sorted_conjuncts(condition: exp.Expr) -> exp.Expr:
    parts = (
        [c.unnest() for c in condition.flatten()]
        if isinstance(condition, exp.And)
        else [condition.unnest()]
    )
    for part in parts:
        if isinstance(part, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            for side in ("this", "expression"):
                lit = part.args.get(side)
                if isinstance(lit, exp.Literal) and not lit.is_string:
                    part.set(side, _canonical_number(lit))
    if len(parts) == 1:
        return parts[0]
    parts.sort(key=duckdb_sql)
    return exp.and_(*parts, copy=False)


def canonicalize(select: exp.Select) -> exp.Select:
    """One spelling per query, so equal queries share a cache key: table
    aliases t0, t1, … in FROM order, unquoted lower-case identifiers, WHERE and ON
    conjuncts sorted, integral numeric literals in comparisons without a fraction."""
    # Semi-join subqueries first: their table gets s0, s1, … within its own scope, so
    # that an inner table named like an outer one is never renamed to the outer alias.
    for i, (found, _) in enumerate(semijoins.semi_joins(select)):
        inner = found.args["query"].this
        table = inner.args["from_"].this if inner.args.get("from_") else None
        if isinstance(table, exp.Table):
            old = table.alias_or_name.lower()
            table.set("alias", exp.TableAlias(this=exp.to_identifier(f"s{i}")))
            for col in inner.find_all(exp.Column):
                if col.table.lower() == old:
                    col.set("table", exp.to_identifier(f"s{i}"))
    from_ = select.args.get("from_")
    tables = [from_.this] if from_ is not None else []
    tables += [j.this for j in select.args.get("joins") or []]
    mapping: dict[str, str] = {}
    for i, table in enumerate(tables):
        if isinstance(table, exp.Table):
            mapping[table.alias_or_name.lower()] = f"t{i}"
            table.set("alias", exp.TableAlias(this=exp.to_identifier(f"t{i}")))
    # One walk for both: a column's new table identifier is queued after the column
    # itself, so it is still visited and lower-cased.
    for node in select.walk():
        if isinstance(node, exp.Column):
            if node.table and node.table.lower() in mapping:
                node.set("table", exp.to_identifier(mapping[node.table.lower()]))
        elif isinstance(node, exp.Identifier):
            node.set("quoted", False)
            node.set("this", node.name.lower())
    where = select.args.get("where")
    if where is not None:
        where.set("this", _sorted_conjuncts(where.this))
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            join.set("on", _sorted_conjuncts(join.args["on"]))
    return select
