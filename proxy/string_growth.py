"""How much string work a row-level expression can do per row, bounded before any charge.

A row-level expression runs on every row of every person before the per-person caps
apply (a WHERE clause sees all of a person's rows). Most allowed functions cost time
linear in their input, but ``REPLACE`` and concatenation can build strings that grow
with nesting: ``replace(m, 'a', m)`` squares a value's length, and three CTEs of it
turn one 40-character value into 94 million characters. Pinned to one person with
``WHERE user_id = <id>``, such a query ran its core in 330 ms with the person and 2 ms
without, and one more level reaches the time limit: a timeout that exists only when
the person does (issue #10 §3: the time limit must not be reachable through one
person's rows).

The rule bounds every string an expression makes on a row by ``a·L + b``, where ``L``
is the length of the longest input value and ``a``, ``b`` come from the expression's
shape alone: a column is ``L``, a literal its length, a concatenation the sum of its
parts, ``REPLACE(x, p, r)`` with a constant ``r`` multiplies ``x`` by at most
``max(1, |r| / |p|)``. A row-dependent replacement (``r`` not a constant) multiplies a
value's length by another's and is refused. The row's total string work (the sum over
every row-dependent string the expression makes) must stay within ``MAX_FACTOR · L +
MAX_CONSTANT``, which ordinary cleaning expressions (``lower(trim(name))``, ``'EU-' ||
region``, ``replace(phone, '-', '')``) never approach.
"""

from __future__ import annotations

import math
import re
import re._parser as _re_parser  # Python 3.11+: the parser behind re.compile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from proxy.allowlist import COMPARISONS
from proxy.errors import DPSQLError, position_of, unsupported

#: the row's string work may be at most this many times its longest input value ...
MAX_FACTOR = 64
#: ... plus this many characters of constants copied into row-dependent strings
MAX_CONSTANT = 65_536
#: the strings a row's expressions build may total at most this many times its longest
#: input value: DuckDB keeps them outside its memory_limit (a probe, 2026-12-06: an
#: allowed 60-fold concat over one person's 24 MB of text took 1.3 GB past a 256 MB
#: limit, on D only; RELIABILITY.md, "Memory past the limit")
MAX_BUILT_FACTOR = 8
#: the length of a non-text value rendered as text (a number, date or timestamp)
RENDERED = 64
#: the most characters of constants a UNION ALL arm's column may carry to the outer query
MAX_CARRIED = 1_024
#: copies of one column's value the query's stored strings (grouping keys, DISTINCT
#: arguments, join keys) may hold per row, together (see check_stored_strings)
MAX_STORED_COPIES = 4
#: the largest estimated compiled size of a regular expression (see regex_size)
MAX_REGEX_SIZE = 4_096
#: a pattern of this estimated size costs about one pass over its text
REGEX_UNIT = 64
# Casts whose cost is the square of the text's length (DuckDB's arbitrary-size integer).
QUADRATIC_TYPES = frozenset({"VARINT", "BIGNUM"})
# Functions that scan their first (text) argument once per row (length too: it counts a
# value's characters, and PostgreSQL detoasts the value for each call: 300 length terms
# timed out after the charge on one person's text, a review, 2026-12-06).
SEARCHES = (exp.StrPosition, exp.Contains, exp.StartsWith, exp.EndsWith, exp.Length)
# Ambiguous positions up to this many keep a regular expression on RE2's DFA (measured
# here: 12 repeated classes matched at 58 plain passes, 16 at 670; see _regexp).
DFA_SAFE_POSITIONS = 12


@dataclass(frozen=True)
class Growth:
    """A string of length at most ``factor · L + constant`` (L: longest input value)."""

    factor: float
    constant: float

    def __add__(self, other: Growth) -> Growth:
        return Growth(self.factor + other.factor, self.constant + other.constant)

    def scaled(self, by: float) -> Growth:
        return Growth(self.factor * by, self.constant * by)

    def widest(self, other: Growth) -> Growth:
        return Growth(max(self.factor, other.factor), max(self.constant, other.constant))

    @property
    def row_dependent(self) -> bool:
        return self.factor > 0


