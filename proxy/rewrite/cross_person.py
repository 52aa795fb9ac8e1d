"""Rule: aggregate the bounded contributions across people, per group.

The result has one row per group: the key columns, one column per statistic and
``__persons``, the number of distinct people in the group (for partition selection).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from proxy.rewrite import core as C


def apply(core: C.Core) -> C.Core:
    # Every node below is fresh, so no builder needs to copy it.
    cols: list[exp.Expr] = [exp.column(k) for k in core.key_columns()]
    for stat in core.statistics:
        if stat.kind == C.PERSONS:
            cols.append(exp.alias_(exp.Count(this=exp.Star()), stat.column, copy=False))
        else:
            cols.append(exp.alias_(exp.Sum(this=exp.column(stat.column)), stat.column, copy=False))
    cols.append(exp.alias_(exp.Count(this=exp.Star()), "__persons", copy=False))
    final = exp.Select(expressions=cols, from_=C.from_table("bounded"))
    if core.keys:
        final.set("group", exp.Group(expressions=[exp.column(k) for k in core.key_columns()]))
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
    return replace(core, sql=final.sql(dialect="duckdb", copy=False))
