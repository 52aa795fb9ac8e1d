"""The argument counts DuckDB's own functions take, read from its catalog once per
process (for the parser's arity check, proxy/dropped_arguments.py).

A module of its own that imports DuckDB and nothing of the planner, so that a cold
`dpsql` command can read the catalog on a thread while the planner is still being
imported (proxy/engine_opening.py): the read costs about 20 ms, and a DuckDB instance
of its own about 20 ms more.
"""

from __future__ import annotations

from typing import Any

# {function name: (argument counts of its overloads, the fewest a variadic one takes or
# None)}
Arities = dict[str, tuple[frozenset[int], int | None]]

_known: Arities | None = None


def read_arities(con: Any) -> Arities:
    """The arities of DuckDB's scalar, aggregate and macro functions, read from
    ``duckdb_functions()`` on ``con``, which must be a connection to an in-memory
    database holding DuckDB's own functions only (no macro a data owner defined): an
    empty one, or the post-processing database (proxy/post_database.py)."""
    rows = con.execute(
        "SELECT lower(function_name), len(parameters), varargs IS NOT NULL "
        "FROM duckdb_functions() WHERE function_type IN ('scalar', 'aggregate', 'macro')"
    ).fetchall()
    out: dict[str, tuple[set[int], int | None]] = {}
    for name, count, variadic in rows:
        counts, least = out.setdefault(str(name), (set(), None))
        if variadic:
            least = int(count) if least is None else min(least, int(count))
            out[str(name)] = (counts, least)
        else:
            counts.add(int(count))
    return {name: (frozenset(counts), least) for name, (counts, least) in out.items()}


def learn_arities(con: Any) -> None:
    """Read the arities now, on ``con`` (as :func:`read_arities` requires), unless this
    process already has them."""
    global _known
    if _known is None:
        _known = read_arities(con)


def arities() -> Arities:
    """The installed DuckDB's function arities, read once per process (from an empty
    in-memory database unless :func:`learn_arities` read them first)."""
    global _known
    if _known is None:
        import duckdb  # the catalog of the installed DuckDB: its own functions only

        with duckdb.connect(":memory:") as con:
            _known = read_arities(con)
    return _known
