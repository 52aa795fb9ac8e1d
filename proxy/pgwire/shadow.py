"""The shadow catalog: pg_catalog and information_schema emulated in a data-free DuckDB.

Clients send catalog SQL before any user query (psql's \\d, pgjdbc's DatabaseMetaData,
SQLAlchemy's inspector). Those queries run here, never in the engine: an in-memory
DuckDB whose ``pgc`` and ``infoschema`` schemas hold PostgreSQL-shaped catalog rows
built from the policy's visible tables and their column types, and nothing else. No
private row exists in it, so answers are exact and cost no budget. It is sandboxed
(no file or network access, no extensions) because analysts choose the SQL.

The client's PostgreSQL SQL is rewritten with sqlglot: ``pg_catalog.X`` and bare
``pg_X`` tables read ``pgc.X``, ``information_schema.X`` reads ``infoschema.X``,
``::regclass``-style casts become lookups, and session functions become literals.
PostgreSQL's ``public`` schema is DuckDB's ``main``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from proxy import catalog_limits as limits
from proxy import typed_division
from proxy.pgwire import pgtypes
from proxy.pgwire.sqlstate import (
    FEATURE_NOT_SUPPORTED,
    PROGRAM_LIMIT_EXCEEDED,
    QUERY_CANCELED,
    WireError,
)
from proxy.pgwire.sqltext import outside_literals

PUBLIC = "public"
OWNER = "dpsql"
_NS_CATALOG, _NS_PUBLIC, _NS_INFO = 11, 2200, 13_000
_FIRST_OID = 16_384
# Table OIDs: even numbers from here up to 2**31 (int4-safe), hashed from the table's
# own schema and name (its row type is the OID + 1). Far above the fixed catalog OIDs
# and the schemas' (_FIRST_OID - 100 + i), so the two never meet.
_TABLE_OIDS = 1 << 20
_TABLE_SLOTS = (2**31 - _TABLE_OIDS) // 2
# The database every client sees, and the OID of the one it connected to when that
# has another name (per session: never stored in the catalog other analysts share).
DATABASE, _DATABASE_OID, _SESSION_DATABASE_OID = "dpsql", 16_000, 16_001

# Function names answered by macros of the shadow database (after pg_catalog. is
# stripped); anything else unknown fails in DuckDB and is refused with a SQLSTATE.
_MACROS = """
CREATE MACRO pg_get_userbyid(o) AS '{owner}';
CREATE MACRO pg_table_is_visible(o) AS true;
CREATE MACRO pg_type_is_visible(o) AS true;
CREATE MACRO pg_collation_is_visible(o) AS true;
CREATE MACRO pg_function_is_visible(o) AS true;
CREATE MACRO pg_get_expr(a, b) AS NULL::VARCHAR, (a, b, c) AS NULL::VARCHAR;
CREATE MACRO pg_get_constraintdef(a) AS NULL::VARCHAR, (a, b) AS NULL::VARCHAR;
CREATE MACRO pg_get_indexdef(a) AS NULL::VARCHAR, (a, b, c) AS NULL::VARCHAR;
CREATE MACRO pg_get_viewdef(a) AS NULL::VARCHAR, (a, b) AS NULL::VARCHAR;
CREATE MACRO pg_get_serial_sequence(a, b) AS NULL::VARCHAR;
CREATE MACRO pg_get_statisticsobjdef_columns(a) AS NULL::VARCHAR;
CREATE MACRO pg_relation_is_publishable(a) AS false;
CREATE MACRO pg_encoding_to_char(a) AS 'UTF8';
CREATE MACRO pg_is_in_recovery() AS false;
CREATE MACRO pg_tablespace_location(a) AS '';
CREATE MACRO has_table_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO has_schema_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO has_database_privilege(a, b) AS true, (a, b, c) AS true;
CREATE MACRO has_column_privilege(a, b, c) AS true, (a, b, c, d) AS true;
CREATE MACRO array_upper(a, d) AS len(a);
CREATE MACRO array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END;
CREATE MACRO quote_ident(a) AS '"' || replace(a, '"', '""') || '"';
CREATE MACRO _pg_expandarray(a) AS {{'x': a[1], 'n': 1}};
CREATE MACRO shobj_description(o, k) AS NULL::VARCHAR;
"""

_TABLES = """
CREATE TABLE pgc.pg_namespace (oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR[]);
CREATE TABLE pgc.pg_class (oid BIGINT, relname VARCHAR, relnamespace BIGINT, reltype BIGINT,
  reloftype BIGINT, relowner BIGINT, relam BIGINT, relfilenode BIGINT, reltablespace BIGINT,
  relpages INTEGER, reltuples REAL, relallvisible INTEGER, reltoastrelid BIGINT,
  relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence VARCHAR, relkind VARCHAR,
  relnatts SMALLINT, relchecks SMALLINT, relhasrules BOOLEAN, relhastriggers BOOLEAN,
  relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN,
  relispopulated BOOLEAN, relreplident VARCHAR, relispartition BOOLEAN, relrewrite BIGINT,
  relfrozenxid BIGINT, relminmxid BIGINT, relacl VARCHAR[], reloptions VARCHAR[],
  relpartbound VARCHAR);