ZERO = Growth(0.0, 0.0)
ZERO_NODE = exp.Literal.string("")  # an empty separator (concat_ws with no arguments)
# Functions whose string is at most their first argument's.
SHORTENING = (exp.Lower, exp.Upper, exp.Trim, exp.Left, exp.Right, exp.Substring)
PASS_THROUGH = (*SHORTENING, exp.Paren, exp.Try)
#: the most characters strftime writes for one character of its format ('%c', '%A')
STRFTIME_WIDTH = 32
BRANCHES = (exp.Case, exp.If, exp.Coalesce, exp.Least, exp.Greatest)
# The nodes that build a new string on each row (a column or a branch only passes one on).
BUILDERS = (
    exp.Concat,
    exp.DPipe,
    exp.Replace,
    exp.RegexpReplace,
    *SHORTENING,
    exp.Cast,
    exp.TryCast,
)


class _Walk:
    """One expression's strings: the growth of each node, the row's total work, and the
    strings it builds. Every copy of a builder or match is counted, wherever it stands.
    A repeat in a filter runs once per copy (DuckDB evaluates each conjunct's own: 130
    copies of one LIKE in separate conjuncts, counted as one, ran 130 times and timed
    out after the charge on one person's 3M-character row, a probe, 2026-12-06); so do
    the branches of a CASE and the arguments of separate aggregates, which no engine
    computes once (a probe of the PostgreSQL engine, 2026-12-06: a CASE of 30 branches
    repeating one LIKE took 8 times one copy on DuckDB and timed out after the charge on
    PostgreSQL, where the core substitutes an argument into every aggregate reading it;
    tests/engines/test_postgres_probe_neighbours.py). The engines' own repeats in the
    SQL they run are counted there (:func:`check_rendered_rows`)."""

    def __init__(self, *, rendered: bool = False) -> None:
        # An engine's rendered SQL (check_rendered_rows): its regular expressions are the
        # forms' own fixed patterns (TRY_CAST's number syntax; an analyst's pattern was
        # checked, and is refused on PostgreSQL), each counted as one pass.
        self.rendered = rendered
        # (sqlglot's nodes compare and hash by structure)
        self.aggregates: set[exp.Expr] = set()
        self.work = ZERO
        self.built = ZERO  # the strings the builders make (memory, beside the work)
        self.longest = 0.0  # the longest constant string past MAX_CONSTANT, if any

    def growth(self, node: exp.Expr) -> Growth:
        if isinstance(node, exp.AggFunc):
            # The rewrite computes an aggregate written twice (in the select list and in
            # HAVING or ORDER BY, say) as one statistic: its argument runs once.
            if node in self.aggregates:
                return ZERO
            self.aggregates.add(node)
        if isinstance(node, (exp.Group, exp.Order)) and isinstance(node.parent, exp.Select):
            # A GROUP BY or ORDER BY item written as in the select list is the same key,
            # computed once on the rows (or ordered on the released ones).
            listed = {e.unalias() for e in node.parent.expressions}
            for item in node.expressions:
                key = item.this if isinstance(item, exp.Ordered) else item
                if key not in listed:
                    self.growth(key)
            return ZERO
        out = self._growth(node)
        # A builder's string is per-row work even when made of constants: a CASE on the
        # row can hand one person's rows a constant that other rows never see.
        # (a cast to a number or date builds nothing: its ``out`` is ZERO)
        if isinstance(node, BUILDERS):
            self.work = self.work + out
            self.built = self.built + out
        if out.constant > MAX_CONSTANT:
            self.longest = max(self.longest, out.constant)
        return out

    def _growth(self, node: exp.Expr) -> Growth:
        if isinstance(node, exp.Column):
            return Growth(1.0, 0.0)
        if isinstance(node, exp.Literal):
            return Growth(0.0, float(len(node.this))) if node.is_string else ZERO
        if isinstance(node, exp.ConcatWs):
            # concat_ws(sep, a, b, ...) writes its separator between every two parts:
            # counted once, a 32,000-character separator and 1,400 parts made 45 MB on
            # each of one person's rows (a probe, 2026-12-02).
            separator, *parts = node.expressions or [ZERO_NODE]
            total = self.growth(separator).scaled(max(0, len(parts) - 1))
            for part in parts:
                total = total + self.growth(part)
            return total
        if isinstance(node, _ROW_COMPARED) and _compares_rows(node):
            return self._row_comparison(node)
        if isinstance(node, exp.Tuple):
            # A row constructor holds each of its parts (it may be stored as a DISTINCT
            # argument): ``COUNT(DISTINCT (body, body, ...))`` counted as no text at all
            # stored 60 copies of one person's documents (a probe, 2026-12-06). Where a
            # tuple may stand at all is _check_row_constructor's.
            total = ZERO
            for part in node.expressions:
                total = total + self.growth(part)
            return total
        if isinstance(node, (exp.Concat, exp.DPipe)):
            parts = (
                node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
            )
            total = ZERO
            for part in parts:
                total = total + self.growth(part)
            return total
        if isinstance(node, exp.Replace):
            return self._replace(node)
        if isinstance(node, exp.RegexpLike):
            return self._regexp(node)
        if isinstance(node, exp.RegexpReplace):
            return self._regexp_replace(node)
        if isinstance(node, (exp.Like, exp.ILike)):
            return self._like(node)
        if isinstance(node, exp.Trim) and node.expression is not None:
            return self._trim(node)
        if isinstance(node, exp.TimeToStr):
            # strftime: a format fixed by the text (DuckDB refuses one from the data when
            # it binds); each of its characters writes at most STRFTIME_WIDTH.
            self.growth(node.this)
            form = node.args.get("format")
            written = self.growth(form) if form is not None else ZERO
            return written.scaled(STRFTIME_WIDTH) + Growth(0.0, RENDERED)
        if isinstance(node, PASS_THROUGH):
            for arg in _arguments(node)[1:]:
                self.growth(arg)
            return self.growth(node.this)
        if isinstance(node, BRANCHES):
            widest = ZERO
            for arg in _arguments(node):
                widest = widest.widest(self.growth(arg))
            return widest
        if isinstance(node, (exp.Cast, exp.TryCast)):
            if node.to.sql("duckdb").upper() in QUADRATIC_TYPES:
                # Text to an arbitrary-precision integer costs its length squared, and
                # DuckDB cannot interrupt it within a row (a probe, 2026-12-02: 6.5 s on
                # one person's 1.2-million-digit value against 4 ms without it).
                raise unsupported(
                    f"a cast to {node.to.sql('duckdb')} is not answered: its cost grows "
                    "with the square of a value's length",
                    "cast to BIGINT, HUGEINT, DECIMAL(38, s) or DOUBLE",
                    position_of(node),
                )
            if not _to_text(node):
                # A cast to a number, date or timestamp reads its input once and builds
                # no string (a chain of 24 date casts is no 24-fold string). The input is
                # walked first: ``self.work + self.growth(...)`` read the total before
                # the walk and dropped what the input added (a 52-character LIKE under
                # a cast to a number counted nothing: the PostgreSQL probe, 2026-12-06).
                read = self.growth(node.this)
                self.work = self.work + read
                return ZERO
            # A cast to text is at most its input (a constant one too: a CASE can hand
            # it to one person's rows) plus a rendered value.
            return self.growth(node.this) + Growth(0.0, RENDERED)
        if isinstance(node, SEARCHES):
            # A search reads its text once (DuckDB's search stayed linear on adversarial
            # needles): counted like a LIKE with a short pattern. Uncounted, 250 strpos
            # terms on one person's 4-million-character value timed out (a probe).
            text = self.growth(node.this)
            for arg in _arguments(node)[1:]:
                self.growth(arg)
            self.work = self.work + text
            return ZERO
        # Every other allowed node yields a number, a boolean or a date (whose text form
        # is at most RENDERED long when cast); its string arguments still do their work.
        for arg in _arguments(node):
            self.growth(arg)
        return ZERO

    def _row_comparison(self, node: exp.Expr) -> Growth:
        """A comparison of row constructors reads each field of each side (DuckDB folds
        ``body = body`` but not ``(body, body) = (body, body)``): 480 fields compared
        with themselves, or a pair against 390 pairs in an IN list, timed out after the
        charge on one person's 3M-character rows (a review, 2026-12-06). Counted as a
        pass over every field on either side, for each item of an IN list."""
        if isinstance(node, exp.In):
            left = self.growth(node.this)
            items = [self.growth(item) for item in node.expressions]
            read = left.scaled(max(1, len(items)))
            for item in items:
                read = read + item
        else:
            read = self.growth(node.this) + self.growth(node.expression)
        self.work = self.work + read
        return ZERO

    def _replace(self, node: exp.Replace) -> Growth:
        subject = self.growth(node.this)
        pattern = node.expression
        replacement = node.args.get("replacement")
        by = self.growth(replacement) if replacement is not None else ZERO
        if pattern is not None:
            self.growth(pattern)
        if by.row_dependent:
            raise unsupported(
                "REPLACE with a replacement that depends on the row is not answered: it "
                "can multiply a value's length by another's on every row",
                "replace with a constant string, e.g. replace(phone, '-', '')",
                position_of(node),
            )
        shortest = (
            len(pattern.this)
            if isinstance(pattern, exp.Literal) and pattern.is_string and pattern.this
            else 1
        )
        return subject.scaled(max(1.0, by.constant / shortest))

    def _regexp_replace(self, node: exp.RegexpReplace) -> Growth:
        """regexp_replace(x, p, r, 'g'): p may match between every two characters ('' or
        '.'), so x grows by up to |r| per character; r must be a constant without
        back-references (\\0 copies the match)."""
        subject = self.growth(node.this)
        for arg in _arguments(node)[1:]:
            self.growth(arg)
        replacement = node.args.get("replacement")
        if not (
            replacement is None
            or (
                isinstance(replacement, exp.Literal)
                and replacement.is_string
                and "\\" not in replacement.this
            )
        ):
            raise unsupported(
                "regexp_replace with a replacement that is not a constant without "
                "back-references is not answered",
                "replace with a string literal",
                position_of(node),
            )
        width = float(len(replacement.this)) if replacement is not None else 0.0
        return subject.scaled(1.0 + width) + Growth(0.0, width)

    def _regexp(self, node: exp.RegexpLike) -> Growth:
        """RE2 matches in time about (text length) x (the compiled pattern's size), and
        a counted repetition copies its body: ``(a|aa){1,1000}`` compiles to a thousand
        copies, which made one person's 8,000-character rows take 0.2 s each (a probe,
        2026-12-02). The pattern must be a literal of bounded size; the matching is
        counted as work on the text, scaled by that size."""
        text = self.growth(node.this)
        for arg in _arguments(node)[1:]:
            self.growth(arg)
        pattern = node.expression
        if self.rendered:
            self.work = self.work + text
            return ZERO
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise unsupported(
                "a regular expression must be a literal: a pattern read from the data "
                "costs time that depends on a person's values",
                "write the pattern as a string literal, e.g. regexp_matches(model, '^gpt')",
                position_of(node),
            )
        size = regex_size(pattern.this)
        if size > MAX_REGEX_SIZE:
            raise unsupported(
                f"the regular expression's compiled size is estimated at {size:,.0f} "
                f"(its length times its counted repetitions); the limit is {MAX_REGEX_SIZE:,}",
                "use shorter patterns and small repetition counts ({1,5} rather than {1,1000})",
                position_of(node),
            )
        # Many ambiguous positions blow up RE2's DFA (``a[ab]{16}c`` needs 2^16 states),
        # which then matches with its NFA: measured here at 670 to 1,000 times a plain
        # pass over the text, against about 20 for ordinary patterns (a probe,
        # 2026-12-02: six such patterns timed out on one person's 3-million-character
        # value, 0.15 s without it). Such a pattern is refused.
        positions = ambiguous_positions(pattern.this)
        if positions > DFA_SAFE_POSITIONS:
            found = (
                "a syntax dpsql cannot analyse"
                if math.isinf(positions)
                else f"{positions:,.0f} repeated character classes or alternatives in a row"
            )
            raise unsupported(
                f"the regular expression has {found}; the limit is {DFA_SAFE_POSITIONS} "
                "(beyond it, matching can fall back to a matcher hundreds of times slower)",
                "match fewer repeated classes, e.g. [0-9]{4} rather than [0-9]{16}, or "
                "compare a substring",
                position_of(node),
            )
        self.work = self.work + text.scaled(size / REGEX_UNIT)
        return ZERO

    def _like(self, node: exp.Like | exp.ILike) -> Growth:
        """LIKE matches a pattern of length P against a text of length T in up to T x P
        steps; with a pattern taken from the row, DuckDB builds it per row and a
        person's long value made one row cost its length squared (a probe, 2026-12-02:
        6.5 s against 3 ms). The pattern must be fixed by the text (a constant, or a
        CASE of constants); its length scales the work counted on the text."""
        text = self.growth(node.this)
        pattern = self.growth(node.expression)
        escape = node.args.get("escape")
        if escape is not None:
            self.growth(escape)
        if pattern.row_dependent:
            raise unsupported(
                "a LIKE pattern built from the data is not answered: matching it costs "
                "its length times the text's on every row",
                "match a constant pattern, e.g. model LIKE '%mini%', or use contains() / "
                "starts_with()",
                position_of(node),
            )
        self.work = self.work + text.scaled(_like_passes(node.expression, pattern))
        return ZERO

    def _trim(self, node: exp.Trim) -> Growth:
        """TRIM(x, chars) looks each trimmed character up in ``chars`` one by one on
        PostgreSQL and Spark: a person's long value against a long set cost 10 s against
        0.2 s (a probe, 2026-12-02). The set must be fixed by the text; its length
        scales the work counted on the value."""
        text = self.growth(node.this)
        chars = self.growth(node.expression)
        if chars.row_dependent:
            raise unsupported(
                "TRIM with characters read from the data is not answered: its cost is "
                "their number times the value's length on every row",
                "trim constant characters, e.g. trim(model, ' -')",
                position_of(node),
            )
        # one comparison per character of the set for each trimmed character
        self.work = self.work + text.scaled(max(1.0, chars.constant))
        return text


