"""Covariance, correlation and linear regression aggregates, written as the aggregates
dpsql already bounds.

``CORR``, ``COVAR_POP``, ``COVAR_SAMP`` and the ``REGR_*`` family of two arguments
(``REGR_*(y, x)``: y the dependent value, x the independent one) read only the rows
where both arguments are not NULL. Each is the same arithmetic over averages and
population variances of those pairs, with

    Y = CASE WHEN y IS NOT NULL AND x IS NOT NULL THEN y END   (X likewise),
    cov = AVG(Y * X) - AVG(Y) * AVG(X)                         (shift invariant),

so that the respelled query is answered by the rules every AVG and VAR_POP goes through:
each argument's columns clamped to their declared bounds where they are read (the
product's range derived from its factors' bounds), each person's rows bounded, each
statistic noised. Nothing here computes a sensitivity: the privacy of the answer is that
of the AVG, VAR_POP and COUNT aggregates it is written as, and the arithmetic over them is
post-processing of their noisy values. A noisy variance can be 0 and a noisy covariance
larger than the variances allow, so a division by a variance is NULL where it is 0
(``NULLIF``) and a correlation is kept within [-1, 1], as the exact one is.

The definitions are SQL's (and DuckDB's, PostgreSQL's and Trino's): COVAR_SAMP scales the
population covariance by n / (n - 1), REGR_SLOPE is cov / VAR_POP(X), REGR_INTERCEPT is
AVG(Y) - slope * AVG(X), REGR_R2 is NULL when VAR_POP(X) is 0, 1 when VAR_POP(Y) is 0 and
CORR squared otherwise, REGR_SXX/SYY/SXY are n times VAR_POP(X)/VAR_POP(Y)/cov, and
REGR_COUNT is the number of pairs. One difference is left: with fewer than two pairs
COVAR_SAMP divides by 1 (a noisy count of pairs cannot tell one from two; VAR_SAMP does
the same) where SQL gives NULL. A window's aggregate (``CORR(x, y) OVER (...)``) is left
as written: dpsql answers windows over released rows only, in the outer layer.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

PAIRED: tuple[type[exp.AggFunc], ...] = (
    exp.Corr,
    exp.CovarPop,
    exp.CovarSamp,
    exp.RegrSlope,
    exp.RegrIntercept,
    exp.RegrCount,
    exp.RegrR2,
    exp.RegrAvgx,
    exp.RegrAvgy,
    exp.RegrSxx,
    exp.RegrSyy,
    exp.RegrSxy,
)


def _paren(node: exp.Expr) -> exp.Paren:
    return exp.Paren(this=node)


def _nonzero(node: exp.Expr) -> exp.Expr:
    """NULL where ``node`` is 0: a noisy variance can be, and x / 0 is infinite."""
    return exp.Nullif(this=node, expression=exp.Literal.number(0))


def _within_one(node: Callable[[], exp.Expr]) -> exp.Expr:
    """``r / GREATEST(ABS(r), 1)``: r itself within [-1, 1], else its sign; NULL stays
    NULL (a LEAST/GREATEST pair that ignores NULLs would turn it into -1, and one that
    does not is printed as CASEs repeating r four times)."""
    largest = exp.Greatest(
        this=exp.Abs(this=node()), expressions=[exp.Literal.number(1)], ignore_nulls=True
    )
    return _div(node(), largest)


def _double(node: exp.Expr) -> exp.Cast:
    return exp.Cast(this=node, to=exp.DataType.build("DOUBLE"))


def _div(this: exp.Expr, expression: exp.Expr) -> exp.Div:
    """DuckDB's ``/``: a DOUBLE quotient of any numbers (as its parser reads it)."""
    return exp.Div(this=this, expression=expression, typed=False, safe=False)


