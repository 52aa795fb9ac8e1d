"""The PostgreSQL v3 message codec: the one module that imports pg-mimic.

pg-mimic (pinned in pyproject.toml) supplies framing, message builders and parsers and
the text/binary value encodings; everything above the bytes (startup, TLS, auth rules,
the query state machine, catalog emulation) is dpsql's own. Replacing pg-mimic with a
hand-written codec means rewriting this file only.
"""

from __future__ import annotations

from typing import Any

from pg_mimic import messages as _m
from pg_mimic import types as _t
from pg_mimic.stream import ConnectionClosed
from pg_mimic.stream import PgStream as _PgStream

__all__ = [
    "BOOL",
    "BPCHAR",
    "BYTEA",
    "CANCEL_REQUEST_CODE",
    "DATE",
    "FLOAT4",
    "FLOAT8",
    "GSSENC_REQUEST_CODE",
    "INT2",
    "INT4",
    "INT8",
    "INTERVAL",
    "NAME",
    "NUMERIC",
    "OID",
    "SSL_REQUEST_CODE",
    "TEXT",
    "TIME",
    "TIMESTAMP",
    "TIMESTAMPTZ",
    "UUID",
    "VARCHAR",
    "ConnectionClosed",
    "FieldSpec",
    "PgStream",
    "Tags",
    "decode_binary_param",
    "encode_binary",
    "encode_text",
    "m",
]

# Message builders and parsers (make_* / parse_*), used as ``codec.m.make_data_row``.
m = _m
FieldSpec = _m.FieldSpec
SSL_REQUEST_CODE = _m.SSL_REQUEST_CODE
CANCEL_REQUEST_CODE = _m.CANCEL_REQUEST_CODE
GSSENC_REQUEST_CODE = _m.GSSENC_REQUEST_CODE

BOOL = _t.BOOL
BYTEA = _t.BYTEA
NAME = _t.NAME
INT8 = _t.INT8
INT2 = _t.INT2
INT4 = _t.INT4
TEXT = _t.TEXT
OID = _t.OID
FLOAT4 = _t.FLOAT4
FLOAT8 = _t.FLOAT8
BPCHAR = _t.BPCHAR
VARCHAR = _t.VARCHAR
DATE = _t.DATE
TIME = _t.TIME
TIMESTAMP = _t.TIMESTAMP
TIMESTAMPTZ = _t.TIMESTAMPTZ
INTERVAL = _t.INTERVAL
NUMERIC = _t.NUMERIC
UUID = _t.UUID

encode_text = _t.encode_value
encode_binary = _t.encode_value_binary
decode_binary_param = _t.decode_binary_param


class PgStream(_PgStream):
    """pg-mimic's framing with the replies buffered until :meth:`drain`: one answer (row
    description, rows, notices, completion, ReadyForQuery) leaves in one socket write,
    and one TLS record, instead of one per message. PostgreSQL itself sends its output
    at Sync, Flush and the end of a simple query; the connection drains there."""

    def __init__(self, reader: Any, writer: Any):
        super().__init__(reader, writer)
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    def flush(self) -> None:
        """Hand what is buffered to the transport (without waiting for it to drain)."""
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self.writer.write(data)

    async def drain(self) -> None:
        self.flush()
        await self.writer.drain()


class Tags:
    """Frontend message tags."""

    QUERY = _m.QUERY
    PARSE = _m.PARSE
    BIND = _m.BIND
    DESCRIBE = _m.DESCRIBE
    EXECUTE = _m.EXECUTE
    CLOSE = _m.CLOSE
    SYNC = _m.SYNC
    FLUSH = _m.FLUSH
    TERMINATE = _m.TERMINATE
    PASSWORD = _m.PASSWORD
    TARGET_STATEMENT = _m.TARGET_STATEMENT
