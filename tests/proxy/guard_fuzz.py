"""A seeded generator of nested row-level expressions over the table of
tests/proxy/test_guarded_arithmetic.py, for fuzzing the guards against TRY.

Integer, HUGEINT and DECIMAL arithmetic, choices among mixed types, comparisons, dates
moved by intervals and days, interval sums and products, date differences and
truncations, substrings with computed bounds and casts, nested up to six levels, with
subexpressions repeated within one expression (a guard that moved a shared node, or
remembered a stale kind, shows there). Constants that raise on every row (an interval
or a substring bound out of range whatever the row) are left out: every row falls back
alike, and the guards leave constants to DuckDB on purpose."""

from __future__ import annotations

import random
from collections.abc import Callable

import sqlglot
from sqlglot import exp

INT_COLUMNS = ("i", "b", "s", "h")
DECIMAL_COLUMNS = ("m", "w", "n")
COLUMNS = frozenset((*INT_COLUMNS, *DECIMAL_COLUMNS, "dt", "ts", "d"))
INT_LITERALS = (
    "0", "1", "-1", "2", "3", "7", "1000", "46341", "2147483647", "9223372036854775807",
    "-9223372036854775808",
)
DECIMAL_LITERALS = ("1.5", "0.05", "9999999999999999.99", "2.0", "-0.5")
UNITS = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "MICROSECOND", "WEEK", "QUARTER", "DECADE")
TEXT_UNITS = ("' days'", "' hours'", "' months'", "' years'", "' microseconds'")
PARTS = ("year", "month", "day", "hour", "dow", "doy", "quarter", "minute")
TRUNCATIONS = ("'month'", "'year'", "'day'", "'hour'", "'week'")


def _reads_a_row(sql: str) -> bool:
    tree = sqlglot.parse_one(sql, read="duckdb")
    return any(c.name in COLUMNS for c in tree.find_all(exp.Column))


