"""Seeded generator of a synthetic LLM-usage dataset in DuckDB (the demo data).

    python -m sample_data.generate --out sample_data/usage.duckdb --people 5000 \
        --prompts 100000 --seed 7

Tables: ``users`` (one row per person), ``prompts`` and ``tickets`` (many rows per
person, heavy-tailed: most people write a few prompts, a few write hundreds), and the
public ``regions``. Values stay inside the bounds and domains of ``sample_data/policy.toml``
so that demo answers are not dominated by clamping. Everything is drawn with numpy from
one seed; this is synthetic *data*, not released noise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from rich.progress import Progress

REGIONS = ("north", "south", "east", "west")
REGION_NAMES = ("North", "South", "East", "West")
PLANS = ("free", "pro", "team")
MODELS = ("small", "medium", "large")
CATEGORIES = ("billing", "bug", "account", "abuse")

_REGION_P = (0.34, 0.26, 0.22, 0.18)
_PLAN_P = (0.70, 0.22, 0.08)
_PLAN_ACTIVITY = np.array([1.0, 2.0, 3.0])  # paying plans write more prompts
_MODEL_P_BY_PLAN = np.array([[0.75, 0.20, 0.05], [0.30, 0.50, 0.20], [0.20, 0.40, 0.40]])
_CATEGORY_P = (0.35, 0.35, 0.20, 0.10)
_ACTIVITY_SIGMA = 1.5  # lognormal spread of per-person activity: the heavy tail
_FIRST_MONTH = np.datetime64("2022-01", "M")
_SIGNUP_MONTHS = 36
_END = np.datetime64("2025-07-01T00:00:00", "s")
_CHUNK_ROWS = 2_000_000  # prompts generated and loaded per step; bounds peak memory

_SCHEMA = """
CREATE TABLE regions (region VARCHAR, name VARCHAR);
CREATE TABLE users (user_id BIGINT, region VARCHAR, plan VARCHAR, age INTEGER,
                    signup_month DATE);
CREATE TABLE prompts (prompt_id BIGINT, user_id BIGINT, ts TIMESTAMP, model VARCHAR,
                      tokens_in INTEGER, tokens_out INTEGER, latency_ms INTEGER,
                      flagged BOOLEAN);
CREATE TABLE tickets (ticket_id BIGINT, user_id BIGINT, opened_at TIMESTAMP,
                      category VARCHAR, resolution_minutes INTEGER);
"""


def _labels(names: tuple[str, ...]) -> str:
    """A SQL list literal to decode 0-based codes with ``list[code + 1]``."""
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def generate(out: Path, *, people: int, prompts: int, seed: int, progress: bool = False) -> Path:
    """Write the dataset to ``out`` atomically (temp file + rename) and return ``out``."""
    if people < 1 or prompts < 0:
        raise ValueError("need people >= 1 and prompts >= 0")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    _remove(tmp)
    rng = np.random.default_rng(seed)
    try:
        con = duckdb.connect(str(tmp))
        try:
            _fill(con, rng, people, prompts, progress)
        finally:
            con.close()
        os.replace(tmp, out)
    finally:
        _remove(tmp)
    return out


def _remove(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _fill(
    con: duckdb.DuckDBPyConnection,
    rng: np.random.Generator,
    people: int,
    prompts: int,
    progress: bool,
) -> None:
    con.execute(_SCHEMA)
    with Progress(disable=not progress) as bar:
        steps = 4 + -(-prompts // _CHUNK_ROWS)
        task = bar.add_task(f"{people:,} people, {prompts:,} prompts", total=steps)
        con.execute(
            "INSERT INTO regions SELECT unnest(?), unnest(?)",
            [list(REGIONS), list(REGION_NAMES)],
        )
        bar.advance(task)

        users = _users(rng, people)
        _insert(
            con,
            "users",
            users,
            f"SELECT user_id, {_labels(REGIONS)}[region + 1], {_labels(PLANS)}[plan + 1], "
            "age, signup_month FROM chunk",
        )
        bar.advance(task)

        weights = rng.lognormal(0.0, _ACTIVITY_SIGMA, people) * _PLAN_ACTIVITY[users["plan"]]
        counts = rng.multinomial(prompts, weights / weights.sum())
        start = users["signup_month"].astype("datetime64[s]").astype(np.int64)
        for chunk in _prompt_chunks(rng, users, counts, start):
            _insert(
                con,
                "prompts",
                chunk,
                f"SELECT prompt_id, user_id, ts, {_labels(MODELS)}[model + 1], tokens_in, "
                "tokens_out, latency_ms, flagged FROM chunk",
            )
            bar.advance(task)

        _insert(
            con,
            "tickets",
            _tickets(rng, users, counts, start),
            f"SELECT ticket_id, user_id, opened_at, {_labels(CATEGORIES)}[category + 1], "
            "resolution_minutes FROM chunk",
        )
        bar.advance(task)
        con.execute("CHECKPOINT")
        bar.advance(task)


def _insert(
    con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, np.ndarray], select: str
) -> None:
    chunk = pa.table({name: pa.array(values) for name, values in columns.items()})
    con.register("chunk", chunk)
    try:
        con.execute(f"INSERT INTO {table} {select}")
    finally:
        con.unregister("chunk")


def _users(rng: np.random.Generator, people: int) -> dict[str, np.ndarray]:
    month = rng.integers(0, _SIGNUP_MONTHS, people)
    return {
        "user_id": np.arange(1, people + 1, dtype=np.int64),
        "region": rng.choice(len(REGIONS), people, p=_REGION_P).astype(np.int8),
        "plan": rng.choice(len(PLANS), people, p=_PLAN_P).astype(np.int8),
        "age": np.minimum(18 + np.rint(rng.gamma(2.2, 10.0, people)), 100).astype(np.int32),
        "signup_month": (_FIRST_MONTH + month).astype("datetime64[D]"),
    }


def _times(rng: np.random.Generator, start: np.ndarray) -> np.ndarray:
    """Uniform instants between each row's signup and the end of the data."""
    end = _END.astype(np.int64)
    secs = start + (rng.random(start.shape[0]) * (end - start)).astype(np.int64)
    return secs.astype("datetime64[s]").astype("datetime64[us]")


