"""The post-processing database: the private in-memory DuckDB in which outer layers
(select list, HAVING, ORDER BY over released values) run (proxy/release.py,
``PostProcessor``).

A module of its own that imports DuckDB and nothing of the planner, so that a cold
`dpsql` command can open the database on a thread while the planner is still being
imported (proxy/engine_opening.py).
"""

from __future__ import annotations

import duckdb

# Released tables are small (at most the policy's partition cap of rows), but an outer
# layer can build huge values from released numbers (REPEAT('x', n * 1000000)): bounded
# here so that it fails as a clear error instead of exhausting the proxy's memory.
POST_MEMORY_LIMIT = "512MB"


def open_post_database(memory_limit: str = POST_MEMORY_LIMIT) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB for outer layers: no file or network access, no extension
    loading, one thread, ``memory_limit``, and its configuration locked."""
    db = duckdb.connect(
        ":memory:",
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": 1,
            "memory_limit": memory_limit,
            # DuckDB's expression rewriter takes time exponential in the depth of a
            # chain of integer products (160 nested `COUNT(*) * 2` in HAVING: 6 s to
            # bind, before the charge; 20 more levels, about 3x). It only simplifies,
            # and a released table is small.
            "disabled_optimizers": "expression_rewriter",
        },
    )
    db.execute("SET lock_configuration = true")
    return db
