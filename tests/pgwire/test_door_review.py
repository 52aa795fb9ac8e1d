"""Reproductions from the review of the PostgreSQL door (each test FAILS while the
defect is present). Raw-socket helpers build the protocol messages by hand."""

from __future__ import annotations

import socket
import struct

import psycopg
import pytest

from tests.pgwire.conftest import ANA, PgDoor

BOB = ("bob", "key-bob-0123456789abcdef")

# --- raw protocol helpers -------------------------------------------------------------


def _startup(user: str, database: str = "dpsql") -> bytes:
    body = struct.pack("!I", 3 << 16)
    for key, value in (("user", user), ("database", database)):
        body += key.encode() + b"\0" + value.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def _msg(tag: bytes, payload: bytes) -> bytes:
    return tag + struct.pack("!I", len(payload) + 4) + payload


def _cstr(text: str | bytes) -> bytes:
    return (text.encode() if isinstance(text, str) else text) + b"\0"


def _read(sock: socket.socket, timeout: float = 5.0) -> list[tuple]:
    """Messages until ReadyForQuery; ('EOF',) if the server hung up, ('TIMEOUT',)."""
    sock.settimeout(timeout)
    data = b""
    end: tuple | None = None
    try:
        while not data.endswith(b"Z\x00\x00\x00\x05I") and not data.endswith(b"Z\x00\x00\x00\x05T"):
            chunk = sock.recv(65536)
            if not chunk:
                end = ("EOF",)
                break
            data += chunk
    except TimeoutError:
        end = ("TIMEOUT",)
    except ConnectionResetError:
        end = ("EOF",)
    out: list[tuple] = []
    i = 0
    while i + 5 <= len(data):
        tag = data[i : i + 1]
        (length,) = struct.unpack("!I", data[i + 1 : i + 5])
        payload = data[i + 5 : i + 1 + length]
        i += 1 + length
        if tag in (b"E", b"N"):
            fields = {chr(f[0]): f[1:].decode(errors="replace") for f in payload.split(b"\0") if f}
            out.append((tag.decode(), fields.get("C"), fields.get("M")))
        elif tag == b"D":
            out.append(("D", payload))
        else:
            out.append((tag.decode(),))
    if end:
        out.append(end)
    return out


def _login(door: PgDoor, who: tuple[str, str] = ANA, database: str = "dpsql") -> socket.socket:
    sock = socket.create_connection((door.host, door.port), timeout=10)
    sock.sendall(_startup(who[0], database))
    sock.recv(4096)  # AuthenticationCleartextPassword (loopback)
    sock.sendall(_msg(b"p", _cstr(who[1])))
    got = _read(sock)
    assert ("Z",) in got, got
    return sock


def _parse(sql: str, oids: list[int]) -> bytes:
    return _msg(
        b"P",
        _cstr("")
        + _cstr(sql)
        + struct.pack("!H", len(oids))
        + b"".join(struct.pack("!I", o) for o in oids),
    )


def _bind(params: list[bytes], param_formats: list[int], result_formats: list[int]) -> bytes:
    body = _cstr("") + _cstr("")
    body += struct.pack("!H", len(param_formats)) + b"".join(
        struct.pack("!H", f) for f in param_formats
    )
    body += struct.pack("!H", len(params))
    for p in params:
        body += struct.pack("!I", len(p)) + p
    body += struct.pack("!H", len(result_formats)) + b"".join(
        struct.pack("!H", f) for f in result_formats
    )
    return _msg(b"B", body)


_EXEC_SYNC = _msg(b"E", _cstr("") + struct.pack("!I", 0)) + _msg(b"S", b"")


def _connect(door: PgDoor, who: tuple[str, str] = ANA, **extra: str) -> psycopg.Connection:
    return psycopg.connect(door.dsn(who, **extra), autocommit=True)


# --- F1: event loop blocked by parsing oversized SQL (DoS for every analyst) ----------


