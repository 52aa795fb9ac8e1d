"""Other systems' spellings of what dpsql already answers, mapped to one form.

* T-SQL's ``SELECT TOP n …`` (SmartNoise SQL's and SQL Server's row limit) is
  ``… LIMIT n``. sqlglot reads TOP only in the T-SQL dialect, whose other rules (e.g.
  ``LOG(x, b)``) differ from DuckDB's, so the two tokens are blanked out of the text
  before parsing (positions in error messages stay right) and the limit is set on the
  parsed query.
* ``VAR``/``VARP`` (SQL Server, SmartNoise), ``STD``/``STDEV``/``STDEVP`` name the
  sample and population variance and standard deviation that dpsql answers as
  ``VAR_SAMP``/``VAR_POP``/``STDDEV_SAMP``/``STDDEV_POP``. ``STD`` is read like SQL
  Server's ``STDEV``, the sample standard deviation (MySQL's ``STD`` is the population one;
  MySQL is not a dialect dpsql reads).
* BigQuery's ``SAFE_ADD``/``SAFE_SUBTRACT``/``SAFE_MULTIPLY``/``SAFE_NEGATE`` and the
  ``SAFE.`` prefix return NULL where the plain operation would raise: DuckDB's
  ``TRY(...)``. (``SAFE_DIVIDE`` stays: sqlglot writes it as a CASE on the divisor.)
* DuckDB's ``date_part('year', ts)`` (and ``datepart``) is its ``EXTRACT(year FROM
  ts)``, which is how sqlglot already reads it in the PostgreSQL dialect; read with
  DuckDB's, it stayed an unknown function and was refused in GROUP BY where EXTRACT is
  answered (an answer oracle, 2026-12-05). Only a literal part among DuckDB's names is
  respelled (the name is printed into the core's text); anything else stays as written.
* DuckDB's ``year(x)``, ``month(x)``, ``day(x)`` (``dayofmonth``), ``quarter(x)``,
  ``dayofweek(x)``, ``isodow(x)``, ``dayofyear(x)``, ``week(x)`` (``weekofyear``),
  ``hour(x)``, ``minute(x)`` and ``second(x)`` are its
  ``EXTRACT(<part> FROM x)``: the same BIGINT on every date and timestamp, infinities and
  NULL included (checked on 10,000 of each and the range's ends). Read so, they take
  EXTRACT's forms on PostgreSQL and Spark, where they were refused (an answer oracle on
  PostgreSQL, 2026-12-05), and the same release as the EXTRACT they are.
* DuckDB's ``GROUP BY ALL`` groups by every select item that holds a column and no
  aggregate or window (a constant such as ``1 AS k`` is not grouped, as DuckDB does not
  group it): it is read as ``GROUP BY`` those items' positions, the same release. An
  item mixing an aggregate with a column is not grouped: its column must then be one of
  the grouped items (``COUNT(*) + sex`` beside ``sex``, which DuckDB refuses under ALL,
  is answered per group as under ``GROUP BY sex``), else the query is refused as any
  ungrouped column is.
* ``CORR``, ``COVAR_POP``, ``COVAR_SAMP`` and ``REGR_*(y, x)`` are arithmetic over
  ``AVG``, ``VAR_POP`` and ``COUNT`` of the rows where both arguments are not NULL
  (proxy/covariance.py).
* Dollar-quoted ``$$text$$`` and BigQuery's raw ``r'text'`` are string constants.
* DuckDB's ``ORDER BY ALL`` orders by every select item, left to right, in the one
  direction given: it is read as ``ORDER BY`` their positions (it reached DuckDB's
  parser as the outer layer's text and failed there; a corpus of BI and notebook SQL,
  2026-12-06).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from proxy import covariance
from proxy.errors import position_of, unsupported

# Anonymous function name -> the aggregate node dpsql answers.
_AGGREGATE_SPELLINGS: dict[str, type[exp.Func]] = {
    "VAR": exp.Variance,
    "VARP": exp.VariancePop,
    "STD": exp.Stddev,
    "STDEV": exp.Stddev,
    "STDEVP": exp.StddevPop,
    "STDDEVP": exp.StddevPop,
}


# DuckDB's part functions, as the EXTRACT part each one is.
_PART_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Year: "YEAR",
    exp.Month: "MONTH",
    exp.Day: "DAY",
    exp.DayOfMonth: "DAY",
    exp.Quarter: "QUARTER",
    exp.DayOfWeek: "DAYOFWEEK",
    exp.DayOfYear: "DAYOFYEAR",
    exp.Week: "WEEK",
    exp.WeekOfYear: "WEEK",
    # (isodow: the same BIGINT on 40,005 dates and timestamps, infinities and NULL too)
    exp.DayOfWeekIso: "ISODOW",
    # (the same BIGINT on timestamps, dates, times, zones, infinities and NULL)
    exp.Hour: "HOUR",
    exp.Minute: "MINUTE",
    exp.Second: "SECOND",
}

# DuckDB's date part names (its date_part and EXTRACT accept the same ones).
_DATE_PARTS = frozenset(
    {
        "century", "day", "dayofmonth", "dayofweek", "dayofyear", "decade", "dow", "doy",
        "epoch", "era", "hour", "isodow", "isoyear", "julian", "microsecond",
        "microseconds", "millennium", "millisecond", "milliseconds", "minute", "minutes",
        "month", "quarter", "second", "seconds", "timezone", "timezone_hour",
        "timezone_minute", "week", "weekday", "weekofyear", "year", "yearweek",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Top:
    """A ``TOP n`` found (and blanked out) in the outermost SELECT."""

    count: int
    position: dict[str, int]


def _line_col(sql: str, offset: int) -> dict[str, int]:
    line = sql.count("\n", 0, offset) + 1
    return {"line": line, "column": offset - (sql.rfind("\n", 0, offset) + 1) + 1}


def _top_span(tokens: list[Token]) -> tuple[int, int, int] | None:
    """(first token index, last token index, n) of ``TOP n`` / ``TOP (n)`` right after
    the outermost SELECT (and its DISTINCT/ALL), if there is one."""
    depth = 0
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.SELECT and depth == 0:
            j = i + 1
            if j < len(tokens) and tokens[j].token_type in (TokenType.DISTINCT, TokenType.ALL):
                j += 1
            if j >= len(tokens) or tokens[j].text.upper() != "TOP":
                return None
            rest = tokens[j + 1 : j + 4]
            if rest and rest[0].token_type == TokenType.NUMBER and rest[0].text.isdigit():
                return j, j + 1, int(rest[0].text)
            if (
                len(rest) == 3
                and rest[0].token_type == TokenType.L_PAREN
                and rest[1].token_type == TokenType.NUMBER
                and rest[1].text.isdigit()
                and rest[2].token_type == TokenType.R_PAREN
            ):
                return j, j + 3, int(rest[1].text)
            return None
    return None


def strip_top(sql: str, dialect: str) -> tuple[str, Top | None]:
    """The text with a leading ``TOP n`` blanked out, and the limit it asked for."""
    if "top" not in sql.lower():
        return sql, None
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except (SqlglotError, ValueError):
        return sql, None  # the parser reports the problem with its position
    span = _top_span(tokens)
    if span is None:
        return sql, None
    first, last, count = span
    start, end = tokens[first].start, tokens[last].end + 1
    blanked = sql[:start] + " " * (end - start) + sql[end:]
    return blanked, Top(count, _line_col(sql, start))


def apply_top(tree: exp.Expr, top: Top) -> exp.Expr:
    """Set the limit ``TOP n`` asked for on the parsed query."""
    if not isinstance(tree, exp.Select):
        return tree  # not a SELECT: the statement check refuses it
    if tree.args.get("limit") is not None:
        raise unsupported(
            "the query has both TOP and LIMIT",
            f"keep one of them: write ... LIMIT {top.count}",
            top.position,
        )
    tree.set("limit", exp.Limit(expression=exp.Literal.number(top.count)))
    return tree


# BigQuery's SAFE_ arithmetic -> the plain operation (evaluated under TRY).
_SAFE_BINARY: dict[type[exp.Expr], type[exp.Binary]] = {
    exp.SafeAdd: exp.Add,
    exp.SafeSubtract: exp.Sub,
    exp.SafeMultiply: exp.Mul,
}


def _when(condition: exp.Expr, value: exp.Expr) -> exp.Case:
    """``CASE WHEN condition THEN value END``: NULL, which aggregates skip, elsewhere."""
    return exp.Case(ifs=[exp.If(this=condition, true=value)])


def _filtered(node: exp.Filter) -> exp.Expr:
    """``AGG(x) FILTER (WHERE c)`` as ``AGG(CASE WHEN c THEN x END)``, and ``COUNT(*)
    FILTER (WHERE c)`` as ``COUNT(CASE WHEN c THEN 1 END)``: the rows where ``c`` is not
    true give NULL, which every aggregate dpsql answers skips, as FILTER drops them."""
    aggregate, where = node.this, node.expression
    if not isinstance(aggregate, exp.AggFunc) or not isinstance(where, exp.Where):
        return node
    argument = aggregate.this
    condition = where.this
    if isinstance(argument, exp.Star):
        aggregate.set("this", _when(condition, exp.Literal.number(1)))
    elif isinstance(argument, exp.Distinct) and len(argument.expressions) == 1:
        argument.set("expressions", [_when(condition, argument.expressions[0])])
    elif isinstance(argument, exp.Expr) and not isinstance(argument, exp.Distinct):
        aggregate.set("this", _when(condition, argument))
    else:
        return node  # (a DISTINCT of several values: refused as FILTER was)
    return aggregate


def _respell(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.RawString):
        # $$dollar-quoted$$ (PostgreSQL, DuckDB) and BigQuery's r'raw' text: a string
        # constant whose backslashes are its own, as a DuckDB '...' string keeps them
        return exp.Literal.string(node.this)
    if isinstance(node, exp.Filter):
        return _filtered(node)
    paired = covariance.expand(node)
    if paired is not None:
        return paired
    if isinstance(node, exp.CountIf):
        return exp.Count(this=_when(node.this, exp.Literal.number(1)))
    if isinstance(node, exp.ApproxDistinct) and node.args.get("accuracy") is None:
        # answered exactly: COUNT(DISTINCT x) is what the estimate estimates
        return exp.Count(this=exp.Distinct(expressions=[node.this]))
    if isinstance(node, exp.Date) and all(not v for k, v in node.args.items() if k != "this"):
        # PostgreSQL's, MySQL's and BigQuery's DATE(x) of a timestamp (Looker's date
        # dimension) is DuckDB's CAST(x AS DATE)
        return exp.Cast(this=node.this, to=exp.DataType.build("DATE"))
    if (
        isinstance(node, exp.Nullif)
        and node.find_ancestor(exp.AggFunc) is not None
        and node.find_ancestor(exp.Window) is None
    ):
        # ``AVG(NULLIF(x, 0))`` ("the mean of the values that are not 0"): the CASE its
        # definition is, which the rewrite bounds (check_repeated_operands limited its
        # nesting before this copy of the first argument).
        first = node.this
        return exp.Case(
            ifs=[
                exp.If(
                    this=exp.EQ(this=_tight(first.copy()), expression=_tight(node.expression)),
                    true=exp.Null(),
                )
            ],
            default=first,
        )
    binary = _SAFE_BINARY.get(type(node))
    if binary is not None:
        return exp.Try(this=exp.Paren(this=binary(this=node.this, expression=node.expression)))
    if isinstance(node, exp.SafeNegate):
        return exp.Try(this=exp.Neg(this=exp.Paren(this=node.this)))
    if isinstance(node, exp.SafeFunc):
        return exp.Try(this=node.this)
    part_of = _PART_FUNCTIONS.get(type(node))
    if part_of is not None and all(v is None for k, v in node.args.items() if k != "this"):
        # (only the one-argument forms: MySQL's week(x, mode) is not DuckDB's)
        return exp.Extract(this=exp.var(part_of), expression=node.this)
    if isinstance(node, exp.Anonymous) and isinstance(node.this, str):
        part = _date_part(node)
        if part is not None:
            return exp.Extract(this=exp.var(part.upper()), expression=node.expressions[1])
        target = _AGGREGATE_SPELLINGS.get(node.this.upper())
        if target is not None:
            if len(node.expressions) != 1:
                first = node.expressions[0].sql(dialect="duckdb") if node.expressions else "x"
                raise unsupported(
                    f"{node.this.upper()} takes one argument, not {len(node.expressions)}",
                    f"write {node.this.upper()}({first})",
                    position_of(node),
                )
            return target(this=node.expressions[0])
    return node


def _date_part(node: exp.Anonymous) -> str | None:
    """The part of ``date_part('<part>', x)`` when it is one of DuckDB's names."""
    if node.this.upper() not in ("DATE_PART", "DATEPART") or len(node.expressions) != 2:
        return None
    part = node.expressions[0]
    if not (isinstance(part, exp.Literal) and part.is_string):
        return None
    name = str(part.this).strip().lower()
    return name if name in _DATE_PARTS else None


