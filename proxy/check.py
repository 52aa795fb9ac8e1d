"""Refuse every query shape dpsql does not answer, before any charge.

The checker is an allowlist: node types and functions not named here are refused with
a stable code, the position of the offending node and a hint that names the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlglot import exp

from proxy import outer_functions, semijoins
from proxy import shape as S
from proxy.allowlist import AGGREGATES, SCALAR_NODES
from proxy.catalog import Catalog, TableInfo, column_type, split_name
from proxy.constants import converts
from proxy.engines.kinds import Family, Typer, compared_sides, duckdb_type, of_type_name
from proxy.errors import DPSQLError, position_of, unsupported
from proxy.guarded_arithmetic import INTERVAL_UNITS, UNSIGNED_TYPES
from proxy.joins import check_from, tables_of, unit_columns
from proxy.pins import pinned_values
from proxy.quantile_sql import aggregate_call as quantile_call
from proxy.quantile_sql import is_quantile
from proxy.render import KeyTexts, duckdb_sql
from proxy.string_growth import check_stored_strings, check_string_growth

MAX_LIMIT = 2**62  # LIMIT/OFFSET: beyond any table, and within the outer layer's BIGINT


def check_statement(tree: exp.Expr) -> None:
    """Refuse anything that is not a single plain SELECT, before binding touches it."""
    if isinstance(tree, exp.SetOperation):
        raise unsupported(
            "set operations (UNION, INTERSECT, EXCEPT) are not answered over private rows",
            "send each SELECT separately; or, for arms that aggregate the same population, "
            "put their rows in one subquery and group by the arm, one release: SELECT src, "
            "COUNT(*) FROM (SELECT <person id>, 'a' AS src FROM t WHERE ... UNION ALL "
            "SELECT <person id>, 'b' FROM t WHERE ...) u GROUP BY src (a total beside its "
            "groups: GROUP BY ROLLUP (key))",
        )
    if not isinstance(tree, exp.Select):
        kind = tree.key.upper() if isinstance(tree, exp.Expr) else type(tree).__name__
        raise unsupported(
            f"only SELECT queries are answered, not {kind}",
            "dpsql is read-only: send one SELECT with aggregates",
        )
    for node in tree.walk():
        if isinstance(node, (exp.Into, exp.Lock)):
            raise unsupported("SELECT INTO and locking clauses are not allowed", "remove them")
        if isinstance(node, exp.SetOperation):
            raise unsupported(
                "set operations are not answered over private rows", "send each SELECT separately"
            )
        if (
            isinstance(node, exp.Select)
            and node.args.get("distinct")
            and node is tree
            and (
                tree.args.get("group")
                or (any(True for _ in tree.find_all(exp.AggFunc)) and not _single_row(tree))
            )
        ):
            raise unsupported(
                "SELECT DISTINCT is answered as a list of keys (no GROUP BY) or over "
                "aggregates without GROUP BY (one row), not with GROUP BY",
                "drop DISTINCT: an aggregate with GROUP BY already gives one row per group",
                position_of(node),
            )


def _single_row(select: exp.Select) -> bool:
    """Aggregates and no GROUP BY: at most one output row, whatever DISTINCT says."""
    distinct = select.args.get("distinct")
    return (
        not select.args.get("group")
        and not (isinstance(distinct, exp.Distinct) and distinct.args.get("on"))
        and any(True for _ in select.find_all(exp.AggFunc))
    )


def distinct_as_group_by(tree: exp.Expr) -> exp.Expr:
    """``SELECT DISTINCT a, b FROM …`` is ``SELECT a, b FROM … GROUP BY a, b``: a list of
    keys, released like any grouping (in place; call after :func:`check_statement`)."""
    if isinstance(tree, exp.Select) and tree.args.get("distinct"):
        if _single_row(tree):
            # Aggregates without GROUP BY give one row: DISTINCT changes nothing.
            tree.set("distinct", None)
            return tree
        keys = [e.this if isinstance(e, exp.Alias) else e for e in tree.expressions]
        tree.set("distinct", None)
        tree.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    return tree


@dataclass
class _RowColumnError(DPSQLError):
    """A column read outside an aggregate in the outer layer (named for _window)."""

    column: str = ""


def _described(node: exp.Expr) -> str:
    """What the analyst wrote, near enough to recognise: a function's own name, else the
    node as DuckDB SQL with the binder's table aliases left out (sqlglot's class names,
    IGNORENULLS or DATEFROMPARTS, named nothing the analyst wrote: a probe, 2026-12-06)."""
    if isinstance(node, exp.Anonymous):
        return node.name
    if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)):
        node = node.this  # ANY_VALUE(x), which sqlglot reads as ANY_VALUE(x) IGNORE NULLS
    shown = node.copy()
    for col in shown.find_all(exp.Column):
        col.set("table", None)
    text = shown.sql(dialect="duckdb")
    return text if len(text) <= 60 else text[:57] + "..."


def _refuse_node(node: exp.Expr, where: str) -> DPSQLError:
    if isinstance(node, exp.Window):
        return unsupported(
            f"window functions over private rows are not answered ({where})",
            "aggregate with GROUP BY first: a window in the select list runs over the "
            "released groups, e.g. SUM(COUNT(*)) OVER () for a total",
            position_of(node),
        )
    if isinstance(node, (exp.Rollup, exp.Cube, exp.GroupingSets)):
        # (answered by proxy/grouping_sets.py when its subtotals are sums of cells; this
        # one was not, and the generic hint named row-level functions)
        return unsupported(
            f"{_described(node)} is answered only when every subtotal is a sum of the "
            "finest grouping's cells",
            "use COUNT(*), COUNT(x), SUM(x) and AVG(x), each alone in its select item, "
            "with the keys, without HAVING, windows, GROUPING() or a WITH; or GROUP BY the "
            "finest keys and add the subtotals up in an outer query",
            position_of(node),
        )
    if isinstance(node, exp.AggFunc):
        return unsupported(
            f"aggregate {node.sql(dialect='duckdb')[:60]} is not supported",
            "use COUNT, SUM, AVG, VAR_POP, VAR_SAMP, STDDEV, CORR, COVAR_POP, REGR_SLOPE, MEDIAN, "
            "QUANTILE_CONT, MIN or MAX",
            position_of(node),
        )
    return unsupported(
        f"{_described(node)} is not allowed in {where}",
        "use comparisons, arithmetic, CASE, string and date functions; see the README's list",
        position_of(node),
    )


def check_scalar(node: exp.Expr, where: str) -> None:
    """Refuse anything but the allowlisted row-level functions in ``node``."""
    _check_scalar(node, where)


def _check_scalar(node: exp.Expr, where: str) -> None:
    for sub in node.walk():
        if isinstance(sub, (S_AGG_TYPES, exp.Count)) or is_quantile(sub):
            raise unsupported(
                f"aggregates are not allowed in {where}",
                "aggregates belong in the select list, HAVING or ORDER BY",
                position_of(sub),
            )
        if not isinstance(sub, SCALAR_NODES):
            raise _refuse_node(sub, where)
        if isinstance(sub, exp.Star) and where != "COUNT(*)":
            raise unsupported("* is only allowed in COUNT(*)", "name the columns", position_of(sub))
        if isinstance(sub, _DATE_PARTS):
            _check_date_part(sub)
        if isinstance(sub, exp.Interval):
            _check_interval(sub)
        if isinstance(sub, (exp.Mul, exp.Div)) and any(
            isinstance(arg.unnest(), exp.Interval) for arg in (sub.this, sub.expression)
        ):
            # An interval times a number from the data overflows on that row only, and
            # one raising row makes DuckDB redo its whole vector (a probe, 2026-12-02).
            raise unsupported(
                "an interval multiplied or divided is not answered",
                "write the amount into the interval: ts + INTERVAL (n * 7) DAY",
                position_of(sub),
            )
        if isinstance(sub, (exp.Cast, exp.TryCast)):
            _check_cast_type(sub)
        if isinstance(sub, (exp.TimestampTrunc, exp.DateTrunc)) and sub.args.get("zone"):
            # Rendered as AT TIME ZONE: an unknown zone (a column's value, say) raises a
            # NotImplementedException on each row that reaches it, which TRY does not
            # catch, so the error would depend on the data.
            raise unsupported(
                "a truncation in a named time zone is not answered",
                "truncate the timestamp as it is stored: date_trunc('day', ts)",
                position_of(sub),
            )
    check_string_growth(node, where)


S_AGG_TYPES = tuple(AGGREGATES)

# Date functions whose unit DuckDB binds but then refuses on each row that reaches it
# (a NotImplementedException, which TRY does not catch): the era and time-zone parts,
# and any unit of DATE_DIFF between TIME values.
_DATE_PARTS = (
    exp.Extract,
    exp.DateDiff,
    exp.DateAdd,
    exp.DateSub,
    exp.TimestampTrunc,
    exp.DateTrunc,
)
_NO_ROW_UNITS = frozenset({"ERA", "TIMEZONE", "TIMEZONE_HOUR", "TIMEZONE_MINUTE"})
# DuckDB's other names of its unsigned integers (sqlglot keeps them as user-defined
# types): refused as UTINYINT ... UBIGINT are (a probe, 2026-12-05, found them answered).
_UNSIGNED_ALIASES = frozenset({"UINT8", "UINT16", "UINT32", "UINT64"})
_TIME_TYPES = (exp.DataType.Type.TIME, exp.DataType.Type.TIMETZ)


def _check_interval(node: exp.Interval) -> None:
    """An interval's amount from the data needs a unit (proxy/guarded_arithmetic.py bounds
    it by that unit); a text read as an interval can be any size, and adding it to a
    date overflowed on one person's rows only (a probe, 2026-12-02)."""
    amount = node.this.unnest() if node.this is not None else None
    unit = node.args.get("unit")
    if amount is None:
        return
    if isinstance(amount, exp.Literal):
        # A constant past 10,000 years overflowed when added to a bounded amount from
        # the data (months are 32 bits): INTERVAL 2147483647 MONTH plus one.
        name = unit.name.upper() if unit is not None else ""
        limit = INTERVAL_UNITS.get(name)
        try:
            value = abs(float(amount.this))
        except ValueError:
            return  # a text interval ('1 day'): DuckDB reads it once, while binding
        if limit is not None and value > limit:
            raise unsupported(
                f"an interval of more than {limit:,} {name.lower()} (10,000 years) "
                "is not answered",
                "use a shorter interval",
                position_of(node),
            )
        return
    if unit is None or unit.name.upper() not in INTERVAL_UNITS:
        raise unsupported(
            "an interval read from the data needs one of the units "
            + ", ".join(sorted(u for u in INTERVAL_UNITS if not u.endswith("S"))).lower(),
            "write INTERVAL (n) DAY, with n a number",
            position_of(node),
        )


