"""The questions of the accuracy benchmark (``bench/accuracy.py``): what an analyst of
the demo data or of PUMS would ask, each with its exact answer in plain DuckDB SQL."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Data(Enum):
    DEMO = "demo"
    PUMS = "pums"


@dataclass(frozen=True)
class Question:
    """One question: the analyst's SQL, how many leading output columns are keys (one
    value column follows), and the exact answer in plain DuckDB SQL (keys, value; no
    ORDER BY or LIMIT: released rows are matched to exact rows by key)."""

    name: str
    data: Data
    sql: str
    keys: int
    truth: str
    what: str  # the feature of the issue it exercises
    smartnoise_sql: str | None = None  # PUMS: SmartNoise's spelling, when it answers it
    smartnoise_truth: str | None = None  # under SmartNoise's definition (VAR/STDDEV_POP)


P = "prompts JOIN users USING (user_id)"
T = "PUMS.PUMS"
QUESTIONS: tuple[Question, ...] = (
    Question("prompts by region", Data.DEMO,
             f"SELECT region, COUNT(*) AS n FROM {P} GROUP BY region", 1,
             f"SELECT region, COUNT(*) FROM {P} GROUP BY region", "count, multi-row table"),
    Question("mean tokens_out by plan", Data.DEMO,
             f"SELECT plan, AVG(tokens_out) AS a FROM {P} GROUP BY plan", 1,
             f"SELECT plan, AVG(tokens_out) FROM {P} GROUP BY plan", "AVG, consistent bounding"),
    Question("top 10 busiest days", Data.DEMO,
             "SELECT date_trunc('day', ts) AS day, COUNT(*) AS n FROM prompts GROUP BY day "
             "ORDER BY n DESC LIMIT 10", 1,
             "SELECT date_trunc('day', ts), COUNT(*) FROM prompts GROUP BY 1",
             "daily key: partition selection, empty answer"),
    Question("prompts per week", Data.DEMO,
             "SELECT date_trunc('week', ts) AS week, COUNT(*) AS n FROM prompts GROUP BY week",
             1, "SELECT date_trunc('week', ts), COUNT(*) FROM prompts GROUP BY 1",
             "weekly key: partition selection"),
    Question("prompts per month", Data.DEMO,
             "SELECT date_trunc('month', ts) AS month, COUNT(*) AS n FROM prompts "
             "GROUP BY month", 1,
             "SELECT date_trunc('month', ts), COUNT(*) FROM prompts GROUP BY 1",
             "monthly key: partition selection"),
    Question("flagged rate by model", Data.DEMO,
             "SELECT model, SUM(flagged) / COUNT(*) AS rate FROM prompts GROUP BY model", 1,
             "SELECT model, SUM(flagged) / COUNT(*) FROM prompts GROUP BY model",
             "ratio of released values"),
    Question("prompts by model", Data.DEMO,
             "SELECT model, COUNT(*) AS n FROM prompts GROUP BY model", 1,
             "SELECT model, COUNT(*) FROM prompts GROUP BY model", "count, declared domain"),
    Question("tokens_in by plan", Data.DEMO,
             f"SELECT plan, SUM(tokens_in) AS s FROM {P} GROUP BY plan", 1,
             f"SELECT plan, SUM(tokens_in) FROM {P} GROUP BY plan", "SUM"),
    Question("mean latency by model", Data.DEMO,
             "SELECT model, AVG(latency_ms) AS a FROM prompts GROUP BY model", 1,
             "SELECT model, AVG(latency_ms) FROM prompts GROUP BY model", "AVG"),
    Question("sd of tokens_out by plan", Data.DEMO,
             f"SELECT plan, STDDEV(tokens_out) AS sd FROM {P} GROUP BY plan", 1,
             f"SELECT plan, STDDEV_SAMP(tokens_out) FROM {P} GROUP BY plan", "STDDEV"),
    Question("variance of tokens_in by model", Data.DEMO,
             "SELECT model, VAR_POP(tokens_in) AS v FROM prompts GROUP BY model", 1,
             "SELECT model, VAR_POP(tokens_in) FROM prompts GROUP BY model", "VAR"),
    Question("active people by region", Data.DEMO,
             f"SELECT region, COUNT(DISTINCT user_id) AS people FROM {P} GROUP BY region", 1,
             f"SELECT region, COUNT(DISTINCT user_id) FROM {P} GROUP BY region",
             "COUNT(DISTINCT person)"),
    Question("prompts per active person by plan", Data.DEMO,
             f"SELECT plan, COUNT(*) / COUNT(DISTINCT user_id) AS per_person FROM {P} "
             "GROUP BY plan", 1,
             f"SELECT plan, COUNT(*) / COUNT(DISTINCT user_id) FROM {P} GROUP BY plan",
             "ratio of counts"),
    Question("prompts by region and plan", Data.DEMO,
             f"SELECT region, plan, COUNT(*) AS n FROM {P} GROUP BY region, plan", 2,
             f"SELECT region, plan, COUNT(*) FROM {P} GROUP BY region, plan", "two keys"),
    Question("extra output tokens by model", Data.DEMO,
             "SELECT model, SUM(tokens_out) - SUM(tokens_in) AS d FROM prompts GROUP BY model",
             1, "SELECT model, SUM(tokens_out) - SUM(tokens_in) FROM prompts GROUP BY model",
             "difference of released values"),
    Question("flagged prompts by region", Data.DEMO,
             f"SELECT region, COUNT(*) AS n FROM {P} WHERE flagged GROUP BY region", 1,
             f"SELECT region, COUNT(*) FROM {P} WHERE flagged GROUP BY region",
             "small counts"),
    Question("tickets by category", Data.DEMO,
             "SELECT category, COUNT(*) AS n FROM tickets GROUP BY category", 1,
             "SELECT category, COUNT(*) FROM tickets GROUP BY category", "count, second table"),
    Question("mean resolution by category", Data.DEMO,
             "SELECT category, AVG(resolution_minutes) AS m FROM tickets GROUP BY category", 1,
             "SELECT category, AVG(resolution_minutes) FROM tickets GROUP BY category",
             "AVG of a wide column on few rows"),
    Question("users by region", Data.DEMO,
             "SELECT region, COUNT(*) AS n FROM users GROUP BY region", 1,
             "SELECT region, COUNT(*) FROM users GROUP BY region", "one row per person"),
    Question("mean age by plan", Data.DEMO,
             "SELECT plan, AVG(age) AS a FROM users GROUP BY plan", 1,
             "SELECT plan, AVG(age) FROM users GROUP BY plan", "AVG, one row per person"),
    Question("(SUM(age)) by region", Data.DEMO,
             "SELECT region, (SUM(age)) AS s FROM users GROUP BY region", 1,
             "SELECT region, SUM(age) FROM users GROUP BY region", "parenthesised aggregate"),
    # PUMS (one row per person; SmartNoise answers the same questions on the same data)
    Question("PUMS people by age", Data.PUMS,
             f"SELECT age, COUNT(*) AS n FROM {T} GROUP BY age", 1,
             f"SELECT age, COUNT(*) FROM {T} GROUP BY age", "public integer domain",
             smartnoise_sql=f"SELECT age, COUNT(*) AS n FROM {T} GROUP BY age"),
    Question("PUMS mean income by education", Data.PUMS,
             f"SELECT educ, AVG(income) AS a FROM {T} GROUP BY educ", 1,
             f"SELECT educ, AVG(income) FROM {T} GROUP BY educ", "AVG, declared domain",
             smartnoise_sql=f"SELECT educ, AVG(income) AS a FROM {T} GROUP BY educ"),
    Question("PUMS (SUM(age)) by sex", Data.PUMS,
             f"SELECT sex, (SUM(age)) AS s FROM {T} GROUP BY sex", 1,
             f"SELECT sex, SUM(age) FROM {T} GROUP BY sex", "parenthesised aggregate",
             smartnoise_sql=f"SELECT sex, (SUM(age)) AS s FROM {T} GROUP BY sex"),
    Question("PUMS sd of age by married", Data.PUMS,
             f"SELECT married, STDDEV(age) AS sd FROM {T} GROUP BY married", 1,
             f"SELECT married, STDDEV_SAMP(age) FROM {T} GROUP BY married", "STDDEV",
             smartnoise_sql=f"SELECT married, STDDEV(age) AS sd FROM {T} GROUP BY married",
             smartnoise_truth=f"SELECT married, STDDEV_POP(age) FROM {T} GROUP BY married"),
    Question("PUMS variance of age by sex", Data.PUMS,
             f"SELECT sex, VARIANCE(age) AS v FROM {T} GROUP BY sex", 1,
             f"SELECT sex, VAR_SAMP(age) FROM {T} GROUP BY sex", "VAR",
             smartnoise_sql=f"SELECT sex, VARIANCE(age) AS v FROM {T} GROUP BY sex",
             smartnoise_truth=f"SELECT sex, VAR_POP(age) FROM {T} GROUP BY sex"),
    Question("PUMS income per person by sex", Data.PUMS,
             f"SELECT sex, SUM(income) / COUNT(*) AS r FROM {T} GROUP BY sex", 1,
             f"SELECT sex, SUM(income) / COUNT(*) FROM {T} GROUP BY sex", "ratio",
             smartnoise_sql=f"SELECT sex, SUM(income) / COUNT(*) AS r FROM {T} GROUP BY sex"),
    Question("PUMS people by race", Data.PUMS,
             f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race", 1,
             f"SELECT race, COUNT(*) FROM {T} GROUP BY race", "partition selection",
             smartnoise_sql=f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race"),
    Question("PUMS mean age of the married", Data.PUMS,
             f"SELECT AVG(age) AS a FROM {T} WHERE married = 1", 0,
             f"SELECT AVG(age) FROM {T} WHERE married = 1", "AVG with a filter",
             smartnoise_sql=f"SELECT AVG(age) AS a FROM {T} WHERE married = 1"),
)