# Passes of the respellings at most (a pass that changes nothing ends them sooner).
MAX_RESPELL_PASSES = 4

# Nodes a query's simple CASEs may add by repeating their operand (see _searched).
MAX_CASE_COPIES = 10_000

# Nodes a query's CORR, COVAR and REGR aggregates may add by writing their arguments out
# (proxy/covariance.py: REGR_R2 holds each argument about 40 times, each statistic's
# bounding three times again; 15,000 added nodes took about 4 s to plan, 43,000 23 s).
MAX_PAIRED_COPIES = 10_000


def _tight(node: exp.Expr) -> exp.Expr:
    """``node`` as an operand of ``=``: in parentheses unless it binds tighter anyway
    (``CASE n > 1 WHEN TRUE`` is ``(n > 1) = TRUE``, not a chained comparison)."""
    loose = (exp.Binary, exp.Connector, exp.Predicate, exp.Unary)  # (And, Or are Funcs)
    tight = (exp.Column, exp.Literal, exp.Boolean, exp.Null, exp.Func, exp.Paren, exp.Cast)
    if isinstance(node, tight) and not isinstance(node, loose):
        return node
    return exp.paren(node, copy=False)


def _searched(case: exp.Case) -> exp.Case:
    """``CASE x WHEN a THEN r ...`` as ``CASE WHEN x = a THEN r ...``, which is how
    DuckDB binds it: the checker, the guards that keep comparisons from raising under
    TRY (proxy/guarded_arithmetic.py) and the clipping estimate's branch conditions
    then see the comparison. As written, ``CASE k WHEN 1`` on a text ``k`` raised under
    TRY on rows whose text is not a number, which made DuckDB redo their vectors row by
    row: one person's rows changed the time 16-fold (a review, 2026-12-04)."""
    operand = case.this
    ifs = [
        exp.If(
            this=exp.EQ(this=_tight(operand.copy()), expression=_tight(branch.this)),
            true=branch.args.get("true"),
        )
        for branch in case.args.get("ifs") or []
    ]
    return exp.Case(ifs=ifs, default=case.args.get("default"))


