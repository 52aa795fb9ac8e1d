"""A corpus of the SQL BI tools and analysts write, for the answer oracle
(test_bi_corpus.py; written by a helper session, 2026-12-06: RELIABILITY.md, "String
work, doors and the SQL BI tools write").

CORPUS is a list of (dataset, sql) over the oracle's datasets (harness.open_dataset:
"pums", "demo", "demo_nulls"). OPTIONS maps an sql text to the extra Query fields it
needs (dialect, ref_sql, no_caps for per-person subqueries, caps_from for an outer query
over an inner aggregate). FAMILY maps an sql text to the family it came from (superset,
metabase, tableau, looker, notebook, pums). ``queries()`` builds harness Query objects.

Texts written for the PostgreSQL door (dialect "postgres") are the text the door hands
the engine: PostgreSQL's ``public.`` schema already dropped (proxy/pgwire/statements.py).
"""

from __future__ import annotations

from typing import Any

CORPUS: list[tuple[str, str]] = []
OPTIONS: dict[str, dict[str, Any]] = {}
FAMILY: dict[str, str] = {}


def _q(family: str, dataset: str, sql: str, **opts: Any) -> None:
    sql = " ".join(sql.split())
    if sql in FAMILY:
        raise ValueError(f"duplicate: {sql}")
    CORPUS.append((dataset, sql))
    FAMILY[sql] = family
    if opts:
        OPTIONS[sql] = opts


PG = {"dialect": "postgres"}
TR = {"dialect": "trino"}
PP = {"no_caps": True}  # a per-person subquery: its C is the inner row cap

RANGE_PG = ("ts >= TO_TIMESTAMP('2024-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') "
            "AND ts < TO_TIMESTAMP('2025-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')")
RANGE_DK = ("ts >= CAST('2024-01-01 00:00:00.000000' AS TIMESTAMP) "
            "AND ts < CAST('2025-01-01 00:00:00.000000' AS TIMESTAMP)")

# ============================================================================ Superset
S = "superset"
# time-grain charts (DuckDB engine spec)
_q(S, "demo", f"SELECT DATE_TRUNC('month', ts) AS ts, COUNT(*) AS count FROM main.prompts WHERE {RANGE_DK} GROUP BY DATE_TRUNC('month', ts) ORDER BY count DESC LIMIT 10000")
_q(S, "demo", f"SELECT DATE_TRUNC('week', ts) AS ts, COUNT(*) AS count FROM main.prompts WHERE {RANGE_DK} GROUP BY DATE_TRUNC('week', ts) ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT DATE_TRUNC('quarter', ts) AS __timestamp, SUM(tokens_in) AS \"SUM(tokens_in)\" FROM main.prompts GROUP BY DATE_TRUNC('quarter', ts) ORDER BY \"SUM(tokens_in)\" DESC LIMIT 10000")
_q(S, "demo", "SELECT DATE_TRUNC('year', ts) AS __timestamp, AVG(latency_ms) AS \"AVG(latency_ms)\", COUNT(*) AS count FROM main.prompts GROUP BY DATE_TRUNC('year', ts) LIMIT 10000")
_q(S, "demo", f"SELECT DATE_TRUNC('day', ts) AS ts, COUNT(*) AS count FROM main.prompts WHERE {RANGE_DK} GROUP BY DATE_TRUNC('day', ts) ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT DATE_TRUNC('month', ts) AS ts, model AS model, COUNT(*) AS count FROM main.prompts GROUP BY DATE_TRUNC('month', ts), model ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT DATE_TRUNC('month', ts) AS ts, SUM(tokens_out) AS \"SUM(tokens_out)\" FROM main.prompts WHERE flagged = FALSE AND model IN ('small', 'large') AND ((latency_ms < 4000)) GROUP BY DATE_TRUNC('month', ts) LIMIT 10000")
# time-grain charts (PostgreSQL engine spec, via the PG door)
_q(S, "demo", f"SELECT DATE_TRUNC('month', ts) AS ts, COUNT(*) AS count FROM prompts WHERE {RANGE_PG} GROUP BY DATE_TRUNC('month', ts) ORDER BY count DESC LIMIT 10000", **PG)
_q(S, "demo", f"SELECT DATE_TRUNC('week', ts) AS ts, model AS model, COUNT(*) AS count FROM prompts WHERE {RANGE_PG} GROUP BY DATE_TRUNC('week', ts), model ORDER BY count DESC LIMIT 10000", **PG)
_q(S, "demo", f"SELECT DATE_TRUNC('month', ts) AS ts, COUNT(*) AS count FROM prompts WHERE {RANGE_PG} AND {RANGE_PG} GROUP BY DATE_TRUNC('month', ts) ORDER BY count DESC LIMIT 50000", **PG)
_q(S, "demo", "SELECT DATE_TRUNC('quarter', ts) AS ts, AVG(tokens_in) AS \"AVG(tokens_in)\" FROM prompts GROUP BY DATE_TRUNC('quarter', ts) ORDER BY \"AVG(tokens_in)\" DESC LIMIT 10000", **PG)
_q(S, "demo", "SELECT DATE_TRUNC('year', opened_at) AS opened_at, category AS category, COUNT(*) AS count FROM tickets GROUP BY DATE_TRUNC('year', opened_at), category ORDER BY count DESC LIMIT 10000", **PG)
# time-grain charts (Trino engine spec, via the Trino door)
_q(S, "demo", "SELECT date_trunc('month', CAST(ts AS TIMESTAMP)) AS __timestamp, COUNT(*) AS count FROM dpsql.main.prompts GROUP BY date_trunc('month', CAST(ts AS TIMESTAMP)) ORDER BY count DESC LIMIT 10000", **TR)
_q(S, "demo", "SELECT date_trunc('week', CAST(ts AS TIMESTAMP)) AS __timestamp, COUNT(*) AS count FROM dpsql.main.prompts WHERE ts >= from_iso8601_timestamp('2025-01-01T00:00:00.000000') AND ts < from_iso8601_timestamp('2025-07-01T00:00:00.000000') GROUP BY date_trunc('week', CAST(ts AS TIMESTAMP)) ORDER BY count DESC LIMIT 10000", **TR,
   ref_sql="SELECT date_trunc('week', CAST(ts AS TIMESTAMP)) AS __timestamp, COUNT(*) AS count FROM main.prompts WHERE ts >= CAST('2025-01-01 00:00:00' AS TIMESTAMP) AND ts < CAST('2025-07-01 00:00:00' AS TIMESTAMP) GROUP BY date_trunc('week', CAST(ts AS TIMESTAMP)) ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT date_add('day', -1, date_trunc('week', date_add('day', 1, CAST(ts AS TIMESTAMP)))) AS __timestamp, COUNT(*) AS count FROM dpsql.main.prompts WHERE ts >= TIMESTAMP '2025-01-01 00:00:00' GROUP BY date_add('day', -1, date_trunc('week', date_add('day', 1, CAST(ts AS TIMESTAMP)))) ORDER BY count DESC LIMIT 10000", **TR)