class Expressions:
    """``Expressions(seed).next()``: one expression, the same for the same seed.

    With ``choices=False`` no CASE, IF, COALESCE, LEAST, GREATEST, IN, BETWEEN, IS
    DISTINCT FROM, AND or OR: nothing that turns a NULL operand into a value. The
    guards make NULL the operation that would raise, where TRY makes the whole
    expression NULL, so only such expressions give TRY's value (or NULL) on every
    row."""

    def __init__(self, seed: int, *, choices: bool = True):
        self.random = random.Random(seed)
        self.choices = choices
        self.pool: dict[str, list[str]] = {}

    def next(self) -> str:
        self.pool = {}
        kind = self.pick(("int", "int", "dec", "dec", "ts", "dt", "iv", "text", "bool", "double"))
        return self.make(kind, self.random.randint(1, 6))

    def pick(self, options: tuple[str, ...]) -> str:
        return self.random.choice(options)

    def make(self, kind: str, depth: int) -> str:
        pool = self.pool.setdefault(kind, [])
        if pool and self.random.random() < 0.25:
            return self.random.choice(pool)  # the same value again, elsewhere
        made: str = getattr(self, kind)(depth)
        if depth > 0:
            pool.append(made)
        return made

    def leaf(self, depth: int) -> bool:
        return depth <= 0 or self.random.random() < 0.15

    def from_row(self, depth: int) -> str:
        """An integer that reads the row (a constant amount or bound may raise alike on
        every row)."""
        made = self.make("int", depth)
        return made if _reads_a_row(made) else self.pick(INT_COLUMNS)

    def choice(self, kind: str, depth: int) -> str | None:
        if not self.choices or self.random.random() < 0.6:
            return None
        one: Callable[[], str] = lambda: self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"CASE WHEN {self.make('bool', depth - 1)} THEN {one()} ELSE {one()} END",
                lambda: f"IF({self.make('bool', depth - 1)}, {one()}, {one()})",
                lambda: f"{self.pick(('COALESCE', 'LEAST', 'GREATEST'))}({one()}, {one()})",
            )
        )()

    def int(self, depth: int) -> str:
        if self.leaf(depth):
            return self.pick(INT_COLUMNS) if self.random.random() < 0.75 else self.pick(INT_LITERALS)
        chosen = self.choice("int", depth)
        if chosen is not None:
            return chosen
        one = lambda kind="int": self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"({one()} {self.pick(('+', '-', '*', '//', '%'))} {one()})",
                lambda: f"(- {one()})",
                lambda: f"ABS({one()})",
                lambda: f"ROUND({one()}, -{self.random.randint(1, 3)})",
                lambda: f"CAST({one(self.pick(('int', 'dec', 'double')))} AS "
                f"{self.pick(('SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT'))})",
                lambda: f"date_diff({self.pick(('day', 'month', 'year', 'microsecond', 'hour'))!r}, "
                f"{one(self.pick(('dt', 'ts')))}, {one(self.pick(('dt', 'ts')))})",
                lambda: f"EXTRACT({self.pick(PARTS)} FROM {one(self.pick(('dt', 'ts')))})",
                lambda: f"LENGTH({one('text')})",
                lambda: f"SIGN({one()})",
                lambda: f"({one()} {self.pick(('+', '*', '-'))} {self.pick(INT_LITERALS)})",
            )
        )()

    def dec(self, depth: int) -> str:
        if self.leaf(depth):
            return self.pick(DECIMAL_COLUMNS) if self.random.random() < 0.75 else self.pick(DECIMAL_LITERALS)
        chosen = self.choice(self.pick(("dec", "dec", "int")), depth)
        if chosen is not None:
            return chosen
        one = lambda kind="dec": self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"({one()} {self.pick(('+', '-', '*', '%', '//'))} {one(self.pick(('dec', 'int')))})",
                lambda: f"(- {one()})",
                lambda: f"ABS({one()})",
                lambda: f"ROUND({one()}, {self.pick(('-1', '-2', '0', '1', '2', '-37', '-20'))})",
                lambda: f"{self.pick(('FLOOR', 'CEIL', 'TRUNC'))}({one()})",
                lambda: f"CAST({one(self.pick(('int', 'dec')))} AS {self.pick(('DECIMAL(18, 2)', 'DECIMAL(38, 0)', 'DECIMAL(9, 4)', 'DECIMAL(38, 10)', 'DECIMAL(4, 1)'))})",
                lambda: f"({one('int')} * {one()})",
            )
        )()

    def double(self, depth: int) -> str:
        if self.leaf(depth):
            return "d"
        one = lambda kind: self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"({one('int')} / {one(self.pick(('int', 'dec', 'double')))})",
                lambda: f"EXTRACT(epoch FROM {one(self.pick(('dt', 'ts')))})",
                lambda: f"CAST({one(self.pick(('int', 'dec')))} AS DOUBLE)",
                lambda: f"({one('double')} * {one('int')})",
            )
        )()

    def dt(self, depth: int) -> str:
        if self.leaf(depth):
            return "dt" if self.random.random() < 0.8 else "DATE '2024-02-29'"
        chosen = self.choice("dt", depth)
        if chosen is not None:
            return chosen
        one = lambda kind="dt": self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"({one()} + {one('int')})",
                lambda: f"({one()} - {one('int')})",
                lambda: f"({one('int')} + {one()})",
                lambda: f"CAST({one('ts')} AS DATE)",
            )
        )()

    def ts(self, depth: int) -> str:
        if self.leaf(depth):
            return "ts" if self.random.random() < 0.8 else "TIMESTAMP '2024-02-29 12:00:00'"
        chosen = self.choice(self.pick(("ts", "dt")), depth)
        if chosen is not None:
            return chosen
        one = lambda kind="ts": self.make(kind, depth - 1)  # noqa: E731
        date = lambda: one(self.pick(("ts", "dt")))  # noqa: E731
        return self.random.choice(
            (
                lambda: f"({date()} {self.pick(('+', '-'))} INTERVAL ({self.from_row(depth - 1)}) {self.pick(UNITS)})",
                lambda: f"({date()} {self.pick(('+', '-'))} {one('iv')})",
                lambda: f"({one('iv')} + {date()})",
                lambda: f"date_trunc({self.pick(TRUNCATIONS)}, {date()})",
                lambda: f"CAST({one('dt')} AS TIMESTAMP)",
                lambda: f"({date()} + INTERVAL {self.random.randint(1, 30)} {self.pick(UNITS)})",
                lambda: f"({date()} - CAST({one('text')} || {self.pick(TEXT_UNITS)} AS INTERVAL))",
            )
        )()

    def iv(self, depth: int) -> str:
        if self.leaf(depth):
            return f"INTERVAL {self.random.randint(1, 30)} {self.pick(UNITS)}"
        chosen = self.choice("iv", depth)
        if chosen is not None:
            return chosen
        one = lambda kind="iv": self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"INTERVAL ({self.from_row(depth - 1)}) {self.pick(UNITS)}",
                lambda: f"CAST(CAST({one('int')} AS VARCHAR) || {self.pick(TEXT_UNITS)} AS INTERVAL)",
                lambda: f"({one()} {self.pick(('+', '-'))} {one()})",
                lambda: f"({one()} * {one(self.pick(('int', 'double')))})",
                lambda: f"({one('int')} * {one()})",
                lambda: f"(- {one()})",
                lambda: f"({one('ts')} - {one('ts')})",
            )
        )()

    def text(self, depth: int) -> str:
        if self.leaf(depth):
            return f"CAST({self.pick((*INT_COLUMNS, *DECIMAL_COLUMNS, 'dt', 'ts'))} AS VARCHAR)"
        one = lambda kind="text": self.make(kind, depth - 1)  # noqa: E731
        return self.random.choice(
            (
                lambda: f"SUBSTRING({one()}, {self.from_row(depth - 1)}, {self.from_row(depth - 1)})",
                lambda: f"SUBSTRING({one()}, {self.from_row(depth - 1)})",
                lambda: f"({one()} || {one()})",
                lambda: f"CAST({one(self.pick(('int', 'dec', 'dt', 'ts', 'iv')))} AS VARCHAR)",
            )
        )()

    def bool(self, depth: int) -> str:
        if self.leaf(depth):
            return f"({self.pick(INT_COLUMNS)} {self.pick(('=', '>', '<'))} {self.pick(INT_LITERALS)})"
        kind = self.pick(("int", "dec", "dt", "ts", "int", "iv"))
        one = lambda k=kind: self.make(k, depth - 1)  # noqa: E731
        other = (
            self.pick(("int", "dec")) if kind in ("int", "dec")
            else self.pick(("dt", "ts")) if kind in ("dt", "ts") else kind
        )
        forms = [
            lambda: f"({one()} {self.pick(('=', '<>', '<', '>='))} {one(other)})",
            lambda: f"(CAST({one('int')} AS VARCHAR) = {one(self.pick(('int', 'dt')))})",
        ]
        if self.choices:
            forms += [
                lambda: f"({one()} IS DISTINCT FROM {one(other)})",
                lambda: f"({one()} IN ({one()}, {one()}))",
                lambda: f"({one()} BETWEEN {one()} AND {one()})",
                lambda: f"({one('bool')} {self.pick(('AND', 'OR'))} NOT {one('bool')})",
            ]
        return self.random.choice(forms)()
