"""Per-person facts joined to a one-row-per-person table, in the order dpsql answers.

Looker's derived tables, Tableau's FIXED expressions and notebooks write "per user,
then by segment" as a per-person aggregate joined to the people's table on the id,
often with the people's table first, or the aggregate as a CTE::

    WITH f AS (SELECT user_id, COUNT(*) AS n FROM prompts GROUP BY 1)
    SELECT u.plan, AVG(f.n) FROM users u JOIN f ON f.user_id = u.user_id GROUP BY u.plan

dpsql answers the aggregate in FROM with the people's table joined to it
(``FROM (SELECT ... GROUP BY user_id) f JOIN users u ON ...``: a per-person derived
table as the anchor, proxy/per_person_values.py, and the key join of
proxy/rewrite/key_join.py). This rule writes the other spellings so: a CTE read once in
FROM or a JOIN as the subquery it names, and an INNER join of the people's table to
such an aggregate with the two sides swapped (an INNER join's rows do not depend on its
order). Nothing else changes; every check then applies to the query as rewritten. A LEFT
join from the people's table adds people with no facts: not this rule's, it stays
refused with a hint. (A corpus of BI SQL, 2026-12-06: four of its queries.)
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog import DEFAULT_DB, Catalog, TableInfo


def _people_table(node: exp.Expr, catalog: Catalog) -> TableInfo | None:
    """The one-row-per-person policy table ``node`` names, if it does."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        return None
    info = catalog.get(node.db or DEFAULT_DB, node.name)
    if info is None or info.public or not info.policy.one_row_per_person:
        return None
    return info if info.policy.unit else None


def _aggregated(node: exp.Expr) -> bool:
    """A FROM item that is a subquery grouping rows (per person, the checks decide)."""
    return (
        isinstance(node, exp.Subquery)
        and isinstance(node.this, exp.Select)
        and node.this.args.get("group") is not None
    )


def _inline_ctes(select: exp.Select) -> None:
    """Each CTE that groups rows and is read once, in FROM or a JOIN, as the subquery it
    names there (in place)."""
    with_ = select.args.get("with_")
    if with_ is None:
        return
    for cte in list(with_.expressions):
        if not (isinstance(cte.this, exp.Select) and cte.this.args.get("group") is not None):
            continue
        name = cte.alias.lower()
        reads = [t for t in select.find_all(exp.Table) if not t.db and t.name.lower() == name]
        if len(reads) != 1 or not isinstance(reads[0].parent, (exp.From, exp.Join)):
            continue
        table = reads[0]
        alias = table.alias or table.name
        table.replace(
            exp.Subquery(this=cte.this.copy(), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        )
        cte.pop()
    if not with_.expressions:
        select.set("with_", None)


def push(tree: exp.Expr, catalog: Catalog) -> exp.Expr:
    """``tree`` in the order dpsql answers when it joins per-person facts to the people's
    table (module text); any other query as it is."""
    if not isinstance(tree, exp.Select) or not tree.args.get("joins"):
        return tree
    out = tree.copy()
    _inline_ctes(out)
    joins = out.args.get("joins") or []
    from_ = out.args.get("from_")
    if isinstance(from_, exp.From) and len(joins) == 1:
        join = joins[0]
        inner = not join.side and (join.kind or "").upper() in ("", "INNER")
        if (
            inner
            and join.args.get("on") is not None
            and not join.args.get("using")
            and _people_table(from_.this, catalog) is not None
            and _aggregated(join.this)
        ):
            people, facts = from_.this, join.this
            from_.set("this", facts.copy())
            join.set("this", people.copy())
    return out
