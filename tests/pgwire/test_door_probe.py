"""An adversarial probe of the PostgreSQL door (a helper session's review, 2026-12-06):
each test failed on the code before its fix. They reuse the
raw-protocol helpers of test_door_review.py and the module-scoped real door of
conftest.py (cap 1000, rate limit off).
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import psycopg
import pytest

from tests.pgwire.conftest import PgDoor
from tests.pgwire.test_door_review import BOB, _bind, _connect, _cstr, _login, _msg, _parse, _read

SYNC = _msg(b"S", b"")
EXEC = _msg(b"E", _cstr("") + struct.pack("!I", 0))
NUMERIC = 1700


def _describe_statement(name: str = "") -> bytes:
    return _msg(b"D", b"S" + _cstr(name))


def _row_description_width(sock: socket.socket, message: bytes) -> tuple[int, list[int]]:
    """Send ``message``; the field count of the first RowDescription and the column
    count of every DataRow that follows (raw bytes, so nothing is lost)."""
    sock.sendall(message)
    sock.settimeout(10)
    data = b""
    while not data.endswith(b"Z\x00\x00\x00\x05I"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    width, rows, i = -1, [], 0
    while i + 5 <= len(data):
        tag = data[i : i + 1]
        (length,) = struct.unpack("!I", data[i + 1 : i + 5])
        payload = data[i + 5 : i + 1 + length]
        i += 1 + length
        if tag == b"T" and width < 0:
            (width,) = struct.unpack("!H", payload[:2])
        elif tag == b"D":
            rows.append(struct.unpack("!H", payload[:2])[0])
    return width, rows


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Latency:
    """Another analyst's `SELECT 1` every 0.2 s on its own connection, timed."""

    def __init__(self, door: PgDoor):
        self.door, self.worst, self._stop = door, 0.0, False
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        with _connect(self.door, BOB) as other:
            while not self._stop:
                started = time.monotonic()
                other.execute("SELECT 1").fetchall()
                self.worst = max(self.worst, time.monotonic() - started)
                time.sleep(0.2)

    def __enter__(self) -> _Latency:
        self._thread.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join(60)


# --- C1: sqlglot's TokenError is not caught: the connection is dropped ------------------
# statements._query catches only sqlglot.errors.ParseError; an unterminated literal, or
# PostgreSQL's own `$1,$2` (no space: sqlglot's tokenizer reads `$2...` as a dollar
# quote), raises TokenError out of Connection._handle, and server._accepted logs
# "connection failed" and closes the socket: no ErrorResponse, no ReadyForQuery. In a
# simple-query batch the statements before it were run (and charged) but never sent.


@pytest.mark.parametrize(
    "message",
    [
        _msg(b"Q", _cstr("SELECT 'abc")),
        _parse("SELECT 'abc", []) + SYNC,
        # a valid PostgreSQL statement, as psycopg sends `IN (%s,%s)` or node-pg `($1,$2)`
        _parse("SELECT COUNT(*) FROM users WHERE plan IN ($1,$2)", [])
        + _bind([b"pro", b"team"], [], [])
        + EXEC
        + SYNC,
    ],
    ids=["simple-unterminated", "parse-unterminated", "parse-dollar-params-no-space"],
)
def test_a_tokenizer_error_is_an_error_response_not_a_dropped_connection(
    door: PgDoor, message: bytes
) -> None:
    sock = _login(door)
    sock.sendall(message)
    reply = _read(sock, 20)
    sock.close()
    assert ("EOF",) not in reply, reply
    assert ("Z",) in reply, reply
    if b"$1" in message:  # valid PostgreSQL: answered, not a syntax error
        assert any(m[0] == "D" for m in reply) and not any(m[0] == "E" for m in reply), reply
    elif message.startswith(b"Q"):  # (a Parse may leave the engine to report it later)
        assert any(m[0] == "E" and m[1] == "42601" for m in reply), reply


# --- D1: a statement-level Describe of a user query can disagree with its rows ----------
# Connection._statement_columns names a user query's columns from its text without
# running it (_projection_names): `s.*` becomes one column "?column?" while the Execute
# that follows (no portal Describe, as asyncpg, pgx and pgjdbc's named statements do)
# sends DataRows of two columns, encoded against the one described column.


def test_a_statement_describe_names_as_many_columns_as_the_rows_have(door: PgDoor) -> None:
    sql = "SELECT s.* FROM (SELECT region, COUNT(*) AS n FROM users GROUP BY region) s"
    sock = _login(door)
    width, rows = _row_description_width(
        sock,
        _parse(sql, []) + _describe_statement() + _bind([], [], []) + EXEC + SYNC,
    )
    sock.close()
    assert rows, "the query was not answered"
    assert all(r == width for r in rows), (width, rows)


# --- B1: SET LOCAL, and SET in a rolled-back transaction, outlive the transaction -------
# session_settings has no transaction scope: `BEGIN; SET LOCAL dpsql.epsilon = 2;
# ROLLBACK` leaves ε = 2 for every later query of the connection (a pooled connection
# shared by a dashboard), where PostgreSQL restores the previous value at COMMIT (SET
# LOCAL) or ROLLBACK (both).


