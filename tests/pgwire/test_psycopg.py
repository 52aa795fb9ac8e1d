"""psycopg 3 and psycopg2 against a real `dpsql pg`."""

from __future__ import annotations

import json

import pytest

from tests.pgwire.conftest import ANA, NARROW, SAM, PgDoor

psycopg = pytest.importorskip("psycopg", reason="the pg extra (psycopg) is not installed")
psycopg2 = pytest.importorskip("psycopg2", reason="the pg extra (psycopg2) is not installed")
errors = psycopg.errors


def last_release(conn: psycopg.Connection) -> dict:
    row = conn.execute("SHOW dpsql.last_release").fetchone()
    assert row is not None
    return json.loads(row[0])


def test_server_side_parameters_prepared_reuse_and_free_repeat(door: PgDoor) -> None:
    sql = "SELECT model, COUNT(*) AS n FROM prompts WHERE tokens_in > %s GROUP BY model"
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        first = conn.execute(sql, [123], prepare=True).fetchall()
        paid = last_release(conn)
        assert not paid["cached"] and paid["epsilon"] > 0
        assert {m for m, _ in first} == {"small", "medium", "large"}
        assert all(isinstance(n, int) for _, n in first)
        for _ in range(4):  # psycopg prepares server-side: Parse once, Bind/Execute again
            again = conn.execute(sql, [123], prepare=True).fetchall()
            assert again == first
            replay = last_release(conn)
            assert replay["cached"] and replay["epsilon"] == 0.0
            assert replay["charge_id"] == paid["charge_id"]
            assert replay["remaining"] == paid["remaining"]  # a repeat costs nothing
        text_param = conn.execute(
            "SELECT COUNT(*) AS n FROM prompts WHERE model = %s", ["small"]
        ).fetchone()
        assert text_param is not None and isinstance(text_param[0], int)


def test_binary_results_and_types(door: PgDoor) -> None:
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        cur = conn.cursor(binary=True)
        rows = cur.execute(
            "SELECT region, COUNT(*) AS n, AVG(age) AS a FROM users GROUP BY region"
        ).fetchall()
        assert [r[0] for r in rows] == ["north", "south", "east", "west"]
        assert all(isinstance(r[1], int) and isinstance(r[2], float) for r in rows)
        assert [d.name for d in cur.description] == ["region", "n", "a"]


def test_named_cursor_fetches_in_pages(door: PgDoor) -> None:
    with psycopg.connect(door.dsn()) as conn:
        cur = conn.cursor(name="regions_pages")
        cur.execute("SELECT region, COUNT(*) AS n FROM users WHERE age < 60 GROUP BY region")
        pages = [cur.fetchmany(3), cur.fetchmany(3)]
        assert [len(p) for p in pages] == [3, 1]
        cur.close()
        assert last_release(conn)["epsilon"] > 0  # one charge for all the pages
        conn.rollback()


def test_refusals_map_to_psycopg_error_classes(door: PgDoor) -> None:
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        with pytest.raises(errors.FeatureNotSupported) as raw:
            conn.execute("SELECT user_id FROM users")
        assert raw.value.diag.sqlstate == "0A000"
        assert raw.value.diag.message_hint and "aggregate" in raw.value.diag.message_hint
        with pytest.raises(errors.SyntaxError):
            conn.execute("SELECT COUNT(* FROM users")
        with pytest.raises(errors.UndefinedTable):
            conn.execute("SELECT COUNT(*) FROM nowhere")
        with pytest.raises(errors.UndefinedObject):
            conn.execute("SET dpsql.epsilonn = 1")
        with pytest.raises(errors.InvalidParameterValue):
            conn.execute("SET dpsql.epsilon = -1")
        # the connection is still usable after each refusal
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_ungranted_table_is_forbidden(door: PgDoor) -> None:
    with psycopg.connect(door.dsn(NARROW), autocommit=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables").fetchall()}
        assert tables == {"users", "regions"}
        with pytest.raises((errors.InsufficientPrivilege, errors.UndefinedTable)):
            conn.execute("SELECT COUNT(*) FROM prompts")


def test_transactions_report_their_state(door: PgDoor) -> None:
    with psycopg.connect(door.dsn()) as conn:
        info = conn.info
        conn.execute("SELECT 1")
        assert info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(errors.FeatureNotSupported):
            conn.execute("SELECT user_id FROM users")
        assert info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT current_schema()").fetchone() == ("public",)
        conn.commit()


def test_scram_and_per_analyst_default(door: PgDoor) -> None:
    with psycopg.connect(door.dsn(SAM), autocommit=True) as conn:
        conn.execute("SELECT plan, COUNT(*) AS n FROM users GROUP BY plan").fetchall()
        assert last_release(conn)["epsilon"] == pytest.approx(0.25)  # policy default
        conn.execute("SET dpsql.epsilon = 0.4")
        conn.execute("SELECT plan, COUNT(*) AS n FROM users WHERE age > 40 GROUP BY plan")
        assert last_release(conn)["epsilon"] == pytest.approx(0.4)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(door.dsn((SAM[0], "wrong-key")))


def test_key_of_another_analyst_is_refused(door: PgDoor) -> None:
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(door.dsn(("bob", ANA[1])))


def test_accuracy_setting(door: PgDoor) -> None:
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        conn.execute("SET dpsql.accuracy = 'rel_error=0.2, at_count=100'")
        shown = conn.execute("SHOW dpsql.accuracy").fetchone()
        assert shown == ("rel_error=0.2, at_count=100, confidence=0.95",)
        conn.execute("SELECT COUNT(*) AS n FROM users WHERE plan = 'pro'").fetchall()
        assert last_release(conn)["epsilon"] > 0
        conn.execute("RESET dpsql.accuracy")
        assert conn.execute("SHOW dpsql.accuracy").fetchone() == ("default",)


def test_psycopg2_simple_protocol_and_refusal(door: PgDoor) -> None:
    conn = psycopg2.connect(door.dsn())
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT COUNT(*) AS n FROM prompts WHERE model = %s AND flagged = %s", ("large", False)
        )
        (count,) = cur.fetchone()
        assert isinstance(count, int)
        named = conn.cursor("pages")
        named.itersize = 2
        named.execute("SELECT region, COUNT(*) AS n FROM users GROUP BY region")
        assert len(named.fetchmany(2)) == 2 and len(named.fetchall()) == 2
        named.close()
        conn.rollback()
        with pytest.raises(psycopg2.errors.FeatureNotSupported):
            cur.execute("SELECT age FROM users")
        conn.rollback()
    finally:
        conn.close()


