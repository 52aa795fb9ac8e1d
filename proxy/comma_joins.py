"""Rule: a comma join is read as the inner join its WHERE clause makes of it.

``FROM prompts p, users u WHERE p.user_id = u.user_id`` is the cross product filtered by
the equality, which is exactly ``prompts p JOIN users u ON p.user_id = u.user_id``. The
join checks (proxy/joins.py) read a join's ON condition, so the comma spelling, common in
notebooks and older SQL, was refused with "must be joined on the person id" although it
was (an honest-answers probe, 2026-12-06). On the bound tree (every column qualified by
its table's alias), each plain comma join takes the WHERE conjuncts that equate one of its
columns with a column of a table before it as its ON condition; the rest of WHERE stays.
A comma join with no such conjunct is left as written, and refused as before.
"""

from __future__ import annotations

from sqlglot import exp


def _alias(node: exp.Expr) -> str:
    return node.alias_or_name.lower()


def _joins_across(conjunct: exp.Expr, mine: str, before: set[str]) -> bool:
    """An equality of a column of ``mine`` with a column of a table in ``before``."""
    if not isinstance(conjunct, exp.EQ):
        return False
    left, right = conjunct.left, conjunct.right
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return False
    sides = {left.table.lower(), right.table.lower()}
    return mine in sides and len(sides) == 2 and (sides - {mine}) <= before


def as_inner_joins(select: exp.Select) -> exp.Select:
    """``select`` with each plain comma join written as the inner join its WHERE
    equalities make (in place; the same rows by definition of the comma join)."""
    joins = select.args.get("joins") or []
    where = select.args.get("where")
    from_ = select.args.get("from_")
    if where is None or from_ is None or not any(_is_comma(j) for j in joins):
        return select
    conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    before = {_alias(from_.this)}
    for join in joins:
        mine = _alias(join.this)
        if _is_comma(join):
            taken = [c for c in conjuncts if _joins_across(c.unnest(), mine, before)]
            if taken:
                join.set("on", exp.and_(*(c.unnest() for c in taken), copy=False))
                conjuncts = [c for c in conjuncts if all(c is not t for t in taken)]
        before.add(mine)
    if not conjuncts:
        select.set("where", None)
    else:
        where.set("this", exp.and_(*conjuncts, copy=False))
    return select


def _is_comma(join: exp.Join) -> bool:
    """A join written with a comma: no kind, side, ON or USING (CROSS JOIN has a kind)."""
    return isinstance(join.this, exp.Table) and not any(
        join.args.get(k) for k in ("kind", "side", "on", "using", "method")
    )