_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def _positions(items: Any) -> float:
    """The ambiguous positions of parsed regex items: character classes, ``.`` and
    alternatives, each repeated as often as its counted repetition allows (a loop such
    as ``*`` counts its body once: it adds no positions to remember)."""
    total = 0.0
    for op, arg in items:
        name = str(op)
        if name in ("IN", "ANY", "NOT_LITERAL", "CATEGORY"):
            total += 1
        elif name == "BRANCH":
            total += 1 + max((_positions(b) for b in arg[1]), default=0.0)
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            total += _positions(arg[-1])
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            count = low if high == _re_parser.MAXREPEAT else high
            total += _positions(body) * max(int(count), 1)
        if total > 1e9:
            break
    return total


def ambiguous_positions(pattern: str) -> float:
    """How many positions of ``pattern`` a DFA must track at once, at most (parsed with
    Python's parser, which reads RE2's common syntax; a pattern it cannot read counts
    as unbounded, so that it is refused rather than guessed at)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "possible nested set": RE2's [[:alpha:]]
            return _positions(_re_parser.parse(pattern))
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return math.inf


def regex_size(pattern: str) -> float:
    """An upper estimate of a pattern's compiled size: its length times the product of
    its counted repetitions' largest counts (nested or not; an open ``{n,}`` counts n)."""
    size = float(max(len(pattern), 1))
    for low, high in _REPEAT.findall(pattern):
        size *= max(int(high or low or 1), 1)
        if size > 1e12:
            break
    return size


