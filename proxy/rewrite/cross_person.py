"""Rule: aggregate the bounded contributions across people, per group.

The result has one row per group: the key columns, one column per statistic and
``__persons``, the number of distinct people in the group (for partition selection).

Every statistic leaves the engine in a fixed type that the release step converts
without fail: integer totals saturate at ±2^62 and come out as BIGINT (the exact sum is
taken in the engine's 128-bit integers, which cannot overflow on per-person values of
at most 2^62), float totals come out as DOUBLE (finite: they are exact DECIMAL sums).
Saturating is a contraction, so it never widens the distance between neighbours.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from accounting.mechanisms import MAX_UNITS
from proxy.render import owned_duckdb_sql
from proxy.rewrite import core as C
from proxy.rewrite import distinct_values, quantile_histogram

_BIGINT = exp.DataType.build("BIGINT")  # shared: insert copies only
_DOUBLE = exp.DataType.build("DOUBLE")


def _total(stat: C.Statistic, l0_cut: bool = False) -> exp.Expr:
    """The cross-person total of one statistic, in a type that cannot fail to convert."""
    per_person: exp.Expr = exp.column(stat.column)
    if stat.kind == C.CLIPPED and l0_cut:
        # Cut by the row cap here, or by the group cap elsewhere: counted once.
        per_person = exp.Greatest(
            this=per_person, expressions=[exp.column("__l0cut")], ignore_nulls=True
        )
    # COALESCE: the sum of no rows is NULL, and DuckDB's LEAST/GREATEST would skip it
    # and return the saturation bound.
    total: exp.Expr = exp.Coalesce(
        this=exp.Sum(this=per_person), expressions=[exp.Literal.number(0)]
    )
    if not stat.integer:
        return exp.Cast(this=total, to=_DOUBLE.copy())
    saturated = exp.Least(
        this=exp.Greatest(
            this=total, expressions=[exp.Literal.number(-MAX_UNITS)], ignore_nulls=True
        ),
        expressions=[exp.Literal.number(MAX_UNITS)],
        ignore_nulls=True,
    )
    return exp.Cast(this=saturated, to=_BIGINT.copy())


def apply(core: C.Core) -> C.Core:
    # Every node below is fresh, so no builder needs to copy it.
    cols: list[exp.Expr] = [exp.column(k) for k in core.key_columns()]
    l0_cut = any(name == "heavy" for name, _ in core.ctes)
    for stat in core.statistics:
        if stat.kind in C.DISTINCT_KINDS:
            continue  # joined on below (distinct_values.with_counts)
        if stat.kind == C.PERSONS:
            cols.append(exp.alias_(exp.Count(this=exp.Star()), stat.column, copy=False))
        else:
            cols.append(exp.alias_(_total(stat, l0_cut), stat.column, copy=False))
    cols.append(exp.alias_(exp.Count(this=exp.Star()), "__persons", copy=False))
    final = exp.Select(expressions=cols, from_=C.from_table("bounded"))
    if core.keys:
        # Not keyed (rewrite/keyed_groups.py): each person adds at most K keys here.
        final.set("group", exp.Group(expressions=[exp.column(k) for k in core.key_columns()]))
    final = distinct_values.with_counts(core, final)
    if core.quantiles:
        # MEDIAN, quantiles, MIN, MAX: each group's histograms beside its statistics.
        final = quantile_histogram.with_histograms(core, final)
    # Built directly: the builder's with_() deep-copies every CTE body.
    final.set(
        "with_",
        exp.With(
            expressions=[
                exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(name)))
                for name, body in core.ctes
            ]
        ),
    )
    # Rendered in place (copy=False): the generator may rewrite nodes as it goes, which
    # is harmless here because this tree, CTE bodies included, is never read again.
    return replace(core, sql=owned_duckdb_sql(final))
