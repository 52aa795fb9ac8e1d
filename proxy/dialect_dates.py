"""Date parts and formats that mean one thing in the analyst's dialect and another in
DuckDB: respelled to DuckDB's equivalent as the tree is read, or refused before any
charge.

sqlglot reads the other dialects' date functions into nodes that DuckDB then evaluates
with its own meaning of the same words, so an answer could be for another question with
no sign of it (an honest-answers probe, 2026-12-06):

* Trino's ``EXTRACT(DOW ...)`` counts Monday 1 to Sunday 7 (ISO); DuckDB's ``dow`` counts
  Sunday 0 to Saturday 6: a weekend filter ``>= 6`` kept Saturdays only.
* BigQuery's ``EXTRACT(DAYOFWEEK ...)`` counts Sunday 1 to Saturday 7 (every key was one
  off); its ``WEEK`` numbers Sunday-started weeks from 0, DuckDB's is ISO; its
  ``ISOWEEK`` is DuckDB's ``week`` (DuckDB raised a raw conversion error on the name).
* PostgreSQL's ``to_char`` patterns: sqlglot maps ``D`` (Sunday 1) to ISO ``%u``, leaves
  ``Q``, ``HH``, ``Mon`` and ``Month`` as literal text (one group named 'Q' held every
  row), and makes ``Day`` into ``%uay``.

What is respelled has one meaning in both: Trino's DOW, DOY and YEAR_OF_WEEK parts, and
BigQuery's DAYOFWEEK (DuckDB's dow + 1), ISOWEEK and truncation to weeks that start on a
named day (sqlglot's own DuckDB form of it). PostgreSQL text is read with only the
``to_char`` patterns whose DuckDB ``strftime`` code gives PostgreSQL's text; any other
letter of a pattern is left as a letter, and a format of a non-DuckDB dialect that
still holds a letter outside a ``%`` code is refused, naming it. A literal ``%`` in a
PostgreSQL pattern stays a literal (``%%``).
"""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.postgres import Postgres
from sqlglot.dialects.trino import Trino

from proxy.errors import position_of, unsupported

# PostgreSQL to_char patterns whose strftime code prints what PostgreSQL prints (the rest
# of sqlglot's table is wrong for PostgreSQL: D is Sunday-first, WW counts from 1 January,
# day/dy/yyy become text, OF and TZ print other offsets).
_POSTGRES_PATTERNS = {
    **{p: "%Y" for p in ("YYYY", "yyyy")},
    **{p: "%y" for p in ("YY", "yy")},
    **{p: "%m" for p in ("MM", "mm")},
    **{p: "%d" for p in ("DD", "dd")},
    **{p: "%j" for p in ("DDD", "ddd")},
    **{p: "%H" for p in ("HH24", "hh24")},
    **{p: "%I" for p in ("HH12", "hh12", "HH", "hh")},
    **{p: "%M" for p in ("MI", "mi")},
    **{p: "%S" for p in ("SS", "ss")},
    **{p: "%f" for p in ("US", "us")},
    **{p: "%G" for p in ("IYYY", "iyyy")},
    **{p: "%V" for p in ("IW", "iw")},
    **{p: "%p" for p in ("AM", "PM")},
    "FMDD": "%-d",
    "FMDDD": "%-j",
    "FMMM": "%-m",
    "FMHH24": "%-H",
    "FMHH12": "%-I",
    "FMHH": "%-I",
    "FMMI": "%-M",
    "FMSS": "%-S",
    # TM: the names without PostgreSQL's padding to nine characters, as strftime prints
    "TMDay": "%A",
    "TMDy": "%a",
    "TMMonth": "%B",
    "TMMon": "%b",
    "%": "%%",
    # seconds past midnight, not two SS: left as letters, so refused
    "SSSS": "SSSS",
    "ssss": "ssss",
    "SSSSS": "SSSSS",
    "sssss": "sssss",
}


class DpsqlPostgres(Postgres):
    """PostgreSQL as dpsql reads it: sqlglot's dialect with only the to_char patterns
    above mapped (so an unmapped one stays a letter of the format and is refused)."""

    TIME_MAPPING = _POSTGRES_PATTERNS


# Format codes whose DuckDB namesake prints something else, left as a bare letter (so
# the format is refused, naming it): Trino's date_format refuses %D %U %u %V %w %X
# itself, and sqlglot passed %V and %X on to DuckDB's ISO week and time of day; BigQuery
# pads %e with a space where sqlglot writes DuckDB's unpadded %-d, and its %g (ISO year
# in two digits) and %n (a newline) are DuckDB's milliseconds and nanoseconds (a review,
# 2026-12-06).
_TRINO_REFUSED = {code: code[1] for code in ("%D", "%U", "%u", "%V", "%w", "%X")}
_BIGQUERY_REFUSED = {code: code[1] for code in ("%e", "%g", "%n", "%f", "%c")}
_TRINO_MAPPING = {**Trino.TIME_MAPPING, **_TRINO_REFUSED}
_BIGQUERY_MAPPING = {**BigQuery.TIME_MAPPING, **_BIGQUERY_REFUSED}


class DpsqlTrino(Trino):
    """Trino as dpsql reads it: date_format codes with another meaning in DuckDB refused."""

    TIME_MAPPING = _TRINO_MAPPING


class DpsqlBigQuery(BigQuery):
    """BigQuery as dpsql reads it: format codes with another meaning in DuckDB refused."""

    TIME_MAPPING = _BIGQUERY_MAPPING


