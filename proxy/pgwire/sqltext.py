"""Lexical helpers over PostgreSQL SQL text: split a simple-query batch on semicolons,
and apply rewrites only outside string literals, quoted identifiers and comments.

The splitter keeps each statement's original text (a parser would re-render it), so
the engine sees what the analyst typed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator


def _segments(sql: str) -> Iterator[tuple[bool, str]]:
    """(is_code, text) pieces: code, or a literal/quoted identifier/comment kept as is."""
    i, n, start = 0, len(sql), 0
    while i < n:
        c = sql[i]
        end = -1
        if c in ("'", '"'):
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # doubled quote
                        j += 2
                        continue
                    break
                if c == "'" and sql[j] == "\\" and i > 0 and sql[i - 1] in "eE":
                    j += 2  # E'...' escape string
                    continue
                j += 1
            end = min(j + 1, n)
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            end = n if j < 0 else j
        elif c == "/" and sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            end = j
        elif c == "$" and (i + 1 >= n or not sql[i + 1].isdigit()):  # $1 is a parameter
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            if j < n and sql[j] == "$":
                tag = sql[i : j + 1]
                close = sql.find(tag, j + 1)
                end = n if close < 0 else close + len(tag)
        if end < 0:
            i += 1
            continue
        if start < i:
            yield True, sql[start:i]
        yield False, sql[i:end]
        start = i = end
    if start < n:
        yield True, sql[start:]


def outside_literals(sql: str, change: Callable[[str], str]) -> str:
    """``change`` applied to the code between literals, identifiers and comments."""
    return "".join(change(text) if code else text for code, text in _segments(sql))


def split_statements(sql: str) -> list[str]:
    """A simple-query batch as its statements, each with its original text; empty
    statements (``;;``) are dropped, whitespace-only input gives ``[]``."""
    out: list[str] = []
    current: list[str] = []
    for code, text in _segments(sql):
        if not code:
            current.append(text)
            continue
        parts = text.split(";")
        for part in parts[:-1]:
            current.append(part)
            out.append("".join(current))
            current = []
        current.append(parts[-1])
    out.append("".join(current))
    return [s.strip() for s in out if _has_code(s)]


def _has_code(sql: str) -> bool:
    return any(code and text.strip() for code, text in _segments(sql))


_PARAMETER = re.compile(r"\$(\d+)(?=\S)")


def spaced_parameters(sql: str) -> str:
    """``$n`` followed by a space wherever code follows it directly: sqlglot's tokenizer
    reads ``$1,$2`` (as psycopg writes ``IN (%s,%s)``) as a dollar-quoted string and
    fails, where PostgreSQL reads two parameters."""
    if "$" not in sql:
        return sql
    return outside_literals(sql, lambda text: _PARAMETER.sub(r"$\1 ", text))


def parameter_numbers(sql: str) -> list[int]:
    """The n of every ``$n`` placeholder in the code of ``sql``."""
    return [
        int(match.group(1))
        for code, text in _segments(sql)
        if code
        for match in re.finditer(r"\$(\d+)", text)
    ]


def strip_comments(sql: str) -> str:
    """The statement without comments (for keyword matching on its first word)."""
    return "".join(
        text if code or not text.startswith(("--", "/*")) else " " for code, text in _segments(sql)
    ).strip()
