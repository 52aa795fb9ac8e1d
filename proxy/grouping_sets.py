"""Rule: ``GROUP BY ROLLUP / CUBE / GROUPING SETS`` becomes an outer query over the
release of the finest grouping.

``SELECT model, flagged, COUNT(*) FROM prompts GROUP BY CUBE (model, flagged)`` asks for
the cells of (model, flagged) and their subtotals. Each person is in every grouping set,
so answering each set as a release of its own would charge one per set. Instead the
finest grouping is released once (``GROUP BY model, flagged``, charged once, cached), and
the subtotals are sums of its released cells: post-processing, free, run by the outer
layer (proxy/nested.py), whose intervals simulate the inner answer's noise, so a
subtotal of k cells carries the wider interval its sum of k noisy values has. Only what
sums exactly from cells is rewritten: ``COUNT(*)``, ``COUNT(x)``, ``SUM(x)`` and
``AVG(x)`` (as the sum of the cells' sums over the sum of their counts). Anything else
(``COUNT(DISTINCT x)``, which cells cannot add up, MIN, quantiles, HAVING, GROUPING(),
a WITH) is left as written, and refused as before. With partition selection (keys with
no declared values) a cell below the threshold is missing from every subtotal that
would hold it; the answer says so, as every partition-selected answer does.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.render import output_name

_SETS = (exp.Rollup, exp.Cube, exp.GroupingSets)
CELLS = "__cells"


class _NotCells(Exception):
    """The query is not of the shape rewritten here (left as written)."""


def _named(
    group: exp.Group, items: list[exp.Expr], columns: frozenset[str] = frozenset()
) -> exp.Group:
    """``group`` with each position (``ROLLUP (1, 2)``) and each select-list alias
    (``CUBE (mon, model)``) inside its grouping sets replaced by the select item it
    names, as SQL reads them. An alias that is also a column's name anywhere else in the
    query, a column of a table (``columns``: lower-case names, every table's the query
    may read) or an output of a subquery or CTE is left, and with it the query: SQL's
    GROUP BY reads a source's column before an alias; so is a position of an
    aggregate."""
    select = group.parent
    aliases = {
        i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias) and i.alias
    }
    elsewhere = {
        c.name.lower()
        for c in (select.find_all(exp.Column) if select is not None else ())
        if c.find_ancestor(exp.Group, exp.Order) is None  # (ORDER BY reads aliases first)
    } | columns
    for inner in select.find_all(exp.Select) if select is not None else ():
        if inner is not select:  # a subquery's or CTE's outputs are its source's columns
            elsewhere |= {output_name(e).lower() for e in inner.expressions}

    def name(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Literal) and node.is_int:
            at = int(node.this) - 1
            if not 0 <= at < len(items) or items[at].unalias().find(exp.AggFunc) is not None:
                raise _NotCells
            return items[at].unalias().copy()
        if isinstance(node, exp.Column) and not node.table:
            target = aliases.get(node.name.lower())
            if target is not None and node.name.lower() not in elsewhere:
                if target.find(exp.AggFunc) is not None:
                    raise _NotCells
                return target.copy()
        return node

    named = group.copy()
    for item in list(named.expressions):
        if isinstance(item, _SETS):
            for part in list(item.expressions):
                part.replace(_rename(part, name))
        else:  # a plain key beside the grouping sets (GROUP BY 1, ROLLUP (2))
            item.replace(_rename(item, name))
    return named


def _rename(node: exp.Expr, name: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """A grouping set's member (a key, a parenthesised key or a tuple of keys) with each
    key passed through ``name``."""
    if isinstance(node, exp.Paren):
        return exp.Paren(this=_rename(node.this, name))
    if isinstance(node, exp.Tuple):
        return exp.Tuple(expressions=[_rename(p, name) for p in node.expressions])
    return name(node)


def _keys(group: exp.Group) -> list[exp.Expr]:
    """Every expression the grouping names, in order, each once."""
    keys: list[exp.Expr] = []

    def add(node: exp.Expr) -> None:
        if isinstance(node, exp.Paren):
            add(node.this)
            return
        if isinstance(node, exp.Tuple):
            for part in node.expressions:
                add(part)
            return
        if isinstance(node, exp.Literal):
            raise _NotCells  # an ordinal (GROUP BY ROLLUP (1, 2)): not rewritten
        if node not in keys:
            keys.append(node)

    for item in group.expressions:
        if isinstance(item, _SETS):
            for part in item.expressions:
                add(part)
        else:
            add(item)
    return keys


class _Cells:
    """The inner query's columns, named as the answer names what they hold (its notes
    and warnings speak of them), else by a name of dpsql's own."""

    def __init__(self, tree: exp.Select, keys: list[exp.Expr]):
        self.keys = keys
        names = [output_name(i) for i in tree.expressions]
        self._free = {n for n in names if names.count(n) == 1}
        self._taken: set[str] = set()  # (never free again: one name, one cell)
        self.key_names: list[str] = []
        for i, key in enumerate(keys):
            shown = [
                n for item, n in zip(tree.expressions, names, strict=True) if item.unalias() == key
            ]
            self.key_names.append(self._take(shown[0] if shown else "", f"__g{i}"))
        self.items: list[exp.Expr] = [
            exp.alias_(k.copy(), n, quoted=True) for k, n in zip(keys, self.key_names, strict=True)
        ]
        self._count = 0

    def _take(self, wanted: str, fallback: str) -> str:
        if wanted and wanted in self._free and not wanted.startswith("__"):
            self._free.discard(wanted)
            self._taken.add(wanted)
            return wanted
        return fallback

    def key(self, i: int) -> exp.Expr:
        return exp.column(self.key_names[i], quoted=True)

    def on_cells(self, node: exp.Expr) -> exp.Expr:
        """``node`` with each key replaced by its column of the released cells."""

        def swap(n: exp.Expr) -> exp.Expr:
            for i, key in enumerate(self.keys):
                if n == key:
                    return self.key(i)
            return n

        return node.copy().transform(swap)

    def _cell(self, stat: exp.Expr, wanted: str) -> exp.Expr:
        """``SUM`` over the cells of a statistic the inner query releases."""
        name = self._take(wanted, f"__a{self._count}")
        self._count += 1
        self.items.append(exp.alias_(stat, name, quoted=True))
        return exp.Sum(this=exp.column(name, quoted=True))

    def statistic(self, agg: exp.Expr, name: str) -> exp.Expr:
        """The outer expression for one aggregate of the select list."""
        if isinstance(agg, exp.Count):
            if isinstance(agg.this, exp.Distinct):
                raise _NotCells  # the cells' distinct counts do not add up
            return self._cell(agg.copy(), name)
        if isinstance(agg, exp.Sum):
            return self._cell(agg.copy(), name)
        if isinstance(agg, exp.Avg):
            self._free |= {f"{name} (sum)", f"{name} (count)"} - self._taken
            total = self._cell(exp.Sum(this=agg.this.copy()), f"{name} (sum)")
            n = self._cell(exp.Count(this=agg.this.copy()), f"{name} (count)")
            return exp.Div(
                this=total, expression=exp.Nullif(this=n, expression=exp.Literal.number(0))
            )
        raise _NotCells


