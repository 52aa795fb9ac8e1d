"""The real `trino` client (DBAPI and SQLAlchemy) against a real `dpsql serve` over HTTPS:
catalog answered free and exact, private answers charged once and then replayed,
refusals as the client's own exception carrying dpsql's code, nextUri paging, cancel,
session properties and identity."""

from __future__ import annotations

import base64

import httpx
import pytest
import sqlalchemy as sa
from trino.exceptions import TrinoUserError

from tests.server.conftest import KEYS
from tests.trino.conftest import PAGE_ROWS, TlsServer

pd = pytest.importorskip("pandas", reason="pandas is in the [bi] extra")

GROUPED = "SELECT region, COUNT(*) AS n FROM users GROUP BY region ORDER BY region"


def basic(name: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{KEYS[name][1]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def fetch(server: TlsServer, sql: str, *, name: str = "ana", **kwargs: object) -> list[list]:
    cursor = server.connect(name, **kwargs).cursor()
    cursor.execute(sql)
    return cursor.fetchall()


def test_handshakes_and_catalog_statements_are_answered_free(tls_server: TlsServer):
    before = tls_server.spent()
    assert fetch(tls_server, "SELECT 1") == [[1]]
    assert fetch(tls_server, "SELECT current_user, current_catalog") == [["ana", "dpsql"]]
    assert fetch(tls_server, "SELECT version()")[0][0].startswith("476")
    assert fetch(tls_server, "SHOW CATALOGS") == [["dpsql"]]
    assert fetch(tls_server, "SHOW SCHEMAS FROM dpsql") == [["information_schema"], ["main"]]
    assert fetch(tls_server, "SHOW TABLES LIKE 'u%'") == [["users"]]
    assert fetch(tls_server, "DESCRIBE users")[0] == ["user_id", "bigint", "", ""]
    create = fetch(tls_server, "SHOW CREATE TABLE dpsql.main.prompts")[0][0]
    assert create.startswith("CREATE TABLE dpsql.main.prompts (") and "ts timestamp(6)" in create
    # information_schema as tools write it: LIKE with ESCAPE, ORDER BY, a join
    rows = fetch(
        tls_server,
        "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
        "JOIN information_schema.tables t ON t.table_name = c.table_name "
        "WHERE c.column_name LIKE 'tokens\\_%' ESCAPE '\\' ORDER BY c.column_name DESC",
    )
    assert rows == [["prompts", "tokens_out", "integer"], ["prompts", "tokens_in", "integer"]]
    # column types of a query with LIMIT 0: no rows, exact types
    cursor = tls_server.connect().cursor()
    cursor.execute("SELECT ts, model, tokens_in * 2 AS t2 FROM prompts LIMIT 0")
    assert cursor.fetchall() == []
    assert [(d[0], d[1]) for d in cursor.description] == [
        ("ts", "timestamp(6)"),
        ("model", "varchar"),
        ("t2", "integer"),
    ]
    assert tls_server.spent() == before


def test_sqlalchemy_inspector_sees_only_granted_tables(tls_server: TlsServer):
    def engine(name: str) -> sa.Engine:
        return sa.create_engine(
            f"trino://{name}:{KEYS[name][1]}@127.0.0.1:{tls_server.port}/dpsql/main",
            connect_args={"http_scheme": "https", "verify": str(tls_server.cert)},
        )

    inspector = sa.inspect(engine("ana"))
    assert inspector.get_schema_names() == ["information_schema", "main"]
    assert inspector.get_table_names("main") == ["prompts", "regions", "tickets", "users"]
    columns = {c["name"]: c["type"] for c in inspector.get_columns("prompts", "main")}
    assert isinstance(columns["ts"], sa.TIMESTAMP) and isinstance(columns["model"], sa.String)
    assert isinstance(columns["tokens_in"], sa.Integer)
    narrow = sa.inspect(engine("narrow"))
    assert narrow.get_table_names("main") == ["regions", "users"]
    with pytest.raises(sa.exc.NoSuchTableError):
        narrow.get_columns("prompts", "main")


def test_group_by_through_pandas_is_charged_once_then_replayed(tls_server: TlsServer):
    engine = sa.create_engine(
        f"trino://ana:{KEYS['ana'][1]}@127.0.0.1:{tls_server.port}/dpsql/main",
        connect_args={"http_scheme": "https", "verify": str(tls_server.cert)},
    )
    before = tls_server.spent()
    with engine.connect() as conn:
        first = pd.read_sql(sa.text(GROUPED), conn)
    assert list(first.columns) == ["region", "n"]
    assert sorted(first["region"]) == ["east", "north", "south", "west"]
    charged = tls_server.spent()
    assert charged > before  # ε composes by RDP: the total grows by less than 0.5
    with engine.connect() as conn:
        again = pd.read_sql(sa.text(GROUPED), conn)
    assert again.equals(first)  # the same released numbers, replayed from the cache
    assert tls_server.spent() == charged


def test_privacy_metadata_travels_in_warnings_and_headers(tls_server: TlsServer):
    sql = "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"
    cursor = tls_server.connect().cursor()
    cursor.execute(sql)
    cursor.fetchall()
    first = [w["message"] for w in cursor.warnings]
    assert any("charged ε=0.5" in m for m in first), first
    assert any("95% of answers lie within" in m for m in first), first
    with tls_server.client() as c:
        r = c.post("/v1/statement", content=sql, headers=basic("ana"))
    assert r.status_code == 200 and r.json()["stats"]["state"] == "FINISHED"
    assert r.headers["X-DPSQL-Cached"] == "true" and float(r.headers["X-DPSQL-Epsilon"]) == 0.0
    assert "users=" in r.headers["X-DPSQL-Remaining"]
    messages = [w["message"] for w in r.json()["warnings"]]
    assert any("replayed from the cache" in m for m in messages), messages


@pytest.mark.parametrize(
    ("sql", "name", "fragment"),
    [
        (
            "SELECT prompt_id, ts FROM prompts ORDER BY ts DESC LIMIT 100",
            "UNSUPPORTED_SQL",
            "DESCRIBE <table>",
        ),
        (
            # MIN/MAX of numbers are answered (DP); of times they need bounds.
            "SELECT MIN(ts) AS min, MAX(ts) AS max FROM prompts",
            "UNSUPPORTED_SQL",
            "date or time",
        ),
        (
            "SELECT DISTINCT model, COUNT(*) AS n FROM prompts GROUP BY model",
            "UNSUPPORTED_SQL",
            "DISTINCT",
        ),
        ("SELECT COUNT(*) FROM nowhere.main.users", "NOT_FOUND", "catalog"),
        ("SELEC 1", "PARSE_ERROR", "could not parse"),
    ],
)
def test_refusals_are_trino_user_errors_with_dpsqls_code(
    tls_server: TlsServer, sql: str, name: str, fragment: str
):
    before = tls_server.spent()
    with pytest.raises(TrinoUserError) as info:
        fetch(tls_server, sql)
    assert info.value.error_name == name
    assert fragment in info.value.message and "[dpsql " in info.value.message
    assert tls_server.spent() == before


def test_superset_filter_values_are_answered_free(tls_server: TlsServer):
    # Superset's filter drop-down (issue #13 §2): the policy's values of a public domain.
    before = tls_server.spent()
    rows = fetch(tls_server, "SELECT DISTINCT model AS column_values FROM prompts LIMIT 1000")
    assert sorted(r[0] for r in rows) == ["large", "medium", "small"]
    assert tls_server.spent() == before


def test_ungranted_tables_are_refused_like_on_v1_query(tls_server: TlsServer):
    with pytest.raises(TrinoUserError) as info:
        fetch(tls_server, "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", name="narrow")
    assert info.value.error_name == "NOT_FOUND"  # exactly like an unknown table (issue #19)


def test_answers_are_paged_through_nexturi(tls_server: TlsServer):
    sql = "SELECT region, plan, COUNT(*) AS n FROM users GROUP BY region, plan"
    with tls_server.client() as c:
        doc = c.post("/v1/statement", content=sql, headers=basic("ana")).json()
        pages = [doc]
        while "nextUri" in doc:
            doc = c.get(doc["nextUri"], headers=basic("ana")).json()
            pages.append(doc)
        # another analyst cannot read the pages
        stranger = c.get(pages[0]["nextUri"], headers=basic("bob")).json()
    assert "error" not in pages[-1]
    rows = [row for page in pages for row in page.get("data", [])]
    assert len(rows) == 12 and len(pages) == 4  # 4 regions x 3 plans, 3 rows a page
    assert all(len(page.get("data", [])) <= PAGE_ROWS for page in pages)
    assert [p["stats"]["state"] for p in pages] == ["RUNNING"] * 3 + ["FINISHED"]
    assert stranger["error"]["errorName"] == "NOT_FOUND"
    # the client follows the same pages
    assert sorted(map(tuple, fetch(tls_server, sql))) == sorted(map(tuple, rows))


def test_cancel_stops_a_paged_answer(tls_server: TlsServer):
    with tls_server.client() as c:
        doc = c.post(
            "/v1/statement", content="SHOW COLUMNS FROM prompts", headers=basic("ana")
        ).json()
        assert len(doc["data"]) == PAGE_ROWS and "nextUri" in doc
        assert c.delete(doc["nextUri"], headers=basic("ana")).status_code == 204
        after = c.get(doc["nextUri"], headers=basic("ana")).json()
    assert after["error"]["errorName"] == "USER_CANCELED"
    cursor = tls_server.connect().cursor()
    cursor.execute("SHOW COLUMNS FROM prompts")
    cursor.fetchone()
    cursor.cancel()
    assert cursor._query is not None and cursor._query.cancelled


def test_identity_comes_from_the_key_only(tls_server: TlsServer):
    with tls_server.client() as c:
        for headers in (
            {"X-Trino-User": "ana"},
            {"X-Trino-User": "ana", "Authorization": "Basic " + base64.b64encode(b"ana:").decode()},
            {"Authorization": "Basic " + base64.b64encode(b"ana:not-a-key").decode()},
            {"Authorization": "Basic !!!"},
        ):
            r = c.post("/v1/statement", content="SELECT 1", headers=headers)
            assert r.status_code == 401, (headers, r.text)
            assert r.json()["error"]["code"] == "unauthorized"
        bearer = {"Authorization": f"Bearer {KEYS['ana'][1]}", "X-Trino-User": "someone-else"}
        r = c.post("/v1/statement", content="SELECT current_user", headers=bearer)
    assert r.json()["data"] == [["ana"]]
    # plain HTTP to a TLS port is not served
    with pytest.raises(httpx.HTTPError):
        httpx.post(
            f"http://127.0.0.1:{tls_server.port}/v1/statement", content="SELECT 1", timeout=5
        )


def charged(cursor) -> list[str]:
    return [w["message"] for w in cursor.warnings if "charged ε=" in w["message"]]


def test_session_properties_and_analyst_defaults_choose_the_budget(tls_server: TlsServer):
    sql = "SELECT plan, COUNT(*) AS n FROM users WHERE age > 30 GROUP BY plan"
    conn = tls_server.connect()
    cursor = conn.cursor()
    cursor.execute("SET SESSION dpsql.epsilon = 0.3")
    cursor.fetchall()
    assert conn._client_session.properties == {"dpsql.epsilon": "0.3"}
    cursor.execute(sql)
    cursor.fetchall()
    assert "charged ε=0.3," in charged(cursor)[0]
    cursor.execute("SHOW SESSION LIKE 'dpsql.eps%'")
    assert cursor.fetchall()[0][:2] == ["dpsql.epsilon", "0.3"]
    # the same property straight from the connection's session properties, with intervals
    rows = fetch(
        tls_server,
        sql,
        session_properties={"dpsql.epsilon": "0.3", "dpsql.intervals": "true"},
    )
    assert len(rows[0]) == 3 and isinstance(rows[0][2], float)  # plan, n, n_ci95
    # bob's policy default is ε = 0.2; a session property overrides it
    bob = tls_server.connect("bob").cursor()
    bob.execute("SELECT plan, COUNT(*) AS n FROM users WHERE age > 40 GROUP BY plan")
    bob.fetchall()
    assert "charged ε=0.2," in charged(bob)[0]
    bob = tls_server.connect("bob", session_properties={"dpsql.rho": "0.01"}).cursor()
    bob.execute("SELECT plan, COUNT(*) AS n FROM users WHERE age > 50 GROUP BY plan")
    bob.fetchall()
    assert charged(bob) and "charged ε=0.2," not in charged(bob)[0]
    with pytest.raises(TrinoUserError) as info:
        fetch(tls_server, "SET SESSION dpsql.epsilon = 'lots'")
    assert info.value.error_name == "BAD_REQUEST"


def test_parameters_bind_with_execute_immediate_and_legacy_prepare(tls_server: TlsServer):
    sql = (
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name = ?"
    )
    for legacy in (False, True):
        cursor = tls_server.connect(legacy_prepared_statements=legacy).cursor()
        cursor.execute(sql, ["main", "users"])
        assert cursor.fetchall() == [["users"]]


def test_superset_series_limit_join_is_two_releases(tls_server: TlsServer):
    window = (
        "ts >= CAST('2022-01-01 00:00:00.000000' AS TIMESTAMP) "
        "AND ts < CAST('2026-01-01 00:00:00.000000' AS TIMESTAMP)"
    )
    sql = (
        "SELECT DATE_TRUNC('YEAR', CAST(ts AS TIMESTAMP)) AS ts, model AS model, COUNT(*) AS count "
        "FROM dpsql.main.prompts JOIN (SELECT model AS model__, COUNT(*) AS mme_inner__ "
        f"FROM dpsql.main.prompts WHERE {window} GROUP BY model ORDER BY COUNT(*) DESC LIMIT 2) "
        f"AS series_limit ON model = model__ WHERE {window} "
        "GROUP BY DATE_TRUNC('YEAR', CAST(ts AS TIMESTAMP)), model ORDER BY count DESC LIMIT 10000"
    )
    before = tls_server.spent()
    cursor = tls_server.connect().cursor()
    cursor.execute(sql)
    rows = cursor.fetchall()
    assert len({r[1] for r in rows}) <= 2  # only the two top-ranked series
    messages = [w["message"] for w in cursor.warnings]
    assert any("series ranking charged" in m for m in messages), messages
    assert any("answer charged" in m for m in messages), messages
    spent = tls_server.spent()
    assert spent > before
    assert fetch(tls_server, sql) == rows and tls_server.spent() == spent


def test_columns_qualified_with_catalog_and_schema_are_answered(tls_server: TlsServer):
    # Tableau and hand-written Trino SQL qualify columns as fully as tables; the catalog
    # part of a column reached the engine and DuckDB's binder refused it (2026-12-06).
    plain = fetch(tls_server, GROUPED)
    full = fetch(
        tls_server,
        'SELECT "dpsql"."main"."users"."region", COUNT(*) AS n FROM "dpsql"."main"."users" '
        'GROUP BY "dpsql"."main"."users"."region" ORDER BY "dpsql"."main"."users"."region"',
    )
    assert full == plain  # the same release (a free repeat), not a refusal


def test_supersets_iso8601_time_range_is_answered_as_its_literal_form(tls_server: TlsServer):
    # Superset's Trino engine spec writes a chart's time range as from_iso8601_timestamp
    # (and from_iso8601_date) of a literal: refused until 2026-12-06, now folded before
    # planning, so the release is the one the CAST form of the same range gets.
    iso = (
        "SELECT model AS model, COUNT(*) AS count FROM dpsql.main.prompts "
        "WHERE ts >= from_iso8601_timestamp('2024-01-01T00:00:00.000000') "
        "AND ts < from_iso8601_timestamp('2024-07-01T00:00:00.000000') "
        "GROUP BY model ORDER BY model"
    )
    cast = (
        "SELECT model AS model, COUNT(*) AS count FROM dpsql.main.prompts "
        "WHERE ts >= CAST('2024-01-01 00:00:00.000000' AS TIMESTAMP) "
        "AND ts < CAST('2024-07-01 00:00:00.000000' AS TIMESTAMP) "
        "GROUP BY model ORDER BY model"
    )
    first = fetch(tls_server, iso)
    assert [m for m, _ in first] == ["large", "medium", "small"]
    spent = tls_server.spent()
    assert fetch(tls_server, cast) == first  # replayed: the same release
    assert tls_server.spent() == spent


def test_the_clients_time_zone_is_where_the_clock_is_read(tls_server: TlsServer):
    # The trino client sends its zone in X-Trino-Time-Zone; Trino reads current_date
    # there. The door passes it to the engine, which says where it read the clock.
    cursor = tls_server.connect(timezone="Asia/Tokyo").cursor()
    cursor.execute("SELECT COUNT(*) AS n FROM prompts WHERE ts < current_date")
    cursor.fetchall()
    messages = [w["message"] for w in cursor.warnings]
    assert any("read as" in m and "Asia/Tokyo" in m for m in messages), messages
