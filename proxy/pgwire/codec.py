"""The PostgreSQL v3 message codec: the one module that imports pg-mimic.

pg-mimic (pinned in pyproject.toml) supplies framing, message builders and parsers and
the text/binary value encodings; everything above the bytes (startup, TLS, auth rules,
the query state machine, catalog emulation) is dpsql's own. Replacing pg-mimic with a
hand-written codec means rewriting this file only.
"""

from __future__ import annotations

import struct
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
    "MAX_STARTUP_PACKET",
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
    "BadLength",
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
# The binary width of each fixed-size type: PostgreSQL refuses a parameter of another
# length (22P03) where pg-mimic reads a 0-byte bool as false.
_BINARY_WIDTHS = {
    BOOL: 1,
    INT2: 2,
    INT4: 4,
    INT8: 8,
    OID: 4,
    FLOAT4: 4,
    FLOAT8: 8,
    DATE: 4,
    TIME: 8,
    TIMESTAMP: 8,
    TIMESTAMPTZ: 8,
    INTERVAL: 16,
    UUID: 16,
}


# A binary NUMERIC's base-10000 weight and display scale, at most: 10^400 and 400
# decimals are beyond any DOUBLE or DECIMAL(38) the engines compare with. Its header
# alone (10 bytes) could otherwise ask pg-mimic for a text of ~200,000 digits (a probe
# of the door, 2026-12-06: a 10 KB Bind built 196 million characters of SQL).
MAX_NUMERIC_WEIGHT = 100
MAX_NUMERIC_SCALE = 400


def decode_binary_param(oid: int, data: bytes) -> Any:
    """pg-mimic's decoding, after the length of a fixed-size type is checked (and a
    NUMERIC's size)."""
    width = _BINARY_WIDTHS.get(oid)
    if width is not None and len(data) != width:
        raise ValueError(f"{len(data)} bytes where the type takes {width}")
    if oid == NUMERIC and len(data) >= 8:
        _, weight, _, scale = struct.unpack("!HhHH", data[:8])
        if abs(weight) > MAX_NUMERIC_WEIGHT or scale > MAX_NUMERIC_SCALE:
            raise ValueError("a NUMERIC beyond 10^400 or with more than 400 decimals")
    return _t.decode_binary_param(oid, data)


# PostgreSQL's MAX_STARTUP_PACKET_LENGTH: a longer startup packet is refused before it
# is read, so an unauthenticated peer cannot make the door buffer what it announces.
MAX_STARTUP_PACKET = 10_000


class BadLength(Exception):
    """A message announced a length outside what its phase allows; nothing of its body
    was read."""


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

    async def read_startup_packet(self, limit: int = MAX_STARTUP_PACKET) -> tuple[int, bytes]:
        """pg-mimic's read, with the announced length checked before the body is read
        (pg-mimic reads whatever the 4-byte length says)."""
        (length,) = struct.unpack("!I", await self._read_exactly(4))
        if length < 8 or length > limit:  # 8: the length and the protocol code
            raise BadLength("invalid length of startup packet")
        body = await self._read_exactly(length - 4)
        (code,) = struct.unpack("!I", body[:4])
        return code, body[4:]

    async def read_message(self, limit: int | None = None) -> tuple[bytes, bytes]:
        """One tagged message; with ``limit`` (bytes, the length word included), a longer
        one is refused before its body is read (the messages before authentication)."""
        if limit is None:
            return await super().read_message()
        header = await self._read_exactly(5)
        (length,) = struct.unpack("!I", header[1:5])
        if length < 4 or length > limit:
            raise BadLength("invalid message length")
        payload = await self._read_exactly(length - 4) if length > 4 else b""
        return header[:1], payload


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
