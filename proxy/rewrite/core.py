"""The state the rewrite rules pass along, and the statistics a query releases."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from accounting.quantiles import Grid, TargetKind
from proxy.catalog import DeclaredBound as DeclaredBound  # re-exported: C.DeclaredBound
from proxy.shape import Shape

# Statistic kinds: what one noisy column of the released table holds per group.
ROWS = "rows"  # clamped row count
COUNT = "count"  # clamped count of non-NULL values of an argument
PERSONS = "persons"  # number of distinct people
# Number of distinct values of an argument among each person's first C distinct values
# in the group (by a hash of person and value): proxy/rewrite/distinct_values.py.
DISTINCT = "distinct"
DISTINCT_SUM = "distinct_sum"  # the sum of those distinct (clamped) values
# Their sum minus m per value, m the midpoint of [L, U] (AVG(DISTINCT x), with the count):
# half the noise of the plain sum when L ≥ 0.
DISTINCT_CENTRED_SUM = "distinct_centred_sum"
# The sum of (v − m)² over those distinct values v, m the midpoint of [L, U]
# (VAR/STDDEV(DISTINCT x), with the two above).
DISTINCT_SQUARES = "distinct_squares"
# Counted across people from each person's kept distinct values, not per person.
DISTINCT_KINDS = (DISTINCT, DISTINCT_SUM, DISTINCT_CENTRED_SUM, DISTINCT_SQUARES)
SUM = "sum"  # clamped sum
CENTRED_SUM = "centred_sum"  # clamped sum of (x − m), m the midpoint of [L, U]
CENTRED_SQUARES = "centred_squares"  # clamped sum of (x − m)²
# Number of people whose contribution to the group bounding changed: more than C rows
# in it, more than K groups (some dropped), or a value outside a column's declared bounds
# (clamped to them). Each person counts at most once per group.
CLIPPED = "clipped"

# The meta key of a clamp to a column's declared bounds (clamp_inputs); its value is the
# column's DeclaredBound.
DECLARED = "dpsql_declared_bound"


@dataclass(frozen=True)
class Statistic:
    kind: str
    arg_sql: str | None  # canonical text of the (total, clamped) argument
    lower: float = 0.0  # bounds of the argument (not of the statistic)
    upper: float = 0.0
    integer: bool = True  # integer-valued per-person contributions (discrete noise)
    column: str = ""  # column name in the core result and the released table
    values_integer: bool = False  # the argument's values are integers (summed exactly)

    @property
    def centre(self) -> float:
        return (self.lower + self.upper) / 2.0

    def sort_key(self) -> tuple[bool, str, str]:
        # People counts and the clipping estimate come after the analyst's statistics.
        return (self.kind in (PERSONS, CLIPPED), self.kind, self.arg_sql or "")


@dataclass(frozen=True)
class QuantileStatistic:
    """One released column of per-group quantiles (MEDIAN, a quantile level, MIN or MAX)
    of one bounded argument, drawn from the group's histogram over the argument's public
    grid (see proxy/rewrite/quantile_histogram.py). Calls of one argument share one
    histogram; equal targets spelled differently share one column."""

    kind: TargetKind
    q: float | None  # the level of a quantile; None for MIN and MAX
    arg_sql: str  # canonical text of the (total, clamped) argument
    grid: Grid
    column: str  # the released column
    histogram: str  # the core's columns <histogram>_b (bins) and <histogram>_n (counts)
    calls: tuple[str, ...]  # canonical text of the analyst's calls it answers


@dataclass(frozen=True, eq=False)
class Core:
    """Everything the rules derive; the last rule fills ``sql``."""

    shape: Shape
    max_rows: int  # Linf: C
    max_groups: int  # L0: K (1 when there are no keys)
    from_: exp.Expr | None = None
    joins: tuple[exp.Expr, ...] = ()
    where: exp.Expr | None = None
    keys: tuple[exp.Expr, ...] = ()
    arguments: dict[str, exp.Expr] = field(default_factory=dict)  # agg sql -> argument
    # agg sql -> canonical text of its argument, rendered once: later rules and the outer
    # layer look arguments up by this text, and rendering is the costly step.
    argument_sql: dict[str, str] = field(default_factory=dict)
    statistics: tuple[Statistic, ...] = ()
    # The last rule renders the CTEs in place into ``sql``; read ``sql`` after it, not these.
    ctes: tuple[tuple[str, exp.Expr], ...] = ()
    sql: str = ""
    one_group_per_person: bool = False
    # Every table is a one-row-per-person private table: a person has one row per group,
    # never more than C, so no per-person sum is ever scaled and integer sums stay exact.
    one_row_per_person: bool = False
    bounding: bool = True  # False only in audits that must show they catch a violation
    # Release the clipping estimate: the CLIPPED statistic and the people per group.
    clipping: bool = False
    # The declared bounds whose clamps the clipping estimate counts (per_person).
    declared_bounds: tuple[DeclaredBound, ...] = ()
    # Keys (by index) of type DATE, and of a TIMESTAMP type: read only within the years
    # 1 to 9999, else NULL (per_person; see DATE_KEY_RANGE).
    dated_keys: frozenset[int] = frozenset()
    timed_keys: frozenset[int] = frozenset()
    # Keys of a DECIMAL type: grouped and returned as their text (per_person), which
    # keeps every value apart; NumPy would fetch them as float64, where two DECIMALs of
    # more than 15 digits can meet.
    text_keys: frozenset[int] = frozenset()
    # MEDIAN, quantiles, MIN and MAX: drawn from per-group histograms the core returns.
    quantiles: tuple[QuantileStatistic, ...] = ()
    # Group first by a keyed hash of the grouped values (DuckDB only: rewrite/
    # keyed_groups.py), so that planted values cannot all meet in one hash bucket.
    keyed_grouping: bool = False

    def statistic(self, kind: str, arg_sql: str | None) -> Statistic:
        for s in self.statistics:
            if s.kind == kind and s.arg_sql == arg_sql:
                return s
        raise KeyError((kind, arg_sql))

    def key_columns(self) -> tuple[str, ...]:
        return tuple(f"__k{i}" for i in range(len(self.keys)))


def from_table(name: str) -> exp.From:
    """``FROM name``, built directly: the ``from_`` builder would parse the name."""
    return exp.From(this=exp.Table(this=exp.to_identifier(name)))
