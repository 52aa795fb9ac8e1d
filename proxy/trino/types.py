"""Trino type signatures and the JSON encoding of values, as the client protocol sends them.

Every column of a Trino answer carries ``type`` (the display name, e.g. ``varchar`` or
``timestamp(6)``) and ``typeSignature`` (``rawType`` plus ``arguments``). Clients parse
the arguments: the ``trino`` Python client needs a length argument on ``varchar`` and a
precision on ``timestamp`` (docs/ARCHITECTURE.md, "Trino door", records what it accepted).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

UNBOUNDED_VARCHAR = 2147483647
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


@dataclass(frozen=True)
class TrinoType:
    """A scalar Trino type: ``raw`` (e.g. ``decimal``) and its numeric ``params``."""

    raw: str
    params: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        if self.raw == "varchar" and self.params == (UNBOUNDED_VARCHAR,):
            return "varchar"
        if not self.params:
            return self.raw
        args = ",".join(str(p) for p in self.params)
        if self.raw.endswith(" with time zone"):
            return f"{self.raw.removesuffix(' with time zone')}({args}) with time zone"
        return f"{self.raw}({args})"

    def column(self, name: str) -> dict[str, Any]:
        """The ``columns`` entry of a QueryResults document."""
        return {
            "name": name,
            "type": self.name,
            "typeSignature": {
                "rawType": self.raw,
                "arguments": [{"kind": "LONG", "value": p} for p in self.params],
            },
        }


BIGINT = TrinoType("bigint")
INTEGER = TrinoType("integer")
SMALLINT = TrinoType("smallint")
TINYINT = TrinoType("tinyint")
DOUBLE = TrinoType("double")
REAL = TrinoType("real")
BOOLEAN = TrinoType("boolean")
VARCHAR = TrinoType("varchar", (UNBOUNDED_VARCHAR,))
DATE = TrinoType("date")
TIMESTAMP = TrinoType("timestamp", (6,))
TIMESTAMP_TZ = TrinoType("timestamp with time zone", (6,))
TIME = TrinoType("time", (6,))
VARBINARY = TrinoType("varbinary")
UUID = TrinoType("uuid")

_FROM_DUCKDB = {
    "BIGINT": BIGINT,
    "INTEGER": INTEGER,
    "INT": INTEGER,
    "SMALLINT": SMALLINT,
    "TINYINT": TINYINT,
    "UTINYINT": SMALLINT,
    "USMALLINT": INTEGER,
    "UINTEGER": BIGINT,
    "UBIGINT": TrinoType("decimal", (20, 0)),
    "HUGEINT": TrinoType("decimal", (38, 0)),
    "UHUGEINT": TrinoType("decimal", (38, 0)),
    "DOUBLE": DOUBLE,
    "FLOAT": REAL,
    "REAL": REAL,
    "BOOLEAN": BOOLEAN,
    "VARCHAR": VARCHAR,
    "DATE": DATE,
    "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP_NS": TrinoType("timestamp", (9,)),
    "TIMESTAMP_MS": TrinoType("timestamp", (3,)),
    "TIMESTAMP_S": TrinoType("timestamp", (0,)),
    "TIMESTAMP WITH TIME ZONE": TIMESTAMP_TZ,
    "TIME": TIME,
    "BLOB": VARBINARY,
    "UUID": UUID,
}


def from_duckdb(type_name: str) -> TrinoType:
    """The Trino type a DuckDB column type is shown as (anything exotic: varchar)."""
    upper = type_name.strip().upper()
    found = _FROM_DUCKDB.get(upper)
    if found is not None:
        return found
    match = _DECIMAL.match(upper)
    if match:
        return TrinoType("decimal", (int(match.group(1)), int(match.group(2))))
    if upper.startswith("INTERVAL"):
        return TrinoType("interval day to second")
    return VARCHAR


def infer(values: Iterable[Any]) -> TrinoType:
    """The type of a released column, from its Python values (None is skipped)."""
    seen: set[type] = set()
    for v in values:
        if v is not None:
            seen.add(type(v))
    if not seen:
        return VARCHAR
    if seen <= {bool}:
        return BOOLEAN
    if seen <= {int}:
        return BIGINT
    if seen <= {int, float, bool} or seen <= {Decimal, int, float}:
        return DOUBLE
    if seen <= {dt.datetime}:
        return TIMESTAMP
    if seen <= {dt.date}:
        return DATE
    if seen <= {bytes}:
        return VARBINARY
    return VARCHAR


def encode(value: Any, kind: TrinoType) -> Any:
    """One cell as Trino's JSON encoding of ``kind`` writes it."""
    if value is None:
        return None
    raw = kind.raw
    if raw in ("double", "real"):
        x = float(value)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    if raw in ("bigint", "integer", "smallint", "tinyint"):
        return int(value)
    if raw == "boolean":
        return bool(value)
    if raw == "decimal":
        return str(value)
    if raw.startswith("timestamp"):
        if isinstance(value, dt.datetime):
            text = value.strftime("%Y-%m-%d %H:%M:%S.%f")
            if value.tzinfo is not None:
                text += " UTC" if value.utcoffset() == dt.timedelta(0) else value.strftime(" %z")
            return text
        return str(value)
    if raw == "date":
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if raw.startswith("time"):
        return value.strftime("%H:%M:%S.%f") if isinstance(value, dt.time) else str(value)
    if raw == "varbinary":
        data = value if isinstance(value, bytes) else bytes(value)
        return base64.b64encode(data).decode("ascii")
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