CREATE TABLE pgc.pg_attribute (attrelid BIGINT, attname VARCHAR, atttypid BIGINT,
  attstattarget INTEGER, attlen SMALLINT, attnum SMALLINT, attndims INTEGER,
  attcacheoff INTEGER, atttypmod INTEGER, attbyval BOOLEAN, attalign VARCHAR,
  attstorage VARCHAR, attcompression VARCHAR, attnotnull BOOLEAN, atthasdef BOOLEAN,
  atthasmissing BOOLEAN, attidentity VARCHAR, attgenerated VARCHAR, attisdropped BOOLEAN,
  attislocal BOOLEAN, attinhcount INTEGER, attcollation BIGINT, attacl VARCHAR[],
  attoptions VARCHAR[], attfdwoptions VARCHAR[], attmissingval VARCHAR);
CREATE TABLE pgc.pg_type (oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT,
  typlen SMALLINT, typbyval BOOLEAN, typtype VARCHAR, typcategory VARCHAR,
  typispreferred BOOLEAN, typisdefined BOOLEAN, typdelim VARCHAR, typrelid BIGINT,
  typsubscript VARCHAR, typelem BIGINT, typarray BIGINT, typinput VARCHAR, typoutput VARCHAR,
  typreceive VARCHAR, typsend VARCHAR, typmodin VARCHAR, typmodout VARCHAR,
  typanalyze VARCHAR, typalign VARCHAR, typstorage VARCHAR, typnotnull BOOLEAN,
  typbasetype BIGINT, typtypmod INTEGER, typndims INTEGER, typcollation BIGINT,
  typdefaultbin VARCHAR, typdefault VARCHAR, typacl VARCHAR[]);
CREATE TABLE pgc.dpsql_formats (oid BIGINT, formatted VARCHAR);
CREATE TABLE pgc.pg_description (objoid BIGINT, classoid BIGINT, objsubid INTEGER,
  description VARCHAR);
CREATE TABLE pgc.pg_index (indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT,
  indnkeyatts SMALLINT, indisunique BOOLEAN, indnullsnotdistinct BOOLEAN,
  indisprimary BOOLEAN, indisexclusion BOOLEAN, indimmediate BOOLEAN,
  indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN,
  indislive BOOLEAN, indisreplident BOOLEAN, indkey INTEGER[], indcollation BIGINT[],
  indclass BIGINT[], indoption INTEGER[], indexprs VARCHAR, indpred VARCHAR);
CREATE TABLE pgc.pg_constraint (oid BIGINT, conname VARCHAR, connamespace BIGINT,
  contype VARCHAR, condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN,
  conrelid BIGINT, contypid BIGINT, conindid BIGINT, conparentid BIGINT, confrelid BIGINT,
  confupdtype VARCHAR, confdeltype VARCHAR, confmatchtype VARCHAR, conislocal BOOLEAN,
  coninhcount INTEGER, connoinherit BOOLEAN, conkey INTEGER[], confkey INTEGER[],
  conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[], confdelsetcols INTEGER[],
  conexclop BIGINT[], conbin VARCHAR);
CREATE TABLE pgc.pg_attrdef (oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR);
CREATE TABLE pgc.pg_am (oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR);
CREATE TABLE pgc.pg_database (oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER,
  datlocprovider VARCHAR, datistemplate BOOLEAN, datallowconn BOOLEAN,
  datconnlimit INTEGER, datfrozenxid BIGINT, datminmxid BIGINT, dattablespace BIGINT,
  datcollate VARCHAR, datctype VARCHAR, daticulocale VARCHAR, datcollversion VARCHAR,
  datacl VARCHAR[]);
CREATE TABLE pgc.pg_roles (oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN,
  rolcreaterole BOOLEAN, rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolreplication BOOLEAN,
  rolconnlimit INTEGER, rolpassword VARCHAR, rolvaliduntil TIMESTAMP, rolbypassrls BOOLEAN,
  rolconfig VARCHAR[]);
CREATE TABLE pgc.pg_user (usename VARCHAR, usesysid BIGINT, usecreatedb BOOLEAN,
  usesuper BOOLEAN, userepl BOOLEAN, usebypassrls BOOLEAN, passwd VARCHAR,
  valuntil TIMESTAMP, useconfig VARCHAR[]);
CREATE TABLE pgc.pg_collation (oid BIGINT, collname VARCHAR, collnamespace BIGINT,
  collowner BIGINT, collprovider VARCHAR, collisdeterministic BOOLEAN, collencoding INTEGER,
  collcollate VARCHAR, collctype VARCHAR, colliculocale VARCHAR, collversion VARCHAR);