def test_oversized_sql_is_refused_before_it_is_parsed(door: PgDoor) -> None:
    """The door ran sqlglot (classify, engine_sql) on the asyncio loop thread before
    the engine's max_sql_length (20,000 characters) refused the text: one 5 MB query
    froze every connection of every analyst for about 20 s. The door now refuses the
    length itself, before any parse (its own message, not the engine's), on both the
    simple and the extended protocol, and the other analyst's session goes on."""
    big = "SELECT count(*) FROM users WHERE age IN (" + ",".join(map(str, range(800_000))) + ")"
    with _connect(door, BOB) as other:
        other.execute("SELECT 1").fetchall()
        for message in (_msg(b"Q", _cstr(big)), _parse(big, []) + _msg(b"S", b"")):
            sock = _login(door)
            sock.sendall(message)
            reply = _read(sock, 120)
            sock.close()
            errors = [m for m in reply if m[0] == "E"]
            assert errors and errors[0][1] == "54000", reply
            # (a simple query's batch is refused whole, at four statements' length)
            assert "characters long; the limit is" in errors[0][2], errors
        assert other.execute("SELECT 1").fetchall() == [(1,)]


# --- F2: unbounded pre-authentication startup packet ----------------------------------


def test_oversized_startup_packet_is_refused_before_reading_it(door: PgDoor) -> None:
    """An unauthenticated peer announces a 2 GB startup packet; the door waits for (and
    buffers) all of it. PostgreSQL refuses lengths above 10,000 bytes at once."""
    sock = socket.create_connection((door.host, door.port), timeout=10)
    sock.sendall(struct.pack("!II", 0x7FFFFFFF, 3 << 16))
    sock.sendall(b"a" * (1 << 20))  # 1 MB of "startup packet", accepted silently
    got = _read(sock, 3.0)
    sock.close()
    assert got and got[-1] != ("TIMEOUT",), "the door is still reading a 2 GB startup packet"


def test_oversized_password_message_and_short_startup_packet_are_refused(door: PgDoor) -> None:
    sock = socket.create_connection((door.host, door.port), timeout=10)
    sock.sendall(_startup("ana"))
    sock.recv(4096)  # AuthenticationCleartextPassword (loopback)
    sock.sendall(b"p" + struct.pack("!I", 1 << 30) + b"a" * 65536)
    got = _read(sock, 3.0)
    sock.close()
    assert got[0][:2] == ("E", "08P01") and got[-1] == ("EOF",), got
    sock = socket.create_connection((door.host, door.port), timeout=10)
    sock.sendall(struct.pack("!I", 4))  # shorter than the length and protocol words
    got = _read(sock, 3.0)
    sock.close()
    assert got[0][:2] == ("E", "08P01") and got[-1] == ("EOF",), got


# --- F3: malformed input drops the connection (no ErrorResponse, traceback in log) ----

_MALFORMED = {
    "query_invalid_utf8": _msg(b"Q", b"SELECT 1 \xff\xfe\0"),
    "text_param_invalid_utf8": _parse("SELECT count(*) FROM users WHERE region = $1", [])
    + _bind([b"\xff\xfe"], [0], [])
    + _EXEC_SYNC,
    "binary_int4_param_3_bytes": _parse("SELECT count(*) FROM users WHERE age > $1", [23])
    + _bind([b"\x00\x00\x01"], [1], [])
    + _EXEC_SYNC,
    "binary_int8_param_1_byte": _parse("SELECT count(*) FROM users WHERE age > $1", [20])
    + _bind([b"\x00"], [1], [])
    + _EXEC_SYNC,
    "binary_date_param_1_byte": _parse("SELECT count(*) FROM users WHERE signup_month > $1", [1082])
    + _bind([b"\x00"], [1], [])
    + _EXEC_SYNC,
    "catalog_numeric_param_not_a_number": _parse("SELECT oid FROM pg_class WHERE oid > $1", [1700])
    + _bind([b"abc"], [0], [])
    + _EXEC_SYNC,
    "two_result_formats_for_three_columns": _parse("SELECT oid, relname, relkind FROM pg_class", [])
    + _bind([], [], [0, 1])
    + _EXEC_SYNC,
    "truncated_bind": _msg(b"B", b"\x00") + _msg(b"S", b""),
    "deeply_nested_sql": _msg(b"Q", _cstr("SELECT " + "(" * 3000 + "1" + ")" * 3000)),
}


