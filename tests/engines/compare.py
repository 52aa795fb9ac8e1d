"""Comparing bounded cores across engines: the same exact (noise-free) answers, group by
group, and -- where L0 sampling picks groups -- the same number of kept groups per
person."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

from proxy.engine import Engine
from proxy.plan import Plan
from proxy.request import QueryRequest
from proxy.rewrite import keyed_groups
from proxy.rewrite.l0 import takes_seed

SEED = 0x1234_5678_9ABC
# Float statistics are exact DECIMAL sums of per-person values that each engine rounds
# from a DOUBLE to 9 decimals its own way (a last-digit difference per person at most).
FLOAT_TOLERANCE = 1e-6


def _key(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.datetime64):
        value = value.astype("datetime64[us]").item()
    if isinstance(value, int) and not isinstance(value, bool) and value > 10**15:
        # DuckDB's fetchnumpy gives TIMESTAMP as nanoseconds since the epoch
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value // 1000)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.replace(tzinfo=None)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def by_group(plan: Plan, exact: Mapping[str, np.ndarray]) -> dict[tuple[Any, ...], dict[str, Any]]:
    columns = [s.column for s in plan.statistics if s.column in exact] + ["__persons"]
    keys = [list(exact[k]) for k in plan.key_columns]
    rows = len(exact["__persons"])
    out = {}
    for i in range(rows):
        key = tuple(_key(k[i]) for k in keys)
        out[key] = {c: _value(exact[c][i]) for c in columns}
        for name in histograms(plan):
            out[key][name] = _histogram(exact[f"{name}_b"][i], exact[f"{name}_n"][i])
    return out


def histograms(plan: Plan) -> list[str]:
    """The quantile histograms' names (``__h<j>``: columns ``__h<j>_b`` and ``__h<j>_n``)."""
    return sorted({q.statistic.histogram for q in plan.quantiles})


def _histogram(bins: Any, counts: Any) -> dict[int, int]:
    """A sparse histogram as bin -> count: the engines list the bins in their own order,
    and give NULL (DuckDB, PostgreSQL) or an empty list (Spark) for no value."""
    if bins is None or counts is None:
        return {}
    pairs = zip(np.asarray(bins).ravel().tolist(), np.asarray(counts).ravel().tolist(), strict=True)
    return {int(b): int(n) for b, n in pairs}


def _value(v: Any) -> Any:
    v = v.item() if isinstance(v, np.generic) else v
    return 0 if v is None else v


def differences(plan: Plan, a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> list[str]:
    """What differs between two engines' exact outputs of one plan (empty: the same)."""
    left, right = by_group(plan, a), by_group(plan, b)
    if set(left) != set(right):
        return [f"groups differ: {sorted(map(repr, set(left) ^ set(right)))[:6]}"]
    out = []
    for key, stats in left.items():
        for column, value in stats.items():
            other = right[key][column]
            if isinstance(value, dict):
                if value != other:
                    out.append(f"group {key!r} {column}: histograms differ")
                continue
            if isinstance(value, float) or isinstance(other, float):
                same = math.isclose(
                    float(value), float(other), rel_tol=1e-9, abs_tol=FLOAT_TOLERANCE
                )
            else:
                same = int(value) == int(other)
            if not same:
                out.append(f"group {key!r} {column}: {value!r} vs {other!r}")
    return out


def neutral(core_sql: str) -> str:
    """A core as every engine reads it: DuckDB's keyed groupings plain
    (proxy/rewrite/keyed_groups.py), and a key table DuckDB vouches for grouped by the
    person as the other engines group it (proxy/rewrite/key_join.py)."""
    tree = keyed_groups.plain(sqlglot.parse_one(core_sql, read="duckdb"))
    for cte in tree.find_all(exp.CTE):
        body = cte.this
        if cte.alias != "pk" or not isinstance(body, exp.Select) or body.args.get("group"):
            continue
        person, *keys = body.expressions
        body.set(
            "expressions",
            [person, *(exp.alias_(exp.Min(this=k.this), k.alias) for k in keys)],
        )
        body.set("group", exp.Group(expressions=[person.this.copy()]))
    return tree.sql(dialect="duckdb")


def exact(
    engine: Engine, sql: str, max_rows: int | None = None
) -> tuple[Plan, dict[str, np.ndarray]]:
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0, max_rows_per_group=max_rows))
    params = [SEED] if takes_seed(plan.core_sql) else []
    return plan, engine.executor.run(plan.core_sql, params)