CREATE TABLE pgc.pg_tablespace (oid BIGINT, spcname VARCHAR, spcowner BIGINT,
  spcacl VARCHAR[], spcoptions VARCHAR[]);
CREATE TABLE pgc.pg_policy (oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR,
  polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR);
CREATE TABLE pgc.pg_statistic_ext (oid BIGINT, stxrelid BIGINT, stxname VARCHAR,
  stxnamespace BIGINT, stxowner BIGINT, stxstattarget INTEGER, stxkeys INTEGER[],
  stxkind VARCHAR[], stxexprs VARCHAR);
CREATE TABLE pgc.pg_publication (oid BIGINT, pubname VARCHAR, pubowner BIGINT,
  puballtables BOOLEAN, pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN,
  pubtruncate BOOLEAN, pubviaroot BOOLEAN);
CREATE TABLE pgc.pg_publication_namespace (oid BIGINT, pnpubid BIGINT, pnnspid BIGINT);
CREATE TABLE pgc.pg_publication_rel (oid BIGINT, prpubid BIGINT, prrelid BIGINT,
  prqual VARCHAR, prattrs INTEGER[]);
CREATE TABLE pgc.pg_inherits (inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER,
  inhdetachpending BOOLEAN);
CREATE TABLE pgc.pg_enum (oid BIGINT, enumtypid BIGINT, enumsortorder REAL, enumlabel VARCHAR);
CREATE TABLE pgc.pg_sequence (seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT,
  seqincrement BIGINT, seqmax BIGINT, seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN);
CREATE TABLE pgc.pg_opclass (oid BIGINT, opcmethod BIGINT, opcname VARCHAR,
  opcnamespace BIGINT, opcowner BIGINT, opcfamily BIGINT, opcintype BIGINT,
  opcdefault BOOLEAN, opckeytype BIGINT);
CREATE TABLE pgc.pg_proc (oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT,
  prokind VARCHAR, prorettype BIGINT, proargtypes VARCHAR, proretset BOOLEAN);
CREATE TABLE pgc.pg_trigger (oid BIGINT, tgrelid BIGINT, tgname VARCHAR, tgenabled VARCHAR,
  tgisinternal BOOLEAN);
CREATE TABLE pgc.pg_rewrite (oid BIGINT, rulename VARCHAR, ev_class BIGINT);
CREATE TABLE pgc.pg_extension (oid BIGINT, extname VARCHAR, extowner BIGINT,
  extnamespace BIGINT, extrelocatable BOOLEAN, extversion VARCHAR);
CREATE TABLE pgc.pg_foreign_table (ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]);
CREATE TABLE pgc.pg_partitioned_table (partrelid BIGINT, partstrat VARCHAR,
  partnatts SMALLINT);
CREATE TABLE pgc.pg_range (rngtypid BIGINT, rngsubtype BIGINT);
CREATE TABLE pgc.pg_settings (name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR,
  short_desc VARCHAR, context VARCHAR, vartype VARCHAR);
CREATE VIEW pgc.pg_tables AS SELECT n.nspname AS schemaname, c.relname AS tablename,
  '{owner}' AS tableowner, NULL::VARCHAR AS tablespace, false AS hasindexes,
  false AS hasrules, false AS hastriggers, false AS rowsecurity
  FROM pgc.pg_class c JOIN pgc.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'r';
CREATE VIEW pgc.pg_views AS SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS viewname,
  NULL::VARCHAR AS viewowner, NULL::VARCHAR AS definition WHERE false;
CREATE VIEW pgc.pg_matviews AS SELECT NULL::VARCHAR AS schemaname,
  NULL::VARCHAR AS matviewname, NULL::VARCHAR AS matviewowner WHERE false;
CREATE TABLE infoschema.schemata (catalog_name VARCHAR, schema_name VARCHAR,
  schema_owner VARCHAR, default_character_set_catalog VARCHAR,
  default_character_set_schema VARCHAR, default_character_set_name VARCHAR,
  sql_path VARCHAR);
CREATE TABLE infoschema.tables (table_catalog VARCHAR, table_schema VARCHAR,
  table_name VARCHAR, table_type VARCHAR, self_referencing_column_name VARCHAR,
  reference_generation VARCHAR, user_defined_type_catalog VARCHAR,
  user_defined_type_schema VARCHAR, user_defined_type_name VARCHAR,
  is_insertable_into VARCHAR, is_typed VARCHAR, commit_action VARCHAR);