def as_cells(tree: exp.Expr, columns: frozenset[str] = frozenset()) -> exp.Select | None:
    """``tree`` as an outer query over its finest grouping's release (a new tree), or
    None when it groups by no ROLLUP, CUBE or GROUPING SETS or is not of a shape whose
    subtotals are sums of cells. Reads no data; the inner query is an ordinary one,
    checked, charged and bounded as any other. ``columns``: the lower-case names of the
    columns of the tables the query may read (an alias of such a name is not read as
    the alias inside a grouping set)."""
    if not isinstance(tree, exp.Select):
        return None
    group = tree.args.get("group")
    if group is None or not any(isinstance(e, _SETS) for e in group.expressions):
        return None
    if any(tree.args.get(k) for k in ("having", "qualify", "distinct", "with_", "windows")):
        return None
    if tree.find(exp.Window, exp.Grouping, exp.GroupingId) is not None:
        return None
    try:
        group = _named(group, list(tree.expressions), columns)
        keys = _keys(group)
        cells = _Cells(tree, keys)
        outer_items: list[exp.Expr] = []
        for item in tree.expressions:
            value = item.unalias()
            name = output_name(item)
            if value in keys:
                outer_items.append(exp.alias_(cells.key(keys.index(value)), name, quoted=True))
            elif isinstance(value, exp.AggFunc):
                outer_items.append(exp.alias_(cells.statistic(value, name), name, quoted=True))
            else:
                raise _NotCells  # arithmetic over aggregates and keys: not rewritten
    except _NotCells:
        return None
    inner = tree.copy()
    for clause in ("order", "limit", "offset"):
        inner.set(clause, None)
    inner.set("expressions", cells.items)
    inner.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    outer = exp.Select(expressions=outer_items)
    outer.set(
        "from_",
        exp.From(
            this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(CELLS)))
        ),
    )
    outer.set("group", cells.on_cells(group))
    order = tree.args.get("order")
    if order is not None:
        names = {output_name(i).lower() for i in tree.expressions}
        ordered = []
        for by in order.expressions:
            target = by.this
            if isinstance(target, exp.Column) and not target.table and target.name.lower() in names:
                ordered.append(by.copy())
                continue
            if isinstance(target, exp.Literal) and target.is_int:  # ORDER BY 1
                at = int(target.this) - 1
                if not 0 <= at < len(tree.expressions):
                    return None
                by = by.copy()
                by.set("this", exp.column(output_name(tree.expressions[at]), quoted=True))
                ordered.append(by)
                continue
            matches = [i for i in tree.expressions if i.unalias() == target]
            if not matches:
                return None
            by = by.copy()
            by.set("this", exp.column(output_name(matches[0]), quoted=True))
            ordered.append(by)
        outer.set("order", exp.Order(expressions=ordered))
    for clause in ("limit", "offset"):
        if tree.args.get(clause) is not None:
            outer.set(clause, tree.args[clause].copy())
    return outer