@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_malformed_message_gets_an_error_response(door: PgDoor, case: str) -> None:
    sock = _login(door)
    sock.sendall(_MALFORMED[case])
    got = _read(sock, 20)
    sock.close()
    errors = [m for m in got if m[0] == "E"]
    assert errors and ("Z",) in got, f"{case}: connection dropped without an error: {got}"
    assert errors[0][1] != "XX000"


def test_zero_length_binary_bool_is_refused_not_charged(door: PgDoor) -> None:
    """A binary bool parameter must be 1 byte; a 0-byte one is read as false and the
    query runs (and is charged)."""
    sock = _login(door)
    sock.sendall(
        _parse("SELECT count(*) AS n FROM users WHERE (age > 40) = $1", [16])
        + _bind([b""], [1], [])
        + _EXEC_SYNC
    )
    got = _read(sock)
    sock.close()
    assert not any(m[0] == "D" for m in got), got
    assert any(m[0] == "E" for m in got), got


# --- F4: another analyst's connection facts leak through the shared shadow catalog ----


def test_database_names_of_other_analysts_are_not_listed(door: PgDoor) -> None:
    with psycopg.connect(door.dsn(ANA).replace("dbname=dpsql", "dbname=ana_acme_merger")):
        pass
    with _connect(door, BOB) as bob:
        names = [r[0] for r in bob.execute("SELECT datname FROM pg_database").fetchall()]
    assert "ana_acme_merger" not in names, names


def test_catalog_oids_do_not_reveal_hidden_tables() -> None:
    """OIDs are 16384 + 100 * rank among *all* policy tables (shadow.py, ShadowCatalog.
    __init__), so an analyst limited to users and regions sees regions=16484,
    users=16684 (live door: SELECT oid, relname FROM pg_class as 'narrow'): one hidden
    table sorts before 'regions', one between 'regions' and 'users'. The OIDs an
    analyst sees must not depend on tables it cannot see."""
    from proxy.pgwire.shadow import ShadowCatalog, VisibleColumn, VisibleTable

    visible = [
        VisibleTable("public", name, (VisibleColumn("x", "BIGINT", ""),), "")
        for name in ("regions", "users")
    ]
    hidden = [
        VisibleTable("public", name, (VisibleColumn("x", "BIGINT", ""),), "")
        for name in ("prompts", "tickets")
    ]
    alone = ShadowCatalog(visible)
    among = ShadowCatalog(visible + hidden)
    sql = (
        "SELECT relname, oid FROM pgc.pg_class WHERE relname IN ('regions', 'users') "
        "ORDER BY 1"
    )
    try:
        assert among._db.execute(sql).fetchall() == alone._db.execute(sql).fetchall()
    finally:
        alone.close()
        among.close()


# --- F5: startup handling -----------------------------------------------------------------


def test_sslrequest_after_refused_gssencrequest(door: PgDoor) -> None:
    """libpq (gssencmode=prefer with Kerberos credentials) sends GSSENCRequest, gets N,
    then SSLRequest on the same socket; PostgreSQL answers it. The door sends FATAL
    'unsupported frontend protocol 1234.5679'."""
    sock = socket.create_connection((door.host, door.port), timeout=5)
    sock.sendall(struct.pack("!II", 8, 80877104))
    assert sock.recv(1) == b"N"
    sock.sendall(struct.pack("!II", 8, 80877103))
    answer = sock.recv(1)
    sock.close()
    assert answer in (b"N", b"S"), answer


