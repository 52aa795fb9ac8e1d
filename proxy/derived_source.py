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
        return _named(source.this, source.args.get("alias")), source.alias_or_name
    with_ = tree.args.get("with_")
    if with_ is not None and with_.args.get("recursive"):
        return None
    if isinstance(source, exp.Table) and not source.db and with_ is not None:
        ctes = {c.alias_or_name.lower(): c for c in with_.expressions}
        cte = ctes.get(source.name.lower())
        if cte is not None and len(ctes) == 1:
            # WITH t(a, b) AS (...) SELECT ... FROM t AS u(c, d): the CTE's list, then
            # the reference's
            inner = _named(cte.this, cte.args.get("alias"))
            return _named(inner, source.args.get("alias")), source.alias_or_name
    return None


def _named(body: exp.Expr, alias: exp.Expr | None) -> exp.Expr:
    """``body`` with its columns renamed by the alias's column list, as SQL reads
    ``(SELECT a, b ...) AS t(x, y)``: by position, the first columns only when the list is
    shorter, names beyond the select list unused (a copy; ``body`` itself when there is
    no list or the select list holds a star). The per-person and UNION
    ALL derivations name the derived table's columns from the select list, so without
    this a list that swaps two names would silently answer about the wrong column."""
    if not isinstance(alias, exp.TableAlias) or not alias.args.get("columns"):
        return body
    columns = alias.args["columns"]
    renamed = body.copy()
    first = renamed
    while isinstance(first, exp.SetOperation):
        first = first.this
    items = first.expressions if isinstance(first, exp.Select) else []
    if any(
        isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))
        for i in items
    ):
        # (a star's columns are not known here: the binder reads the list, as before)
        return body
    for item, name in zip(items, columns, strict=False):
        value = item.this if isinstance(item, exp.Alias) else item
        item.replace(exp.alias_(value.copy(), name.copy(), copy=False))
    return renamed
