"""Refuse a function call whose arguments sqlglot's parser would silently drop.

Several of sqlglot's per-dialect builders read only the arguments they know and ignore
the rest: DuckDB's and Trino's ``date_trunc('day', ts, 'America/New_York')`` parse as a
truncation in the session's zone, ``date_diff('day', a, b, c)`` loses ``c``,
``strftime(ts, '%Y', 3)`` loses ``3``. The engine would then answer a query other than
the one the analyst wrote, silently (an honest-answers defect, not a privacy one: what
runs is still bounded). The engines themselves reject these calls, so the refusal costs
nothing that ever worked.

The parser keeps no record of what a builder dropped, and its classes are compiled (no
hook), so the check compares the text with the tree: each function call in the token
stream has its top-level argument count, and the node the parser built for it carries
the call's position (sqlglot places a known function's node at its name token). A node
that holds fewer arguments than the text gave it dropped some. Counting is conservative
in one direction only: a builder that wraps its result (``left`` becomes a CASE around
LEFT) may hold more slots than arguments, which passes; nothing that keeps every
argument is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from proxy import duckdb_functions
from proxy.errors import DPSQLError

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def _name(token: Token | None) -> Token | None:
    """``token`` when it can name a function (a word or a quoted identifier), else None:
    an operator before a bracket (``a / (b - c)``) calls nothing, though DuckDB's
    catalog lists its operators as functions."""
    if token is None:
        return None
    if token.token_type == TokenType.IDENTIFIER or _WORD.fullmatch(token.text):
        return token
    return None


@dataclass(frozen=True)
class Call:
    """A function call in the text: its name, its top-level arguments, and whether a
    word separates its parts without commas (then its comma count is not its arity)."""

    name: str
    given: int
    separated: bool


def _calls(tokens: list[Token]) -> dict[int, Call]:
    """{start offset of a name token followed by "(": its Call}, in one pass: a stack of
    the open brackets, each with its call's name token (or None for a bracket that opens
    no call), its commas, whether anything is inside and whether a separator is."""
    calls: dict[int, Call] = {}
    stack: list[list[Any]] = []  # [name token | None, commas, empty, separated]
    previous: Token | None = None
    for token in tokens:
        kind = token.token_type
        if stack and kind not in _CLOSE:
            stack[-1][2] = False
        if kind in _OPEN:
            stack.append([_name(previous) if kind == TokenType.L_PAREN else None, 0, True, False])
        elif kind in _CLOSE:
            if stack:
                name, commas, empty, separated = stack.pop()
                if name is not None:
                    calls[name.start] = Call(name.text, 0 if empty else commas + 1, separated)
        elif kind == TokenType.COMMA and stack:
            stack[-1][1] += 1
        elif kind in _SEPARATORS and stack:
            stack[-1][3] = True
        previous = token
    return calls


def _held(node: exp.Expr) -> int:
    """How many argument expressions ``node`` holds (lists by their length; a
    DISTINCT's list counts as its items: ``COUNT(DISTINCT a, b)`` holds two). Flags a
    builder sets (``full_match``) count too: the parser gives a TRUE in the text no
    position either, so they cannot be told apart, and counting them errs towards
    answering."""
    held = 0
    for value in node.args.values():
        if isinstance(value, list):
            held += len(value)
        elif isinstance(value, exp.Distinct):
            held += len(value.expressions)
        elif isinstance(value, exp.Expr):
            held += 1
    return held


# Words that separate a call's parts without commas (SUBSTRING(a FROM 1 FOR 2),
# CAST(x AS INT), EXTRACT(year FROM ts), TRIM(BOTH 'x' FROM a), STRING_AGG(x ORDER BY y)):
# such a call's comma count is not its argument count.
_SEPARATORS = frozenset(
    {
        TokenType.FROM,
        TokenType.FOR,
        TokenType.IN,
        TokenType.ALIAS,
        TokenType.USING,
        TokenType.ORDER_BY,
        TokenType.SEPARATOR,
        # COUNT(DISTINCT a, b): refused where DISTINCT aggregates are checked, with
        # the hint that fits it
        TokenType.DISTINCT,
    }
)


def _built(tree: exp.Expr, calls: dict[int, Call]) -> dict[int, exp.Expr]:
    """{a call's start: the node the parser built for it}: the outermost node at the
    call's position, when it is a function (or what a builder made of one: a CASE, an
    operator). A keyword followed by a bracket (``COUNT(*) FILTER (WHERE ...)``,
    ``OVER (...)``) has no such node. Needs the parser's positions (before
    ``parse.forget_positions``)."""
    built: dict[int, exp.Expr] = {}
    seen: set[int] = set()
    for node in tree.walk():
        meta = node._meta
        start = meta.get("start") if meta else None
        if start is None or start in seen or start not in calls:
            continue
        seen.add(start)
        if isinstance(node, exp.Func | exp.Case | exp.Binary):
            built[start] = node
    return built


def _check_held(call: Call, node: exp.Expr) -> None:
    """A known function's node must hold every argument its call in the text passed."""
    if isinstance(node, exp.Anonymous) or _held(node) >= call.given:
        return
    raise DPSQLError(
        "unsupported_sql",
        f"{call.name}() was given {call.given} arguments; in this dialect dpsql reads "
        f"only {_held(node)} of them and would answer a different query",
        f"remove the extra arguments of {call.name}() (a time zone: convert the "
        "column with AT TIME ZONE first, where the dialect allows it)",
    )


def _check_duckdb_arity(call: Call) -> None:
    """DuckDB text: a call of a DuckDB function with a number of arguments none of its
    overloads takes (``length(x, 2)``, ``left(s, 2, 3)``) is refused. DuckDB itself
    rejects it, and sqlglot's builder would drop the extra ones silently where the node
    check cannot see it (a builder that wraps its result)."""
    found = duckdb_functions.arities().get(call.name.lower())
    if found is None or call.separated:
        return
    counts, least = found
    if call.given in counts or (least is not None and call.given >= least):
        return
    takes = " or ".join(
        str(t) for t in [*sorted(counts), *([f"{least} or more"] if least is not None else [])]
    )
    raise DPSQLError(
        "unsupported_sql",
        f"{call.name}() was given {call.given} arguments; DuckDB's {call.name.lower()} "
        f"takes {takes}",
        f"call {call.name}() with {takes} arguments",
    )


def check_arguments(tokens: list[Token], tree: exp.Expr, dialect: str) -> None:
    """Raise ``unsupported_sql`` when a known function's node holds fewer arguments than
    its call in the text passed, or, in DuckDB text, when no DuckDB overload takes the
    call's arguments. Reads only the query text; refuses before any charge."""
    calls = _calls(tokens)
    if not calls:
        return
    for start, node in _built(tree, calls).items():
        call = calls[start]
        _check_held(call, node)
        if dialect == "duckdb":
            _check_duckdb_arity(call)