def check_stored_strings(
    select: exp.Expr, is_text: Callable[[exp.Column], bool] = lambda _column: True
) -> None:
    """Refuse, before any charge, a query whose stored strings hold more than
    :data:`MAX_STORED_COPIES` copies of one column's value per row.

    A grouping key, a DISTINCT argument or a join key is hashed and kept: the engine
    holds one person's distinct values, grown, in state that does not all spill. The
    64-fold growth :func:`check_string_growth` allows for evaluated strings made such a
    key of 60 copies of a text column run out of memory after the charge on one
    person's 48 MB of text (a probe, 2026-12-06; RELIABILITY.md, "Memory past the
    limit", measures what one copy takes). Each stored expression's growth counts
    against every column it reads (a bound: ``region || '-' || plan`` counts two copies
    of each), summed over the query's stored expressions.

    ``is_text``: whether a column holds text (or may: unknown is text); only text
    columns count.

    Precondition: ``select`` passed :func:`check_string_growth`. Claim: per row, the
    engine stores at most MAX_STORED_COPIES copies of any text column's value, plus
    constants and rendered non-text values."""
    copies: dict[str, float] = {}
    for node in _stored(select):
        grown = growth_of(node)
        if not grown.row_dependent:
            continue
        # (a number or date read as text is at most RENDERED long: not a copy)
        texts = {c.sql() for c in node.find_all(exp.Column) if is_text(c)}
        for column in sorted(texts):
            copies[column] = copies.get(column, 0.0) + grown.factor
            if copies[column] > MAX_STORED_COPIES:
                raise DPSQLError(
                    "unsupported_sql",
                    f"the query's grouping keys, DISTINCT arguments and join keys hold up "
                    f"to {copies[column]:.3g} copies of {column} per row; the limit is "
                    f"{MAX_STORED_COPIES} (each is kept in memory for every row)",
                    "group by the column itself, or by fewer values built from it",
                    position_of(node),
                )