def _check_cast_type(cast: exp.Cast) -> None:
    """Refuse casts to unsigned integers, by any of DuckDB's names, and to type names
    sqlglot does not know."""
    name = cast.to.sql("duckdb")
    if name.upper() in UNSIGNED_TYPES | _UNSIGNED_ALIASES:
        raise unsupported(
            f"a cast to {name} is not answered: unsigned arithmetic "
            "fails below zero on the rows that reach it",
            "cast to a signed type: BIGINT or HUGEINT",
            position_of(cast),
        )
    if cast.to.this == exp.DataType.Type.USERDEFINED:
        # A name sqlglot does not know (VARINT, a typo): DuckDB alone would say what it
        # is, after the charge where the catalog types the query.
        raise unsupported(
            f"a cast to {name} is not answered",
            "cast to one of DuckDB's standard types: BIGINT, HUGEINT, DOUBLE, "
            "DECIMAL(p, s), VARCHAR, DATE or TIMESTAMP",
            position_of(cast),
        )


def _check_date_part(node: exp.Expr) -> None:
    unit = node.this if isinstance(node, exp.Extract) else node.args.get("unit")
    if isinstance(unit, exp.Expr) and not isinstance(unit, (exp.Var, exp.Literal)):
        # A unit read from the data (a CASE, a column) could be 'era' on one person's
        # rows only: the unit must be fixed by the text to be vetted here.
        raise unsupported(
            "a date part or unit computed from the data is not answered",
            "write the unit as a literal: date_trunc('day', ts), EXTRACT(year FROM ts)",
            position_of(node),
        )
    name = (unit.name if isinstance(unit, exp.Expr) else str(unit or "")).upper().strip("'")
    if name.replace(" ", "_") in _NO_ROW_UNITS:
        raise unsupported(
            f"the {name.lower()} part is not answered",
            "use a calendar part: year, quarter, month, week, day, hour, minute or second",
            position_of(node),
        )
    if isinstance(node, exp.DateDiff) and any(
        isinstance(arg, (exp.Cast, exp.TryCast)) and arg.to.this in _TIME_TYPES
        for arg in (node.this, node.expression)
    ):
        raise unsupported(
            "DATE_DIFF between times of day is not answered",
            "take the difference of timestamps, or of EXTRACT(EPOCH ...) values",
            position_of(node),
        )


