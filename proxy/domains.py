"""Which group keys have a public domain, and what it is.

A key's domain is public when it comes from the policy (`values`, or the integers
between an integer column's declared `lower` and `upper` when they are few enough), from
a public table, or is a closed expression over one such key (a CASE with literal outputs, or a function
of one domain column evaluated over its values). Public domains are released complete:
every key appears, empty ones with a noisy zero, keys outside the domain are dropped.
Any other key goes through DP partition selection.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from proxy.catalog import TableInfo
from proxy.engines.executor import Executor
from proxy.errors import DPSQLError
from proxy.pins import pinned_values
from proxy.render import duckdb_sql

Domain = tuple[Any, ...]


def _indexed(values: Sequence[Any]) -> exp.Values:
    """``(VALUES (0, v0), (1, v1), ...) AS __d(i, v)``: values to evaluate an expression
    of the key on (``__d.v``), in their order (``__d.i``)."""
    return exp.Values(
        expressions=[
            exp.Tuple(expressions=[exp.Literal.number(i), exp.convert(v)])
            for i, v in enumerate(values)
        ],
        alias=exp.TableAlias(
            this=exp.to_identifier("__d"), columns=[exp.to_identifier("i"), exp.to_identifier("v")]
        ),
    )


def _column_domain(
    col: exp.Column, tables: dict[str, TableInfo], executor: Executor, limit: int
) -> Domain | None:
    info = tables.get(col.table.lower())
    if info is None:
        return None
    if info.public:
        values = executor.distinct_values(info.db, info.name, col.name, limit)
        return tuple(values) if len(values) <= limit else None
    policy = info.column(col.name)
    if policy is not None and policy.values:
        return tuple(policy.values)
    declared = _declared_range(col, info, limit)
    if declared is not None:
        # Declared integer bounds are a public domain too when they are few enough:
        # every value in [lower, upper] is released, so no partition selection drops
        # small groups (rows outside the bounds are outside every released group).
        return tuple(range(declared[0], declared[1] + 1))
    return None


def _declared_range(col: exp.Column, info: TableInfo, limit: int) -> tuple[int, int] | None:
    """The integers an integer column's declared bounds hold, when they are its public
    domain (fixed bounds, fewer than ``limit`` values, no values list)."""
    policy = info.column(col.name)
    if (
        info.public
        or policy is None
        or policy.values
        or policy.lower is None
        or policy.upper is None
        # An "auto" bound is chosen later, by whichever query first needs it: a key
        # whose domain appeared only then would change the shape of the same query.
        or policy.upper_limit is not None
        or policy.lower_limit is not None
        or not info.is_integer(col.name)
        or info.column_types.get(col.name.lower(), "").upper() == "BOOLEAN"
    ):
        return None
    low, high = math.ceil(policy.lower), math.floor(policy.upper)
    return (low, high) if 0 <= high - low < limit else None


def bounds_note(
    keys: Sequence[exp.Expr], tables: dict[str, TableInfo], limit: int
) -> tuple[str, ...]:
    """What an answer says when a key's public domain is a column's declared bounds:
    rows beyond them are in no group, whether or not the data has any (an honest-answers
    probe, 2026-12-06: ``tokens_in // 1000`` under bounds [0, 1000] left out 86 prompts
    of three larger groups, and the answer's note spoke only of NULL keys)."""
    named: dict[str, None] = {}
    for key in keys:
        read = {(c.table.lower(), c.name.lower()): c for c in key.find_all(exp.Column)}
        if len(read) != 1:
            continue
        col = next(iter(read.values()))
        info = tables.get(col.table.lower())
        declared = None if info is None else _declared_range(col, info, limit)
        if info is not None and declared is not None:
            named[f"{info.name}.{col.name} outside [{declared[0]}, {declared[1]}]"] = None
    if not named:
        return ()
    return (
        "a GROUP BY key's values are the declared bounds of its column: rows with "
        f"{', '.join(named)} are counted in no group, where SQL would show them as groups "
        "of their own; wider bounds in the policy release them (with more noise where the "
        "column is also aggregated)",
    )


def _case_domain(node: exp.Case) -> Domain | None:
    outputs = [i.args.get("true") for i in node.args.get("ifs") or []]
    default = node.args.get("default")
    if not all(isinstance(o, exp.Literal) for o in outputs):
        return None
    values: list[Any] = [o.to_py() for o in outputs]
    if default is None or isinstance(default, exp.Null):
        values.append(None)
    elif isinstance(default, exp.Literal):
        values.append(default.to_py())
    else:
        return None
    return tuple(dict.fromkeys(values))


def _expression_domain(
    key: exp.Expr,
    tables: dict[str, TableInfo],
    executor: Executor,
    limit: int,
    where: exp.Expr | None = None,
) -> Domain | None:
    columns = list(key.find_all(exp.Column))
    if len({(c.table, c.name) for c in columns}) != 1:
        return None
    base = _kept_values(columns[0], tables, executor, limit, where)
    if base is None:
        return None
    probe = _on_values(key)
    # NULL as well as the declared values: a column may always be NULL (a LEFT JOIN's
    # unmatched rows), so what the key gives for it is a public value too, and
    # ``COALESCE(category, 'none')`` releases its 'none' group (it was dropped, with most
    # rows in it: a corpus of BI SQL, 2026-12-06). A NULL key stays out, as for a column.
    values = _indexed((*base, None))
    # In the base domain's order, first occurrence kept: SELECT DISTINCT alone returned
    # hash order, which varied between runs (and so did plans and cache keys).
    query = exp.select(exp.alias_(probe, "k")).from_(values).order_by("i")
    failures: tuple[type[BaseException], ...] = (*executor.evaluation_errors, DPSQLError)
    try:
        rows = executor.evaluate(query.sql(dialect="duckdb"))
    except failures:
        # The expression fails on some domain value (or the engine cannot evaluate it):
        # no public domain, so the key goes through partition selection (where the
        # rewrite makes it total).
        return None
    found = [r[0] for r in rows]
    if found and found[-1] is None:
        found.pop()  # what the key gives for NULL, when NULL: no group of its own
    return tuple(dict.fromkeys(found))


def _kept_values(
    column: exp.Column,
    tables: dict[str, TableInfo],
    executor: Executor,
    limit: int,
    where: exp.Expr | None,
) -> Domain | None:
    """A domain column's public values that ``where`` keeps (``CAST(age AS VARCHAR)``
    under ``age < 22`` released all 83 ages as strings, 79 of them noisy zeros: an
    honest-answers probe, 2026-12-06), or None without a public domain."""
    base = _column_domain(column, tables, executor, limit)
    return None if base is None else _narrowed(base, column, where, executor)


def _on_values(key: exp.Expr) -> exp.Expr:
    """``key`` with its column read from the values table ``__d.v`` (see _indexed)."""
    if isinstance(key, exp.Column):
        return exp.column("v", table="__d")
    probe = key.copy()
    for col in list(probe.find_all(exp.Column)):
        col.replace(exp.column("v", table="__d"))
    return probe


def key_domain(
    key: exp.Expr,
    tables: dict[str, TableInfo],
    executor: Executor,
    limit: int,
    where: exp.Expr | None = None,
) -> Domain | None:
    """The public values of ``key``, or None; an expression of one domain column is
    evaluated on the column's values ``where`` keeps."""
    if isinstance(key, exp.Column):
        return _column_domain(key, tables, executor, limit)
    if isinstance(key, exp.Case):
        return _case_domain(key)
    return _expression_domain(key, tables, executor, limit, where)


_INTEGER_KEYS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"}


def _already(values: Domain, key_type: str) -> bool:
    """Values that are already what DuckDB computes for the key need no round trip."""
    kind = key_type.upper()
    if kind == "VARCHAR":
        return all(isinstance(v, str) for v in values)
    if kind in _INTEGER_KEYS:
        return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    return False


def _as_key_type(values: Domain, key_type: str, executor: Executor) -> Domain:
    """Domain values as DuckDB computes the key (e.g. CASE 'a' ELSE 0 yields text '0'),
    so that released keys match the data; values that cannot be that type are dropped."""
    if not values or _already(values, key_type):
        return values
    rows = exp.Values(
        expressions=[
            exp.Tuple(
                expressions=[exp.Literal.number(i), exp.convert(None if v is None else str(v))]
            )
            for i, v in enumerate(values)
        ],
        alias=exp.TableAlias(
            this=exp.to_identifier("__d"), columns=[exp.to_identifier("i"), exp.to_identifier("v")]
        ),
    )
    cast = exp.TryCast(this=exp.column("v", table="__d"), to=exp.DataType.build(key_type))
    query = (
        exp.select(exp.alias_(cast, "k"), exp.column("v", table="__d")).from_(rows).order_by("i")
    )
    failures: tuple[type[BaseException], ...] = (
        *executor.evaluation_errors,
        DPSQLError,
        ValueError,
    )
    try:
        out = executor.evaluate(query.sql(dialect="duckdb"))
    except failures:
        return values
    kept = [k for k, raw in out if k is not None or raw is None]
    return tuple(dict.fromkeys(kept))


def _same_as(key: exp.Expr) -> Callable[[exp.Expr], bool]:
    text = duckdb_sql(key)
    return lambda e: duckdb_sql(e) == text


_EXACT_VALUES = (int, str, bool)


def _exact(values: Domain) -> bool:
    """Values that compare as written: a FLOAT key's declared 0.1 is the float nearest
    it, which a WHERE clause's 0.1 does not equal (a review, 2026-12-06: ``WHERE score
    <= 0.1`` released no group though 1,000 rows were 0.1). Inexact domains are not
    narrowed or combined: their empty groups are released as noisy zeros instead."""
    return all(v is None or isinstance(v, _EXACT_VALUES) for v in values)


def _about_the_key(conjunct: exp.Expr, key: exp.Expr, is_key: Callable[[exp.Expr], bool]) -> bool:
    """Whether ``conjunct`` reads no column but through the key (and no subquery)."""
    if conjunct.find(exp.Subquery, exp.Select, exp.AggFunc, exp.Window) is not None:
        return False
    # (the key's columns first: rendering every node of every conjunct is the cost)
    mine = {c.sql() for c in key.find_all(exp.Column)}
    read = {c.sql() for c in conjunct.find_all(exp.Column)}
    if not read or not read <= mine:
        return False
    keys = [n for n in conjunct.walk() if type(n) is type(key) and is_key(n)]
    if not keys:
        return False
    inside = {id(x) for k in keys for x in k.walk()}
    return all(id(c) in inside for c in conjunct.find_all(exp.Column))


def _narrowed(domain: Domain, key: exp.Expr, where: exp.Expr | None, executor: Executor) -> Domain:
    """The domain values every WHERE conjunct about the key alone (``age BETWEEN 20 AND
    30``, ``region <> 'north'``, ``age % 2 = 0``) keeps. A row whose key fails such a
    conjunct is in no group, so those groups are empty by the query's text: releasing
    them showed 90 noisy zeros for ``age BETWEEN 20 AND 30``, and averages of nobody at
    the middle of the declared range (a corpus of BI SQL, 2026-12-06). Evaluated on the
    public values, as the key's own domain is (`_expression_domain`); a conjunct the
    engine cannot evaluate on them narrows nothing."""
    if where is None or not domain or not _exact(domain):
        return domain
    is_key = _same_as(key)
    about = [
        c.unnest()
        for c in (where.flatten() if isinstance(where, exp.And) else [where])
        if _about_the_key(c.unnest(), key, is_key)
    ]
    if not about:
        return domain
    condition = exp.and_(*(c.copy() for c in about))
    for node in list(condition.walk()):
        if type(node) is type(key) and node is not condition and is_key(node):
            node.replace(exp.column("v", table="__d"))
    query = exp.select(exp.column("i", table="__d")).from_(_indexed(domain))
    query = query.where(condition).order_by("i")
    failures: tuple[type[BaseException], ...] = (*executor.evaluation_errors, DPSQLError)
    try:
        kept = {int(r[0]) for r in executor.evaluate(query.sql(dialect="duckdb"))}
    except failures:
        return domain
    return tuple(v for i, v in enumerate(domain) if i in kept)


def public_domain(
    keys: Sequence[exp.Expr],
    tables: dict[str, TableInfo],
    executor: Executor,
    limit: int,
    where: exp.Expr | None = None,
    key_types: Sequence[str] | None = None,
) -> tuple[tuple[Any, ...], ...] | None:
    """All key combinations to release, or None when some key needs partition selection.

    A key the WHERE clause pins to literals releases only those domain values: the other
    groups are empty by the query's own text, which the analyst already knows.
    """
    domains: list[Domain] = []
    size = 1
    for i, key in enumerate(keys):
        d = key_domain(key, tables, executor, limit, where)
        if d is None:
            return None
        if key_types is not None:
            d = _as_key_type(d, key_types[i], executor)
        pinned = pinned_values(where, _same_as(key))
        if pinned is not None and _exact(d):
            d = tuple(v for v in d if v in pinned)
        d = _narrowed(d, key, where, executor)
        size *= max(len(d), 1)
        if size > limit:
            return None
        domains.append(d)
    if len(keys) < 2:
        return tuple(itertools.product(*domains))
    return _combined(keys, domains, tables, executor, limit, where)


def _combined(
    keys: Sequence[exp.Expr],
    domains: list[Domain],
    tables: dict[str, TableInfo],
    executor: Executor,
    limit: int,
    where: exp.Expr | None,
) -> tuple[tuple[Any, ...], ...]:
    """The key combinations to release: keys that are functions of one and the same
    domain column take only the value tuples some value of it gives (evaluated together
    on its public values), other keys combine freely. Crossing each key's own domain
    released ``GROUP BY model, model`` as nine groups, three of them per model with
    different counts, and ``age // 10, age < 30`` with pairs no age gives (an
    honest-answers probe, 2026-12-06)."""
    by_column: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(keys):
        read = {(c.table.lower(), c.name.lower()) for c in key.find_all(exp.Column)}
        if len(read) == 1:
            by_column.setdefault(next(iter(read)), []).append(i)
    parts: list[tuple[list[int], list[tuple[Any, ...]]]] = []
    joined: set[int] = set()
    for members in by_column.values():
        if len(members) < 2 or not all(_exact(domains[i]) for i in members):
            continue
        together = _joint_domain([keys[i] for i in members], tables, executor, limit, where)
        if together is None:
            continue
        kinds = [{type(v) for v in domains[i]} for i in members]
        if not all(
            v is None or type(v) in kind
            for t in together
            for v, kind in zip(t, kinds, strict=True)
        ):
            # typed otherwise than the keys' own domains (a DATE column's declared text,
            # an INTEGER column's "1"): combined freely, as before
            continue
        allowed = [set(domains[i]) for i in members]
        tuples = [t for t in together if all(v in a for v, a in zip(t, allowed, strict=True))]
        parts.append((members, tuples))
        joined.update(members)
    if not parts:
        return tuple(itertools.product(*domains))
    parts += [([i], [(v,) for v in d]) for i, d in enumerate(domains) if i not in joined]
    out = []
    for combination in itertools.product(*(tuples for _, tuples in parts)):
        row: list[Any] = [None] * len(keys)
        for (members, _), values in zip(parts, combination, strict=True):
            for i, v in zip(members, values, strict=True):
                row[i] = v
        out.append(tuple(row))
    return tuple(out)


def _joint_domain(
    keys: Sequence[exp.Expr],
    tables: dict[str, TableInfo],
    executor: Executor,
    limit: int,
    where: exp.Expr | None,
) -> list[tuple[Any, ...]] | None:
    """The distinct tuples ``keys`` (all over one domain column) give on its values and
    on NULL, in the column's order; None when the column has no public domain or the
    engine cannot evaluate them there (then the keys combine freely, as before)."""
    base = _kept_values(next(keys[0].find_all(exp.Column)), tables, executor, limit, where)
    if base is None:
        return None
    probes = [exp.alias_(_on_values(key), f"k{i}") for i, key in enumerate(keys)]
    query = exp.select(*probes).from_(_indexed((*base, None))).order_by("i")
    failures: tuple[type[BaseException], ...] = (*executor.evaluation_errors, DPSQLError)
    try:
        rows = executor.evaluate(query.sql(dialect="duckdb"))
    except failures:
        return None
    return list(dict.fromkeys(tuple(r) for r in rows))
