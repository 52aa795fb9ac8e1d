"""Shared workloads for the peer benchmarks: data sets, queries, the analyst session.

Everything here is plain data or a deterministic generator, imported both by the dpsql
side (the project's venv) and, as a file, by the SmartNoise runner (its own venv), so it
imports nothing beyond the standard library at module level.

Data:
* PUMS: ``sample_data/pums/PUMS_pid.csv`` (1,000 people, one row each; provenance in
  ``sample_data/pums/PROVENANCE.md``).
* Scaled PUMS: PUMS rows resampled with replacement by a seeded generator, each row
  given a fresh person id 1..N, so it stays one row per person. Written under
  ``bench/out/`` (git-ignored), never committed.

SmartNoise metadata: ``PUMS_METADATA`` transcribes ``datasets/PUMS_pid.yaml`` of the
smartnoise-sdk repository (same snapshot as the CSV, see PROVENANCE.md above), with the
per-person bound ``max_ids: 1`` written out (it is SmartNoise's default) and ``rows``
set per data set.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
PUMS_CSV = ROOT / "sample_data" / "pums" / "PUMS_pid.csv"
PUMS_POLICY = ROOT / "sample_data" / "pums" / "policy.toml"

# One budget for every per-query comparison, one for the session (the PUMS policy's
# default_epsilon), and one δ for all of it (the PUMS policy's default_delta).
QUERY_EPSILON = 1.0
SESSION_EPSILON = 0.5
QUERY_DELTA = 1e-9


def pums_metadata(rows: int) -> dict[str, object]:
    """SmartNoise metadata for a PUMS-shaped table of ``rows`` rows (PUMS_pid.yaml)."""
    return {
        "": {
            "PUMS": {
                "PUMS": {
                    "rows": rows,
                    "max_ids": 1,
                    "age": {"type": "int", "lower": 0, "upper": 100},
                    "sex": {"type": "string"},
                    "educ": {"type": "string"},
                    "race": {"type": "string"},
                    "income": {"type": "int", "lower": 0, "upper": 500000},
                    "married": {"type": "string"},
                    "pid": {"type": "int", "private_id": True},
                }
            }
        }
    }


def dataset(rows: int, seed: int = 7) -> Path:
    """The PUMS CSV for ``rows`` rows: the original at 1,000, else a scaled copy."""
    if rows == 1000:
        return PUMS_CSV
    path = OUT / f"pums-{rows}.csv"
    if path.exists():
        return path
    OUT.mkdir(parents=True, exist_ok=True)
    with PUMS_CSV.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        base = [row for row in reader]
    pid = header.index("pid")
    rng = random.Random(seed)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(1, rows + 1):
            row = list(base[rng.randrange(len(base))])
            row[pid] = str(i)
            w.writerow(row)
    tmp.replace(path)
    return path


@dataclass(frozen=True)
class Query:
    """One comparison query. ``keys``: how many leading output columns are group keys.

    ``truth``/``truth_sn``: the exact statistic on the raw table (DuckDB SQL) under each
    system's own definition (SmartNoise's VARIANCE/STDDEV are population forms, DuckDB's
    the sample forms); post-processing clauses are left out, released rows are matched
    to true rows by key.
    """

    name: str
    sql: str
    keys: int
    truth: str
    truth_sn: str | None = None
    sn_sql: str | None = None  # when SmartNoise needs another spelling

    @property
    def smartnoise_sql(self) -> str:
        return self.sn_sql or self.sql

    @property
    def smartnoise_truth(self) -> str:
        return self.truth_sn or self.truth


T = "PUMS.PUMS"
QUERIES: tuple[Query, ...] = (
    Query("count", f"SELECT COUNT(*) AS n FROM {T}", 0, f"SELECT COUNT(*) FROM {T}"),
    Query("sum", f"SELECT SUM(income) AS total FROM {T}", 0, f"SELECT SUM(income) FROM {T}"),
    Query("avg", f"SELECT AVG(age) AS mean_age FROM {T}", 0, f"SELECT AVG(age) FROM {T}"),
    Query(
        "variance",
        f"SELECT VARIANCE(age) AS var_age FROM {T}",
        0,
        f"SELECT VAR_SAMP(age) FROM {T}",
        truth_sn=f"SELECT VAR_POP(age) FROM {T}",
    ),
    Query(
        "group public",
        f"SELECT sex, COUNT(*) AS n FROM {T} GROUP BY sex",
        1,
        f"SELECT sex, COUNT(*) FROM {T} GROUP BY sex",
    ),
    Query(
        "group avg",
        f"SELECT educ, AVG(income) AS mean_income FROM {T} GROUP BY educ",
        1,
        f"SELECT educ, AVG(income) FROM {T} GROUP BY educ",
    ),
    Query(
        "group private",
        f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race",
        1,
        f"SELECT race, COUNT(*) FROM {T} GROUP BY race",
    ),
    Query(
        "where",
        f"SELECT COUNT(*) AS n FROM {T} WHERE age >= 40 AND married = 1",
        0,
        f"SELECT COUNT(*) FROM {T} WHERE age >= 40 AND married = 1",
    ),
    Query(
        "where group 2 aggs",
        f"SELECT sex, COUNT(*) AS n, SUM(income) AS total FROM {T} "
        "WHERE age BETWEEN 25 AND 64 GROUP BY sex",
        1,
        f"SELECT sex, COUNT(*), SUM(income) FROM {T} WHERE age BETWEEN 25 AND 64 GROUP BY sex",
    ),
    Query(
        "having order limit",
        f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ "
        "HAVING COUNT(*) > 50 ORDER BY n DESC LIMIT 5",
        1,
        f"SELECT educ, COUNT(*) FROM {T} GROUP BY educ",
    ),
    Query(
        "group stddev",
        f"SELECT married, STDDEV(age) AS sd_age FROM {T} GROUP BY married",
        1,
        f"SELECT married, STDDEV_SAMP(age) FROM {T} GROUP BY married",
        truth_sn=f"SELECT married, STDDEV_POP(age) FROM {T} GROUP BY married",
    ),
    Query(
        "two keys order",
        f"SELECT sex, married, AVG(age) AS mean_age FROM {T} GROUP BY sex, married "
        "ORDER BY mean_age",
        2,
        f"SELECT sex, married, AVG(age) FROM {T} GROUP BY sex, married",
    ),
    Query(
        "arithmetic",
        f"SELECT SUM(income) / COUNT(*) AS per_person FROM {T}",
        0,
        f"SELECT SUM(income) / COUNT(*) FROM {T}",
    ),
)


# Queries outside the common set, to see what each side accepts or refuses.
PROBES: tuple[tuple[str, str], ...] = (
    ("STDDEV of a wide column", f"SELECT STDDEV(income) AS sd FROM {T}"),
    ("VAR spelling", f"SELECT VAR(age) AS v FROM {T}"),
    ("VAR_SAMP spelling", f"SELECT VAR_SAMP(age) AS v FROM {T}"),
    ("VAR_POP spelling", f"SELECT VAR_POP(age) AS v FROM {T}"),
    ("MIN", f"SELECT MIN(age) AS m FROM {T}"),
    ("MEDIAN", f"SELECT MEDIAN(age) AS m FROM {T}"),
    ("COUNT(DISTINCT person)", f"SELECT COUNT(DISTINCT pid) AS people FROM {T}"),
    ("COUNT(DISTINCT non-person)", f"SELECT COUNT(DISTINCT educ) AS k FROM {T}"),
    ("HAVING on a hidden aggregate", f"SELECT educ, AVG(age) AS a FROM {T} GROUP BY educ "
     "HAVING COUNT(*) > 50"),
    ("GROUP BY expression", f"SELECT age / 10 AS decade, COUNT(*) AS n FROM {T} "
     "GROUP BY age / 10"),
    ("CASE inside SUM", f"SELECT SUM(CASE WHEN income > 50000 THEN 1 ELSE 0 END) AS rich "
     f"FROM {T}"),
    ("LEAST clamp inside SUM", f"SELECT SUM(LEAST(income, 100000)) AS s FROM {T}"),
    ("row-level subquery", f"SELECT COUNT(*) AS n FROM (SELECT pid, age FROM {T} "
     "WHERE age > 30) AS s"),
    ("aggregating subquery", f"SELECT AVG(n) AS a FROM (SELECT educ, COUNT(*) AS n FROM {T} "
     "GROUP BY educ) AS s"),
    ("self-join on person", f"SELECT COUNT(*) AS n FROM {T} AS a JOIN {T} AS b "
     "ON a.pid = b.pid"),
    ("IN list", f"SELECT COUNT(*) AS n FROM {T} WHERE educ IN (9, 13)"),
    ("OR in WHERE", f"SELECT COUNT(*) AS n FROM {T} WHERE age < 20 OR age > 80"),
    ("ORDER BY aggregate expr", f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ "
     "ORDER BY COUNT(*) DESC"),
    ("raw column", f"SELECT age FROM {T}"),
    ("GROUP BY person id", f"SELECT pid, COUNT(*) AS n FROM {T} GROUP BY pid"),
    ("window function", f"SELECT COUNT(*) OVER () AS n FROM {T}"),
    ("UNION of aggregates", f"SELECT COUNT(*) AS n FROM {T} UNION ALL "
     f"SELECT COUNT(*) AS n FROM {T}"),
)


def session(eps_label: str = "") -> list[tuple[str, str]]:
    """A scripted analyst session of 100 queries: 20 questions, each asked once and then
    revisited with a repeat and post-processing variants (re-sort, HAVING, LIMIT,
    aliases, arithmetic over the released aggregates, whitespace and case), interleaved
    the way an analyst comes back to earlier answers. Returns (label, sql) pairs."""
    del eps_label
    # (base sql, four variants): every variant post-processes the base's aggregates.
    questions: list[tuple[str, list[str]]] = [
        (f"SELECT COUNT(*) AS n FROM {T}", [
            f"SELECT COUNT(*) AS n FROM {T}",
            f"SELECT COUNT(*) AS people FROM {T}",
            f"select count(*) as n from {T}",
            f"SELECT COUNT(*) / 1000.0 AS thousands FROM {T}"]),
        (f"SELECT SUM(income) AS total FROM {T}", [
            f"SELECT SUM(income) AS total FROM {T}",
            f"SELECT SUM(income) AS income_sum FROM {T}",
            f"SELECT SUM(income) / 1000 AS total_k FROM {T}",
            f"SELECT  SUM(income)  AS total  FROM {T}"]),
        (f"SELECT AVG(age) AS mean_age FROM {T}", [
            f"SELECT AVG(age) AS mean_age FROM {T}",
            f"SELECT AVG(age) AS a FROM {T}",
            f"SELECT AVG(age) * 12 AS mean_age_months FROM {T}",
            f"select avg(age) as mean_age from {T}"]),
        (f"SELECT sex, COUNT(*) AS n FROM {T} GROUP BY sex", [
            f"SELECT sex, COUNT(*) AS n FROM {T} GROUP BY sex ORDER BY n DESC",
            f"SELECT sex, COUNT(*) AS n FROM {T} GROUP BY sex ORDER BY sex",
            f"SELECT sex, COUNT(*) AS n FROM {T} GROUP BY sex ORDER BY n DESC LIMIT 1",
            f"SELECT sex AS s, COUNT(*) AS cnt FROM {T} GROUP BY sex"]),
        (f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ", [
            f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ ORDER BY n DESC",
            f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ ORDER BY n DESC LIMIT 3",
            f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ HAVING n > 100",
            f"SELECT educ, COUNT(*) AS n FROM {T} GROUP BY educ HAVING n > 20 ORDER BY educ"]),
        (f"SELECT educ, AVG(income) AS mean_income FROM {T} GROUP BY educ", [
            f"SELECT educ, AVG(income) AS mean_income FROM {T} GROUP BY educ "
            "ORDER BY mean_income DESC",
            f"SELECT educ, AVG(income) AS mean_income FROM {T} GROUP BY educ "
            "ORDER BY mean_income DESC LIMIT 5",
            f"SELECT educ, AVG(income) AS inc FROM {T} GROUP BY educ",
            f"SELECT educ, AVG(income) AS mean_income FROM {T} GROUP BY educ "
            "HAVING mean_income > 30000"]),
        (f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race", [
            f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race",
            f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race ORDER BY n DESC",
            f"SELECT race, COUNT(*) AS n FROM {T} GROUP BY race ORDER BY n DESC LIMIT 2",
            f"SELECT race AS r, COUNT(*) AS k FROM {T} GROUP BY race"]),
        (f"SELECT married, AVG(age) AS mean_age FROM {T} GROUP BY married", [
            f"SELECT married, AVG(age) AS mean_age FROM {T} GROUP BY married "
            "ORDER BY mean_age",
            f"SELECT married, AVG(age) AS a FROM {T} GROUP BY married",
            f"SELECT married, AVG(age) AS mean_age FROM {T} GROUP BY married LIMIT 1",
            f"SELECT married, AVG(age) AS mean_age FROM {T} GROUP BY married "
            "HAVING mean_age > 40"]),
        (f"SELECT sex, SUM(income) AS total FROM {T} GROUP BY sex", [
            f"SELECT sex, SUM(income) AS total FROM {T} GROUP BY sex ORDER BY total DESC",
            f"SELECT sex, SUM(income) / 1000 AS total_k FROM {T} GROUP BY sex",
            f"SELECT sex, SUM(income) AS s FROM {T} GROUP BY sex",
            f"SELECT sex, SUM(income) AS total FROM {T} GROUP BY sex "
            "ORDER BY total DESC LIMIT 1"]),
        (f"SELECT COUNT(*) AS n FROM {T} WHERE age >= 65", [
            f"SELECT COUNT(*) AS n FROM {T} WHERE age >= 65",
            f"SELECT COUNT(*) AS seniors FROM {T} WHERE age >= 65",
            f"SELECT COUNT(*) AS n FROM {T}  WHERE  age >= 65",
            f"select count(*) as n from {T} where age >= 65"]),
        (f"SELECT COUNT(*) AS n FROM {T} WHERE age >= 40 AND married = 1", [
            f"SELECT COUNT(*) AS n FROM {T} WHERE married = 1 AND age >= 40",
            f"SELECT COUNT(*) AS n FROM {T} WHERE age >= 40 AND married = 1",
            f"SELECT COUNT(*) AS c FROM {T} WHERE age >= 40 AND married = 1",
            f"SELECT COUNT(*) * 1.0 AS n FROM {T} WHERE age >= 40 AND married = 1"]),
        (f"SELECT VARIANCE(age) AS var_age FROM {T}", [
            f"SELECT VARIANCE(age) AS var_age FROM {T}",
            f"SELECT VARIANCE(age) AS v FROM {T}",
            f"select variance(age) as var_age from {T}",
            f"SELECT VARIANCE(age) / 100 AS var_age_scaled FROM {T}"]),
        (f"SELECT sex, married, COUNT(*) AS n FROM {T} GROUP BY sex, married", [
            f"SELECT sex, married, COUNT(*) AS n FROM {T} GROUP BY sex, married "
            "ORDER BY n DESC",
            f"SELECT sex, married, COUNT(*) AS n FROM {T} GROUP BY sex, married "
            "ORDER BY sex, married",
            f"SELECT sex, married, COUNT(*) AS n FROM {T} GROUP BY sex, married "
            "HAVING n > 200",
            f"SELECT sex, married, COUNT(*) AS n FROM {T} GROUP BY sex, married LIMIT 2"]),
        (f"SELECT educ, SUM(income) AS total, COUNT(*) AS n FROM {T} GROUP BY educ", [
            f"SELECT educ, SUM(income) AS total, COUNT(*) AS n FROM {T} GROUP BY educ "
            "ORDER BY total DESC",
            f"SELECT educ, SUM(income) AS total, COUNT(*) AS n FROM {T} GROUP BY educ "
            "ORDER BY n DESC LIMIT 4",
            f"SELECT educ, SUM(income) AS t, COUNT(*) AS c FROM {T} GROUP BY educ",
            f"SELECT educ, SUM(income) AS total, COUNT(*) AS n FROM {T} GROUP BY educ "
            "HAVING n > 30"]),
        (f"SELECT COUNT(*) AS n FROM {T} WHERE income > 50000", [
            f"SELECT COUNT(*) AS n FROM {T} WHERE income > 50000",
            f"SELECT COUNT(*) AS high_earners FROM {T} WHERE income > 50000",
            f"select count(*) as n from {T} where income > 50000",
            f"SELECT COUNT(*) / 10.0 AS pct FROM {T} WHERE income > 50000"]),
        (f"SELECT married, SUM(income) AS total FROM {T} GROUP BY married", [
            f"SELECT married, SUM(income) AS total FROM {T} GROUP BY married "
            "ORDER BY total",
            f"SELECT married, SUM(income) AS s FROM {T} GROUP BY married",
            f"SELECT married, SUM(income) AS total FROM {T} GROUP BY married LIMIT 1",
            f"SELECT married, SUM(income) AS total FROM {T} GROUP BY married "
            "ORDER BY total DESC LIMIT 1"]),
        (f"SELECT AVG(income) AS mean_income FROM {T} WHERE age BETWEEN 25 AND 64", [
            f"SELECT AVG(income) AS mean_income FROM {T} WHERE age BETWEEN 25 AND 64",
            f"SELECT AVG(income) AS m FROM {T} WHERE age BETWEEN 25 AND 64",
            f"SELECT AVG(income) / 1000 AS mean_k FROM {T} WHERE age BETWEEN 25 AND 64",
            f"select avg(income) as mean_income from {T} where age between 25 and 64"]),
        (f"SELECT race, AVG(age) AS mean_age FROM {T} GROUP BY race", [
            f"SELECT race, AVG(age) AS mean_age FROM {T} GROUP BY race ORDER BY mean_age",
            f"SELECT race, AVG(age) AS a FROM {T} GROUP BY race",
            f"SELECT race, AVG(age) AS mean_age FROM {T} GROUP BY race LIMIT 3",
            f"SELECT race, AVG(age) AS mean_age FROM {T} GROUP BY race "
            "ORDER BY mean_age DESC LIMIT 1"]),
        (f"SELECT sex, AVG(income) AS mean_income FROM {T} WHERE married = 1 GROUP BY sex", [
            f"SELECT sex, AVG(income) AS mean_income FROM {T} WHERE married = 1 "
            "GROUP BY sex ORDER BY mean_income DESC",
            f"SELECT sex, AVG(income) AS mi FROM {T} WHERE married = 1 GROUP BY sex",
            f"SELECT sex, AVG(income) AS mean_income FROM {T} WHERE married = 1 "
            "GROUP BY sex LIMIT 1",
            f"SELECT sex, AVG(income) / 1000 AS mean_k FROM {T} WHERE married = 1 "
            "GROUP BY sex"]),
        (f"SELECT educ, AVG(age) AS mean_age FROM {T} GROUP BY educ", [
            f"SELECT educ, AVG(age) AS mean_age FROM {T} GROUP BY educ ORDER BY mean_age",
            f"SELECT educ, AVG(age) AS a FROM {T} GROUP BY educ",
            f"SELECT educ, AVG(age) AS mean_age FROM {T} GROUP BY educ "
            "ORDER BY mean_age DESC LIMIT 3",
            f"SELECT educ, AVG(age) AS mean_age FROM {T} GROUP BY educ "
            "HAVING mean_age > 45"]),
    ]
    out: list[tuple[str, str]] = []
    # Five passes: the 20 questions first, then each pass revisits every question with
    # its next variant, in a rotated order so revisits are not in lockstep.
    for q, (base, _) in enumerate(questions):
        out.append((f"Q{q + 1}", base))
    for v in range(4):
        order = list(range(len(questions)))
        order = order[v * 5:] + order[:v * 5]
        for q in order:
            out.append((f"Q{q + 1}.{v + 1}", questions[q][1][v]))
    assert len(out) == 100
    return out


def pums_policy(csv_path: Path, ledger: Path, *, mechanism: str, population_delta: float) -> str:
    """The PUMS policy of ``sample_data/pums`` for another CSV, ledger, mechanism and
    population δ, with a cap no benchmark reaches (the ledger's totals are read, not
    enforced, here)."""
    text = PUMS_POLICY.read_text()
    for old, new in (
        ('"PUMS_pid.csv"', f'"{csv_path}"'),
        ('"../../state/pums-ledger.sqlite"', f'"{ledger}"'),
        ("epsilon_cap = 10.0", "epsilon_cap = 1000000.0"),
        ('mechanism = "gaussian"', f'mechanism = "{mechanism}"'),
        ("delta = 1e-6 ", f"delta = {population_delta!r} "),
    ):
        if old not in text:
            raise RuntimeError(f"{PUMS_POLICY} changed: {old!r} not found")
        text = text.replace(old, new)
    return text