_COMPARISONS = (
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.In, exp.Between,
)  # fmt: skip


def _target_type(node: exp.Expr, typer: Typer, tables: Mapping[str, TableInfo]) -> str | None:
    """The type a text constant compared with ``node`` is cast to (None: text or unknown)."""
    if isinstance(node, exp.Column):
        kind = column_type(tables, node.table, node.name)
        if kind and of_type_name(kind).family not in (Family.TEXT, Family.UNKNOWN):
            return kind
        if kind:
            return None
    if isinstance(node, (exp.Add, exp.Sub)) and any(
        isinstance(arg.unnest(), exp.Interval) for arg in (node.this, node.expression)
    ):
        return "TIMESTAMP"  # a date moved by an interval
    return duckdb_type(typer.kind(node))


def _constant_error(text: str, kind: str, node: exp.Expr) -> DPSQLError:
    return DPSQLError(
        "bad_request",
        f"the constant '{text}' is not of type {kind}",
        "write a value of the type it is compared with or cast to, e.g. '2024-01-31' for a "
        "DATE or 42 for an integer",
        position_of(node),
    )


def check_constants(select: exp.Select, tables: Mapping[str, TableInfo]) -> None:
    """Refuse a text constant that does not convert to the type it is compared with or
    cast to (``ts > '2024-13-45'``, ``age + 0 > 'abc'``, ``DATE '2024-13-45'`` were
    answered, and charged, as 0 rows under the rewrite's TRY: proxy/constants.py), and a
    number compared with a text column (each row's text would be cast to a number)."""
    typer = Typer({alias: info.column_types for alias, info in tables.items()})
    for cast in select.find_all(exp.Cast):
        value = cast.this.unnest()
        if isinstance(cast, exp.TryCast) or not (isinstance(value, exp.Literal) and value.is_string):
            continue
        target = cast.to.sql(dialect="duckdb")
        if of_type_name(target).family not in (Family.TEXT, Family.UNKNOWN) and not converts(
            value.this, target
        ):
            raise _constant_error(value.this, target, value)
    for node in select.find_all(*_COMPARISONS):
        values = [s.unnest() for s in compared_sides(node) if s is not None]
        texts = [v for v in values if isinstance(v, exp.Literal) and v.is_string]
        others = [v for v in values if not (isinstance(v, exp.Literal) and v.is_string)]
        if not texts or not others:
            if others and any(isinstance(v, exp.Literal) for v in values):
                _check_text_against_number(values, typer, tables)
            continue
        wanted = _target_type(others[0], typer, tables)
        if wanted is None:
            continue
        for text in texts:
            if not converts(text.this, wanted):
                raise _constant_error(text.this, wanted, text)


