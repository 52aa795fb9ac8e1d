"""Rule: each person contributes to at most K groups (L0).

Persons with at most K groups keep them all; only the few who exceed K are ranked, by a
keyed hash of (person, group, secret seed), and keep their K lowest. The common case
therefore costs one extra aggregation over ``pp`` and no window sort. The seed is a
query parameter bound at execution, never part of the SQL text or the cache key.
"""

from __future__ import annotations

from dataclasses import replace

import sqlglot
from sqlglot import exp

from proxy.rewrite import core as C


def apply(core: C.Core) -> C.Core:
    ctes = dict(core.ctes)
    if core.one_group_per_person or not core.keys:
        ctes["bounded"] = sqlglot.parse_one("SELECT * FROM pp", read="duckdb")
        return replace(core, ctes=tuple(ctes.items()))
    k = int(core.max_groups)
    keys = ", ".join(core.key_columns())
    ctes["heavy"] = sqlglot.parse_one(
        f"SELECT __u FROM pp GROUP BY __u HAVING COUNT(*) > {k}", read="duckdb"
    )
    ranked = sqlglot.parse_one(
        "SELECT * EXCLUDE (__rn) FROM ("
        f" SELECT pp.*, ROW_NUMBER() OVER (PARTITION BY pp.__u ORDER BY hash(pp.__u, {keys}, ?))"
        " AS __rn FROM pp SEMI JOIN heavy ON pp.__u = heavy.__u"
        f") WHERE __rn <= {k}",
        read="duckdb",
    )
    light = sqlglot.parse_one(
        "SELECT pp.* FROM pp ANTI JOIN heavy ON pp.__u = heavy.__u", read="duckdb"
    )
    ctes["bounded"] = exp.union(light, ranked, distinct=False)
    return replace(core, ctes=tuple(ctes.items()))
