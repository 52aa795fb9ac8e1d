"""The query corpus of the oracle: what analysts and BI tools write, over the PUMS sample
and the demo data (and its NULL copy). Deterministic for a seed."""

from __future__ import annotations

import dataclasses
import random
import tomllib

from tests.oracle.harness import MAIN, Query

# ----------------------------------------------------------------------------- demo
# (select expression, alias) of aggregates over prompts (alias p when joined)
DEMO_AGGS = [
    ("COUNT(*)", "n"),
    ("COUNT(tokens_out)", "n_out"),
    ("SUM(tokens_in)", "s_in"),
    ("AVG(tokens_out)", "avg_out"),
    ("AVG(latency_ms)", "avg_lat"),
    ("VAR_POP(tokens_in)", "var_in"),
    ("VAR_SAMP(tokens_out)", "vs_out"),
    ("STDDEV_SAMP(latency_ms)", "sd_lat"),
    ("STDDEV_POP(tokens_in)", "sdp_in"),
    ("COUNT(DISTINCT user_id)", "people"),
    ("COUNT(DISTINCT model)", "models"),
    ("SUM(CASE WHEN flagged THEN 1 ELSE 0 END)", "n_flagged"),
    ("AVG(CASE WHEN model = 'large' THEN tokens_out END)", "avg_large_out"),
    ("COUNT(CASE WHEN tokens_in > 1000 THEN 1 END)", "n_long"),
    ("SUM(tokens_in) / COUNT(*)", "mean_in"),
    ("ROUND(AVG(tokens_in), 1)", "r_avg_in"),
    ("AVG(tokens_in + tokens_out)", "avg_tok"),
    ("SUM(tokens_out) - SUM(tokens_in)", "extra_out"),
    ("100.0 * SUM(CASE WHEN flagged THEN 1 ELSE 0 END) / COUNT(*)", "pct_flagged"),
    ("AVG(COALESCE(tokens_out, 0))", "avg_out0"),
    ("AVG(LEAST(tokens_in, 2000))", "avg_least"),
    ("SUM(flagged::INTEGER)", "n_flag_int"),
    ("COUNT(latency_ms)", "n_lat"),
    ("AVG(tokens_out / 2)", "half_out"),
    ("COUNT(*) * 2 + 1", "twice"),
]

DEMO_KEYS = [
    (None, None),
    ("model", "model"),
    ("date_trunc('year', ts)", "yr"),
    ("EXTRACT(year FROM ts)", "y"),
    ("flagged", "flagged"),
    ("CASE WHEN tokens_in > 1000 THEN 'long' ELSE 'short' END", "len_class"),
    ("tokens_in // 1000", "kbucket"),
    ("date_trunc('quarter', ts)", "q"),
    ("strftime(ts, '%Y-%m')", "ym"),
    ("dayofweek(ts)", "dow"),
    ("EXTRACT(month FROM ts)", "mon"),
    ("CASE WHEN latency_ms < 1000 THEN 'fast' WHEN latency_ms < 5000 THEN 'ok' END", "speed"),
]

DEMO_FILTERS = [
    None,
    "tokens_in > 200",
    "model IN ('small', 'large')",
    "ts BETWEEN TIMESTAMP '2023-01-01' AND TIMESTAMP '2023-12-31 23:59:59'",
    "ts >= DATE '2024-01-01' AND ts < DATE '2024-07-01'",
    "(model = 'small' OR tokens_out > 1000)",
    "NOT flagged",
    "tokens_out IS NULL",
    "tokens_out IS NOT NULL AND latency_ms IS NOT NULL",
    "model LIKE 'm%'",
    "latency_ms BETWEEN 500 AND 5000",
    "model <> 'small'",
    "tokens_in + tokens_out > 1500",
    "NOT (tokens_in < 100 OR model = 'large')",
    "model NOT IN ('medium')",
    "ts < '2023-06-01'",
]


def _select(key, alias, aggs, where, *, having=None, order=None, limit=None, table="prompts"):
    items = []
    if key is not None:
        items.append(f"{key} AS {alias}")
    items += [f"{a} AS {n}" for a, n in aggs]
    sql = f"SELECT {', '.join(items)} FROM {table}"
    if where:
        sql += f" WHERE {where}"
    if key is not None:
        sql += f" GROUP BY {alias if random.random() < 0.5 else '1'}"
    if having:
        sql += f" HAVING {having}"
    if order:
        sql += f" ORDER BY {order}"
    if limit:
        sql += f" LIMIT {limit}"
    return sql


def demo_random(rng: random.Random, n: int, dataset: str) -> list[Query]:
    out = []
    for i in range(n):
        random.seed(rng.random())
        key, alias = rng.choice(DEMO_KEYS)
        aggs = rng.sample(DEMO_AGGS, rng.choice((1, 2, 3)))
        where = rng.choice(DEMO_FILTERS)
        having = order = limit = None
        if key is not None and rng.random() < 0.25:
            having = rng.choice(("COUNT(*) > 50", "COUNT(*) >= 10", "SUM(tokens_in) > 100000", "AVG(tokens_in) < 600"))
        if key is not None and rng.random() < 0.5:
            order = rng.choice((f"{alias}", f"{aggs[0][1]} DESC", f"{alias} DESC", "1", f"{aggs[0][1]}, {alias}"))
            if rng.random() < 0.3:
                limit = rng.choice((1, 2, 3, 5))
        sql = _select(key, alias, aggs, where, having=having, order=order, limit=limit)
        out.append(Query(f"{dataset}-r{i:03d}", dataset, sql, category="random"))
    return out


