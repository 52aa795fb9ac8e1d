"""Statement splitting, classification, SET/SHOW values and the SQL the engine gets."""

from __future__ import annotations

from decimal import Decimal

import pytest

from proxy.pgwire import codec
from proxy.pgwire.session_settings import SessionSettings, parse_accuracy
from proxy.pgwire.sqlstate import WireError
from proxy.pgwire.sqltext import parameter_numbers, split_statements
from proxy.pgwire.statements import Kind, classify, engine_sql

USER = frozenset({("public", "users"), ("public", "prompts"), ("pums", "pums")})


def test_split_keeps_literals_comments_and_dollar_quotes() -> None:
    sql = "SET dpsql.epsilon = 0.5; SELECT ';' AS s -- a;b\n; SELECT $$x;y$$, $1;;"
    assert split_statements(sql) == [
        "SET dpsql.epsilon = 0.5",
        "SELECT ';' AS s -- a;b",
        "SELECT $$x;y$$, $1",
    ]
    assert split_statements(" ; ") == []
    assert parameter_numbers("SELECT $1, '$2', $3") == [1, 3]


@pytest.mark.parametrize(
    ("sql", "kind", "tag"),
    [
        ("BEGIN", Kind.BEGIN, "BEGIN"),
        ("start transaction isolation level read committed", Kind.BEGIN, "BEGIN"),
        ("COMMIT", Kind.COMMIT, "COMMIT"),
        ("ROLLBACK", Kind.ROLLBACK, "ROLLBACK"),
        ('SAVEPOINT "_pg3_1"', Kind.SAVEPOINT, "SAVEPOINT"),
        ('ROLLBACK TO SAVEPOINT "_pg3_1"', Kind.SAVEPOINT, "ROLLBACK"),
        ('set search_path = "public"', Kind.SET, "SET"),
        ("SET TIME ZONE 'UTC'", Kind.SET, "SET"),
        ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", Kind.NOOP, "SET"),
        ("show transaction isolation level", Kind.SHOW, "SHOW"),
        ("SHOW ALL", Kind.SHOW_ALL, "SHOW"),
        ("RESET ALL", Kind.RESET_ALL, "RESET"),
        ("DISCARD ALL", Kind.DISCARD, "DISCARD ALL"),
        (
            'DECLARE "c" CURSOR WITHOUT HOLD FOR SELECT COUNT(*) FROM users',
            Kind.DECLARE,
            "DECLARE CURSOR",
        ),
        ('FETCH FORWARD 5 FROM "c"', Kind.FETCH, "FETCH"),
        ('CLOSE "c"', Kind.CLOSE, "CLOSE CURSOR"),
        ("select pg_catalog.version()", Kind.CATALOG, "SELECT"),
        ("SELECT 1", Kind.CATALOG, "SELECT"),
        ("SELECT relname FROM pg_class", Kind.CATALOG, "SELECT"),
        ("SELECT * FROM information_schema.tables", Kind.CATALOG, "SELECT"),
        ("SELECT COUNT(*) FROM users", Kind.ENGINE, "SELECT"),
        ("SELECT * FROM read_csv('/etc/passwd')", Kind.ENGINE, "SELECT"),
        ("DROP TABLE users", Kind.ENGINE, "SELECT"),
    ],
)
def test_classify(sql: str, kind: Kind, tag: str) -> None:
    statement = classify(sql, USER)
    assert (statement.kind, statement.tag) == (kind, tag)


def test_catalog_and_data_in_one_query_is_refused() -> None:
    with pytest.raises(WireError) as refused:
        classify("SELECT COUNT(*) FROM users, pg_class", USER)
    assert refused.value.sqlstate == "0A000"


def test_fetch_counts() -> None:
    assert classify("FETCH ALL FROM c", USER).count == -1
    assert classify("FETCH NEXT FROM c", USER).count == 1
    assert classify("MOVE FORWARD 3 IN c", USER).count == 3


