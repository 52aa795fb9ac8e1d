"""Review of proxy/catalog_limits.py on the Trino door (2026-12-04): bypasses.

Each test fails on the reviewed code. Queries that build large values run in a child
process under RLIMIT_AS, so a failure cannot take down the machine.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.capped_child import run_capped
from tests.server.conftest import auth

# Run one Trino catalog query on the shadow, as the door does, and report the outcome
# and the child's peak RSS.
CHILD = r"""
import json, resource, sys, time
from proxy.errors import DPSQLError
from proxy.parse import parse
from proxy.trino.shadow import ShadowCatalog
shadow = ShadowCatalog([])
tree = parse(sys.argv[1], "trino", max_length=20000, max_nodes=2000)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.time()
try:
    shadow.run(tree)
    code, message = "answered", ""
except DPSQLError as error:
    code, message = error.code, error.message
except MemoryError:
    code, message = "MemoryError", ""
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "message": message, "grew_mb": (peak - base) / 1024,
                  "seconds": time.time() - t0}))
"""

LIST = ",".join(str(i) for i in range(1, 101))
A1000, B100 = "a" * 1000, "b" * 100
BUILDERS = {
    # 2e9 bits: 250 MB, one call, grows the process ~480 MB
    "bitstring": "SELECT bit_length(bitstring('1', 2000000000)) AS n",
    # regexp_replace (global in Trino) multiplies lengths: 1000 x 1000 x 100 = 1e8
    "regexp_replace": (
        f"SELECT length(regexp_replace(regexp_replace('{A1000}', '.', '{A1000}'), '.', '{B100}')) AS n"
    ),
    # nested lambdas: 100^4 list elements from 1.6 KB of SQL (~950 MB)
    "transform_flatten": (
        f"SELECT cardinality(flatten(transform(ARRAY[{LIST}], w -> flatten(transform(ARRAY[{LIST}], "
        f"x -> flatten(transform(ARRAY[{LIST}], y -> transform(ARRAY[{LIST}], z -> z)))))))) AS n"
    ),
    # a string doubled once per element: 2^26 characters (~330 MB more)
    "reduce_doubling": (
        "SELECT length(reduce(ARRAY[" + ",".join(map(str, range(26))) + "], 'a', "
        "(s, x) -> s || s, s -> s)) AS n"
    ),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_catalog_query_cannot_build_a_large_value_by_composition(name: str) -> None:
    found = run_capped(CHILD, BUILDERS[name])
    # refused before it runs, not answered nor stopped by an allocation failure
    assert found["code"] == "unsupported_sql", found
    assert float(found["grew_mb"]) < 200, found  # type: ignore[arg-type]


def test_a_cte_name_out_of_scope_does_not_reach_duckdbs_own_views(client: TestClient) -> None:
    """The door skips (does not map) every table named like any CTE of the query, but
    a CTE is visible only in its own scope: outside it the name is DuckDB's own view
    (pg_catalog.pg_settings, duckdb_tables, ...), which then reads the server's settings."""
    sql = (
        "SELECT s.name, s.setting FROM (WITH pg_settings AS (SELECT 1 AS x) SELECT x FROM "
        "pg_settings) a CROSS JOIN pg_settings s WHERE s.name = 'secret_directory'"
    )
    r = client.post("/v1/statement", content=sql.encode(), headers=auth("ana"))
    doc = r.json()
    text = json.dumps(doc)
    while doc.get("nextUri") and doc["stats"]["state"] not in ("FAILED", "FINISHED"):
        doc = client.get(doc["nextUri"], headers=auth("ana")).json()
        text += json.dumps(doc)
    assert "secret_directory" not in json.dumps(doc.get("data")), doc
    assert "stored_secrets" not in text, text[:500]


def test_a_series_limit_key_does_not_make_the_stand_in_expensive(client: TestClient) -> None:
    """stand_in copied the key expression once per key the ranking's LIMIT may release
    (up to max_nodes = 2,000): a key of ~300 syntax nodes made 600,000 node copies and a
    1 MB SQL text before the engine's length check refused it (8 s here; a key of ~1,800
    nodes took 71 s and 2.7 GB in the door, uncharged). Now one NULL per key: the
    stand-in's size does not grow with the key's."""
    import sqlglot
    from sqlglot import exp

    from proxy.trino import series_limit

    key = "+".join(["tokens_in"] * 100)
    sql = (
        "SELECT model AS model, COUNT(*) AS n FROM prompts "
        "JOIN (SELECT model AS model__, COUNT(*) AS c FROM prompts "
        f"GROUP BY model ORDER BY 2 DESC LIMIT 2000) AS series_limit ON ({key}) = model__ "
        "GROUP BY model"
    )
    part = series_limit.split(sqlglot.parse_one(sql, read="trino"))
    assert part is not None
    chart = series_limit.stand_in(part, 2000)
    listed = chart.find(exp.In)
    assert listed is not None and len(listed.expressions) == 2000
    assert all(isinstance(e, exp.Null) for e in listed.expressions)
    key_nodes = len(list(part.key.walk()))
    assert len(list(chart.walk())) < 2000 + 3 * key_nodes + 50
    r = client.post("/v1/statement", content=sql.encode(), headers=auth("ana"))
    assert r.json()["stats"]["state"] == "FAILED", r.json()
