"""PostgreSQL types of dpsql columns and answers: DuckDB type names and Python values to
PostgreSQL OIDs, and the pg_type rows the catalog emulation serves."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.pgwire import codec


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str  # pg_type.typname
    formatted: str  # format_type(oid, -1)
    length: int  # typlen
    category: str  # typcategory
    array_oid: int
    input: str  # typinput


# The types dpsql columns and catalog answers use, with their array types.
TYPES: tuple[PgType, ...] = (
    PgType(16, "bool", "boolean", 1, "B", 1000, "boolin"),
    PgType(17, "bytea", "bytea", -1, "U", 1001, "byteain"),
    PgType(18, "char", '"char"', 1, "Z", 1002, "charin"),
    PgType(19, "name", "name", 64, "S", 1003, "namein"),
    PgType(20, "int8", "bigint", 8, "N", 1016, "int8in"),
    PgType(21, "int2", "smallint", 2, "N", 1005, "int2in"),
    PgType(23, "int4", "integer", 4, "N", 1007, "int4in"),
    PgType(25, "text", "text", -1, "S", 1009, "textin"),
    PgType(26, "oid", "oid", 4, "N", 1028, "oidin"),
    PgType(114, "json", "json", -1, "U", 199, "json_in"),
    PgType(700, "float4", "real", 4, "N", 1021, "float4in"),
    PgType(701, "float8", "double precision", 8, "N", 1022, "float8in"),
    PgType(1042, "bpchar", "character", -1, "S", 1014, "bpcharin"),
    PgType(1043, "varchar", "character varying", -1, "S", 1015, "varcharin"),
    PgType(1082, "date", "date", 4, "D", 1182, "date_in"),
    PgType(1083, "time", "time without time zone", 8, "D", 1183, "time_in"),
    PgType(1114, "timestamp", "timestamp without time zone", 8, "D", 1115, "timestamp_in"),
    PgType(1184, "timestamptz", "timestamp with time zone", 8, "D", 1185, "timestamptz_in"),
    PgType(1186, "interval", "interval", 16, "T", 1187, "interval_in"),
    PgType(1700, "numeric", "numeric", -1, "N", 1231, "numeric_in"),
    PgType(2950, "uuid", "uuid", 16, "U", 2951, "uuid_in"),
)
BY_OID = {t.oid: t for t in TYPES}
ARRAY_ELEMENT = {t.array_oid: t for t in TYPES}

_DUCKDB_SCALARS = {
    "BOOLEAN": 16,
    "BLOB": 17,
    "TINYINT": 21,
    "SMALLINT": 21,
    "UTINYINT": 21,
    "INTEGER": 23,
    "USMALLINT": 23,
    "BIGINT": 20,
    "UINTEGER": 20,
    "UBIGINT": 1700,
    "HUGEINT": 1700,
    "UHUGEINT": 1700,
    "FLOAT": 700,
    "REAL": 700,
    "DOUBLE": 701,
    "VARCHAR": 25,
    "DATE": 1082,
    "TIME": 1083,
    "TIMESTAMP": 1114,
    "TIMESTAMP_NS": 1114,
    "TIMESTAMP_MS": 1114,
    "TIMESTAMP_S": 1114,
    "TIMESTAMP WITH TIME ZONE": 1184,
    "INTERVAL": 1186,
    "UUID": 2950,
    "JSON": 114,
}
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


@dataclass(frozen=True)
class ColumnType:
    oid: int
    typmod: int = -1


def from_duckdb(name: str) -> ColumnType:
    """The PostgreSQL type of a DuckDB column type (unknown types read as text)."""
    upper = name.upper().strip()
    if upper.endswith("[]"):
        element = from_duckdb(upper[:-2])
        known = BY_OID.get(element.oid)
        return ColumnType(known.array_oid if known else 1009)
    match = _DECIMAL.match(upper)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        return ColumnType(1700, ((precision << 16) | scale) + 4)
    return ColumnType(_DUCKDB_SCALARS.get(upper, 25))


def formatted(column: ColumnType) -> str:
    """format_type(oid, typmod): what psql's \\d prints."""
    if column.oid == 1700 and column.typmod > 0:
        value = column.typmod - 4
        return f"numeric({value >> 16},{value & 0xFFFF})"
    known = BY_OID.get(column.oid)
    if known is not None:
        return known.formatted
    element = ARRAY_ELEMENT.get(column.oid)
    return f"{element.formatted}[]" if element else "text"


def _value_oid(value: Any) -> int:
    if isinstance(value, bool):
        return codec.BOOL
    if isinstance(value, int):
        return codec.INT8
    if isinstance(value, float):
        return codec.FLOAT8
    if isinstance(value, decimal.Decimal):
        return codec.NUMERIC
    if isinstance(value, dt.datetime):
        return codec.TIMESTAMPTZ if value.tzinfo is not None else codec.TIMESTAMP
    if isinstance(value, dt.date):
        return codec.DATE
    if isinstance(value, dt.time):
        return codec.TIME
    if isinstance(value, dt.timedelta):
        return codec.INTERVAL
    if isinstance(value, uuid.UUID):
        return codec.UUID
    if isinstance(value, bytes | bytearray):
        return codec.BYTEA
    return codec.TEXT


def infer_oids(width: int, rows: Sequence[Sequence[Any]]) -> list[int]:
    """Column OIDs of released rows, from every value: integers and floats together
    are float8, NULL-only columns text (the engine returns Python values, not types)."""
    out = []
    for index in range(width):
        seen = {_value_oid(row[index]) for row in rows if row[index] is not None}
        if not seen:
            out.append(codec.TEXT)
        elif len(seen) == 1:
            out.append(seen.pop())
        elif seen <= {codec.INT8, codec.FLOAT8, codec.NUMERIC}:
            out.append(codec.FLOAT8 if codec.FLOAT8 in seen else codec.NUMERIC)
        else:
            out.append(codec.TEXT)
    return out
