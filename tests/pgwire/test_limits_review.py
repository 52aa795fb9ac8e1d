"""Review of proxy/catalog_limits.py on the PostgreSQL door (2026-12-04): bypasses.

Each test fails on the reviewed code. Each query is classified as the door classifies
it (statements._query) and answered by the shadow in a child process under RLIMIT_AS.
"""

from __future__ import annotations

import pytest

from tests.capped_child import run_capped

CHILD = r"""
import json, resource, sys, time
from proxy.pgwire import statements
from proxy.pgwire.shadow import SessionFacts, ShadowCatalog
statement = statements._query(sys.argv[1], frozenset())
assert statement.kind is statements.Kind.CATALOG, statement.kind
shadow = ShadowCatalog([])
facts = SessionFacts(user="ana", database="dpsql", version="16.0", pid=1)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.time()
try:
    shadow.answer(statement.tree, [], facts)
    code, message = "answered", ""
except Exception as error:  # WireError
    code, message = str(getattr(error, "sqlstate", getattr(error, "code", type(error).__name__))), str(error)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "message": message[:300], "grew_mb": (peak - base) / 1024,
                  "seconds": time.time() - t0}))
"""

LIST = ",".join(str(i) for i in range(1, 101))
A1000, B100 = "a" * 1000, "b" * 100
BUILDERS = {
    "bitstring": "SELECT bit_length(bitstring('1', 2000000000))",
    "bitstring_text": "SELECT length(bitstring('1', 400000000)::varchar)",
    "regexp_replace_g": (
        f"SELECT length(regexp_replace(regexp_replace('{A1000}', '.', '{A1000}', 'g'), '.', "
        f"'{B100}', 'g'))"
    ),
    "list_reduce_doubling": (
        "SELECT length(list_reduce([" + ",".join(map(str, range(26))) + "], (s, x) -> s || s, 'a'))"
    ),
    "list_transform_flatten": (
        f"SELECT len(flatten(list_transform([{LIST}], w -> flatten(list_transform([{LIST}], "
        f"x -> flatten(list_transform([{LIST}], y -> list_transform([{LIST}], z -> z))))))))"
    ),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_catalog_query_cannot_build_a_large_value_by_composition(name: str) -> None:
    found = run_capped(CHILD, BUILDERS[name])
    # refused before it runs (0A000), not answered, interrupted or out of memory
    assert found["code"] == "0A000" and "Out of Memory" not in str(found["message"]), found
    assert float(found["grew_mb"]) < 200, found  # type: ignore[arg-type]