def test_set_local_and_rolled_back_set_end_with_their_transaction(door: PgDoor) -> None:
    with _connect(door) as conn:
        conn.execute("SET dpsql.epsilon = 0.25")
        conn.execute("BEGIN")
        conn.execute("SET LOCAL dpsql.epsilon = 2")
        conn.execute("COMMIT")
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.25"
        conn.execute("BEGIN")
        conn.execute("SET dpsql.epsilon = 3")
        conn.execute("ROLLBACK")
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.25"


# --- D2: DateStyle / IntervalStyle / client_encoding are announced but not honoured -----
# The door stores the setting and reports it in ParameterStatus, but always sends ISO
# dates, postgres-style intervals and UTF-8. Drivers decode by what was announced:
# psycopg then fails on every date (DataError) or decodes text as LATIN1.


@pytest.mark.parametrize(
    ("setting", "query"),
    [
        ("SET DateStyle = 'SQL, DMY'", "SELECT DATE '2024-01-02' AS d"),
        ("SET IntervalStyle = 'sql_standard'", "SELECT INTERVAL '1 day 2 hours' AS i"),
        ("SET client_encoding = 'LATIN1'", "SELECT 'é' AS e"),
    ],
)
def test_a_display_setting_is_honoured_or_refused(door: PgDoor, setting: str, query: str) -> None:
    with _connect(door) as conn:
        try:
            conn.execute(setting)
        except psycopg.errors.InvalidParameterValue as refused:
            # Refusing the setting is a fix too: a refusal with its SQLSTATE (22023) and
            # the reason, not any error (a dropped connection is no refusal).
            assert "dpsql answers with" in str(refused), refused
            return
        reference = {"d": "2024-01-02", "i": "1 day, 2:00:00", "e": "é"}
        got = conn.execute(query).fetchone()[0]
        assert str(got) in reference.values(), got


# --- C2: a padded simple query freezes every connection, then is answered ---------------
# Connection._simple splits the batch (sqltext.split_statements: a Python loop over every
# character) on the event loop before _check_length, which then sees the stripped
# statement: 40 MB of trailing blanks (or a batch of many short statements) hold the loop
# for seconds and pass the 20,000-character limit.


def test_a_padded_query_does_not_hold_the_event_loop(door: PgDoor) -> None:
    # within the message limit (16 MiB here), beyond a batch's: refused before the split
    padded = "SELECT 1 " + " " * 9_000_000
    # beyond the message limit: the connection is closed before the body is read
    huge = "SELECT 1 " + " " * 30_000_000
    with _Latency(door) as other:
        sock = _login(door)
        sock.sendall(_msg(b"Q", _cstr(padded)))
        reply = _read(sock, 120)
        try:
            sock.sendall(_msg(b"Q", _cstr(huge)))
            closed = _read(sock, 120)
        except OSError:
            closed = [("EOF",)]
        sock.close()
    assert other.worst < 1.5, f"another analyst waited {other.worst:.1f} s"
    assert any(m[0] == "E" and m[1] == "54000" for m in reply), reply
    assert ("EOF",) in closed or any(m[0] == "E" and m[1] == "08P01" for m in closed), closed


# --- C3: no length limit on messages after login ----------------------------------------
# Connection.serve reads with PgStream.read_message() without a limit (the pre-login
# messages have one): a message announcing 1.5 GB is buffered for as long as the client
# sends (PostgreSQL caps messages at 1 GB and refuses a length above what the type
# allows; dpsql's HTTP door caps bodies at 256 KB).


def test_a_huge_message_after_login_is_refused_before_it_is_read(door: PgDoor) -> None:
    sock = _login(door)
    sock.sendall(b"Q" + struct.pack("!I", 1_500_000_000))
    before = _rss_mb(door.process.pid)
    chunk = b" " * (1 << 20)
    refused = False
    try:
        sock.settimeout(5)
        for _ in range(200):
            sock.sendall(chunk)
    except OSError:
        refused = True
    grown = _rss_mb(door.process.pid) - before
    sock.close()
    assert refused or grown < 50, f"the door buffered {grown:.0f} MB of one message"


# --- C4: a binary NUMERIC parameter of 10 bytes binds as ~200,000 characters ------------
# pg-mimic's _decode_numeric formats weight 32767 / dscale 65535 as a plain decimal;
# engine_sql then renders 1,000 of them (a 10 KB Bind) into a 196-million-character SQL
# text with sqlglot on the event loop (all connections wait ~4 s, +500 MB) before the
# engine refuses the length.


def test_bound_parameters_cannot_blow_up_the_sql_text(door: PgDoor) -> None:
    n = 1000
    huge = struct.pack("!HhHH", 1, 32767, 0, 65535) + struct.pack("!H", 9)
    sql = "SELECT COUNT(*) FROM users WHERE age IN (" + ", ".join(f"${i + 1}" for i in range(n)) + ")"
    with _Latency(door) as other:
        sock = _login(door)
        sock.sendall(_parse(sql, [NUMERIC] * n) + _bind([huge] * n, [1], []) + EXEC + SYNC)
        reply = _read(sock, 120)
        sock.close()
    assert any(m[0] == "E" for m in reply), reply
    assert other.worst < 1.0, f"another analyst waited {other.worst:.1f} s"


