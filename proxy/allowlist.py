"""What the checker allows: row-level node types and functions, and the aggregates.

Everything not named here is refused. Additions need a reason: the node must be
deterministic, and any way it could fail on some row must be covered by the total-forms
rewrite (proxy/rewrite/total_forms.py).
"""

from __future__ import annotations

from sqlglot import exp

from proxy import shape as S

# The binary comparisons (row constructors stand on either side of one; proxy/string_growth)
COMPARISONS: tuple[type[exp.Expr], ...] = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
)
# Deterministic, total (or made total by the rewrite) row-level operations.
SCALAR_NODES: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.Identifier,
    exp.Var,
    exp.And,
    exp.Or,
    exp.Not,
    *COMPARISONS,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Neg,
    exp.Case,
    exp.If,
    exp.Coalesce,
    exp.Cast,
    exp.TryCast,
    exp.DataType,
    exp.DataTypeParam,
    exp.Least,
    exp.Greatest,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Sign,
    exp.Sqrt,
    exp.Ln,
    exp.Exp,
    exp.Pow,
    # Math with a sound interval in proxy/rewrite/math_ranges.py (which refuses an
    # argument range outside the domain); elsewhere TRY(...) covers an engine error.
    exp.Log,
    exp.Cbrt,
    exp.Sin,
    exp.Cos,
    exp.Tan,
    exp.Cot,
    exp.Asin,
    exp.Acos,
    exp.Atan,
    exp.Atan2,
    exp.Degrees,
    exp.Radians,
    exp.Pi,
    exp.SafeDivide,
    exp.Lower,
    exp.Upper,
    exp.Length,
    exp.Substring,
    exp.Trim,
    exp.Concat,
    exp.DPipe,
    exp.StartsWith,
    exp.Contains,
    exp.RegexpLike,
    exp.StrPosition,
    exp.Replace,
    exp.Left,
    exp.Right,
    exp.TimestampTrunc,
    exp.DateTrunc,
    exp.Extract,
    exp.Year,
    exp.Month,
    exp.Day,
    exp.DayOfWeek,
    exp.DayOfYear,
    exp.Quarter,
    exp.Week,
    exp.Interval,
    exp.DateAdd,
    exp.DateSub,
    exp.DateDiff,
    exp.TimeToStr,
    # DuckDB's English names of a date's day and month: NULL for the infinities, a
    # binder error (before any charge) for a time of day; no other engine's form gives
    # the same text (PostgreSQL pads it), so they are refused there, under TRY
    exp.Dayname,
    exp.Monthname,
    exp.Tuple,
    exp.Try,
    exp.Star,
)
AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Sum: S.SUM,
    exp.Avg: S.AVG,
    exp.VariancePop: S.VAR_POP,
    exp.Variance: S.VAR_SAMP,
    exp.StddevPop: S.STDDEV_POP,
    exp.StddevSamp: S.STDDEV_SAMP,
    exp.Stddev: S.STDDEV_SAMP,
}