def kept_per_person(engine: Engine, plan: Plan) -> dict[Any, int]:
    """How many groups each person keeps after the L0 cut (the core with its last
    SELECT replaced by a count per person over ``bounded``)."""
    tree = sqlglot.parse_one(plan.core_sql, read="duckdb")
    assert isinstance(tree, exp.Select)
    per_person = sqlglot.parse_one(
        "SELECT __u, COUNT(*) AS n FROM bounded GROUP BY __u", read="duckdb"
    )
    per_person.set("with_", tree.args["with_"])
    rows = engine.executor.evaluate(per_person.sql(dialect="duckdb"), [SEED])
    return {_key(u): int(n) for u, n in rows}


def kept_values_per_person(engine: Engine, plan: Plan, index: int = 0) -> dict[Any, int]:
    """How many distinct values each person keeps for the DISTINCT aggregate ``index``
    (the core's ``dk<index>`` CTE: at most C per person and group, by the engine's hash)."""
    tree = sqlglot.parse_one(plan.core_sql, read="duckdb")
    assert isinstance(tree, exp.Select)
    per_person = sqlglot.parse_one(
        f"SELECT __u, COUNT(*) AS n FROM dk{index} GROUP BY __u", read="duckdb"
    )
    per_person.set("with_", tree.args["with_"])
    params = [SEED] if takes_seed(plan.core_sql) else []
    rows = engine.executor.evaluate(per_person.sql(dialect="duckdb"), params)
    return {_key(u): int(n) for u, n in rows}


def assert_same(reference: Engine, other: Engine, sql: str, *, same_core: bool = True) -> None:
    """``other`` gives ``reference``'s bounded answer: the same exact statistics per
    group or, where L0 sampling picks groups with each engine's own keyed hash, the same
    number of kept groups for every person (min(their groups, K)) and in total. With
    ``same_core`` (the rule) both engines also plan one engine-neutral core."""
    plan, on_ref = exact(reference, sql)
    other_plan, on_other = exact(other, sql)
    if same_core:
        assert neutral(other_plan.core_sql) == neutral(plan.core_sql)
    if "?" not in neutral(plan.core_sql):
        assert differences(plan, on_ref, on_other) == []
        return
    kept_ref = kept_per_person(reference, plan)
    kept_other = kept_per_person(other, plan)
    assert kept_ref == kept_other
    assert max(kept_other.values(), default=0) <= plan.max_groups
    assert sum(on_ref["__persons"]) == sum(on_other["__persons"])


def assert_own_seed_list_keyed(reference: Engine, other: Engine, sql: str, listed: str) -> None:
    """``sql`` (a core without a seed, with a long IN list) reads a seed of its own on
    ``other`` (its rendered text lists ``listed``, the engine's keyed hash, and the
    executor binds the seed), and its core gives on ``other`` what it gives on
    ``reference`` (the same core on both: each engine's own plan may hold caps it
    released itself), with somebody counted."""
    _, plan = other.prepare(QueryRequest(sql, epsilon=1.0))
    assert not takes_seed(plan.core_sql)
    assert f"in ({listed}" in other.executor.rendered(plan.core_sql).lower()  # type: ignore[attr-defined]
    on_other = other.executor.run(plan.core_sql, [])
    on_reference = reference.executor.run(plan.core_sql, [])
    assert differences(plan, on_reference, on_other) == []
    assert int(on_reference["__persons"][0]) > 0


def keyed_double(forms: Any, column: str, seed: exp.Expr, dialect: str) -> str:
    """The engine's keyed hash of ``column`` cast to DOUBLE, as a keyed float join
    writes it (keyed_groups._floats), in ``dialect``."""
    from proxy.engines.kinds import FLOAT

    value = exp.Cast(this=exp.column(column), to=exp.DataType.build("DOUBLE"))
    return str(forms.keyed_hash([value], [FLOAT], seed).sql(dialect=dialect))
