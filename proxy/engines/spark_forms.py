"""Spark SQL's forms of the DuckDB-only constructs of a core (see render.py).

The session runs with ``spark.sql.ansi.enabled = false``: casts of bad text, division
by zero and out-of-range values give NULL instead of failing the job -- but integer
overflow wraps around silently. So under TRY, integer ``+ - *`` and negation become
``try_add``/``try_subtract``/``try_multiply`` (NULL on overflow, as DuckDB's TRY), ``/``
divides as DOUBLE (DuckDB divides integers and DECIMALs as DOUBLE, and by zero as IEEE
754: +-Infinity or NaN, where Spark gives NULL),
``%`` ``try_mod``; casts become ``TRY_CAST``, with DuckDB's rounding made explicit
where Spark truncates (``bround``, half to even, from DOUBLE; ``round``, half away from
zero, from DECIMAL); ``concat`` skips NULLs as DuckDB's does. DOUBLE arithmetic already
gives DuckDB's +-Infinity and 0 at the edges. SUM over integers is taken in
DECIMAL(38, 0), where DuckDB takes it in 128 bits (Spark's SUM(BIGINT) wraps).

Spark's LEAST and GREATEST skip NULLs, as DuckDB's do (and PostgreSQL's), so the
rewrite's clamps need no change. Refused: DOUBLE-to-text casts (Spark writes 1.0E10),
regular expressions (Java's syntax is not RE2's), LIKE patterns with a backslash,
EXTRACT of fractional parts, and any function outside the list below. The L0 hash and
the keyed groupings are ``xxhash64`` seeded by the secret per-query seed's text as its
first input (see :meth:`SparkForms.keyed_hash` and :func:`_seed_text`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.engines import spark_per_person
from proxy.engines.kinds import Family, Kind, Typer, choices, of_data_type
from proxy.engines.postgres_forms import IEEE_BY_ZERO
from proxy.engines.render import (
    HELD_ROW,
    CutForm,
    Held,
    alone,
    constant_items,
    keyed_list,
    read_once,
    refuse,
    strftime_supported,
    template,
)

ENGINE = "spark"
# Spark's OptimizeIn turns an IN list of more than this many literals into an InSet
# (spark.sql.optimizer.inSetConversionThreshold)
_IN_SET = 10
_SAFE = (exp.Column, exp.Literal, exp.Null, exp.Boolean)
_STRUCTURAL = (
    exp.Paren,
    exp.And,
    exp.Or,
    exp.Not,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Between,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Case,
    exp.If,
    exp.Coalesce,
    exp.Nullif,
    exp.Lower,
    exp.Upper,
    exp.Length,
    exp.Trim,
    exp.DPipe,
    exp.Floor,
    exp.Ceil,
    exp.Least,
    exp.Greatest,
    exp.Round,
)
_INTEGER_PARTS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOW", "DOY", "HOUR", "MINUTE"}
# DuckDB's other names of those parts (dayofweek(x) reaches here as EXTRACT(DAYOFWEEK)).
_PART_NAMES = {"DAYOFWEEK": "DOW", "DAYOFYEAR": "DOY", "DAYOFMONTH": "DAY", "WEEKOFYEAR": "WEEK"}
_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}
# Spark converts a DATE to a 64-bit count of microseconds wherever it meets a TIMESTAMP or
# a time part (EXTRACT(HOUR), date_trunc, a comparison with a timestamp), and raises
# "long overflow" beyond about 290,000 years, even with ANSI mode off; DuckDB's dates
# reach 5.8 million years, its timestamps infinity. So every date and timestamp Spark
# reads from the data or computes is kept within the years 1 to 9999 (else NULL, as
# DuckDB's TRY gives for what overflows it), and no conversion can overflow.
_YEARS = {
    Family.DATE: ("0001-01-01", "9999-12-31"),
    Family.TIMESTAMP: ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"),
}


# The most digits ROUND may keep or drop on Spark (a DOUBLE has 17 significant ones).
_ROUND_DIGITS = 38


def _simple_like(pattern: str) -> bool:
    """A pattern Spark's optimizer turns into a string comparison (LikeSimplification:
    equality, a prefix, a suffix, a substring, or a prefix and a suffix), never into a
    regular expression: no '_', and '%' only at the ends or once in the middle."""
    if "_" in pattern:
        return False
    inner = pattern[1:] if pattern.startswith("%") else pattern
    inner = inner[:-1] if inner.endswith("%") and inner else inner
    if "%" not in inner:
        return True
    return inner.count("%") == 1 and not pattern.startswith("%") and not pattern.endswith("%")


def _held_element(body: exp.Expr, held: list[Held]) -> exp.Expr:
    """Spark's read-once form (render.read_once): ``body`` as a lambda over a one-element
    array of a struct of the held operands, each evaluated once per row (Spark has no
    scalar subquery over a row's own values)."""
    fields: list[exp.Expr] = []
    for h in held:
        fields += [exp.Literal.string(h.name), h.value]
    row = exp.Array(expressions=[exp.Anonymous(this="named_struct", expressions=fields)])
    applied = exp.Transform(
        this=row, expression=exp.Lambda(this=body, expressions=[exp.to_identifier(HELD_ROW)])
    )
    return exp.Anonymous(this="element_at", expressions=[applied, exp.Literal.number(1)])


def _once(build: Callable[..., exp.Expr], *values: exp.Expr) -> exp.Expr:
    """``build(*values)`` with each large operand it repeats read once (render.read_once)."""
    return read_once(ENGINE, build, values, _held_element)


# Beyond 2^52 every DOUBLE is an integer: FLOOR and CEIL give it back unchanged.
_DOUBLE_INTEGRAL = 4503599627370496


def _round_double(value: exp.Expr, digits: int) -> exp.Expr:
    """A DOUBLE rounded as DuckDB's cast to DECIMAL(p, d) rounds it (d >= 0): round(x *
    10^d) / 10^d. Spark's cast rounds the shortest decimal text of x half up (0.285 ->
    0.29 where DuckDB gives 0.28); its ROUND of a DOUBLE to an integer rounds half away
    from zero, as C's round does, and keeps NaN and the infinities, which the cast then
    makes NULL as DuckDB's TRY_CAST does (as a product past the DOUBLE range, whose x no
    DECIMAL of 38 digits holds). The operand is read once: the form grows with it."""
    scale = exp.Var(this=f"1e{digits}D")  # a DOUBLE (Spark reads 1e2 as a DECIMAL)
    product = exp.Mul(this=value, expression=scale)
    return exp.Div(this=exp.Round(this=product), expression=scale.copy())


def _within_years(value: exp.Expr, family: Family) -> exp.Expr:
    """``value`` (a DATE or TIMESTAMP) if it lies within the years 1 to 9999, else NULL."""
    to = exp.DataType.build("DATE" if family is Family.DATE else "TIMESTAMP")
    low, high = (exp.cast(exp.Literal.string(d), to.copy()) for d in _YEARS[family])
    return exp.Case(
        ifs=[exp.If(this=exp.Between(this=value, low=low, high=high), true=value.copy())]
    )


# The type a core's own guard of the years 1 to 9999 casts its ends to, per family (its
# first instant is spelt with or without the time of day: per_person's date keys).
_GUARD_TYPES = {
    Family.DATE: exp.DataType.Type.DATE,
    Family.TIMESTAMP: exp.DataType.Type.TIMESTAMPNTZ,
}


def _seed_text(seed: exp.Expr) -> exp.Expr:
    """The secret seed as text, as the first input of a keyed ``xxhash64``: its digits
    key the chain as its eight bytes would. Why text: Spark writes an integer literal
    into the Java it generates for a stage, so every new seed was new code to compile
    (each cache miss at 1M rows paid 0.2-0.3 s more than the same core under a seed seen
    before), while a text literal is a reference the generated class reads, and the
    class compiled for the first seed serves every later one. The cast of the bound
    parameter is folded into a text literal before code generation. A public seed
    written as a literal (the distinct-values rule's 0) is the same in every query and
    stays a number."""
    if isinstance(seed, exp.Literal):
        return seed.copy()
    return exp.Cast(this=seed.copy(), to=exp.DataType.build("STRING"))


def _guard_bound(node: exp.Expr) -> bool:
    """Whether ``node`` is a bound of a guard of the years (_within_years, per_person's
    date keys): a cast of one of _YEARS's texts in a BETWEEN. Any other operand of a
    BETWEEN is a value like any other (a review, 2026-12-04: ``ts BETWEEN
    CAST(<'5000000-01-01' on one person's rows> AS DATE) AND ...`` raised on D only)."""
    if not isinstance(node, (exp.Cast, exp.TryCast)) or not isinstance(node.parent, exp.Between):
        return False
    if node is node.parent.this:
        return False
    texts = {t for first, last in _YEARS.values() for t in (first, first[:10], last)}
    return isinstance(node.this, exp.Literal) and node.this.is_string and node.this.name in texts


_SAME_TYPE = (exp.Case, exp.If, exp.Coalesce, exp.Least, exp.Greatest)


def _within(value: exp.Expr, typer: Typer) -> bool:
    """Whether ``value`` is a date or timestamp that :meth:`SparkForms.dates` keeps within
    the years 1 to 9999: a column or a cast of that family (each guarded, or within by
    this test), or a choice among such values and NULLs."""
    value = value.unnest()
    if isinstance(value, exp.Null):
        return True
    if isinstance(value, (exp.Column, exp.Cast, exp.TryCast)):
        return typer.kind(value).family in _YEARS
    if isinstance(value, _SAME_TYPE):
        return all(_within(p, typer) for p in choices(value))
    return False


def _read_within_years(column: exp.Column, family: Family) -> bool:
    """Whether ``column`` (of ``family``) is the tested or the returned value of a guard
    ``CASE WHEN column BETWEEN CAST(first AS T) AND CAST(last AS T) THEN column END`` over
    the years 1 to 9999, T the column's own family (DATE, or TIMESTAMP without time
    zone; a DATE compared with a TIMESTAMP would be converted): the core's date keys
    (per_person's _truncated_within). Such a read needs no guard of its own: the CASE
    compares the column with two constants, which converts no value of the column to
    microseconds (Spark's conversions are what overflow), and returns it only within
    the years. Guarding it again cost each row of a daily key four more comparisons."""
    parent = column.parent
    between = parent if isinstance(parent, exp.Between) else None
    branch = between.parent if between is not None else parent
    if not isinstance(branch, exp.If) or not isinstance(case := branch.parent, exp.Case):
        return False
    if case.args.get("default") is not None or case.args.get("ifs") != [branch]:
        return False
    between = branch.this
    if not isinstance(between, exp.Between) or between.this != branch.args.get("true"):
        return False
    if column is not between.this and column is not branch.args.get("true"):
        return False
    low, high = between.args.get("low"), between.args.get("high")
    if not (isinstance(low, exp.Cast) and isinstance(high, exp.Cast)):
        return False
    if family not in _GUARD_TYPES:
        return False
    first, last = _YEARS[family]
    return (
        low.to.this is _GUARD_TYPES[family]
        and high.to == low.to
        and not low.to.expressions
        and all(isinstance(e.this, exp.Literal) and e.this.is_string for e in (low, high))
        and low.this.name in {first, first[:10]}
        and high.this.name == last
    )


def view_name(db: str, name: str) -> str:
    """The temporary view a catalog table is registered as (Spark's temporary views
    have no schema)."""
    return f"dpsql__{db}__{name}"


class SparkForms:
    engine = ENGINE
    dialect = "spark"
    cut = CutForm.NUMBERED  # bench/spark_cut.py measures it against RANGE_COUNT

    def __init__(self, views: bool, by_person: bool = True):
        self._views = views  # tables registered as temporary views (else: the catalog)
        self.by_person = by_person  # see rows_by_person (False: bench/pg_cut.py's baseline)
        self.fast_per_person = True  # see per_person (False: bench/spark_core.py's baseline)

    def parameter(self, index: int) -> str:
        return f":p{index}"

    def table(self, db: str, name: str) -> exp.Table:
        if self._views:
            return exp.Table(this=exp.to_identifier(view_name(db, name), quoted=True))
        return exp.Table(
            this=exp.to_identifier(name, quoted=True),
            db=exp.to_identifier("default" if db == "main" else db, quoted=True),
        )

    def column(self, db: str, table: str, name: str) -> str | None:
        return None  # Spark matches column names without case (spark.sql.caseSensitive)

    def keyed_hash(self, values: list[exp.Expr], kinds: list[Kind], seed: exp.Expr) -> exp.Expr:
        """A 64-bit hash of ``values`` (of DuckDB kinds ``kinds``) under the secret
        per-query ``seed``: the L0 cut's order of a person's groups, and the keyed first
        column of a grouping or join (proxy/rewrite/keyed_groups.py).

        Spark's xxhash64 chains its inputs (each seeds the next), so the secret seed
        first keys the whole chain. Integers, dates and timestamps are hashed as their
        4 or 8 bytes, one-to-one under a given seed. Texts and DECIMALs are hashed as
        their text behind a secret prefix, as on DuckDB. A float's -0.0 is hashed as
        0.0, as Spark groups them. Values the typer cannot type are left out: their
        text need not be one per group. Like DuckDB's HASH it is not a cryptographic
        PRF: the L0 bound holds for every seed, and the seed makes the choice of kept
        groups and the buckets unpredictable."""
        parts: list[exp.Expr] = [_seed_text(seed)]
        for value, kind in zip(values, kinds, strict=True):
            if kind.family in (Family.TEXT, Family.DECIMAL) or (
                kind.family is Family.INT and not 0 < kind.bits <= 64
            ):
                text = exp.Cast(this=value.copy(), to=exp.DataType.build("STRING"))
                parts.append(exp.DPipe(this=self._prefix(seed), expression=text, safe=True))
            elif kind.family is Family.FLOAT:
                zero = exp.EQ(this=value.copy(), expression=exp.Literal.number(0))
                parts.append(
                    exp.Case(
                        ifs=[
                            exp.If(
                                this=zero,
                                true=exp.Cast(
                                    this=exp.Literal.number(0), to=exp.DataType.build("DOUBLE")
                                ),
                            )
                        ],
                        default=value.copy(),
                    )
                )
            elif kind.family in (Family.INT, Family.BOOL, Family.DATE, Family.TIMESTAMP):
                parts.append(value.copy())
        return exp.Anonymous(this="xxhash64", expressions=parts)

    @staticmethod
    def _prefix(seed: exp.Expr) -> exp.Expr:
        """Secret text 8 to 15 characters long from the seed (keyed_groups._prefix's)."""
        digits = exp.Cast(
            this=exp.Anonymous(this="xxhash64", expressions=[seed.copy(), exp.Literal.number(1)]),
            to=exp.DataType.build("STRING"),
        )
        length = exp.Add(
            this=exp.Literal.number(8),
            expression=exp.Cast(
                this=exp.Anonymous(this="pmod", expressions=[seed.copy(), exp.Literal.number(8)]),
                to=exp.DataType.build("INT"),
            ),
        )
        return exp.Substring(this=digits, start=exp.Literal.number(1), length=length)

    def rows_by_person(self, rows: exp.Select) -> None:
        """Spark's REPARTITION hint on the per-person rows: hashed by person before the
        per-(person, key) aggregation, they already sit where the cut's window partition
        by person needs them, so one shuffle serves both (instead of one by (person,
        key) and a second by person). The aggregation then runs after the shuffle,
        without its map-side partial step: on the demo data's daily and monthly keys at
        1M rows the cache miss went from 1.95x and 2.47x the floor (before) to 1.43x and
        1.93x with NUMBERED, and measured idle after the per-person forms 1.43x and
        1.75x (BENCHMARKS.md, "Issue 16: the L0 cut on PostgreSQL and Spark")."""
        if self.by_person:
            rows.set("hint", exp.Hint(expressions=[exp.func("REPARTITION", exp.column("__u"))]))

    def in_lists(self, tree: exp.Expr, typer: Typer) -> None:
        """An IN list of more than 10 constants on BIGINTs (or integers of unknown
        width) or text as ``CASE WHEN k(x) IN (k(c1), ...) THEN x IN (c1, ...) ELSE ...
        END``, k = ``xxhash64(seed, value)`` (a BIGINT: the value cast to one). Spark
        turns such a list into an InSet, a hash set keyed by the values' own hashes: a
        BIGINT's folds its two halves together, as PostgreSQL's does (see
        PostgresForms.in_lists, where such a list was measured to flood; not measured
        on Spark). Where k(x) is not listed, x is not: an x equal to a listed number is
        a BIGINT of that value, which the cast keeps; the ELSE gives NULL for a NULL x
        or a list holding NULL, else FALSE, as the list would."""
        # Innermost first, the operand read once when large: as PostgresForms.in_lists
        # (outer first, an inner list was keyed in a detached copy and ran unkeyed).
        for node in reversed(list(tree.find_all(exp.In))):
            if not constant_items(node, _IN_SET + 1):
                continue
            kind = typer.kind(node.this)
            if not (
                kind.family is Family.TEXT
                or (kind.family is Family.INT and not 0 < kind.bits <= 32)
            ):
                continue
            seed = exp.Placeholder(this="1")

            def keyed(value: exp.Expr, kind: Kind = kind, seed: exp.Expr = seed) -> exp.Expr:
                if kind.family is Family.INT:
                    value = exp.Cast(this=value, to=exp.DataType.build("BIGINT"))
                return exp.Anonymous(this="xxhash64", expressions=[_seed_text(seed), value])

            items = list(node.expressions)
            node.replace(
                _once(
                    lambda x, items=items, keyed=keyed: keyed_list(
                        exp.In(this=x, expressions=items), keyed
                    ),
                    node.this,
                )
            )

    def decimal_texts(self, tree: exp.Expr, typer: Typer) -> None:
        """Nothing: a Spark DECIMAL's scale is its type's, as DuckDB's is."""

    def dates(self, tree: exp.Expr, typer: Typer) -> None:
        """Every date and timestamp column read, and every cast to a date or timestamp
        (a literal ``DATE '1000000-01-01'`` too: a probe, 2026-12-02), within the years
        1 to 9999 (see _YEARS)."""
        # Innermost first: an outer node is guarded as a copy, so a node inside it
        # guarded later was guarded in the detached original only (a review,
        # 2026-12-05: CAST(CASE ... THEN DATE '5000000-01-01' ... END AS TIMESTAMP)
        # kept its inner DATE unguarded and raised "long overflow" on D only). A node
        # always follows its parent in find_all's breadth-first order.
        found = list(tree.find_all(exp.Column, exp.Cast, exp.TryCast))
        for node in reversed(found):
            if _guard_bound(node):
                continue  # a guard's own bounds
            family = typer.kind(node).family
            if family not in _YEARS:
                continue
            if isinstance(node, exp.Column) and _read_within_years(node, family):
                continue
            if isinstance(node, (exp.Cast, exp.TryCast)) and _within(node.this, typer):
                # a date or timestamp already within the years converted: within them
                # too (guarding it again would double the SQL at every nested cast)
                continue
            node.replace(_within_years(node.copy(), family))

    def per_person(self, tree: exp.Expr, typer: Typer) -> None:
        """Bounded sums in DOUBLE and two-level grouping for text keys where they give
        the same rows (proxy/engines/spark_per_person.py)."""
        if self.fast_per_person:
            spark_per_person.per_person(tree, typer)

    def exact_sum(self, node: exp.Sum, argument: Kind) -> exp.Expr:
        if argument.family is Family.INT:
            decimal = exp.DataType.build("DECIMAL(38, 0)")
            return exp.Sum(this=exp.Cast(this=node.this.copy(), to=decimal))
        return node

    def wide_integer(self) -> exp.DataType:
        # HUGEINT's exact range where the rewrite needs it (sums below 2^62 saturate)
        return exp.DataType.build("DECIMAL(38, 0)")

    def float_op(self, node: exp.Mul | exp.Div, typer: Typer) -> exp.Expr:
        # DOUBLE arithmetic follows IEEE 754 on Spark, as on DuckDB. DuckDB's ``/``
        # divides as DOUBLE whatever the operands (the quantile histogram's DECIMAL
        # positions too); Spark divides DECIMALs as DECIMALs, rounded to 6 places.
        if isinstance(node, exp.Div):
            double = exp.DataType.build("DOUBLE")
            return exp.Div(
                this=exp.Cast(this=node.left.copy(), to=double),
                expression=exp.Cast(this=node.right.copy(), to=double.copy()),
            )
        return node

    def source_values(self, tree: exp.Expr, ctes: set[str]) -> None:
        """Nothing: a Parquet DECIMAL holds at most 38 digits, as its catalog type says."""

    def once(self, build: Callable[..., exp.Expr], *values: exp.Expr) -> exp.Expr:
        return _once(build, *values)

    def fence_rows(self, tree: exp.Expr) -> None:
        """Nothing: Spark does not merge a projection into the aggregate above it when
        that would repeat an expression that is not cheap (CollapseProject), and it
        computes common subexpressions once."""

    def double(self, text: str) -> exp.Expr:
        if text == "inf":
            return exp.Cast(this=exp.Literal.string("Infinity"), to=exp.DataType.build("DOUBLE"))
        return exp.Var(this=f"{text}D")  # Spark reads a bare 1e300 as a DECIMAL

    def total(self, node: exp.Expr, typer: Typer) -> exp.Expr:
        return _Total(typer).form(node)


class _Total:
    def __init__(self, typer: Typer):
        # Kinds remembered while a total form is built: it types the levels of the
        # expression it is given, which it never changes (it builds a new one), and
        # typing a node types its subtree (160 nested COALESCEs: 78,000 kinds asked)
        self.typer = typer.remembering()

    def _of_operands(self, node: exp.Binary, text: str) -> exp.Expr:
        """``text`` (Spark SQL over ``__a`` and ``__b``) with the node's operands in their
        total forms, each read once however often the text names it."""
        return _once(
            lambda a, b: template(text, a=a, b=b), self.form(node.left), self.form(node.right)
        )

    def form(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Try):
            return self.form(node.this)
        if isinstance(node, _SAFE):
            return node.copy()
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
            fn = (
                "try_add"
                if isinstance(node, exp.Add)
                else "try_subtract"
                if isinstance(node, exp.Sub)
                else "try_multiply"
                if isinstance(node, exp.Mul)
                else "try_mod"
            )
            kinds = (self.typer.kind(node.left), self.typer.kind(node.right))
            if isinstance(node, exp.Sub) and all(k.family is Family.DATE for k in kinds):
                # DuckDB: a BIGINT number of days; Spark's try_subtract gives an INTERVAL
                return exp.Cast(
                    this=exp.Anonymous(
                        this="datediff", expressions=[self.form(node.left), self.form(node.right)]
                    ),
                    to=exp.DataType.build("BIGINT"),
                )
            if isinstance(node, exp.Mod) and self.typer.kind(node).family is Family.FLOAT:
                # DuckDB's DOUBLE % 0 is NaN (fmod); Spark's try_mod gives NULL
                return self._of_operands(
                    node,
                    "CASE WHEN __b = 0 AND NOT __a IS NULL THEN CAST('NaN' AS DOUBLE) "
                    "ELSE try_mod(__a, __b) END",
                )
            done = exp.Anonymous(this=fn, expressions=[self.form(node.left), self.form(node.right)])
            if sum(k.family is Family.DATE for k in kinds) == 1 and any(k.numeric for k in kinds):
                # A date moved by a number of days: try_add moves it past 9999 (or wraps
                # it) without failing. (Two dates' difference is a number of days.)
                return _within_years(done, Family.DATE)
            return done
        if isinstance(node, exp.IntDiv):
            # DuckDB's //: two integers truncated towards zero (NULL by zero; the one
            # overflow, MIN // -1, NULL as under TRY), anything else divided as /.
            if self.typer.kind(node).family is not Family.INT:
                return self.form(exp.Div(this=node.left, expression=node.right))
            return self._of_operands(
                node,
                "CASE WHEN __b = 0 THEN NULL WHEN __b = -1 THEN try_subtract(0, __a) "
                "ELSE __a // __b END",
            )
        if isinstance(node, exp.Div):
            lk, rk = self.typer.kind(node.left), self.typer.kind(node.right)
            if not (lk.numeric and rk.numeric):
                raise refuse(ENGINE, "a division of non-numbers")
            double = exp.DataType.build("DOUBLE")
            # DuckDB divides as DOUBLE, by zero as IEEE 754 does; Spark gives NULL.
            return _once(
                lambda a, b: template(
                    f"CASE WHEN __b = 0 THEN {IEEE_BY_ZERO} ELSE __a / __b END", a=a, b=b
                ),
                exp.Cast(this=self.form(node.left), to=double),
                exp.Cast(this=self.form(node.right), to=double.copy()),
            )
        if isinstance(node, exp.Neg):
            # built around the operand itself: a template copies its parts, the whole
            # chain below at each level (320 nested negations: 9.3 s)
            return exp.Anonymous(
                this="try_subtract", expressions=[exp.Literal.number(0), self.form(node.this)]
            )
        if isinstance(node, exp.Abs):
            return _once(
                lambda a: template("CASE WHEN __a < 0 THEN try_subtract(0, __a) ELSE __a END", a=a),
                self.form(node.this),
            )
        if isinstance(node, (exp.Concat, exp.DPipe)):
            for part in (
                node.expressions if isinstance(node, exp.Concat) else (node.this, node.expression)
            ):
                if self.typer.kind(part).family is Family.FLOAT:
                    raise refuse(ENGINE, "a DOUBLE turned into text (Spark writes 1.0E10)")
        if isinstance(node, exp.Concat):
            parts = [
                exp.Coalesce(
                    this=exp.Cast(this=self.form(p), to=exp.DataType.build("TEXT")),
                    expressions=[exp.Literal.string("")],
                )
                for p in node.expressions
            ]
            return exp.Concat(expressions=parts)
        if isinstance(node, (exp.Like, exp.ILike)):
            pattern = node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string) or "\\" in pattern.this:
                raise refuse(ENGINE, "LIKE with a computed pattern or a backslash in it")
            if not _simple_like(pattern.this):
                # Spark matches any other pattern as a Java regular expression, which
                # backtracks: '%a%a%a%a%b' cost n^4 steps on one person's long value (a
                # probe, 2026-12-02: 20 s against 1 s).
                raise refuse(
                    ENGINE,
                    "a LIKE pattern other than 'abc', 'abc%', '%abc', '%abc%' or 'abc%def' "
                    "(Spark matches it by backtracking)",
                )
            return self.children(node)
        if isinstance(node, exp.Round):
            digits = node.args.get("decimals")
            if digits is not None and not (
                isinstance(digits, exp.Literal)
                and digits.is_int
                and abs(int(digits.this)) <= _ROUND_DIGITS
            ):
                # Spark rounds by BigDecimal.setScale, whose cost grows with the digits:
                # ROUND(x, 100000000) ran 20 s on one person's rows.
                raise refuse(ENGINE, f"ROUND to more than {_ROUND_DIGITS} digits")
            if (
                digits is not None
                and int(digits.this) != 0
                and self.typer.kind(node.this).family is Family.FLOAT
            ):
                # DuckDB rounds the exact binary value (2.675 -> 2.67, 0.285 -> 0.28);
                # Spark rounds its shortest decimal text half up (2.68, 0.29)
                raise refuse(ENGINE, "ROUND of a DOUBLE to decimals")
            return self.children(node)
        if (
            isinstance(node, (exp.Floor, exp.Ceil))
            and node.args.get("decimals") is None
            and self.typer.kind(node.this).family is Family.FLOAT
        ):
            # Spark's FLOOR/CEIL of a DOUBLE is a BIGINT, saturated past 2^63 (NaN: 0);
            # DuckDB's is a DOUBLE
            fn = "FLOOR" if isinstance(node, exp.Floor) else "CEIL"
            return _once(
                lambda a: template(
                    f"CASE WHEN abs(__a) < {_DOUBLE_INTEGRAL} THEN CAST({fn}(__a) AS DOUBLE) "
                    "ELSE __a END",
                    a=a,
                ),
                self.form(node.this),
            )
        if isinstance(node, exp.Substring):
            for part, low in ((node.args.get("start"), 1), (node.args.get("length"), 0)):
                if part is not None and not (
                    isinstance(part, exp.Literal) and part.is_int and int(part.this) >= low
                ):
                    raise refuse(ENGINE, "SUBSTRING with computed or negative positions")
            return self.children(node)
        if isinstance(node, exp.DateTrunc | exp.TimestampTrunc):
            unit = node.args.get("unit")
            name = (unit.name if unit is not None else "").upper().strip("'")
            if name not in _TRUNC_UNITS:
                raise refuse(ENGINE, f"DATE_TRUNC to {name or 'a computed unit'}")
            return exp.TimestampTrunc(this=self.form(node.this), unit=exp.var(name))
        if isinstance(node, exp.Extract):
            part = _PART_NAMES.get(node.this.name.upper(), node.this.name.upper())
            if part not in _INTEGER_PARTS:
                raise refuse(ENGINE, f"EXTRACT({part})")
            out: exp.Expr = exp.Extract(this=exp.var(part), expression=self.form(node.expression))
            if part == "DOW":
                # Spark counts Sunday as 1, DuckDB as 0 (an answer oracle, 2026-12-05:
                # EXTRACT(dow ...) was answered one day off)
                out = exp.Sub(this=out, expression=exp.Literal.number(1))
            return exp.Cast(this=out, to=exp.DataType.build("BIGINT"))
        if isinstance(node, exp.TimeToStr):
            # DuckDB's strftime(x, '%Y-%m') as date_format(x, 'yyyy-MM') (sqlglot writes
            # the format) for the codes both read alike; dates are kept within the
            # years 1 to 9999 on Spark (forms.dates)
            if not strftime_supported(node):
                raise refuse(
                    ENGINE,
                    "strftime with a format other than %Y %m %d %H %M %S %y and - / : . _ ,",
                )
            if self.typer.kind(node.this).family not in (Family.DATE, Family.TIMESTAMP):
                raise refuse(ENGINE, "strftime of a non-date")
            return exp.TimeToStr(this=self.form(node.this), format=node.args["format"].copy())
        if isinstance(node, _STRUCTURAL):
            return self.children(node)
        raise refuse(ENGINE, f"{type(node).__name__.upper()} under a total form")

    def children(self, node: exp.Expr) -> exp.Expr:
        out = alone(node)  # the children are formed, not copied
        for key, value in node.args.items():
            if isinstance(value, exp.Expr):
                out.set(key, self.child(value))
            elif isinstance(value, list):
                out.set(key, [self.child(v) if isinstance(v, exp.Expr) else v for v in value])
        return out

    def child(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
            return self.children(node)
        if isinstance(node, (exp.DataType, exp.Identifier, exp.Var)):
            return node.copy()
        return self.form(node)

    def cast(self, node: exp.Cast) -> exp.Expr:
        target = of_data_type(node.to)
        source = self.typer.kind(node.this)
        inner = self.form(node.this)
        if source.family is Family.NULL:
            return exp.Cast(this=inner, to=node.to.copy())
        if target.family is Family.UNKNOWN or source.family is Family.UNKNOWN:
            raise refuse(ENGINE, f"a cast from {source.family} to {node.to.sql('duckdb')}")
        if target.family is Family.TEXT and source.family is Family.FLOAT:
            raise refuse(ENGINE, "a cast of a DOUBLE to text (Spark writes 1.0E10)")
        if target.family is Family.DECIMAL and source.family is Family.FLOAT:
            # DuckDB scales the binary value and rounds it (0.285 -> 0.28); Spark rounds
            # the shortest decimal text half up (0.29)
            scale = target.scale
            if target.precision and 0 <= scale <= _ROUND_DIGITS:
                inner = _round_double(inner, scale)
        if target.family is Family.INT and source.family is Family.FLOAT:
            inner = exp.Anonymous(this="bround", expressions=[inner])
        elif target.family is Family.INT and source.family is Family.DECIMAL:
            inner = exp.Round(this=inner)
        elif target.family is Family.INT and source.family is Family.TEXT:
            # DuckDB reads '12.7' as 13; Spark's integer cast of it is NULL
            inner = exp.Round(
                this=exp.TryCast(this=exp.Trim(this=inner), to=exp.DataType.build("DECIMAL(38, 9)"))
            )
        cast = exp.TryCast(this=inner, to=node.to.copy())
        if (
            target.family is Family.INT
            and target.bits in (8, 16, 32, 64)
            and source.family is not Family.BOOL
            and not (source.family is Family.INT and 0 < source.bits <= target.bits)
        ):
            # sqlglot prints TRY_CAST as CAST for Spark, and with ANSI off a narrowing
            # CAST wraps (INT -> TINYINT) or saturates (DOUBLE -> INT): NULL out of
            # range, as DuckDB's TRY_CAST
            lo, hi = -(2 ** (target.bits - 1)), 2 ** (target.bits - 1)
            return _once(
                lambda a: template(
                    f"CASE WHEN __a >= {lo} AND __a < {hi} THEN __c END",
                    a=a,
                    c=exp.TryCast(this=a.copy(), to=node.to.copy()),
                ),
                inner,
            )
        return cast