def test_engine_sql_public_schema_search_path_and_literals() -> None:
    def rewrite(sql: str, params: list[object] = (), oids: list[int] = ()) -> str:
        return engine_sql(
            sql,
            list(params),
            list(oids),
            database="dpsql",
            search_path=["public", "pums"],
            user_tables=USER,
        )

    assert rewrite("SELECT COUNT(*) FROM users") == "SELECT COUNT(*) FROM users"
    assert rewrite("SELECT COUNT(*) FROM public.users") == "SELECT COUNT(*) FROM users"
    assert rewrite("SELECT COUNT(*) FROM dpsql.public.users") == "SELECT COUNT(*) FROM users"
    assert rewrite("SELECT COUNT(*) FROM pums") == "SELECT COUNT(*) FROM pums.pums"
    bound = rewrite(
        "SELECT COUNT(*) FROM users WHERE age > $1 AND region = $2 AND vip = $3",
        ["30", "it's", "t"],
        [codec.INT4, 0, codec.BOOL],
    )
    assert bound == (
        "SELECT COUNT(*) FROM users WHERE age > 30 AND region = 'it''s' AND vip = TRUE"
    )
    with pytest.raises(WireError):
        rewrite("SELECT COUNT(*) FROM users WHERE age > $2", ["1"], [codec.INT4])


def test_settings_and_privacy_controls() -> None:
    settings = SessionSettings()
    settings.set("TimeZone", "Europe/Paris")
    assert settings.get("timezone") == "Europe/Paris"
    settings.set("dpsql.epsilon", "0.5")
    settings.set("dpsql.max_groups", "2")
    assert settings.privacy.show("epsilon") == "0.5" and settings.privacy.max_groups == 2
    settings.set("dpsql.accuracy", "rel_error=0.1, at_count=500")
    assert settings.privacy.epsilon is None  # one budget form at a time
    assert settings.privacy.accuracy == parse_accuracy("at_count=500,rel_error=0.1")
    settings.set("dpsql.epsilon", None)
    for name, value in (
        ("dpsql.epsilon", "abc"),
        ("dpsql.delta", "0"),
        ("dpsql.accuracy", "rel_error=0.1"),
        ("dpsql.max_groups", "0"),
        ("dpsql.remaining", "5"),
        ("dpsql.nonsense", "1"),
    ):
        with pytest.raises(WireError):
            settings.set(name, value)
    settings.reset_all()
    assert settings.get("timezone") == "UTC" and settings.privacy.accuracy is None


def test_identity_and_privilege_settings_are_refused() -> None:
    settings = SessionSettings()
    settings.values["session_authorization"] = "ana"  # as the connection sets it
    for name, value, sqlstate in (
        ("session_authorization", "bob", "42501"),
        ("SESSION AUTHORIZATION", "bob", "42501"),
        ("role", "bob", "42501"),
        ("is_superuser", "on", "55P02"),
        ("is_superuser", None, "55P02"),
        ("transaction_read_only", "off", "42501"),
        ("default_transaction_read_only", "false", "42501"),
    ):
        with pytest.raises(WireError) as refused:
            settings.set(name, value)
        assert refused.value.sqlstate == sqlstate, (name, value)
    # what PostgreSQL lets a non-superuser do, and what drivers send on connect
    for name, value in (
        ("session_authorization", "ana"),
        ("session_authorization", None),
        ("role", "none"),
        ("transaction_read_only", "on"),
        ("extra_float_digits", "3"),
        ("application_name", "PostgreSQL JDBC Driver"),
    ):
        settings.set(name, value)
    settings.reset_all()
    assert settings.get("session_authorization") == "ana"
    assert settings.get("is_superuser") == "off"


def test_engine_sql_is_memoised_per_value_and_type() -> None:
    def bind(value: object, oid: int = 0) -> str:
        return engine_sql(
            "SELECT COUNT(*) FROM public.users WHERE flag = $1",
            [value],
            [oid],
            database="dpsql",
            search_path=["public"],
            user_tables=USER,
        )

    assert bind("1", codec.INT4) == "SELECT COUNT(*) FROM users WHERE flag = 1"
    assert bind("1", codec.INT4) == bind("1", codec.INT4)
    assert bind("2", codec.INT4) == "SELECT COUNT(*) FROM users WHERE flag = 2"
    # equal values of other types (or spellings) bind as their own literals
    assert bind(True) != bind(1)
    assert bind(Decimal("1")) != bind(Decimal("1.0"))
    assert bind("1") == "SELECT COUNT(*) FROM users WHERE flag = '1'"
    with pytest.raises(WireError):  # a refusal is raised again, not remembered
        engine_sql(
            "SELECT COUNT(*) FROM users WHERE age > $2",
            ["1"],
            [codec.INT4],
            database="dpsql",
            search_path=["public"],
            user_tables=USER,
        )