def _check_text_against_number(
    values: list[exp.Expr], typer: Typer, tables: Mapping[str, TableInfo]
) -> None:
    """``region = 1``: each row's text would be cast to a number (NULL for 'north')."""
    numbers = [v for v in values if isinstance(v, exp.Literal) and not v.is_string]
    rest = [v for v in values if not isinstance(v, exp.Literal)]
    if numbers and rest and typer.kind(rest[0]).family is Family.TEXT:
        raise DPSQLError(
            "bad_request",
            f"a number ({numbers[0].this}) is compared with text",
            f"quote it to compare text with text: '{numbers[0].this}'",
            position_of(numbers[0]),
        )


def _dated(node: exp.Expr, typer: Typer) -> bool:
    """Whether ``node`` is a DATE or TIMESTAMP by its type alone: typed so, or one moved
    by an interval (``ts + INTERVAL 1 DAY``, DATE_ADD)."""
    node = node.unnest()
    if typer.kind(node).family in (Family.DATE, Family.TIMESTAMP):
        return True
    if isinstance(node, (exp.Add, exp.Sub)):
        sides = (node.this.unnest(), node.expression.unnest())
        if isinstance(sides[1], exp.Interval):
            return _dated(sides[0], typer)
        if isinstance(sides[0], exp.Interval) and isinstance(node, exp.Add):
            return _dated(sides[1], typer)
        return False
    if isinstance(node, (exp.DateAdd, exp.DateSub)):
        return _dated(node.this, typer)
    return False


def check_date_diff_columns(select: exp.Select, tables: Mapping[str, TableInfo]) -> None:
    """Refuse DATE_DIFF unless each operand is a DATE or TIMESTAMP by its type (or a text
    constant beside one). DuckDB's DATE_DIFF of times of day raises on every row that
    reaches it, and TRY does not catch that error: the check once looked for a bare TIME
    cast or column only, so ``date_diff('day', (CAST(ts AS TIME)), ...)`` or a TIME
    column under TRY or COALESCE got through and failed after the charge on one
    person's rows alone (an adversarial probe, 2026-12-05). Deciding by the type, not
    the spelling, leaves no wrapper to hide a TIME in."""
    typer = Typer({alias: info.column_types for alias, info in tables.items()})
    for node in select.find_all(exp.DateDiff):
        operands = [node.this, node.expression]
        dated = [_dated(arg, typer) for arg in operands]
        text = [
            isinstance(arg.unnest(), exp.Literal) and arg.unnest().is_string for arg in operands
        ]
        if all(d or (t and any(dated)) for d, t in zip(dated, text, strict=True)):
            # A text constant converts to the other operand's type, as in a comparison:
            # one that does not was answered as NULL on every row, and charged.
            for constant, other in ((operands[0], operands[1]), (operands[1], operands[0])):
                value = constant.unnest()
                if isinstance(value, exp.Literal) and value.is_string:
                    wanted = _target_type(other.unnest(), typer, tables) or "TIMESTAMP"
                    if not converts(value.this, wanted):
                        raise _constant_error(value.this, wanted, value)
            continue
        raise unsupported(
            "DATE_DIFF is answered between DATE or TIMESTAMP values only (a time of day, "
            "or a value whose type is not known here, is not)",
            "cast each operand: date_diff('day', CAST(a AS TIMESTAMP), CAST(b AS TIMESTAMP)); "
            "for times of day take the difference of EXTRACT(EPOCH ...) values",
            position_of(node),
        )