CREATE TABLE infoschema.columns (table_catalog VARCHAR, table_schema VARCHAR,
  table_name VARCHAR, column_name VARCHAR, ordinal_position INTEGER,
  column_default VARCHAR, is_nullable VARCHAR, data_type VARCHAR,
  character_maximum_length INTEGER, character_octet_length INTEGER,
  numeric_precision INTEGER, numeric_precision_radix INTEGER, numeric_scale INTEGER,
  datetime_precision INTEGER, interval_type VARCHAR, interval_precision INTEGER,
  character_set_catalog VARCHAR, character_set_schema VARCHAR, character_set_name VARCHAR,
  collation_catalog VARCHAR, collation_schema VARCHAR, collation_name VARCHAR,
  domain_catalog VARCHAR, domain_schema VARCHAR, domain_name VARCHAR, udt_catalog VARCHAR,
  udt_schema VARCHAR, udt_name VARCHAR, scope_catalog VARCHAR, scope_schema VARCHAR,
  scope_name VARCHAR, maximum_cardinality INTEGER, dtd_identifier VARCHAR,
  is_self_referencing VARCHAR, is_identity VARCHAR, identity_generation VARCHAR,
  identity_start VARCHAR, identity_increment VARCHAR, identity_maximum VARCHAR,
  identity_minimum VARCHAR, identity_cycle VARCHAR, is_generated VARCHAR,
  generation_expression VARCHAR, is_updatable VARCHAR, comment VARCHAR);
CREATE TABLE infoschema.views (table_catalog VARCHAR, table_schema VARCHAR,
  table_name VARCHAR, view_definition VARCHAR, check_option VARCHAR,
  is_updatable VARCHAR, is_insertable_into VARCHAR);
CREATE TABLE infoschema.table_constraints (constraint_catalog VARCHAR,
  constraint_schema VARCHAR, constraint_name VARCHAR, table_catalog VARCHAR,
  table_schema VARCHAR, table_name VARCHAR, constraint_type VARCHAR,
  is_deferrable VARCHAR, initially_deferred VARCHAR, enforced VARCHAR);
CREATE TABLE infoschema.key_column_usage (constraint_catalog VARCHAR,
  constraint_schema VARCHAR, constraint_name VARCHAR, table_catalog VARCHAR,
  table_schema VARCHAR, table_name VARCHAR, column_name VARCHAR,
  ordinal_position INTEGER, position_in_unique_constraint INTEGER);
CREATE TABLE infoschema.referential_constraints (constraint_catalog VARCHAR,
  constraint_schema VARCHAR, constraint_name VARCHAR, unique_constraint_catalog VARCHAR,
  unique_constraint_schema VARCHAR, unique_constraint_name VARCHAR);
CREATE TABLE infoschema.routines (specific_catalog VARCHAR, specific_schema VARCHAR,
  specific_name VARCHAR, routine_catalog VARCHAR, routine_schema VARCHAR,
  routine_name VARCHAR, routine_type VARCHAR, data_type VARCHAR);
CREATE TABLE infoschema.character_sets (character_set_catalog VARCHAR,
  character_set_schema VARCHAR, character_set_name VARCHAR,
  character_repertoire VARCHAR, form_of_use VARCHAR, default_collate_catalog VARCHAR,
  default_collate_schema VARCHAR, default_collate_name VARCHAR);
