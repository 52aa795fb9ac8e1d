"""Rule: COUNT(DISTINCT k) for k not the person id.

Per group, the released count is the number of distinct non-NULL values of k among the
*bounded* rows: each person keeps at most C distinct values of k per group (C the query's
row cap), and only the groups the L0 rule keeps for them (at most K).

Which C values a person with more keeps: those with the smallest ``HASH(person, value)``
(ties broken by the value itself), so the choice reads only the person's own rows and
differs from person to person (a hash of the value alone would make everybody keep the
same few values and shrink the count). The hash needs no secret: privacy does not depend
on which values are kept, only on there being at most C; ``ROW_NUMBER() ≤ C`` keeps
exactly C even when hashes tie.

Sensitivity: removing one person removes from a group's set only the values nobody else
kept, at most C, and touches at most K groups — Δ∞ = C, as for a row count
(accounting.sensitivity.AggregateKind.DISTINCT_COUNT). A value held by many people counts
once, so the count never exceeds the plain COUNT(DISTINCT k).

The core gains, per COUNT(DISTINCT) argument j, CTEs ``dv<j>`` (a person's distinct
values per group), ``dk<j>`` (the kept ones), ``dg<j>`` (the count per group), joined on
the (NULL-safe) keys into the final result as the statistic's column. Written in
DuckDB's SQL like every rule; proxy/engines/render.py gives the other engines the same
meaning: the engine's own hash of (person, value) for ``HASH``, an exact wide integer for
``HUGEINT``, EXISTS for the SEMI JOIN on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace

import sqlglot
from sqlglot import exp

from proxy.rewrite import core as C
from proxy.rewrite import keyed_groups
from proxy.rewrite.per_person import argument_columns

_KINDS = C.DISTINCT_KINDS
MAX_UNITS = 2**62  # integer sums saturate here, as in the cross-person rule


def _literal(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _aggregate(stat: C.Statistic, value: str) -> str:
    if stat.kind == C.DISTINCT:
        return f"COUNT(DISTINCT {value})"
    if stat.kind == C.DISTINCT_CENTRED_SUM:
        # Σ (v − m) = SUM(DISTINCT v) − m·COUNT(DISTINCT v), in HUGEINT when exact (the
        # explicit cast: an engine whose SUM(BIGINT) wraps sums in its wide integer).
        m = _literal(stat.centre)
        if stat.integer:
            total = (
                f"COALESCE(SUM(DISTINCT CAST({value} AS HUGEINT)), 0) - CAST({m} AS HUGEINT) "
                f"* COUNT(DISTINCT {value})"
            )
            return f"LEAST(GREATEST({total}, -{MAX_UNITS}), {MAX_UNITS})"
        return f"COALESCE(SUM(DISTINCT CAST({value} AS DOUBLE)), 0) - {m} * COUNT(DISTINCT {value})"
    if stat.kind == C.DISTINCT_SQUARES:
        # Read from the group's distinct values (dd<j>): (v − m)² is not one-to-one in v.
        # |v − m| ≤ (U − L)/2 ≤ 1e9 (clamp_inputs' magnitude check): no overflow.
        m = _literal(stat.centre)
        if stat.integer:
            d = f"CAST(CAST({value} AS BIGINT) - {m} AS HUGEINT)"
            return f"LEAST(GREATEST(COALESCE(SUM({d} * {d}), 0), -{MAX_UNITS}), {MAX_UNITS})"
        d = f"(CAST({value} AS DOUBLE) - {m})"
        return f"COALESCE(SUM({d} * {d}), 0)"
    if stat.integer:
        # Exact in HUGEINT, saturated (a contraction) so the BIGINT cast cannot fail.
        total = f"COALESCE(SUM(DISTINCT CAST({value} AS HUGEINT)), 0)"
        return f"LEAST(GREATEST({total}, -{MAX_UNITS}), {MAX_UNITS})"
    return f"COALESCE(SUM(DISTINCT CAST({value} AS DOUBLE)), 0)"


def _ctes(
    core: C.Core, stats: list[C.Statistic], index: int, column: str, arg: str
) -> dict[str, str]:
    one = core.one_group_per_person or not core.keys
    keys = [] if one else list(core.key_columns())
    g = "".join(f", {k}" for k in keys)
    # A person's values all go through this grouping: first by their keyed hash.
    first = ""
    if core.keyed_grouping:
        columns = keyed_groups.person_key_columns(core, keys)
        columns.append((column, keyed_groups.argument_by_bytes(core, arg)))
        first = keyed_groups.keyed_sql(core, columns) + ", "
    ctes = {
        f"dv{index}": (
            f"SELECT __u{g}, {column} AS __v FROM r WHERE NOT {column} IS NULL "
            f"GROUP BY {first}__u{g}, {column}"
        )
    }
    if core.bounding:
        ctes[f"dk{index}"] = (
            f"SELECT __u{g}, __v FROM (SELECT __u{g}, __v, ROW_NUMBER() OVER "
            f"(PARTITION BY __u{g} ORDER BY HASH(__u, __v), __v) AS __i FROM dv{index}) "
            f"WHERE __i <= {int(core.max_rows)}"
        )
    else:  # an audit run without bounding: every value counts
        ctes[f"dk{index}"] = f"SELECT __u{g}, __v FROM dv{index}"
    all_keys = core.key_columns()
    if one:
        picked = "".join(f"bounded.{k}, " for k in all_keys)
        source = f"dk{index} JOIN bounded ON dk{index}.__u = bounded.__u"
    else:
        same = "".join(f" AND dk{index}.{k} IS NOT DISTINCT FROM bounded.{k}" for k in keys)
        same += keyed_groups.same_pairs(core, keys, f"dk{index}", "bounded")
        picked = "".join(f"dk{index}.{k}, " for k in keys)
        source = f"dk{index} SEMI JOIN bounded ON dk{index}.__u = bounded.__u{same}"
    value = f"dk{index}.__v"
    if any(s.kind == C.DISTINCT_SQUARES for s in stats):
        # Each group's distinct values once (COUNT/SUM(DISTINCT) read the same set).
        ctes[f"dd{index}"] = f"SELECT DISTINCT {picked}{value} AS __v FROM {source}"
        picked = "".join(f"{k}, " for k in all_keys)
        source, value = f"dd{index}", "__v"
    group = f" GROUP BY {', '.join(picked.rstrip(', ').split(', '))}" if all_keys else ""
    outputs = ", ".join(f"{_aggregate(s, value)} AS {s.column}" for s in stats)
    ctes[f"dg{index}"] = f"SELECT {picked}{outputs} FROM {source}{group}"
    return ctes


def _by_argument(core: C.Core) -> dict[str, list[C.Statistic]]:
    found: dict[str, list[C.Statistic]] = {}
    for stat in core.statistics:
        if stat.kind in _KINDS:
            found.setdefault(str(stat.arg_sql), []).append(stat)
    return found


def apply(core: C.Core) -> C.Core:
    groups = _by_argument(core)
    if not groups:
        return core
    columns = argument_columns(core)
    ctes = dict(core.ctes)
    for index, (arg, stats) in enumerate(groups.items()):
        for name, sql in _ctes(core, stats, index, columns[arg], arg).items():
            ctes[name] = sqlglot.parse_one(sql, read="duckdb")
    return replace(core, ctes=tuple(ctes.items()))


def with_counts(core: C.Core, final: exp.Select) -> exp.Select:
    """The per-group result with each distinct count joined on (NULL-safe) keys; a group
    with no value gets 0. Every counted group is a group of ``bounded``: no row is added."""
    groups = _by_argument(core)
    if not groups:
        return final
    keys = core.key_columns()
    wrapped = exp.Select(
        expressions=[exp.Column(this=exp.Star(), table=exp.to_identifier("__m"))],
        from_=exp.From(
            this=exp.Subquery(this=final, alias=exp.TableAlias(this=exp.to_identifier("__m")))
        ),
    )
    for index, stats in enumerate(groups.values()):
        alias = f"__dg{index}"
        for stat in stats:
            wrapped.append(
                "expressions",
                exp.alias_(
                    exp.Cast(
                        this=exp.Coalesce(
                            this=exp.column(stat.column, table=alias),
                            expressions=[exp.Literal.number(0)],
                        ),
                        to=exp.DataType.build("BIGINT" if stat.integer else "DOUBLE"),
                    ),
                    stat.column,
                    copy=False,
                ),
            )
        on: exp.Expr = (
            exp.and_(
                *(
                    exp.NullSafeEQ(
                        this=exp.column(k, table="__m"), expression=exp.column(k, table=alias)
                    )
                    for k in keys
                )
            )
            if keys
            else exp.true()
        )
        wrapped = wrapped.join(
            exp.Table(
                this=exp.to_identifier(f"dg{index}"),
                alias=exp.TableAlias(this=exp.to_identifier(alias)),
            ),
            on=on,
            join_type="LEFT",
            copy=False,
        )
    return wrapped
