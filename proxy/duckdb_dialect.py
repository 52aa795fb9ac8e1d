"""dpsql's DuckDB printing: sqlglot's, with two handlers that took time quadratic in a
query's nesting replaced by ones that print the same text in linear time.

sqlglot's generators are compiled (mypyc) and cannot be subclassed from Python, so the
handlers are installed in sqlglot's DuckDB generator itself when this module is first
imported (``install``): every ``sql(dialect="duckdb")`` in the process prints with them.
Any module that prints DuckDB text imports this one (``proxy.render`` does, and so
everything that imports it); tests/proxy/test_duckdb_dialect.py checks the texts.

``DATE_TRUNC(unit, ts)`` on a TIMESTAMP: sqlglot builds a new call with ``exp.func``,
which deep-copies the operand, at every level of every rendering, so nested truncations
took time quadratic in their depth (a probe, 2026-12-04: 320 levels 10 s to plan, 640
levels 46 s, before any charge and whatever the data; RELIABILITY.md, "Planning time on
nested functions"). Here a plain truncation is printed from the call the stock handler
builds, around the operand itself rather than a copy (its parent set back after): the
same text, each level printed once.

``SAFE_DIVIDE(n, d)``: sqlglot builds the comparison and the quotient with builders that
copy both operands (320 levels in the numerator: 5.8 s); here the same nodes are built
around the operands themselves. The denominator is still written twice:
proxy/repeated_operands.py limits how deep such operands nest.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp
from sqlglot import generator as _generator
from sqlglot.dialects.dialect import weekstart_unit_to_str
from sqlglot.generators.duckdb import DuckDBGenerator, _week_trunc_start_dow

_STOCK_TRUNC = DuckDBGenerator.timestamptrunc_sql


def timestamp_trunc_sql(gen: DuckDBGenerator, expression: exp.TimestampTrunc) -> str:
    """The stock handler's text: for a plain truncation (no time zone, no week start, no
    cast back to the input's type) the call the stock handler builds, around the operand
    itself rather than a copy."""
    operand = expression.this
    if (
        not isinstance(operand, exp.Expr)
        or expression.args.get("zone")
        or expression.args.get("input_type_preserved")
        or _week_trunc_start_dow(expression.args.get("unit")) is not None
    ):
        # The stock handler on a copy: it builds nodes around the operand, which would
        # become their parent (the checker refuses a zone, and dpsql's trees carry no
        # week start or preserved type, so the copy's cost is not met on a core).
        return str(_STOCK_TRUNC(gen, expression.copy()))
    unit = weekstart_unit_to_str(gen, expression)
    try:
        return str(gen.sql(exp.func("DATE_TRUNC", unit, operand, copy=False)))
    finally:
        expression.set("this", operand)  # its parent again


def safe_divide_sql(gen: DuckDBGenerator, expression: exp.SafeDivide) -> str:
    """The stock text, ``CASE WHEN d <> 0 THEN n / d ELSE NULL END``, from the nodes the
    stock handler builds, around the operands themselves rather than copies."""
    numerator, denominator = expression.this, expression.expression
    try:
        d = exp._wrap(denominator, exp.Binary)
        quotient = exp.Div(this=exp._wrap(numerator, exp.Binary), expression=d)
        # d sits in two places: printing reads each place, and the parent is restored
        test = exp.NEQ(this=d, expression=exp.Literal.number(0))
        return str(gen.sql(exp.If(this=test, true=quotient, false=exp.Null())))
    finally:
        expression.set("this", numerator)  # their parent again
        expression.set("expression", denominator)


HANDLERS: dict[type[exp.Expr], Callable[..., str]] = {
    exp.SafeDivide: safe_divide_sql,
    exp.TimestampTrunc: timestamp_trunc_sql,
}


def install() -> None:
    """Put :data:`HANDLERS` in sqlglot's DuckDB generator: its class table, and the
    dispatch table sqlglot builds from it once per generator class (if built already)."""
    DuckDBGenerator.TRANSFORMS.update(HANDLERS)
    built = _generator._DISPATCH_CACHE.get(DuckDBGenerator)
    if built is not None:
        built.update(HANDLERS)


install()