def _grouped_by_all(select: exp.Select) -> None:
    """``GROUP BY ALL`` as ``GROUP BY`` the positions DuckDB would group by."""
    group = select.args.get("group")
    if group is None or not group.args.get("all") or group.expressions:
        return
    items = select.expressions
    if any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star) for i in items):
        return  # (a star is refused with the aggregate beside it, as before)
    positions = [
        exp.Literal.number(n)
        for n, item in enumerate(items, start=1)
        if item.find(exp.Column) is not None and item.find(exp.AggFunc, exp.Window) is None
    ]
    select.set("group", exp.Group(expressions=positions) if positions else None)


def _ordered_by_all(select: exp.Select) -> None:
    """``ORDER BY ALL`` as ``ORDER BY`` every select item's position, left to right, each
    in its direction (DuckDB's meaning)."""
    order = select.args.get("order")
    if order is None or len(order.expressions) != 1:
        return
    only = order.expressions[0]
    if not (isinstance(only.this, exp.Var) and only.this.name.upper() == "ALL"):
        return
    items = select.expressions
    if any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star) for i in items):
        return  # (a star's width is the binder's to say; refused there with its reason)
    order.set(
        "expressions",
        [
            exp.Ordered(
                this=exp.Literal.number(n), **{k: v for k, v in only.args.items() if k != "this"}
            )
            for n in range(1, len(items) + 1)
        ],
    )