def _conditions(select: exp.Select) -> list[exp.Expr]:
    """Every place of ``select`` (subqueries included) that needs a truth value: WHERE
    and FILTER conditions, JOIN ... ON, CASE WHEN and IF conditions, and the operands of
    AND, OR and NOT at those places."""
    found: list[exp.Expr] = []
    tops: list[exp.Expr] = [w.this for w in select.find_all(exp.Where)]
    tops += [j.args["on"] for j in select.find_all(exp.Join) if j.args.get("on") is not None]
    tops += [i.this for i in select.find_all(exp.If)]
    # x IS TRUE / IS FALSE (and their NOT forms) read x as a truth value too
    tops += [i.this for i in select.find_all(exp.Is) if isinstance(i.expression, exp.Boolean)]
    while tops:
        node = tops.pop()
        found.append(node)
        if isinstance(node, (exp.And, exp.Or)):
            tops += [node.left, node.right]
        elif isinstance(node, (exp.Not, exp.Paren)):
            tops.append(node.this)
    return found


def check_conditions(select: exp.Select, tables: Mapping[str, TableInfo]) -> None:
    """Refuse text, a date or a timestamp where a condition needs true or false, and
    true or false compared with a text column. DuckDB casts such a value to BOOLEAN row
    by row, and the total forms put that cast under TRY, so ``WHERE model`` or
    ``COUNT(*) FILTER (WHERE model)`` over words kept no row and answered a noisy 0,
    silently (a probe, 2026-12-06); PostgreSQL refuses them at once, as now dpsql does,
    before any charge. Numbers stay allowed (DuckDB reads non-zero as true)."""
    typer = Typer({alias: info.column_types for alias, info in tables.items()})
    for node in _conditions(select):
        if isinstance(node, (exp.And, exp.Or, exp.Not, exp.Paren)):
            continue
        family = typer.kind(node).family
        if family in _NOT_TRUTHS:
            text = _described(node)
            raise unsupported(
                f"{text} is {_NOT_TRUTHS[family]}, and a condition needs true or false",
                f"compare it, e.g. {text} = '...' or {text} IS NOT NULL",
                position_of(node),
            )
    # true or false compared with text: DuckDB casts the text per row, under TRY NULL
    for node in select.find_all(exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ):
        sides = (node.this.unnest(), node.expression.unnest())
        if any(isinstance(side, exp.Literal) for side in sides):
            continue  # flagged = 'true': a constant, converted once (check_constants)
        families = {typer.kind(side).family for side in sides}
        if families == {Family.BOOL, Family.TEXT}:
            raise unsupported(
                f"{_described(node)} compares true or false with text",
                "compare the text with a text constant, e.g. model = 'small'",
                position_of(node),
            )


# Kinds a condition cannot read as true or false (a review, 2026-12-06: ``WHERE ts``
# answered a noisy 0 as text had; numbers stay conditions, as DuckDB reads them).
_NOT_TRUTHS = {Family.TEXT: "text", Family.DATE: "a date", Family.TIMESTAMP: "a timestamp"}


def is_person_id(node: exp.Expr, unit_cols: set[tuple[str, str]]) -> bool:
    """A person id that is never NULL on a row: one of ``unit_cols``, or the
    ``COALESCE`` of several that ``JOIN ... USING (id)`` binds a bare ``id`` to (its
    first argument is never NULL, so the COALESCE is that id)."""
    if isinstance(node, exp.Coalesce):
        parts = [node.this, *node.expressions]
        return all(is_person_id(p, unit_cols) for p in parts)
    return isinstance(node, exp.Column) and (node.table.lower(), node.name.lower()) in unit_cols


def _aggregate(node: exp.Expr, unit_cols: set[tuple[str, str]], text: str) -> S.AggregateCall:
    """``text`` is the node's canonical SQL, already rendered by the caller."""
    if is_quantile(node):  # MEDIAN, quantiles, MIN, MAX: proxy/quantile_sql.py
        call = quantile_call(node, text)
        assert call.arg is not None
        _check_scalar(call.arg, "an aggregate argument")
        return call
    if isinstance(node, exp.Count):
        inner = node.this
        if inner is None:
            raise unsupported(
                "COUNT() needs an argument", "write COUNT(*) or COUNT(column)", position_of(node)
            )
        if isinstance(inner, exp.Star):
            return S.AggregateCall(S.COUNT_ROWS, None, text)
        if isinstance(inner, exp.Distinct):
            exprs = inner.expressions
            if len(exprs) == 1 and is_person_id(exprs[0], unit_cols):
                return S.AggregateCall(S.COUNT_PERSONS, None, text)
            if len(exprs) != 1:
                raise unsupported(
                    "COUNT(DISTINCT ...) of several expressions is not answered",
                    "count one expression: COUNT(DISTINCT a || '|' || b)",
                    position_of(node),
                )
            # Each person keeps at most C distinct values per group
            # (proxy/rewrite/distinct_values.py).
            _check_scalar(exprs[0], "an aggregate argument")
            return S.AggregateCall(S.COUNT_DISTINCT, exprs[0], text)
        _check_scalar(inner, "an aggregate argument")
        return S.AggregateCall(S.COUNT, inner, text)
    kind = AGGREGATES[type(node)]
    distinct_kinds = {S.SUM: S.SUM_DISTINCT, S.AVG: S.AVG_DISTINCT, **S.DISTINCT_VARIANCE}
    if isinstance(node.this, exp.Distinct) and kind in distinct_kinds:
        exprs = node.this.expressions
        if len(exprs) == 1:
            _check_scalar(exprs[0], "an aggregate argument")
            return S.AggregateCall(distinct_kinds[kind], exprs[0], text)
    if isinstance(node.this, exp.Distinct):
        raise unsupported(
            f"{kind.upper()}(DISTINCT ...) is not answered", "drop DISTINCT", position_of(node)
        )
    _check_scalar(node.this, "an aggregate argument")
    return S.AggregateCall(kind, node.this, text)