def _prompt_chunks(
    rng: np.random.Generator, users: dict[str, np.ndarray], counts: np.ndarray, start: np.ndarray
) -> Iterator[dict[str, np.ndarray]]:
    ends = np.cumsum(counts)
    first_user = 0
    first_row = 0
    while first_row < int(ends[-1]):
        # whole persons per chunk, so each chunk is one contiguous block of users
        last_user = max(
            int(np.searchsorted(ends, first_row + _CHUNK_ROWS, "right")), first_user + 1
        )
        block = slice(first_user, last_user)
        n = int(ends[last_user - 1]) - first_row
        owner = np.repeat(np.arange(first_user, last_user), counts[block])
        yield _prompts(rng, users, owner, start, first_row, n)
        first_user, first_row = last_user, first_row + n


def _prompts(
    rng: np.random.Generator,
    users: dict[str, np.ndarray],
    owner: np.ndarray,
    start: np.ndarray,
    offset: int,
    n: int,
) -> dict[str, np.ndarray]:
    cum = np.cumsum(_MODEL_P_BY_PLAN, axis=1)[users["plan"][owner]]
    u = rng.random(n)
    model = ((u > cum[:, 0]).astype(np.int8) + (u > cum[:, 1]).astype(np.int8)).astype(np.int8)
    tokens_in = np.clip(np.rint(rng.lognormal(np.log(250.0), 1.0, n)), 1, 4000)
    size = np.array([1.0, 1.3, 1.6])[model]
    tokens_out = np.clip(np.rint(rng.lognormal(np.log(400.0), 0.9, n) * size), 1, 8000)
    base_ms = np.array([150.0, 300.0, 600.0])[model]
    per_token_ms = np.array([5.0, 12.0, 25.0])[model]
    jitter = rng.lognormal(0.0, 0.3, n)
    latency = np.clip(np.rint((base_ms + tokens_out * per_token_ms) * jitter), 50, 60000)
    flagged = rng.random(n) < np.where(tokens_in > 2000, 0.03, 0.006)
    return {
        "prompt_id": np.arange(offset + 1, offset + n + 1, dtype=np.int64),
        "user_id": users["user_id"][owner],
        "ts": _times(rng, start[owner]),
        "model": model,
        "tokens_in": tokens_in.astype(np.int32),
        "tokens_out": tokens_out.astype(np.int32),
        "latency_ms": latency.astype(np.int32),
        "flagged": flagged,
    }


def _tickets(
    rng: np.random.Generator, users: dict[str, np.ndarray], counts: np.ndarray, start: np.ndarray
) -> dict[str, np.ndarray]:
    per_user = rng.poisson(0.05 + 0.004 * counts)
    owner = np.repeat(np.arange(counts.shape[0]), per_user)
    n = owner.shape[0]
    category = rng.choice(len(CATEGORIES), n, p=_CATEGORY_P).astype(np.int8)
    slow = np.where(category == CATEGORIES.index("abuse"), 4.0, 1.0)
    minutes = np.clip(np.rint(rng.lognormal(np.log(90.0), 1.2, n) * slow), 1, 10080)
    return {
        "ticket_id": np.arange(1, n + 1, dtype=np.int64),
        "user_id": users["user_id"][owner],
        "opened_at": _times(rng, start[owner]),
        "category": category,
        "resolution_minutes": minutes.astype(np.int32),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("sample_data/usage.duckdb"))
    parser.add_argument("--people", type=int, default=5000)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    path = generate(
        args.out, people=args.people, prompts=args.prompts, seed=args.seed, progress=True
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