def _fetched(select: exp.Select) -> None:
    """The SQL standard's ``FETCH FIRST|NEXT n ROWS ONLY`` (Looker's, Db2's) as ``LIMIT
    n``; ``WITH TIES`` and ``PERCENT`` stay as written (refused by the LIMIT check)."""
    fetch = select.args.get("limit")
    if not isinstance(fetch, exp.Fetch):
        return
    options = fetch.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        return
    count = fetch.args.get("count")
    select.set("limit", exp.Limit(expression=count if count is not None else exp.Literal.number(1)))


@dataclass(frozen=True)
class _Pass:
    """One pass of the respellings: the tree, whether any applied, and the nodes the
    paired aggregates' expansions added (with the first one expanded)."""

    tree: exp.Expr
    changed: bool
    paired_nodes: int
    first_paired: exp.Expr | None


def _respelled(tree: exp.Expr) -> _Pass:
    """One pass of the respellings over ``tree`` (in place)."""
    changed = False
    added = 0
    first: exp.Expr | None = None

    def visit(node: exp.Expr) -> exp.Expr:
        nonlocal changed, added, first
        out = _respell(node)
        changed = changed or out is not node
        if out is not node and isinstance(node, covariance.PAIRED):
            added += sum(1 for _ in out.walk()) - sum(1 for _ in node.walk())
            first = first or node
        return out

    return _Pass(tree.transform(visit, copy=False), changed, added, first)


