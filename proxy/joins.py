"""FROM and JOIN rules: which tables a query reads, its anchor private table and
population, and joins that can never attribute one row to two people.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog import Catalog, TableInfo
from proxy.errors import DPSQLError, position_of, unsupported


def tables_of(select: exp.Select, catalog: Catalog) -> dict[str, TableInfo]:
    tables: dict[str, TableInfo] = {}
    for table in select.find_all(exp.Table):
        info = catalog.get(table.db or "main", table.name)
        if info is None:  # bind already refused unknown tables
            raise DPSQLError("not_found", f"unknown table {table.sql()}", "see the schema")
        alias = table.alias_or_name.lower()
        if alias in tables:
            # Two tables under one alias: every rule that reads a column's table by its
            # alias would judge one of them by the other (a probe, 2026-12-02: a public
            # table's alias hid a private join off the person id).
            raise unsupported(
                f"two tables are both named {alias} in this query",
                "give every table its own alias",
                position_of(table),
            )
        tables[alias] = info
    return tables


def unit_columns(tables: dict[str, TableInfo]) -> set[tuple[str, str]]:
    return {
        (alias, t.policy.unit.lower())
        for alias, t in tables.items()
        if not t.public and t.policy.unit
    }


def _is_unit_equality(
    cond: exp.Expr, left: set[str], right: str, units: set[tuple[str, str]]
) -> bool:
    for conj in cond.flatten() if isinstance(cond, exp.And) else [cond]:
        left_col, right_col = getattr(conj, "left", None), getattr(conj, "right", None)
        if (
            isinstance(conj, exp.EQ)
            and isinstance(left_col, exp.Column)
            and isinstance(right_col, exp.Column)
        ):
            a = (left_col.table.lower(), left_col.name.lower())
            b = (right_col.table.lower(), right_col.name.lower())
            if (
                a in units
                and b in units
                and {a[0], b[0]} & {right}
                and ((a[0] == right and b[0] in left) or (b[0] == right and a[0] in left))
            ):
                return True
    return False


def check_from(select: exp.Select, tables: dict[str, TableInfo]) -> tuple[str, str]:
    """Check joins; return (anchor alias, population)."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table):
        raise unsupported("the query needs a FROM table", "select from a table in the schema")
    units = unit_columns(tables)
    order = [from_.this.alias_or_name.lower()]
    populations = {t.policy.population for t in tables.values() if not t.public}
    if not populations:
        raise unsupported(
            "the query reads only public tables: it is answered exactly by running it "
            "(Engine.run), not planned as a private release",
            "send it as a query (POST /v1/query or dpsql query): it costs nothing",
        )
    if len(populations) > 1:
        raise unsupported(
            f"the query mixes populations {sorted(str(p) for p in populations)}",
            "query one population at a time",
        )
    seen_private = [a for a in order if not tables[a].public]
    for join in select.args.get("joins") or []:
        target = join.this
        if not isinstance(target, exp.Table):
            raise unsupported(
                "joins must be to tables", "join a table from the schema", position_of(join)
            )
        alias = target.alias_or_name.lower()
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        if side in ("RIGHT", "FULL") or kind not in ("", "INNER", "CROSS", "OUTER"):
            raise unsupported(
                f"{' '.join(p for p in (side, kind) if p) or 'this'} JOIN is not answered",
                "use INNER or LEFT JOIN",
                position_of(join),
            )
        if join.args.get("using"):
            raise unsupported("JOIN ... USING could not be bound", "use JOIN ... ON")
        info = tables[alias]
        if not info.public:
            on = join.args.get("on")
            if seen_private and (
                on is None or not _is_unit_equality(on, set(seen_private), alias, units)
            ):
                raise unsupported(
                    f"private table {info.policy.name} must be joined on the person id "
                    f"({info.policy.unit}) of the private tables before it",
                    "join private tables ON a.unit = b.unit; anything else could mix people",
                    position_of(join),
                )
            seen_private.append(alias)
        order.append(alias)
    if not seen_private:
        # The private table is read only in a subquery (IN, EXISTS): rows of public
        # tables filtered by private ones would be released as they are.
        raise unsupported(
            "the query reads a private table only inside a subquery of a query over "
            "public tables; dpsql releases aggregates of private tables in FROM",
            "aggregate the private table in FROM, e.g. SELECT region, COUNT(*) FROM "
            "users GROUP BY region",
            position_of(from_),
        )
    _check_fan_out(seen_private, tables, select)
    _check_public_fan_out(tables, select)
    anchor = seen_private[0]
    return anchor, str(next(iter(populations)))


MAX_PUBLIC_FAN_OUT = 64


def _public_bound(alias: str, info: TableInfo, ons: list[exp.Expr]) -> int:
    """How many rows of public table ``alias`` one combination of the other tables'
    rows can match: the fewest rows sharing a value among its columns equated (in a
    top-level ON conjunct) to an expression of other tables; else all its rows."""
    assert info.fan_out is not None
    best = info.fan_out.rows
    for on in ons:
        for conj in on.flatten() if isinstance(on, exp.And) else [on]:
            conj = conj.unnest()
            if not isinstance(conj, exp.EQ):
                continue
            for mine, other in ((conj.this, conj.expression), (conj.expression, conj.this)):
                if (
                    isinstance(mine, exp.Column)
                    and mine.table.lower() == alias
                    and all(c.table.lower() != alias for c in other.find_all(exp.Column))
                ):
                    best = min(best, info.fan_out.per_value.get(mine.name.lower(), best))
    return best


def _check_public_fan_out(tables: dict[str, TableInfo], select: exp.Select) -> None:
    """Public tables may be joined on anything, but each multiplies every person's rows
    by the rows it matches: a join on a non-unique column (or on no equality at all)
    would make one person's row count set the run time (and reach the time limit).
    The product of the public tables' matches per row is bounded (public data decides
    it, at plan time)."""
    ons = [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on") is not None]
    bound = 1
    worst = ""
    for alias, info in tables.items():
        if info.public and info.fan_out is not None:
            b = _public_bound(alias, info, ons)
            if b > 1:
                worst = info.policy.name
            bound *= max(1, b)
    if bound > MAX_PUBLIC_FAN_OUT:
        raise unsupported(
            f"the joins to public tables can match up to {bound} of their rows for each "
            f"row of a person (e.g. {worst}); dpsql allows {MAX_PUBLIC_FAN_OUT}",
            "join public tables on a column that identifies their rows (e.g. "
            "JOIN regions r ON r.region = u.region), not on inequalities or repeated values",
            position_of(select),
        )


def _check_fan_out(private: list[str], tables: dict[str, TableInfo], select: exp.Select) -> None:
    """At most one private table with many rows per person in a query.

    Joining two such tables (or one to itself) on the person id gives each person n·m
    rows before any per-person cap applies: one person's row count would then set the
    run time (and could reach the time limit) of a query that is quick without them.
    One-row-per-person tables (checked when the engine starts) multiply nothing.
    """
    many = [a for a in private if not tables[a].policy.one_row_per_person]
    if len(many) > 1:
        names = ", ".join(sorted({tables[a].policy.name for a in many}))
        raise unsupported(
            f"the query joins {len(many)} tables with many rows per person ({names}); "
            "each person's rows would be multiplied before they are bounded",
            "query each of those tables separately, joined only to one-row-per-person "
            "tables (e.g. users); to keep only people who have rows in another table, "
            "filter with WHERE user_id IN (SELECT user_id FROM <other table> WHERE ...)",
            position_of(select),
        )