def _stored(select: exp.Expr) -> list[exp.Expr]:
    """The expressions the engine hashes and keeps per row: grouping keys, DISTINCT
    arguments of aggregates, and the sides of join equalities."""
    out: list[exp.Expr] = []
    for group in select.find_all(exp.Group):
        out.extend(group.expressions)
    for distinct in select.find_all(exp.Distinct):
        if isinstance(distinct.parent, exp.AggFunc):
            out.extend(distinct.expressions)
    for join in select.find_all(exp.Join):
        on = join.args.get("on")
        if on is not None:
            for equal in on.find_all(exp.EQ, exp.NullSafeEQ):  # (IS NOT DISTINCT FROM too)
                out.extend((equal.this, equal.expression))
    return out


# Where a row constructor ``(a, b)`` is answered: compared (``(a, b) = (1, 2)``, ``IN``),
# counted (``COUNT(DISTINCT (a, b))``) or a row of constants (VALUES).
_ROW_COMPARED: tuple[type[exp.Expr], ...] = (exp.In, *COMPARISONS)
_ROW_PLACES: tuple[type[exp.Expr], ...] = (*_ROW_COMPARED, exp.Values)


def _to_text(cast: exp.Cast | exp.TryCast) -> bool:
    """Whether a cast makes a string (text, or a type not known here)."""
    to = cast.to
    return not (
        isinstance(to, exp.DataType)
        and to.this is not exp.DataType.Type.USERDEFINED
        and to.is_type(*exp.DataType.NUMERIC_TYPES, *exp.DataType.TEMPORAL_TYPES, "boolean")
    )


