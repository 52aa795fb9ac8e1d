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

from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from proxy.errors import DPSQLError

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}


def _argument_counts(tokens: list[Token]) -> dict[int, tuple[str, int]]:
    """{start offset of a name token followed by "(": (its text, top-level arguments)},
    in one pass: a stack of the open brackets, each with its call's name token (or None
    for a bracket that opens no call), its commas and whether anything is inside."""
    calls: dict[int, tuple[str, int]] = {}
    stack: list[list[Any]] = []  # [name token | None, commas, empty]
    previous: Token | None = None
    for token in tokens:
        kind = token.token_type
        if stack and kind not in _CLOSE:
            stack[-1][2] = False
        if kind in _OPEN:
            call = previous if kind == TokenType.L_PAREN and previous is not None else None
            stack.append([call, 0, True])
        elif kind in _CLOSE:
            if stack:
                name, commas, empty = stack.pop()
                if name is not None:
                    calls[name.start] = (name.text, 0 if empty else commas + 1)
        elif kind == TokenType.COMMA and stack:
            stack[-1][1] += 1
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


def check_arguments(tokens: list[Token], tree: exp.Expr) -> None:
    """Raise ``unsupported_sql`` when a known function's node holds fewer arguments than
    its call in the text passed. Needs the parser's positions (before
    ``parse.forget_positions``). Reads only the query text; refuses before any charge."""
    calls = _argument_counts(tokens)
    if not calls:
        return
    seen: set[int] = set()
    for node in tree.walk():
        meta = node._meta
        start = meta.get("start") if meta else None
        if start is None or start in seen or start not in calls:
            continue
        seen.add(start)  # the outermost node at a call's position is the one built for it
        if isinstance(node, exp.Anonymous) or not isinstance(node, exp.Func | exp.Case | exp.Binary):
            continue
        name, given = calls[start]
        if _held(node) < given:
            raise DPSQLError(
                "unsupported_sql",
                f"{name}() was given {given} arguments; in this dialect dpsql reads "
                f"only {_held(node)} of them and would answer a different query",
                f"remove the extra arguments of {name}() (a time zone: convert the "
                "column with AT TIME ZONE first, where the dialect allows it)",
            )