def _collect_outer(
    node: exp.Expr,
    key_sqls: KeyTexts,
    aliases: set[str],
    unit_cols: set[tuple[str, str]],
    found: dict[str, S.AggregateCall],
    where: str,
    texts: dict[int, str],
) -> None:
    """Outer-layer expressions may use only group keys, aggregates, aliases, literals and
    functions of those (proxy/outer_functions.py), windows over the released rows
    included.

    ``texts`` collects what was rendered, by node id, for the outer layer to reuse."""
    if isinstance(node, exp.Window):
        _window(node, key_sqls, aliases, unit_cols, found, where, texts)
        return
    aggregate = isinstance(node, (exp.Count, S_AGG_TYPES)) or is_quantile(node)
    # Rendering is the cost: only when a key could match or an aggregate needs its text.
    # An alias (``x AS n``) is never a key (GROUP BY holds expressions; the binder
    # resolves aliases there) and its text is never reused: its child is looked at next.
    key = not isinstance(node, exp.Alias) and key_sqls.could_be(node)
    text = duckdb_sql(node) if key or aggregate else ""
    if text:
        texts[id(node)] = text
    if key and text in key_sqls.texts:
        return
    if aggregate:
        call = _aggregate(node, unit_cols, text)
        found.setdefault(call.sql, call)
        return
    if isinstance(node, exp.Column):
        if not node.table and node.name.lower() in aliases:
            return
        raise _RowColumnError(
            "unsupported_sql",
            f"column {node.name} appears in {where} without an aggregate",
            "aggregate it (COUNT, SUM, AVG, ...) or add it to GROUP BY",
            position_of(node),
            column=node.name,
        )
    if isinstance(node, exp.AggFunc) or not (
        isinstance(node, (exp.Alias, exp.Ordered)) or outer_functions.allowed(node)
    ):
        raise _refuse_node(node, where)
    for child in node.iter_expressions():
        _collect_outer(child, key_sqls, aliases, unit_cols, found, where, texts)


def _window(
    node: exp.Window,
    key_sqls: KeyTexts,
    aliases: set[str],
    unit_cols: set[tuple[str, str]],
    found: dict[str, S.AggregateCall],
    where: str,
    texts: dict[int, str],
) -> None:
    """A window function runs over the released rows (the groups), as SQL evaluates it
    after GROUP BY: its own function aggregates released values, its inputs are outer
    expressions (keys and DP aggregates)."""
    if where not in ("the select list", "ORDER BY"):
        raise unsupported(
            f"window functions are not allowed in {where}",
            "compute the window in the select list (e.g. RANK() OVER (ORDER BY "
            "COUNT(*) DESC) AS r) and sort by it",
            position_of(node),
        )
    if not outer_functions.window_function_allowed(node):
        raise unsupported(
            f"the window function {node.this.sql(dialect='duckdb')[:60]} is not answered",
            "use ROW_NUMBER, RANK, DENSE_RANK, NTILE, LAG, LEAD, FIRST_VALUE or an "
            "aggregate (SUM, AVG, COUNT, MIN, MAX) over the released rows",
            position_of(node),
        )
    try:
        for part in outer_functions.window_inputs(node):
            _collect_outer(part, key_sqls, aliases, unit_cols, found, where, texts)
    except _RowColumnError as refused:
        column = refused.column
        # SUM(x) OVER () over the table's rows: say it is the window, not a missing
        # aggregate, that is not answered (the analyst did write an aggregate)
        raise unsupported(
            f"window functions over private rows are not answered ({column} is read row "
            "by row)",
            "aggregate with GROUP BY first: a window runs over the released groups, e.g. "
            f"SUM(SUM({column})) OVER () for a total",
            refused.position,
        ) from None


