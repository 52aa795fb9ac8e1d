"""Spark's forms of the per-person aggregation ``pp`` (issue 16, Spark's floor ratio).

Two rewrites of the rendered core, each giving the same rows as the form it replaces
(docs/ARCHITECTURE.md, "Spark's per-person aggregation"):

* **Bounded sums in DOUBLE.** The rendered core sums integers in DECIMAL(38, 0), since
  Spark's SUM(BIGINT) wraps around; Spark adds such decimals through Java's BigDecimal,
  which made them most of the core's time at 10M rows. A person's scaled sum
  (per_person.py's ``_scaled``: ``CASE WHEN COUNT(x) > C THEN CAST(SUM(x) AS DOUBLE) *
  C / COUNT(x) ELSE SUM(x) END``) is a DOUBLE whatever its sum's type. When ``x`` is an
  expression over r's clamped integer columns with ``C * max|x| < 2^53``, summing it as
  DOUBLE gives the same value: in the ELSE branch at most C integers are added and every
  partial sum is an integer below 2^53, so each addition is exact; in the THEN branch
  DuckDB rounds its exact sum to DOUBLE once, which the DOUBLE sum equals as long as
  ``n * max|x| < 2^53`` (about 2 * 10^12 rows of one person in one group at the demo's
  bound of 4,000) and stays within DOUBLE rounding of it beyond.
* **Two-level grouping for text keys.** With one group per person (issue 10), ``pp``
  groups by the person alone and takes ``MIN(key)``. Spark's hash aggregation keeps only
  fixed-width buffers, so a MIN over text makes it sort every row (SortAggregate). When
  a key is text and every other aggregate of ``pp`` is a COUNT or SUM, ``pp0`` first
  groups r by (person, keys) with hash aggregation and ``pp`` then merges those rows per
  person: MIN of the keys, SUM of the counts and sums. The groups are the person's
  alone, as before (L0 = 1 still holds if a key varies within a person), and each
  merged value is the one-level value: COUNTs add up, SUMs of SUMs are the SUM (NULL
  when all are NULL), MIN over the (person, key) rows is MIN over the rows.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.engines.clamped_columns import (
    bound,
    column_bounds,
    column_families,
    integer_literal,
    rows_and_per_person,
)
from proxy.engines.kinds import Family, Typer

EXACT_DOUBLE = 2**53  # every integer below it is a DOUBLE


def per_person(tree: exp.Expr, typer: Typer) -> None:
    """Both rewrites on ``tree`` in place (``typer`` types r's columns)."""
    found = rows_and_per_person(tree)
    if found is None:
        return
    with_, r, pp = found
    kinds = column_families(r.this, typer)
    bounds = column_bounds(r.this, kinds)
    for case in list(pp.this.find_all(exp.Case)):
        _double_scaled_sum(case, bounds)
    _two_level(with_, pp, kinds)


def _double_scaled_sum(case: exp.Case, bounds: dict[str, int]) -> None:
    """A scaled sum (per_person.py's ``_scaled``) over bounded integers, summed as DOUBLE
    where that is exact (the module's docstring)."""
    ifs = case.args.get("ifs") or []
    default = case.args.get("default")
    if len(ifs) != 1 or not isinstance(default, exp.Sum) or default.args.get("distinct"):
        return
    test, then = ifs[0].this, ifs[0].args.get("true")
    # THEN: CAST(SUM(x) AS DOUBLE) * C / COUNT(x), parsed as ((cast * C) / count)
    while isinstance(then, (exp.Div, exp.Mul)):
        then = then.this
    if not (
        isinstance(test, exp.GT)
        and isinstance(test.this, exp.Count)
        and isinstance(then, exp.Cast)
        and then.to.this is exp.DataType.Type.DOUBLE
        and isinstance(then.this, exp.Sum)
        and then.this == default
    ):
        return
    cap = integer_literal(test.expression)
    largest = bound(default.this, bounds)
    if cap is None or largest is None or cap < 0 or cap * largest >= EXACT_DOUBLE:
        return
    for total in (then.this, default):
        total.set("this", exp.Cast(this=total.this, to=exp.DataType.build("DOUBLE")))


def _two_level(with_: exp.With, pp_cte: exp.CTE, kinds: dict[str, Family]) -> None:
    """``pp`` grouped by the person with MIN over a text key, as ``pp0`` grouped by
    (person, keys) and ``pp`` merging its rows per person (the module's docstring)."""
    pp = pp_cte.this
    group = pp.args.get("group")
    if not isinstance(group, exp.Group) or [g.sql() for g in group.expressions] != ["__u"]:
        return
    if any(pp.args.get(part) for part in ("where", "having", "joins", "qualify")):
        return  # only a plain aggregation of r moves onto pp0's rows unchanged
    keys: list[str] = []
    aggregates: dict[str, exp.AggFunc] = {}
    for item in pp.expressions:
        value = item.this if isinstance(item, exp.Alias) else item
        if (
            isinstance(value, exp.Min)
            and isinstance(value.this, exp.Column)
            and isinstance(item, exp.Alias)
            and item.alias == value.this.name
        ):
            keys.append(item.alias)
            continue
        for call in value.find_all(exp.AggFunc):
            if not isinstance(call, (exp.Count, exp.Sum)) or _distinct(call):
                return
            aggregates.setdefault(call.sql(), call)
    if not keys or all(kinds.get(k) != Family.TEXT for k in keys):
        return
    names = {text: f"__a{i}" for i, text in enumerate(aggregates)}
    inner = exp.Select(
        expressions=[
            exp.column("__u"),
            *(exp.column(k) for k in keys),
            *(exp.alias_(call.copy(), names[text]) for text, call in aggregates.items()),
        ],
        from_=exp.From(this=exp.Table(this=exp.to_identifier("r"))),
        group=exp.Group(expressions=[exp.column("__u"), *(exp.column(k) for k in keys)]),
    )
    for item in pp.expressions:
        value = item.this if isinstance(item, exp.Alias) else item
        for call in list(value.find_all(exp.AggFunc)):
            if call.sql() in names:
                call.replace(exp.Sum(this=exp.column(names[call.sql()])))
    pp.set("from_", exp.From(this=exp.Table(this=exp.to_identifier("pp0"))))
    position = with_.expressions.index(pp_cte)
    with_.expressions.insert(
        position, exp.CTE(this=inner, alias=exp.TableAlias(this=exp.to_identifier("pp0")))
    )


def _distinct(call: exp.AggFunc) -> bool:
    return bool(call.args.get("distinct")) or isinstance(call.this, exp.Distinct)
