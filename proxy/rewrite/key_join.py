"""Rule: a person-constant key joined after the per-person aggregation, not before it.

With one group per person (``Core.one_group_per_person``) whose keys all come from one
one-row-per-person table INNER JOINed on the person id (``rewrite.person_constant``),
the per-person rule groups the joined rows by the person and picks MIN of each key over
every row: on DuckDB that MIN over a text key cost about half the per-person floor at
10M prompts (bench/scale.py; docs/ARCHITECTURE.md, "The public key's cache miss").
Here instead

* ``r`` reads the anchor table alone (the join and the keys leave it),
* ``pp`` aggregates ``r`` by the person exactly as before, minus the keys,
* ``pk`` is the key table grouped by its person id, MIN of each key: one row per
  person whatever the data, computed over that table's rows (one per person); or,
  when the executor vouches that the table's person ids are unique for as long as it
  runs (checked by SQL at its start on data nobody can change meanwhile: DuckDB's
  read-only file), that table's rows as they are, and
* ``bounded`` is ``pp`` INNER JOINed with ``pk`` on the person id.

Every bound stays enforced by SQL: ``pp`` and ``pk`` each have at most one row per
person (``pk`` by its GROUP BY, or by the start-up check on frozen data), so ``bounded``
has at most one (L0 = 1), and the per-person statistics are
``pp``'s, clamped by the Linf rule as before. The answer is the one the previous form
gives whenever the key table holds one row per person, which the executor checks at
start (proxy/engines/executor.check_one_row_per_person); the key expression is the
total one the earlier rules wrote (it never fails), now also evaluated on that table's
rows of people without rows in the anchor, who then find no partner in ``pp``.

The rule applies only to that shape: one join, its ON the single person-id equality,
no key column from the anchor, no column of the key table in the WHERE or in any
aggregate argument, and no DISTINCT or quantile statistic (their CTEs read ``r``'s
keys). Anything else is left as it was.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from proxy.rewrite import core as C


def _unit_equality(on: exp.Expr, anchor: str, anchor_unit: str, alias: str, unit: str) -> bool:
    if not isinstance(on, exp.EQ):
        return False
    sides = {
        (c.table.lower(), c.name.lower())
        for c in (on.this, on.expression)
        if isinstance(c, exp.Column)
    }
    return sides == {(anchor, anchor_unit), (alias, unit)}


def _key_table(core: C.Core) -> tuple[exp.Join, str, str] | None:
    """The one INNER join of a one-row-per-person table on the person id whose columns
    are all the keys read (join, its alias, its person-id column), else None."""
    shape = core.shape
    if len(core.joins) != 1 or core.from_ is None:
        return None
    join = core.joins[0]
    if (
        not isinstance(join, exp.Join)
        or join.side
        or (join.kind or "").upper() not in ("", "INNER")
    ):
        return None
    if join.args.get("using") or not isinstance(join.this, exp.Table):
        return None
    alias = join.this.alias_or_name.lower()
    anchor = shape.unit.table.lower()
    info = shape.tables.get(alias)
    anchor_info = shape.tables.get(anchor)
    if alias == anchor or info is None or anchor_info is None or info.public:
        return None
    unit, anchor_unit = info.policy.unit, anchor_info.policy.unit
    if not (info.policy.one_row_per_person and unit and anchor_unit):
        return None
    # (imported here: proxy/rewrite/__init__.py imports this module for RULES)
    from proxy.rewrite import person_constant

    if alias not in person_constant(shape):
        return None
    on = join.args.get("on")
    if on is None or not _unit_equality(on, anchor, anchor_unit.lower(), alias, unit.lower()):
        return None
    if shape.unit.name.lower() != anchor_unit.lower():
        return None
    return join, alias, unit.lower()


def _reads(node: exp.Expr | None, alias: str) -> bool:
    return node is not None and any(c.table.lower() == alias for c in node.find_all(exp.Column))


def apply(core: C.Core) -> C.Core:
    if not (core.one_group_per_person and core.bounding and core.keys) or core.quantiles:
        return core
    if any(s.kind in C.DISTINCT_KINDS for s in core.statistics):
        return core
    ctes = dict(core.ctes)
    if list(ctes) != ["r", "pp", "bounded"]:
        return core
    found = _key_table(core)
    if found is None:
        return core
    join, alias, unit = found
    r, pp = ctes["r"], ctes["pp"]
    if not (isinstance(r, exp.Select) and isinstance(pp, exp.Select)):
        return core
    key_names = set(core.key_columns())
    key_items = [e for e in r.expressions if isinstance(e, exp.Alias) and e.alias in key_names]
    other_items = [e for e in r.expressions if e not in key_items]
    joins = r.args.get("joins") or []
    if len(key_items) != len(key_names) or [j.sql() for j in joins] != [join.sql()]:
        return core
    if any(
        not _reads(k.this, alias) or _reads(k.this, core.shape.unit.table.lower())
        for k in key_items
    ):
        return core
    if any(_reads(e, alias) for e in other_items) or _reads(r.args.get("where"), alias):
        return core
    group = pp.args.get("group")
    if (
        not isinstance(group, exp.Group)
        or [g.sql() for g in group.expressions] != ["__u"]
        or any(pp.args.get(part) for part in ("where", "having", "joins", "qualify"))
    ):
        return core
    pp_keys = [
        e
        for e in pp.expressions
        if isinstance(e, exp.Alias)
        and e.alias in key_names
        and isinstance(e.this, exp.Min)
        and isinstance(e.this.this, exp.Column)
        and e.this.this.name == e.alias
    ]
    pp_rest = [e for e in pp.expressions if e not in pp_keys]
    if len(pp_keys) != len(key_names) or any(
        c.name in key_names for e in pp_rest for c in e.find_all(exp.Column)
    ):
        return core

    rows = r.copy()
    rows.set("joins", None)
    rows.set("expressions", [e.copy() for e in other_items])
    per_person = pp.copy()
    per_person.set("expressions", [e.copy() for e in pp_rest])
    person = exp.column(unit, table=alias)
    # The executor may have checked this table's person ids unique on data that cannot
    # change while it runs (proxy/engines/executor.frozen_unique_units): its rows are
    # then one per person already, and grouping them again cost 0.15-0.2 of the
    # per-person floor at 10M prompts (a MIN over text per person; BENCHMARKS.md).
    vouched = core.shape.tables[alias].unit_unique
    key_values = [
        k.copy() if vouched else exp.alias_(exp.Min(this=k.this.copy()), k.alias, copy=False)
        for k in key_items
    ]
    # The key table's person id is never NULL in a match (the equality drops NULLs).
    keys = exp.Select(
        expressions=[exp.alias_(person.copy(), "__u", copy=False), *key_values],
        from_=exp.From(this=join.this.copy()),
        where=exp.Where(this=exp.Not(this=exp.Is(this=person.copy(), expression=exp.Null()))),
        group=None if vouched else exp.Group(expressions=[person.copy()]),
    )
    bounded = exp.Select(
        expressions=[
            exp.Column(this=exp.Star(), table=exp.to_identifier("pp")),
            *(exp.column(k, table="pk") for k in core.key_columns()),
        ],
        from_=C.from_table("pp"),
        joins=[
            exp.Join(
                this=exp.Table(this=exp.to_identifier("pk")),
                on=exp.EQ(
                    this=exp.column("__u", table="pp"), expression=exp.column("__u", table="pk")
                ),
            )
        ],
    )
    return replace(
        core,
        ctes=(("r", rows), ("pp", per_person), ("pk", keys), ("bounded", bounded)),
    )