def test_metabase_qualifies_every_column_with_its_schema(door: PgDoor) -> None:
    # Metabase's PostgreSQL driver writes "public"."prompts"."model" for every column;
    # the door dropped the schema of tables only, and DuckDB's binder refused the rest
    # (a corpus of BI tools' SQL, 2026-12-06).
    plain = "SELECT model AS model, COUNT(*) AS count FROM prompts GROUP BY model ORDER BY model"
    metabase = (
        'SELECT "public"."prompts"."model" AS "model", count(*) AS "count" '
        'FROM "public"."prompts" GROUP BY "public"."prompts"."model" '
        'ORDER BY "public"."prompts"."model" ASC'
    )
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        first = conn.execute(plain).fetchall()
        again = conn.execute(metabase).fetchall()
        assert again == first and [m for m, _ in again] == sorted(m for m, _ in first)
        assert last_release(conn)["cached"]  # the same release, replayed free


def test_metabases_relative_date_filter_reads_the_clock_once(door: PgDoor) -> None:
    # Metabase's "previous 3 years" filter on PostgreSQL reads now(): refused until
    # 2026-12-06; now the door's engine reads the clock when the query arrives, computes
    # the dates, and says which time it used. Asked again the same day, the same dates:
    # the same release, replayed free.
    metabase = (
        'SELECT "public"."prompts"."model" AS "model", count(*) AS "count" '
        'FROM "public"."prompts" '
        'WHERE ("public"."prompts"."ts" >= CAST((CAST(now() AS timestamp) + INTERVAL \'-3 year\') AS date)) '
        'AND ("public"."prompts"."ts" < CAST(CAST(now() AS timestamp) AS date)) '
        'GROUP BY "public"."prompts"."model" ORDER BY "public"."prompts"."model" ASC'
    )
    notices: list[str] = []
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        first = conn.execute(metabase).fetchall()
        assert [m for m, _ in first] == ["large", "medium", "small"]
        assert not last_release(conn)["cached"]
        assert any(" read as " in n and "UTC, when the query arrived" in n for n in notices), (
            notices
        )
        again = conn.execute(metabase).fetchall()
        assert again == first and last_release(conn)["cached"]


def test_the_session_time_zone_is_where_the_clock_is_read(door: PgDoor) -> None:
    # Metabase's report time zone sets the session's TimeZone; PostgreSQL reads now()
    # into a date there. The door passes it to the engine (it was echoed and ignored).
    notices: list[str] = []
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SET TIME ZONE 'Asia/Tokyo'")
        conn.execute("SELECT COUNT(*) AS n FROM prompts WHERE ts < CURRENT_DATE").fetchall()
        assert any("read as" in n and "Asia/Tokyo" in n for n in notices), notices
        conn.execute("SET TIME ZONE 'Mars/Olympus'")
        with pytest.raises(psycopg.errors.DatabaseError) as info:
            conn.execute("SELECT COUNT(*) AS n FROM prompts WHERE ts < CURRENT_DATE")
        assert "time zone" in str(info.value)


def test_rollup_through_the_extended_protocol(door: PgDoor) -> None:
    # Superset and notebooks ask for subtotals with ROLLUP; the door describes the
    # answer before running it (Parse/Describe), then runs it: the finest grouping is
    # released once and the subtotals summed from its cells.
    sql = (
        "SELECT model, flagged, COUNT(*) AS n FROM prompts WHERE tokens_in > %s "
        "GROUP BY ROLLUP (model, flagged) ORDER BY model NULLS LAST, flagged NULLS LAST"
    )
    with psycopg.connect(door.dsn(), autocommit=True) as conn:
        rows = conn.execute(sql, (0,)).fetchall()
        cells = [r for r in rows if r[0] is not None and r[1] is not None]
        totals = {r[0]: r[2] for r in rows if r[0] is not None and r[1] is None}
        assert cells and totals
        for model, total in totals.items():
            assert total == sum(n for m, _, n in cells if m == model)
        assert rows[-1][:2] == (None, None) and rows[-1][2] == sum(n for *_, n in cells)