def normalize(tree: exp.Expr) -> exp.Expr:
    """Aggregate spellings of other systems as the nodes dpsql answers, simple CASEs as
    searched ones (deepest first, so that each operand copied is final), and ``GROUP BY
    ALL`` and ``ORDER BY ALL`` as the positions they name."""
    # Again while a pass changed something: a respelling's parts may hold spellings of
    # their own (AVG(x) FILTER (WHERE NULLIF(y, 0) > 3): the CASE a FILTER becomes holds
    # the NULLIF, now inside an aggregate; a review, 2026-12-06). Each pass removes
    # spellings and adds none, so this ends.
    paired, first = 0, None
    for _ in range(MAX_RESPELL_PASSES):
        done = _respelled(tree)
        tree = done.tree
        paired, first = paired + done.paired_nodes, first or done.first_paired
        if paired > MAX_PAIRED_COPIES and first is not None:
            raise unsupported(
                f"its CORR, COVAR and REGR aggregates (the first: "
                f"{first.sql(dialect='duckdb')[:60]}) write their arguments out in {paired} "
                f"nodes (at most {MAX_PAIRED_COPIES}): each is answered from several "
                "averages and variances "
                "of its arguments",
                "ask fewer of them in one query, or over shorter argument expressions",
            )
        if not done.changed:
            break
    for select in list(tree.find_all(exp.Select)):
        _grouped_by_all(select)
        _ordered_by_all(select)
        _fetched(select)
    simple = [c for c in tree.find_all(exp.Case) if c.args.get("this") is not None]
    added = sum(
        sum(1 for _ in c.this.walk()) * max(len(c.args.get("ifs") or []) - 1, 0) for c in simple
    )
    if added > MAX_CASE_COPIES:
        raise unsupported(
            f"its CASE x WHEN ... forms repeat their operand in {added} nodes "
            f"(at most {MAX_CASE_COPIES})",
            "compute the operand once in a subquery, or use fewer WHEN branches",
            position_of(simple[0]),
        )
    for case in reversed(simple):  # find_all is breadth first: deepest last
        replacement = _searched(case)
        if case is tree:
            tree = replacement
        else:
            case.replace(replacement)
    return tree
