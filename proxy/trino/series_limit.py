"""Superset's series-limit join, answered as two private releases.

A time series "split by model, top 3 series" arrives as one query:

    SELECT DATE_TRUNC('WEEK', ts) AS ts, model AS model, COUNT(*) AS count
    FROM prompts
    JOIN (SELECT model AS model__, COUNT(*) AS mme_inner__ FROM prompts WHERE …
          GROUP BY model ORDER BY COUNT(*) DESC LIMIT 3) AS series_limit
      ON model = model__
    WHERE … GROUP BY DATE_TRUNC('WEEK', ts), model

The engine answers no aggregate inside a join (a ranking of private counts would steer
which rows are released). The door instead asks the ranking first, as its own query —
released with noise, ranked and cut after release — and then asks the chart query with
the join replaced by ``model IN (<released keys>)``: a filter on public, already released
values. Both are ordinary engine calls; each is charged (or replayed) by the engine.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlglot import exp


@dataclass(frozen=True)
class SeriesLimit:
    ranking: exp.Select  # the subquery, asked on its own first
    key_output: str  # its output column holding the series keys (e.g. model__)
    chart: exp.Select  # the outer query without the join
    key: exp.Expr  # the outer expression the keys filter (e.g. model)


def _output_names(select: exp.Select) -> dict[str, exp.Expr]:
    return {e.alias_or_name.lower(): e for e in select.expressions}


def split(tree: exp.Expr) -> SeriesLimit | None:
    """The two parts of a query with one series-limit join, or None for any other shape."""
    if not isinstance(tree, exp.Select):
        return None
    joins = tree.args.get("joins") or []
    if len(joins) != 1:
        return None
    join = joins[0]
    sub = join.this
    on = join.args.get("on")
    if (
        not isinstance(sub, exp.Subquery)
        or not isinstance(sub.this, exp.Select)
        or not isinstance(on, exp.EQ)
        or join.args.get("side")
        or join.args.get("using")
    ):
        return None
    ranking = sub.this
    if ranking.args.get("group") is None or ranking.args.get("limit") is None:
        return None
    outputs = _output_names(ranking)
    alias = sub.alias.lower()
    key_output: str | None = None
    key: exp.Expr | None = None
    for mine, theirs in ((on.left, on.right), (on.right, on.left)):
        if (
            isinstance(theirs, exp.Column)
            and theirs.name.lower() in outputs
            and (not theirs.table or theirs.table.lower() == alias)
            and not any(c.table.lower() == alias for c in mine.find_all(exp.Column))
        ):
            key_output, key = theirs.name.lower(), mine
            break
    if key_output is None or key is None:
        return None
    chart = tree.copy()
    chart.set("joins", None)
    return SeriesLimit(ranking.copy(), key_output, chart, key.copy())


def literal(value: Any) -> exp.Expr:
    """A released key as a SQL literal."""
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, float) and not math.isfinite(value):
        # 'inf' and 'nan' are not number literals: a released infinite key is a cast.
        return exp.cast(exp.Literal.string(str(value)), "DOUBLE")
    if isinstance(value, (int, float, Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.strftime("%Y-%m-%d %H:%M:%S.%f")), "TIMESTAMP")
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    return exp.Literal.string(str(value))


def restrict(part: SeriesLimit, keys: list[Any]) -> exp.Select:
    """The chart query filtered to the released series keys (none: nothing matches). A
    released NULL series matches nothing, as in the JOIN ... ON key = key__ it stands for."""
    values = [literal(k) for k in keys if k is not None] or [exp.Null()]
    condition = exp.In(this=part.key.copy(), expressions=values)
    chart = part.chart.copy()
    return chart.where(condition, copy=False)


def stand_in(part: SeriesLimit, most: int) -> exp.Select:
    """The chart as it will be sent, before the ranking has released any key: filtered
    by as many stand-ins for keys as the ranking's LIMIT lets it release (at most
    ``most``). Planning it refuses, before the ranking is charged, what the chart
    would be refused for: its own text, and an IN list too long for the engine's limits."""
    limit = part.ranking.args["limit"].expression
    count = int(limit.name) if isinstance(limit, exp.Literal) and limit.is_int else most
    # A NULL per key, never a copy of the key expression (copying a 1,800-node key 2,000
    # times took 71 s and 2.7 GB before any check: review of 2026-12-04). Released keys
    # are literals of one to three syntax nodes and of any length, so a chart near the
    # engine's limits may still be refused once its keys are known: for the released
    # keys alone, after the ranking was paid for.
    stand_ins: list[exp.Expr] = [exp.Null() for _ in range(max(1, min(count, most)))]
    condition = exp.In(this=part.key.copy(), expressions=stand_ins)
    return part.chart.copy().where(condition, copy=False)