def expand(node: exp.Expr) -> exp.Expr | None:
    """``node`` written as AVG, VAR_POP and COUNT of the pairs where both of its
    arguments are not NULL, if it is one of the paired aggregates outside a window;
    else None. Precondition: none (any tree). The output computes, from exact
    aggregates, exactly what SQL's definition gives (up to floating-point rounding)."""
    if not isinstance(node, PAIRED) or isinstance(node.parent, exp.Window):
        return None
    y, x = node.this, node.expression
    if not isinstance(y, exp.Expr) or not isinstance(x, exp.Expr):
        return None

    # The pair's condition and the product's factors in one order whatever the roles:
    # CORR(a, b), CORR(b, a) and REGR_R2(b, a) then read the same statistics (each is
    # noised once, and their answers agree).
    first, second = sorted((y, x), key=lambda e: e.sql(dialect="duckdb"))

    def paired(value: exp.Expr) -> Callable[[], exp.Expr]:
        def fresh() -> exp.Expr:
            both = exp.and_(
                exp.not_(exp.Is(this=_paren(first.copy()), expression=exp.Null())),
                exp.not_(exp.Is(this=_paren(second.copy()), expression=exp.Null())),
            )
            return exp.Case(ifs=[exp.If(this=both, true=value.copy())])

        return fresh

    ys, xs = paired(y), paired(x)
    firsts, seconds = (ys, xs) if first is y else (xs, ys)

    def avg(v: Callable[[], exp.Expr]) -> exp.Expr:
        return exp.Avg(this=v())

    def var(v: Callable[[], exp.Expr]) -> exp.Expr:
        return exp.VariancePop(this=v())

    def count() -> exp.Expr:
        return exp.Count(this=xs())

    def cov() -> exp.Expr:
        # the factors as DOUBLE, as SQL reads the arguments: two INTEGERs' or TINYINTs'
        # product overflows in their own type (under the engine's TRY, a NULL that left
        # the row out of this average alone)
        product = exp.Avg(this=exp.Mul(this=_double(firsts()), expression=_double(seconds())))
        return _paren(exp.Sub(this=product, expression=exp.Mul(this=avg(ys), expression=avg(xs))))

    def corr() -> exp.Expr:
        def ratio() -> exp.Expr:
            spread = exp.Sqrt(this=exp.Mul(this=var(ys), expression=var(xs)))
            return _paren(_div(cov(), _nonzero(spread)))

        return _paren(_within_one(ratio))

    def slope() -> exp.Expr:
        return _paren(_div(cov(), _nonzero(var(xs))))

    def times_n(value: exp.Expr) -> exp.Expr:
        return _paren(exp.Mul(this=count(), expression=value))

    if isinstance(node, exp.Corr):
        return corr()
    if isinstance(node, exp.CovarPop):
        return cov()
    if isinstance(node, exp.CovarSamp):
        # n / (n - 1) with n at least 2: a noisy count of one or none divides by nothing
        def n() -> exp.Expr:
            return exp.Greatest(
                this=count(), expressions=[exp.Literal.number(2)], ignore_nulls=True
            )

        scaled = exp.Mul(this=cov(), expression=n())
        return _paren(_div(scaled, _paren(exp.Sub(this=n(), expression=exp.Literal.number(1)))))
    if isinstance(node, exp.RegrSlope):
        return slope()
    if isinstance(node, exp.RegrIntercept):
        return _paren(exp.Sub(this=avg(ys), expression=exp.Mul(this=avg(xs), expression=slope())))
    if isinstance(node, exp.RegrCount):
        return count()
    if isinstance(node, exp.RegrR2):
        zero = exp.Literal.number(0)
        return exp.Case(
            ifs=[
                exp.If(this=exp.EQ(this=var(xs), expression=zero), true=exp.Null()),
                exp.If(
                    this=exp.EQ(this=var(ys), expression=zero.copy()),
                    true=exp.Literal.number(1),
                ),
            ],
            default=exp.Pow(this=corr(), expression=exp.Literal.number(2)),
        )
    if isinstance(node, exp.RegrAvgx):
        return avg(xs)
    if isinstance(node, exp.RegrAvgy):
        return avg(ys)
    if isinstance(node, exp.RegrSxx):
        return times_n(var(xs))
    if isinstance(node, exp.RegrSyy):
        return times_n(var(ys))
    return times_n(cov())  # REGR_SXY
