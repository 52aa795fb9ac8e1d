"""BigQuery's differential-privacy syntax, read into an ordinary dpsql query and request.

    SELECT WITH DIFFERENTIAL_PRIVACY
      OPTIONS (epsilon = 1, delta = 1e-7, max_groups_contributed = 1, privacy_unit_column = id)
      item, AVG(quantity, contribution_bounds_per_group => (0, 100)) AS average_quantity
    FROM professors GROUP BY item

sqlglot does not parse this clause nor the ``name => (lo, hi)`` arguments, so this module
works on the token stream of the text (sqlglot's tokenizer: strings, comments and quoted
names are never mistaken for syntax) and writes an ordinary query:

* ``WITH DIFFERENTIAL_PRIVACY OPTIONS (...)`` is removed and its options become request
  fields: ``epsilon`` and ``delta`` the query's budget, ``max_groups_contributed`` (or
  its old name ``kappa``) the L0 bound ``max_groups``; ``privacy_unit_column`` must name
  the policy's person id (:class:`DPClause`, checked by the engine).
* ``SUM``/``AVG``/``VAR_POP``/``STDDEV_POP``/``PERCENTILE_CONT(x, …,
  contribution_bounds_per_group|row => (lo, hi))`` clamp x to [lo, hi] with the
  NULL-preserving ``CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x END``, whose range
  the range analysis intersects with the policy's bounds: bounds may only tighten it.
  dpsql clamps each row (BigQuery clamps each person's per-group total); with one row per
  person and group they agree. ``PERCENTILE_CONT(x, q)`` stays (the quantile in every dialect).
* ``COUNT(*|x, contribution_bounds_per_group => (0, c))`` bounds each person's rows per
  group: the Linf bound ``max_rows_per_group = c``.
* The older ``WITH ANONYMIZATION`` clause with ``ANON_COUNT``/``ANON_SUM``/``ANON_AVG``/
  ``ANON_VAR_POP``/``ANON_STDDEV_POP``/``ANON_PERCENTILE_CONT(x [CLAMPED BETWEEN lo AND
  hi])`` is read the same way.

A request's own limits and budget still apply; the engine (proxy/engine.py) refuses a
budget given twice and caps limits looser than the policy at the policy's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from proxy.catalog import DEFAULT_DB, Catalog, TableInfo
from proxy.errors import DPSQLError, bad_request, unsupported
from proxy.policy import Policy
from proxy.request import QueryRequest

CLAUSES = ("DIFFERENTIAL_PRIVACY", "ANONYMIZATION")
# BigQuery's "remove noise" setting is epsilon = 1e20; dpsql's largest per-query ε is 1e4.
MAX_EPSILON = 1e4
OPTION_NAMES = ("epsilon", "delta", "max_groups_contributed", "kappa", "privacy_unit_column")
BOUND_NAMES = ("contribution_bounds_per_group", "contribution_bounds_per_row")
# DP aggregate -> the aggregate dpsql answers (ANON_* are the ANONYMIZATION spellings).
AGGREGATES = {
    "COUNT": "COUNT",
    "SUM": "SUM",
    "AVG": "AVG",
    "VAR_POP": "VAR_POP",
    "STDDEV_POP": "STDDEV_POP",
    # PERCENTILE_CONT(x, q): every dialect reads it as the quantile (DuckDB's QUANTILE_CONT
    # is an unknown function to the BigQuery reader the statement is read with).
    "PERCENTILE_CONT": "PERCENTILE_CONT",
    "ANON_COUNT": "COUNT",
    "ANON_SUM": "SUM",
    "ANON_AVG": "AVG",
    "ANON_VAR_POP": "VAR_POP",
    "ANON_STDDEV_POP": "STDDEV_POP",
    "ANON_PERCENTILE_CONT": "PERCENTILE_CONT",
}


@dataclass(frozen=True)
class DPClause:
    """The options of ``WITH DIFFERENTIAL_PRIVACY OPTIONS (...)``."""

    epsilon: float | None = None
    delta: float | None = None
    max_groups: int | None = None  # None: absent or NULL (then the policy's bound)
    privacy_unit_column: tuple[str, ...] | None = None  # a column path, e.g. ("t", "id")


@dataclass(frozen=True)
class Bound:
    """``contribution_bounds_*`` (or ``CLAMPED BETWEEN``) of one aggregate call."""

    function: str  # as written, upper case
    lower: float
    upper: float
    argument: str  # the argument's text as written (for messages)


@dataclass(frozen=True)
class Translation:
    sql: str  # an ordinary query, in the dialect it was read in
    dialect: str
    clause: DPClause
    bounds: tuple[Bound, ...] = field(default=())
    max_rows_per_group: int | None = None  # from COUNT's contribution bounds


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int  # exclusive
    text: str


def _number(text: str, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise bad_request(
            f"{what} must be a number literal, not {text.strip()[:40]!r}",
            f"write e.g. {what.split()[0]} = 1.0",
        ) from None
    if not math.isfinite(value):
        raise bad_request(f"{what} must be finite", f"write e.g. {what.split()[0]} = 1.0")
    return value


def _matching(tokens: list[Token], open_index: int) -> int:
    depth = 0
    for i in range(open_index, len(tokens)):
        if tokens[i].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[i].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return i
    raise DPSQLError("parse_error", "unbalanced parentheses", "check the brackets")


def _split_commas(tokens: list[Token], start: int, end: int) -> list[tuple[int, int]]:
    """(first, last) token index ranges of the comma-separated items in [start, end)."""
    items, depth, first = [], 0, start
    for i in range(start, end):
        kind = tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
        elif kind == TokenType.COMMA and depth == 0:
            items.append((first, i - 1))
            first = i + 1
    if first < end:
        items.append((first, end - 1))
    return items


def _span(sql: str, tokens: list[Token], first: int, last: int) -> str:
    return sql[tokens[first].start : tokens[last].end + 1]


def _options(sql: str, tokens: list[Token], open_index: int, close_index: int) -> DPClause:
    values: dict[str, str] = {}
    for first, last in _split_commas(tokens, open_index + 1, close_index):
        if last < first + 2 or tokens[first + 1].token_type != TokenType.EQ:
            raise unsupported(
                f"cannot read the option {_span(sql, tokens, first, last)[:60]!r}",
                "write OPTIONS (epsilon = 1.0, delta = 1e-7, privacy_unit_column = id)",
            )
        name = tokens[first].text.lower()
        if name not in OPTION_NAMES:
            raise unsupported(
                f"the differential privacy option {name!r} is not supported (dpsql chooses "
                "how groups are selected and bounded from the policy)",
                f"drop {name}: use only epsilon, delta, max_groups_contributed and "
                "privacy_unit_column",
            )
        if name in values or (name == "kappa" and "max_groups_contributed" in values):
            earlier = values.get(name, values.get("max_groups_contributed", "")).strip()
            raise bad_request(
                f"the option {name} is given twice", f"give it once, e.g. {name} = {earlier}"
            )
        values[name] = _span(sql, tokens, first + 2, last)
    groups = values.get("max_groups_contributed", values.get("kappa"))
    max_groups = None
    if groups is not None and groups.strip().upper() != "NULL":
        number = _number(groups, "max_groups_contributed")
        if number < 1 or not number.is_integer():
            raise bad_request(
                "max_groups_contributed must be a positive integer",
                "write max_groups_contributed = 1",
            )
        max_groups = int(number)
    unit = values.get("privacy_unit_column")
    return DPClause(
        epsilon=None if "epsilon" not in values else _number(values["epsilon"], "epsilon"),
        delta=None if "delta" not in values else _number(values["delta"], "delta"),
        max_groups=max_groups,
        privacy_unit_column=None
        if unit is None
        else tuple(p.strip().strip('`"').lower() for p in unit.split(".")),
    )


def _clause(tokens: list[Token]) -> tuple[int, int, str] | None:
    """(index of WITH, index of the clause name, clause) after the outermost SELECT."""
    depth = 0
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.SELECT and depth == 0:
            if (
                i + 2 < len(tokens)
                and tokens[i + 1].token_type == TokenType.WITH
                and tokens[i + 2].text.upper() in CLAUSES
            ):
                return i + 1, i + 2, tokens[i + 2].text.upper()
            return None
    return None


def _bound_pair(
    sql: str, tokens: list[Token], first: int, last: int, what: str
) -> tuple[float, float]:
    lo, hi = _number_span(sql, tokens, first, last, what)
    if lo > hi:
        raise bad_request(
            f"{what}: the lower bound {lo:g} is above the upper bound {hi:g}",
            "write (lower, upper) with lower <= upper",
        )
    return lo, hi


def _number_span(
    sql: str, tokens: list[Token], first: int, last: int, what: str
) -> tuple[float, float]:
    parts = _split_commas(tokens, first, last + 1)
    if len(parts) != 2:
        raise bad_request(f"{what} needs two numbers", f"write {what} => (0, 100)")
    return (
        _number(_span(sql, tokens, *parts[0]), what),
        _number(_span(sql, tokens, *parts[1]), what),
    )


def _clamp(argument: str, lower: float, upper: float) -> str:
    lo, hi = f"{lower:g}", f"{upper:g}"
    return f"CASE WHEN ({argument}) < {lo} THEN {lo} WHEN ({argument}) > {hi} THEN {hi} ELSE ({argument}) END"


def _calls(sql: str, tokens: list[Token], start: int) -> tuple[list[_Edit], list[Bound], list[int]]:
    """Edits for every DP aggregate call after token ``start``: renamed, its argument
    clamped to its bounds, the bounds argument removed. Also the COUNT row bounds."""
    edits: list[_Edit] = []
    bounds: list[Bound] = []
    count_limits: list[int] = []
    i = start
    while i < len(tokens) - 1:
        name = tokens[i].text.upper()
        if (
            name.startswith("ANON_")
            and name not in AGGREGATES
            and tokens[i + 1].token_type == TokenType.L_PAREN
        ):
            raise unsupported(
                f"{name} is not supported",
                "use ANON_COUNT, ANON_SUM, ANON_AVG, ANON_VAR_POP, ANON_STDDEV_POP or one "
                "ANON_PERCENTILE_CONT(x, q CLAMPED BETWEEN lo AND hi) per quantile",
            )
        if name not in AGGREGATES or tokens[i + 1].token_type != TokenType.L_PAREN:
            i += 1
            continue
        close = _matching(tokens, i + 1)
        items = _split_commas(tokens, i + 2, close)
        target = AGGREGATES[name]
        if target != name:
            edits.append(_Edit(tokens[i].start, tokens[i].end + 1, target))
        pair: tuple[float, float] | None = None
        if items:
            first, last = items[-1]
            arg_first, arg_last = items[0]
            if tokens[first].text.lower() in BOUND_NAMES and first + 1 <= last:
                if (
                    tokens[first + 1].token_type != TokenType.FARROW
                    or tokens[first + 2].token_type != TokenType.L_PAREN
                ):
                    raise bad_request(
                        f"cannot read {tokens[first].text}",
                        f"write {tokens[first].text.lower()} => (lower, upper)",
                    )
                tuple_close = _matching(tokens, first + 2)
                pair = _bound_pair(
                    sql, tokens, first + 3, tuple_close - 1, tokens[first].text.lower()
                )
                comma = tokens[first - 1]  # the comma before the named argument
                edits.append(_Edit(comma.start, tokens[last].end + 1, ""))
                items = items[:-1]
            else:
                # ANONYMIZATION's ``x CLAMPED BETWEEN lo AND hi`` inside the last argument.
                for j in range(first, last + 1):
                    if tokens[j].text.upper() == "CLAMPED" and j + 1 <= last:
                        if tokens[j + 1].token_type != TokenType.BETWEEN:
                            break
                        ands = [
                            k
                            for k in range(j + 2, last + 1)
                            if tokens[k].token_type == TokenType.AND
                        ]
                        if not ands:
                            break
                        pair = (
                            _number(_span(sql, tokens, j + 2, ands[0] - 1), "CLAMPED BETWEEN"),
                            _number(_span(sql, tokens, ands[0] + 1, last), "CLAMPED BETWEEN"),
                        )
                        if pair[0] > pair[1]:
                            raise bad_request(
                                "CLAMPED BETWEEN: the lower bound is above the upper bound",
                                "write CLAMPED BETWEEN lower AND upper with lower <= upper",
                            )
                        edits.append(_Edit(tokens[j - 1].end + 1, tokens[last].end + 1, ""))
                        if (first, last) == (arg_first, arg_last):
                            arg_last = j - 1
                        break
        if pair is not None and items:
            argument = _span(sql, tokens, arg_first, arg_last)
            if target == "COUNT":
                if pair[0] != 0 or pair[1] < 1:
                    raise bad_request(
                        f"COUNT's contribution bounds ({pair[0]:g}, {pair[1]:g}) must be "
                        "(0, c) with c >= 1: c rows per person and group",
                        f"write COUNT({argument}, contribution_bounds_per_group => (0, "
                        f"{max(1, math.floor(pair[1])):d}))",
                    )
                count_limits.append(math.floor(pair[1]))
            elif argument.strip() != "*":
                start_char = tokens[arg_first].start
                end_char = tokens[arg_last].end + 1
                edits.append(_Edit(start_char, end_char, _clamp(argument, *pair)))
            bounds.append(Bound(name, pair[0], pair[1], argument))
        i += 1
    return edits, bounds, count_limits


def translate(sql: str, dialect: str) -> Translation | None:
    """The ordinary query of a ``SELECT WITH DIFFERENTIAL_PRIVACY`` (or ``WITH
    ANONYMIZATION``) statement, or None for any other text."""
    lowered = sql.lower()
    if "differential_privacy" not in lowered and "anonymization" not in lowered:
        return None
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except (SqlglotError, ValueError):
        return None  # the parser reports the problem, with its position
    found = _clause(tokens)
    if found is None:
        return None
    with_index, name_index, _ = found
    end_index = name_index
    clause = DPClause()
    if (
        name_index + 2 < len(tokens)
        and tokens[name_index + 1].text.upper() == "OPTIONS"
        and tokens[name_index + 2].token_type == TokenType.L_PAREN
    ):
        close = _matching(tokens, name_index + 2)
        clause = _options(sql, tokens, name_index + 2, close)
        end_index = close
    edits = [_Edit(tokens[with_index].start, tokens[end_index].end + 1, "")]
    calls, bounds, count_limits = _calls(sql, tokens, end_index + 1)
    edits += calls
    text = sql
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return Translation(
        sql=text,
        dialect=dialect,
        clause=clause,
        bounds=tuple(bounds),
        max_rows_per_group=min(count_limits) if count_limits else None,
    )


def _private_tables(translation: Translation, catalog: Catalog) -> list[TableInfo]:
    try:
        tree = sqlglot.parse_one(translation.sql, read=translation.dialect)
    except (SqlglotError, ValueError):
        return []  # the parser refuses it in the ordinary path, with its position
    found: list[TableInfo] = []
    for table in tree.find_all(exp.Table):
        info = catalog.get(table.db or DEFAULT_DB, table.name)
        if info is not None and not info.public and info not in found:
            found.append(info)
    return found


def _limit(
    name: str,
    asked: int | None,
    requested: int | None,
    allowed: int,
    option: str,
    notes: list[str],
) -> int | None:
    """A limit the clause asks for, within the request's and the policy's."""
    if asked is None:
        return requested
    bound = min(allowed, requested) if requested is not None else allowed
    if asked > bound:
        notes.append(
            f"{option} = {asked} is looser than the policy's {name} = {bound}: {bound} applies"
        )
        return requested
    return asked


def to_request(
    request: QueryRequest, translation: Translation, catalog: Catalog, policy: Policy
) -> tuple[QueryRequest, tuple[str, ...]]:
    """The ordinary request a translated statement makes, and notes for the answer's
    warnings (bounds looser than the policy, which the policy's replace)."""
    clause = translation.clause
    notes: list[str] = []
    tables = _private_tables(translation, catalog)
    if clause.privacy_unit_column is not None and tables:
        column = clause.privacy_unit_column[-1]
        units = sorted({str(t.policy.unit).lower() for t in tables if t.policy.unit})
        if column not in units:
            path = ".".join(clause.privacy_unit_column)
            names = ", ".join(t.policy.name for t in tables)
            raise unsupported(
                f"privacy_unit_column = {path} is not the person id of {names}: dpsql "
                f"protects the people the policy names, identified by {', '.join(units)}",
                f"write privacy_unit_column = {units[0]}",
            )
    fields: dict[str, object] = {"sql": translation.sql, "dialect": translation.dialect}
    given = request.epsilon is not None or request.rho is not None or request.accuracy is not None
    if clause.epsilon is not None:
        if clause.epsilon > MAX_EPSILON:
            raise bad_request(
                f"epsilon = {clause.epsilon:g} asks for answers without noise (BigQuery's "
                "way to remove it): dpsql always adds noise calibrated to the policy",
                "use a budget you can afford, e.g. epsilon = 1 (`dpsql budget` shows what is left)",
            )
        if given and request.epsilon != clause.epsilon:
            raise bad_request(
                "the budget is given twice: OPTIONS (epsilon = ...) in the SQL and the "
                "request's own budget",
                "keep one of them: drop epsilon from OPTIONS, or send no budget in the request",
            )
        fields["epsilon"] = clause.epsilon
    if clause.delta is not None:
        if request.delta is not None and request.delta != clause.delta:
            raise bad_request(
                "delta is given twice: OPTIONS (delta = ...) in the SQL and in the request",
                "keep one of them",
            )
        fields["delta"] = clause.delta
        ceilings = {
            str(t.policy.population): policy.population(str(t.policy.population)).max_query_delta
            for t in tables
        }
        if ceilings and 0 < min(ceilings.values()) < clause.delta:
            # A smaller δ is only more private: the policy's per-query δ replaces it.
            population, ceiling = min(ceilings.items(), key=lambda kv: kv[1])
            delta = min(policy.proxy.default_delta, ceiling)
            notes.append(
                f"delta = {clause.delta:g} is above what one query of population "
                f"{population} may spend ({ceiling:g}): delta = {delta:g} applies"
            )
            fields["delta"] = delta
    groups = [
        k for t in tables if (k := t.policy.max_groups or t.policy.auto_groups_limit) is not None
    ]
    rows = [t.policy.max_rows_per_group for t in tables if t.policy.max_rows_per_group is not None]
    fields["max_groups"] = _limit(
        "max_groups",
        clause.max_groups,
        request.max_groups,
        max(groups) if groups else policy.proxy.max_groups,
        "max_groups_contributed",
        notes,
    )
    fields["max_rows_per_group"] = _limit(
        "max_rows_per_group",
        translation.max_rows_per_group,
        request.max_rows_per_group,
        max(rows) if rows else policy.proxy.max_rows_per_group,
        "COUNT's contribution bound",
        notes,
    )
    for bound in translation.bounds:
        column = bound.argument.strip().strip('`"').lower()
        for table in tables:
            rule = table.column(column.rpartition(".")[2])
            if rule is None or rule.lower is None or rule.upper is None:
                continue
            if bound.lower < rule.lower or bound.upper > rule.upper:
                notes.append(
                    f"{bound.function}'s bounds ({bound.lower:g}, {bound.upper:g}) on {column} "
                    f"are looser than the policy's [{rule.lower:g}, {rule.upper:g}]: the "
                    f"values are clamped to [{max(bound.lower, rule.lower):g}, "
                    f"{min(bound.upper, rule.upper):g}]"
                )
    return replace(request, **fields), tuple(notes)  # type: ignore[arg-type]