"""

_SANDBOX: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 1,
    "memory_limit": "256MB",
}
_LOCKDOWN = "SET enable_external_access = false; SET lock_configuration = true;"


@dataclass(frozen=True)
class VisibleColumn:
    name: str
    duckdb_type: str
    note: str  # policy facts shown as the column's comment (bounds, public values)


@dataclass(frozen=True)
class VisibleTable:
    """One table an analyst may query, as the catalog shows it (no data, no statistics)."""

    schema: str  # PostgreSQL schema: "public" for DuckDB's main
    name: str
    columns: tuple[VisibleColumn, ...]
    note: str


@dataclass(frozen=True)
class CatalogAnswer:
    names: tuple[str, ...]
    types: tuple[str, ...]  # DuckDB type names of the answer's columns
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class SessionFacts:
    """What session functions answer: literals substituted before the shadow runs."""

    user: str
    database: str
    version: str
    pid: int
    settings: dict[str, str] = field(default_factory=dict)


def _literal(value: str | int | None) -> exp.Expr:
    if value is None:
        return exp.Null()
    if isinstance(value, int):
        return exp.Literal.number(value)
    return exp.Literal.string(value)


class ShadowCatalog:
    """One data-free DuckDB per set of visible tables; thread-safe (a cursor per call)."""

    def __init__(self, tables: Iterable[VisibleTable]):
        """Built from the caller's visible tables alone: nothing an analyst sees (OIDs
        included) depends on the tables it cannot see."""
        self.tables = tuple(tables)
        self._oids = _table_oids((t.schema, t.name) for t in self.tables)
        self._db = duckdb.connect(":memory:", config=_SANDBOX)
        self._build()
        self._db.execute(_LOCKDOWN)

    def close(self) -> None:
        self._db.close()

    # --- building -------------------------------------------------------------------
    def _build(self) -> None:
        db = self._db
        db.execute("CREATE SCHEMA pgc; CREATE SCHEMA infoschema;")
        db.execute(_TABLES.format(owner=OWNER))
        db.execute(_MACROS.format(owner=OWNER))
        schemas = sorted({t.schema for t in self.tables} | {PUBLIC})
        namespace_oid = {
            "pg_catalog": _NS_CATALOG,
            PUBLIC: _NS_PUBLIC,
            "information_schema": _NS_INFO,
        }
        for i, name in enumerate(s for s in schemas if s not in namespace_oid):
            namespace_oid[name] = _FIRST_OID - 100 + i
        db.executemany(
            "INSERT INTO pgc.pg_namespace VALUES (?, ?, 10, NULL)",
            [(oid, name) for name, oid in sorted(namespace_oid.items(), key=lambda x: x[1])],
        )
        db.executemany(
            "INSERT INTO infoschema.schemata VALUES ('dpsql', ?, ?, NULL, NULL, 'UTF8', NULL)",
            [(name, OWNER) for name in sorted(namespace_oid)],
        )
        db.executemany(
            "INSERT INTO pgc.pg_type VALUES (?, ?, 11, 10, ?, ?, 'b', ?, false, true, ',', 0, "
            "NULL, 0, ?, ?, NULL, NULL, NULL, NULL, NULL, NULL, 'i', 'p', false, 0, -1, 0, "
            "?, NULL, NULL, NULL)",
            [
                (
                    t.oid,
                    t.name,
                    t.length,
                    t.length > 0,
                    t.category,
                    t.array_oid,
                    t.input,
                    100 if t.category == "S" else 0,
                )
                for t in pgtypes.TYPES
            ]
            + [
                (t.array_oid, "_" + t.name, -1, False, "A", 0, "array_in", 0) for t in pgtypes.TYPES
            ],
        )
        db.execute(
            "UPDATE pgc.pg_type SET typelem = e.oid FROM pgc.pg_type e "
            "WHERE pg_type.typname = '_' || e.typname"
        )
        db.executemany(
            "INSERT INTO pgc.dpsql_formats VALUES (?, ?)",
            [(t.oid, t.formatted) for t in pgtypes.TYPES]
            + [(t.array_oid, t.formatted + "[]") for t in pgtypes.TYPES],
        )
        db.execute(
            "INSERT INTO pgc.pg_am VALUES (2, 'heap', 'heap_tableam_handler', 't'), "
            "(403, 'btree', 'bthandler', 'i');"
            "INSERT INTO pgc.pg_collation VALUES (100, 'default', 11, 10, 'd', true, -1, NULL, "
            "NULL, NULL, NULL), (950, 'C', 11, 10, 'c', true, -1, 'C', 'C', NULL, NULL);"
            "INSERT INTO pgc.pg_tablespace VALUES (1663, 'pg_default', 10, NULL, NULL);"
            f"INSERT INTO pgc.pg_database VALUES ({_DATABASE_OID}, '{DATABASE}', 10, 6, 'c', "
            "false, true, -1, 0, 0, 1663, 'C', 'C', NULL, NULL, NULL);"
            # pg_database as one session sees it (the rewrite reads it instead of the
            # table): the fixed database and the one the client named, if another
            "CREATE MACRO pgc.dpsql_databases(current) AS TABLE SELECT * FROM "
            f"pgc.pg_database UNION ALL SELECT {_SESSION_DATABASE_OID}, current, 10, 6, 'c', "
            "false, true, -1, 0, 0, 1663, 'C', 'C', NULL, NULL, NULL "
            f"WHERE current <> '{DATABASE}';"
            "INSERT INTO infoschema.character_sets VALUES (NULL, NULL, 'UTF8', 'UCS', 'UTF8', "
            "'dpsql', 'pg_catalog', 'C');"
        )
        for table in self.tables:
            self._add_table(table, namespace_oid[table.schema])
        self._lookup_macros()

    def _lookup_macros(self) -> None:
        """Lookups as macros over literal maps: a macro's scalar subquery would capture
        the caller's bare column names (``oid``) in its own scope."""
        db = self._db
        types = {t.oid: t for t in pgtypes.TYPES}
        formats = {t.oid: t.formatted for t in types.values()}
        formats.update({t.array_oid: t.formatted + "[]" for t in types.values()})
        names = {t.oid: t.name for t in types.values()}
        names.update({t.array_oid: "_" + t.name for t in types.values()})
        spaces = dict(db.execute("SELECT oid, nspname FROM pgc.pg_namespace").fetchall())
        relations = dict(db.execute("SELECT oid, relname FROM pgc.pg_class").fetchall())
        # 'pg_class'::regclass and friends (pg_description.classoid) name system tables
        relations.update(_SYSTEM_RELATIONS)
        notes = db.execute(
            "SELECT objoid, objsubid, description FROM pgc.pg_description"
        ).fetchall()
        described = {f"{o}:{n}": text for o, n, text in notes}
        db.execute(
            f"""
            CREATE MACRO format_type(t, m) AS CASE
              WHEN t IS NULL THEN NULL
              WHEN t = 1700 AND m > 0
                THEN 'numeric(' || ((m - 4) >> 16) || ',' || ((m - 4) & 65535) || ')'
              ELSE coalesce({_map(formats)}[t], '???') END;
            CREATE MACRO dpsql_typname(o) AS {_map(names)}[o];
            CREATE MACRO to_regtype(n) AS {_map({v: k for k, v in names.items()})}[n];
            CREATE MACRO dpsql_nspname(o) AS {_map(spaces)}[o];
            CREATE MACRO dpsql_relname(o) AS {_map(relations, 0)}[o];
            CREATE MACRO dpsql_reloid(n) AS {_map({v: k for k, v in relations.items()}, "")}[n];
            CREATE MACRO obj_description(o) AS {_map(described, "")}[o || ':0'],
              (o, k) AS {_map(described, "")}[o || ':0'];
            CREATE MACRO col_description(o, n) AS {_map(described, "")}[o || ':' || n];
            """
        )

    def _add_table(self, table: VisibleTable, namespace: int) -> None:
        db = self._db
        oid = self._oids[(table.schema, table.name)]
        db.execute(
            "INSERT INTO pgc.pg_class VALUES (?, ?, ?, ?, 0, 10, 2, ?, 0, 0, -1, 0, 0, false, "
            "false, 'p', 'r', ?, 0, false, false, false, false, false, true, 'd', false, 0, 0, "
            "0, NULL, NULL, NULL)",
            [oid, table.name, namespace, oid + 1, oid, len(table.columns)],
        )
        db.execute(
            "INSERT INTO infoschema.tables VALUES ('dpsql', ?, ?, 'BASE TABLE', NULL, NULL, "
            "NULL, NULL, NULL, 'NO', 'NO', NULL)",
            [table.schema, table.name],
        )
        db.execute("INSERT INTO pgc.pg_description VALUES (?, 1259, 0, ?)", [oid, table.note])
        for number, column in enumerate(table.columns, start=1):
            kind = pgtypes.from_duckdb(column.duckdb_type)
            known = pgtypes.BY_OID.get(kind.oid)
            collation = 100 if known is not None and known.category == "S" else 0
            db.execute(
                "INSERT INTO pgc.pg_attribute VALUES (?, ?, ?, -1, ?, ?, 0, -1, ?, false, 'i', "
                "'p', '', false, false, false, '', '', false, true, 0, ?, NULL, NULL, NULL, "
                "NULL)",
                [
                    oid,
                    column.name,
                    kind.oid,
                    known.length if known else -1,
                    number,
                    kind.typmod,
                    collation,
                ],
            )
            formatted = pgtypes.formatted(kind)
            precision, scale = _numeric_shape(kind)
            db.execute(
                "INSERT INTO infoschema.columns (table_catalog, table_schema, table_name, "
                "column_name, ordinal_position, is_nullable, data_type, numeric_precision, "
                "numeric_scale, udt_catalog, udt_schema, udt_name, is_identity, is_generated, "
                "is_updatable, comment) VALUES ('dpsql', ?, ?, ?, ?, 'YES', ?, ?, ?, 'dpsql', "
                "'pg_catalog', ?, 'NO', 'NEVER', 'NO', ?)",
                [
                    table.schema,
                    table.name,
                    column.name,
                    number,
                    formatted,
                    precision,
                    scale,
                    known.name if known else "text",
                    column.note or None,
                ],
            )
            if column.note:
                db.execute(
                    "INSERT INTO pgc.pg_description VALUES (?, 1259, ?, ?)",
                    [oid, number, column.note],
                )

    # --- answering ------------------------------------------------------------------
    def answer(self, tree: exp.Expr, params: Sequence[Any], facts: SessionFacts) -> CatalogAnswer:
        """The catalog query's answer, within proxy/catalog_limits.py's limits: refused
        before it runs if it calls what they refuse, interrupted at their time limit,
        fetched within their rows and bytes."""
        refused = limits.refusal(tree, session_values=True)
        sql = rewrite(tree, facts)
        # (current_setting of a literal name is the session's, substituted by rewrite)
        lowered = sql.lower()
        if refused is None and ("current_setting" in lowered or "getenv" in lowered):
            refused = limits.server_state(sqlglot.parse_one(sql, read="duckdb"))
        if refused is not None:
            raise WireError(
                PROGRAM_LIMIT_EXCEEDED if refused.too_large else FEATURE_NOT_SUPPORTED,
                refused.message,
                hint=refused.hint,
            )
        cursor = self._db.cursor()
        try:
            with limits.interrupted_after(cursor.interrupt):
                relation = cursor.execute(sql, list(params))
                described = relation.description or []
                rows, too_large = limits.fetch_bounded(relation)
        except duckdb.InterruptException:
            raise WireError(
                QUERY_CANCELED,
                f"the catalog query ran longer than {limits.TIMEOUT_S:g} s and was stopped",
                hint="narrow the catalog query (it is not charged)",
            ) from None
        except duckdb.Error as error:
            first = str(error).splitlines()[0][:300]
            raise WireError(
                FEATURE_NOT_SUPPORTED,
                f"dpsql's catalog emulation cannot answer this query: {first}",
                hint="dpsql emulates the pg_catalog and information_schema queries of psql, "
                "pgjdbc, psycopg and SQLAlchemy; see README, 'PostgreSQL wire protocol'",
            ) from None
        finally:
            cursor.close()
        if too_large is not None:
            raise WireError(PROGRAM_LIMIT_EXCEEDED, too_large.message, hint=too_large.hint)
        return CatalogAnswer(
            tuple(str(d[0]) for d in described), tuple(str(d[1]) for d in described), rows
        )