def _compares_rows(node: exp.Expr) -> bool:
    """Whether a comparison or IN has a row constructor on a side."""
    sides = [node.this, *(node.expressions if isinstance(node, exp.In) else [node.expression])]
    return any(
        isinstance(side, exp.Expr) and isinstance(side.unnest(), exp.Tuple) for side in sides
    )


def _check_row_constructor(row: exp.Tuple) -> None:
    """Refuse a row constructor anywhere but a comparison, an IN list, a DISTINCT
    argument or VALUES. Cast to text (or handed to a text function, which casts it), a
    STRUCT is written with its fields quoted and their quotes and backslashes escaped,
    so each nesting level doubles a value's quotes: 21 levels over one person's name of
    3,000 apostrophes ran out of memory after the charge, and a tuple cast escaped every
    string bound (a probe, 2026-12-06)."""
    if row.find(exp.Column) is None:
        return  # constants only: no person's value in it
    place = row.parent
    while isinstance(place, exp.Paren):
        place = place.parent
    if isinstance(place, _ROW_PLACES):
        return
    if isinstance(place, exp.Distinct) and isinstance(place.parent, exp.AggFunc):
        return
    raise unsupported(
        "a row constructor (a, b, ...) is answered only in a comparison, an IN list or "
        "COUNT(DISTINCT (a, b))",
        "compare or count the values; to build text use concat(a, '|', b)",
        position_of(row),
    )


