"""UNION ALL of row-level subqueries over one population, inside an aggregate (issue 13
§5):

    SELECT COUNT(*) FROM (SELECT user_id, tokens_in AS x FROM prompts
                          UNION ALL SELECT user_id, resolution_minutes FROM tickets) t

The union becomes a *derived row-level table* of the query (main.__union): its rows are
the arms' rows, its person id is the column every arm selects the person id in (at the
same position), its population the arms' one. The outer query is then an ordinary query
over that table — bound, checked, rewritten and released as any other — so the person
bound applies to the union's rows: a person's rows from all arms count together against
C per group and K groups (C and K the largest of the arms' tables', as for a join).

Each column's declared range is the union of the arms' ranges (so SUM/AVG of it are
bounded, and clamped where read), its public domain the union of the arms' domains when
every arm selects a column with one. The arms are made total like any row-level SQL.

Refused, with a rewrite: UNION (without ALL), INTERSECT, EXCEPT; an arm that does not
select the person id at the same position as the others; arms over different
populations or only public tables; aggregates, DISTINCT, GROUP BY or LIMIT in an arm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from proxy import shape as S
from proxy.bind import bind
from proxy.catalog import DEFAULT_DB, UNION_TABLE, Catalog, TableInfo
from proxy.check import check_scalar, check_shape, is_person_id
from proxy.derived_source import from_source
from proxy.engines.executor import Executor
from proxy.errors import DPSQLError, position_of, unsupported
from proxy.policy import ColumnPolicy, TablePolicy
from proxy.quantile_sql import is_quantile
from proxy.rewrite import keyed_groups
from proxy.rewrite.l0 import describe_params
from proxy.rewrite.ranges import Range, derive
from proxy.rewrite.total_forms import total_predicate, total_value
from proxy.string_growth import MAX_CARRIED, check_string_growth, growth_of

DERIVED = UNION_TABLE
HINT = (
    "select the person id in every arm, at the same position, from tables of one "
    "population: SELECT COUNT(*) FROM (SELECT user_id, x FROM a UNION ALL "
    "SELECT user_id, y FROM b) t"
)


@dataclass(frozen=True)
class UnionQuery:
    outer: exp.Select  # reading main.__union under the subquery's alias
    table: TableInfo
    relation: exp.Expr  # the UNION ALL of the total arms
    arms: tuple[S.Shape, ...]  # each arm, checked (its tables' caps)
    catalog: Catalog


def _union_source(tree: exp.Expr) -> tuple[exp.SetOperation, str] | None:
    found = from_source(tree)
    if found is None or not isinstance(found[0], exp.SetOperation):
        return None
    return found[0], found[1]


def _arms(node: exp.Expr) -> list[exp.Expr]:
    """The SELECTs of a chain of UNION ALLs, left to right; refuses other set operations."""
    if isinstance(node, exp.Subquery):
        return _arms(node.this)
    if isinstance(node, exp.SetOperation):
        if not isinstance(node, exp.Union) or node.args.get("distinct"):
            kind = "UNION" if isinstance(node, exp.Union) else node.key.upper()
            raise unsupported(
                f"{kind} over private rows is not answered (it would compare one person's "
                "rows with another's)",
                "use UNION ALL inside an aggregate: " + HINT,
                position_of(node),
            )
        return [*_arms(node.left), *_arms(node.right)]
    return [node]


def _check_arm(arm: exp.Expr, catalog: Catalog) -> S.Shape:
    if not isinstance(arm, exp.Select):
        raise unsupported("each arm of the UNION ALL must be a SELECT", HINT)
    for clause in ("group", "having", "distinct", "limit", "offset", "with_"):
        if arm.args.get(clause):
            raise unsupported(
                f"an arm of the UNION ALL has {clause.rstrip('_').upper()}: the arms must "
                "be row-level",
                "aggregate in the outer query: " + HINT,
                position_of(arm),
            )
    for item in arm.expressions:
        if any(isinstance(n, exp.AggFunc) or is_quantile(n) for n in item.walk()):
            raise unsupported(
                "an arm of the UNION ALL has an aggregate: the arms must be row-level",
                "aggregate in the outer query: " + HINT,
                position_of(item),
            )
        check_scalar(item.this if isinstance(item, exp.Alias) else item, "a UNION ALL arm")
        carried = growth_of(item.this if isinstance(item, exp.Alias) else item)
        if carried.constant > MAX_CARRIED:
            # The outer query reads this column as data, whose length its own bound
            # allows it to work on 64 times over: a constant made by the arm would be
            # counted as a person's value (a probe, 2026-12-02: 20-27x one person's time).
            raise unsupported(
                f"a UNION ALL arm's column carries up to {carried.constant:,.0f} characters "
                f"of constants; the limit is {MAX_CARRIED:,}",
                "select columns and short expressions in the arms; build strings in the "
                "outer query",
                position_of(item),
            )
        if carried.factor > 1:
            # Likewise for the data: the outer query counts the column as one value, so
            # an arm building concat(body x 60) hid 60 copies from the outer bound and
            # from the check of stored strings (out of memory after the charge on one
            # person's text: a review, 2026-12-06).
            raise unsupported(
                f"a UNION ALL arm's column is built of up to {carried.factor:.3g} input "
                "values; the limit is one (the outer query reads it as one value)",
                "select columns, or one column with constants, in the arms; build longer "
                "strings in the outer query",
                position_of(item),
            )
    # Every item of the arm runs on the same rows, with its WHERE: one bound for all.
    check_string_growth(arm, "a UNION ALL arm as a whole")
    from proxy.joins import tables_of

    if all(t.public for t in tables_of(arm, catalog).values()):
        raise unsupported(
            "an arm of the UNION ALL reads only public tables: it has no person id",
            HINT,
            position_of(arm),
        )
    probe = arm.copy()
    probe.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "__rows", copy=False)])
    probe.set("order", None)
    return check_shape(probe, catalog)


def _person_position(arm: exp.Select, shape: S.Shape) -> int | None:
    anchor = {(shape.unit.table.lower(), shape.unit.name.lower())}
    joined = {
        (j.this.alias_or_name.lower(), str(shape.tables[j.this.alias_or_name.lower()].policy.unit))
        for j in arm.args.get("joins") or []
        if not j.side
        and isinstance(j.this, exp.Table)
        and not shape.tables[j.this.alias_or_name.lower()].public
    }
    units = anchor | {(a, u.lower()) for a, u in joined}
    found = [
        i
        for i, item in enumerate(arm.expressions)
        if is_person_id(item.this if isinstance(item, exp.Alias) else item, units)
    ]
    return found[0] if found else None


def _column_policy(name: str, values: list[exp.Expr], shapes: list[S.Shape]) -> ColumnPolicy:
    ranges: list[Range] = [derive(v, dict(s.tables)) for v, s in zip(values, shapes, strict=True)]
    r = ranges[0]
    for other in ranges[1:]:
        r = r.union(other)
    domains: list[object] = []
    for v, s in zip(values, shapes, strict=True):
        rule = None
        if isinstance(v, exp.Column):
            info = s.tables.get(v.table.lower())
            rule = info.column(v.name) if info else None
        if rule is None or not rule.values:
            domains = []
            break
        domains.extend(x for x in rule.values if x not in domains)
    bounded = r.bounded and r.lower <= r.upper
    return ColumnPolicy(
        name,
        r.lower if bounded else None,
        r.upper if bounded else None,
        tuple(domains) if domains else None,  # type: ignore[arg-type]
    )


def _cast_to_union_types(
    arms: list[exp.Select],
    names: list[str],
    person: int,
    types: dict[str, str],
    executor: Executor,
) -> None:
    """Cast each arm's value columns to the union's column type with TRY_CAST (in place).

    UNION ALL casts every arm to a common type on its own, and that cast can fail on
    some values only: an INTEGER arm under a DECIMAL(38, 37) one fails for 10 and more.
    Pinned to one person's rows, that failure ran after planning on D and not on D'
    (an error that says whether the person has such a value). Under TRY_CAST a value
    that does not fit is NULL, on its own row; the person id keeps its type (the arms
    read one population's ids, which widen without loss)."""
    targets: dict[int, exp.DataType] = {}
    for i, name in enumerate(names):
        if i == person:
            continue
        try:
            targets[i] = exp.DataType.build(types[name], dialect="duckdb")
        except Exception:  # a type sqlglot cannot spell: refuse rather than cast blind
            raise unsupported(
                f"the UNION ALL's column {name} has a type ({types.get(name)}) dpsql cannot "
                "cast the arms to",
                "CAST each arm's column to one type, e.g. CAST(x AS DOUBLE)",
            ) from None
    for arm in arms:
        # Only where the arm's own type differs (describing binds, it reads no rows):
        # the usual union of like columns keeps its SQL, and engines that cannot
        # translate TRY_CAST still answer it.
        text = arm.sql(dialect="duckdb")
        own = dict(executor.describe(text, describe_params(text)))
        for i, item in enumerate(arm.expressions):
            if i in targets and own.get(names[i]) != types[names[i]]:
                item.set("this", exp.TryCast(this=item.this, to=targets[i].copy()))


def derive_query(
    tree: exp.Expr,
    catalog: Catalog,
    allowed: frozenset[str] | None,
    executor: Executor,
    limits_of: Callable[[S.Shape], tuple[int, int]],
) -> UnionQuery | None:
    """The query over a derived union table, or None when its FROM is no set operation.
    ``limits_of`` gives (C, K) of a checked arm."""
    found = _union_source(tree)
    if found is None:
        return None
    union, alias = found
    bound_arms: list[exp.Select] = []
    shapes: list[S.Shape] = []
    for arm in _arms(union):
        bound = bind(arm.copy(), catalog, allowed)
        shapes.append(_check_arm(bound, catalog))
        bound_arms.append(bound)
    populations = {s.population for s in shapes}
    if len(populations) != 1:
        raise unsupported(
            "the arms of the UNION ALL read different populations: one person's rows "
            "could not be bounded together",
            HINT,
        )
    width = {len(a.expressions) for a in bound_arms}
    if len(width) != 1:
        raise unsupported("the arms of the UNION ALL have different numbers of columns", HINT)
    positions = {_person_position(a, s) for a, s in zip(bound_arms, shapes, strict=True)}
    if len(positions) != 1 or None in positions:
        raise unsupported(
            "every arm of a UNION ALL over private rows must select the person id, at the "
            "same position",
            HINT,
        )
    person = positions.pop()
    assert person is not None
    names = [e.alias_or_name.lower() for e in bound_arms[0].expressions]
    if len(set(names)) != len(names):
        raise unsupported("the UNION ALL's columns need distinct names", "alias each column")
    arms_sql: list[exp.Select] = []
    for bound, shape in zip(bound_arms, shapes, strict=True):
        tables = dict(shape.tables)
        items = []
        for i, (item, name) in enumerate(zip(bound.expressions, names, strict=True)):
            value = item.this if isinstance(item, exp.Alias) else item
            items.append(
                exp.alias_(value.copy() if i == person else total_value(value), name, copy=False)
            )
        total = exp.Select(expressions=items)
        total.set("from_", bound.args["from_"].copy())
        joins = [j.copy() for j in bound.args.get("joins") or []]
        for join in joins:
            if join.args.get("on") is not None:
                join.set("on", total_predicate(join.args["on"], tables))
        if joins:
            # each column equality also on its keyed hash, as in the core's own joins: a
            # probe (2026-12-03) made DuckDB build an arm's join on one person's 32,768
            # crafted texts, 2.40 s against 0.002 s without them
            total.set("joins", keyed_groups.keyed_joins(joins, shape))
        unit = bound.expressions[person]
        unit_value = unit.this if isinstance(unit, exp.Alias) else unit
        not_null = exp.Not(this=exp.Is(this=unit_value.copy(), expression=exp.Null()))
        where = bound.args.get("where")
        filtered = None if where is None else total_predicate(where.this, tables)
        if filtered is not None and len(tables) > 1:
            filtered = keyed_groups.keyed_where(filtered, shape)
        total.set(
            "where",
            exp.Where(
                this=not_null
                if filtered is None
                else exp.and_(exp.Paren(this=filtered), not_null, copy=False)
            ),
        )
        arms_sql.append(total)
    relation: exp.Expr = arms_sql[0]
    for arm in arms_sql[1:]:
        relation = exp.Union(this=relation, expression=arm, distinct=False)
    try:
        text = relation.sql(dialect="duckdb")
        types = dict(executor.describe(text, describe_params(text)))
    except DPSQLError:
        raise unsupported(
            "the arms of the UNION ALL have columns of types that do not combine",
            "CAST each arm's column to one type",
        ) from None
    _cast_to_union_types(arms_sql, names, person, types, executor)
    columns = tuple(
        _column_policy(
            name,
            [
                a.expressions[i].this
                if isinstance(a.expressions[i], exp.Alias)
                else a.expressions[i]
                for a in bound_arms
            ],
            shapes,
        )
        for i, name in enumerate(names)
        if i != person
    )
    caps = [limits_of(s) for s in shapes]
    policy = TablePolicy(
        name=DERIVED,
        public=False,
        population=populations.pop(),
        unit=names[person],
        max_groups=max(k for _, k in caps),
        max_rows_per_group=max(c for c, _ in caps),
        columns=columns,
        grants=None,
        one_row_per_person=False,
    )
    table = TableInfo(policy, DEFAULT_DB, DERIVED, types)
    outer = tree.copy()
    assert isinstance(outer, exp.Select)
    source = outer.args["from_"].this
    source.replace(
        exp.Table(
            this=exp.to_identifier(DERIVED),
            db=exp.to_identifier(DEFAULT_DB),
            alias=exp.TableAlias(this=exp.to_identifier(alias or DERIVED)),
        )
    )
    outer.set("with_", None)
    return UnionQuery(outer, table, relation, tuple(shapes), catalog.with_derived(table))


def embed(shape: S.Shape, found: UnionQuery) -> None:
    """Replace the derived table in the checked outer query by the union (in place)."""
    for table in list(shape.select.find_all(exp.Table)):
        if table.name.lower() == DERIVED:
            table.replace(
                exp.Subquery(
                    this=found.relation.copy(),
                    alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
                )
            )