def _partition_pins(
    select: exp.Select, tables: dict[str, TableInfo], catalog: Catalog, population: str
) -> tuple[tuple[str, ...], str | None]:
    """Partitions of the population the WHERE clause restricts the query to."""
    pop = catalog.policy.population(population)
    if not pop.partition:
        return (), None
    part_table, _, part_col = pop.partition.lower().rpartition(".")
    aliases = {a for a, t in tables.items() if t.policy.name.lower() == part_table}
    info = catalog.get(*split_name(part_table))
    where = select.args.get("where")
    if not aliases or where is None or info is None:
        return (), pop.partition
    if not info.unit_unique:
        # Parallel composition rests on each person being in one partition: one row per
        # person in the partition table, checked at start. Only data nobody can change
        # while dpsql runs keeps it so (DuckDB's read-only base tables: unit_unique); on
        # a live PostgreSQL, a second row for a person with another value would put them
        # in two partitions charged apart (a review, 2026-12-06). There a pinned query
        # charges the whole population.
        return (), pop.partition
    col_policy = info.column(part_col)
    domain = {str(v) for v in (col_policy.values or ())} if col_policy else set()
    pinned = pinned_values(
        where.this,
        lambda e: (
            isinstance(e, exp.Column) and e.table.lower() in aliases and e.name.lower() == part_col
        ),
    )
    values = {str(v) for v in pinned} if pinned else set()
    if not values or not values <= domain:
        return (), pop.partition
    return tuple(sorted(values)), pop.partition


# Clauses of a SELECT the rewrite understands; any other (QUALIFY, sampling, PIVOT,
# LATERAL, WINDOW, ...) would be silently dropped or change the meaning, so it is refused.
SELECT_ARGS = frozenset(
    {
        "expressions",
        "from_",
        "joins",
        "where",
        "group",
        "having",
        "order",
        "limit",
        "offset",
        "distinct",
    }
)
TABLE_ARGS = frozenset({"this", "db", "alias"})
JOIN_ARGS = frozenset({"this", "on", "side", "kind", "using"})


def _check_clauses(select: exp.Select) -> None:
    for name, value in select.args.items():
        if value is not None and value != [] and name not in SELECT_ARGS:
            raise unsupported(
                f"the {name.rstrip('_').upper()} clause is not answered",
                "remove it; filter with WHERE and aggregate with GROUP BY",
                position_of(select),
            )
    for table in select.find_all(exp.Table):
        for name, value in table.args.items():
            if value is not None and value != [] and name not in TABLE_ARGS:
                raise unsupported(
                    f"table modifier {name.rstrip('_').upper()} on {table.name} is not allowed",
                    "query the table plainly (sampling, time travel and pivots are refused)",
                    position_of(table),
                )
    for join in select.args.get("joins") or []:
        for name, value in join.args.items():
            if value is not None and value != [] and name not in JOIN_ARGS:
                raise unsupported(
                    f"JOIN option {name.upper()} is not allowed",
                    "use INNER or LEFT JOIN ... ON",
                    position_of(join),
                )


def _text_column(tables: Mapping[str, TableInfo]) -> Callable[[exp.Column], bool]:
    """Whether a bound column holds text (unknown: it may)."""

    def is_text(column: exp.Column) -> bool:
        info = tables.get(column.table.lower())
        kind = info.column_types.get(column.name.lower()) if info is not None else None
        return kind is None or of_type_name(kind).family in (Family.TEXT, Family.UNKNOWN)

    return is_text