def growth_of(node: exp.Expr) -> Growth:
    """The longest string ``node`` can make on a row (``a·L + b``), its work aside."""
    return _Walk().growth(node)


def _arguments(node: exp.Expr) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    for value in node.args.values():
        if isinstance(value, exp.Expr):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, exp.Expr))
    return out


def _like_passes(node: exp.Expr, pattern: Growth) -> float:
    """Passes over the text a LIKE of this constant pattern may make: one per character
    it must match. Matchers try the pattern's characters at each position after a
    ``%`` (DuckDB's generic matcher for any ``_`` or ILIKE, PostgreSQL's for any
    pattern): a 4,000-character pattern cost 4,000 passes (a probe, 2026-12-06: a timeout
    after the charge on one person's 3-million-character value, where the count here
    had been one pass for each 64 characters). ``%`` matches without a comparison."""
    text = _constant_text(node)
    if text is not None:
        return max(1.0, float(len(text.replace("%", ""))))
    if node.find(exp.Placeholder, exp.Parameter) is not None:
        # A bound parameter reaches this check only in a catalog query (the doors write
        # an engine query's parameters in as constants first): catalog tables hold no
        # person's rows, and their queries have a time limit of their own.
        return 1.0
    return max(1.0, pattern.constant)


def _constant_text(node: exp.Expr) -> str | None:
    """The text of a pattern written of string constants (``'pg/_' || '%'``, a cast of
    one to text), else None (its bound is then its Growth's)."""
    node = node.unnest()
    if isinstance(node, exp.Literal):
        return str(node.this) if node.is_string else None
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(*exp.DataType.TEXT_TYPES):
        return _constant_text(node.this)
    if isinstance(node, (exp.DPipe, exp.Concat)):
        parts = [_constant_text(p) for p in _arguments(node)]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    return None


def check_string_growth(node: exp.Expr, where: str) -> None:
    """Refuse, before any charge, a row-level expression whose string work per row is not
    within ``MAX_FACTOR`` times its longest input value plus ``MAX_CONSTANT`` characters.

    Precondition: ``node`` passed the allowlist (only allowlisted row-level nodes).
    Claim: the accepted expression's per-row work is linear in its input values' length,
    with a constant fixed by the query text, so a person's rows cost time in proportion
    to their number (the residual timing signal RELIABILITY.md measures), never more.
    """
    for row in node.find_all(exp.Tuple):
        _check_row_constructor(row)
    walk = _Walk()
    walk.growth(node)
    if walk.longest:
        raise DPSQLError(
            "unsupported_sql",
            f"the string expressions in {where} build a constant of up to "
            f"{walk.longest:.3g} characters; the limit is {MAX_CONSTANT:,}",
            "use shorter string constants (nested REPLACE of constants multiplies them)",
            position_of(node),
        )
    if walk.built.factor > MAX_BUILT_FACTOR:
        raise DPSQLError(
            "unsupported_sql",
            f"the string expressions in {where} build strings of up to "
            f"{walk.built.factor:.3g} times the longest input value per row; the limit is "
            f"{MAX_BUILT_FACTOR} times (the engine holds the strings a row builds outside "
            "its memory limit, so one person's long values would decide how much memory "
            "a query takes)",
            "build shorter strings: fewer copies of a column in concat, || and REPLACE",
            position_of(node),
        )
    if walk.work.factor > MAX_FACTOR or walk.work.constant > MAX_CONSTANT:
        raise DPSQLError(
            "unsupported_sql",
            f"the string expressions in {where} build up to "
            f"{walk.work.factor:.3g} times the longest input value plus "
            f"{walk.work.constant:.3g} characters per row; the limit is {MAX_FACTOR} times "
            f"plus {MAX_CONSTANT:,} (nested REPLACE and concatenation grow without bound, "
            "and a person's rows would then cost time out of proportion to their number)",
            "build shorter strings: fewer nested REPLACE or || of the same column",
            position_of(node),
        )