_q(S, "demo", "SELECT date_add('day', 5, date_trunc('week', date_add('day', 1, CAST(ts AS TIMESTAMP)))) AS __timestamp, SUM(tokens_in) AS \"SUM(tokens_in)\" FROM dpsql.main.prompts WHERE ts >= TIMESTAMP '2025-01-01 00:00:00' GROUP BY date_add('day', 5, date_trunc('week', date_add('day', 1, CAST(ts AS TIMESTAMP)))) LIMIT 10000", **TR)
_q(S, "demo", "SELECT date_trunc('quarter', CAST(ts AS TIMESTAMP)) AS __timestamp, model AS model, AVG(tokens_out) AS \"AVG(tokens_out)\" FROM dpsql.main.prompts GROUP BY date_trunc('quarter', CAST(ts AS TIMESTAMP)), model ORDER BY \"AVG(tokens_out)\" DESC LIMIT 10000", **TR)
_q(S, "demo", "SELECT CAST(ts AS DATE) AS __timestamp, COUNT(*) AS count FROM dpsql.main.prompts WHERE ts >= TIMESTAMP '2025-06-01 00:00:00' GROUP BY CAST(ts AS DATE) ORDER BY count DESC LIMIT 10000", **TR)
# categorical charts, big numbers, pies
_q(S, "demo", "SELECT model AS model, COUNT(*) AS count FROM main.prompts GROUP BY model ORDER BY count DESC LIMIT 1000")
_q(S, "demo", "SELECT region AS region, AVG(age) AS \"AVG(age)\" FROM main.users GROUP BY region ORDER BY \"AVG(age)\" DESC LIMIT 10000")
_q(S, "demo", "SELECT plan AS plan, COUNT(*) AS count FROM users GROUP BY plan ORDER BY count DESC LIMIT 100", **PG)
_q(S, "demo", "SELECT COUNT(*) AS count FROM prompts LIMIT 10000", **PG)
_q(S, "demo", "SELECT COUNT(DISTINCT user_id) AS \"COUNT_DISTINCT(user_id)\" FROM main.prompts LIMIT 10000")
_q(S, "demo", "SELECT model AS model, COUNT(DISTINCT user_id) AS \"COUNT_DISTINCT(user_id)\", SUM(tokens_in) AS \"SUM(tokens_in)\" FROM main.prompts GROUP BY model ORDER BY \"COUNT_DISTINCT(user_id)\" DESC LIMIT 10000")
_q(S, "demo", "SELECT category AS category, AVG(resolution_minutes) AS \"AVG(resolution_minutes)\", MAX(resolution_minutes) AS \"MAX(resolution_minutes)\" FROM main.tickets GROUP BY category ORDER BY \"AVG(resolution_minutes)\" DESC LIMIT 10000")
_q(S, "demo", "SELECT model AS model, flagged AS flagged, COUNT(*) AS count FROM main.prompts GROUP BY model, flagged ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT SUM(tokens_in) AS \"SUM(tokens_in)\", SUM(tokens_out) AS \"SUM(tokens_out)\", COUNT(*) AS count FROM main.prompts WHERE model IN ('small', 'medium') LIMIT 50000")
_q(S, "demo", "SELECT model AS model, SUM(tokens_out) / NULLIF(SUM(tokens_in), 0) AS \"out per in\" FROM main.prompts GROUP BY model ORDER BY \"out per in\" DESC LIMIT 10000")
_q(S, "demo", "SELECT model AS model, SUM(CASE WHEN flagged THEN 1 ELSE 0 END) * 1.0 / COUNT(*) AS flag_rate FROM main.prompts GROUP BY model ORDER BY flag_rate DESC LIMIT 10000")
# filter-box / native filters / column values
_q(S, "demo", "SELECT model AS model FROM prompts GROUP BY model ORDER BY model ASC LIMIT 1000", **PG)
_q(S, "demo", "SELECT region AS region FROM main.users GROUP BY region ORDER BY region ASC LIMIT 1000")
_q(S, "demo", "SELECT DISTINCT model AS column_values FROM prompts LIMIT 10000", **PG)
_q(S, "demo", "SELECT DISTINCT region AS column_values FROM users LIMIT 10000", **PG)
_q(S, "demo", "SELECT MIN(\"tokens_in\") AS min, MAX(\"tokens_in\") AS max FROM prompts LIMIT 1000", **PG)
_q(S, "demo", "SELECT MIN(age) AS min, MAX(age) AS max FROM main.users LIMIT 1000")
_q(S, "demo", "SELECT MIN(ts) AS min_ts, MAX(ts) AS max_ts FROM main.prompts LIMIT 1000")
# raw records / samples / SQL Lab
_q(S, "demo", "SELECT prompt_id AS prompt_id, ts AS ts, model AS model, tokens_in AS tokens_in FROM prompts ORDER BY ts DESC LIMIT 100", **PG)
_q(S, "demo", "SELECT prompt_id AS prompt_id, user_id AS user_id, ts AS ts, model AS model, tokens_in AS tokens_in, tokens_out AS tokens_out, latency_ms AS latency_ms, flagged AS flagged FROM prompts LIMIT 50", **PG)
_q(S, "demo", "SELECT model, COUNT(*) FROM prompts GROUP BY model LIMIT 1001", **PG)
_q(S, "demo", "SELECT prompt_id AS prompt_id, ts AS ts, model AS model, tokens_in AS tokens_in FROM prompts GROUP BY prompt_id, ts, model, tokens_in ORDER BY ts DESC LIMIT 100", **PG)
# virtual datasets
_q(S, "demo", "SELECT region AS region, AVG(tokens_in) AS \"AVG(tokens_in)\" FROM ( SELECT p.prompt_id, p.ts, p.model, p.tokens_in, u.region, u.plan FROM prompts AS p JOIN users AS u ON u.user_id = p.user_id ) AS virtual_table GROUP BY region ORDER BY \"AVG(tokens_in)\" DESC LIMIT 10000", **PG)
_q(S, "demo", "SELECT plan AS plan, COUNT(*) AS count FROM ( SELECT p.user_id, p.model, p.tokens_in, u.region, u.plan FROM prompts AS p JOIN users AS u ON u.user_id = p.user_id WHERE p.flagged = false ) AS virtual_table GROUP BY plan ORDER BY count DESC LIMIT 10000", **PG)
_q(S, "demo", "SELECT DATE_TRUNC('month', ts) AS ts, SUM(tokens_in) AS \"SUM(tokens_in)\" FROM (SELECT * FROM prompts WHERE model = 'large') AS virtual_table GROUP BY DATE_TRUNC('month', ts) ORDER BY \"SUM(tokens_in)\" DESC LIMIT 10000", **PG)
_q(S, "demo", "SELECT region AS region, COUNT(DISTINCT user_id) AS \"COUNT_DISTINCT(user_id)\" FROM (SELECT p.*, u.region FROM prompts p LEFT JOIN users u ON p.user_id = u.user_id) AS virtual_table GROUP BY region ORDER BY \"COUNT_DISTINCT(user_id)\" DESC LIMIT 10000")
_q(S, "demo", "SELECT model AS model, COUNT(*) AS count FROM (SELECT model, tokens_in FROM prompts WHERE tokens_in > 1000) AS virtual_table GROUP BY model ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT name AS name, COUNT(*) AS count FROM (SELECT u.user_id, r.name FROM users u JOIN regions r ON r.region = u.region) AS virtual_table GROUP BY name ORDER BY count DESC LIMIT 10000")
_q(S, "demo", "SELECT heavy AS heavy, COUNT(*) AS count FROM (SELECT user_id, CASE WHEN COUNT(*) >= 20 THEN 'heavy' ELSE 'light' END AS heavy FROM prompts GROUP BY user_id) AS virtual_table GROUP BY heavy ORDER BY count DESC LIMIT 10000", **PP)
_q(S, "demo", "SELECT model AS model, AVG(n) AS \"AVG(n)\" FROM (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) AS virtual_table GROUP BY model ORDER BY \"AVG(n)\" DESC LIMIT 10000", caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model")
# series limit (top-N groups by a subquery join)
_q(S, "demo", "SELECT DATE_TRUNC('year', ts) AS ts, model AS model, COUNT(*) AS count FROM prompts JOIN ( SELECT model AS model__, COUNT(*) AS mme_inner__ FROM prompts GROUP BY model ORDER BY COUNT(*) DESC LIMIT 2 ) AS series_limit ON model = model__ GROUP BY DATE_TRUNC('year', ts), model ORDER BY count DESC LIMIT 10000", **PG)
_q(S, "demo", "SELECT date_trunc('year', CAST(ts AS TIMESTAMP)) AS __timestamp, model AS model, SUM(tokens_in) AS \"SUM(tokens_in)\" FROM dpsql.main.prompts JOIN (SELECT model AS model__, SUM(tokens_in) AS mme_inner__ FROM dpsql.main.prompts GROUP BY model ORDER BY SUM(tokens_in) DESC LIMIT 2) AS series_limit ON model = model__ GROUP BY date_trunc('year', CAST(ts AS TIMESTAMP)), model ORDER BY \"SUM(tokens_in)\" DESC LIMIT 10000", **TR)
_q(S, "demo", "SELECT region AS region, plan AS plan, COUNT(*) AS count FROM users JOIN (SELECT region AS region__, COUNT(*) AS mme_inner__ FROM users GROUP BY region ORDER BY COUNT(*) DESC LIMIT 3) AS series_limit ON region = region__ GROUP BY region, plan ORDER BY count DESC LIMIT 10000")
# PUMS through Superset
_q(S, "pums", "SELECT educ AS educ, AVG(income) AS \"AVG(income)\" FROM \"PUMS\".\"PUMS\" GROUP BY educ ORDER BY \"AVG(income)\" DESC LIMIT 10000")
_q(S, "pums", "SELECT sex AS sex, married AS married, COUNT(*) AS count FROM PUMS.PUMS GROUP BY sex, married ORDER BY count DESC LIMIT 10000")
_q(S, "pums", "SELECT race AS race, COUNT(*) AS count FROM PUMS.PUMS GROUP BY race ORDER BY count DESC LIMIT 10")
_q(S, "pums", "SELECT sex AS sex, SUM(income) AS \"SUM(income)\" FROM (SELECT * FROM PUMS.PUMS WHERE age >= 18) AS virtual_table GROUP BY sex ORDER BY \"SUM(income)\" DESC LIMIT 10000")
_q(S, "pums", "SELECT COUNT(*) AS count, AVG(age) AS \"AVG(age)\" FROM PUMS.PUMS WHERE income > 0 LIMIT 10000")
_q(S, "pums", "SELECT DISTINCT educ AS column_values FROM PUMS.PUMS LIMIT 10000")
_q(S, "pums", "SELECT MIN(income) AS min, MAX(income) AS max FROM PUMS.PUMS LIMIT 1000")
_q(S, "pums", "SELECT educ AS educ, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY income) AS \"MEDIAN(income)\" FROM PUMS.PUMS GROUP BY educ ORDER BY \"MEDIAN(income)\" DESC LIMIT 10000")

# ============================================================================ Metabase
M = "metabase"
_q(M, "demo", 'SELECT "public"."prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" GROUP BY "public"."prompts"."model" ORDER BY "public"."prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT CAST("prompts"."ts" AS date) AS "ts", COUNT(*) AS "count" FROM "prompts" WHERE "prompts"."ts" >= timestamp \'2025-06-01 00:00:00\' GROUP BY CAST("prompts"."ts" AS date) ORDER BY CAST("prompts"."ts" AS date) ASC', **PG)
_q(M, "demo", 'SELECT DATE_TRUNC(\'month\', "prompts"."ts") AS "ts", COUNT(*) AS "count" FROM "prompts" GROUP BY DATE_TRUNC(\'month\', "prompts"."ts") ORDER BY DATE_TRUNC(\'month\', "prompts"."ts") ASC', **PG)
_q(M, "demo", 'SELECT (CAST(DATE_TRUNC(\'week\', ("prompts"."ts" + INTERVAL \'1 day\')) AS timestamp) + INTERVAL \'-1 day\') AS "ts", COUNT(*) AS "count" FROM "prompts" WHERE "prompts"."ts" >= timestamp \'2025-01-01 00:00:00\' GROUP BY (CAST(DATE_TRUNC(\'week\', ("prompts"."ts" + INTERVAL \'1 day\')) AS timestamp) + INTERVAL \'-1 day\') ORDER BY (CAST(DATE_TRUNC(\'week\', ("prompts"."ts" + INTERVAL \'1 day\')) AS timestamp) + INTERVAL \'-1 day\') ASC', **PG)
_q(M, "demo", 'SELECT DATE_TRUNC(\'quarter\', "prompts"."ts") AS "ts", "prompts"."model" AS "model", SUM("prompts"."tokens_in") AS "sum" FROM "prompts" GROUP BY DATE_TRUNC(\'quarter\', "prompts"."ts"), "prompts"."model" ORDER BY DATE_TRUNC(\'quarter\', "prompts"."ts") ASC, "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT CAST(extract(dow from "prompts"."ts") AS integer) + 1 AS "ts", COUNT(*) AS "count" FROM "prompts" GROUP BY CAST(extract(dow from "prompts"."ts") AS integer) + 1 ORDER BY CAST(extract(dow from "prompts"."ts") AS integer) + 1 ASC', **PG)
_q(M, "demo", 'SELECT CAST(extract(hour from "prompts"."ts") AS integer) AS "ts", AVG("prompts"."latency_ms") AS "avg" FROM "prompts" GROUP BY CAST(extract(hour from "prompts"."ts") AS integer) ORDER BY CAST(extract(hour from "prompts"."ts") AS integer) ASC', **PG)
_q(M, "demo", 'SELECT CAST(extract(month from "prompts"."ts") AS integer) AS "ts", COUNT(*) AS "count" FROM "prompts" GROUP BY CAST(extract(month from "prompts"."ts") AS integer) ORDER BY CAST(extract(month from "prompts"."ts") AS integer) ASC', **PG)
_q(M, "demo", 'SELECT (FLOOR((("prompts"."tokens_in" - 0.0) / 500.0)) * 500.0) + 0.0 AS "tokens_in", COUNT(*) AS "count" FROM "prompts" GROUP BY (FLOOR((("prompts"."tokens_in" - 0.0) / 500.0)) * 500.0) + 0.0 ORDER BY (FLOOR((("prompts"."tokens_in" - 0.0) / 500.0)) * 500.0) + 0.0 ASC', **PG)
_q(M, "demo", 'SELECT (FLOOR((("users"."age" - 10.0) / 10.0)) * 10.0) + 10.0 AS "age", COUNT(*) AS "count" FROM "users" GROUP BY (FLOOR((("users"."age" - 10.0) / 10.0)) * 10.0) + 10.0 ORDER BY (FLOOR((("users"."age" - 10.0) / 10.0)) * 10.0) + 10.0 ASC', **PG)
_q(M, "demo", 'SELECT "Users"."plan" AS "Users__plan", COUNT(*) AS "count" FROM "prompts" LEFT JOIN "users" AS "Users" ON "prompts"."user_id" = "Users"."user_id" GROUP BY "Users"."plan" ORDER BY "Users"."plan" ASC', **PG)
_q(M, "demo", 'SELECT "Users"."region" AS "Users__region", "prompts"."model" AS "model", AVG("prompts"."tokens_out") AS "avg" FROM "prompts" LEFT JOIN "users" AS "Users" ON "prompts"."user_id" = "Users"."user_id" GROUP BY "Users"."region", "prompts"."model" ORDER BY "Users"."region" ASC, "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT COUNT(DISTINCT "prompts"."user_id") AS "count" FROM "prompts" WHERE "prompts"."model" = \'large\'', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", STDDEV_POP("prompts"."tokens_in") AS "stddev" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY "prompts"."tokens_in") AS "median" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY "prompts"."latency_ms") AS "p90" FROM "prompts"', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", SUM(CASE WHEN "prompts"."flagged" = TRUE THEN 1 ELSE 0.0 END) / COUNT(*) AS "share" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(CASE WHEN "prompts"."tokens_in" > 1000 THEN 1 END) AS "count_where" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", SUM(CASE WHEN "prompts"."flagged" THEN "prompts"."tokens_in" ELSE 0.0 END) AS "sum_where" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT DATE_TRUNC(\'month\', "prompts"."ts") AS "ts", SUM(COUNT(*)) OVER (ORDER BY DATE_TRUNC(\'month\', "prompts"."ts") ASC ROWS UNBOUNDED PRECEDING) AS "cum_count" FROM "prompts" WHERE "prompts"."ts" >= timestamp \'2024-01-01\' GROUP BY DATE_TRUNC(\'month\', "prompts"."ts") ORDER BY DATE_TRUNC(\'month\', "prompts"."ts") ASC', **PG)
_q(M, "demo", 'SELECT COUNT(*) AS "count" FROM "prompts" WHERE "prompts"."ts" BETWEEN timestamp \'2024-01-01 00:00:00\' AND timestamp \'2024-12-31 23:59:59\'', **PG)
_q(M, "demo", 'SELECT COUNT(*) AS "count" FROM "prompts" WHERE ("prompts"."ts" >= CAST((CAST(now() AS timestamp) + INTERVAL \'-3 year\') AS date)) AND ("prompts"."ts" < CAST(CAST(now() AS timestamp) AS date))', **PG)
_q(M, "demo", 'SELECT COUNT(*) AS "count" FROM "prompts" WHERE ("prompts"."model" LIKE \'%ed%\') AND ("prompts"."model" NOT LIKE \'l%\')', **PG)
_q(M, "demo", 'SELECT COUNT(*) AS "count" FROM "prompts" WHERE (LOWER("prompts"."model") LIKE \'%a%\')', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" WHERE ("prompts"."model" <> \'small\') OR ("prompts"."model" IS NULL) GROUP BY "prompts"."model" ORDER BY "count" DESC, "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "source"."model" AS "model", "source"."count" AS "count" FROM (SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC) AS "source" WHERE "source"."count" > 1000 LIMIT 2000', caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", **PG)
_q(M, "demo", 'SELECT "source"."plan" AS "plan", COUNT(*) AS "count" FROM (SELECT "users"."user_id" AS "user_id", "users"."plan" AS "plan" FROM "users" WHERE "users"."age" > 30) AS "source" GROUP BY "source"."plan" ORDER BY "source"."plan" ASC', **PG)
_q(M, "demo", 'SELECT "source"."bucket" AS "bucket", COUNT(*) AS "count" FROM (SELECT "prompts"."user_id" AS "user_id", CASE WHEN "prompts"."tokens_in" < 500 THEN \'short\' WHEN "prompts"."tokens_in" < 2000 THEN \'medium\' ELSE \'long\' END AS "bucket" FROM "prompts") AS "source" GROUP BY "source"."bucket" ORDER BY "source"."bucket" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC LIMIT 1000', **PG)
_q(M, "demo", 'SELECT "prompts"."prompt_id" AS "prompt_id", "prompts"."model" AS "model" FROM "prompts" LIMIT 2000', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC LIMIT 1048575', **PG)
_q(M, "demo", 'SELECT "tickets"."category" AS "category", AVG("tickets"."resolution_minutes") AS "avg", COUNT(*) AS "count" FROM "tickets" GROUP BY "tickets"."category" ORDER BY "avg" DESC, "tickets"."category" ASC', **PG)
_q(M, "demo", 'SELECT "users"."signup_month" AS "signup_month", COUNT(*) AS "count" FROM "users" GROUP BY "users"."signup_month" ORDER BY "users"."signup_month" ASC', **PG)
_q(M, "demo", 'SELECT DATE_TRUNC(\'year\', "users"."signup_month") AS "signup_month", "users"."plan" AS "plan", COUNT(*) AS "count" FROM "users" GROUP BY DATE_TRUNC(\'year\', "users"."signup_month"), "users"."plan" ORDER BY DATE_TRUNC(\'year\', "users"."signup_month") ASC, "users"."plan" ASC', **PG)
_q(M, "demo", 'SELECT COUNT(*) AS "count", SUM("prompts"."tokens_in") AS "sum", AVG("prompts"."tokens_in") AS "avg", MIN("prompts"."tokens_in") AS "min", MAX("prompts"."tokens_in") AS "max" FROM "prompts"', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" WHERE "prompts"."user_id" IN (SELECT "users"."user_id" FROM "users" WHERE "users"."plan" = \'team\') GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" WHERE "prompts"."model" IN (\'small\', \'large\') AND "prompts"."flagged" = FALSE GROUP BY "prompts"."model" ORDER BY "count" DESC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" WHERE CAST("prompts"."ts" AS date) BETWEEN date \'2024-03-01\' AND date \'2024-03-31\' GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "demo", 'SELECT "prompts"."model" AS "model", COUNT(*) AS "count" FROM "prompts" WHERE "prompts"."ts" >= DATE_TRUNC(\'month\', timestamp \'2025-06-15\' + INTERVAL \'-3 month\') GROUP BY "prompts"."model" ORDER BY "prompts"."model" ASC', **PG)
_q(M, "pums", 'SELECT "PUMS"."PUMS"."sex" AS "sex", AVG("PUMS"."PUMS"."income") AS "avg" FROM "PUMS"."PUMS" GROUP BY "PUMS"."PUMS"."sex" ORDER BY "PUMS"."PUMS"."sex" ASC', **PG)
_q(M, "pums", 'SELECT (FLOOR((("PUMS"."PUMS"."age" - 0.0) / 12.5)) * 12.5) + 0.0 AS "age", COUNT(*) AS "count" FROM "PUMS"."PUMS" GROUP BY (FLOOR((("PUMS"."PUMS"."age" - 0.0) / 12.5)) * 12.5) + 0.0 ORDER BY (FLOOR((("PUMS"."PUMS"."age" - 0.0) / 12.5)) * 12.5) + 0.0 ASC', **PG)
_q(M, "pums", 'SELECT (FLOOR((("PUMS"."PUMS"."income" - 0.0) / 50000.0)) * 50000.0) + 0.0 AS "income", COUNT(*) AS "count" FROM "PUMS"."PUMS" GROUP BY (FLOOR((("PUMS"."PUMS"."income" - 0.0) / 50000.0)) * 50000.0) + 0.0 ORDER BY (FLOOR((("PUMS"."PUMS"."income" - 0.0) / 50000.0)) * 50000.0) + 0.0 ASC', **PG)
_q(M, "pums", 'SELECT "PUMS"."PUMS"."educ" AS "educ", COUNT(*) AS "count", SUM("PUMS"."PUMS"."income") AS "sum" FROM "PUMS"."PUMS" WHERE "PUMS"."PUMS"."age" BETWEEN 25 AND 64 GROUP BY "PUMS"."PUMS"."educ" ORDER BY "PUMS"."PUMS"."educ" ASC', **PG)
_q(M, "pums", 'SELECT STDDEV_POP("PUMS"."PUMS"."income") AS "sd", VAR_POP("PUMS"."PUMS"."age") AS "var" FROM "PUMS"."PUMS"', **PG)

# ============================================================================ Tableau
T = "tableau"
_q(T, "demo", 'SELECT "prompts"."model" AS "model", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", SUM(CAST(1 AS BIGINT)) AS "sum:Number of Records:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", SUM(CAST("prompts"."tokens_in" AS DOUBLE PRECISION)) AS "sum:tokens_in:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", AVG(CAST("prompts"."latency_ms" AS DOUBLE PRECISION)) AS "avg:latency_ms:ok" FROM "prompts" "prompts" GROUP BY 1 ORDER BY 2 DESC', **PG)
_q(T, "demo", 'SELECT DATE_TRUNC( \'MONTH\', CAST("prompts"."ts" AS DATE) ) AS "tmn:ts:ok", COUNT(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT CAST(EXTRACT(YEAR FROM "prompts"."ts") AS BIGINT) AS "yr:ts:ok", CAST(EXTRACT(QUARTER FROM "prompts"."ts") AS BIGINT) AS "qr:ts:ok", COUNT(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" GROUP BY 1, 2', **PG)
_q(T, "demo", 'SELECT COUNT(DISTINCT "prompts"."user_id") AS "ctd:user_id:ok", CAST(EXTRACT(YEAR FROM "prompts"."ts") AS BIGINT) AS "yr:ts:ok" FROM "prompts" "prompts" GROUP BY 2', **PG)
_q(T, "demo", 'SELECT "users"."region" AS "region", "prompts"."model" AS "model", SUM(CAST("prompts"."tokens_out" AS BIGINT)) AS "sum:tokens_out:ok" FROM "prompts" "prompts" INNER JOIN "users" "users" ON ("prompts"."user_id" = "users"."user_id") GROUP BY 1, 2', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" GROUP BY 1 HAVING (COUNT(1) > 0)', **PG)
_q(T, "demo", 'SELECT (CASE WHEN "prompts"."tokens_in" < 1000 THEN \'Short\' ELSE \'Long\' END) AS "Length (group)", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" INNER JOIN (SELECT "prompts"."model" AS "model", SUM(CAST("prompts"."tokens_in" AS BIGINT)) AS "$__alias__0" FROM "prompts" "prompts" GROUP BY 1 ORDER BY 2 DESC LIMIT 2) "t0" ON ("prompts"."model" = "t0"."model") GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."flagged" AS "flagged", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" WHERE ("prompts"."ts" >= (TIMESTAMP \'2024-01-01 00:00:00\')) GROUP BY 1', **PG)
_q(T, "demo", 'SELECT CAST("prompts"."ts" AS DATE) AS "dy:ts:ok", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" WHERE (CAST("prompts"."ts" AS DATE) >= (DATE \'2025-06-20\')) GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "users"."plan" AS "plan", COUNT(DISTINCT "users"."user_id") AS "ctd:user_id:ok" FROM "users" "users" LEFT JOIN "tickets" "tickets" ON ("users"."user_id" = "tickets"."user_id") WHERE ("tickets"."category" = \'bug\') GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", MIN("prompts"."ts") AS "min:ts:ok", MAX("prompts"."ts") AS "max:ts:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "prompts"."model" AS "model", MEDIAN("prompts"."tokens_in") AS "med:tokens_in:ok" FROM "prompts" "prompts" GROUP BY 1')
_q(T, "demo", 'SELECT "prompts"."model" AS "model", STDDEV_SAMP(CAST("prompts"."tokens_in" AS DOUBLE PRECISION)) AS "std:tokens_in:ok", VAR_SAMP(CAST("prompts"."tokens_in" AS DOUBLE PRECISION)) AS "var:tokens_in:ok" FROM "prompts" "prompts" GROUP BY 1', **PG)
_q(T, "demo", 'SELECT "t0"."user_id" AS "user_id (FIXED)", SUM(1) AS "cnt" FROM "prompts" "prompts" INNER JOIN (SELECT "prompts"."user_id" AS "user_id", MIN("prompts"."ts") AS "first_ts" FROM "prompts" "prompts" GROUP BY 1) "t0" ON ("prompts"."user_id" = "t0"."user_id") GROUP BY 1', **PG)
_q(T, "demo", 'SELECT DATE_TRUNC(\'YEAR\', "t0"."first_ts") AS "cohort", COUNT(DISTINCT "prompts"."user_id") AS "ctd:user_id:ok" FROM "prompts" "prompts" INNER JOIN (SELECT "prompts"."user_id" AS "user_id", MIN("prompts"."ts") AS "first_ts" FROM "prompts" "prompts" GROUP BY 1) "t0" ON ("prompts"."user_id" = "t0"."user_id") GROUP BY 1', **PG)
_q(T, "pums", 'SELECT "PUMS"."sex" AS "sex", SUM(1) AS "cnt:PUMS:ok", AVG(CAST("PUMS"."income" AS DOUBLE PRECISION)) AS "avg:income:ok" FROM "PUMS"."PUMS" "PUMS" GROUP BY 1', **PG)
_q(T, "pums", 'SELECT (CASE WHEN "PUMS"."age" < 30 THEN \'Under 30\' WHEN "PUMS"."age" < 50 THEN \'30-49\' ELSE \'50+\' END) AS "Age (group)", "PUMS"."married" AS "married", SUM(1) AS "cnt:PUMS:ok" FROM "PUMS"."PUMS" "PUMS" GROUP BY 1, 2', **PG)
_q(T, "pums", 'SELECT "PUMS"."educ" AS "educ", SUM(CAST("PUMS"."income" AS DOUBLE PRECISION)) AS "sum:income:ok" FROM "PUMS"."PUMS" "PUMS" WHERE ("PUMS"."educ" >= 9) GROUP BY 1 HAVING (COUNT(1) > 0)', **PG)

# ============================================================================ Looker
L = "looker"
_q(L, "demo", 'SELECT prompts.model AS "prompts.model", COUNT(*) AS "prompts.count" FROM prompts AS prompts GROUP BY 1 ORDER BY 2 DESC FETCH NEXT 500 ROWS ONLY', **PG)
_q(L, "demo", 'SELECT prompts.model AS "prompts.model", COUNT(*) AS "prompts.count" FROM prompts AS prompts GROUP BY 1 ORDER BY 2 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT TO_CHAR(DATE_TRUNC(\'month\', prompts.ts), \'YYYY-MM\') AS "prompts.created_month", COUNT(*) AS "prompts.count" FROM prompts AS prompts GROUP BY DATE_TRUNC(\'month\', prompts.ts) ORDER BY 1 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT DATE(prompts.ts) AS "prompts.created_date", COUNT(*) AS "prompts.count" FROM prompts AS prompts WHERE prompts.ts >= TIMESTAMP \'2025-06-15\' GROUP BY 1 ORDER BY 1 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT TO_CHAR(DATE_TRUNC(\'week\', prompts.ts), \'YYYY-MM-DD\') AS "prompts.created_week", COUNT(*) AS "prompts.count" FROM prompts AS prompts WHERE prompts.ts >= TIMESTAMP \'2025-04-01\' GROUP BY DATE_TRUNC(\'week\', prompts.ts) ORDER BY 1 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT EXTRACT(YEAR FROM prompts.ts)::integer AS "prompts.created_year", prompts.model AS "prompts.model", COALESCE(SUM(prompts.tokens_in), 0) AS "prompts.total_tokens_in" FROM prompts AS prompts GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT CASE WHEN users.age < 20 THEN \'0\' WHEN users.age >= 20 AND users.age < 40 THEN \'1\' WHEN users.age >= 40 AND users.age < 60 THEN \'2\' WHEN users.age >= 60 THEN \'3\' ELSE \'4\' END AS "users.age_tier__sort_", CASE WHEN users.age < 20 THEN \'Below 20\' WHEN users.age >= 20 AND users.age < 40 THEN \'20 to 39\' WHEN users.age >= 40 AND users.age < 60 THEN \'40 to 59\' WHEN users.age >= 60 THEN \'60 or Above\' ELSE \'Undefined\' END AS "users.age_tier", COUNT(*) AS "users.count" FROM users AS users GROUP BY 1, 2 ORDER BY 1 LIMIT 500', **PG)
_q(L, "demo", 'SELECT users.region AS "users.region", COUNT(DISTINCT users.user_id) AS "users.count", COUNT(DISTINCT prompts.prompt_id) AS "prompts.count" FROM prompts AS prompts LEFT JOIN users AS users ON prompts.user_id = users.user_id GROUP BY 1 ORDER BY 2 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT users.plan AS "users.plan", COALESCE(SUM(prompts.tokens_out), 0) AS "prompts.total_tokens_out", AVG(users.age) AS "users.average_age" FROM users AS users LEFT JOIN prompts AS prompts ON users.user_id = prompts.user_id GROUP BY 1 ORDER BY 2 DESC LIMIT 500', **PG)
_q(L, "demo", 'WITH user_facts AS (SELECT user_id, COUNT(*) AS lifetime_prompts, MIN(ts) AS first_prompt FROM prompts GROUP BY 1) SELECT users.plan AS "users.plan", AVG(user_facts.lifetime_prompts) AS "user_facts.average_lifetime_prompts" FROM users AS users LEFT JOIN user_facts ON users.user_id = user_facts.user_id GROUP BY 1 ORDER BY 2 DESC LIMIT 500', no_caps=True, **PG)
_q(L, "demo", 'WITH user_facts AS (SELECT user_id, COUNT(*) AS lifetime_prompts FROM prompts GROUP BY 1) SELECT CASE WHEN user_facts.lifetime_prompts < 5 THEN \'1-4\' WHEN user_facts.lifetime_prompts < 20 THEN \'5-19\' ELSE \'20+\' END AS "user_facts.prompt_tier", COUNT(*) AS "users.count" FROM users AS users INNER JOIN user_facts ON users.user_id = user_facts.user_id GROUP BY 1 ORDER BY 1 LIMIT 500', no_caps=True, **PG)
_q(L, "demo", 'SELECT COUNT(*) AS "prompts.count", COALESCE(SUM(prompts.tokens_in), 0) AS "prompts.total_tokens_in" FROM prompts AS prompts WHERE (prompts.ts >= TIMESTAMP \'2024-01-01\' AND prompts.ts < TIMESTAMP \'2025-01-01\') LIMIT 1', **PG)
_q(L, "demo", 'SELECT prompts.model AS "prompts.model", COUNT(*) AS "prompts.count", 1.0 * COUNT(*) / NULLIF(COUNT(DISTINCT prompts.user_id), 0) AS "prompts.prompts_per_user" FROM prompts AS prompts GROUP BY 1 ORDER BY 2 DESC LIMIT 500', **PG)
_q(L, "demo", 'SELECT users.region AS "users.region", COALESCE(SUM(DISTINCT users.age), 0) AS "users.total_age" FROM prompts AS prompts LEFT JOIN users AS users ON prompts.user_id = users.user_id GROUP BY 1 ORDER BY 1 LIMIT 500', **PG)
_q(L, "demo", 'SELECT users.region AS "users.region", COALESCE(CAST((SUM(DISTINCT CAST(FLOOR(COALESCE(users.age, 0) * (1000000 * 1.0)) AS DECIMAL(38, 0)) + CAST(users.user_id AS DECIMAL(38, 0)) * 1000000000000) - SUM(DISTINCT CAST(users.user_id AS DECIMAL(38, 0)) * 1000000000000)) AS DOUBLE) / CAST((1000000 * 1.0) AS DOUBLE), 0) AS "users.total_age" FROM prompts AS prompts LEFT JOIN users AS users ON prompts.user_id = users.user_id GROUP BY 1 ORDER BY 1 LIMIT 500')
_q(L, "demo", 'SELECT tickets.category AS "tickets.category", COUNT(*) AS "tickets.count", AVG(tickets.resolution_minutes) AS "tickets.avg_resolution" FROM tickets AS tickets LEFT JOIN users AS users ON tickets.user_id = users.user_id WHERE users.plan = \'pro\' GROUP BY 1 ORDER BY 2 DESC LIMIT 500', **PG)
_q(L, "pums", 'SELECT pums.married AS "pums.married", COUNT(*) AS "pums.count", AVG(pums.income) AS "pums.avg_income" FROM "PUMS"."PUMS" AS pums GROUP BY 1 ORDER BY 2 DESC LIMIT 500', **PG)
_q(L, "pums", 'SELECT CASE WHEN pums.income < 10000 THEN \'0\' WHEN pums.income < 50000 THEN \'1\' WHEN pums.income < 100000 THEN \'2\' ELSE \'3\' END AS "pums.income_tier__sort_", COUNT(*) AS "pums.count" FROM "PUMS"."PUMS" AS pums GROUP BY 1 ORDER BY 1 LIMIT 500', **PG)

# ============================================================================ notebooks
N = "notebook"
# per-person distributions
_q(N, "demo", "SELECT n, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t GROUP BY n ORDER BY n", **PP)
_q(N, "demo", "SELECT LEAST(n, 20) AS n_capped, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t GROUP BY 1 ORDER BY 1", **PP)
_q(N, "demo", "WITH per_user AS (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) SELECT CASE WHEN n = 1 THEN '1' WHEN n <= 4 THEN '2-4' WHEN n <= 9 THEN '5-9' WHEN n <= 19 THEN '10-19' ELSE '20+' END AS bucket, COUNT(*) AS users FROM per_user GROUP BY bucket ORDER BY MIN(n)", **PP)
_q(N, "demo", "WITH per_user AS (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) SELECT CASE WHEN n = 1 THEN '1' WHEN n <= 4 THEN '2-4' WHEN n <= 9 THEN '5-9' WHEN n <= 19 THEN '10-19' ELSE '20+' END AS bucket, COUNT(*) AS users FROM per_user GROUP BY bucket ORDER BY bucket", **PP)
_q(N, "demo", "SELECT COUNT(*) AS power_users FROM (SELECT user_id FROM prompts GROUP BY user_id HAVING COUNT(*) >= 5) t", **PP)
_q(N, "demo", "SELECT COUNT(*) FILTER (WHERE n >= 5) AS at_least_5, COUNT(*) AS active FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT AVG(n) AS mean_prompts, MEDIAN(n) AS median_prompts FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT quantile_cont(n, 0.9) AS p90 FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT FLOOR(LOG10(n)) AS decade, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t GROUP BY 1 ORDER BY 1", **PP)
_q(N, "demo", "SELECT AVG(total_tokens) AS avg_tokens_per_user FROM (SELECT user_id, SUM(tokens_in + tokens_out) AS total_tokens FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT u.region, AVG(t.n) AS avg_prompts, COUNT(*) AS users FROM users u JOIN (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t ON t.user_id = u.user_id GROUP BY u.region ORDER BY u.region", **PP)
_q(N, "demo", "SELECT u.plan, COUNT(t.user_id) AS active, COUNT(*) AS users FROM users u LEFT JOIN (SELECT DISTINCT user_id FROM prompts) t ON t.user_id = u.user_id GROUP BY u.plan ORDER BY u.plan", **PP)
_q(N, "demo", "SELECT models_used, COUNT(*) AS users FROM (SELECT user_id, COUNT(DISTINCT model) AS models_used FROM prompts GROUP BY user_id) t GROUP BY models_used ORDER BY models_used", **PP)
_q(N, "demo", "SELECT AVG(flag_rate) AS avg_user_flag_rate FROM (SELECT user_id, AVG(CASE WHEN flagged THEN 1.0 ELSE 0.0 END) AS flag_rate FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT COUNT(*) AS users_with_flag FROM (SELECT user_id, MAX(CASE WHEN flagged THEN 1 ELSE 0 END) AS any_flag FROM prompts GROUP BY user_id) t WHERE any_flag = 1", **PP)
_q(N, "demo", "SELECT COUNT(*) AS users_with_flag FROM (SELECT user_id, BOOL_OR(flagged) AS any_flag FROM prompts GROUP BY user_id) t WHERE any_flag", **PP)
_q(N, "demo", "SELECT COUNT(DISTINCT user_id) FILTER (WHERE flagged) AS users_flagged, COUNT(DISTINCT user_id) AS users FROM prompts")
_q(N, "demo", "SELECT COUNT(*) AS n FROM (SELECT user_id, COUNT(*) AS n FROM tickets GROUP BY user_id HAVING COUNT(*) > 1) t", **PP)
_q(N, "demo", "SELECT t.n_tickets, COUNT(*) AS users FROM (SELECT u.user_id, COUNT(tk.ticket_id) AS n_tickets FROM users u LEFT JOIN tickets tk ON tk.user_id = u.user_id GROUP BY u.user_id) t GROUP BY t.n_tickets ORDER BY 1", **PP)
_q(N, "demo", "SELECT AVG(days_active) AS avg_days FROM (SELECT user_id, COUNT(DISTINCT CAST(ts AS DATE)) AS days_active FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT AVG(LEAST(date_diff('day', first_ts, last_ts), 1500)) AS avg_tenure_days FROM (SELECT user_id, MIN(ts) AS first_ts, MAX(ts) AS last_ts FROM prompts GROUP BY user_id) t", **PP)
_q(N, "demo", "SELECT AVG(date_diff('day', first_ts, last_ts)) AS avg_tenure_days FROM (SELECT user_id, MIN(ts) AS first_ts, MAX(ts) AS last_ts FROM prompts GROUP BY user_id) t", **PP)
# cohorts and retention
_q(N, "demo", "WITH firsts AS (SELECT user_id, date_trunc('month', MIN(ts)) AS cohort FROM prompts GROUP BY user_id) SELECT date_trunc('year', cohort) AS cohort_year, COUNT(*) AS users FROM firsts GROUP BY 1 ORDER BY 1", **PP)
_q(N, "demo", "WITH firsts AS (SELECT user_id, date_trunc('quarter', MIN(ts)) AS cohort FROM prompts GROUP BY user_id) SELECT cohort, COUNT(*) AS users FROM firsts GROUP BY cohort ORDER BY cohort", **PP)
_q(N, "demo", "WITH firsts AS (SELECT user_id, MIN(ts) AS first_ts FROM prompts GROUP BY user_id) SELECT EXTRACT(year FROM first_ts) AS y, COUNT(*) AS new_users FROM firsts GROUP BY y ORDER BY y", **PP)
_q(N, "demo", "WITH firsts AS (SELECT user_id, date_trunc('year', MIN(ts)) AS cohort FROM prompts GROUP BY user_id) SELECT f.cohort, date_trunc('year', p.ts) AS active_year, COUNT(DISTINCT p.user_id) AS users FROM prompts p JOIN firsts f ON f.user_id = p.user_id GROUP BY 1, 2 ORDER BY 1, 2")
_q(N, "demo", "WITH firsts AS (SELECT user_id, MIN(ts) AS first_ts FROM prompts GROUP BY user_id), activity AS (SELECT p.user_id, date_diff('year', f.first_ts, p.ts) AS years_since FROM prompts p JOIN firsts f USING (user_id)) SELECT years_since, COUNT(DISTINCT user_id) AS users FROM activity GROUP BY years_since ORDER BY years_since")
_q(N, "demo", "SELECT date_trunc('year', signup_month) AS cohort, COUNT(DISTINCT p.user_id) AS active_users, COUNT(*) AS prompts FROM users u JOIN prompts p ON p.user_id = u.user_id GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT u.signup_month >= DATE '2024-01-01' AS new_user, EXTRACT(year FROM p.ts) AS y, COUNT(DISTINCT p.user_id) AS active FROM users u JOIN prompts p USING (user_id) GROUP BY 1, 2 ORDER BY 1, 2")
_q(N, "demo", "SELECT date_diff('year', u.signup_month, p.ts) AS years_after_signup, COUNT(*) AS prompts FROM prompts p JOIN users u ON u.user_id = p.user_id GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT COUNT(*) AS retained FROM (SELECT user_id FROM prompts GROUP BY user_id HAVING MIN(ts) < TIMESTAMP '2024-01-01' AND MAX(ts) >= TIMESTAMP '2025-01-01') t", **PP)
# funnels
_q(N, "demo", "WITH u AS (SELECT user_id, MAX(CASE WHEN model = 'small' THEN 1 ELSE 0 END) AS s1, MAX(CASE WHEN model = 'large' THEN 1 ELSE 0 END) AS s2 FROM prompts GROUP BY user_id) SELECT COUNT(*) AS step0, SUM(s1) AS step1, SUM(s1 * s2) AS step2 FROM u", **PP)
_q(N, "demo", "SELECT COUNT(*) AS users, COUNT(*) FILTER (WHERE user_id IN (SELECT user_id FROM prompts)) AS prompted, COUNT(*) FILTER (WHERE user_id IN (SELECT user_id FROM tickets)) AS ticketed FROM users")
_q(N, "demo", "SELECT SUM(CASE WHEN user_id IN (SELECT user_id FROM tickets) THEN 1 ELSE 0 END) AS with_ticket, COUNT(*) AS users FROM users")
_q(N, "demo", "SELECT COUNT(*) AS users FROM users WHERE user_id IN (SELECT user_id FROM prompts WHERE model = 'large') AND user_id IN (SELECT user_id FROM tickets)")
_q(N, "demo", "SELECT COUNT(*) AS users FROM users u WHERE EXISTS (SELECT 1 FROM prompts p WHERE p.user_id = u.user_id AND p.flagged)")
_q(N, "demo", "SELECT u.plan, COUNT(*) AS users FROM users u WHERE u.user_id IN (SELECT user_id FROM prompts GROUP BY user_id HAVING COUNT(*) > 10) GROUP BY u.plan ORDER BY u.plan")
_q(N, "demo", "SELECT u.plan, COUNT(*) AS users FROM users u WHERE u.user_id NOT IN (SELECT user_id FROM prompts WHERE ts >= TIMESTAMP '2025-01-01') GROUP BY u.plan ORDER BY u.plan")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE user_id IN (SELECT user_id FROM users WHERE plan IN ('pro', 'team') AND age < 40)")
# window-style per-person rows
_q(N, "demo", "SELECT model, COUNT(*) AS first_prompts FROM (SELECT user_id, model, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM prompts) t WHERE rn = 1 GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT model, COUNT(*) AS n FROM prompts QUALIFY ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) = 1 GROUP BY model")
_q(N, "demo", "SELECT AVG(gap) AS avg_gap_hours FROM (SELECT user_id, date_diff('hour', LAG(ts) OVER (PARTITION BY user_id ORDER BY ts), ts) AS gap FROM prompts) t WHERE gap IS NOT NULL")
# time filters and grains
_q(N, "demo", "SELECT model, COUNT(*) AS n FROM prompts WHERE ts BETWEEN '2024-01-01' AND '2024-03-31' GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE ts >= TIMESTAMP '2025-06-30' - INTERVAL 90 DAY")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE ts >= TIMESTAMP '2025-06-30' - INTERVAL '30 days'")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE ts::DATE >= DATE '2025-06-30' - 60")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE ts > now() - INTERVAL 2 YEAR")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE ts > current_date - INTERVAL '2 years'")
_q(N, "demo", "SELECT ts::DATE AS day, COUNT(*) AS n FROM prompts WHERE ts >= '2025-06-01' GROUP BY day ORDER BY day")
_q(N, "demo", "SELECT date_trunc('hour', ts) AS hr, COUNT(*) AS n FROM prompts WHERE ts >= '2025-06-25' GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT time_bucket(INTERVAL '7 days', ts) AS wk, COUNT(*) AS n FROM prompts WHERE ts >= '2025-05-01' GROUP BY wk ORDER BY wk")
_q(N, "demo", "SELECT time_bucket(INTERVAL '1 month', ts) AS m, COUNT(*) AS n FROM prompts WHERE ts >= '2025-01-01' GROUP BY m ORDER BY m")
_q(N, "demo", "SELECT EXTRACT(hour FROM ts) AS h, COUNT(*) AS n, AVG(latency_ms) AS lat FROM prompts GROUP BY h ORDER BY h")
_q(N, "demo", "SELECT dayname(ts) AS dow, COUNT(*) AS n FROM prompts GROUP BY dow ORDER BY n DESC")
_q(N, "demo", "SELECT monthname(ts) AS mon, COUNT(*) AS n FROM prompts WHERE year(ts) = 2024 GROUP BY mon ORDER BY mon")
_q(N, "demo", "SELECT strftime(ts, '%A') AS dow, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT date_part('dow', ts) AS dow, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT isodow(ts) AS dow, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT year(ts) AS y, month(ts) AS m, COUNT(*) AS n FROM prompts WHERE year(ts) = 2025 GROUP BY ALL ORDER BY ALL")
_q(N, "demo", "SELECT date_trunc('month', ts)::DATE AS month, COUNT(*) AS n, COUNT(DISTINCT user_id) AS mau FROM prompts WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT strftime(date_trunc('month', ts), '%Y-%m') AS ym, SUM(tokens_in + tokens_out) AS tokens FROM prompts WHERE ts >= '2024-07-01' GROUP BY ym ORDER BY ym")
_q(N, "demo", "SELECT last_day(ts) AS month_end, COUNT(*) AS n FROM prompts WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT EXTRACT(epoch FROM date_trunc('year', ts)) AS e, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT COUNT(*) AS n, AVG(resolution_minutes) / 60.0 AS avg_hours FROM tickets WHERE opened_at >= DATE '2024-01-01'")
# string functions on keys, IN / NOT IN / LIKE
_q(N, "demo", "SELECT UPPER(region) AS region, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT LOWER(model) AS m, COUNT(*) AS n FROM prompts GROUP BY LOWER(model) ORDER BY m")
_q(N, "demo", "SELECT SUBSTR(region, 1, 1) AS initial, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT LEFT(model, 3) AS m3, AVG(tokens_in) AS a FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT region || '/' || plan AS segment, COUNT(*) AS n FROM users GROUP BY segment ORDER BY n DESC")
_q(N, "demo", "SELECT CONCAT(region, '-', plan) AS segment, AVG(age) AS a FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT initcap(region) AS region, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT split_part(model || '_x', '_', 1) AS m, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT regexp_replace(region, '^(.)', 'R') AS r, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT COUNT(*) AS n FROM users WHERE region NOT IN ('north', 'south') AND plan <> 'free'")
_q(N, "demo", "SELECT COUNT(*) AS n FROM users WHERE region ILIKE 'N%' OR region LIKE '%st'")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE model IN ('small', 'medium') AND NOT flagged AND tokens_in BETWEEN 100 AND 2000")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE length(model) > 5")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE model SIMILAR TO 's.*'")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE regexp_matches(model, '^(s|m)')")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE user_id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE user_id % 2 = 0")
_q(N, "demo", "SELECT COUNT(*) AS n FROM prompts WHERE prompt_id > 2000")
# aggregates and ratios
_q(N, "demo", "SELECT model, SUM(tokens_out) * 1.0 / NULLIF(SUM(tokens_in), 0) AS ratio, AVG(tokens_out * 1.0 / NULLIF(tokens_in, 0)) AS mean_row_ratio FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT model, AVG(tokens_out::DOUBLE / GREATEST(tokens_in, 1)) AS r FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT model, COUNT(*) * 1.0 / COUNT(DISTINCT user_id) AS prompts_per_user FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT model, COUNT(*) * 100.0 / (SELECT COUNT(*) FROM prompts) AS pct FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT p.model, COUNT(*) * 1.0 / t.total AS share FROM prompts p CROSS JOIN (SELECT COUNT(*) AS total FROM prompts) t GROUP BY p.model, t.total ORDER BY p.model")
_q(N, "demo", "WITH by_model AS (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) SELECT model, n, n * 100.0 / SUM(n) OVER () AS pct FROM by_model ORDER BY pct DESC", caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model")
_q(N, "demo", "SELECT region, plan, COUNT(*) AS n, COUNT(*) * 1.0 / SUM(COUNT(*)) OVER (PARTITION BY region) AS share_in_region FROM users GROUP BY region, plan ORDER BY region, plan")
_q(N, "demo", "SELECT model, COUNT(*) AS n, NTILE(2) OVER (ORDER BY COUNT(*)) AS half FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT EXTRACT(year FROM ts) AS y, COUNT(*) AS n, COUNT(*) - LAG(COUNT(*)) OVER (ORDER BY EXTRACT(year FROM ts)) AS growth FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT corr(tokens_in, tokens_out) AS r FROM prompts")
_q(N, "demo", "SELECT covar_pop(tokens_in, tokens_out) AS c FROM prompts")
_q(N, "demo", "SELECT regr_slope(tokens_out, tokens_in) AS slope FROM prompts")
_q(N, "demo", "SELECT model, COUNT_IF(flagged) AS n_flagged FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT model, AVG(flagged::INTEGER) AS flag_rate, SUM(flagged::INT) AS n_flagged FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT mode(model) AS top_model FROM prompts")
_q(N, "demo", "SELECT approx_count_distinct(user_id) AS users FROM prompts")
_q(N, "demo", "SELECT model, arg_max(tokens_in, ts) AS latest_tokens FROM prompts GROUP BY model")
_q(N, "demo", "SELECT model, string_agg(DISTINCT CAST(flagged AS VARCHAR), ',') AS flags FROM prompts GROUP BY model")
_q(N, "demo", "SELECT model, SUM(tokens_in) FILTER (WHERE ts >= '2025-01-01') AS s_2025, SUM(tokens_in) FILTER (WHERE ts < '2025-01-01') AS s_before FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT COUNT(DISTINCT model || '-' || CAST(flagged AS VARCHAR)) AS combos FROM prompts")
_q(N, "demo", "SELECT COUNT(DISTINCT (model, flagged)) AS combos FROM prompts")
_q(N, "demo", "SELECT model, AVG(latency_ms) / 1000.0 AS avg_s, STDDEV(latency_ms) / 1000.0 AS sd_s, VARIANCE(latency_ms) AS v FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT model, ROUND(AVG(tokens_in), 2) AS avg_in, ROUND(100.0 * AVG(CASE WHEN flagged THEN 1 ELSE 0 END), 1) AS pct_flagged FROM prompts GROUP BY ALL ORDER BY ALL")
_q(N, "demo", "SELECT model, quantile_cont(latency_ms, 0.5) AS p50, quantile_cont(latency_ms, 0.95) AS p95 FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo", "SELECT quantile_cont(latency_ms, [0.5, 0.9]) AS qs FROM prompts")
_q(N, "demo", "SELECT approx_quantile(tokens_in, 0.5) AS med FROM prompts WHERE model = 'large'")
_q(N, "demo", "SELECT MAX(tokens_in) - MIN(tokens_in) AS spread FROM prompts")
_q(N, "demo", "SELECT model, AVG(tokens_in) AS a FROM prompts GROUP BY model HAVING COUNT(*) > 100 AND AVG(tokens_in) > 0 ORDER BY a DESC")
_q(N, "demo", "SELECT model, flagged, COUNT(*) AS n FROM prompts GROUP BY GROUPING SETS ((model), (flagged), ()) ORDER BY model, flagged")
_q(N, "demo", "SELECT model, flagged, COUNT(*) AS n FROM prompts GROUP BY CUBE (model, flagged)")
_q(N, "demo", "SELECT region, COUNT(*) AS n FROM users GROUP BY region UNION ALL SELECT 'total', COUNT(*) FROM users")
_q(N, "demo", "SELECT 'prompts' AS what, COUNT(*) AS n FROM prompts UNION ALL SELECT 'tickets', COUNT(*) FROM tickets")
_q(N, "demo", "SELECT * FROM (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) a JOIN (SELECT model, AVG(latency_ms) AS lat FROM prompts GROUP BY model) b USING (model) ORDER BY model")
# joins
_q(N, "demo", "SELECT r.name, COUNT(*) AS prompts FROM prompts p JOIN users u ON u.user_id = p.user_id JOIN regions r ON r.region = u.region GROUP BY r.name ORDER BY r.name")
_q(N, "demo", "SELECT u.plan, p.model, AVG(p.tokens_in) AS a FROM prompts p JOIN users u USING (user_id) WHERE u.age BETWEEN 25 AND 45 GROUP BY ALL ORDER BY ALL")
_q(N, "demo", "SELECT u.region, COUNT(DISTINCT t.ticket_id) AS tickets, COUNT(DISTINCT p.prompt_id) AS prompts FROM users u LEFT JOIN tickets t ON t.user_id = u.user_id LEFT JOIN prompts p ON p.user_id = u.user_id GROUP BY u.region ORDER BY u.region")
_q(N, "demo", "SELECT t.category, AVG(u.age) AS avg_age FROM tickets t JOIN users u ON u.user_id = t.user_id GROUP BY t.category ORDER BY t.category")
_q(N, "demo", "SELECT COALESCE(t.category, 'none') AS category, COUNT(*) AS users FROM users u LEFT JOIN tickets t ON t.user_id = u.user_id GROUP BY 1 ORDER BY 1")
_q(N, "demo", "SELECT u.plan, COUNT(*) AS n FROM users u, regions r WHERE r.region = u.region AND r.name IN ('North', 'East') GROUP BY u.plan ORDER BY u.plan")
_q(N, "demo", "SELECT u.plan, COUNT(*) AS n FROM users u JOIN regions r ON UPPER(r.name) = UPPER(u.region) GROUP BY u.plan ORDER BY u.plan")
_q(N, "demo", "SELECT p.model, COUNT(*) AS n FROM prompts p JOIN tickets t ON t.user_id = p.user_id AND t.opened_at > p.ts GROUP BY p.model ORDER BY p.model")
# nested over released answers
_q(N, "demo", "SELECT MAX(n) AS busiest_month FROM (SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m) t", caps_from="SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m")
_q(N, "demo", "SELECT AVG(n) AS avg_per_month FROM (SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m) t", caps_from="SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m")
_q(N, "demo", "WITH monthly AS (SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts WHERE ts >= '2024-01-01' GROUP BY 1) SELECT m, n, AVG(n) OVER (ORDER BY m ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS ma3 FROM monthly ORDER BY m", caps_from="SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts WHERE ts >= '2024-01-01' GROUP BY 1")
_q(N, "demo", "WITH monthly AS (SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY 1) SELECT EXTRACT(year FROM m) AS y, SUM(n) AS n FROM monthly GROUP BY 1 ORDER BY 1", caps_from="SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY 1")
# demo_nulls: NULL handling
_q(N, "demo_nulls", "SELECT COALESCE(plan, 'unknown') AS plan, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo_nulls", "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan ORDER BY plan")
_q(N, "demo_nulls", "SELECT model, COUNT(*) AS n, COUNT(tokens_out) AS n_out, AVG(tokens_out) AS a FROM prompts GROUP BY model ORDER BY model")
_q(N, "demo_nulls", "SELECT COUNT(*) AS n FROM prompts WHERE model IS NULL OR tokens_out IS NULL")
_q(N, "demo_nulls", "SELECT AVG(COALESCE(latency_ms, 0)) AS a, AVG(latency_ms) AS b, SUM(CASE WHEN latency_ms IS NULL THEN 1 ELSE 0 END) AS missing FROM prompts")
_q(N, "demo_nulls", "SELECT CASE WHEN age IS NULL THEN 'unknown' WHEN age < 30 THEN 'young' ELSE 'older' END AS band, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1")
_q(N, "demo_nulls", "SELECT COALESCE(model, 'n/a') AS model, SUM(tokens_in) AS s FROM prompts GROUP BY 1 ORDER BY 1")
_q(N, "demo_nulls", "SELECT flagged, COUNT(*) AS n FROM prompts GROUP BY flagged ORDER BY flagged NULLS FIRST")
_q(N, "demo_nulls", "SELECT COUNT(*) AS n FROM prompts WHERE model NOT IN ('small')")
_q(N, "demo_nulls", "SELECT COUNT(*) AS n FROM prompts WHERE COALESCE(flagged, FALSE) = FALSE")
_q(N, "demo_nulls", "SELECT AVG(age) AS a, COUNT(age) AS n_known, COUNT(*) AS n FROM users WHERE plan IS NOT NULL")
_q(N, "demo_nulls", "SELECT region, AVG(NULLIF(resolution_minutes, 0)) AS a, COUNT(resolution_minutes) AS n FROM tickets JOIN users USING (user_id) GROUP BY region ORDER BY region")

# ============================================================================ PUMS (analyst)
P = "pums"
_q(P, "pums", "SELECT CASE WHEN age BETWEEN 18 AND 24 THEN '18-24' WHEN age BETWEEN 25 AND 34 THEN '25-34' WHEN age BETWEEN 35 AND 49 THEN '35-49' WHEN age BETWEEN 50 AND 64 THEN '50-64' WHEN age >= 65 THEN '65+' ELSE 'under 18' END AS age_group, COUNT(*) AS n, AVG(income) AS avg_income FROM PUMS.PUMS GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM PUMS.PUMS GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT CAST(age / 10 AS INTEGER) * 10 AS decade, COUNT(*) AS n FROM PUMS.PUMS GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT width_bucket(income, 0, 200000, 4) AS bucket, COUNT(*) AS n FROM PUMS.PUMS GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT sex, married, COUNT(*) AS n, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER (PARTITION BY sex) AS pct_within_sex FROM PUMS.PUMS GROUP BY sex, married ORDER BY sex, married")
_q(P, "pums", "SELECT educ, COUNT(*) FILTER (WHERE married = 1) * 1.0 / COUNT(*) AS share_married FROM PUMS.PUMS GROUP BY educ ORDER BY educ")
_q(P, "pums", "SELECT AVG(income) FILTER (WHERE sex = 1) - AVG(income) FILTER (WHERE sex = 0) AS gap FROM PUMS.PUMS")
_q(P, "pums", "SELECT sex, MEDIAN(income) AS med, AVG(income) AS mean FROM PUMS.PUMS GROUP BY sex ORDER BY sex")
_q(P, "pums", "SELECT PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY income) AS q1, PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY income) AS q3 FROM PUMS.PUMS")
_q(P, "pums", "SELECT PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY income) - PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY income) AS iqr FROM PUMS.PUMS")
_q(P, "pums", "SELECT STDDEV(income) / AVG(income) AS cv FROM PUMS.PUMS WHERE income > 0")
_q(P, "pums", "SELECT AVG(NULLIF(income, 0)) AS avg_positive, COUNT(*) FILTER (WHERE income = 0) AS zero_income FROM PUMS.PUMS")
_q(P, "pums", "SELECT sex, married, COUNT(*) AS n FROM PUMS.PUMS GROUP BY CUBE (sex, married) ORDER BY sex, married")
_q(P, "pums", "SELECT race, COUNT(*) AS n FROM PUMS.PUMS GROUP BY race HAVING COUNT(*) >= 10 ORDER BY 2 DESC")
_q(P, "pums", "SELECT CASE educ WHEN 9 THEN 'HS' WHEN 13 THEN 'BA' WHEN 14 THEN 'MA' ELSE 'other' END AS degree, AVG(income) AS a FROM PUMS.PUMS GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT educ >= 13 AS college, AVG(income) AS a, COUNT(*) AS n FROM PUMS.PUMS GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT AVG(LN(income + 1)) AS mean_log_income FROM PUMS.PUMS")
_q(P, "pums", "SELECT ROUND(AVG(income), 2) AS a, ROUND(STDDEV_SAMP(income), 2) AS sd FROM PUMS.PUMS WHERE age BETWEEN 25 AND 54")
_q(P, "pums", "SELECT sex, SUM(income) / SUM(SUM(income)) OVER () AS share_of_income FROM PUMS.PUMS GROUP BY sex ORDER BY sex")
_q(P, "pums", "SELECT age, COUNT(*) AS n FROM PUMS.PUMS WHERE age BETWEEN 20 AND 30 GROUP BY age ORDER BY age")
_q(P, "pums", "SELECT income_band, COUNT(*) AS n FROM (SELECT pid, CASE WHEN income = 0 THEN 'none' WHEN income < 25000 THEN 'low' WHEN income < 75000 THEN 'mid' ELSE 'high' END AS income_band FROM PUMS.PUMS) t GROUP BY income_band ORDER BY income_band")
_q(P, "pums", "WITH adults AS (SELECT * FROM PUMS.PUMS WHERE age >= 18), working AS (SELECT * FROM adults WHERE income > 0) SELECT sex, COUNT(*) AS n, AVG(income) AS a FROM working GROUP BY sex ORDER BY sex")
_q(P, "pums", "SELECT COUNT(*) AS n, COUNT(DISTINCT pid) AS people, COUNT(DISTINCT race) AS races FROM PUMS.PUMS")
_q(P, "pums", "SELECT approx_count_distinct(educ) AS k FROM PUMS.PUMS")
_q(P, "pums", "SELECT mode(educ) AS modal_educ FROM PUMS.PUMS")
_q(P, "pums", "SELECT corr(age, income) AS r FROM PUMS.PUMS")
_q(P, "pums", "SELECT sex, AVG(CAST(married AS DOUBLE)) AS p_married FROM PUMS.PUMS GROUP BY sex ORDER BY sex")
_q(P, "pums", "SELECT educ, AVG(income) AS a, RANK() OVER (ORDER BY AVG(income) DESC) AS rk FROM PUMS.PUMS GROUP BY educ ORDER BY rk LIMIT 5")
_q(P, "pums", "SELECT sex, educ, AVG(income) AS a FROM PUMS.PUMS WHERE educ IN (9, 13, 16) GROUP BY sex, educ ORDER BY sex, educ")
_q(P, "pums", "SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE age > (SELECT AVG(age) FROM PUMS.PUMS)")
_q(P, "pums", "SELECT AVG(income) AS a FROM PUMS.PUMS WHERE income < 1e6 AND age IS NOT NULL")
_q(P, "pums", "SELECT TOP 3 educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ ORDER BY n DESC")
_q(P, "pums", "SELECT sex, married, AVG(age) AS a FROM PUMS.PUMS GROUP BY ROLLUP (sex, married) ORDER BY sex NULLS LAST, married NULLS LAST")
_q(P, "pums", "SELECT sex, VAR_SAMP(age) AS v, VAR_POP(age) AS vp, STDDEV_POP(age) AS sdp FROM PUMS.PUMS GROUP BY sex ORDER BY sex")
_q(P, "pums", "SELECT MIN(age) AS youngest, MAX(age) AS oldest, AVG(age) AS mean FROM PUMS.PUMS")
_q(P, "pums", "SELECT SUM(income) AS total, SUM(income) / 1e6 AS total_m, COUNT(*) AS n FROM PUMS.PUMS WHERE race = 1")
_q(P, "pums", "SELECT age // 5 * 5 AS age5, AVG(income) AS a FROM PUMS.PUMS WHERE age BETWEEN 20 AND 64 GROUP BY 1 ORDER BY 1")
_q(P, "pums", "SELECT married, quantile_disc(age, 0.5) AS med_age FROM PUMS.PUMS GROUP BY married ORDER BY married")


# (added 2026-12-06, third session; appended so that earlier ids stay put)
# Superset's Trino spec writes dates as from_iso8601_date(...)
_q("superset", "demo", "SELECT model AS model, COUNT(*) AS count FROM dpsql.main.prompts WHERE ts >= from_iso8601_date('2025-03-01') AND ts < from_iso8601_timestamp('2025-06-01T12:00:00.000000+02:00') GROUP BY model ORDER BY count DESC LIMIT 10000", **TR,
   ref_sql="SELECT model AS model, COUNT(*) AS count FROM main.prompts WHERE ts >= CAST('2025-03-01' AS DATE) AND ts < CAST('2025-06-01 10:00:00' AS TIMESTAMP) GROUP BY model ORDER BY count DESC LIMIT 10000")

def queries() -> list[Any]:
    """The corpus as harness Query objects (ids bi-000, ...)."""
    from tests.oracle.harness import Query

    out = []
    for i, (dataset, sql) in enumerate(CORPUS):
        opts = dict(OPTIONS.get(sql, {}))
        out.append(Query(f"bi-{i:03d}", dataset, sql, category=FAMILY[sql], **opts))
    return out


# Each query dpsql refuses today, by cause (the causes of RELIABILITY.md's section). A
# query answered that is listed here, or refused that is not, fails the test: a change
# of what is answered is seen either way.
NOT_ANSWERED: dict[str, str] = {
    'SELECT MIN(ts) AS min_ts, MAX(ts) AS max_ts FROM main.prompts LIMIT 1000': 'R12 MIN/MAX of dates',
    'SELECT prompt_id AS prompt_id, ts AS ts, model AS model, tokens_in AS tokens_in FROM prompts ORDER BY ts DESC LIMIT 100': 'R9 raw rows',
    'SELECT prompt_id AS prompt_id, user_id AS user_id, ts AS ts, model AS model, tokens_in AS tokens_in, tokens_out AS tokens_out, latency_ms AS latency_ms, flagged AS flagged FROM prompts LIMIT 50': 'R9 raw rows',
    "SELECT DATE_TRUNC('year', ts) AS ts, model AS model, COUNT(*) AS count FROM prompts JOIN ( SELECT model AS model__, COUNT(*) AS mme_inner__ FROM prompts GROUP BY model ORDER BY COUNT(*) DESC LIMIT 2 ) AS series_limit ON model = model__ GROUP BY DATE_TRUNC('year', ts), model ORDER BY count DESC LIMIT 10000": 'R1a top-N join',
    'SELECT date_trunc(\'year\', CAST(ts AS TIMESTAMP)) AS __timestamp, model AS model, SUM(tokens_in) AS "SUM(tokens_in)" FROM dpsql.main.prompts JOIN (SELECT model AS model__, SUM(tokens_in) AS mme_inner__ FROM dpsql.main.prompts GROUP BY model ORDER BY SUM(tokens_in) DESC LIMIT 2) AS series_limit ON model = model__ GROUP BY date_trunc(\'year\', CAST(ts AS TIMESTAMP)), model ORDER BY "SUM(tokens_in)" DESC LIMIT 10000': 'R1a top-N join',
    'SELECT region AS region, plan AS plan, COUNT(*) AS count FROM users JOIN (SELECT region AS region__, COUNT(*) AS mme_inner__ FROM users GROUP BY region ORDER BY COUNT(*) DESC LIMIT 3) AS series_limit ON region = region__ GROUP BY region, plan ORDER BY count DESC LIMIT 10000': 'R1a top-N join',
    'SELECT "prompts"."prompt_id" AS "prompt_id", "prompts"."model" AS "model" FROM "prompts" LIMIT 2000': 'R9 raw rows',
    'SELECT "prompts"."model" AS "model", SUM(1) AS "cnt:prompts:ok" FROM "prompts" "prompts" INNER JOIN (SELECT "prompts"."model" AS "model", SUM(CAST("prompts"."tokens_in" AS BIGINT)) AS "$__alias__0" FROM "prompts" "prompts" GROUP BY 1 ORDER BY 2 DESC LIMIT 2) "t0" ON ("prompts"."model" = "t0"."model") GROUP BY 1': 'R1a top-N join',
    'SELECT "prompts"."model" AS "model", MIN("prompts"."ts") AS "min:ts:ok", MAX("prompts"."ts") AS "max:ts:ok" FROM "prompts" "prompts" GROUP BY 1': 'R12 MIN/MAX of dates',
    'SELECT "t0"."user_id" AS "user_id (FIXED)", SUM(1) AS "cnt" FROM "prompts" "prompts" INNER JOIN (SELECT "prompts"."user_id" AS "user_id", MIN("prompts"."ts") AS "first_ts" FROM "prompts" "prompts" GROUP BY 1) "t0" ON ("prompts"."user_id" = "t0"."user_id") GROUP BY 1': 'R1c per-person facts joined to event rows',
    'SELECT DATE_TRUNC(\'YEAR\', "t0"."first_ts") AS "cohort", COUNT(DISTINCT "prompts"."user_id") AS "ctd:user_id:ok" FROM "prompts" "prompts" INNER JOIN (SELECT "prompts"."user_id" AS "user_id", MIN("prompts"."ts") AS "first_ts" FROM "prompts" "prompts" GROUP BY 1) "t0" ON ("prompts"."user_id" = "t0"."user_id") GROUP BY 1': 'R1c per-person facts joined to event rows',
    'WITH user_facts AS (SELECT user_id, COUNT(*) AS lifetime_prompts, MIN(ts) AS first_prompt FROM prompts GROUP BY 1) SELECT users.plan AS "users.plan", AVG(user_facts.lifetime_prompts) AS "user_facts.average_lifetime_prompts" FROM users AS users LEFT JOIN user_facts ON users.user_id = user_facts.user_id GROUP BY 1 ORDER BY 2 DESC LIMIT 500': 'R1b per-person facts joined to users',
    'SELECT users.region AS "users.region", COALESCE(CAST((SUM(DISTINCT CAST(FLOOR(COALESCE(users.age, 0) * (1000000 * 1.0)) AS DECIMAL(38, 0)) + CAST(users.user_id AS DECIMAL(38, 0)) * 1000000000000) - SUM(DISTINCT CAST(users.user_id AS DECIMAL(38, 0)) * 1000000000000)) AS DOUBLE) / CAST((1000000 * 1.0) AS DOUBLE), 0) AS "users.total_age" FROM prompts AS prompts LEFT JOIN users AS users ON prompts.user_id = users.user_id GROUP BY 1 ORDER BY 1 LIMIT 500': 'R18 symmetric aggregate',
    'SELECT u.plan, COUNT(t.user_id) AS active, COUNT(*) AS users FROM users u LEFT JOIN (SELECT DISTINCT user_id FROM prompts) t ON t.user_id = u.user_id GROUP BY u.plan ORDER BY u.plan': 'R1b per-person facts joined to users',
    'SELECT COUNT(*) AS users_with_flag FROM (SELECT user_id, BOOL_OR(flagged) AS any_flag FROM prompts GROUP BY user_id) t WHERE any_flag': 'R6 aggregate not supported',
    "SELECT AVG(LEAST(date_diff('day', first_ts, last_ts), 1500)) AS avg_tenure_days FROM (SELECT user_id, MIN(ts) AS first_ts, MAX(ts) AS last_ts FROM prompts GROUP BY user_id) t": 'R13 unbounded expression',
    "SELECT AVG(date_diff('day', first_ts, last_ts)) AS avg_tenure_days FROM (SELECT user_id, MIN(ts) AS first_ts, MAX(ts) AS last_ts FROM prompts GROUP BY user_id) t": 'R13 unbounded expression',
    "WITH firsts AS (SELECT user_id, date_trunc('year', MIN(ts)) AS cohort FROM prompts GROUP BY user_id) SELECT f.cohort, date_trunc('year', p.ts) AS active_year, COUNT(DISTINCT p.user_id) AS users FROM prompts p JOIN firsts f ON f.user_id = p.user_id GROUP BY 1, 2 ORDER BY 1, 2": 'R1c per-person facts joined to event rows',
    "WITH firsts AS (SELECT user_id, MIN(ts) AS first_ts FROM prompts GROUP BY user_id), activity AS (SELECT p.user_id, date_diff('year', f.first_ts, p.ts) AS years_since FROM prompts p JOIN firsts f USING (user_id)) SELECT years_since, COUNT(DISTINCT user_id) AS users FROM activity GROUP BY years_since ORDER BY years_since": 'R1c per-person facts joined to event rows',
    'SELECT COUNT(*) AS users, COUNT(*) FILTER (WHERE user_id IN (SELECT user_id FROM prompts)) AS prompted, COUNT(*) FILTER (WHERE user_id IN (SELECT user_id FROM tickets)) AS ticketed FROM users': 'R1f semi-join in FILTER/CASE',
    'SELECT SUM(CASE WHEN user_id IN (SELECT user_id FROM tickets) THEN 1 ELSE 0 END) AS with_ticket, COUNT(*) AS users FROM users': 'R1f semi-join in FILTER/CASE',
    'SELECT u.plan, COUNT(*) AS users FROM users u WHERE u.user_id IN (SELECT user_id FROM prompts GROUP BY user_id HAVING COUNT(*) > 10) GROUP BY u.plan ORDER BY u.plan': 'R15 semi-join with HAVING',
    'SELECT model, COUNT(*) AS first_prompts FROM (SELECT user_id, model, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM prompts) t WHERE rn = 1 GROUP BY model ORDER BY model': 'R11 per-person window',
    'SELECT model, COUNT(*) AS n FROM prompts QUALIFY ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) = 1 GROUP BY model': 'R11 per-person window',
    "SELECT AVG(gap) AS avg_gap_hours FROM (SELECT user_id, date_diff('hour', LAG(ts) OVER (PARTITION BY user_id ORDER BY ts), ts) AS gap FROM prompts) t WHERE gap IS NOT NULL": 'R11 per-person window',
    "SELECT time_bucket(INTERVAL '7 days', ts) AS wk, COUNT(*) AS n FROM prompts WHERE ts >= '2025-05-01' GROUP BY wk ORDER BY wk": 'R3 function allow-list',
    "SELECT time_bucket(INTERVAL '1 month', ts) AS m, COUNT(*) AS n FROM prompts WHERE ts >= '2025-01-01' GROUP BY m ORDER BY m": 'R3 function allow-list',
    "SELECT last_day(ts) AS month_end, COUNT(*) AS n FROM prompts WHERE ts >= '2025-01-01' GROUP BY 1 ORDER BY 1": 'R3 function allow-list',
    'SELECT initcap(region) AS region, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1': 'R3 function allow-list',
    "SELECT split_part(model || '_x', '_', 1) AS m, COUNT(*) AS n FROM prompts GROUP BY 1 ORDER BY 1": 'R3 function allow-list',
    "SELECT regexp_replace(region, '^(.)', 'R') AS r, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1": 'R3 function allow-list',
    "SELECT COUNT(*) AS n FROM prompts WHERE model SIMILAR TO 's.*'": 'R3 function allow-list',
    'SELECT model, SUM(tokens_out) * 1.0 / NULLIF(SUM(tokens_in), 0) AS ratio, AVG(tokens_out * 1.0 / NULLIF(tokens_in, 0)) AS mean_row_ratio FROM prompts GROUP BY model ORDER BY model': 'R4 NULLIF compares the unclamped divisor (the hint: GREATEST(tokens_in, 1))',
    'SELECT model, COUNT(*) * 100.0 / (SELECT COUNT(*) FROM prompts) AS pct FROM prompts GROUP BY model ORDER BY model': 'R1d scalar subquery',
    'SELECT p.model, COUNT(*) * 1.0 / t.total AS share FROM prompts p CROSS JOIN (SELECT COUNT(*) AS total FROM prompts) t GROUP BY p.model, t.total ORDER BY p.model': 'R1d scalar subquery',
    'SELECT mode(model) AS top_model FROM prompts': 'R6 aggregate not supported',
    'SELECT model, arg_max(tokens_in, ts) AS latest_tokens FROM prompts GROUP BY model': 'R6 aggregate not supported',
    "SELECT model, string_agg(DISTINCT CAST(flagged AS VARCHAR), ',') AS flags FROM prompts GROUP BY model": 'R6 aggregate not supported',
    'SELECT quantile_cont(latency_ms, [0.5, 0.9]) AS qs FROM prompts': 'R17 list quantile',
    "SELECT region, COUNT(*) AS n FROM users GROUP BY region UNION ALL SELECT 'total', COUNT(*) FROM users": 'R10 UNION ALL of aggregates',
    "SELECT 'prompts' AS what, COUNT(*) AS n FROM prompts UNION ALL SELECT 'tickets', COUNT(*) FROM tickets": 'R10 UNION ALL of aggregates',
    'SELECT * FROM (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) a JOIN (SELECT model, AVG(latency_ms) AS lat FROM prompts GROUP BY model) b USING (model) ORDER BY model': 'R1e join of aggregate subqueries',
    'SELECT u.region, COUNT(DISTINCT t.ticket_id) AS tickets, COUNT(DISTINCT p.prompt_id) AS prompts FROM users u LEFT JOIN tickets t ON t.user_id = u.user_id LEFT JOIN prompts p ON p.user_id = u.user_id GROUP BY u.region ORDER BY u.region': 'R14 two many-row tables',
    'SELECT p.model, COUNT(*) AS n FROM prompts p JOIN tickets t ON t.user_id = p.user_id AND t.opened_at > p.ts GROUP BY p.model ORDER BY p.model': 'R14 two many-row tables',
    'SELECT width_bucket(income, 0, 200000, 4) AS bucket, COUNT(*) AS n FROM PUMS.PUMS GROUP BY 1 ORDER BY 1': 'R3 function allow-list',
    'SELECT mode(educ) AS modal_educ FROM PUMS.PUMS': 'R6 aggregate not supported',
    'SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE age > (SELECT AVG(age) FROM PUMS.PUMS)': 'R1d scalar subquery',
}
