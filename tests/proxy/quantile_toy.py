"""A small database and policy for the quantile tests: known values, NULL, NaN, ±inf and
huge numbers, a date column, an unbounded column, several rows per person."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

from proxy.policy import Policy, parse_policy

PEOPLE = 400
POLICY = """
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
mechanism = "{mechanism}"

[database]
duckdb = "{db}"

[ledger]
path = "{ledger}"

[populations.people]
epsilon_cap = 100000.0
delta = 1e-6

[tables.people]
population = "people"
unit = "pid"
one_row_per_person = true
columns.grp = {{ values = ["a", "b", "c", "d"] }}
columns.v   = {{ lower = 0, upper = 1000 }}
columns.x   = {{ lower = -10, upper = 10 }}

[tables.events]
population = "people"
unit = "pid"
max_groups = 2
max_rows_per_group = 3
columns.kind = {{ values = ["p", "q"] }}
columns.w    = {{ lower = 0, upper = 100 }}
"""


def x_value(pid: int) -> float | None:
    """x: mostly in [-10, 10], with NULL, NaN, ±inf and huge values among them."""
    specials: dict[int, float | None] = {
        0: None,
        1: math.nan,
        2: math.inf,
        3: -math.inf,
        4: 1e300,
        5: -1e300,
    }
    if pid in specials:
        return specials[pid]
    return ((pid * 37) % 201 - 100) / 10.0


def build(path: Path) -> Path:
    """people: pid 0..399, grp a/b/c (no d), v = pid * 2.5 rounded (so v spans 0..997),
    x as :func:`x_value`, u unbounded, d a date; events: 1..7 rows per person, kind
    p/q, w in 0..100, and a label with no public domain (partition selection)."""
    con = duckdb.connect(str(path))
    try:
        con.execute(
            "CREATE TABLE people (pid INTEGER, grp VARCHAR, v INTEGER, x DOUBLE, u INTEGER, d DATE)"
        )
        rows = [
            (
                pid,
                "abc"[pid % 3],
                round(pid * 2.5),
                x_value(pid),
                pid * 1000,
                f"2024-{1 + pid % 12:02d}-{1 + pid % 28:02d}",
            )
            for pid in range(PEOPLE)
        ]
        con.executemany("INSERT INTO people VALUES (?, ?, ?, ?, ?, CAST(? AS DATE))", rows)
        con.execute("CREATE TABLE events (pid INTEGER, kind VARCHAR, w INTEGER, label VARCHAR)")
        events = [
            (pid, "pq"[(pid + i) % 2], (pid * 7 + i * 13) % 101, "common" if pid % 5 else "rare")
            for pid in range(PEOPLE)
            for i in range(1 + pid % 7)
        ]
        con.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", events)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


def policy(folder: Path, db: Path, *, mechanism: str = "gaussian") -> Policy:
    text = POLICY.format(db=db, ledger=folder / "ledger.sqlite", mechanism=mechanism)
    return parse_policy(text, base_dir=folder)


SMALL_POLICY = """
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
mechanism = "gaussian"
clipping_share = 0.0

[database]
duckdb = "{db}"

[ledger]
path = "{ledger}"

[populations.obs]
epsilon_cap = 100000.0
delta = 1e-6

[tables.obs]
population = "obs"
unit = "pid"
one_row_per_person = true
columns.g = {{ values = ["x", "y"] }}
columns.v = {{ lower = {lower}, upper = {upper} }}
"""


def small(folder: Path, rows: list[tuple[str, int]], lower: int, upper: int) -> Policy:
    """One row per person: (group, value) pairs as table obs(pid, g, v), v on [lower,
    upper]; no clipping estimate, so the quantile columns are the only draws."""
    db = folder / "obs.duckdb"
    con = duckdb.connect(str(db))
    try:
        con.execute("CREATE TABLE obs (pid INTEGER, g VARCHAR, v INTEGER)")
        con.executemany(
            "INSERT INTO obs VALUES (?, ?, ?)", [(i, g, v) for i, (g, v) in enumerate(rows)]
        )
        con.execute("CHECKPOINT")
    finally:
        con.close()
    text = SMALL_POLICY.format(db=db, ledger=folder / "ledger.sqlite", lower=lower, upper=upper)
    return parse_policy(text, base_dir=folder)
