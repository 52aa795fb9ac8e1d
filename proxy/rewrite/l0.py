"""Rule: each person contributes to at most K groups (L0).

Each person keeps the K groups with the smallest keyed hash of (person, group, secret
seed): one grouped top-K aggregation (DuckDB's ``min_by(row, key, K)`` keeps a K-heap per
person, no sort), and persons with at most K groups keep them all. The choice depends
only on the person's own rows and the seed, so it bounds L0 without touching anyone
else's contribution. The seed is a query parameter bound at execution, never part of the
SQL text or the cache key.
"""

from __future__ import annotations

from dataclasses import replace

import sqlglot

from proxy.rewrite import core as C


def apply(core: C.Core) -> C.Core:
    ctes = dict(core.ctes)
    if core.one_group_per_person or not core.keys or not core.bounding:
        ctes["bounded"] = sqlglot.parse_one("SELECT * FROM pp", read="duckdb")
        return replace(core, ctes=tuple(ctes.items()))
    k = int(core.max_groups)
    keys = ", ".join(f"pp.{name}" for name in core.key_columns())
    ctes["bounded"] = sqlglot.parse_one(
        f"SELECT UNNEST(min_by(pp, HASH(pp.__u, {keys}, ?), {k}), recursive := TRUE) "
        "FROM pp GROUP BY pp.__u",
        read="duckdb",
    )
    return replace(core, ctes=tuple(ctes.items()))
