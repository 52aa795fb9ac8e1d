"""The relation an outer query reads through its FROM: a subquery, or the query's one
CTE named there. Per-person aggregates (proxy/per_person_values.py) and UNION ALL in
FROM (proxy/union_rows.py) both turn that relation into a derived table."""

from __future__ import annotations

from sqlglot import exp


def from_source(tree: exp.Expr) -> tuple[exp.Expr, str] | None:
    """The body the outer SELECT reads in FROM and the name it calls it by, or None
    (no FROM, a table, or a recursive WITH, which the checker refuses anyway)."""
    if not isinstance(tree, exp.Select):
        return None
    from_ = tree.args.get("from_")
    if from_ is None:
        return None
    source = from_.this
    if isinstance(source, exp.Subquery):
        return source.this, source.alias_or_name
    with_ = tree.args.get("with_")
    if with_ is not None and with_.args.get("recursive"):
        return None
    if isinstance(source, exp.Table) and not source.db and with_ is not None:
        ctes = {c.alias_or_name.lower(): c.this for c in with_.expressions}
        inner = ctes.get(source.name.lower())
        if inner is not None and len(ctes) == 1:
            return inner, source.alias_or_name
    return None