def demo_targeted(dataset: str) -> list[Query]:
    d = dataset
    Q = lambda qid, sql, **kw: Query(f"{d}-{qid}", d, sql, category=kw.pop("category", "targeted"), **kw)  # noqa: E731
    return [
        # output column order and names
        Q("cols1", "SELECT COUNT(*) AS n, model FROM prompts GROUP BY model"),
        Q("cols2", "SELECT model AS m, COUNT(*) AS \"Total Count\", SUM(tokens_in) AS \"Sum In\" FROM prompts GROUP BY m"),
        Q("cols3", "SELECT AVG(tokens_in) AS a, model, COUNT(*) AS n, model AS m2 FROM prompts GROUP BY model"),
        Q("cols4", "SELECT COUNT(*) FROM prompts GROUP BY model"),
        Q("cols5", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY ALL ORDER BY model DESC"),
        Q("cols6", "SELECT COUNT(*) AS n, SUM(tokens_in) AS s, COUNT(*) AS n2 FROM prompts"),
        Q("cols7", "SELECT region, plan, COUNT(*) AS n FROM users GROUP BY plan, region ORDER BY region, plan"),
        # HAVING / ORDER BY / LIMIT
        Q("hav1", "SELECT model FROM prompts GROUP BY model HAVING COUNT(*) > 1000"),
        Q("hav2", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model HAVING n > 1000"),
        Q("hav3", "SELECT model, AVG(tokens_out) AS a FROM prompts GROUP BY model HAVING SUM(tokens_in) > 600000 ORDER BY a"),
        Q("hav4", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model HAVING model <> 'small'"),
        Q("hav5", "SELECT COUNT(*) AS n FROM prompts HAVING COUNT(*) > 10"),
        Q("ord1", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY COUNT(*) DESC LIMIT 2"),
        Q("ord2", "SELECT model, AVG(tokens_in) AS a FROM prompts GROUP BY model ORDER BY SUM(tokens_in) DESC"),
        Q("ord3", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY 2 LIMIT 1 OFFSET 1"),
        Q("ord4", "SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY y ORDER BY y DESC LIMIT 2"),
        Q("ord5", "SELECT model, date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY model, y ORDER BY model, y"),
        Q("ord6", "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan ORDER BY plan NULLS FIRST"),
        Q("ord7", "SELECT plan, AVG(age) AS a FROM users GROUP BY plan ORDER BY a DESC NULLS LAST"),
        # arithmetic over aggregates
        Q("ar1", "SELECT model, SUM(tokens_in) / COUNT(*) AS m, AVG(tokens_in) AS a FROM prompts GROUP BY model"),
        Q("ar2", "SELECT model, SUM(tokens_in) // COUNT(*) AS m FROM prompts GROUP BY model"),
        Q("ar3", "SELECT model, ROUND(100.0 * COUNT(*) / SUM(COUNT(*)) OVER (), 2) AS pct FROM prompts GROUP BY model"),
        Q("ar4", "SELECT model, COUNT(*) - COUNT(tokens_out) AS missing_out FROM prompts GROUP BY model"),
        Q("ar5", "SELECT model, SUM(tokens_out) / NULLIF(SUM(tokens_in), 0) AS ratio FROM prompts GROUP BY model"),
        Q("ar6", "SELECT model, SQRT(VAR_POP(tokens_in)) AS sd, STDDEV_POP(tokens_in) AS sd2 FROM prompts GROUP BY model"),
        Q("ar7", "SELECT model, RANK() OVER (ORDER BY COUNT(*) DESC) AS rk, COUNT(*) AS n FROM prompts GROUP BY model"),
        Q("ar8", "SELECT COUNT(*) FILTER (WHERE flagged) AS nf, COUNT(*) AS n FROM prompts"),
        Q("ar9", "SELECT model, CASE WHEN COUNT(*) > 1000 THEN 'big' ELSE 'small' END AS size FROM prompts GROUP BY model"),
        Q("ar10", "SELECT model, AVG(tokens_in) * COUNT(*) AS s FROM prompts GROUP BY model"),
        Q("ar11", "SELECT model, COUNT(*) AS n, LAG(COUNT(*)) OVER (ORDER BY model) AS prev FROM prompts GROUP BY model ORDER BY model"),
        # more shapes (second round)
        Q("x1", "SELECT model, COUNT(*) * 100.0 / SUM(COUNT(*)) OVER () AS pct FROM prompts GROUP BY model HAVING COUNT(*) > 1000 ORDER BY model"),
        Q("x2", "SELECT model, RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM prompts GROUP BY model ORDER BY model LIMIT 1"),
        Q("x3", "SELECT COUNT(*) AS model, model AS n FROM prompts GROUP BY model ORDER BY n"),
        Q("x4", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY model LIMIT 2 OFFSET 1"),
        Q("x5", "SELECT model, upper(model) AS u, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY u"),
        Q("x6", "SELECT COUNT(*) / 7 AS a, COUNT(*) // 7 AS b, COUNT(*) % 7 AS c, SUM(tokens_in) / 7 AS d FROM prompts"),
        Q("x7", "SELECT model, SUM(COUNT(*)) OVER (ORDER BY model) AS cum FROM prompts GROUP BY model ORDER BY model"),
        Q("x8", "SELECT COUNT(*) AS n FROM prompts WHERE model NOT IN ('small', NULL)"),
        Q("x9", "SELECT COUNT(*) AS n FROM prompts WHERE model IN ('small', NULL)"),
        Q("x10", "SELECT COUNT(*) AS n FROM prompts WHERE flagged IS NOT TRUE"),
        Q("x11", "SELECT COUNT(*) AS n FROM prompts WHERE (tokens_out > 1000) IS NULL"),
        Q("x12", "SELECT 1 AS one, 'x' AS s, COUNT(*) AS n FROM prompts"),
        Q("x13", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model HAVING model = 'large'"),
        Q("x14", "SELECT model, SUM(CASE WHEN model = 'small' THEN 1 END) AS s FROM prompts GROUP BY model ORDER BY model"),
        Q("x15", "SELECT model, COUNT(*) / NULLIF(COUNT(*) - COUNT(*), 0) AS r FROM prompts GROUP BY model"),
        Q("x16", "SELECT a, COUNT(*) AS n FROM (SELECT user_id, model FROM prompts) AS t(uid, a) GROUP BY a ORDER BY a", person="uid"),
        Q("x17", "SELECT COUNT(*) AS n FROM (SELECT user_id FROM prompts WHERE model = 'small' UNION ALL SELECT user_id FROM tickets WHERE category = 'bug') t", person="user_id"),
        Q("x18", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY n DESC LIMIT 0"),
        Q("x19", "SELECT CASE WHEN COUNT(*) > 0 THEN AVG(tokens_in) END AS a FROM prompts WHERE model = 'large'"),
        Q("x20", "SELECT model, AVG(CASE WHEN tokens_in > 500 THEN NULL ELSE tokens_in END) AS a FROM prompts GROUP BY model ORDER BY model"),
        Q("x21", "SELECT model AS k, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY k DESC"),
        Q("x22", "SELECT date_trunc('year', ts) AS y, model, COUNT(*) AS n FROM prompts GROUP BY 1, 2 HAVING COUNT(*) > 100 ORDER BY n DESC LIMIT 3"),
        Q("x23", "SELECT GREATEST(COUNT(*), 5000) AS g, LEAST(AVG(tokens_in), 100) AS l FROM prompts"),
        Q("x24", "SELECT model, COUNT(*) AS n, COUNT(*) AS n2 FROM prompts GROUP BY model ORDER BY n2 DESC, model"),
        Q("x25", "SELECT model, AVG(tokens_in) AS tokens_in FROM prompts GROUP BY model ORDER BY tokens_in"),
        Q("x26", "SELECT model, COUNT(*) AS n FROM prompts WHERE tokens_in > (100) AND (model = 'small' OR (model = 'large' AND flagged)) GROUP BY model"),
        Q("x27", "SELECT SUM(tokens_in) FILTER (WHERE model = 'small') AS s FROM prompts"),
        Q("x28", "SELECT u.region, p.model, COUNT(*) AS n FROM users u JOIN prompts p ON u.user_id = p.user_id WHERE u.age > 30 GROUP BY ALL ORDER BY 1, 2"),
        Q("x29", "SELECT region, COUNT(*) AS n FROM users WHERE region IN (SELECT region FROM regions WHERE name LIKE 'N%' OR name LIKE 'S%') GROUP BY region"),
        Q("x30", "SELECT AVG(tokens_in) AS a, SUM(tokens_in) / COUNT(tokens_in) AS b, SUM(tokens_in) * 1.0 / COUNT(*) AS c FROM prompts"),
        Q("x31", "SELECT COUNT(*) AS n FROM prompts WHERE NOT flagged AND NOT (model = 'small')"),
        Q("x32", "SELECT COUNT(*) AS n FROM prompts WHERE NOT (model = 'small' OR model = 'medium') AND user_id IN (SELECT user_id FROM users WHERE plan = 'free')"),
        Q("y1", "SELECT u.plan, COUNT(p.prompt_id) AS n, COUNT(*) AS r FROM users u LEFT JOIN prompts p ON p.user_id = u.user_id AND p.model = 'large' GROUP BY u.plan ORDER BY u.plan"),
        Q("y2", "SELECT r.name, COUNT(*) AS n FROM users u LEFT JOIN regions r ON r.region = u.region AND r.name = 'North' GROUP BY r.name ORDER BY r.name"),
        Q("y3", "SELECT COUNT(*) AS n FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t WHERE n > 10", no_caps=True),
        Q("y4", "SELECT u.age // 10 AS d, COUNT(*) AS n, AVG(p.tokens_in) AS a FROM prompts p JOIN users u USING (user_id) GROUP BY d ORDER BY d"),
        Q("y5", "SELECT u.plan, COUNT(DISTINCT u.user_id) AS people, COUNT(DISTINCT p.user_id) AS active FROM users u LEFT JOIN prompts p ON p.user_id = u.user_id GROUP BY u.plan ORDER BY u.plan"),
        Q("y6", "SELECT COUNT(*) AS n, COUNT(p.user_id) AS with_prompt FROM users u LEFT JOIN prompts p ON p.user_id = u.user_id"),
        Q("y7", "SELECT model, y, n, LAG(n) OVER (PARTITION BY model ORDER BY y) AS prev FROM (SELECT model, EXTRACT(year FROM ts) AS y, COUNT(*) AS n FROM prompts GROUP BY model, y) t ORDER BY model, y", caps_from="SELECT model, EXTRACT(year FROM ts) AS y, COUNT(*) AS n FROM prompts GROUP BY model, y"),
        Q("y8", "SELECT model, EXTRACT(year FROM ts) AS y, COUNT(*) AS n, LAG(COUNT(*)) OVER (PARTITION BY model ORDER BY EXTRACT(year FROM ts)) AS prev FROM prompts GROUP BY model, y ORDER BY model, y"),
        Q("y9", "SELECT k, COUNT(*) AS n FROM (SELECT user_id, tokens_in // 1000 AS k FROM prompts WHERE model <> 'small') s WHERE k > 0 OR k IS NULL GROUP BY k ORDER BY k"),
        Q("y10", "SELECT CASE WHEN latency_ms < 1000 THEN 'fast' WHEN latency_ms < 5000 THEN 'ok' END AS speed, COUNT(*) AS n FROM prompts GROUP BY speed ORDER BY speed"),
        Q("y11", "SELECT CASE WHEN latency_ms < 1000 THEN 'fast' WHEN latency_ms < 5000 THEN 'ok' END AS speed, COUNT(*) AS n FROM prompts GROUP BY speed ORDER BY speed DESC"),
        Q("y12", "SELECT u.region, AVG(t.resolution_minutes) AS a, COUNT(t.ticket_id) AS n FROM users u LEFT JOIN tickets t ON t.user_id = u.user_id GROUP BY u.region ORDER BY u.region"),
        Q("y13", "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE user_id IN (SELECT user_id FROM tickets WHERE category = 'bug')"),
        Q("y14", "SELECT COUNT(*) AS n FROM prompts WHERE user_id NOT IN (SELECT user_id FROM tickets)"),
        Q("y15", "SELECT model, COUNT(*) AS n FROM prompts p WHERE NOT EXISTS (SELECT 1 FROM tickets t WHERE t.user_id = p.user_id) GROUP BY model ORDER BY model"),
        Q("z1", "SELECT COUNT(*) AS n FROM prompts GROUP BY model HAVING model LIKE 's%'"),
        Q("z2", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model HAVING COUNT(DISTINCT user_id) > 200 ORDER BY model"),
        Q("z3", "SELECT MAX(n) AS mx, MIN(n) AS mn FROM (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) t", caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"),
        Q("z4", "SELECT * FROM (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY n DESC LIMIT 2) t ORDER BY model", caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"),
        Q("z5", "WITH a AS (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model), b AS (SELECT upper(model) AS m, 2 * n AS n2 FROM a) SELECT m, n2 FROM b ORDER BY m", caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"),
        Q("z6", "SELECT COUNT(*) AS n FROM prompts, users WHERE prompts.user_id = users.user_id AND users.plan = 'pro'"),
        Q("z7", "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON p.user_id = u.user_id AND u.age > 30"),
        Q("z8", "SELECT a.region, COUNT(*) AS n FROM users a JOIN users b USING (user_id) GROUP BY a.region ORDER BY a.region"),
        Q("z9", "SELECT COUNT(*) AS n FROM prompts p JOIN tickets t ON p.user_id = t.user_id"),
        Q("z10", "SELECT model, COUNT(*) AS n FROM prompts WHERE model = 'large' GROUP BY model"),
        Q("z11", "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n FROM prompts WHERE ts >= TIMESTAMP '2025-05-01' GROUP BY w ORDER BY w"),
        Q("z12", "SELECT COUNT(*) AS n, AVG(tokens_in) AS a FROM prompts WHERE model = 'small' AND model = 'large'"),
        Q("z13", "SELECT model, COUNT(*) AS n FROM prompts WHERE model = 'small' OR model = 'large' GROUP BY model ORDER BY model"),
        Q("z14", "SELECT plan, COUNT(*) AS n FROM users WHERE plan IS NULL OR plan = 'team' GROUP BY plan ORDER BY plan"),
        Q("z15", "SELECT COUNT(*) AS n FROM prompts WHERE CASE WHEN model = 'small' THEN tokens_in > 500 ELSE tokens_out > 500 END"),
        Q("z16", "SELECT COALESCE(CAST(flagged AS VARCHAR), 'unknown') AS f, COUNT(*) AS n FROM prompts GROUP BY f ORDER BY f"),
        Q("z17", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY ROLLUP (model)"),
        Q("z18", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY model NULLS FIRST"),
        Q("bi1", 'SELECT "main"."prompts"."model" AS "model", count(*) AS "count" FROM "main"."prompts" GROUP BY "main"."prompts"."model" ORDER BY "main"."prompts"."model" ASC', dialect="postgres",
          ref_sql='SELECT "main"."prompts"."model" AS "model", count(*) AS "count" FROM "main"."prompts" GROUP BY "main"."prompts"."model" ORDER BY "main"."prompts"."model" ASC'),
        Q("bi2", "SELECT DATE_TRUNC('YEAR', CAST(ts AS TIMESTAMP)) AS __timestamp, COUNT(*) AS count FROM dpsql.main.prompts WHERE ts >= CAST('2023-01-01 00:00:00.000000' AS TIMESTAMP) AND ts < CAST('2025-01-01 00:00:00.000000' AS TIMESTAMP) GROUP BY DATE_TRUNC('YEAR', CAST(ts AS TIMESTAMP)) ORDER BY count DESC LIMIT 10000", dialect="trino",
          ref_sql="SELECT DATE_TRUNC('YEAR', CAST(ts AS TIMESTAMP)) AS __timestamp, COUNT(*) AS count FROM main.prompts WHERE ts >= CAST('2023-01-01 00:00:00.000000' AS TIMESTAMP) AND ts < CAST('2025-01-01 00:00:00.000000' AS TIMESTAMP) GROUP BY DATE_TRUNC('YEAR', CAST(ts AS TIMESTAMP)) ORDER BY count DESC LIMIT 10000"),
        Q("bi3", "SELECT model AS model, SUM(tokens_out) AS \"SUM(tokens_out)\" FROM main.prompts WHERE flagged = false AND model IN ('small', 'large') AND ((latency_ms < 4000)) GROUP BY model ORDER BY \"SUM(tokens_out)\" DESC LIMIT 100"),
        Q("bi4", "SELECT date_trunc('month', ts) AS month, count(*) AS n FROM prompts WHERE ts >= TO_TIMESTAMP('2025-01-01 00:00:00', 'YYYY-MM-DD HH24:MI:SS') GROUP BY 1 ORDER BY 1", dialect="postgres",
          ref_sql="SELECT date_trunc('month', ts) AS month, count(*) AS n FROM prompts WHERE ts >= TIMESTAMP '2025-01-01 00:00:00' GROUP BY 1 ORDER BY 1"),
        Q("bi5", "SELECT plan, COUNT(*) AS n, AVG(age) AS avg_age FROM users GROUP BY plan ORDER BY n DESC", dialect="bigquery"),
        Q("bi6", "SELECT model, COUNT(*) AS n FROM prompts WHERE ts BETWEEN '2024-01-01' AND '2024-12-31' GROUP BY model ORDER BY n DESC", dialect="snowflake"),
        Q("z19", "SELECT y, n, SUM(n) OVER () AS tot FROM (SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY y) t WHERE n > 500 ORDER BY y", caps_from="SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY y"),
        Q("z20", "SELECT model, COUNT(*) AS n, COUNT(*) OVER () AS groups FROM prompts GROUP BY model HAVING model <> 'small' ORDER BY model"),
        Q("v1", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in IN ('100', '200', '300')"),
        Q("v2", "SELECT COUNT(*) AS n FROM prompts WHERE model LIKE 's_all'"),
        Q("v3", "SELECT COUNT(*) AS n FROM prompts WHERE regexp_matches(model, '^(s|l)')"),
        Q("v4", "SELECT COUNT(*) AS n FROM prompts WHERE substring(model, 1, 2) = 'sm' OR trim(upper(model)) = 'LARGE'"),
        Q("v5", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in BETWEEN 300 AND 100"),
        Q("v6", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in NOT BETWEEN 100 AND 300"),
        Q("v7", "SELECT COUNT(*) AS n FROM prompts WHERE model NOT LIKE 's%' AND NOT model IN ('large')"),
        Q("v8", "SELECT COUNT(*) AS n FROM prompts WHERE (tokens_in > 100) = true"),
        Q("v9", "SELECT COUNT(*) AS n FROM prompts WHERE COALESCE(tokens_out, 0) > 500"),
        Q("v10", "SELECT COUNT(*) AS n FROM prompts WHERE date_trunc('month', ts) = DATE '2024-03-01'"),
        Q("v11", "SELECT COUNT(*) AS n FROM prompts WHERE EXTRACT(year FROM ts) IN (2023, 2024)"),
        Q("v12", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > tokens_out"),
        Q("v13", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_out / NULLIF(tokens_in, 0) > 2"),
        Q("v14", "SELECT COUNT(*) AS n FROM prompts WHERE ts + INTERVAL 1 DAY > TIMESTAMP '2025-06-30'"),
        Q("v15", "SELECT COUNT(*) AS n FROM prompts WHERE NOT flagged OR flagged IS NULL"),
        Q("v16", "SELECT COUNT(*) AS n FROM prompts WHERE CAST(ts AS DATE) BETWEEN DATE '2024-01-01' AND DATE '2024-01-31'"),
        Q("v17", "SELECT COUNT(*) AS n FROM prompts WHERE model = ANY (['small', 'medium'])"),
        Q("v18", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in IS NOT DISTINCT FROM 250"),
        Q("v19", "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE NOT NOT (model = 'small')"),
        Q("v20", "SELECT COUNT(*) AS n FROM prompts WHERE - tokens_in < -3000"),
        Q("e1", "SELECT model, STDDEV_SAMP(tokens_in) / AVG(tokens_in) AS cv FROM prompts GROUP BY model ORDER BY model"),
        Q("e2", "SELECT COUNT(DISTINCT user_id) * 1.0 / COUNT(*) AS people_per_prompt FROM prompts"),
        Q("e3", "SELECT model, VAR_POP(tokens_in) + POWER(AVG(tokens_in), 2) AS mean_sq FROM prompts GROUP BY model ORDER BY model"),
        Q("e4", "SELECT CAST(AVG(tokens_in) AS INTEGER) AS a, AVG(tokens_in)::DECIMAL(10, 2) AS b, ROUND(SUM(tokens_in)::DOUBLE / COUNT(*), 2) AS c FROM prompts"),
        Q("e5", "SELECT model, SUM(tokens_out) * 100 / SUM(tokens_in + tokens_out) AS pct_out FROM prompts GROUP BY model ORDER BY model"),
        Q("e6", "SELECT model, COUNT(*) - LAG(COUNT(*), 1, 0) OVER (ORDER BY model) AS diff FROM prompts GROUP BY model ORDER BY model"),
        Q("e7", "SELECT date_trunc('year', ts) AS y, SUM(COUNT(*)) OVER (ORDER BY date_trunc('year', ts) ROWS UNBOUNDED PRECEDING) AS running FROM prompts GROUP BY y ORDER BY y"),
        Q("e8", "SELECT model, AVG(tokens_in) - AVG(AVG(tokens_in)) OVER () AS dev FROM prompts GROUP BY model ORDER BY model"),
        Q("e9", "SELECT model, NTILE(2) OVER (ORDER BY COUNT(*)) AS half, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY model"),
        Q("e10", "SELECT model, COALESCE(AVG(CASE WHEN flagged THEN tokens_in END), -1) AS a FROM prompts GROUP BY model ORDER BY model"),
        # NULL semantics (in the NULL copy these columns hold NULLs)
        Q("null1", "SELECT COUNT(*) AS n, COUNT(tokens_out) AS n_out, AVG(tokens_out) AS a FROM prompts"),
        Q("null2", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"),
        Q("null3", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_out > 500"),
        Q("null4", "SELECT COUNT(*) AS n FROM prompts WHERE NOT (tokens_out > 500)"),
        Q("null5", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_out IS DISTINCT FROM 500"),
        Q("null6", "SELECT SUM(tokens_out) AS s, AVG(latency_ms) AS a FROM prompts WHERE tokens_out IS NULL"),
        Q("null7", "SELECT flagged, COUNT(*) AS n FROM prompts GROUP BY flagged"),
        Q("null8", "SELECT plan, COUNT(*) AS n, AVG(age) AS a FROM users GROUP BY plan"),
        Q("null9", "SELECT COUNT(age) AS n, AVG(age) AS a, SUM(age) AS s FROM users"),
        Q("null10", "SELECT AVG(CASE WHEN model = 'small' THEN tokens_in END) AS a_small, COUNT(CASE WHEN model = 'small' THEN tokens_in END) AS n_small FROM prompts"),
        Q("null11", "SELECT model, SUM(CASE WHEN tokens_in > 1000 THEN tokens_in END) AS s FROM prompts GROUP BY model"),
        Q("null12", "SELECT CASE WHEN tokens_in > 1000 THEN 'long' END AS k, COUNT(*) AS n FROM prompts GROUP BY k"),
        Q("null13", "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE 1 = 0"),
        Q("null14", "SELECT AVG(tokens_in) AS a FROM prompts WHERE tokens_in > 5000"),
        Q("null15", "SELECT model, VAR_SAMP(tokens_in) AS v FROM prompts WHERE user_id = 3 GROUP BY model"),
        Q("null16", "SELECT COALESCE(model, 'none') AS m, COUNT(*) AS n FROM prompts GROUP BY m"),
        Q("null17", "SELECT COUNT(*) AS n FROM prompts WHERE model IS NULL"),
        Q("null18", "SELECT COUNT(DISTINCT model) AS k, COUNT(DISTINCT tokens_out) AS d FROM prompts"),
        Q("null19", "SELECT model, COUNT(DISTINCT user_id) AS people FROM prompts GROUP BY model"),
        Q("null20", "SELECT AVG(tokens_out) AS a, STDDEV_SAMP(tokens_out) AS sd FROM prompts WHERE model = 'large'"),
        # WHERE forms
        Q("wh1", "SELECT COUNT(*) AS n FROM prompts WHERE model IN ('small', 'medium') AND tokens_in BETWEEN 100 AND 400"),
        Q("wh2", "SELECT COUNT(*) AS n FROM prompts WHERE ts >= TIMESTAMP '2024-01-01' AND ts < TIMESTAMP '2024-02-01'"),
        Q("wh3", "SELECT COUNT(*) AS n FROM prompts WHERE ts::DATE = DATE '2024-03-15'"),
        Q("wh4", "SELECT COUNT(*) AS n FROM prompts WHERE model ILIKE 'SM%' OR model LIKE '%ge'"),
        Q("wh5", "SELECT COUNT(*) AS n FROM prompts WHERE length(model) = 5"),
        Q("wh6", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in % 2 = 0"),
        Q("wh7", "SELECT COUNT(*) AS n FROM prompts WHERE EXTRACT(hour FROM ts) BETWEEN 9 AND 17"),
        Q("wh8", "SELECT COUNT(*) AS n FROM prompts WHERE user_id IN (SELECT user_id FROM users WHERE plan = 'pro')"),
        Q("wh9", "SELECT COUNT(*) AS n FROM prompts WHERE user_id NOT IN (SELECT user_id FROM users WHERE age > 40)"),
        Q("wh10", "SELECT COUNT(*) AS n FROM prompts p WHERE EXISTS (SELECT 1 FROM tickets t WHERE t.user_id = p.user_id)"),
        Q("wh11", "SELECT COUNT(*) AS n FROM prompts WHERE date_diff('day', ts, TIMESTAMP '2025-07-01') < 30"),
        Q("wh12", "SELECT COUNT(*) AS n FROM prompts WHERE ts > '2025-01-01' AND model = 'large' OR flagged"),
        Q("wh13", "SELECT model, COUNT(*) AS n FROM prompts WHERE model IN ('small', 'large') GROUP BY model"),
        Q("wh14", "SELECT model, COUNT(*) AS n FROM prompts WHERE model <> 'small' GROUP BY model"),
        Q("wh15", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 100 AND tokens_in > 3000"),
        Q("wh17", "SELECT COUNT(*) AS n FROM prompts WHERE NOT (tokens_in < 100 OR model = 'large')"),
        Q("wh18", "SELECT model, COUNT(*) AS n FROM prompts WHERE NOT (model = 'small' AND tokens_in > 300) GROUP BY model"),
        Q("wh19", "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 100 AND NOT (flagged OR model = 'large')"),
        Q("wh20", "SELECT COUNT(*) AS n FROM prompts WHERE NOT (tokens_in BETWEEN 100 AND 300)"),
        Q("wh21", "SELECT COUNT(*) AS n FROM prompts WHERE NOT (NOT (model = 'small') OR tokens_in > 300)"),
        Q("wh16", "SELECT COUNT(*) AS n FROM prompts WHERE starts_with(model, 'me') OR contains(model, 'arg')"),
        # keys: expressions, two keys, private keys
        Q("key1", "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts WHERE ts >= DATE '2025-01-01' GROUP BY m ORDER BY m"),
        Q("key2", "SELECT EXTRACT(year FROM ts) AS y, model, COUNT(*) AS n, AVG(tokens_in) AS a FROM prompts GROUP BY y, model ORDER BY y, model"),
        Q("key3", "SELECT tokens_in // 500 * 500 AS bucket, COUNT(*) AS n FROM prompts GROUP BY bucket ORDER BY bucket"),
        Q("key4", "SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'mid' ELSE 'old' END AS band, COUNT(*) AS n, AVG(age) AS a FROM users GROUP BY band ORDER BY band"),
        Q("key5", "SELECT age // 10 * 10 AS decade, COUNT(*) AS n FROM users GROUP BY decade ORDER BY decade"),
        Q("key6", "SELECT signup_month, COUNT(*) AS n FROM users GROUP BY signup_month ORDER BY signup_month"),
        Q("key7", "SELECT year(signup_month) AS y, plan, COUNT(*) AS n FROM users GROUP BY ALL ORDER BY y, plan"),
        Q("key8", "SELECT upper(model) AS M, COUNT(*) AS n FROM prompts GROUP BY M"),
        Q("key9", "SELECT model || '-' || CAST(flagged AS VARCHAR) AS mk, COUNT(*) AS n FROM prompts GROUP BY mk"),
        Q("key10", "SELECT tokens_in > 1000 AS long_prompt, COUNT(*) AS n FROM prompts GROUP BY long_prompt"),
        Q("key11", "SELECT CAST(ts AS DATE) AS d, COUNT(*) AS n FROM prompts WHERE ts >= TIMESTAMP '2025-06-01' GROUP BY d ORDER BY n DESC, d LIMIT 5"),
        Q("key12", "SELECT age, COUNT(*) AS n FROM users GROUP BY age ORDER BY age"),
        Q("key13", "SELECT CASE model WHEN 'small' THEN 1 WHEN 'medium' THEN 2 ELSE 3 END AS tier, COUNT(*) AS n FROM prompts GROUP BY tier ORDER BY tier"),
        Q("key14", "SELECT date_part('year', signup_month) AS y, COUNT(*) AS n FROM users GROUP BY 1 ORDER BY 1"),
        # joins
        Q("join1", "SELECT u.region, COUNT(*) AS n, AVG(p.tokens_in) AS a FROM prompts p JOIN users u ON p.user_id = u.user_id GROUP BY u.region ORDER BY u.region"),
        Q("join2", "SELECT plan, model, COUNT(*) AS n FROM prompts JOIN users USING (user_id) GROUP BY plan, model ORDER BY plan, model"),
        Q("join3", "SELECT u.plan, COUNT(p.prompt_id) AS n, COUNT(*) AS rows_ FROM users u LEFT JOIN prompts p ON p.user_id = u.user_id GROUP BY u.plan ORDER BY u.plan"),
        Q("join4", "SELECT r.name, COUNT(*) AS n FROM users u JOIN regions r ON u.region = r.region GROUP BY r.name ORDER BY r.name"),
        Q("join5", "SELECT u.region, SUM(t.resolution_minutes) AS s, COUNT(*) AS n FROM tickets t JOIN users u ON t.user_id = u.user_id GROUP BY u.region"),
        Q("join6", "SELECT COUNT(*) AS n, AVG(u.age) AS a FROM prompts p JOIN users u ON p.user_id = u.user_id WHERE p.model = 'large' AND u.age > 30"),
        Q("join7", "SELECT u.region, COUNT(DISTINCT p.user_id) AS people FROM prompts p JOIN users u ON p.user_id = u.user_id GROUP BY u.region"),
        Q("join8", "SELECT u.plan, COUNT(*) AS n FROM users u LEFT JOIN tickets t ON t.user_id = u.user_id WHERE t.ticket_id IS NULL GROUP BY u.plan"),
        Q("join9", "SELECT r.name, COUNT(*) AS n, AVG(p.tokens_out) AS a FROM prompts p JOIN users u ON p.user_id = u.user_id JOIN regions r ON r.region = u.region GROUP BY r.name"),
        # subqueries in FROM, CTEs, UNION ALL
        Q("sub1", "SELECT k, COUNT(*) AS n FROM (SELECT user_id, tokens_in // 1000 AS k FROM prompts WHERE model = 'small') s GROUP BY k ORDER BY k"),
        Q("sub2", "SELECT AVG(t) AS a, SUM(t) AS s FROM (SELECT user_id, tokens_in + tokens_out AS t FROM prompts) s"),
        Q("sub3", "WITH big AS (SELECT * FROM prompts WHERE tokens_in > 500) SELECT model, COUNT(*) AS n FROM big GROUP BY model ORDER BY model"),
        Q("sub4", "WITH j AS (SELECT p.user_id, u.plan, p.tokens_in FROM prompts p JOIN users u ON p.user_id = u.user_id) SELECT plan, AVG(tokens_in) AS a FROM j GROUP BY plan"),
        Q("sub5", "SELECT src, COUNT(*) AS n, SUM(x) AS s FROM (SELECT user_id, 'prompt' AS src, tokens_in AS x FROM prompts UNION ALL SELECT user_id, 'ticket', resolution_minutes FROM tickets) t GROUP BY src ORDER BY src", person="user_id"),
        Q("sub6", "SELECT COUNT(*) AS n FROM (SELECT user_id, model FROM prompts UNION ALL SELECT user_id, category FROM tickets) t WHERE model IN ('small', 'bug')", person="user_id"),
        Q("sub7", "SELECT y, n FROM (SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY y) t WHERE n > 500 ORDER BY y", caps_from="SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY y"),
        Q("sub8", "SELECT AVG(s) AS avg_s, COUNT(*) AS groups FROM (SELECT model, SUM(tokens_in) AS s FROM prompts GROUP BY model) t", caps_from="SELECT model, SUM(tokens_in) AS s FROM prompts GROUP BY model"),
        Q("sub9", "WITH a AS (SELECT model, COUNT(*) AS n FROM prompts GROUP BY model) SELECT SUM(n) AS total FROM a", caps_from="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model"),
        Q("sub10", "SELECT x, COUNT(*) AS n FROM (SELECT user_id, CASE WHEN flagged THEN 'f' ELSE 'ok' END AS x FROM prompts) GROUP BY x ORDER BY x"),
        # per-person subqueries (their inner C is the whole row cap: ask for none)
        Q("pp1", "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t", no_caps=True),
        Q("pp2", "SELECT COUNT(*) AS heavy FROM (SELECT user_id FROM prompts GROUP BY user_id HAVING COUNT(*) > 5) t", no_caps=True),
        Q("pp3", "SELECT b, COUNT(*) AS people FROM (SELECT user_id, FLOOR(COUNT(*) / 5) AS b FROM prompts GROUP BY user_id) t GROUP BY b ORDER BY b", no_caps=True),
        Q("pp4", "SELECT plan, AVG(s) AS a FROM (SELECT p.user_id, u.plan, SUM(p.tokens_in) AS s FROM prompts p JOIN users u ON u.user_id = p.user_id GROUP BY p.user_id, u.plan) t GROUP BY plan ORDER BY plan", no_caps=True),
        Q("pp5", "SELECT AVG(m) AS a FROM (SELECT user_id, AVG(tokens_in) AS m FROM prompts GROUP BY user_id) t", no_caps=True),
        Q("pp6", "SELECT COUNT(*) AS people, AVG(k) AS avg_models FROM (SELECT user_id, COUNT(DISTINCT model) AS k FROM prompts GROUP BY user_id) t", no_caps=True),
        Q("pp7", "SELECT COUNT(*) AS people FROM (SELECT user_id FROM prompts GROUP BY user_id HAVING AVG(tokens_in) > 500) t", no_caps=True),
        Q("pp8", "SELECT AVG(s) AS a FROM (SELECT user_id, SUM(tokens_in) AS s FROM prompts WHERE model = 'small' GROUP BY user_id) t", no_caps=True),
        Q("pp9", "SELECT u.plan, AVG(t.n) AS a, COUNT(*) AS people FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t JOIN users u ON u.user_id = t.user_id GROUP BY u.plan ORDER BY u.plan", no_caps=True),
        Q("pp10", "SELECT CASE WHEN n >= 10 THEN 'heavy' ELSE 'light' END AS kind, COUNT(*) AS people, SUM(n) AS prompts FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t GROUP BY kind ORDER BY kind", no_caps=True),
        Q("pp11", "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(*) AS n FROM prompts WHERE NOT (model = 'small' OR flagged) GROUP BY user_id) t", no_caps=True),
        # COUNT(DISTINCT)
        Q("dist1", "SELECT COUNT(DISTINCT user_id) AS people, COUNT(*) AS n FROM prompts"),
        Q("dist2", "SELECT model, COUNT(DISTINCT date_trunc('month', ts)) AS months FROM prompts GROUP BY model"),
        Q("dist3", "SELECT COUNT(DISTINCT tokens_in) AS d FROM prompts WHERE model = 'large'"),
        Q("dist4", "SELECT SUM(DISTINCT tokens_in) AS s, AVG(DISTINCT tokens_in) AS a FROM prompts WHERE model = 'large'"),
        Q("dist5", "SELECT DISTINCT COUNT(*) AS n FROM prompts"),
        # users only
        Q("u1", "SELECT region, COUNT(*) AS n, AVG(age) AS a, STDDEV_SAMP(age) AS sd FROM users GROUP BY region ORDER BY region"),
        Q("u2", "SELECT COUNT(*) AS n, SUM(age) AS s, VAR_POP(age) AS v FROM users WHERE region IN ('north', 'west') AND age BETWEEN 20 AND 40"),
        Q("u3", "SELECT plan, region, COUNT(*) AS n FROM users GROUP BY ALL HAVING COUNT(*) > 20 ORDER BY n DESC"),
        Q("u4", "SELECT COUNT(*) AS n FROM users WHERE signup_month >= DATE '2024-01-01'"),
        # tickets
        Q("t1", "SELECT category, COUNT(*) AS n, AVG(resolution_minutes) AS a FROM tickets GROUP BY category ORDER BY category"),
        Q("t2", "SELECT date_trunc('year', opened_at) AS y, SUM(resolution_minutes) AS s FROM tickets GROUP BY y ORDER BY y"),
        # dialects (their DuckDB meaning given)
        Q("dia1", "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY n DESC LIMIT 2", dialect="postgres"),
        Q("dia2", "SELECT age / 10 AS d, COUNT(*) AS n FROM users GROUP BY age / 10 ORDER BY d", dialect="postgres",
          ref_sql="SELECT age // 10 AS d, COUNT(*) AS n FROM users GROUP BY age // 10 ORDER BY d"),
        Q("dia3", "SELECT TOP 2 model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY n DESC",
          ref_sql="SELECT model, COUNT(*) AS n FROM prompts GROUP BY model ORDER BY n DESC LIMIT 2"),
    ]


def demo_cuts(dataset: str) -> list[Query]:
    """Deliberate cap excess: the answer must say bounding changed it."""
    d = dataset
    return [
        Query(f"{d}-cut1", d, "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", category="cut", expect_cut=True, cap_delta=(1, 0)),
        Query(f"{d}-cut2", d, "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts", category="cut", expect_cut=True, cap_delta=(1, 0)),
        Query(f"{d}-cut3", d, "SELECT date_trunc('year', ts) AS y, COUNT(*) AS n FROM prompts GROUP BY y", category="cut", expect_cut=True, cap_delta=(0, 1)),
        Query(f"{d}-cut4", d, "SELECT model, AVG(tokens_in) AS a FROM prompts GROUP BY model", category="cut", expect_cut=True, caps=(10, 3)),
        Query(f"{d}-cut5", d, "SELECT region, COUNT(*) AS n FROM prompts JOIN users USING (user_id) GROUP BY region", category="cut", expect_cut=True, cap_delta=(1, 0)),
        Query(f"{d}-cut6", d, "SELECT COUNT(DISTINCT tokens_in) AS n FROM prompts", category="cut", expect_cut=True, cap_delta=(1, 0)),
        Query(f"{d}-cut7", d, "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", category="cut", expect_cut=True, caps=(119, 2)),
    ]


def tight_queries() -> list[Query]:
    """demo_tight: tokens_in declared within [0, 1000]; the data goes to 4000."""
    d = "demo_tight"
    return [
        Query(f"{d}-c1", d, "SELECT model, SUM(tokens_in) AS s FROM prompts GROUP BY model", category="clamp", expect_cut=True, cut_sql="SELECT COUNT(*) FROM (SELECT DISTINCT user_id, model FROM prompts WHERE tokens_in > 1000)"),
        Query(f"{d}-c2", d, "SELECT AVG(tokens_in) AS a FROM prompts", category="clamp", expect_cut=True, cut_sql="SELECT COUNT(DISTINCT user_id) FROM prompts WHERE tokens_in > 1000"),
        Query(f"{d}-c3", d, "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", category="clamp"),
        Query(f"{d}-c4", d, "SELECT SUM(tokens_in) AS s FROM prompts WHERE tokens_in <= 1000", category="clamp"),
        Query(f"{d}-c5", d, "SELECT SUM(CASE WHEN tokens_in <= 1000 THEN tokens_in ELSE 0 END) AS s FROM prompts", category="clamp"),
        Query(f"{d}-c6", d, "SELECT COUNT(tokens_in) AS n FROM prompts", category="clamp"),
        Query(f"{d}-c7", d, "SELECT SUM(LEAST(tokens_in, 1000)) AS s FROM prompts", category="clamp"),
    ]


# ----------------------------------------------------------------------------- PUMS
PUMS_AGGS = [
    ("COUNT(*)", "n"),
    ("SUM(income)", "s_inc"),
    ("AVG(income)", "avg_inc"),
    ("AVG(age)", "avg_age"),
    ("VAR_POP(age)", "var_age"),
    ("STDDEV_SAMP(income)", "sd_inc"),
    ("COUNT(DISTINCT pid)", "people"),
    ("SUM(CASE WHEN married = 1 THEN 1 ELSE 0 END)", "n_married"),
    ("AVG(CASE WHEN sex = 1 THEN income END)", "avg_inc_f"),
    ("SUM(income) / COUNT(*)", "mean_inc"),
    ("AVG(income / 1000)", "avg_k"),
    ("COUNT(CASE WHEN income > 50000 THEN 1 END)", "n_rich"),
    ("SUM(age * educ)", "s_ae"),
    ("STDDEV_POP(age)", "sdp_age"),
    ("VAR_SAMP(educ)", "vs_educ"),
    ("AVG(married)", "p_married"),
]
PUMS_KEYS = [
    (None, None),
    ("sex", "sex"),
    ("married", "married"),
    ("educ", "educ"),
    ("race", "race"),
    ("CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'mid' ELSE 'old' END", "band"),
    ("age // 10", "dec"),
    ("income > 30000", "high"),
    ("FLOOR(income / 50000) * 50000", "bracket"),
]
PUMS_FILTERS = [
    None,
    "age > 30",
    "sex = 1 AND married = 0",
    "educ IN (9, 10, 11)",
    "income BETWEEN 10000 AND 60000",
    "(race = 1 OR income > 100000)",
    "NOT (age < 25)",
    "income = 0",
    "age + educ > 50",
]


def pums_random(rng: random.Random, n: int) -> list[Query]:
    out = []
    for i in range(n):
        random.seed(rng.random())
        key, alias = rng.choice(PUMS_KEYS)
        aggs = rng.sample(PUMS_AGGS, rng.choice((1, 2, 3)))
        where = rng.choice(PUMS_FILTERS)
        having = order = limit = None
        if key is not None and rng.random() < 0.25:
            having = rng.choice(("COUNT(*) > 20", "AVG(income) > 20000", "SUM(age) > 2000"))
        if key is not None and rng.random() < 0.5:
            order = rng.choice((alias, f"{aggs[0][1]} DESC", f"{alias} DESC"))
            if rng.random() < 0.3:
                limit = rng.choice((1, 3, 5))
        sql = _select(key, alias, aggs, where, having=having, order=order, limit=limit, table="PUMS.PUMS")
        out.append(Query(f"pums-r{i:03d}", "pums", sql, category="random"))
    return out


def pums_targeted() -> list[Query]:
    Q = lambda qid, sql, **kw: Query(f"pums-{qid}", "pums", sql, category="targeted", **kw)  # noqa: E731
    return [
        Q("t1", "SELECT sex, married, COUNT(*) AS n, AVG(income) AS a FROM PUMS.PUMS GROUP BY sex, married ORDER BY sex, married"),
        Q("t2", "SELECT educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ HAVING COUNT(*) > 50 ORDER BY n DESC"),
        Q("t3", "SELECT race, AVG(age) AS a FROM PUMS.PUMS GROUP BY race ORDER BY race"),
        Q("t4", "SELECT COUNT(*) AS n FROM PUMS.PUMS WHERE income IS NULL"),
        Q("t5", "SELECT sex, SUM(income) / SUM(age) AS r FROM PUMS.PUMS GROUP BY sex"),
        Q("t6", "WITH t AS (SELECT pid, age, income FROM PUMS.PUMS WHERE sex = 0) SELECT AVG(income) AS a, COUNT(*) AS n FROM t"),
        Q("t7", "SELECT COUNT(*) AS n FROM PUMS.PUMS p WHERE p.age BETWEEN 20 AND 29"),
        Q("t8", "SELECT married, AVG(income) AS a, AVG(CASE WHEN income > 0 THEN income END) AS a_pos FROM PUMS.PUMS GROUP BY married"),
        Q("t9", "SELECT sex, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS pct FROM PUMS.PUMS GROUP BY sex ORDER BY sex"),
        Q("t10", "SELECT AVG(s) AS a FROM (SELECT educ, SUM(income) AS s FROM PUMS.PUMS GROUP BY educ) t"),
        Q("t11", "SELECT sex, COUNT(*) AS n FROM PUMS.PUMS WHERE sex IN (1) GROUP BY sex"),
        Q("t12", "SELECT educ, COUNT(*) AS n FROM PUMS.PUMS WHERE educ > 12 GROUP BY educ ORDER BY educ"),
        Q("t13", "SELECT age, COUNT(*) AS n FROM PUMS.PUMS WHERE age BETWEEN 30 AND 39 GROUP BY age ORDER BY age"),
        Q("t14", "SELECT CASE WHEN income > 50000 THEN 'high' END AS k, COUNT(*) AS n FROM PUMS.PUMS GROUP BY k ORDER BY k"),
        Q("t15", "SELECT sex, VAR_SAMP(income) AS v, STDDEV_SAMP(income) AS sd FROM PUMS.PUMS WHERE educ = 16 GROUP BY sex"),
        Q("t16", "SELECT ROUND(AVG(income), -3) AS a, ROUND(AVG(age)) AS b FROM PUMS.PUMS"),
        Q("t17", "SELECT COUNT(*) AS n FROM (SELECT pid, age FROM PUMS.PUMS UNION ALL SELECT pid, age FROM PUMS.PUMS) t WHERE age > 50", person="pid", expect_cut=True, exact_cut=322),
        Q("t18", "SELECT sex, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex ORDER BY n DESC LIMIT 1"),
        Q("t19", "SELECT married, sex, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex, married ORDER BY n"),
        Q("t20", "SELECT COUNT(*) AS n, COUNT(DISTINCT educ) AS k FROM PUMS.PUMS"),
    ]


def pums_cuts() -> list[Query]:
    """pums_tight: income declared within [0, 100000]; some incomes are larger."""
    d = "pums_tight"
    return [
        Query(f"{d}-c1", d, "SELECT sex, SUM(income) AS s FROM PUMS.PUMS GROUP BY sex", category="clamp", expect_cut=True, cut_sql="SELECT COUNT(*) FROM PUMS.PUMS WHERE income > 100000"),
        Query(f"{d}-c2", d, "SELECT AVG(income) AS a FROM PUMS.PUMS", category="clamp", expect_cut=True, cut_sql="SELECT COUNT(*) FROM PUMS.PUMS WHERE income > 100000"),
        Query(f"{d}-c3", d, "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM PUMS.PUMS GROUP BY sex", category="clamp"),
        Query(f"{d}-c4", d, "SELECT SUM(income) AS s FROM PUMS.PUMS WHERE income <= 100000", category="clamp"),
        Query(f"{d}-c5", d, "SELECT AVG(CASE WHEN income <= 100000 THEN income END) AS a FROM PUMS.PUMS", category="clamp"),
        Query(f"{d}-c6", d, "SELECT SUM(CASE WHEN income > 100000 THEN 1 ELSE 0 END) AS n_high, COUNT(CASE WHEN income > 100000 THEN 1 END) AS n_high2 FROM PUMS.PUMS", category="clamp"),
        Query(f"{d}-c7", d, "SELECT AVG(CASE WHEN income > 100000 THEN age END) AS a FROM PUMS.PUMS", category="clamp"),
        Query(f"{d}-c8", d, "SELECT sex, SUM(CASE WHEN income > 100000 THEN age ELSE 0 END) AS s FROM PUMS.PUMS GROUP BY sex", category="clamp"),
    ]


def acceptance() -> list[Query]:
    data = tomllib.loads((MAIN / "bench" / "acceptance_queries.toml").read_text())
    out = []
    for q in data["query"]:
        if q["suite"] == "google":
            continue  # BigQuery's DP syntax carries its own ε
        out.append(Query(f"acc-{q['id']}", "pums", q["sql"], category="acceptance"))
    return out


def public_queries() -> list[Query]:
    d = "demo"
    return [
        Query(f"{d}-pub1", d, "SELECT region, name FROM regions ORDER BY region", category="public"),
        Query(f"{d}-pub2", d, "SELECT COUNT(*) AS n, MIN(name) AS m FROM regions", category="public"),
        Query(f"{d}-pub3", d, "SELECT 1 + 1 AS two, 2 * PI() AS tau", category="public"),
    ]


def laplace_queries(rng: random.Random) -> list[Query]:
    out = []
    for q in demo_targeted("demo")[::4] + pums_targeted()[::2]:
        ds = q.dataset + "_laplace"
        out.append(dataclasses.replace(q, qid=q.qid.replace(q.dataset, ds, 1), dataset=ds, category="laplace"))
    return out


def corpus(seed: int = 20261205, *, n_demo: int = 120, n_pums: int = 60) -> list[Query]:
    rng = random.Random(seed)
    qs: list[Query] = []
    qs += demo_targeted("demo") + demo_cuts("demo") + demo_random(rng, n_demo, "demo")
    qs += demo_targeted("demo_nulls") + demo_random(rng, n_demo // 2, "demo_nulls")
    qs += tight_queries()
    qs += pums_targeted() + pums_random(rng, n_pums) + pums_cuts() + acceptance()
    qs += public_queries() + laplace_queries(rng)
    return qs
