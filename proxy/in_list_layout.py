"""Refuse, before any charge, an IN list whose constants would pile up in DuckDB's hash
table.

DuckDB answers ``x IN (c1, c2, ...)`` with five or more constants by a MARK hash join
built on the constants: a pointer table of ``capacity`` slots (a power of two, at least
twice the entries), linear probing from the slot given by the low bits of each value's
hash, and a salt of its high bits. DuckDB's hash is unkeyed and invertible, so an analyst
can list constants whose slots fall together (900 texts with one hash, RELIABILITY.md
§7 "A sixth round") and plant rows of one person whose values probe that run: each of
the person's rows then walks the whole run, a cost that exists on D and not on D minus
that person (0.128 s against 0.010 s at 32,768 planted rows, 2026-12-03).

The list is visible before anything runs, so the run it would form can be computed from
the query text alone: the constants are cast to the type DuckDB compares them in (the
type of ``x``, learnt by binding a probe, widened with the constants' own types as
DuckDB widens an IN list), hashed by DuckDB's own ``hash``, and laid out in each table
DuckDB could build for that many entries (:func:`crowded`). A list whose longest run
exceeds what random hashes reach (a tail bound of linear probing, :func:`allowed_run`)
is refused; the refusal depends on the text only.
An honest list passes with probability about 1 - 1e-7; an adversarial one is limited to
runs of the allowed length, so a planted row costs at most that many comparisons, as
any row may. PostgreSQL and Spark key their lists instead (proxy/engines/*_forms.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from proxy.engines.render import constant_items
from proxy.errors import DPSQLError
from proxy.rewrite.l0 import describe_params

# DuckDB 2 turns an IN list of five or more constants into a MARK join (fewer are
# compared one by one). Shorter lists cannot form a run above the smallest allowed one.
HASHED_LIST = 5
_FEWEST_SLOTS = 1 << 10  # the smallest pointer table of older DuckDBs
_DUCKDB2_FEWEST_SLOTS = 1 << 14


class _Binder(Protocol):
    evaluation_errors: tuple[type[BaseException], ...]

    def describe(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[str, str]]: ...
    def evaluate(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


def allowed_run(entries: int, slots: int) -> int:
    """The longest run of occupied slots allowed for ``entries`` random hashes in a
    linear-probing table of ``slots``. A run of length L or more starts at a given entry
    with probability at most about e^(−L·r), r = α − 1 − ln α at load α (the tail of
    linear probing's runs), so over all entries a run passes
    ``(ln n + 16.2) / r + 2`` with probability below about 1e-7 · e^(−2r): an honest
    list is refused about never (tests/proxy/test_in_list_layout.py draws 5,160)."""
    load = entries / slots
    rate = load - 1.0 - math.log(load)
    return 2 + math.ceil((math.log(entries) + 16.2) / rate)


def longest_run(hashes: np.ndarray, slots: int) -> int:
    """The longest run of occupied slots after inserting ``hashes`` (uint64, fewer than
    ``slots``) by linear probing into ``slots`` slots (a power of two), the slot being
    the low bits; the occupied set does not depend on the order of insertion.

    On the circle the layout starts where nothing is carried over: after the slot k
    where S(k) = (entries with slot <= k) - (k + 1) is least (the waiting entries past
    slot k are S(k) minus the least S before it, Lindley's recursion, so none wait
    there). From that slot the table fills as a line, without reaching the end."""
    if hashes.size == 0:
        return 0
    start = np.sort((hashes & np.uint64(slots - 1)).astype(np.int64))
    distinct, before = np.unique(start, return_index=True)
    # S just before each distinct slot (where it is least between arrivals), and at the end
    lows = np.concatenate((before - distinct, [start.size - slots]))
    ends = np.concatenate((distinct - 1, [slots - 1]))
    cut = int(ends[int(np.argmin(lows))]) + 1
    start = np.sort((start - cut) % slots)
    index = np.arange(start.size, dtype=np.int64)
    # each entry lands at the first free slot at or after its own: i + max_{j<=i}(s_j - j)
    placed = index + np.maximum.accumulate(start - index)
    breaks = np.flatnonzero(np.diff(placed) != 1)
    firsts = np.concatenate(([0], breaks + 1))
    lasts = np.concatenate((breaks, [placed.size - 1]))
    return int((lasts - firsts + 1).max())


def crowded(hashes: np.ndarray) -> bool:
    """Whether the distinct ``hashes`` form a run longer than :func:`allowed_run` in any
    table DuckDB could build for them: ``max(NextPowerOfTwo(2n), least)`` slots, the
    least being 1,024 before DuckDB 1.2 and 16,384 since (a list is never large enough
    to be joined in rounds, which could size the table otherwise)."""
    n = int(hashes.size)
    if n < HASHED_LIST:
        return False
    slots = max(_FEWEST_SLOTS, 1 << (2 * n - 1).bit_length())
    while slots <= max(_DUCKDB2_FEWEST_SLOTS, 1 << (2 * n - 1).bit_length()):
        if longest_run(hashes, slots) > allowed_run(n, slots):
            return True
        slots *= 2
    return False


def hashed_lists(tree: exp.Expr) -> list[exp.In]:
    """The IN lists of ``tree`` that DuckDB may look up in a hash table."""
    return [n for n in tree.find_all(exp.In) if constant_items(n, HASHED_LIST)]


def check_in_lists(core_sql: str, binder: _Binder) -> None:
    """Refuse (``unsupported_sql``) a core whose IN lists would pile up in DuckDB's hash
    table. A core without `` IN (`` in its text (DuckDB's spelling of every list) is not
    parsed. Reads no data: the probe is bound, not run, and the hashes are of
    constants."""
    if " IN (" not in core_sql:
        return
    try:
        core = sqlglot.parse_one(core_sql, dialect="duckdb")
    except SqlglotError:
        raise _unchecked() from None
    lists = hashed_lists(core)
    if not lists:
        return
    types = _compared_types(core, lists, binder)
    for node, kind in zip(lists, types, strict=True):
        if crowded(_hashes(node, kind, binder)):
            raise DPSQLError(
                "unsupported_sql",
                f"the IN list of {len(node.expressions)} values on "
                f"{node.this.sql(dialect='duckdb')[:80]} holds values whose hashes fall "
                "together in the engine's hash table, which would make the query's time "
                "depend on one person's rows",
                "list other values, or split the list with OR into lists of at most 4 "
                "values each; nothing was charged",
            )


def _compared_types(core: exp.Expr, lists: list[exp.In], binder: _Binder) -> list[str]:
    """The type of each list's left-hand side, bound in its own SELECT's scope (its FROM
    and joins, with the core's CTEs they read)."""
    types = []
    for i, node in enumerate(lists):
        scope = node.find_ancestor(exp.Select)
        if scope is None:
            raise _unchecked()
        probe = exp.select(exp.alias_(node.this.copy(), f"__in{i}"))
        for part in ("from_", "joins"):
            if scope.args.get(part):
                probe.set(part, _copied(scope.args[part]))
        ctes = _read_ctes(core, probe)
        if ctes:
            probe.set("with", exp.With(expressions=ctes))
        sql = probe.sql(dialect="duckdb")
        try:
            ((_, kind),) = binder.describe(sql, describe_params(sql))
        except DPSQLError:
            raise _unchecked() from None
        types.append(kind)
    return types


def _read_ctes(core: exp.Expr, probe: exp.Select) -> list[exp.CTE]:
    """Copies of the core's CTEs that ``probe`` reads, directly or through each other
    (binding the others would cost as much again, lists and all)."""
    with_ = core.args.get("with")
    if with_ is None:
        return []
    wanted = {t.name for t in probe.find_all(exp.Table) if not t.db}
    kept = []
    for cte in reversed(with_.expressions):
        if cte.alias in wanted:
            kept.append(cte.copy())
            wanted |= {t.name for t in cte.find_all(exp.Table) if not t.db}
    return kept[::-1]


def _copied(part: Any) -> Any:
    return [p.copy() for p in part] if isinstance(part, list) else part.copy()


def _hashes(node: exp.In, kind: str, binder: _Binder) -> np.ndarray:
    """DuckDB's hash of each distinct constant of the list, as compared with a ``kind``
    value: the list widened with a NULL of ``kind``, as DuckDB widens an IN list (equal
    constants are one entry: DuckDB chains them in one slot)."""
    # one generator pass over the list (not one per constant, or a copy of each)
    listed = exp.Tuple(expressions=node.expressions).sql(dialect="duckdb")[1:-1]
    try:
        null = exp.cast(exp.null(), kind, dialect="duckdb").sql(dialect="duckdb")
    except SqlglotError:  # a type sqlglot cannot read back
        raise _unchecked() from None
    sql = f"SELECT hash(v) FROM (SELECT DISTINCT UNNEST([{null}, {listed}]) AS v) AS t"
    try:
        rows = binder.evaluate(sql)
    except binder.evaluation_errors:
        raise _unchecked() from None
    return np.array([int(r[0]) for r in rows], dtype=np.uint64)


def _unchecked() -> DPSQLError:
    return DPSQLError(
        "unsupported_sql",
        "dpsql could not check how a long IN list's values fall in the engine's hash table",
        "compare one column with constants of its own type, or list fewer than five values "
        "(several such lists may be joined with OR); nothing was charged",
    )