def check_shape(select: exp.Select, catalog: Catalog) -> S.Shape:
    """Check a bound query against the allowlist and extract what the rewrite needs."""
    _check_clauses(select)
    tables = tables_of(select, catalog)
    check_date_diff_columns(select, tables)
    check_conditions(select, tables)
    check_constants(select, tables)
    anchor, population = check_from(select, tables)
    unit_cols = unit_columns(tables)
    # COUNT(DISTINCT unit) counts people only for units that are never NULL on a row:
    # the anchor's (filtered IS NOT NULL) and those of tables joined INNER on it.
    inner = {anchor} | {
        j.this.alias_or_name.lower()
        for j in select.args.get("joins") or []
        if not j.side and isinstance(j.this, exp.Table)
    }
    person_cols = {c for c in unit_cols if c[0] in inner}
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            _check_scalar(join.args["on"], "a JOIN condition")
    where = select.args.get("where")
    if where is not None:
        conjuncts = where.this.flatten() if isinstance(where.this, exp.And) else [where.this]
        for conj in conjuncts:
            if semijoins.semi_join_of(conj.unnest()) is None:
                _check_scalar(conj, "WHERE")
        semijoins.check(select, tables, catalog, population, _check_scalar)
    group = select.args.get("group")
    keys: list[exp.Expr] = list(group.expressions) if group else []
    # The bound is on a row's work, and every clause runs on the same rows: the pieces
    # are checked alone above (for a precise message), the whole query here (150 WHERE
    # conjuncts, each within the bound, ran 2.5 s on one person's rows against 0.09 s:
    # a probe, 2026-12-02).
    check_string_growth(select, "the query as a whole")
    check_stored_strings(select, _text_column(tables))
    for key in keys:
        _check_scalar(key, "GROUP BY")
        for col in key.find_all(exp.Column):
            if (col.table.lower(), col.name.lower()) in unit_cols:
                raise unsupported(
                    "grouping by the person id would release one row per person",
                    "group by an attribute of people, not their id",
                    position_of(col),
                )
        if isinstance(key, exp.Literal):
            raise unsupported(
                "GROUP BY position numbers could not be resolved",
                "group by the expression itself",
                position_of(key),
            )
    key_texts = tuple(duckdb_sql(k) for k in keys)
    key_sqls = KeyTexts(tuple(keys), key_texts)
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    found: dict[str, S.AggregateCall] = {}
    texts: dict[int, str] = {}
    for item in select.expressions:
        _collect_outer(item, key_sqls, set(), person_cols, found, "the select list", texts)
    # Ids are only looked up here, while the select (and so every node) is alive.
    item_sqls = tuple(
        texts.get(id(item.this if isinstance(item, exp.Alias) else item))
        for item in select.expressions
    )
    having = select.args.get("having")
    if having is not None:
        _collect_outer(having.this, key_sqls, aliases, person_cols, found, "HAVING", texts)
    order = select.args.get("order")
    if order is not None:
        for o in order.expressions:
            _collect_outer(o.this, key_sqls, aliases, person_cols, found, "ORDER BY", texts)
    # A grouping with no aggregate lists the groups that exist (SELECT DISTINCT k, filter
    # drop-downs): public domains come from the policy, others through partition
    # selection on the number of people.
    key_release = not found and bool(keys)
    if not found and not key_release:
        raise unsupported(
            "the query has no aggregate; raw rows are never released",
            "aggregate with COUNT(*), SUM, AVG, ... and GROUP BY, or list the values of a "
            "column with SELECT DISTINCT column",
        )
    for clause in ("limit", "offset"):
        node = select.args.get(clause)
        if node is not None:
            value = node.expression if isinstance(node, exp.Limit) else node.this
            if node.expression is not None and isinstance(node, exp.Offset):
                value = node.expression
            if not (isinstance(value, exp.Literal) and value.is_int) or not (
                0 <= int(value.this) <= MAX_LIMIT
            ):
                raise unsupported(
                    f"{clause.upper()} must be an integer literal between 0 and {MAX_LIMIT}",
                    f"write {clause.upper()} 10",
                    position_of(node),
                )
    anchor_info = tables[anchor]
    unit = exp.column(str(anchor_info.policy.unit).lower(), table=anchor)
    pins, partition_column = _partition_pins(select, tables, catalog, population)
    return S.Shape(
        select=select,
        tables=tables,
        unit=unit,
        population=population,
        keys=tuple(keys),
        key_sqls=key_texts,
        item_sqls=item_sqls,
        aggregates=tuple(found.values()),
        pins=pins,
        partition_column=partition_column,
        key_release=key_release,
    )


# Key types the release step converts exactly and without fail. Others (128-bit integers
# and wide decimals become lossy floats, intervals lose months, nested and binary values
# have no stable order or rendering) are refused before the charge.
_KEY_TYPE_PREFIXES = (
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "FLOAT",
    "DOUBLE",
    "VARCHAR",
    "DATE",
    "TIMESTAMP",
    "TIME",
    "UUID",
)


def check_key_types(keys: tuple[str, ...], types: tuple[str, ...]) -> None:
    """Refuse GROUP BY keys of a type the release cannot hand over exactly.

    Exactly means distinct values stay distinct: the core's result is fetched through
    NumPy, where a DECIMAL becomes a float64 and a TIME a Python time of microseconds.
    Two groups that met as one key (DECIMAL(18, 0) values 2^56 and 2^56 + 1 fetched as
    float64, TIME_NS values a nanosecond apart) made the release keep only one of them,
    chosen by the data: a cell then moved by a whole group's count when one person left
    (a probe, 2026-12-02). DECIMAL keys are therefore grouped and fetched as their text
    (Core.text_keys) and released as exact decimals; TIME_NS keys are refused."""
    for key, type_ in zip(keys, types, strict=True):
        t = type_.upper()
        nested = any(mark in t for mark in ("[", "(", "STRUCT", "MAP", "UNION"))
        decimal_ok = t.startswith("DECIMAL(")
        # TIME WITH TIME ZONE has no NumPy form: fetching it fails, and only with rows.
        timetz = t.startswith("TIME WITH") or t == "TIMETZ"
        lossy = t == "TIME_NS"
        if decimal_ok or (
            not nested and not timetz and not lossy and t.startswith(_KEY_TYPE_PREFIXES)
        ):
            continue
        raise unsupported(
            f"the GROUP BY key {key[:60]} has type {type_}, which dpsql cannot release exactly",
            "group by CAST(... AS VARCHAR) of it, or by a simpler expression",
        )
