"""Which table names in a query are its CTEs, by SQL's scoping rules.

A name is a CTE only where the CTE is in scope: in the main query of the statement that
defines it, and in the bodies of the CTEs defined after it (a non-recursive CTE's own
body reads the real table of its name). Reading every name that equals some CTE's name
as that CTE, wherever it stood, let a CTE switch off the grant check of the real table
(``WITH users AS (SELECT * FROM users)``, or a CTE inside a subquery named like a table
read elsewhere: a probe, 2026-12-02), and let a CTE inside a semi-join's subquery pass
as the private table of its name.

So: a WITH is accepted only at the top of the statement (one scope for the whole
query, which is what every later step assumes), its CTE names are distinct and differ
from the tables the caller can read (so that no step can take one for the other), and
each table node is classified here once, by scope.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from proxy.errors import position_of, unsupported


def _name(table: exp.Table) -> str | None:
    """The bare name a CTE reference has (None for a qualified name)."""
    if table.db or table.catalog or not isinstance(table.this, exp.Identifier):
        return None
    return table.name.lower()


def cte_references(tree: exp.Expr, table_names: Iterable[str] = ()) -> set[int]:
    """The ids of the table nodes of ``tree`` that read one of its CTEs; refuses a WITH
    below the top of the statement, two CTEs of one name, and a CTE named like one of
    ``table_names`` (the bare names of the tables the caller can read)."""
    for nested in tree.find_all(exp.With):
        if nested.parent is not tree:
            raise unsupported(
                "a WITH is answered only at the start of the query",
                "move the CTE to the top: WITH name AS (...) SELECT ...",
                position_of(nested),
            )
    top = tree.args.get("with_")
    if not isinstance(top, exp.With):
        return set()
    with_: exp.With = top
    if with_.args.get("recursive"):
        # The one way to make rows without a table: unbounded work, no data.
        raise unsupported(
            "recursive CTEs are not answered",
            "name the rows you need in a VALUES list, e.g. SELECT COUNT(*) FROM (VALUES "
            "(1), (2), (3)) AS r(n), or in a public table",
            position_of(with_),
        )
    taken = {n.lower() for n in table_names}
    names: list[str] = []
    refs: set[int] = set()
    for cte in with_.expressions:
        name = cte.alias_or_name.lower()
        if name in names or name in taken:
            raise unsupported(
                f"the CTE name {cte.alias_or_name} is already the name of a "
                + ("CTE" if name in names else "table"),
                "give each CTE a name of its own",
                position_of(cte),
            )
        earlier = set(names)
        if cte.this is not None:
            refs.update(id(t) for t in cte.this.find_all(exp.Table) if _name(t) in earlier)
        names.append(name)
    visible = set(names)
    refs.update(
        id(t)
        for t in tree.find_all(exp.Table)
        if _name(t) in visible and not _inside(t, with_)  # the main query: every CTE
    )
    return refs


def _inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False
