"""Adversarial queries for the neighbour harness (issue #10 §4), with what each attacks.

Each entry is a (name, SQL template) pair. Templates may use placeholders the test fills
from the neighbouring databases (:func:`demo_facts`, :func:`pums_facts`):

* ``{pid}`` — the person D' lacks (filters that single one person out), ``{region}``
  their region (queries pinned to their partition);
* ``{sum_mult}`` — a multiplier M that puts an exact integer sum on one side of 2^63 on
  D and on the other on D' (so a cast to int64 after the charge fails on one only);
* ``{var_mult}`` — the same for the centred sum of squares of a variance.

The classes map to issue #10: §1 failures after the charge (huge multipliers, extreme
literals, divisions, float edges), §2 a person in more groups than the sensitivity
assumes (join chains, NULL tricks, CASE/COALESCE keys), §3 self-joins that turn one
person's rows into run time. Queries that must be answered soundly (regressions and
controls) are mixed in: a corpus that only holds failing queries proves nothing about
false alarms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.hash_collisions import colliding_texts

INT64_LIMIT = 2**63
EXACT_INTEGER = 2**53  # above this the engine treats an integer argument as a float
PROMPTS_MAX_ROWS = 10  # the demo policy's max_rows_per_group for prompts


# 40 texts with one DuckDB hash (no braces or quotes, so that they survive the template)
_COLLIDING_LIST = ", ".join(
    f"'{t}'" for t in [t for t in colliding_texts(400) if not set(t) & set("{}'")][:40]
)


@dataclass(frozen=True)
class Entry:
    name: str
    sql: str  # a template: see the module docstring for its placeholders
    attacks: str  # what it attacks (and the issue section), or "control"

    def render(self, facts: dict[str, Any]) -> str:
        return self.sql.format(**facts)


def _chain(m: int) -> str:
    """Issue #10 §2, chained m times: each LEFT JOIN with an extra ON condition makes the
    matched users row the person's on some of their rows and NULL on others; the second
    join, on the person id alone, is then trusted as 'one row per person', and the
    CASE key over it puts one person into 2^m groups of a public domain."""
    conditions = (
        "p.tokens_in > 250",
        "p.tokens_out > 400",
        "p.latency_ms > 4000",
        "p.model = 'small'",
        "p.prompt_id % 2 = 0",
        "p.ts > TIMESTAMP '2024-06-01'",
    )
    joins, keys = [], []
    for i in range(m):
        joins.append(
            f"LEFT JOIN users t{i} ON t{i}.user_id = p.user_id AND {conditions[i]} "
            f"LEFT JOIN users u{i} ON u{i}.user_id = t{i}.user_id"
        )
        keys.append(f"CASE WHEN u{i}.region IS NULL THEN 'a' ELSE 'b' END AS g{i}")
    names = ", ".join(f"g{i}" for i in range(m))
    return (
        f"SELECT {', '.join(keys)}, COUNT(*) AS n FROM prompts p {' '.join(joins)} GROUP BY {names}"
    )


def _self_join(k: int, *, pinned: bool, mix: str = "tokens_in") -> str:
    """Issue #10 §3: a k-way self-join of prompts on the person id multiplies one
    person's n rows into n^k before the per-person row cap; an expression mixing the
    copies keeps DuckDB from aggregating before the join."""
    joins = " ".join(f"JOIN prompts p{i} ON p{i}.user_id = p1.user_id" for i in range(2, k + 1))
    mixed = " + ".join(f"p{i}.{mix}" for i in range(1, k + 1))
    where = f"p1.user_id = {{pid}} AND {mixed} > 10" if pinned else f"{mixed} > 10"
    return f"SELECT COUNT(*) AS n FROM prompts p1 {joins} WHERE {where}"


# The key-join rule (proxy/rewrite/key_join.py): a person-constant key of users joined
# after the per-person aggregation of the anchor (pk = users alone, MIN per person).
# Each entry is planned in that form (tests/reliability/test_key_join_neighbours.py
# checks it); they run on D and D' here and on data with orphans and NULLs there.
KEY_JOIN: tuple[Entry, ...] = (
    Entry(
        "key_join_region",
        "SELECT u.region, COUNT(*) AS n, SUM(p.tokens_in) AS s FROM prompts p "
        "JOIN users u ON u.user_id = p.user_id GROUP BY u.region",
        "key join: the public key core (count and sum by the person's region)",
    ),
    Entry(
        "key_join_using_two_keys",
        "SELECT region, plan, AVG(latency_ms) AS l, COUNT(*) AS n FROM prompts "
        "JOIN users USING (user_id) GROUP BY region, plan",
        "key join: two keys of the key table, USING, an average",
    ),
    Entry(
        "key_join_single_out",
        "SELECT u.region, COUNT(*) AS n, SUM(p.tokens_out) AS s FROM prompts p "
        "JOIN users u ON u.user_id = p.user_id WHERE p.user_id = {pid} GROUP BY u.region",
        "key join: pp holds the removed person alone, pk every person",
    ),
    Entry(
        "key_join_rare_rows",
        "SELECT upper(u.plan) AS k, COUNT(*) AS n, SUM(p.tokens_in) AS s FROM prompts p "
        "JOIN users u ON p.user_id = u.user_id WHERE p.tokens_in > 2000 GROUP BY 1",
        "key join: pk holds every person, pp only those with a row past the WHERE",
    ),
    Entry(
        "key_join_tickets",
        "SELECT u.plan, COUNT(*) AS n, AVG(t.resolution_minutes) AS m FROM tickets t "
        "JOIN users u ON u.user_id = t.user_id GROUP BY u.plan",
        "key join: an anchor most people have no row in",
    ),
    Entry(
        "key_join_partial_key",
        "SELECT 1 / (u.age - 30) AS k, CAST(u.region AS INTEGER) AS r, COUNT(*) AS n "
        "FROM prompts p JOIN users u ON u.user_id = p.user_id WHERE p.model = 'large' "
        "GROUP BY 1, 2",
        "key join: partial key expressions now evaluated on users rows without a prompt",
    ),
)

DEMO: tuple[Entry, ...] = (
    # --- §2: join chains and groups made by joins --------------------------------------
    Entry("chain_1", _chain(1), "§2 the issue's query: one person in 2 CASE groups"),
    Entry("chain_2", _chain(2), "§2 chained twice: 4 groups"),
    Entry("chain_3", _chain(3), "§2 chained 3 times: 8 groups"),
    Entry("chain_4", _chain(4), "§2 chained 4 times: 16 groups"),
    Entry("chain_5", _chain(5), "§2 chained 5 times: 32 groups"),
    Entry("chain_6", _chain(6), "§2 chained 6 times: 64 groups"),
    Entry(
        "chain_sum",
        "SELECT CASE WHEN u.region IS NULL THEN 'a' ELSE 'b' END AS g, SUM(p.tokens_in) AS s, "
        "AVG(p.latency_ms) AS l FROM prompts p "
        "LEFT JOIN users t ON t.user_id = p.user_id AND p.tokens_in > 1000 "
        "LEFT JOIN users u ON u.user_id = t.user_id GROUP BY g",
        "§2 the chain with SUM and AVG: the sensitivity of sums splits the same way",
    ),
    Entry(
        "chain_coalesce_plan",
        "SELECT COALESCE(u.plan, 'nobody') AS g, COUNT(*) AS n FROM prompts p "
        "LEFT JOIN users t ON t.user_id = p.user_id AND p.tokens_in > 300 "
        "LEFT JOIN users u ON u.user_id = t.user_id GROUP BY g",
        "§2 COALESCE over the NULL-producing chain: the person's plan and 'nobody'",
    ),
    Entry(
        "chain_plain_key",
        "SELECT u.plan AS g, COUNT(*) AS n FROM prompts p "
        "LEFT JOIN users t ON t.user_id = p.user_id AND p.tokens_out > 400 "
        "LEFT JOIN users u ON u.user_id = t.user_id GROUP BY u.plan",
        "§2 the chain with the joined column itself as key (NULL is a group)",
    ),
    Entry(
        "chain_region_pinned",
        "SELECT CASE WHEN u.plan IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM prompts p JOIN users r ON r.user_id = p.user_id "
        "LEFT JOIN users t ON t.user_id = p.user_id AND p.tokens_in > 1000 "
        "LEFT JOIN users u ON u.user_id = t.user_id WHERE r.region = '{region}' GROUP BY g",
        "§2 the chain inside a partition-pinned query",
    ),
    Entry(
        "chain_via_inner",
        "SELECT CASE WHEN v.region IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM prompts p JOIN users u ON u.user_id = p.user_id "
        "LEFT JOIN users t ON t.user_id = u.user_id AND p.tokens_in > 1000 "
        "LEFT JOIN users v ON v.user_id = t.user_id GROUP BY g",
        "§2 the chain reached through an INNER join to users first",
    ),
    Entry(
        "chain_key_on_conditional",
        "SELECT CASE WHEN t.region IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM prompts p LEFT JOIN users t ON t.user_id = p.user_id AND p.tokens_in > 1000 "
        "GROUP BY g",
        "§2 control (former defect): the key on the conditional LEFT JOIN itself gets K",
    ),
    Entry(
        "chain_condition_on_users",
        "SELECT CASE WHEN u.region IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM prompts p LEFT JOIN users t ON t.user_id = p.user_id AND t.age > 40 "
        "LEFT JOIN users u ON u.user_id = t.user_id GROUP BY g",
        "§2 control: a condition on the users side is per person, so no split",
    ),
    Entry(
        "chain_from_users",
        "SELECT CASE WHEN v.region IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM users u LEFT JOIN prompts p ON p.user_id = u.user_id AND p.tokens_in > 1000 "
        "LEFT JOIN users v ON v.user_id = p.user_id GROUP BY g",
        "§2 the chain with the one-row table first: a person with no big prompt is NULL",
    ),
    Entry(
        "chain_through_tickets",
        "SELECT CASE WHEN u.region IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM prompts p LEFT JOIN tickets k ON k.user_id = p.user_id AND p.tokens_in > 500 "
        "LEFT JOIN users u ON u.user_id = k.user_id GROUP BY g",
        "§2 the chain through a multi-row table (tickets) instead of users",
    ),
    Entry(
        "chain_count_distinct",
        "SELECT CASE WHEN u.region IS NULL THEN 'a' ELSE 'b' END AS g, "
        "COUNT(DISTINCT p.user_id) AS people FROM prompts p "
        "LEFT JOIN users t ON t.user_id = p.user_id AND p.tokens_in > 1000 "
        "LEFT JOIN users u ON u.user_id = t.user_id GROUP BY g",
        "§2 counting people along the chain: one person counted in both groups",
    ),
    Entry(
        "null_count_joined",
        "SELECT COUNT(u.age) AS n, SUM(COALESCE(u.age, 100)) AS s FROM prompts p "
        "LEFT JOIN users u ON u.user_id = p.user_id AND p.tokens_in > 1000",
        "NULL trick: COUNT and COALESCE over a conditionally joined column (no keys)",
    ),
    Entry(
        "null_key_case",
        "SELECT CASE WHEN u.region = 'north' THEN NULL ELSE u.region END AS g, "
        "COUNT(*) AS n FROM prompts p JOIN users u ON u.user_id = p.user_id GROUP BY g",
        "NULL trick: a CASE makes a NULL group out of a public domain value",
    ),
    Entry(
        "case_key_multirow",
        "SELECT CASE WHEN tokens_in > 1000 THEN 'big' ELSE 'small' END AS g, COUNT(*) AS n, "
        "SUM(tokens_out) AS s FROM prompts GROUP BY g",
        "CASE-created groups from a multi-row table: one person in both (K = 4)",
    ),
    Entry(
        "case_key_two_tables",
        "SELECT CASE WHEN u.age > 50 THEN 'old' ELSE 'young' END AS a, p.model, COUNT(*) AS n "
        "FROM prompts p JOIN users u ON u.user_id = p.user_id GROUP BY a, p.model",
        "control: a per-person key crossed with a per-row key",
    ),
    Entry(
        "coalesce_tickets_key",
        "SELECT COALESCE(k.category, 'none') AS g, COUNT(*) AS n FROM prompts p "
        "LEFT JOIN tickets k ON k.user_id = p.user_id GROUP BY g",
        "COALESCE key over a LEFT JOIN to a multi-row table (fan-out of prompts x tickets)",
    ),
    Entry(
        "tickets_categories",
        "SELECT category, COUNT(*) AS n, AVG(resolution_minutes) AS m FROM tickets "
        "GROUP BY category",
        "control: K = 2, C = 3 on tickets",
    ),
    # --- §3: self-joins -------------------------------------------------------------------
    Entry(
        "self_join_2",
        "SELECT COUNT(*) AS n, SUM(p1.tokens_in) AS s FROM prompts p1 "
        "JOIN prompts p2 ON p2.user_id = p1.user_id WHERE p1.tokens_in + p2.tokens_out > 500",
        "§3 2-way self-join, copies mixed in WHERE",
    ),
    Entry(
        "self_join_2_keys",
        "SELECT p1.model AS a, p2.model AS b, COUNT(*) AS n FROM prompts p1 "
        "JOIN prompts p2 ON p2.user_id = p1.user_id GROUP BY a, b",
        "§2/§3 keys taken from both copies: one person in up to 9 groups",
    ),
    Entry(
        "self_join_2_product",
        "SELECT SUM(p1.tokens_in * p2.tokens_out) AS s FROM prompts p1 "
        "JOIN prompts p2 ON p2.user_id = p1.user_id",
        "§3 a product of the copies: bounds multiply",
    ),
    Entry("self_join_3", _self_join(3, pinned=False), "§3 3-way self-join, whole table"),
    Entry("self_join_3_pinned", _self_join(3, pinned=True), "§3 the issue's k = 3 on one person"),
    Entry("self_join_4_pinned", _self_join(4, pinned=True), "§3 the issue's k = 4: a timeout"),
    Entry(
        "self_join_5_pinned",
        _self_join(5, pinned=True, mix="latency_ms"),
        "§3 k = 5 on one person",
    ),
    Entry(
        "string_blowup_pinned",
        "WITH t0 AS (SELECT user_id, model || model || model || model AS m FROM prompts), "
        "t1 AS (SELECT user_id, replace(m, 'a', m) AS m FROM t0), "
        "t2 AS (SELECT user_id, replace(m, 'a', m) AS m FROM t1), "
        "t3 AS (SELECT user_id, replace(m, 'a', m) AS m FROM t2) "
        "SELECT COUNT(*) AS n FROM t3 WHERE user_id = {pid} AND length(m) > 3",
        "§3 nested REPLACE squares a value's length per level: seconds on one person's rows",
    ),
    Entry(
        "string_growth_pinned",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "contains(replace(replace(replace(model, 'a', 'aaaa'), 'a', 'aaaa'), 'a', 'aa'), 'q')",
        "§3 string growth just within the limit, on one person (the residual timing)",
    ),
    Entry(
        "self_join_users",
        "SELECT a.region, COUNT(*) AS n FROM users a JOIN users b ON b.user_id = a.user_id "
        "GROUP BY a.region",
        "control: a self-join of the one-row table",
    ),
    # --- §1: huge multipliers, extreme literals, divisions, float edges --------------------
    Entry(
        "sum_issue_multiplier",
        "SELECT SUM(age * 45950061461170) AS s FROM users",
        "§1 the issue's multiplier (crosses 2^63 on the 5,000-person demo)",
    ),
    Entry(
        "sum_straddles_int64",
        "SELECT SUM(LEAST(tokens_in, 1) * {sum_mult}) AS s FROM prompts",
        "§1 an exact integer sum at 2^63 on D and below it on D'",
    ),
    Entry(
        "sum_overflows_both",
        "SELECT SUM(LEAST(tokens_in, 1) * 9000000000000000) AS s FROM prompts",
        "§1 an exact integer sum far above 2^63 on both sides",
    ),
    Entry(
        "var_issue_multiplier",
        "SELECT VAR_POP(age * 2000000) AS v FROM users",
        "§1 the issue's variance (centred squares cross 2^63 on the 5,000-person demo)",
    ),
    Entry(
        "var_straddles_int64",
        "SELECT VAR_POP(age * {var_mult}) AS v FROM users",
        "§1 centred squares at 2^63 on D and below it on D'",
    ),
    Entry(
        "stddev_huge_both",
        "SELECT STDDEV(age * 24000000) AS v, AVG(age * 24000000) AS m FROM users",
        "§1 centred squares above 2^63 on both sides",
    ),
    Entry(
        "avg_times_1e300",
        "SELECT AVG(tokens_in * 1e300) AS a FROM prompts",
        "§1 float overflow in a centred sum",
    ),
    Entry(
        "var_float_huge",
        "SELECT VAR_SAMP(latency_ms * 1e12) AS v FROM prompts",
        "§1 float squares near the supported limit",
    ),
    Entry(
        "sum_max_bigint_literal",
        "SELECT SUM(9223372036854775807) AS s FROM users",
        "§1 an extreme literal as the argument",
    ),
    Entry(
        "count_times_max_bigint",
        "SELECT COUNT(*) * 9223372036854775807 AS n FROM users",
        "§1 the outer layer overflows on the released value",
    ),
    Entry(
        "sum_negative_shift",
        "SELECT SUM(age - 1000000000000000) AS s, SUM(-age) AS t FROM users",
        "§1 negative sums far from zero",
    ),
    Entry(
        "divisions",
        "SELECT SUM(tokens_in / 3) AS a, AVG(tokens_in / 7.0) AS b, "
        "VAR_POP(latency_ms / -1000) AS c FROM prompts",
        "divisions by literals: integer, float and negative divisors",
    ),
    Entry(
        "float_edges",
        "SELECT SUM(0.1 * age) AS a, STDDEV_POP(ROUND(age * 0.001, 3)) AS b, "
        "AVG(age * 1e-300) AS c FROM users",
        "float edges: non-representable steps, rounding, subnormal-scale values",
    ),
    Entry(
        "outer_divides_by_noise",
        "SELECT SUM(tokens_in) / COUNT(*) AS mean, COUNT(*) / (COUNT(*) - COUNT(*)) AS z "
        "FROM prompts",
        "§1 the outer layer divides by zero and by a noisy value",
    ),
    Entry(
        "outer_limit_overflow",
        "SELECT model AS m, COUNT(*) AS n FROM prompts GROUP BY model HAVING n > 5 "
        "ORDER BY n DESC LIMIT 9223372036854775808",
        "§1 (found by the neighbour fuzz) a LIMIT beyond BIGINT fails in the outer layer "
        "after the charge",
    ),
    Entry(
        "tuple_key",
        "SELECT (model, 1, 1) AS initial, COUNT(*) FROM prompts GROUP BY 1",
        "(found by the neighbour fuzz) a row-constructor key: must be refused, not crash",
    ),
    # --- partition-pinned WHERE clauses ----------------------------------------------------
    Entry(
        "pinned_region",
        "SELECT plan, COUNT(*) AS n, AVG(age) AS a FROM users WHERE region = '{region}' "
        "GROUP BY plan",
        "a query pinned to the removed person's partition",
    ),
    Entry(
        "pinned_join",
        "SELECT p.model, COUNT(*) AS n FROM prompts p JOIN users u ON u.user_id = p.user_id "
        "WHERE u.region IN ('north', 'south') GROUP BY p.model",
        "a pinned join over two partitions",
    ),
    Entry(
        "pinned_private_keys",
        "SELECT date_trunc('month', p.ts) AS m, COUNT(*) AS n FROM prompts p "
        "JOIN users u ON u.user_id = p.user_id WHERE u.region = '{region}' GROUP BY m",
        "partition selection inside a pinned partition",
    ),
    # --- filters that single out one person ------------------------------------------------
    Entry(
        "single_out_count",
        "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE user_id = {pid}",
        "a filter on exactly the removed person",
    ),
    Entry(
        "single_out_from",
        "SELECT model, COUNT(*) AS n FROM prompts WHERE user_id >= {pid} GROUP BY model",
        "a target-first filter with a public key",
    ),
    # the L0 cut rows first (proxy/engines/rows_first_cut.py: day and finer keys)
    Entry(
        "rows_first_daily_sum",
        "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n, SUM(tokens_in) AS s "
        "FROM prompts GROUP BY d",
        "a daily key: each person's groups cut before the per-person aggregation",
    ),
    Entry(
        "rows_first_hourly_model",
        "SELECT date_trunc('hour', ts) AS h, model, COUNT(*) AS n FROM prompts "
        "WHERE user_id >= {pid} GROUP BY h, model",
        "an hourly key with a second key, the removed person first in the filter",
    ),
    Entry(
        "single_out_weeks",
        "SELECT date_trunc('week', ts) AS d, COUNT(*) AS n FROM prompts "
        "WHERE user_id = {pid} GROUP BY d",
        "partition selection over one person's own groups",
    ),
    Entry(
        "single_out_var",
        "SELECT VAR_POP(u.age) AS v, COUNT(*) AS n FROM prompts p "
        "JOIN users u ON u.user_id = p.user_id WHERE p.user_id <= {pid}",
        "a variance over a prefix ending at the removed person",
    ),
    Entry(
        "semi_join_in",
        "SELECT model, COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts "
        "WHERE user_id IN (SELECT user_id FROM tickets WHERE category = 'bug') GROUP BY model",
        "#13 semi-join: a person's rows kept by their own tickets",
    ),
    Entry(
        "semi_join_not_exists",
        "SELECT COUNT(*) AS n FROM prompts p WHERE NOT EXISTS "
        "(SELECT 1 FROM tickets t WHERE t.user_id = p.user_id)",
        "#13 anti-join written as NOT EXISTS",
    ),
    Entry(
        "semi_join_single_out",
        "SELECT region, COUNT(*) AS n FROM users WHERE user_id IN "
        "(SELECT user_id FROM prompts WHERE user_id = {pid}) GROUP BY region",
        "#13 a semi-join that keeps one person only",
    ),
    Entry(
        "semi_join_not_in_nulls",
        "SELECT COUNT(*) AS n FROM users WHERE user_id NOT IN "
        "(SELECT user_id FROM prompts WHERE tokens_in > {pid})",
        "#13 NOT IN (NULL-safe after normalisation) on a data-dependent set",
    ),
    Entry(
        "per_person_avg",
        "SELECT AVG(n) AS a, SUM(n) AS s, COUNT(*) AS people FROM "
        "(SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY user_id) t",
        "#13 §3 per-person counts, clamped to [1, C], aggregated again",
    ),
    Entry(
        "per_person_having",
        "SELECT COUNT(*) AS n FROM (SELECT user_id FROM prompts GROUP BY user_id "
        "HAVING COUNT(*) > 3) t",
        "#13 §3 people with more than 3 rows (a filter on one person's own value)",
    ),
    Entry(
        "per_person_histogram",
        "SELECT b, COUNT(*) AS n FROM (SELECT user_id, FLOOR(COUNT(*) / 3) AS b "
        "FROM prompts GROUP BY user_id) t GROUP BY b",
        "#13 §3 histogram of per-person totals (a key made from one person's value)",
    ),
    Entry(
        "per_person_plan_sum",
        "SELECT plan, AVG(s) AS a, SUM(s) AS total FROM (SELECT p.user_id, u.plan, "
        "SUM(p.tokens_in) AS s FROM prompts p JOIN users u ON u.user_id = p.user_id "
        "GROUP BY p.user_id, u.plan) t GROUP BY plan",
        "#13 §3 per-person sums clamped to [0, C·U], keyed by a person-constant column",
    ),
    Entry(
        "per_person_single_out",
        "SELECT SUM(n) AS s, AVG(m) AS a FROM (SELECT user_id, COUNT(*) AS n, "
        "MAX(tokens_in) AS m FROM prompts WHERE user_id >= {pid} GROUP BY user_id) t",
        "#13 §3 per-person values of a prefix starting at the removed person",
    ),
    Entry(
        "distinct_models_by_week",
        "SELECT date_trunc('week', ts) AS w, COUNT(DISTINCT model) AS m FROM prompts GROUP BY w",
        "#13 §2 COUNT(DISTINCT value) per private key: C values per person, L0 groups",
    ),
    Entry(
        "distinct_tokens_by_plan",
        "SELECT u.plan, COUNT(DISTINCT p.tokens_in) AS d, COUNT(*) AS n FROM prompts p "
        "JOIN users u ON u.user_id = p.user_id GROUP BY u.plan",
        "#13 §2 COUNT(DISTINCT value) with a person-constant key",
    ),
    Entry(
        "distinct_single_out",
        "SELECT model, COUNT(DISTINCT tokens_out) AS d FROM prompts WHERE user_id = {pid} "
        "GROUP BY model",
        "#13 §2 distinct values of the removed person alone",
    ),
    Entry(
        "distinct_sum_avg_by_model",
        "SELECT model, SUM(DISTINCT tokens_in) AS s, AVG(DISTINCT latency_ms) AS a "
        "FROM prompts GROUP BY model",
        "#13 §2 SUM/AVG(DISTINCT value): C kept values per person, each in [L, U]",
    ),
    Entry(
        "distinct_var_by_plan",
        "SELECT u.plan, VARIANCE(DISTINCT p.tokens_in) AS v, STDDEV_POP(DISTINCT p.latency_ms) "
        "AS sd FROM prompts p JOIN users u ON u.user_id = p.user_id GROUP BY u.plan",
        "#13 §2 VAR/STDDEV(DISTINCT value): Σ(v − m)² over C kept values per person",
    ),
    Entry(
        "paired_aggregates_by_model",
        "SELECT model, CORR(tokens_in, latency_ms) AS r, REGR_SLOPE(latency_ms, tokens_in) AS b, "
        "COVAR_SAMP(tokens_in, tokens_out) AS c, REGR_COUNT(tokens_out, tokens_in) AS n "
        "FROM prompts GROUP BY model",
        "CORR/COVAR/REGR as AVG and VAR_POP of the pairs (proxy/covariance.py): a product's "
        "range from its factors' bounds, C rows per person",
    ),
    Entry(
        "paired_aggregates_single_out",
        "SELECT CORR(tokens_in, tokens_out) AS r, REGR_INTERCEPT(tokens_out, tokens_in) AS a, "
        "REGR_SXY(tokens_out, tokens_in) AS sxy FROM prompts WHERE user_id = {pid}",
        "the removed person's pairs alone: a variance of 0 on one side is NULL, not an error",
    ),
    Entry(
        "paired_aggregates_huge_product",
        "SELECT COVAR_POP(age * {var_mult}, age * {var_mult}) AS c, "
        "CORR(age * {var_mult}, age) AS r FROM users",
        "a product of two scaled values past what a per-person sum holds: refused or bounded "
        "alike on D and D'",
    ),
    Entry(
        "union_all_sources",
        "SELECT src, COUNT(*) AS n, SUM(x) AS s FROM (SELECT user_id, 'prompt' AS src, "
        "tokens_in AS x FROM prompts UNION ALL SELECT user_id, 'ticket', "
        "resolution_minutes FROM tickets) t GROUP BY src",
        "#13 §5 UNION ALL: a person's rows from both arms bounded together",
    ),
    Entry(
        "union_all_single_out",
        "SELECT COUNT(*) AS n FROM (SELECT user_id FROM prompts WHERE user_id = {pid} "
        "UNION ALL SELECT user_id FROM tickets WHERE user_id = {pid}) t",
        "#13 §5 UNION ALL of the removed person's rows only",
    ),
    # --- the adversarial review of the #13 forms (review-adv) -----------------------------
    Entry(
        "adv13_per_person_levenshtein_pinned",
        "SELECT COUNT(*) AS n FROM (SELECT user_id, LEVENSHTEIN(REPEAT(MAX(model), "
        "COUNT(*) * 1000), REPEAT(MIN(model), COUNT(*) * 1000)) AS l FROM prompts "
        "WHERE user_id = {pid} GROUP BY user_id) t WHERE l > 5",
        "#13 §3 outer-layer functions (REPEAT, LEVENSHTEIN: quadratic) over one person's "
        "private count: a timeout with the person, 3 ms without; now refused before any "
        "charge",
    ),
    Entry(
        "adv13_per_person_case_having",
        "SELECT SUM(x) AS s, COUNT(*) AS n FROM (SELECT user_id, CASE WHEN COUNT(*) > 5 "
        "THEN SUM(tokens_in) ELSE -SUM(tokens_out) END AS x FROM prompts GROUP BY user_id "
        "HAVING SUM(tokens_in) > 1000 AND MAX(latency_ms) < 50000) t",
        "#13 §3 CASE over clamped aggregates and a HAVING on two of them",
    ),
    Entry(
        "adv13_per_person_casts",
        "SELECT SUM(x) AS s, SUM(d) AS t FROM (SELECT user_id, CAST(SUM(tokens_in) AS TINYINT) "
        "AS x, CAST(SUM(tokens_out) AS DECIMAL(4, 0)) AS d FROM prompts GROUP BY user_id) t",
        "#13 §3 casts of a per-person sum that overflow for heavy people (TRY: NULL)",
    ),
    Entry(
        "adv13_per_person_joined_outer",
        "SELECT u.plan, AVG(t.n) AS a, COUNT(*) AS c FROM (SELECT user_id, COUNT(DISTINCT model) "
        "AS n FROM prompts GROUP BY user_id) t JOIN users u ON u.user_id = t.user_id "
        "GROUP BY u.plan",
        "#13 §3 a per-person COUNT(DISTINCT) joined to a one-row table in the outer query",
    ),
    Entry(
        "adv13_distinct_sum_straddle",
        "SELECT SUM(DISTINCT tokens_in * {sum_mult}) AS s, AVG(DISTINCT tokens_in * "
        "{sum_mult}) AS a FROM prompts",
        "#13 §2 SUM/AVG(DISTINCT) of an integer near 2^63 (HUGEINT, saturated)",
    ),
    Entry(
        "adv13_distinct_decimal_var",
        "SELECT AVG(DISTINCT CAST(tokens_in AS DECIMAL(18, 0)) * 100000000000) AS a, "
        "VARIANCE(DISTINCT CAST(tokens_in AS DECIMAL(18, 0)) * 100000) AS v FROM prompts",
        "#13 §2 DECIMAL distinct values with huge centred squares",
    ),
    Entry(
        "adv13_distinct_private_key",
        "SELECT tokens_in % 7 AS g, COUNT(DISTINCT model) AS c, SUM(DISTINCT latency_ms) AS s "
        "FROM prompts GROUP BY g",
        "#13 §2 a person in up to 7 private groups (L0 to K) with C distinct values each",
    ),
    Entry(
        "adv13_union_users_twice",
        "SELECT src, COUNT(*) AS n FROM (SELECT user_id, 'a' AS src FROM users "
        "UNION ALL SELECT user_id, 'b' FROM users) t GROUP BY src",
        "#13 §5 two arms over a one-row table: each person has 2 union rows in 2 groups, "
        "and C = K = 1 must cut them",
    ),
    Entry(
        "adv13_union_same_table_pinned",
        "SELECT COUNT(*) AS n, SUM(x) AS s FROM (SELECT user_id, tokens_in AS x FROM prompts "
        "WHERE user_id = {pid} UNION ALL SELECT user_id, tokens_in FROM prompts WHERE "
        "user_id = {pid} UNION ALL SELECT user_id, tokens_out FROM prompts) t",
        "#13 §5 one table in three arms: C bounds the union of a person's rows",
    ),
    Entry(
        "adv13_union_cast_pinned",
        "SELECT COUNT(x) AS n FROM (SELECT user_id, tokens_in AS x FROM prompts WHERE "
        "user_id = {pid} UNION ALL SELECT user_id, CAST(0 AS DECIMAL(38, 37)) FROM users) t",
        "#13 §5 the union's own cast of an INTEGER arm to DECIMAL(38, 37) failed after "
        "planning on D only (ConversionException); now each arm is TRY_CAST to the type",
    ),
    Entry(
        "adv13_union_distinct",
        "SELECT COUNT(DISTINCT x) AS d, SUM(DISTINCT x) AS s FROM (SELECT user_id, tokens_in "
        "AS x FROM prompts UNION ALL SELECT user_id, resolution_minutes FROM tickets) t",
        "#13 §2+§5 distinct values of a union (a value shared with others)",
    ),
    Entry(
        "adv13_per_person_distinct_values",
        "SELECT n, COUNT(DISTINCT m) AS d FROM (SELECT user_id, COUNT(*) AS n, MAX(model) AS m "
        "FROM prompts GROUP BY user_id) t GROUP BY n",
        "#13 §2+§3 COUNT(DISTINCT) of per-person values keyed by a per-person count",
    ),
    # Wide DECIMAL types (found by an adversarial probe, 2026-12-02): DuckDB converts a
    # clamp's literal bounds to the argument's type, and DECIMAL(38, s) cannot hold 100
    # once s > 36, so the core failed after the charge whenever a row reached the clamp
    # (D) and answered when none did (D'); a per-person SUM of such values overflowed
    # HUGEINT the same way.
    Entry(
        "adv_decimal_clamp_avg",
        "SELECT AVG(CAST(age AS DECIMAL(38, 37))) AS a FROM users WHERE user_id = {pid}",
        "a clamp's bounds cast to DECIMAL(38, 37) failed only when the person's row existed",
    ),
    Entry(
        "adv_decimal_clamp_sum",
        "SELECT COUNT(*) AS n, SUM(CAST(tokens_in AS DECIMAL(38, 35))) AS s, "
        "SUM(CAST(tokens_in AS DECIMAL(38, 35)) * 2) AS t FROM prompts WHERE user_id = {pid}",
        "SUM and arithmetic over DECIMAL(38, 35) against integer bounds up to 8000",
    ),
    Entry(
        "adv_decimal_quantiles",
        "SELECT MEDIAN(CAST(age AS DECIMAL(38, 37))) AS m, MAX(CAST(tokens_in AS "
        "DECIMAL(38, 35))) AS x FROM prompts JOIN users USING (user_id) WHERE user_id = {pid}",
        "histogram bins of a wide DECIMAL argument",
    ),
    Entry(
        "adv_decimal_grouped",
        "SELECT model, AVG(CAST(latency_ms AS DECIMAL(38, 36))) AS a, VAR_POP(CAST(tokens_out "
        "AS DECIMAL(38, 36))) AS v FROM prompts WHERE user_id = {pid} GROUP BY model",
        "a wide DECIMAL under a public key, with centred squares",
    ),
    # Columns read only by a comparison inside an aggregate's argument are compared as
    # they are, not clamped (an answer oracle, 2026-12-05: a clamp there changed which
    # rows a CASE took): the person's raw values meet the analyst's literals.
    Entry(
        "adv_raw_predicate_case",
        "SELECT SUM(CASE WHEN tokens_in > 3999 THEN 1 ELSE 0 END) AS n, SUM(CASE WHEN "
        "tokens_in * 1000000 > latency_ms OR age BETWEEN 18 AND 30 THEN tokens_out ELSE 0 END) "
        "AS s, AVG(CASE WHEN latency_ms IN (0, 60000) THEN latency_ms END) AS a "
        "FROM prompts JOIN users USING (user_id) WHERE user_id = {pid}",
        "raw bounded columns in CASE conditions beside clamped values in the branches",
    ),
    Entry(
        "adv_raw_predicate_decimal",
        "SELECT SUM(CASE WHEN CAST(tokens_in AS DECIMAL(38, 36)) > 100000 THEN 1 ELSE 0 END) "
        "AS n, SUM(CAST(age AS DECIMAL(38, 37)) < 5) AS m FROM prompts JOIN users "
        "USING (user_id) WHERE user_id = {pid}",
        "a wide DECIMAL compared with a literal it cannot hold, on the person's rows only",
    ),
    # DuckDB's DATE_DIFF of times of day raises on each row that reaches it, past TRY:
    # a TIME in parentheses once got past the checker and failed after the charge on
    # the person's rows only (an adversarial probe, 2026-12-05).
    Entry(
        "adv_time_date_diff_wrapped",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "date_diff('day', (CAST(ts AS TIME)), (CAST(ts AS TIME))) = 0",
        "DATE_DIFF of a time of day in parentheses, on the person's rows only",
    ),
    # A declared bound the analyst's own LEAST / GREATEST makes moot is not tested for
    # the clipping estimate (read from the query's text alone); the person's values
    # beyond it still meet the clamp and the analyst's functions.
    Entry(
        "adv_moot_bound_least",
        "SELECT SUM(LEAST(GREATEST(tokens_in, 0), 1000)) AS s, AVG(GREATEST(LEAST(tokens_out, "
        "10), -5)) AS a, SUM(LEAST(tokens_in, 1e6)) AS l FROM prompts WHERE user_id = {pid}",
        "the analyst's clamps within, at and beyond the declared bounds",
    ),
    # A negated disjunction keeps its parentheses (it once ran as (NOT a) OR b), and
    # windows run after HAVING, whose filter the interval simulation must survive when
    # noise moves a row across it (a KeyError after the charge, 2026-12-05).
    Entry(
        "adv_negated_disjunction",
        "SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts "
        "WHERE NOT (model = 'small' OR user_id <> {pid})",
        "a person pinned inside NOT (a OR b)",
    ),
    Entry(
        "adv_window_after_having",
        "SELECT model, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*)) AS r, "
        "CAST(100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS DECIMAL(9, 2)) AS pct "
        "FROM prompts WHERE user_id = {pid} GROUP BY model HAVING COUNT(*) > 1",
        "windows after a HAVING on the person's own counts, a DECIMAL share among them",
    ),
    Entry(
        "adv_decimal_per_person_sum",
        "SELECT COUNT(*) AS n FROM (SELECT user_id, SUM(CAST(tokens_in AS DECIMAL(38, 35))) "
        "AS n FROM prompts WHERE user_id = {pid} GROUP BY user_id) t WHERE n >= 0",
        "a per-person SUM of DECIMAL(38, 35) values overflowed HUGEINT for the person",
    ),
    Entry(
        "adv_decimal_per_person_avg",
        "SELECT AVG(a) AS m FROM (SELECT user_id, AVG(CAST(tokens_in AS DECIMAL(38, 35))) AS a, "
        "MAX(CAST(tokens_in AS DECIMAL(38, 35))) AS x FROM prompts WHERE user_id = {pid} "
        "GROUP BY user_id) t WHERE x >= 0",
        "per-person AVG and MAX of wide DECIMAL values",
    ),
    Entry(
        "adv_decimal_union_arm",
        "SELECT SUM(x) AS s FROM (SELECT user_id, CAST(tokens_in AS DECIMAL(38, 34)) AS x "
        "FROM prompts WHERE user_id = {pid} UNION ALL SELECT user_id, age FROM users) t",
        "a wide DECIMAL arm retypes the union's column",
    ),
    # Date and time keys (the same probe): fetching a DATE of infinity, or of a year past
    # 294247, failed in DuckDB's conversion to NumPy after the charge, only when the
    # person's row held one; TIME WITH TIME ZONE keys had no NumPy form at all.
    Entry(
        "adv_date_key_infinity",
        "SELECT CASE WHEN age >= 40 THEN DATE 'infinity' ELSE DATE '2024-01-01' END AS k, "
        "COUNT(*) AS n FROM users WHERE user_id = {pid} GROUP BY 1",
        "a DATE key of infinity for the person only (and only when they are 40 or older)",
    ),
    Entry(
        "adv_date_key_far",
        "SELECT signup_month + age * 10000000 AS k, COUNT(*) AS n FROM users "
        "WHERE user_id = {pid} GROUP BY 1",
        "a DATE key past the year 294247, without overflowing DuckDB's dates",
    ),
    Entry(
        "adv_date_key_distinct",
        "SELECT DISTINCT GREATEST(signup_month, DATE 'infinity') AS k FROM users "
        "WHERE user_id = {pid}",
        "SELECT DISTINCT of an infinite DATE",
    ),
    Entry(
        "adv_time_keys",
        "SELECT CAST(ts AS TIMETZ) AS k, COUNT(*) AS n FROM prompts WHERE user_id = {pid} "
        "GROUP BY 1",
        "a TIME WITH TIME ZONE key (refused before the charge now)",
    ),
    Entry(
        "adv_timestamp_key_far",
        "SELECT CASE WHEN age >= 40 THEN TIMESTAMP '9999-12-31' + INTERVAL 400 DAY ELSE "
        "ts END AS k, COUNT(*) AS n FROM prompts JOIN users USING (user_id) "
        "WHERE user_id = {pid} GROUP BY 1",
        "a TIMESTAMP key past 9999 (NULL now, as dates are)",
    ),
    # A probe of data-driven arguments (2026-12-02): a unit read from the data is 'era'
    # on the person's rows only (NotImplementedException, which TRY does not catch);
    # DuckDB groups -0.0 with 0.0 and keeps the first value met, so the key's sign said
    # whether the person (first in the table among those in the group) was there.
    Entry(
        "adv_unit_from_data",
        "SELECT COUNT(*) AS n FROM prompts WHERE date_trunc(CASE WHEN user_id = {pid} "
        "THEN 'era' ELSE 'day' END, ts) IS NOT NULL",
        "a date unit from a CASE (refused before the charge now)",
    ),
    # A probe of joins and subqueries (2026-12-02): a semi-join's subquery was checked
    # against a list of refused clauses (QUALIFY and USING SAMPLE passed), a CTE inside
    # it passed as the private table of its name, and the tables inside such a CTE
    # overwrote the outer query's aliases (a public table's alias hid a private join off
    # the person id). On D one query said whether the person was there (1,392 vs 0).
    Entry(
        "adv_semijoin_qualify",
        "SELECT COUNT(*) AS n FROM prompts p WHERE p.user_id IN (SELECT s.user_id FROM "
        "prompts s QUALIFY MAX(CASE WHEN s.user_id = {pid} THEN 1 ELSE 0 END) OVER () = 1)",
        "a semi-join kept everyone's rows iff the person had rows (refused now)",
    ),
    Entry(
        "adv_semijoin_sample",
        "SELECT COUNT(*) AS n FROM users u WHERE u.user_id IN (SELECT s.user_id FROM "
        "prompts s USING SAMPLE bernoulli(10%) REPEATABLE (7))",
        "a sample over everyone's rows decided who was kept (refused now)",
    ),
    Entry(
        "adv_semijoin_cte_shadow",
        "SELECT COUNT(*) AS n FROM prompts p WHERE p.user_id IN (WITH users AS (SELECT "
        "z.user_id FROM main.users z WHERE EXISTS (SELECT 1 FROM main.prompts y WHERE "
        "y.user_id = {pid}) LIMIT 100000000) SELECT users.user_id FROM users)",
        "a CTE named like a private table inside a semi-join (refused now)",
    ),
    Entry(
        "adv_alias_from_inner_cte",
        "SELECT COUNT(*) AS n FROM users u JOIN prompts p ON p.user_id = {pid} AND "
        "p.tokens_in > 0 WHERE u.user_id IN (WITH x AS (SELECT 1 FROM main.regions t1) "
        "SELECT s.user_id FROM users s)",
        "an unused CTE's public alias hid a join off the person id (refused now)",
    ),
    # A probe of non-string costs (2026-12-02): one raising row under TRY made DuckDB
    # evaluate its whole 2,048-row vector again row by row (0.44 s against 0.008 s on
    # a time-ordered table, no planted data); the executor now runs integer arithmetic
    # and date moves in forms that cannot raise (proxy/guarded_arithmetic.py).
    Entry(
        "adv_try_fallback_targeted",
        "SELECT COUNT(*) AS n FROM prompts WHERE CAST(tokens_in AS BIGINT) * CASE WHEN "
        "user_id = {pid} THEN 9223372036854775807 ELSE 1 END > latency_ms",
        "an overflow on one person's rows only (answered alike; timed by the bench)",
    ),
    # This round's guards (2026-12-02, later): DECIMAL widths, implicit DECIMAL casts,
    # ROUND's carry and deep operands read once, each aimed at one person.
    Entry(
        "adv_decimal_product_width",
        "SELECT COUNT(*) AS n, SUM(CASE WHEN CAST(tokens_in AS DECIMAL(18,2)) * (CASE WHEN "
        "user_id = {pid} THEN CAST('9999999999999999.99' AS DECIMAL(18,2)) ELSE 1 END) > 0 "
        "THEN 1 ELSE 0 END) AS big FROM prompts",
        "a DECIMAL product past 18 digits on one person's rows (NULL, not raised)",
    ),
    Entry(
        "adv_decimal_implicit_cast",
        "SELECT COUNT(*) AS n FROM prompts WHERE CAST(tokens_in AS DECIMAL(18,2)) < "
        "(CASE WHEN user_id = {pid} THEN CAST('170141183460469231731687303715884105727' "
        "AS HUGEINT) ELSE CAST(7 AS HUGEINT) END)",
        "a HUGEINT DuckDB casts to the DECIMAL it is compared with",
    ),
    Entry(
        "adv_round_carry",
        "SELECT COUNT(*) AS n FROM prompts WHERE ROUND((CASE WHEN user_id = {pid} THEN "
        "2147483647 ELSE tokens_in END), -1) > 0 AND ROUND((CASE WHEN user_id = {pid} THEN "
        "CAST('96000000000000000000000000000000000000' AS DECIMAL(38,0)) ELSE "
        "CAST(tokens_in AS DECIMAL(38,0)) END), (-37)) >= 0",
        "ROUND's carried digit with no room in the type, on one person's rows",
    ),
    Entry(
        "adv_deep_decimal_chain",
        "SELECT COUNT(*) AS n FROM prompts WHERE (CAST(tokens_in AS DECIMAL(38,0)) + 1 + 2 + 3 "
        "+ 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12 + 13 + 14 + 15 + 16 + 17 + 18 + 19 + 20) * "
        "(CASE WHEN user_id = {pid} THEN CAST('99999999999999999999999999999999999999' AS "
        "DECIMAL(38,0)) ELSE 1 END) > 0",
        "operands too large to write twice, read once through a list",
    ),
    Entry(
        "adv_keyed_where_join",
        "SELECT r.name, COUNT(*) AS n FROM users u, regions r WHERE u.region = r.region "
        "GROUP BY r.name",
        "a join written as WHERE equalities, keyed (keyed_groups.keyed_where)",
    ),
    Entry(
        "adv_join_two_widths",
        "SELECT u.plan, COUNT(*) AS n FROM users u JOIN prompts p ON p.user_id = u.user_id "
        "AND p.tokens_in > u.age AND CAST(p.tokens_out AS BIGINT) = u.age GROUP BY u.plan",
        "an INTEGER = BIGINT join, keyed in the wider type",
    ),
    Entry(
        "adv_union_arm_join",
        "SELECT src, COUNT(*) AS n FROM (SELECT p.user_id, 'p' AS src, r.name FROM prompts p "
        "JOIN regions r ON r.region = p.model WHERE p.user_id = {pid} "
        "UNION ALL SELECT user_id, 't', category FROM tickets) t GROUP BY src",
        "a join inside a UNION ALL arm, keyed, aimed at one person",
    ),
    Entry(
        "adv_long_in_list",
        "SELECT model, COUNT(*) AS n FROM prompts WHERE prompt_id IN (3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63, 67, 71, 75, 79, 83, 87, 91, 95, 99, 103, 107, 111, 115, 119, NULL) "
        "OR NOT (user_id IN (3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63, 67, 71, 75, 79, 83, 87, 91, 95, 99, 103, 107, 111, 115, 119) OR model IN ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', "
        "'i', 'j', 'k')) OR user_id = {pid} GROUP BY model",
        "long IN lists (keyed on PostgreSQL and Spark), NULL in the list and NOT IN",
    ),
    Entry(
        "adv_in_list_collisions",
        f"SELECT model, COUNT(*) AS n FROM prompts WHERE model IN ({_COLLIDING_LIST}) "
        "OR user_id = {pid} GROUP BY model",
        "an IN list of texts with one DuckDB hash, which DuckDB looks up in a hash table "
        "(refused before the charge on DuckDB: proxy/in_list_layout.py)",
    ),
    Entry(
        "adv_per_person_distinct_layer",
        "SELECT AVG(n) AS a, COUNT(*) AS c FROM (SELECT user_id, COUNT(DISTINCT model) AS n, "
        "SUM(DISTINCT tokens_in) AS s FROM prompts GROUP BY user_id HAVING "
        "COUNT(DISTINCT latency_ms) > 1) t",
        "a per-person subquery's DISTINCT aggregates from keyed (person, value) layers",
    ),
    Entry(
        "adv_negative_zero_key",
        "SELECT CASE WHEN user_id >= {pid} THEN CASE WHEN user_id = {pid} THEN "
        "CAST('-0.0' AS DOUBLE) ELSE CAST('0.0' AS DOUBLE) END END AS k, COUNT(*) AS n "
        "FROM users GROUP BY k",
        "a zero key whose sign is the first person's (released as 0.0 now)",
    ),
    # A probe of the bounding arithmetic (2026-12-02): a DECIMAL(18, 17) key's values
    # 0.50000000000000001 and 0.5 met as one float64 in the release, which kept one
    # group's count, chosen by the data (refused before the charge now).
    Entry(
        "adv_lossy_decimal_key",
        "SELECT CASE WHEN user_id = {pid} THEN 0.50000000000000001 ELSE 0.5 END AS k, "
        "COUNT(*) AS n FROM users GROUP BY k",
        "two DECIMAL keys one float apart",
    ),
    Entry(
        "adv_decimal_domain_key",
        "SELECT CAST(age / 10 AS DECIMAL(5, 1)) AS k, COUNT(*) AS n FROM users "
        "WHERE user_id <> {pid} OR age > 0 GROUP BY k",
        "a DECIMAL key over a public domain (every group was released as 0)",
    ),
    # PostgreSQL's total forms (a probe of the PostgreSQL executor, 2026-12-02): casts
    # written into templates as a bare DECIMAL were read as DECIMAL(18, 3) and overflowed
    # past 15 digits, a NUMERIC compared with DOUBLE bounds failed beyond a double's
    # range, and EXTRACT's DAYOFWEEK/DAYOFYEAR names and a DATE's HOUR raised per row.
    # DuckDB answers all of them; each is pinned to the person.
    Entry(
        "adv_pg_text_to_bigint",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "CAST(CAST(tokens_in AS VARCHAR) || '0000000000000' AS BIGINT) > 0",
        "text to BIGINT past 15 digits",
    ),
    Entry(
        "adv_pg_text_to_double",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "CAST(CAST(tokens_in AS VARCHAR) || 'e999' AS DOUBLE) > 5",
        "text to DOUBLE beyond a double's range",
    ),
    Entry(
        "adv_pg_text_to_tiny_double",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "CAST(CAST(tokens_in AS VARCHAR) || 'e-999' AS DOUBLE) >= 0",
        "text to DOUBLE below a double's smallest subnormal",
    ),
    Entry(
        "adv_pg_double_to_decimal",
        "SELECT COUNT(*) AS n FROM prompts WHERE user_id = {pid} AND "
        "CAST(tokens_in * 1e12 AS DECIMAL(38, 0)) > 0",
        "DOUBLE to a wide DECIMAL past 15 digits",
    ),
    Entry(
        "adv_pg_extract_parts",
        "SELECT EXTRACT(DOW FROM ts) AS d, COUNT(*) AS n FROM prompts WHERE user_id = {pid} "
        "AND EXTRACT(DOY FROM ts) > 0 GROUP BY d",
        "EXTRACT(DOW) and EXTRACT(DOY), spelt DAYOFWEEK and DAYOFYEAR by the renderer",
    ),
    Entry(
        "adv_pg_extract_date_hour",
        "SELECT COUNT(*) AS n FROM users WHERE user_id = {pid} AND "
        "EXTRACT(HOUR FROM signup_month) >= 0",
        "EXTRACT(HOUR) of a DATE (0 in DuckDB)",
    ),
    # Spark's timestamps end about 290,000 years out, DuckDB's dates 5.8 million: a far
    # date met a time part, a truncation or a timestamp and Spark raised "long overflow"
    # (the Spark probe, 2026-12-02). DuckDB and PostgreSQL answer these.
    Entry(
        "adv_far_date_extract",
        "SELECT COUNT(*) AS n FROM users WHERE user_id = {pid} AND "
        "EXTRACT(HOUR FROM signup_month + age * 10000000) >= 0",
        "a time part of a date far beyond Spark's timestamps",
    ),
    Entry(
        "adv_far_date_trunc_key",
        "SELECT date_trunc('day', signup_month + age * 10000000) AS k, COUNT(*) AS n "
        "FROM users WHERE user_id = {pid} GROUP BY 1",
        "a far date truncated, as a key",
    ),
    Entry(
        "adv_far_date_vs_timestamp",
        "SELECT COUNT(*) AS n FROM prompts p JOIN users u ON u.user_id = p.user_id "
        "WHERE p.user_id = {pid} AND u.signup_month + u.age * 10000000 < p.ts",
        "a far date compared with a timestamp",
    ),
    # Planning time on nested functions (2026-12-04, later): the new read-once and
    # moved forms, each aimed at one person's rows.
    Entry(
        "adv_nested_divisors_zero",
        "SELECT COUNT(*) AS n FROM prompts WHERE "
        + "(7 // (tokens_in + " * 12
        + "(CASE WHEN user_id = {pid} THEN 0 ELSE 1 END)"
        + "))" * 12
        + " >= 0",
        "integer divisors nested in divisors (read once past 64 nodes), zero on one "
        "person's rows only",
    ),
    Entry(
        "adv_nested_safe_divide_zero",
        "SELECT COUNT(*) AS n FROM prompts WHERE "
        + "SAFE_DIVIDE(1, " * 3
        + "SAFE_DIVIDE(tokens_in, CASE WHEN user_id = {pid} THEN 0 ELSE 2 END)"
        + ")" * 3
        + " IS NULL",
        "four SAFE_DIVIDEs nested in denominators (the limit), a zero on one person",
    ),
    Entry(
        "adv_nested_date_choices",
        "SELECT COUNT(*) AS n FROM prompts WHERE "
        + "COALESCE(" * 30
        + "CASE WHEN user_id = {pid} THEN DATE '5000000-01-01' END"
        + ", CAST(ts AS DATE))" * 30
        + " > ts",
        "a far DATE through 30 nested COALESCEs met by a TIMESTAMP (dated once per node)",
    ),
    Entry(
        "adv_outer_product_chain",
        "SELECT model, " + "(" * 30 + "COUNT(*)" + " * 2)" * 30 + " AS m FROM prompts "
        "GROUP BY model",
        "an integer product chain over a released count (the outer layer's DuckDB runs "
        "without its expression rewriter)",
    ),
    # Spellings read as the forms they stand for (proxy/spellings.py, 2026-12-06): the
    # person's rows through FILTER, COUNT_IF, DATE() and a NULLIF inside an aggregate.
    Entry(
        "adv_filter_spellings",
        "SELECT DATE(ts) AS d, COUNT(*) FILTER (WHERE user_id = {pid}) AS f, "
        "SUM(tokens_in) FILTER (WHERE user_id = {pid} OR tokens_in > 100) AS s, "
        "COUNT_IF(user_id = {pid}) AS c, AVG(NULLIF(tokens_out, 0)) AS a FROM prompts "
        "WHERE user_id = {pid} OR tokens_in < 50 GROUP BY ALL ORDER BY ALL",
        "FILTER, COUNT_IF, DATE(), NULLIF in an aggregate, GROUP BY / ORDER BY ALL",
    ),
    # What a key expression gives for NULL is in its public domain (domains, 2026-12-06).
    Entry(
        "adv_coalesce_null_key",
        "SELECT COALESCE(t.category, 'none') AS c, COUNT(*) AS n FROM users u LEFT JOIN "
        "tickets t ON t.user_id = u.user_id WHERE u.user_id = {pid} OR u.age > 40 GROUP BY 1",
        "a NULL key named by COALESCE over a LEFT JOIN, pinned to the person",
    ),
    Entry(
        "adv_day_and_month_names",
        "SELECT dayname(ts) AS d, monthname(CAST(ts AS DATE)) AS m, COUNT(*) AS n FROM "
        "prompts WHERE user_id = {pid} OR dayname(ts) = 'Monday' GROUP BY 1, 2",
        "DuckDB's day and month names as keys and in WHERE, pinned to the person",
    ),
    # Per-person facts joined to the people's table, read as the per-person subquery
    # with the table's columns inside (proxy/joined_facts.py, 2026-12-06).
    Entry(
        "adv_joined_facts",
        "SELECT u.region, AVG(t.n) AS a, MAX(t.s) AS m, COUNT(*) AS c FROM users u JOIN "
        "(SELECT user_id, COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE user_id = "
        "{pid} OR tokens_in < 100 GROUP BY user_id) t ON t.user_id = u.user_id "
        "WHERE u.user_id = {pid} OR u.age > 30 GROUP BY u.region",
        "per-person facts joined to users on the id, pinned to the person",
    ),
    # Keys over one domain column combined as its values give them, expression keys
    # narrowed by WHERE on their column (proxy/domains.py, 2026-12-06).
    Entry(
        "adv_combined_domain_keys",
        "SELECT age // 10 AS d, age < 30 AS y, plan, upper(plan) AS p, COUNT(*) AS n FROM "
        "users WHERE age < 60 AND (user_id = {pid} OR age > 25) GROUP BY 1, 2, 3, 4",
        "keys of one column combined jointly, the column narrowed, pinned to the person",
    ),
    Entry(
        "adv_remainder_and_parts",
        "SELECT AVG(tokens_in % 10) AS a, SUM((tokens_in - 2000) % 7) AS b, "
        "SUM(EXTRACT(hour FROM ts)) AS h, AVG(EXTRACT(isodow FROM ts)) AS d FROM prompts "
        "WHERE user_id = {pid} OR tokens_in < 50",
        "a remainder and calendar parts bounded by their own ranges, pinned to the person",
    ),
    # A divisor kept away from 0 (proxy/rewrite/ranges.py: the corners' quotients), the
    # per-row ratios BI tools write (2026-12-06, sixth session).
    Entry(
        "adv_guarded_ratios",
        "SELECT model, AVG(tokens_out * 1.0 / NULLIF(tokens_in, 0)) AS r, "
        "SUM(tokens_out / GREATEST(tokens_in, 1)) AS s, AVG(tokens_in // (tokens_out + 1)) "
        "AS q FROM prompts WHERE user_id = {pid} OR tokens_in > 3000 GROUP BY model",
        "per-row quotients by a divisor kept from 0, bounded by their corners, pinned",
    ),
    Entry(
        "adv_public_subquery",
        "SELECT u.region, COUNT(*) AS n FROM users u WHERE (u.user_id = {pid} OR u.age > 40) "
        "AND u.region IN (SELECT region FROM regions WHERE name <> 'North') GROUP BY 1",
        "a subquery of a public table folded to its values, pinned to the person",
    ),
    Entry(
        "adv_grouping_sets",
        "SELECT model, flagged, COUNT(*) AS n, AVG(tokens_in) AS a FROM prompts "
        "WHERE user_id = {pid} OR tokens_in > 50 GROUP BY CUBE (model, flagged)",
        "CUBE: the finest grouping released once, the subtotals summed from its cells",
    ),
    Entry(
        "adv_comma_join",
        "SELECT u.region, COUNT(*) AS n, SUM(p.tokens_in) AS s FROM prompts p, users u "
        "WHERE p.user_id = u.user_id AND (u.user_id = {pid} OR p.tokens_in > 50) GROUP BY 1",
        "a comma join read as the inner join on the person id, pinned to the person",
    ),
    Entry(
        "adv_dialect_weekdays",
        "SELECT strftime(ts, '%A') AS d, (EXTRACT(DOW FROM ts) + 1) AS b, COUNT(*) AS n FROM "
        "prompts WHERE user_id = {pid} OR isodow(ts) >= 6 GROUP BY 1, 2",
        "weekday keys as the dialect respellings write them, pinned to the person",
    ),
    *KEY_JOIN,
)

# Issue #12 §3, value bounds chosen from the data: the demo policy with
# ``latency_ms = { lower = 0, upper = "auto", upper_limit = 600000 }``
# (tests/reliability/test_auto_value_neighbours.py). Each runs twice: planned with the
# limit before the bound is released, and with one released bound shared by both sides.
AUTO_VALUE_POLICY = 'columns.latency_ms = { lower = 0, upper = "auto", upper_limit = 600000 }'
# Both sides chosen from the data (the lower one at a low DP quantile, its own release).
AUTO_BOTH_POLICY = (
    'columns.latency_ms = { lower = "auto", lower_limit = -1000, upper = "auto", '
    "upper_limit = 600000 }"
)
AUTO_VALUES: tuple[Entry, ...] = (
    Entry("auto_sum", "SELECT SUM(latency_ms) AS s FROM prompts", "§12.3 SUM on the auto bound"),
    Entry(
        "auto_avg_by_model",
        "SELECT model, AVG(latency_ms) AS a, STDDEV(latency_ms) AS sd FROM prompts GROUP BY model",
        "§12.3 AVG and STDDEV on the auto bound, public keys",
    ),
    Entry(
        "auto_sum_pinned",
        "SELECT region, SUM(latency_ms * 1000) AS s FROM prompts JOIN users USING (user_id) "
        "WHERE user_id = {pid} GROUP BY region",
        "§12.3 one person's rows scaled past the bound",
    ),
    Entry(
        "auto_subquery",
        "SELECT SUM(l) AS s FROM (SELECT latency_ms AS l FROM prompts WHERE model = 'small') t",
        "§12.3 the column passed on under another name",
    ),
    Entry(
        "auto_median",
        "SELECT MEDIAN(latency_ms) AS m FROM prompts",
        "§12.3 a quantile's grid on the auto bound",
    ),
)


PUMS: tuple[Entry, ...] = (
    Entry(
        "pums_paired_aggregates",
        "SELECT sex, CORR(age, income) AS r, COVAR_POP(income, age) AS c, "
        "REGR_R2(income, age) AS r2 FROM PUMS.PUMS GROUP BY sex",
        "CORR/COVAR/REGR of one row per person",
    ),
    # A WHERE conjunct about a public key alone narrows its domain (domains._narrowed,
    # 2026-12-06): computed from the public values and the text, never the rows.
    Entry(
        "pums_key_range_narrows",
        "SELECT age, COUNT(*) AS n, AVG(income) AS i FROM PUMS.PUMS WHERE age BETWEEN 20 "
        "AND 30 AND (pid = {pid} OR income > 1000) AND educ <> 9 GROUP BY age",
        "a range on the key narrows its public domain; other conjuncts do not",
    ),
    Entry(
        "pums_sex_income",
        "SELECT sex, COUNT(*) AS n, AVG(income) AS i FROM PUMS.PUMS GROUP BY sex",
        "control: public key, float AVG",
    ),
    Entry(
        "pums_race_private",
        "SELECT race, COUNT(*) AS n, SUM(age) AS a FROM PUMS.PUMS GROUP BY race",
        "partition selection on a column with no public domain",
    ),
    Entry(
        "pums_educ_var",
        "SELECT educ, VAR_POP(income) AS v FROM PUMS.PUMS GROUP BY educ",
        "public domain of 16 groups, float variance",
    ),
    Entry(
        "pums_var_straddles",
        "SELECT VAR_POP(age * {var_mult}) AS v FROM PUMS.PUMS",
        "§1 centred squares at 2^63 on D and below it on D'",
    ),
    Entry(
        "pums_income_huge",
        "SELECT SUM(income * 1e12) AS s, AVG(income * 1e300) AS a FROM PUMS.PUMS",
        "§1 float sums near and beyond the supported range",
    ),
    Entry(
        "pums_chain",
        "SELECT CASE WHEN b.age IS NULL THEN 'a' ELSE 'b' END AS g, COUNT(*) AS n "
        "FROM PUMS.PUMS p LEFT JOIN PUMS.PUMS t ON t.pid = p.pid AND p.income > 50000 "
        "LEFT JOIN PUMS.PUMS b ON b.pid = t.pid GROUP BY g",
        "§2 the chain on a one-row-per-person table (no split: one row per person)",
    ),
    Entry(
        "pums_self_join",
        "SELECT a.married, COUNT(*) AS n FROM PUMS.PUMS a JOIN PUMS.PUMS b ON b.pid = a.pid "
        "WHERE a.income + b.age > 100 GROUP BY a.married",
        "self-join on the person id",
    ),
    Entry(
        "pums_single_out",
        "SELECT COUNT(*) AS n, SUM(income) AS s FROM PUMS.PUMS WHERE pid = {pid}",
        "a filter on exactly the removed person",
    ),
    Entry(
        "pums_case_key",
        "SELECT CASE WHEN income > 100000 THEN 'rich' WHEN income IS NULL THEN 'none' "
        "ELSE 'other' END AS g, COUNT(*) AS n FROM PUMS.PUMS GROUP BY g",
        "CASE-created public domain with a NULL branch",
    ),
    Entry(
        "adv13_pums_per_person_sum",
        "SELECT AVG(s) AS a, SUM(s) AS t FROM (SELECT pid, SUM(income) AS s, COUNT(*) AS n "
        "FROM PUMS.PUMS GROUP BY pid) t",
        "#13 §3 per-person sums on a one-row-per-person table (C = 1)",
    ),
)


# --- facts the templates need -------------------------------------------------------------

Rows = list[tuple[Any, ...]]
Fetch = Callable[[str], tuple[Rows, Rows]]


def _scalar(rows: Rows) -> float:
    return float(rows[0][0] or 0)


def _straddle(on_d: float, limit: int, *, square: bool) -> int:
    """The smallest integer M with on_d·M ≥ limit (on_d·M² when ``square``): removing a
    person lowers these non-negative totals, so D' lands below the limit unless the
    person's share is smaller than one step of M."""
    total = int(on_d)
    if total <= 0:
        return 1
    if not square:
        return -(-limit // total)
    m = math.isqrt(-(-limit // total))
    while m * m * total < limit:
        m += 1
    return m


# Issue #12 §3: prompts' max_groups = "auto" (test_auto_group_neighbours.py): private
# keys whose K is chosen from a histogram of groups per person.
AUTO_GROUPS_POLICY = 'max_groups = "auto"\nmax_groups_limit = 64 #'
AUTO_GROUPS: tuple[Entry, ...] = (
    Entry(
        "auto_k_daily",
        "SELECT CAST(ts AS DATE) AS d, COUNT(*) AS n FROM prompts GROUP BY d",
        "§12.3 private daily keys under the chosen K",
    ),
    Entry(
        "auto_k_daily_sum_filtered",
        "SELECT CAST(p.ts AS DATE) AS day, SUM(tokens_in) AS s FROM prompts AS p "
        "WHERE model = 'small' GROUP BY 1",
        "§12.3 the same grouping filtered (the same histogram, one charge)",
    ),
    Entry(
        "auto_k_pinned",
        "SELECT CAST(ts AS DATE) AS d, COUNT(*) * 1000 AS n FROM prompts "
        "WHERE user_id = {pid} GROUP BY d",
        "§12.3 one person's days, all in one query",
    ),
    Entry(
        "auto_k_public_model",
        "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model",
        "§12.3 a public domain: K = its size, no histogram",
    ),
)


def demo_facts(fetch: Fetch, pid: Any) -> dict[str, Any]:
    """Placeholders of :data:`DEMO` (``fetch`` runs trusted SQL on D and on D')."""
    rows_d, _ = fetch(
        "SELECT SUM(LEAST(n, "
        f"{PROMPTS_MAX_ROWS})) FROM (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY 1)"
    )
    squares_d, _ = fetch("SELECT SUM((age - 59) * (age - 59)) FROM users")
    sum_mult = min(_straddle(_scalar(rows_d), INT64_LIMIT, square=False), EXACT_INTEGER)
    var_mult = _straddle(_scalar(squares_d), INT64_LIMIT, square=True)
    region_d, _ = fetch(f"SELECT MIN(region) FROM users WHERE user_id = {int(pid)}")
    region = str(region_d[0][0] or "north")
    return {"pid": pid, "region": region, "sum_mult": sum_mult, "var_mult": var_mult}


def pums_facts(fetch: Fetch, pid: Any) -> dict[str, Any]:
    """Placeholders of :data:`PUMS`."""
    squares_d, _ = fetch('SELECT SUM((age - 50) * (age - 50)) FROM "pums"."pums"')
    var_mult = _straddle(_scalar(squares_d), INT64_LIMIT, square=True)
    return {"pid": pid, "var_mult": var_mult}
