"""Rule: aggregate the bounded contributions across people, per group.

The result has one row per group: the key columns, one column per statistic and
``__persons``, the number of distinct people in the group (for partition selection).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from proxy.rewrite import core as C


def apply(core: C.Core) -> C.Core:
    cols: list[exp.Expr] = [exp.column(k) for k in core.key_columns()]
    for stat in core.statistics:
        if stat.kind == C.PERSONS:
            cols.append(exp.alias_(exp.Count(this=exp.Star()), stat.column))
        else:
            cols.append(exp.alias_(exp.Sum(this=exp.column(stat.column)), stat.column))
    cols.append(exp.alias_(exp.Count(this=exp.Star()), "__persons"))
    final = exp.select(*cols).from_("bounded")
    if core.keys:
        final = final.group_by(*(exp.column(k) for k in core.key_columns()))
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
    return replace(core, sql=final.sql(dialect="duckdb"))