def test_scram_users_cannot_be_enumerated(door: PgDoor) -> None:
    """A SCRAM analyst gets AuthenticationSASL (10), an unknown user cleartext (3), so a
    stranger learns which names are analysts with a verifier (PostgreSQL mocks SCRAM
    for unknown roles)."""

    def auth_code(user: str) -> int:
        sock = socket.create_connection((door.host, door.port), timeout=5)
        sock.sendall(_startup(user))
        head = sock.recv(9)
        sock.close()
        return struct.unpack("!I", head[5:9])[0]

    assert auth_code("sam") == auth_code("no_such_analyst_xyz")


# --- F6: settings that PostgreSQL refuses are accepted and echoed -----------------------


def test_session_authorization_cannot_be_spoofed(door: PgDoor) -> None:
    with _connect(door) as ana:
        try:
            ana.execute("SET session_authorization = 'bob'")
        except psycopg.errors.InsufficientPrivilege:
            return
        shown = ana.execute("SHOW session_authorization").fetchone()
    assert shown == ("ana",), f"SET session_authorization accepted; SHOW now says {shown}"


# --- F7: catalog queries run without timeout or rate limit and starve the pool ---------


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        (
            "SELECT sum(hash(a.range + b.range + c.oid)) "
            "FROM range(1000000) a, range(100000) b, pg_class c",
            "the table function",
        ),
        ("SELECT length(repeat('a', 400000000)) FROM pg_class", "repeat() builds a value"),
        ("SELECT length(lpad('a', 400000000, 'x'))", "builds a value"),
        ("SELECT cardinality(generate_series(1, 100000000))", "builds a value"),
    ],
    ids=["range_join", "repeat", "lpad", "scalar_series"],
)
def test_a_catalog_query_cannot_hold_the_door(door: PgDoor, sql: str, refused: str) -> None:
    """A 'catalog' query (any SELECT naming only pg_* tables, or none) ran in the shadow
    DuckDB with no time limit and no rate limit, on the door's one thread pool: sixteen
    joins of range() from one analyst stopped every analyst's queries for minutes, and
    a scalar building a value of any size escaped DuckDB's memory limit. Refused before
    anything runs (proxy/catalog_limits.py); other analysts' sessions go on."""
    with _connect(door, BOB) as bob:
        sock = _login(door)
        sock.sendall(_msg(b"Q", _cstr(sql)))
        reply = _read(sock, 60)
        sock.close()
        errors = [m for m in reply if m[0] == "E"]
        assert errors and errors[0][1] == "0A000" and refused in errors[0][2], reply
        assert bob.execute("SELECT count(*) FROM pg_class").fetchall()


def test_the_catalog_shadow_stops_at_its_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A join the limits allow but that runs long is interrupted (57014)."""
    import sqlglot

    from proxy import catalog_limits
    from proxy.pgwire.shadow import SessionFacts, ShadowCatalog
    from proxy.pgwire.sqlstate import WireError

    shadow = ShadowCatalog([])
    monkeypatch.setattr(catalog_limits, "TIMEOUT_S", 0.2)
    slow = (
        "SELECT COUNT(*) FROM generate_series(1, 100000) a(x), generate_series(1, 100000) "
        "b(y) WHERE x <> y"
    )
    try:
        with pytest.raises(WireError) as info:
            shadow.answer(sqlglot.parse_one(slow, read="postgres"), [], SessionFacts("a", "d", "v", 1))
        assert info.value.sqlstate == "57014", info.value
    finally:
        shadow.close()


def test_a_catalog_query_reads_the_sessions_settings_not_the_servers(door: PgDoor) -> None:
    """current_setting of a literal name answers from the session (drivers ask for
    search_path and friends); of a computed name it reached DuckDB's own settings."""
    with _connect(door) as conn:
        assert conn.execute("SELECT current_setting('search_path')").fetchall()
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="server's own settings"):
            conn.execute(
                "SELECT current_setting(relname) FROM pg_class WHERE relname = 'users' LIMIT 1"
            )