def _table_oids(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Each table's OID from its own (schema, name), so a table keeps its OID whichever
    analyst asks (clients carry OIDs from one query to the next) and no OID tells how
    many other tables exist. A collision (one in ~10^9 pairs) moves the later name, in
    the order of the visible tables only, to the next free slot."""
    oids: dict[tuple[str, str], int] = {}
    taken: set[int] = set()
    for schema, name in sorted(keys):
        digest = hashlib.blake2b(f"{schema}\0{name}".encode(), digest_size=8).digest()
        slot = int.from_bytes(digest, "big") % _TABLE_SLOTS
        while slot in taken:
            slot = (slot + 1) % _TABLE_SLOTS
        taken.add(slot)
        oids[(schema, name)] = _TABLE_OIDS + 2 * slot
    return oids


def _sql_value(value: object) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _map(pairs: dict[Any, Any], empty_key: object = -1) -> str:
    """A DuckDB MAP literal; a never-matching entry types an empty map."""
    items = dict(pairs) or {empty_key: None}
    body = ", ".join(
        f"{_sql_value(k)}: {'NULL' if v is None else _sql_value(v)}" for k, v in items.items()
    )
    return "MAP {" + body + "}"


def _numeric_shape(kind: pgtypes.ColumnType) -> tuple[int | None, int | None]:
    if kind.oid in (20, 21, 23):
        return {20: 64, 21: 16, 23: 32}[kind.oid], 0
    if kind.oid in (700, 701):
        return {700: 24, 701: 53}[kind.oid], None
    if kind.oid == 1700 and kind.typmod > 0:
        value = kind.typmod - 4
        return value >> 16, value & 0xFFFF
    return None, None


# --- the rewrite -------------------------------------------------------------------------

_PRE = (
    (re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!*<>=]+)\s*\)", re.I), r"\1"),
    (re.compile(r"COLLATE\s+pg_catalog\s*\.\s*\"?default\"?", re.I), ""),
    (re.compile(r"COLLATE\s+\"?(default|C|POSIX)\"?(?=[\s,)]|$)", re.I), ""),
    (re.compile(r"\bpg_catalog\s*\.\s*", re.I), ""),
    (re.compile(r"\binformation_schema\s*\.\s*(_pg_\w+)\s*\(", re.I), r"\1("),
    (re.compile(r"::\s*(int2vector|oidvector)\b", re.I), "::int2[]"),
)
_SYSTEM_RELATIONS = {
    1247: "pg_type",
    1249: "pg_attribute",
    1255: "pg_proc",
    1259: "pg_class",
    2604: "pg_attrdef",
    2606: "pg_constraint",
    2610: "pg_index",
    2615: "pg_namespace",
    3079: "pg_extension",
}
_OID_TYPES = {"OID", "REGCLASS", "REGTYPE", "REGPROC", "REGPROCEDURE", "REGNAMESPACE", "REGROLE"}


def prepare_text(sql: str) -> str:
    """Text-level rewrites sqlglot cannot parse around (applied outside string literals)."""
    for pattern, replacement in _PRE:

        def change(text: str, p: re.Pattern[str] = pattern, r: str = replacement) -> str:
            return p.sub(r, text)

        sql = outside_literals(sql, change)
    return sql


def parse_catalog(sql: str) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(prepare_text(sql), dialect="postgres")
    except sqlglot.errors.SqlglotError:  # (TokenError too)
        return None


def _type_name(node: exp.Expr) -> str:
    return node.sql(dialect="postgres").upper().split(".")[-1].strip('"')


def _cast(node: exp.Cast) -> exp.Expr | None:
    target = _type_name(node.to).upper()
    if target not in _OID_TYPES:
        return None
    inner = node.this
    text = inner.name if isinstance(inner, exp.Literal) and inner.is_string else None
    # a name given as a bound parameter or a text cast: looked up like a literal name
    named = (
        text is not None
        or isinstance(inner, exp.Parameter | exp.Placeholder)
        or (isinstance(inner, exp.Cast) and _type_name(inner.to) in ("TEXT", "VARCHAR", "NAME"))
    )
    if target == "OID":
        return exp.cast(inner, exp.DataType.build("BIGINT"))
    if target == "REGCLASS":
        if text is not None:
            return exp.func("dpsql_reloid", _literal(text.rsplit(".", 1)[-1].strip('"')))
        if named:
            return exp.func(
                "dpsql_reloid", exp.func("regexp_replace", inner, _literal(r"^.*\."), _literal(""))
            )
        return inner
    if target == "REGTYPE":
        if text is not None:
            return exp.func("to_regtype", _literal(text.rsplit(".", 1)[-1]))
        if named:
            return exp.func("to_regtype", inner)
        return exp.func("dpsql_typname", inner)
    if target == "REGNAMESPACE":
        return exp.func("dpsql_nspname", inner)
    if text is not None:  # regproc & co: compared with the text of pg_type.typinput
        return _literal(text.rsplit(".", 1)[-1])
    return exp.cast(inner, exp.DataType.build("VARCHAR"))


def _session_value(node: exp.Expr, facts: SessionFacts) -> exp.Expr | None:
    if isinstance(node, exp.CurrentUser | exp.SessionUser):
        return _literal(facts.user)
    if isinstance(node, exp.CurrentSchema):
        return _literal(PUBLIC)
    if isinstance(node, exp.CurrentDatabase | exp.CurrentCatalog):
        return _literal(facts.database)
    if isinstance(node, exp.CurrentVersion):
        return _literal(facts.version)
    if isinstance(node, exp.CurrentSchemas):
        implicit = node.this
        return exp.func(
            "if",
            implicit if implicit is not None else exp.true(),
            exp.Array(expressions=[_literal("pg_catalog"), _literal(PUBLIC)]),
            exp.Array(expressions=[_literal(PUBLIC)]),
        )
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        args = node.expressions
        if name in ("version",):
            return _literal(facts.version)
        if name == "pg_backend_pid":
            return _literal(facts.pid)
        if name in ("current_setting",) and args and isinstance(args[0], exp.Literal):
            return _literal(facts.settings.get(args[0].name.lower(), ""))
        if name in ("inet_server_addr", "inet_client_addr"):
            return _literal("127.0.0.1")
        if name in ("json_build_object", "jsonb_build_object"):
            return exp.func("json_object", *args)
        if name == "current_schema":
            return _literal(PUBLIC)
        if name in ("current_database", "current_catalog"):
            return _literal(facts.database)
    return None


def _table(node: exp.Table, facts: SessionFacts) -> exp.Expr | None:
    db = (node.db or "").lower()
    name = node.name.lower()
    if db == "information_schema":
        node.set("db", exp.to_identifier("infoschema"))
        return node
    if name == "pg_database" and db in ("", "pg_catalog"):
        # the session's own database name is a literal of this query, never a row of
        # the catalog shared by the analysts who see the same tables
        return exp.Table(
            this=exp.func("dpsql_databases", _literal(facts.database)),
            db=exp.to_identifier("pgc"),
            alias=exp.TableAlias(this=exp.to_identifier(node.alias or "pg_database")),
        )
    if (not db and name.startswith("pg_")) or db == "pg_catalog":
        node.set("db", exp.to_identifier("pgc"))
        return node
    return None


def _output_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    names: dict[type[exp.Expr], str] = {
        exp.CurrentUser: "current_user",
        exp.SessionUser: "session_user",
        exp.CurrentSchema: "current_schema",
        exp.CurrentDatabase: "current_database",
        exp.CurrentCatalog: "current_catalog",
        exp.CurrentVersion: "version",
        exp.CurrentSchemas: "current_schemas",
    }
    return names.get(type(node), "?column?")


def rewrite(tree: exp.Expr, facts: SessionFacts) -> str:
    """PostgreSQL catalog SQL (already prepared by :func:`prepare_text`) as DuckDB SQL
    over the shadow schemas."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Cast):
            replaced = _cast(node)
            if replaced is not None:
                # transform() does not descend into a replacement: rewrite its inside here
                return replaced.transform(visit, copy=False)
        if isinstance(node, exp.Table) and not isinstance(node.this, exp.Func):
            replaced = _table(node, facts)
            if replaced is not None:
                return replaced
        replaced = _session_value(node, facts)
        if replaced is None:
            return node
        if isinstance(node.parent, exp.Select) and node.arg_key == "expressions":
            # a projection keeps PostgreSQL's column name: version, current_schema, ...
            return exp.alias_(replaced, _output_name(node))
        return replaced

    return typed_division.of_known_integers(tree.copy().transform(visit)).sql(dialect="duckdb")


def is_catalog_table(table: exp.Table, user_tables: frozenset[tuple[str, str]]) -> bool:
    """pg_catalog.X, information_schema.X, or a bare pg_X that is no policy table."""
    db = (table.db or "").lower()
    name = table.name.lower()
    if db in ("pg_catalog", "information_schema"):
        return True
    return not db and name.startswith("pg_") and (PUBLIC, name) not in user_tables
