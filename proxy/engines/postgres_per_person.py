"""PostgreSQL's form of the per-person sums in ``pp`` (issue 16, PostgreSQL's floor ratio).

PostgreSQL sums a BIGINT into NUMERIC, through a state allocated per group, and the
rewrite widens every clamped integer argument to BIGINT (proxy/rewrite/per_person.py's
``_widened``): at 10M rows that sum alone cost about 0.6 s of a 3 s floor (the floor
sums the raw INTEGER column, which PostgreSQL adds in a BIGINT kept by value). Here a
per-person ``SUM(x)`` over r's clamped integer columns is summed as ``SUM(CAST(x AS
INTEGER))`` when both of these hold:

* ``max |x| <= 2^20`` (read back from the clamp's literals, proxy/engines/clamped_columns.py),
  so the cast to INTEGER keeps every value;
* ``r`` reads one plain table and nothing else (no join, no subquery, no view, no
  partitioned, foreign or inherited table), so one person has at most as many rows in a
  group as the table holds: fewer than 2^43 (a PostgreSQL table has at most 2^32 pages
  of at most 32 KB, each holding at most 1,165 rows), and the BIGINT sum of fewer than
  2^43 values of at most 2^20 stays below 2^63.

The sum is then the same integer as DuckDB's exact 128-bit one, and it cannot overflow
whatever the data; its type is BIGINT instead of NUMERIC, which the per-person
statistics above it read only through comparisons, COALESCE and casts to DOUBLE or
DECIMAL (the same values).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from proxy.engines.clamped_columns import (
    bound,
    column_bounds,
    column_families,
    rows_and_per_person,
)
from proxy.engines.kinds import Typer

NARROW_BOUND = 2**20  # max |x| summed as INTEGER (see the module's docstring)


def _one_base_table(r: exp.Expr, base_tables: Collection[tuple[str, str]]) -> bool:
    if not isinstance(r, exp.Select) or r.args.get("joins") or r.args.get("laterals"):
        return False
    source = r.args.get("from_")
    table = source.this if isinstance(source, exp.From) else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return False
    return ((table.db or "main").lower(), table.name.lower()) in base_tables


def narrow_sums(tree: exp.Expr, typer: Typer, base_tables: Collection[tuple[str, str]]) -> None:
    """``pp``'s sums of r's small clamped integers as INTEGER sums, in place (the module's
    docstring); ``typer`` types r's columns, ``base_tables`` are (db, table) of the
    database's base tables in the catalog's naming."""
    found = rows_and_per_person(tree)
    if found is None:
        return
    _, r, pp = found
    reads = pp.this.args.get("from_")
    if not (
        _one_base_table(r.this, base_tables)
        and isinstance(reads, exp.From)
        and isinstance(reads.this, exp.Table)
        and reads.this.name == "r"
        and not pp.this.args.get("joins")
    ):
        return
    bounds = column_bounds(r.this, column_families(r.this, typer))
    for total in list(pp.this.find_all(exp.Sum)):
        if total.args.get("distinct") or isinstance(total.this, exp.Distinct):
            continue
        largest = bound(total.this, bounds)
        if largest is not None and largest <= NARROW_BOUND:
            total.set("this", exp.Cast(this=total.this, to=exp.DataType.build("INT")))
