"""Rule: each person contributes to at most K groups (L0).

Each person keeps the K groups with the smallest keyed hash of (person, group, secret
seed). Only the persons with more than K groups are looked at: one grouped aggregation
over the per-person rows finds, for each such person, the K-th and (K+1)-th smallest
hashes (DuckDB's ``min(h, K + 1)`` keeps a small heap per person, no sort), and a join
on those persons alone cuts their rows at the K-th hash. Persons with at most K groups
keep them all and cost no more than a hash-join probe that misses.

The cut keeps a group iff its hash is below the K-th smallest, or equal to it while the
(K+1)-th is strictly larger. Without hash collisions that is exactly the K smallest; a
collision at the boundary drops the tied groups instead of keeping K+1, so the bound of
K groups holds for every input, not just with high probability.

The choice depends only on the person's own rows and the seed, so it bounds L0 without
touching anyone else's contribution. The seed is a query parameter bound at execution,
never part of the SQL text or the cache key.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

import sqlglot
from sqlglot import exp

from proxy.rewrite import core as C

# A quoted string or identifier of DuckDB SQL as sqlglot writes it (a quote doubled).
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def takes_seed(sql: str) -> bool:
    """Whether the core ``sql`` has the seed's placeholder: a ``?`` or a ``$1`` (a keyed
    core's, rewrite/keyed_groups.py) outside quotes (a ``?`` in a literal, ``model =
    'a?b'``, made planning pass a parameter the statement did not take, refused as a
    binder error, or, when the catalog typed the keys and no DESCRIBE ran first, failed
    after the charge). Analysts' placeholders are refused by the checker."""
    if "?" not in sql and "$1" not in sql:
        return False
    bare = _QUOTED.sub("", sql)
    return "?" in bare or "$1" in bare


def describe_params(sql: str) -> list[int]:
    """The parameters to bind ``sql`` without running it: a stand-in seed when it takes
    one (describing reads no data, so any seed binds alike), else none."""
    return [0] if takes_seed(sql) else []


# DuckDB sizes the MIN(h, n) heap of every person up front: above this K the persons
# who exceed it are found first (one more pass), so that light persons get no heap.
HEAP_K = 8

# The template is parsed once; every use inserts a copy, never the shared tree.
# __l0cut: 1 on the kept rows of persons who had more than K groups (the clipping
# estimate counts them; each person keeps at most K rows, so at most once per group).
_CUT = sqlglot.parse_one(
    "SELECT pph.* EXCLUDE (__h), CAST(heavy.__u IS NOT NULL AS INTEGER) AS __l0cut "
    "FROM pph LEFT JOIN heavy ON pph.__u = heavy.__u "
    "WHERE heavy.__u IS NULL OR pph.__h < heavy.__t "
    "OR (pph.__h = heavy.__t AND NOT heavy.__tie)",
    read="duckdb",
)


def _heavy_rows(k: int) -> str:
    if k <= HEAP_K:
        return "pph"
    return (
        "pph SEMI JOIN (SELECT __u FROM pph GROUP BY __u "
        f"HAVING COUNT(*) > {k}) AS hu ON pph.__u = hu.__u"
    )


# K and the number of keys come from the policy and the query's shape, so a handful of
# parsed variants serve every query; callers copy before inserting.
@lru_cache(maxsize=64)
def _hashed(n_keys: int, keyed: bool) -> exp.Expr:
    keys = ", ".join(f"pp.__k{i}" for i in range(n_keys))
    seed = "$1" if keyed else "?"
    # 63 bits of the hash as a BIGINT: DuckDB's MIN(h, n) heap runs about twice as fast
    # on signed integers as on UBIGINT, and the order of the hashes is kept.
    return sqlglot.parse_one(
        f"SELECT *, CAST(HASH(pp.__u, {keys}, {seed}) >> 1 AS BIGINT) AS __h FROM pp",
        read="duckdb",
    )


@lru_cache(maxsize=64)
def _heavy(k: int) -> exp.Expr:
    # (grouped by the person alone: one person's values cannot meet in one bucket, so
    # these groupings are not keyed, rewrite/keyed_groups.py)
    return sqlglot.parse_one(
        f"SELECT __u, __l[{k}] AS __t, __l[{k}] = __l[{k + 1}] AS __tie FROM "
        f"(SELECT pph.__u, MIN(pph.__h, {k + 1}) AS __l FROM {_heavy_rows(k)} "
        f"GROUP BY pph.__u HAVING COUNT(*) > {k})",
        read="duckdb",
    )


def cut_k(heavy: exp.Expr) -> int | None:
    """K of a ``heavy`` CTE body this rule wrote (its one ``MIN(h, K + 1)``), or None for
    another shape (read back by the engines' forms of the cut)."""
    mins = [m for m in heavy.find_all(exp.Min) if m.args.get("count") is not None]
    if len(mins) != 1 or not isinstance(mins[0].args["count"], exp.Literal):
        return None
    return int(mins[0].args["count"].to_py()) - 1


def apply(core: C.Core) -> C.Core:
    ctes = dict(core.ctes)
    if core.one_group_per_person or not core.keys or not core.bounding:
        ctes["bounded"] = exp.Select(expressions=[exp.Star()], from_=C.from_table("pp"))
        return replace(core, ctes=tuple(ctes.items()))
    k = int(core.max_groups)
    ctes["pph"] = _hashed(len(core.keys), core.keyed_grouping).copy()
    ctes["heavy"] = _heavy(k).copy()
    ctes["bounded"] = _CUT.copy()
    return replace(core, ctes=tuple(ctes.items()))