_READERS: dict[str, Dialect] = {
    "postgres": DpsqlPostgres(),
    "trino": DpsqlTrino(),
    "bigquery": DpsqlBigQuery(),
}


def reader(dialect: str) -> Dialect:
    """The sqlglot dialect that reads an analyst's text of ``dialect``."""
    found = _READERS.get(dialect)
    return found if found is not None else Dialect.get_or_raise(dialect)


# Codes DuckDB's strftime and strptime know (measured on DuckDB 2.0: each one formats).
_DUCKDB_CODES = frozenset("aAwudbhBmyYHIpMSgfnzZjUWcxXGVT%")
_DASHED = frozenset("dmyHIMSj")
_FORMATTING = (exp.TimeToStr, exp.StrToTime, exp.StrToDate)

_TRINO_PARTS = {
    "DOW": "ISODOW",
    "DAY_OF_WEEK": "ISODOW",
    "DOY": "DOY",
    "DAY_OF_YEAR": "DOY",
    "YOW": "ISOYEAR",
    "YEAR_OF_WEEK": "ISOYEAR",
}


def _refused_letters(fmt: str) -> str | None:
    """The first part of a strftime format that is neither a DuckDB code nor literal
    text without letters (None: the whole format is sound)."""
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%":
            code = fmt[i + 1 : i + 3]
            if code[:1] == "-" and code[1:2] in _DASHED:
                i += 3
                continue
            if code[:1] in _DUCKDB_CODES and code[:1] != "":
                i += 2
                continue
            return fmt[i : i + 2]
        if ch.isalpha():
            j = i
            while j < len(fmt) and fmt[j].isalpha():
                j += 1
            return fmt[i:j]
        i += 1
    return None


def _check_format(node: exp.Expr, dialect: str) -> None:
    fmt = node.args.get("format")
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        return
    bad = _refused_letters(fmt.this)
    if dialect == "postgres" and ('"' in fmt.this or "\\" in fmt.this):
        # PostgreSQL prints "quoted" text without its quotes; strftime would keep them
        bad = '"' if '"' in fmt.this else "\\"
    if bad is None:
        return
    if dialect == "postgres":
        raise unsupported(
            f"the to_char pattern {bad!r} is not answered as PostgreSQL writes it",
            "use YYYY, MM, DD, DDD, HH24, HH12, MI, SS, US, IYYY, IW, AM, FM forms of "
            "these, or TMDay / TMMonth; for a quarter or a weekday number use "
            "EXTRACT(quarter FROM ts) or EXTRACT(isodow FROM ts)",
            position_of(node),
        )
    refused = _TRINO_REFUSED if dialect == "trino" else _BIGQUERY_REFUSED
    if f"%{bad}" in refused:
        bad = f"%{bad}"  # (left as its bare letter by the dialect's table above)
    raise unsupported(
        f"the date format part {bad!r} is not answered in the {dialect} dialect",
        "use %Y, %m, %d, %H, %M, %S, %j, %a, %A, %b, %B, %G or %V, or EXTRACT(part FROM ts)",
        position_of(node),
    )


def _part(node: exp.Extract) -> str | None:
    unit = node.this
    return unit.name.upper() if isinstance(unit, exp.Var) else None


def _trino(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Extract) and _part(node) in _TRINO_PARTS:
        node.set("this", exp.var(_TRINO_PARTS[_part(node) or ""]))
    return node


def _duckdb_form(node: exp.Expr) -> exp.Expr:
    """sqlglot's DuckDB text of ``node``, read back as DuckDB (weeks that start on a
    named day: a shift, a truncation to ISO weeks and the shift back)."""
    return parse_one(node.sql(dialect="duckdb"), read="duckdb")


def _bigquery(node: exp.Expr) -> exp.Expr:
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)) and isinstance(
        node.args.get("unit"), exp.WeekStart
    ):
        return _duckdb_form(node)
    if isinstance(node, (exp.TsOrDsToTimestamp, exp.TsOrDsToDate)):
        # FORMAT_TIMESTAMP / FORMAT_DATE's reading of their argument: a cast in DuckDB
        return _duckdb_form(node)
    if isinstance(node, exp.Extract):
        part = _part(node)
        if isinstance(node.this, exp.WeekStart) or part == "WEEK":
            raise unsupported(
                "BigQuery's WEEK part (weeks from a given weekday, numbered from 0) is not "
                "answered",
                "use EXTRACT(ISOWEEK FROM ts) for ISO weeks, or DATE_TRUNC(DATE(ts), WEEK) "
                "as the key",
                position_of(node),
            )
        if part == "ISOWEEK":
            node.set("this", exp.var("WEEK"))
        elif part == "DAYOFWEEK":
            shifted = exp.Extract(this=exp.var("DOW"), expression=node.expression)
            return exp.paren(exp.Add(this=shifted, expression=exp.Literal.number(1)), copy=False)
    return node


def respell(tree: exp.Expr, dialect: str) -> exp.Expr:
    """``tree`` (read from ``dialect``) with its date parts in DuckDB's meaning, or
    DPSQLError (unsupported_sql) for a part or format that has none. DuckDB text is
    returned as it is."""
    if dialect == "duckdb":
        return tree
    for node in tree.find_all(*_FORMATTING):
        _check_format(node, dialect)
    if dialect == "trino":
        return tree.transform(_trino, copy=False)
    if dialect == "bigquery":
        return tree.transform(_bigquery, copy=False)
    return tree

