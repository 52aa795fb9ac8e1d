"""Rule: a constant GROUP BY key is dropped from the grouping.

BI tools group by a label column they write as a constant (``SELECT 'All' AS segment,
model, COUNT(*) ... GROUP BY 1, 2``): a constant splits no group, so the grouping by the
other keys is the same, and the select list still shows the constant on every row.
Bound, such a key is a literal, which the checker refused as "GROUP BY position numbers
could not be resolved" (an honest-answers probe, 2026-12-06). A query grouped by
constants alone becomes ungrouped: one row, as SQL gives whenever the table has a row.
"""

from __future__ import annotations

from sqlglot import exp


def _constant(key: exp.Expr) -> bool:
    key = key.unnest()
    if isinstance(key, exp.Neg):
        key = key.this
    return isinstance(key, (exp.Literal, exp.Boolean, exp.Null))


def dropped(select: exp.Select) -> exp.Select:
    """``select`` (in place) without its constant GROUP BY keys."""
    group = select.args.get("group")
    if group is None or not any(_constant(k) for k in group.expressions):
        return select
    kept = [k for k in group.expressions if not _constant(k)]
    if kept:
        group.set("expressions", kept)
    else:
        select.set("group", None)
    return select
