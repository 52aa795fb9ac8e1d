"""The Trino door's parts without a server: statement recognition, parameter binding,
session properties, type signatures, error objects, the series-limit split and the
shadow catalog (which must hold no rows and run nothing but queries on shadow tables)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import duckdb
import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from proxy.errors import DPSQLError
from proxy.trino import protocol as P
from proxy.trino import series_limit, statements
from proxy.trino import session as S
from proxy.trino import types as T
from proxy.trino.shadow import ShadowCatalog, ShadowTable
from proxy.trino.statements import Kind, bind_parameters, classify, parameters, show_sql, unquote


@pytest.mark.parametrize(
    ("sql", "kind", "name"),
    [
        ("SET SESSION dpsql.epsilon = 0.5;", Kind.SET_SESSION, "dpsql.epsilon"),
        ("reset session dpsql.epsilon", Kind.RESET_SESSION, "dpsql.epsilon"),
        (
            "EXECUTE IMMEDIATE 'SELECT ''a'' = ?' USING 'b'",
            Kind.EXECUTE_IMMEDIATE,
            "'SELECT ''a'' = ?'",
        ),
        ("EXECUTE st_1 USING 'public', 3", Kind.EXECUTE, "st_1"),
        ("PREPARE st_1 FROM SELECT 1", Kind.PREPARE, "st_1"),
        ("DEALLOCATE PREPARE st_1", Kind.DEALLOCATE, "st_1"),
        ("SHOW TABLES FROM dpsql.main LIKE 'u%'", Kind.SHOW_TABLES, "dpsql.main"),
        ("DESCRIBE users", Kind.SHOW_COLUMNS, "users"),
        ("DESCRIBE OUTPUT st_1", Kind.QUERY, ""),
        ("SHOW CREATE TABLE main.users", Kind.SHOW_CREATE_TABLE, "main.users"),
        ("  SELECT 1  ", Kind.QUERY, ""),
        ("WITH a AS (SELECT 1) SELECT * FROM a", Kind.QUERY, ""),
    ],
)
def test_statements_are_recognised(sql, kind, name):
    statement = classify(sql)
    assert (statement.kind, statement.name) == (kind, name)


def _classify_by_every_pattern(text: str) -> tuple[Kind, str]:
    """classify without its first-word shortcut: each pattern tried in turn."""
    stripped = text.strip().rstrip(";").strip()
    for kind, pattern in statements._PATTERNS:
        match = pattern.fullmatch(stripped)
        if match is not None:
            return kind, match.group(1) or ""
    return Kind.QUERY, ""


@pytest.mark.parametrize(
    "sql",
    [
        "use dpsql.main",
        "Show Catalogs",
        "show schemas from dpsql like 'm%'",
        "desc users",
        "show columns in users",
        "show functions",
        "show session like 'dpsql%'",
        "start transaction",
        "commit",
        "ROLLBACK;",
        "execute st_1",
        "(SELECT 1)",
        "VALUES (1)",
        "select 1",
        "  \n\tselect count(*) from users",
        "SETTINGS",
        "USER",
        "",
    ],
)
def test_the_first_word_shortcut_classifies_as_every_pattern_would(sql):
    statement = classify(sql)
    assert (statement.kind, statement.name) == _classify_by_every_pattern(sql)


@given(
    st.sampled_from(
        ["", " ", "SET ", "set session ", "SHOW ", "EXECUTE ", "DESC", "ſet ", "commit"]
    ),
    st.text(alphabet="abcSETHOWUDCKſK ;'=.()_\n", max_size=20),
)
def test_the_first_word_shortcut_agrees_with_the_patterns_on_any_text(prefix, rest):
    statement = classify(prefix + rest)
    assert (statement.kind, statement.name) == _classify_by_every_pattern(prefix + rest)


def test_execute_immediate_binds_literals_in_text_order():
    statement = classify(
        "EXECUTE IMMEDIATE 'SELECT a FROM t WHERE s = ? AND n > ?' USING 'x''y', 3"
    )
    tree = sqlglot.parse_one(unquote(statement.name), read="trino")
    bound = bind_parameters(tree, parameters(statement.using))
    assert bound.sql(dialect="trino") == "SELECT a FROM t WHERE s = 'x''y' AND n > 3"
    assert parameters("DATE '2024-01-01', DOUBLE '1.5', NULL, -2, true")


@pytest.mark.parametrize("using", ["(SELECT 1)", "a", "1 FROM t", "f(1)"])
def test_only_literals_may_be_bound(using):
    with pytest.raises(DPSQLError) as info:
        parameters(using)
    assert info.value.code == "bad_request"


def test_parameter_count_must_match():
    with pytest.raises(DPSQLError):
        bind_parameters(sqlglot.parse_one("SELECT ? + ?", read="trino"), parameters("1"))


def test_show_sql_quotes_names_and_keeps_like():
    sql = show_sql(classify("SHOW TABLES FROM \"ma'in\" LIKE 'u%'"), catalog="dpsql", schema="main")
    assert "table_schema = 'ma''in'" in sql and "table_name LIKE 'u%'" in sql
    sqlglot.parse_one(sql, read="trino")


def test_session_properties_from_headers_and_defaults():
    current = S.from_header(
        "dpsql.epsilon=0.25,query_max_run_time=1h,dpsql.intervals=true", {"max_groups": 2}
    )
    request = current.request("SELECT 1", analyst="ana", tables=frozenset())
    assert (request.epsilon, request.max_groups, request.dialect) == (0.25, 2, "trino")
    assert current.intervals
    # a budget in the session replaces the analyst's default budget of another kind
    assert (
        S.from_header("dpsql.rho=0.1", {"epsilon": 0.5})
        .request("x", analyst="a", tables=frozenset())
        .epsilon
        is None
    )
    accuracy = S.from_header("dpsql.accuracy=0.05", {}).request(
        "x", analyst="a", tables=frozenset()
    )
    assert accuracy.accuracy is not None and accuracy.accuracy.rel_error == 0.05
    with pytest.raises(DPSQLError):
        S.from_header("dpsql.epsilon=lots", {})
    with pytest.raises(DPSQLError):
        S.from_header("dpsql.nope=1", {})
    with pytest.raises(DPSQLError):
        S.from_header("dpsql.epsilon=1,dpsql.rho=1", {}).request(
            "x", analyst="a", tables=frozenset()
        )
    assert S.header_value("intervals", True) == "dpsql.intervals=true"


def test_type_signatures_and_values():
    assert T.from_duckdb("VARCHAR").column("m") == {
        "name": "m",
        "type": "varchar",
        "typeSignature": {
            "rawType": "varchar",
            "arguments": [{"kind": "LONG", "value": 2147483647}],
        },
    }
    assert T.from_duckdb("DECIMAL(18,3)").name == "decimal(18,3)"
    assert T.from_duckdb("TIMESTAMP").name == "timestamp(6)"
    assert T.from_duckdb("TIMESTAMP WITH TIME ZONE").name == "timestamp(6) with time zone"
    assert T.from_duckdb("STRUCT(a INT)") == T.VARCHAR
    assert T.infer([None, 1, 2]) == T.BIGINT and T.infer([1, 2.5]) == T.DOUBLE
    assert T.infer([dt.datetime(2024, 1, 1)]) == T.TIMESTAMP and T.infer([None]) == T.VARCHAR
    assert (
        T.encode(dt.datetime(2024, 1, 2, 3, 4, 5, 6), T.TIMESTAMP) == "2024-01-02 03:04:05.000006"
    )
    assert (
        T.encode(float("nan"), T.DOUBLE) == "NaN"
        and T.encode(float("-inf"), T.DOUBLE) == "-Infinity"
    )
    assert T.encode(Decimal("1.50"), T.from_duckdb("DECIMAL(4,2)")) == "1.50"
    assert T.encode(dt.date(2024, 1, 2), T.DATE) == "2024-01-02"


def test_error_objects_carry_dpsqls_code_and_position():
    error = DPSQLError("parse_error", "bad", "fix it", {"line": 2, "column": 7})
    body = P.error_object(error)
    assert body["errorName"] == "PARSE_ERROR" and body["errorType"] == "USER_ERROR"
    assert body["errorLocation"] == {"lineNumber": 2, "columnNumber": 7}
    assert body["message"] == "bad — hint: fix it [dpsql parse_error]"
    assert (
        P.error_object(DPSQLError("budget_exhausted", "x"))["errorType"] == "INSUFFICIENT_RESOURCES"
    )
    assert P.error_object(DPSQLError("internal", "x"))["errorType"] == "INTERNAL_ERROR"
    codes = {P.error_object(DPSQLError(c, "x"))["errorCode"] for c in ("parse_error", "internal")}
    assert len(codes) == 2


SERIES = (
    "SELECT DATE_TRUNC('WEEK', ts) AS ts, model AS model, COUNT(*) AS count FROM p "
    "JOIN (SELECT model AS model__, COUNT(*) AS mme_inner__ FROM p WHERE x > 1 GROUP BY model "
    "ORDER BY COUNT(*) DESC LIMIT 3) AS series_limit ON model = model__ WHERE x > 1 "
    "GROUP BY DATE_TRUNC('WEEK', ts), model ORDER BY count DESC LIMIT 10000"
)


def test_series_limit_splits_into_ranking_and_filtered_chart():
    part = series_limit.split(sqlglot.parse_one(SERIES, read="trino"))
    assert part is not None and part.key_output == "model__"
    assert part.ranking.sql(dialect="trino").startswith("SELECT model AS model__, COUNT(*)")
    chart = series_limit.restrict(part, ["small", None, "large"]).sql(dialect="trino")
    assert "JOIN" not in chart and "model IN ('small', 'large')" in chart and "x > 1" in chart
    assert "model IN (NULL)" in series_limit.restrict(part, []).sql(dialect="trino")
    # other joins are not series limits
    for sql in (
        "SELECT COUNT(*) FROM p JOIN u ON p.id = u.id",
        "SELECT COUNT(*) FROM p JOIN (SELECT id FROM u) AS s ON p.id = s.id",
    ):
        assert series_limit.split(sqlglot.parse_one(sql, read="trino")) is None
    assert isinstance(series_limit.literal(dt.date(2024, 1, 1)), exp.Cast)
    # released infinite keys: 'inf' was written as a bare word, read as a column (a
    # refusal after the ranking query's charge)
    for value in (math.inf, -math.inf, math.nan):
        text = series_limit.literal(value).sql(dialect="duckdb")
        assert text.startswith("CAST(") and duckdb.sql(f"SELECT {text}").fetchall()


@pytest.fixture(scope="module")
def shadow():
    tables = [
        ShadowTable("main", "users", (("user_id", "BIGINT"), ("region", "VARCHAR"))),
        ShadowTable("main", "my_t", (("a_b", "DECIMAL(10,2)"),)),
        ShadowTable("pums", "pums", (("age", "INTEGER"),)),
    ]
    catalog = ShadowCatalog(tables)
    yield catalog
    catalog.close()


def meta(shadow: ShadowCatalog, sql: str, catalog: str = "dpsql", schema: str = "main"):
    tree = sqlglot.parse_one(sql, read="trino")
    for table in list(tree.find_all(exp.Table)):
        table.replace(shadow.map_table(table, catalog=catalog, schema=schema))
    return shadow.run(tree)


def test_shadow_answers_information_schema_as_trino_does(shadow):
    assert meta(shadow, "SELECT schema_name FROM information_schema.schemata ORDER BY 1").rows == [
        ("information_schema",),
        ("main",),
        ("pums",),
    ]
    rows = meta(
        shadow,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
        "AND table_name LIKE 'my\\_%' ESCAPE '\\'",
    ).rows
    assert rows == [("my_t",)]
    cols = meta(shadow, "SELECT column_name, data_type FROM dpsql.information_schema.columns "
                        "WHERE table_name = 'my_t'").rows  # fmt: skip
    assert cols == [("a_b", "decimal(10,2)")]
    assert meta(shadow, "SELECT table_cat FROM system.jdbc.catalogs").rows == [("dpsql",)]
    assert meta(
        shadow, "SELECT comment FROM system.metadata.table_comments WHERE table_name = 'users'"
    ).rows == [(None,)]


def test_shadow_tables_are_empty_and_unknown_names_are_not_found(shadow):
    answer = meta(shadow, "SELECT COUNT(*) AS n, MAX(user_id) AS m FROM users")
    assert answer.rows == [(0, None)]
    assert meta(shadow, "SELECT * FROM pums.pums LIMIT 0").names == ("age",)
    for sql, catalog in (
        ('SELECT * FROM public."users$partitions"', "dpsql"),
        ("SELECT * FROM tickets", "dpsql"),
        ("SELECT * FROM information_schema.secrets", "dpsql"),
        ("SELECT * FROM information_schema.tables", "hive"),
    ):
        with pytest.raises(DPSQLError) as info:
            meta(shadow, sql, catalog=catalog)
        assert info.value.code == "not_found"


def test_shadow_cannot_read_files_or_change_its_settings(shadow):
    for sql in ("SELECT * FROM read_csv('/etc/passwd')", "SET threads = 8"):
        with pytest.raises(DPSQLError):
            shadow.run(sqlglot.parse_one(sql, read="duckdb"))