def row_level(select: exp.Select) -> bool:
    """A SELECT evaluated once per input row: no GROUP BY, no aggregate or window in its
    own list (not looking into the subqueries it holds)."""
    if select.args.get("group"):
        return False
    stack: list[exp.Expr] = list(select.expressions)
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.AggFunc, exp.Window)):
            return False
        if not isinstance(node, (exp.Select, exp.Subquery)):
            stack.extend(node.iter_expressions())
    return True


#: the nodes whose work grows with a string's length (the engines' renderers read an
#: operand holding one once: proxy/engines/render.py)
STRING_WORK = (
    exp.Like,
    exp.ILike,
    exp.RegexpLike,
    exp.RegexpReplace,
    exp.Replace,
    exp.Concat,
    exp.DPipe,
    exp.ConcatWs,
    exp.TimeToStr,
    exp.Tuple,
    *SHORTENING,
    *SEARCHES,
)


def string_work_in(select: exp.Select) -> bool:
    """Whether the SELECT holds any node that works on a string's length (a search that
    stops at the first: most cores hold none, and their arithmetic chains can be deeper
    than the walk may recurse)."""
    for node in select.find_all(*STRING_WORK, exp.Cast, exp.TryCast):
        if not isinstance(node, (exp.Cast, exp.TryCast)) or _to_text(node):
            return True
    return False


def check_rendered_rows(tree: exp.Expr, engine: str) -> None:
    """Refuse, before any charge, a core whose rendered row-level SELECTs do more string
    work per row than :func:`check_string_growth` allows, counting every copy the
    engine's SQL holds: the clamp of an aggregate's argument writes it three times and
    an engine's guards repeat small operands, where the query had it once (a probe of
    the PostgreSQL engine, 2026-12-06: one LIKE under SUM, AVG, VAR_SAMP and STDDEV ran
    about 100 times a row and timed out after the charge on one person's text).

    Precondition: ``tree`` is the SQL the engine runs, its row-level SELECTs evaluated
    once per row (PostgreSQL's are fenced, proxy/engines/postgres_forms.py). Claim: as
    :func:`check_string_growth`'s, for the work the engine is asked to do."""
    for select in tree.find_all(exp.Select):
        if not row_level(select) or not string_work_in(select):
            continue
        walk = _Walk(rendered=True)
        for part in (
            *select.expressions,
            select.args.get("where"),
            *(select.args.get("joins") or []),
        ):
            if isinstance(part, exp.Expr):
                walk.growth(part)
        if walk.built.factor > MAX_BUILT_FACTOR and walk.work.factor <= MAX_FACTOR:
            raise DPSQLError(
                "unsupported_sql",
                f"on {engine}, the query's rows would build strings of up to "
                f"{walk.built.factor:.3g} times the longest input value, counting each copy "
                f"the engine evaluates (the bounding repeats an aggregate's argument); the "
                f"limit is {MAX_BUILT_FACTOR} times",
                "build fewer strings inside aggregate arguments (casts to text, "
                "concatenations), or compute them in WHERE",
            )
        if walk.work.factor > MAX_FACTOR or walk.built.factor > MAX_BUILT_FACTOR:
            raise DPSQLError(
                "unsupported_sql",
                f"on {engine}, the query's string matching and building would run "
                f"{max(walk.work.factor, walk.built.factor):.3g} times over the longest "
                f"input value per row, counting each copy the engine evaluates (the "
                f"bounding repeats an aggregate's argument); the limit is {MAX_FACTOR}",
                "use shorter LIKE patterns, or match in WHERE rather than inside an "
                "aggregate's argument",
            )