# --- C5: free cursors (and named portals) hold catalog answers without limit ------------
# DECLARE c<i> CURSOR FOR <catalog query> materialises up to 100,000 rows / 16 MB per
# cursor (catalog_limits) and keeps it in Connection.portals for the connection's life;
# a 400-byte statement costs the server ~24 MB, free, repeatable without bound.


def test_declared_cursors_are_bounded(door: PgDoor) -> None:
    pad = "x" * 100
    sql = (
        f"SELECT a.column_name || b.column_name || c.column_name || d.column_name || '{pad}' "
        "FROM information_schema.columns a, information_schema.columns b, "
        "information_schema.columns c, information_schema.columns d LIMIT 99000"
    )
    sock = _login(door)
    before = _rss_mb(door.process.pid)
    refused = False
    for i in range(20):
        sock.sendall(_msg(b"Q", _cstr(f"DECLARE c{i} CURSOR FOR {sql}")))
        if any(m[0] == "E" for m in _read(sock, 60)):
            refused = True
            break
    grown = _rss_mb(door.process.pid) - before
    sock.close()
    assert refused or grown < 150, f"20 cursors hold {grown:.0f} MB"


# --- D3: table-less SELECTs use DuckDB's arithmetic, not PostgreSQL's -------------------


def test_a_table_less_select_divides_like_postgresql(door: PgDoor) -> None:
    with _connect(door) as conn:
        assert conn.execute("SELECT 7/2").fetchone()[0] == 3



def test_set_local_outside_a_transaction_warns_and_a_later_set_outlives_it(
    door: PgDoor,
) -> None:
    with _connect(door) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.sqlstate or ""))
        conn.execute("SET dpsql.epsilon = 0.25")
        conn.execute("SET LOCAL dpsql.epsilon = 2")  # outside a transaction: no effect
        assert "25P01" in notices
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.25"
        conn.execute("BEGIN")
        conn.execute("SET LOCAL dpsql.epsilon = 2")
        conn.execute("SET dpsql.epsilon = 0.5")  # a plain SET after it stays
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.5"
        conn.execute("COMMIT")
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.5"


def test_deallocate_all_removes_every_statement(door: PgDoor) -> None:
    """``DEALLOCATE ALL`` removed only a statement named "ALL" (a probe, 2026-12-06)."""
    def parse(name: str, sql: str) -> bytes:
        return _msg(b"P", _cstr(name) + _cstr(sql) + struct.pack("!H", 0))

    def bind(name: str) -> bytes:
        return _msg(b"B", _cstr("") + _cstr(name) + struct.pack("!HHH", 0, 0, 0))

    sock = _login(door)
    sock.sendall(parse("s1", "SELECT 1") + parse("s2", "SELECT 2") + SYNC)
    _read(sock, 10)
    sock.sendall(_msg(b"Q", _cstr("DEALLOCATE ALL")))
    done = _read(sock, 10)
    sock.sendall(bind("s1") + SYNC)
    gone = _read(sock, 10)
    sock.close()
    assert not any(m[0] == "E" for m in done), done
    assert any(m[0] == "E" and m[1] == "26000" for m in gone), gone


def test_unaliased_columns_are_named_as_postgresql_names_them(door: PgDoor) -> None:
    """An unaliased ``COUNT(*)`` came back as "COUNT(*)" where PostgreSQL says "count"
    (and the statement's Describe said "count" too: a probe, 2026-12-06)."""
    with _connect(door) as conn:
        cursor = conn.execute(
            "SELECT region, COUNT(*), AVG(age), region AS r FROM users GROUP BY region"
        )
        assert [d.name for d in cursor.description] == ["region", "count", "avg", "r"]


def test_rollback_to_a_savepoint_undoes_the_settings_made_after_it(door: PgDoor) -> None:
    """As PostgreSQL: ROLLBACK TO SAVEPOINT restores the settings of the savepoint, and
    RELEASE keeps them (a review, 2026-12-06: the budget set after a savepoint outlived
    its rollback)."""
    with _connect(door) as conn:
        conn.execute("SET dpsql.epsilon = 0.25")
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT a")
        conn.execute("SET dpsql.epsilon = 2")
        conn.execute("SAVEPOINT b")
        conn.execute("SET dpsql.epsilon = 3")
        conn.execute("ROLLBACK TO SAVEPOINT b")
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "2"
        conn.execute("ROLLBACK TO a")
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.25"
        conn.execute("SAVEPOINT c")
        conn.execute("SET dpsql.epsilon = 0.5")
        conn.execute("RELEASE SAVEPOINT c")
        conn.execute("COMMIT")
        assert conn.execute("SHOW dpsql.epsilon").fetchone()[0] == "0.5"
