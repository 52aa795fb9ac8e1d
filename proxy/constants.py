"""Text constants compared with typed columns: converted once at planning, or refused.

DuckDB reads ``ts > '2024-13-45'`` by casting the constant to the column's type, and
under the rewrite's TRY a constant that does not convert becomes NULL: the query was
answered, and charged, with 0 rows (``age > 'abc'`` too). An answer silently far from
the truth is a defect, so such a constant is refused before any charge, with the type
it had to be. Only constants are read here (no data), with DuckDB's own casts.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_local = threading.local()


def connection() -> Any:
    """This thread's in-memory DuckDB (imported here: the CLI's start-up needs none)."""
    con = getattr(_local, "con", None)
    if con is None:
        import duckdb

        con = duckdb.connect(":memory:", config={"enable_external_access": False})
        _local.con = con
    return con


@functools.lru_cache(maxsize=1024)
def converts(text: str, type_name: str) -> bool:
    """Whether DuckDB casts the constant ``text`` to ``type_name`` (a catalog type)."""
    import duckdb

    try:
        row = connection().execute(f"SELECT TRY_CAST(? AS {type_name})", [text]).fetchone()
    except duckdb.Error:
        return True  # a type DuckDB cannot name here: leave the constant to it
    return row is not None and row[0] is not None
