"""Hand-written hostile queries for the demo schema (users, prompts, tickets, regions).

Each entry names its category, the SQL and what must happen:

* ``expected`` is a documented 4xx code: the proxy refuses the query with exactly that
  code, before any private row is read and without a ledger change.
* ``expected == TOTAL``: a function that could fail on some rows. The query may be
  answered or refused, but never with a 500, and the outcome class must be the same
  whether ``{v}`` names a value that exists in the data or one that does not.
* ``sandbox``: the raw SQL (with ``{t}`` replaced by a table of the database at hand) must
  also fail on the execution connection itself, because of the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TOTAL = "total"
PUMS_CSV = Path(__file__).resolve().parents[2] / "sample_data" / "pums" / "PUMS_pid.csv"

# Templates of the TOTAL category are run with both; 'small' is a model in the data.
EXISTING = "small"
MISSING = "no-such-model-xyz"


@dataclass(frozen=True)
class Escape:
    category: str
    sql: str
    expected: str
    sandbox: bool = False
    defect: str = ""  # a known engine defect: the test is a strict xfail until fixed

    @property
    def id(self) -> str:
        return f"{self.category}:{self.sql[:60]}"


def _e(
    category: str,
    sql: str,
    expected: str = "unsupported_sql",
    sandbox: bool = False,
    defect: str = "",
) -> Escape:
    return Escape(category, sql, expected, sandbox, defect)


_BIG_IN = "SELECT COUNT(*) FROM users WHERE age IN (" + ", ".join(map(str, range(10**6))) + ")"
_MB_LITERAL = "SELECT COUNT(*) FROM prompts WHERE model = '" + "a" * (1 << 20) + "'"
_DEEP_PARENS = "SELECT COUNT(*) FROM users WHERE " + "(" * 5000 + "age > 1" + ")" * 5000
_DEEP_PLUS = "SELECT SUM(" + " + ".join(["age"] * 1500) + ") FROM users"
_DEEP_CASE = (
    "SELECT COUNT(*) FROM users WHERE "
    + "CASE WHEN age > 1 THEN " * 400
    + "1"
    + " END" * 400
    + " = 1"
)
_WIDE_OR = "SELECT COUNT(*) FROM users WHERE " + " OR ".join(f"age = {i}" for i in range(1200))

FILES = "file and network readers"
STATEMENTS = "statements other than SELECT"
SYSTEM = "settings and system functions"
MULTI = "multiple statements and comment tricks"
RECURSIVE = "recursive CTE blow-ups"
HUGE = "huge literals and deep nesting"
UNIT = "unit-column leaks"
JOINS = "joins that duplicate a person"
FAILING = "functions that fail on some rows"
TIMING = "timing-heavy predicates"

CORPUS: tuple[Escape, ...] = (
    # --- file and network readers ---------------------------------------------------
    _e(FILES, f"SELECT COUNT(*) FROM read_csv('{PUMS_CSV}')", sandbox=True),
    _e(FILES, "SELECT * FROM read_csv_auto('/etc/passwd')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM read_parquet('/tmp/*.parquet')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM read_json('/etc/hostname')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM read_text('/etc/hostname')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM read_blob('/etc/hostname')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM glob('/*')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM sniff_csv('/etc/hostname')", sandbox=True),
    _e(FILES, f"SELECT COUNT(*) FROM '{PUMS_CSV}'", "not_found", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM 'users.csv'", "not_found", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM 'https://example.com/x.csv'", "not_found", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM read_csv('s3://bucket/x.csv')", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM read_csv(['/etc/passwd', '/etc/hosts'])", sandbox=True),
    _e(FILES, "SELECT COUNT(*) FROM query('SELECT * FROM users')"),
    _e(FILES, "SELECT COUNT(*) FROM query_table('users')"),
    _e(FILES, "SELECT COUNT(*) FROM users WHERE age IN (SELECT age FROM read_csv('/etc/passwd'))"),
    _e(
        FILES,
        "SELECT COUNT(*) FROM users u JOIN read_csv('/etc/passwd') f ON u.region = f.column0",
    ),
    # --- statements other than SELECT ------------------------------------------------
    _e(STATEMENTS, "COPY {t} TO '/tmp/dpsql-fz-copy.csv'", sandbox=True),
    _e(STATEMENTS, "COPY (SELECT * FROM {t}) TO '/tmp/dpsql-fz-copy.csv'", sandbox=True),
    _e(STATEMENTS, "EXPORT DATABASE '/tmp/dpsql-fz-export'", "parse_error", sandbox=True),
    _e(STATEMENTS, "IMPORT DATABASE '/tmp/dpsql-fz-export'", "parse_error", sandbox=True),
    _e(STATEMENTS, "ATTACH '/tmp/dpsql-fz-attach.db' AS a", sandbox=True),
    _e(STATEMENTS, "ATTACH ':memory:' AS m", sandbox=True),
    _e(STATEMENTS, "DETACH m"),
    _e(STATEMENTS, "INSTALL httpfs", sandbox=True),
    _e(STATEMENTS, "LOAD httpfs", sandbox=True),
    _e(STATEMENTS, "PRAGMA threads=1", sandbox=True),
    _e(STATEMENTS, "PRAGMA version"),
    _e(STATEMENTS, "SET threads = 1", sandbox=True),
    _e(STATEMENTS, "SET enable_external_access = true", sandbox=True),
    _e(STATEMENTS, "SET lock_configuration = false", sandbox=True),
    _e(STATEMENTS, "SET memory_limit = '100GB'", sandbox=True),
    _e(STATEMENTS, "RESET threads", sandbox=True),
    _e(STATEMENTS, "CALL pragma_version()"),
    _e(STATEMENTS, "CHECKPOINT"),
    _e(STATEMENTS, "VACUUM"),
    _e(STATEMENTS, "CREATE TABLE dpsql_fz (x INT)", sandbox=True),
    _e(STATEMENTS, "CREATE VIEW dpsql_fz AS SELECT * FROM {t}", sandbox=True),
    _e(STATEMENTS, "CREATE MACRO dpsql_fz(x) AS x", sandbox=True),
    _e(STATEMENTS, "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", sandbox=True),
    _e(STATEMENTS, "INSERT INTO {t} SELECT * FROM {t}", sandbox=True),
    _e(STATEMENTS, "UPDATE users SET age = 1"),
    _e(STATEMENTS, "DELETE FROM {t}", sandbox=True),
    _e(STATEMENTS, "DROP TABLE {t}", sandbox=True),
    _e(STATEMENTS, "ALTER TABLE {t} ADD COLUMN z INT", sandbox=True),
    # --- settings and system functions -----------------------------------------------
    _e(SYSTEM, "SELECT current_setting('threads'), COUNT(*) FROM users"),
    _e(SYSTEM, "SELECT COUNT(*) FROM users WHERE current_setting('access_mode') = 'read_only'"),
    _e(SYSTEM, "SELECT COUNT(*) FROM duckdb_settings()"),
    _e(SYSTEM, "SELECT COUNT(*) FROM duckdb_tables()"),
    _e(SYSTEM, "SELECT COUNT(*) FROM duckdb_functions()"),
    _e(SYSTEM, "SELECT COUNT(*) FROM duckdb_extensions()"),
    _e(SYSTEM, "SELECT COUNT(*) FROM users WHERE getenv('HOME') = '/root'"),
    _e(SYSTEM, "SELECT version(), COUNT(*) FROM users"),
    _e(SYSTEM, "SELECT COUNT(*) FROM information_schema.tables", "not_found"),
    _e(SYSTEM, "SELECT COUNT(*) FROM pg_catalog.pg_class", "not_found"),
    _e(
        SYSTEM,
        "SELECT COUNT(*) FROM users WHERE region IN "
        "(SELECT table_name FROM information_schema.tables)",
        "not_found",
    ),
    _e(SYSTEM, "SELECT COUNT(*) FROM users WHERE random() < 0.5"),
    _e(SYSTEM, "SELECT COUNT(*) FROM users WHERE setseed(0.5) IS NULL"),
    _e(SYSTEM, "SELECT COUNT(*) FROM users WHERE current_time > TIME '00:00:00'"),
    _e(SYSTEM, "SELECT COUNT(*) FROM users WHERE uuid() IS NOT NULL"),
    # --- multiple statements and comment tricks ---------------------------------------
    _e(MULTI, "SELECT COUNT(*) FROM users; SELECT * FROM users"),
    _e(MULTI, "SELECT COUNT(*) FROM users; DROP TABLE users"),
    _e(MULTI, "SELECT COUNT(*) FROM users; COPY users TO '/tmp/x.csv'"),
    _e(MULTI, "SELECT COUNT(*) FROM users /* ; */ ; SELECT age FROM users"),
    _e(MULTI, "SELECT COUNT(*) FROM users -- \nUNION ALL SELECT age FROM users"),
    _e(MULTI, "SELECT COUNT(*) FROM users /*", "parse_error"),
    _e(MULTI, "SELECT COUNT(*) FROM users --\n; DROP TABLE users"),
    _e(MULTI, "SELECT COUNT(*) FROM users /* */ ; /* */ DETACH dpsql"),
    _e(MULTI, "SELECT age FROM users -- , COUNT(*)"),
    _e(MULTI, "SELECT COUNT(*) FROM users WHERE region = 'x'; ATTACH 'y.db'"),
    # --- recursive CTE blow-ups -------------------------------------------------------
    _e(
        RECURSIVE,
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
    ),
    _e(
        RECURSIVE,
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000000) "
        "SELECT COUNT(*) FROM users u JOIN r ON u.age = r.n",
    ),
    _e(
        RECURSIVE,
        "WITH RECURSIVE r AS (SELECT * FROM users UNION ALL SELECT * FROM r) "
        "SELECT COUNT(*) FROM r",
    ),
    _e(RECURSIVE, "SELECT COUNT(*) FROM range(1000000000000) t(i)"),
    _e(RECURSIVE, "SELECT COUNT(*) FROM users, range(1000000000) t(i)"),
    _e(RECURSIVE, "SELECT COUNT(*) FROM generate_series(1, 1000000000000)"),
    # --- huge literals and deep nesting ----------------------------------------------
    _e(HUGE, _DEEP_PARENS, "parse_error"),
    _e(HUGE, _MB_LITERAL, "too_large"),
    _e(HUGE, _BIG_IN, "too_large"),
    _e(HUGE, _DEEP_PLUS, "too_large"),
    # Refused by the node limit (sqlglot's compiled parser nests deeper than Python's).
    _e(HUGE, _DEEP_CASE, "too_large"),
    _e(HUGE, _WIDE_OR, "too_large"),
    _e(
        HUGE,
        "SELECT COUNT(*) FROM users WHERE age > 1" + "0" * 5000,
        TOTAL,
    ),
    # --- unit-column leaks ------------------------------------------------------------
    _e(UNIT, "SELECT user_id, COUNT(*) FROM prompts GROUP BY user_id"),
    _e(UNIT, "SELECT COUNT(*) FROM prompts GROUP BY user_id"),
    _e(UNIT, "SELECT COUNT(*) FROM prompts GROUP BY user_id % 1000"),
    _e(UNIT, "SELECT COUNT(*) FROM prompts GROUP BY CAST(user_id AS VARCHAR) || model"),
    _e(UNIT, "SELECT user_id FROM users"),
    _e(UNIT, "SELECT * FROM prompts"),
    _e(UNIT, "SELECT age, region FROM users LIMIT 10"),
    _e(UNIT, "SELECT user_id FROM users ORDER BY age DESC LIMIT 1"),
    _e(UNIT, "SELECT MIN(user_id), MAX(user_id) FROM users"),
    # MAX(age) is answered with DP (the exponential mechanism); the person id has no bounds.
    _e(UNIT, "SELECT MAX(user_id % 1000) FROM users"),
    _e(UNIT, "SELECT SUM(user_id) FROM users"),
    _e(UNIT, "SELECT AVG(user_id * age) FROM users"),
    # COUNT(DISTINCT value) is answered with each person's distinct values bounded
    # (tests/proxy/test_distinct_and_per_person.py); several expressions are not.
    _e(UNIT, "SELECT COUNT(DISTINCT age, user_id) FROM users"),
    _e(UNIT, "SELECT COUNT(DISTINCT model, user_id) FROM prompts"),
    _e(UNIT, "SELECT region, COUNT(*) FROM users GROUP BY region ORDER BY age"),
    _e(UNIT, "SELECT COUNT(*) FROM users ORDER BY user_id"),
    _e(UNIT, "SELECT region, COUNT(*) FROM users GROUP BY region HAVING MAX(user_id) > 90"),
    _e(UNIT, "SELECT region, COUNT(*) FROM users GROUP BY region HAVING age > 90"),
    _e(UNIT, "SELECT region, COUNT(*), user_id FROM users GROUP BY region"),
    _e(UNIT, "SELECT region, list(user_id) FROM users GROUP BY region"),
    _e(UNIT, "SELECT region, string_agg(CAST(user_id AS VARCHAR), ',') FROM users GROUP BY region"),
    _e(UNIT, "SELECT region, arg_max(user_id, age) FROM users GROUP BY region"),
    _e(UNIT, "SELECT COUNT(*) FROM users WHERE user_id = (SELECT MAX(user_id) FROM users)"),
    # --- joins that duplicate a person ------------------------------------------------
    _e(JOINS, "SELECT COUNT(*) FROM prompts a JOIN prompts b ON a.model = b.model"),
    _e(JOINS, "SELECT COUNT(*) FROM prompts p JOIN tickets t ON p.model = t.category"),
    _e(JOINS, "SELECT COUNT(*) FROM users a CROSS JOIN users b"),
    _e(JOINS, "SELECT COUNT(*) FROM users a, prompts b"),
    _e(JOINS, "SELECT COUNT(*) FROM users a JOIN users b ON a.user_id <> b.user_id"),
    _e(JOINS, "SELECT COUNT(*) FROM users a JOIN users b ON a.user_id < b.user_id"),
    _e(JOINS, "SELECT COUNT(*) FROM users a JOIN users b ON a.user_id = b.user_id + 1"),
    _e(JOINS, "SELECT COUNT(*) FROM users a JOIN prompts b ON a.user_id = b.user_id OR a.age > 0"),
    _e(JOINS, "SELECT COUNT(*) FROM users a JOIN prompts b ON a.age = b.tokens_in"),
    _e(JOINS, "SELECT COUNT(*) FROM users a RIGHT JOIN prompts b ON a.user_id = b.user_id"),
    _e(JOINS, "SELECT COUNT(*) FROM users a FULL JOIN prompts b ON a.user_id = b.user_id"),
    _e(
        JOINS,
        "SELECT COUNT(*) FROM users a JOIN prompts b USING (user_id) JOIN prompts c ON b.model = c.model",
    ),
    _e(JOINS, "SELECT COUNT(*) FROM users a POSITIONAL JOIN prompts b"),
    _e(
        JOINS,
        "SELECT COUNT(*) FROM users a ASOF JOIN prompts b ON a.user_id = b.user_id AND a.signup_month >= b.ts",
    ),
    _e(
        JOINS,
        "SELECT COUNT(*) FROM users a NATURAL JOIN regions r JOIN users b ON a.region = b.region",
    ),
    # --- functions that fail on some rows (answered or refused, never data-dependent) --
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND CAST(model AS INT) > 0",
        TOTAL,
    ),
    _e(FAILING, "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND model::INTEGER > 0", TOTAL),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND CAST(model AS DATE) > DATE '2000-01-01'",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND regexp_matches('abc', model || '(')",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE regexp_matches(model, CASE WHEN model = '{v}' THEN '(' ELSE 'a' END)",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE date_trunc(CASE WHEN model = '{v}' THEN 'nope' ELSE 'month' END, ts) > TIMESTAMP '2020-01-01'",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND date_trunc(lower(model), ts) IS NOT NULL",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND tokens_in * 9223372036854775807 > 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM users WHERE region = CASE WHEN '{v}' = 'small' THEN 'north' END AND age * 2147483647 * 2147483647 * 2147483647 > 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND tokens_in / (tokens_out - tokens_out) > 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND tokens_in % (latency_ms - latency_ms) = 0",
        TOTAL,
    ),
    _e(FAILING, "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND tokens_in // 0 = 0", TOTAL),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND ln(tokens_in - 5000) > 0",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND sqrt(-1 - tokens_in) > 0",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND pow(10, tokens_in) > 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND CAST(tokens_in AS TINYINT) > 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND CAST(tokens_in AS DECIMAL(2, 0)) > 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND date_add(ts, INTERVAL (tokens_in * 100000000) DAY) > ts",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND substring(model, -tokens_in, tokens_in) = 'a'",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts WHERE model = '{v}' AND strftime(ts, model) = 'x'",
        TOTAL,
    ),
    _e(FAILING, "SELECT SUM(CAST(model AS INT)) FROM prompts WHERE model = '{v}'", TOTAL),
    _e(
        FAILING,
        "SELECT AVG(tokens_in / (tokens_out - tokens_out)) FROM prompts WHERE model = '{v}'",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT CAST(model AS INT) AS k, COUNT(*) FROM prompts WHERE model = '{v}' GROUP BY 1",
        TOTAL,
    ),
    _e(
        FAILING,
        "SELECT COUNT(*) FROM prompts p JOIN users u ON p.user_id = u.user_id AND CAST(p.model AS INT) = u.age WHERE p.model = '{v}'",
        TOTAL,
    ),
    # --- timing-heavy predicates ------------------------------------------------------
    _e(
        TIMING,
        "SELECT COUNT(*) FROM prompts WHERE regexp_matches(repeat(model, 10000000), '(a+)+$')",
    ),
    _e(
        TIMING,
        "SELECT COUNT(*) FROM prompts WHERE length(repeat(repeat(model, 100000), 100000)) > 0",
    ),
    _e(TIMING, "SELECT COUNT(*) FROM prompts WHERE tokens_in IN (SELECT * FROM range(1000000000))"),
    _e(TIMING, "SELECT COUNT(*) FROM prompts WHERE len(range(tokens_in * 100000)) > 0"),
    _e(TIMING, "SELECT COUNT(*) FROM prompts WHERE md5(md5(md5(model))) > 'a'"),
    _e(TIMING, "SELECT COUNT(*) FROM prompts WHERE levenshtein(model, 'x') > 1"),
    _e(TIMING, "SELECT COUNT(*) FROM prompts WHERE lpad(model, 1000000000, 'x') LIKE '%y%'"),
    _e(
        TIMING,
        "SELECT COUNT(*) FROM prompts WHERE regexp_matches(model, '(a|aa|aaa|a*)*(b|c)+$')",
        TOTAL,
    ),
)
