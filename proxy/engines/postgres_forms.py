"""PostgreSQL's forms of the DuckDB-only constructs of a core (see render.py).

PostgreSQL has no TRY: an expression that raises on one row fails the whole query, and a
failure after the charge that depends on the data is a leak. So every expression DuckDB
evaluates under ``TRY(...)`` is rebuilt here from guarded pieces that cannot raise and
give DuckDB's value, node by node, from the node's DuckDB type (proxy/engines/kinds.py):

* integer ``+ - *``, negation and ABS are computed in NUMERIC (exact) and kept when the
  result fits DuckDB's result width, else NULL -- DuckDB's TRY of an overflow;
* float ``+ - * /`` are guarded before they can overflow or underflow to zero (errors
  on PostgreSQL) and give DuckDB's values there: +-Infinity, 0; ``/`` by zero gives
  IEEE's +-Infinity or NaN, as DuckDB's DOUBLE division does; integer and DECIMAL
  operands of ``/`` divide as DOUBLE, as DuckDB does; ``%`` by zero is NULL;
* casts: to an integer from DOUBLE rounds half to even (PostgreSQL's float8 casts use
  rint, as DuckDB does) and from DECIMAL half away from zero (both), range-checked
  first; from text through a regular-expression check; DOUBLE to DECIMAL through the
  shortest exact text form (PostgreSQL's float8-to-numeric cast keeps only 15 digits);
* ``date_trunc`` of a DATE truncates it as a TIMESTAMP (PostgreSQL would pick
  TIMESTAMPTZ, in the session's time zone); ``EXTRACT`` of integer parts is a BIGINT.

Anything else under TRY -- an unknown function, a regular expression, a LIKE pattern
with a backslash (an escape on PostgreSQL, a plain character in DuckDB), a cast with no
guard here -- is refused before any charge. The L0 hash and the keyed groupings use a
chain of PostgreSQL's seeded hash functions under the secret per-query seed (see
:meth:`PostgresForms.keyed_hash`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from proxy.engines.kinds import BIGINT, FLOAT, Family, Kind, Typer, choices, of_data_type
from proxy.engines.postgres_names import PostgresNames
from proxy.engines.postgres_per_person import narrow_sums
from proxy.engines.render import (
    HELD_ROW,
    CutForm,
    Held,
    alone,
    constant_items,
    keyed_list,
    placed,
    read_once,
    refuse,
    strftime_supported,
    template,
    uncast,
)
from proxy.string_growth import row_level, string_work_in

ENGINE = "postgres"
# PostgreSQL hashes an IN list of at least this many constants (MIN_ARRAY_SIZE_FOR_HASHED_SAOP)
_HASHED_LIST = 9


def _bigint_hash(value: exp.Expr, previous: exp.Expr) -> exp.Expr:
    """``hashint8extended(v, hashint8extended(v >> 32, previous))`` of ``value`` as a
    BIGINT (NULL as 0): its high half seeds the hash of the whole, which PostgreSQL folds
    to 32 bits."""
    whole = exp.Coalesce(
        this=exp.Cast(this=value, to=exp.DataType.build("BIGINT")),
        expressions=[exp.Literal.number(0)],
    )
    high = exp.BitwiseRightShift(this=whole.copy(), expression=exp.Literal.number(32))
    by_high = exp.Anonymous(this="hashint8extended", expressions=[high, previous])
    return exp.Anonymous(this="hashint8extended", expressions=[whole, by_high])


def _trimmed_number(value: exp.Expr) -> exp.Expr:
    """``value`` as a NUMERIC without trailing zeros (one text per number)."""
    return exp.Anonymous(
        this="trim_scale", expressions=[exp.Cast(this=value, to=exp.DataType.build("DECIMAL"))]
    )


def _trimmed_text(value: exp.Expr) -> exp.Expr:
    """``value``'s text without trailing spaces (as CHAR(n) compares)."""
    return exp.Anonymous(
        this="rtrim", expressions=[exp.Cast(this=value, to=exp.DataType.build("TEXT"))]
    )


def _bigint_literal(node: exp.Expr) -> bool:
    """Whether ``node`` is an integer literal (or its negation) that fits a BIGINT."""
    inner = node.this if isinstance(node, exp.Neg) else node
    if not isinstance(inner, exp.Literal) or inner.is_string:
        return False
    text = inner.this
    if not text.isdigit():
        return False
    value = -int(text) if isinstance(node, exp.Neg) else int(text)
    return -(2**63) <= value < 2**63


MAX_DOUBLE = "1.7976931348623e308"  # a hair below DBL_MAX: its guards stay on the safe side
HALF_MAX = "8.98846567431e307"
TINY = "1e-320"
# DuckDB's DOUBLE division by zero follows IEEE 754 (x/0 is +-Infinity, 0/0 NaN); both
# PostgreSQL and Spark would raise or give NULL instead. NaN first: it compares greater
# than every number on both engines.
IEEE_BY_ZERO = (
    "CASE WHEN __a = CAST('NaN' AS DOUBLE) OR __a = 0 THEN CAST('NaN' AS DOUBLE) "
    "WHEN __a > 0 THEN CAST('Infinity' AS DOUBLE) ELSE CAST('-Infinity' AS DOUBLE) END"
)  # below it a product or quotient underflows to zero (an error on PG)
# (a HUGEINT is an unconstrained NUMERIC, built as a node: see _pg_int)
_PG_INT = {8: "SMALLINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}
_SAFE = (
    exp.Column,
    exp.Literal,
    exp.Null,
    exp.Boolean,
)
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
    exp.Concat,
    exp.Floor,
    exp.Ceil,
    exp.Least,
    exp.Greatest,
)
_INTEGER_PARTS = {
    "YEAR",
    "QUARTER",
    "MONTH",
    "WEEK",
    "DAY",
    "DOW",
    "DOY",
    "HOUR",
    "MINUTE",
    "ISOYEAR",
    "DAYOFWEEK",
    "DAYOFYEAR",
}
_PG_PARTS = {"DAYOFWEEK": "DOW", "DAYOFYEAR": "DOY"}
_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}


def _int_range(bits: int) -> tuple[int, int]:
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _pg_int(bits: int) -> exp.DataType:
    """PostgreSQL's type for DuckDB's integer of ``bits`` (a HUGEINT: NUMERIC)."""
    return exp.DataType.build("DECIMAL") if bits == 128 else exp.DataType.build(_PG_INT[bits])


def _held_row(body: exp.Expr, held: list[Held]) -> exp.Expr:
    """PostgreSQL's read-once form (render.read_once): a scalar subquery over one row of
    the held operands. OFFSET 0 fences the row: without it the planner pulls it up and
    writes each operand back at each of its uses (a probe, 2026-12-04: the plan of
    ``(SELECT ... FROM (VALUES (x + 1)) AS o(v))`` read ``x + 1`` in place of each ``v``),
    which would multiply the work per row as the text did."""
    # (built in place: sqlglot's builders copy their operands, each a whole subtree)
    row = exp.Select(
        expressions=[exp.alias_(h.value, h.name, copy=False) for h in held],
        offset=exp.Offset(expression=exp.Literal.number(0)),
    )
    alias = exp.TableAlias(this=exp.to_identifier(HELD_ROW))
    return exp.Subquery(
        this=exp.Select(
            expressions=[body], from_=exp.From(this=exp.Subquery(this=row, alias=alias))
        )
    )


def _once(build: Callable[..., exp.Expr], *values: exp.Expr) -> exp.Expr:
    """``build(*values)`` with each large operand it repeats read once (render.read_once)."""
    return read_once(ENGINE, build, values, _held_row)


def _strictly_within(value: exp.Expr, lo: exp.Expr, hi: exp.Expr) -> exp.Expr:
    """``value`` if ``lo < value < hi``, else NULL (NULL, NaN and the infinities too),
    reading ``value`` once: clamped to [lo, hi], then the two ends made NULL (LEAST and
    GREATEST skip a NULL, which therefore becomes ``lo``, then NULL; NaN sorts above
    every number). A CASE would repeat ``value``, which nested guards multiply."""
    clamped = exp.Least(this=exp.Greatest(this=value, expressions=[lo]), expressions=[hi.copy()])
    return exp.Nullif(this=exp.Nullif(this=clamped, expression=hi), expression=lo.copy())


def _fits_int(value: exp.Expr, bits: int) -> exp.Expr:
    """``value`` (NUMERIC, an integer) as DuckDB's integer of ``bits``, NULL if it
    overflows.

    Read once (:func:`_strictly_within`), between bounds half a unit beyond the range:
    the same integers, and a cast of anything between them rounds into the range (no
    error even for a value that were not an integer). A HUGEINT stays an unconstrained
    NUMERIC, with its bounds NUMERIC constants: written into a template they were read
    as DuckDB SQL, where NUMERIC means DECIMAL(18, 3) (an error past 15 digits, on one
    person's rows: a probe, 2026-12-02) and a 39-digit number a DOUBLE."""
    lo, hi = _int_range(bits)
    kept = _strictly_within(value, _numeric_constant(f"{lo}.5"), _numeric_constant(f"{hi}.5"))
    return _numeric(kept) if bits == 128 else exp.Cast(this=kept, to=_pg_int(bits))


def _numeric(value: exp.Expr) -> exp.Expr:
    """``value`` as PostgreSQL's unconstrained NUMERIC. Built as a node, never written
    ``AS DECIMAL`` in a template: templates are read as DuckDB SQL, where a bare DECIMAL
    means DECIMAL(18, 3), which overflows past 15 digits (an error on the data)."""
    return exp.Cast(this=value, to=exp.DataType.build("DECIMAL"))


def _numeric_constant(text: str) -> exp.Expr:
    """A NUMERIC constant, e.g. a bound a NUMERIC is compared with. A number literal
    would be rendered as a DOUBLE (Forms.double), and comparing a NUMERIC with a DOUBLE
    converts the NUMERIC, which fails beyond a double's range (1e±308)."""
    return _numeric(exp.Literal.string(text))


def _guarded_double(number: exp.Expr) -> exp.Expr:
    """A NUMERIC as a DOUBLE as DuckDB converts it, never failing: beyond a double's
    range ±Infinity, below its smallest subnormal 0 (PostgreSQL raises on both)."""
    return _once(
        lambda n: template(
            "CASE WHEN ABS(__n) > __max THEN SIGN(__n) * CAST('Infinity' AS DOUBLE) "
            "WHEN ABS(__n) < __tiny THEN CAST(0 AS DOUBLE) "
            "ELSE CAST(__n AS DOUBLE) END",
            n=n,
            max=_numeric_constant(MAX_DOUBLE),
            tiny=_numeric_constant(TINY),
        ),
        number,
    )


def _double(value: exp.Expr, kind: Kind) -> exp.Expr:
    if kind.family is Family.FLOAT:
        return value
    if kind.family is Family.DECIMAL:
        # A NUMERIC past a double's range raises when cast (a probe, 2026-12-02: a
        # pinned person's value times 1e310, divided or added to a DOUBLE).
        return _guarded_double(value)
    return exp.Cast(this=value, to=exp.DataType.build("DOUBLE"))


# The years every engine's timestamps hold (DuckDB's key guard, per_person.DATE_KEY_RANGE,
# keeps keys within them too): PostgreSQL's TIMESTAMP ends in 294276 and starts in 4713
# BC, and date_trunc or a DATE read as its midnight raised beyond them.
_FIRST_DAY, _LAST_DAY = "0001-01-01", "9999-12-31"


def _plain_within(value: exp.Expr, family: Family) -> exp.Expr:
    """``value`` (of ``family``) if within the years 1-9999, else NULL, in its own type."""
    kind = "DATE" if family is Family.DATE else "TIMESTAMP"
    last = _LAST_DAY if family is Family.DATE else f"{_LAST_DAY} 23:59:59.999999"
    return _once(
        lambda v: template(
            f"CASE WHEN __v BETWEEN CAST('{_FIRST_DAY}' AS {kind}) AND CAST('{last}' AS {kind}) "
            "THEN __v END",
            v=v,
        ),
        value,
    )


def _date_as_timestamp(value: exp.Expr) -> exp.Expr:
    """A DATE as a TIMESTAMP, NULL beyond the last day a TIMESTAMP holds."""
    return _once(
        lambda a: template(
            "CASE WHEN __a < DATE '294276-12-31' THEN CAST(__a AS TIMESTAMP) END", a=a
        ),
        value,
    )


def _within_timestamps(value: exp.Expr, family: Family) -> exp.Expr:
    """A DATE or TIMESTAMP ``value`` as a TIMESTAMP, NULL outside the years 1-9999
    (infinities included), so that no later step can overflow on it."""
    ifs = value.args.get("ifs") if isinstance(value, exp.Case) else None
    # Already read within those years (the core's date keys: per_person's
    # _truncated_within): testing again only costs a row its comparisons.
    if (
        ifs
        and len(ifs) == 1
        and value.args.get("default") is None
        and value == _plain_within(ifs[0].args["true"].copy(), family)
    ):
        if family is Family.DATE:
            return exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP"))
        return value
    if family is Family.DATE:
        return _once(
            lambda v: template(
                f"CASE WHEN __v BETWEEN CAST('{_FIRST_DAY}' AS DATE) "
                f"AND CAST('{_LAST_DAY}' AS DATE) THEN CAST(__v AS TIMESTAMP) END",
                v=v,
            ),
            value,
        )
    return _plain_within(value, family)


class PostgresForms:
    engine = ENGINE
    dialect = "postgres"
    cut = CutForm.GROUPED  # bench/pg_cut.py measures the three forms

    def __init__(
        self,
        schema_of: dict[str, str] | None = None,
        base_tables: frozenset[tuple[str, str]] = frozenset(),
        wide_numerics: frozenset[tuple[str, str, str]] = frozenset(),
        names: PostgresNames | None = None,
    ):
        # catalog schema -> PostgreSQL schema ("main" is DuckDB's default, "public" PG's)
        self._schema_of = schema_of or {"main": "public"}
        # the server's own spelling of the catalog's lower-case names (capitals kept)
        self._names = names
        # (db, table) of the base tables, in the catalog's naming: what the INTEGER sums
        # of postgres_per_person may read (a view's rows have no bound).
        self.base_tables = base_tables
        # (db, table, column) of the NUMERIC columns without a precision of at most 38,
        # typed DECIMAL(38, 9) in the catalog (see source_values).
        self.wide_numerics = wide_numerics

    def parameter(self, index: int) -> str:
        return f"${index + 1}"

    def table(self, db: str, name: str) -> exp.Table:
        schema, table = (
            self._names.table(db, name)
            if self._names is not None
            else (self._schema_of.get(db, db), name)
        )
        return exp.Table(
            this=exp.to_identifier(table, quoted=True),
            db=exp.to_identifier(schema, quoted=True),
        )

    def column(self, db: str, table: str, name: str) -> str | None:
        return self._names.column(db, table, name) if self._names is not None else None

    def once(self, build: Callable[..., exp.Expr], *values: exp.Expr) -> exp.Expr:
        return _once(build, *values)

    def fence_rows(self, tree: exp.Expr) -> None:
        """OFFSET 0 on each row-level CTE and FROM subquery: PostgreSQL otherwise pulls
        it up and writes its list back into every expression that reads it, so that an
        aggregate's argument ran once for each aggregate reading it, clamps and guards
        included (a probe, 2026-12-06: one LIKE under SUM, AVG, VAR_SAMP and STDDEV ran
        about 100 times a row and timed out after the charge on one person's text). A
        fenced subquery's list runs once per row, as DuckDB runs it; what it repeats
        within that list is counted by string_growth.check_rendered_rows."""
        for select in list(tree.find_all(exp.Select)):
            holder = select.parent
            if not isinstance(holder, exp.CTE) and not (
                isinstance(holder, exp.Subquery) and isinstance(holder.parent, (exp.From, exp.Join))
            ):
                continue
            if select.args.get("limit") or select.args.get("offset") or select.args.get("order"):
                continue
            # only where the list works on strings: a fence also stops PostgreSQL from
            # planning the aggregation above it in parallel (a review, 2026-12-06)
            if row_level(select) and string_work_in(select):
                select.set("offset", exp.Offset(expression=exp.Literal.number(0)))

    def source_values(self, tree: exp.Expr, ctes: set[str]) -> None:
        """Read each wide NUMERIC column as the DECIMAL(38, 9) its catalog type says:
        rounded to 9 places, NULL at or beyond 1e29 (and for NaN and the infinities).

        An unconstrained NUMERIC (or one of more than 38 digits) holds values no DuckDB
        DECIMAL can, such as 1e-401 or 1e400; the forms' guards assume the catalog's
        range, and PostgreSQL raised on converting such a value to a DOUBLE or a REAL,
        after the charge and only when a person's row held one (a probe, 2026-12-02).
        """
        if not self.wide_numerics:
            return
        tables = {
            t.alias_or_name.lower(): ((t.db or "main").lower(), t.name.lower())
            for t in tree.find_all(exp.Table)
            if t.db or t.name.lower() not in ctes
        }
        for column in list(tree.find_all(exp.Column)):
            table = tables.get(column.table.lower())
            if table is None or (*table, column.name.lower()) not in self.wide_numerics:
                continue
            value = template(
                "CASE WHEN ABS(__c) < __b THEN ROUND(__c, 9) END",
                c=column.copy(),
                b=_numeric_constant("1e29"),
            )
            if isinstance(column.parent, exp.Select) and column.arg_key == "expressions":
                value = exp.alias_(value, column.name)
            column.replace(value)

    def keyed_hash(self, values: list[exp.Expr], kinds: list[Kind], seed: exp.Expr) -> exp.Expr:
        """A 64-bit hash of ``values`` (of DuckDB kinds ``kinds``) under the secret
        per-query ``seed``: the L0 cut's order of a person's groups, and the keyed first
        column of a grouping or join (proxy/rewrite/keyed_groups.py).

        It chains PostgreSQL's seeded hash functions, each value's hash seeding the
        next. Not ``hash_record_extended``: it hashes a BIGINT with
        ``hashint8extended``, which folds the value to 32 bits first, so 2^32 BIGINTs
        share one hash under every seed (grouping 32,768 of them took 150 s against
        0.03 s, RELIABILITY.md §7). Here a BIGINT's high half seeds the hash of the
        whole value.
        Texts, NUMERICs, dates and timestamps are hashed as their text behind a secret
        prefix (as on DuckDB): NUMERICs with their trailing zeros trimmed (PostgreSQL
        groups 1.0 and 1.00 as one value), texts without trailing spaces (a CHAR(n)
        equals a VARCHAR with them), timestamps as their epoch (a TIMESTAMP equals a
        TIMESTAMPTZ of the same instant; their texts differ). Floats go through ``hashfloat8extended``,
        which hashes -0.0 and 0.0 alike, as PostgreSQL groups them. A NULL hashes as
        0, '' or NaN would, so the chain goes on. Values the typer cannot type are left
        out: their text need not be one per group (an INTERVAL's '1 day' and '24
        hours' are one). Like DuckDB's HASH it is not a cryptographic PRF: the L0
        bound holds for every seed, and the seed makes the choice of kept groups and
        the buckets unpredictable."""
        hashed = seed
        for value, kind in zip(values, kinds, strict=True):
            step = self._hash_step(value, kind, hashed, seed)
            if step is not None:
                hashed = step
        return hashed

    def _hash_step(
        self, value: exp.Expr, kind: Kind, previous: exp.Expr, seed: exp.Expr
    ) -> exp.Expr | None:
        simple = isinstance(value, (exp.Column, exp.Literal))
        if kind.family is Family.BOOL or (
            kind.family is Family.INT and 0 < kind.bits <= 64 and simple
        ):
            whole = value.copy()
            if kind.family is Family.BOOL:
                whole = exp.Cast(this=whole, to=exp.DataType.build("INT"))
            return _bigint_hash(whole, previous)
        if kind.family is Family.FLOAT:
            number = exp.Coalesce(
                this=exp.Cast(this=value.copy(), to=exp.DataType.build("DOUBLE")),
                expressions=[
                    exp.Cast(this=exp.Literal.string("NaN"), to=exp.DataType.build("DOUBLE"))
                ],
            )
            return exp.Anonymous(this="hashfloat8extended", expressions=[number, previous])
        if kind.family in (Family.TEXT, Family.DECIMAL, Family.INT, Family.DATE, Family.TIMESTAMP):
            canonical = value.copy()
            if kind.family is Family.DECIMAL or (
                kind.family is Family.INT and not 0 < kind.bits <= 64
            ):
                canonical = _trimmed_number(canonical)
            elif kind.family is Family.TIMESTAMP:
                # the instant, not its text: a TIMESTAMP equals a TIMESTAMPTZ of the same
                # instant (in the session's UTC), and their texts differ by "+00" (a
                # probe: such a join matched nothing). EXTRACT never fails (a CAST to
                # TIMESTAMP did on a TIMESTAMPTZ(0) rounded past the TIMESTAMP range),
                # and binds only for dates, timestamps and intervals, so a text the typer
                # took for a timestamp is refused when the core is bound. A total text of
                # the instant gained little (REPLACE of the "+00": 0.46-0.50 s against
                # 0.54-0.56 s per 1M rows, a few percent of a private miss; measurement
                # notes), so the reviewed form stays.
                canonical = exp.Extract(this=exp.var("EPOCH"), expression=canonical)
            elif kind.family is Family.TEXT:
                # a CHAR(n) equals a VARCHAR with trailing spaces (bpchareq ignores them),
                # and CHAR(n)'s text drops them (a probe: a join lost those rows)
                canonical = _trimmed_text(canonical)
            return self._text_hash(canonical, previous, seed)
        return None

    def _text_hash(self, canonical: exp.Expr, previous: exp.Expr, seed: exp.Expr) -> exp.Expr:
        """``hashtextextended`` of ``canonical``'s text (NULL as '') behind the secret
        prefix, seeded by ``previous``."""
        text = exp.Coalesce(
            this=exp.Cast(this=canonical, to=exp.DataType.build("TEXT")),
            expressions=[exp.Literal.string("")],
        )
        behind = exp.DPipe(this=self._prefix(seed), expression=text, safe=True)
        return exp.Anonymous(this="hashtextextended", expressions=[behind, previous])

    @staticmethod
    def _prefix(seed: exp.Expr) -> exp.Expr:
        """Secret text 8 to 15 characters long from the seed (keyed_groups._prefix's)."""
        digits = exp.Cast(
            this=exp.Anonymous(
                this="hashint8extended", expressions=[exp.Literal.number(1), seed.copy()]
            ),
            to=exp.DataType.build("TEXT"),
        )
        length = exp.Add(
            this=exp.Literal.number(8),
            expression=exp.Cast(
                this=exp.Mod(this=seed.copy(), expression=exp.Literal.number(8)),
                to=exp.DataType.build("INT"),
            ),
        )
        return exp.Substring(this=digits, start=exp.Literal.number(1), length=length)

    def rows_by_person(self, rows: exp.Select) -> None:
        """Nothing: the GROUPED cut's sort already brings each person's rows together."""

    def dates(self, tree: exp.Expr, typer: Typer) -> None:
        """PostgreSQL converts dates and timestamps without overflow (its ranges hold
        DuckDB's, infinity included): nothing to do."""

    def in_lists(self, tree: exp.Expr, typer: Typer) -> None:
        """An IN list of 9 or more constants, which PostgreSQL looks up in a hash table
        of its own (a hashed ScalarArrayOp), unkeyed: one person's BIGINTs that fold
        alike with the constants walked all of them per row (a probe: 0.38 s against
        0.02 s, 131,072 rows and 1,400 constants).

        For integers, DECIMALs and text, ``x IN (c1, ...)`` becomes ``CASE WHEN k(x) IN
        (k(c1), ...) THEN x IN (c1, ...) ELSE ... END`` with k a keyed hash of the
        value (integers and DECIMALs as their NUMERIC text without trailing zeros, so a
        constant of any numeric spelling hashes as the equal value does; text without
        trailing spaces). CASE fixes the order: only rows whose keyed hash is listed
        meet the list itself. Where k(x) is not listed, x is not (equal values hash
        alike), and the ELSE gives what ``x IN (...)`` gives then: NULL for a NULL x or
        a list holding NULL, else FALSE. Dates and booleans are left alone (PostgreSQL
        hashes them one-to-one); any other kind becomes ``x = c1 OR x = c2 OR ...``,
        the same three-valued answer, which PostgreSQL 15 evaluates without a hash
        table."""
        # Innermost first (find_all walks outer nodes first): each form writes its
        # operand anew, so an outer list replaced first carried its operand's inner list
        # away unkeyed, and the inner one was keyed in the detached original (a review,
        # 2026-12-04). The operand, which may now hold inner forms, is read once when
        # large (render.read_once), so nested lists do not multiply.
        for node in reversed(list(tree.find_all(exp.In))):
            if not constant_items(node, _HASHED_LIST):
                continue  # short, or not all constants: PostgreSQL does not hash it
            kind = typer.kind(node.this)
            if kind.family in (Family.DATE, Family.BOOL, Family.NULL) or (
                kind.family is Family.INT and 0 < kind.bits <= 32
            ):
                continue
            items = list(node.expressions)
            if kind.family in (Family.INT, Family.DECIMAL, Family.TEXT):
                node.replace(
                    _once(
                        lambda x, items=items, kind=kind: self._keyed_list(
                            exp.In(this=x, expressions=items), kind
                        ),
                        node.this,
                    )
                )
            else:
                node.replace(
                    _once(
                        lambda x, items=items: exp.Paren(
                            this=exp.or_(
                                *(exp.EQ(this=x.copy(), expression=i.copy()) for i in items),
                                copy=False,
                            )
                        ),
                        node.this,
                    )
                )

    def _keyed_list(self, node: exp.In, kind: Kind) -> exp.Expr:
        seed = exp.Placeholder(this="1")
        nulls = [i for i in node.expressions if isinstance(uncast(i), exp.Null)]
        # integers listed as integer literals that fit a BIGINT: keyed as BIGINTs, a
        # BIGINT's high half seeding the hash of the whole (about a tenth of the NUMERIC
        # text's cost per row); any other spelling through the NUMERIC text
        as_bigint = kind.family is Family.INT and all(
            _bigint_literal(i) for i in node.expressions if not any(i is n for n in nulls)
        )

        def keyed(value: exp.Expr) -> exp.Expr:
            if as_bigint:
                return _bigint_hash(value, seed.copy())
            canonical = (
                _trimmed_text(value) if kind.family is Family.TEXT else _trimmed_number(value)
            )
            return self._text_hash(canonical, seed.copy(), seed)

        return keyed_list(node, keyed)

    def decimal_texts(self, tree: exp.Expr, typer: Typer) -> None:
        """Every DECIMAL cast to text written with its DuckDB type's scale (ROUND to
        it: PostgreSQL's NUMERIC carries a scale per value, so ``d`` and ``d * 1.0``
        of one value wrote '1.50' and '1.500', and a DECIMAL key, grouped as its text,
        split into two groups: a probe), or without trailing zeros where the typer
        does not know the scale. ROUND never raises."""
        for cast in list(tree.find_all(exp.Cast, exp.TryCast)):
            if of_data_type(cast.to).family is not Family.TEXT:
                continue
            kind = typer.kind(cast.this)
            if kind.family is not Family.DECIMAL:
                continue
            value = cast.this  # moved, not copied: a cast inside it is still to come
            canonical = (
                exp.Round(this=value, decimals=exp.Literal.number(kind.scale))
                if kind.precision
                else exp.Anonymous(this="trim_scale", expressions=[value])
            )
            cast.set("this", canonical)

    def per_person(self, tree: exp.Expr, typer: Typer) -> None:
        """Small clamped integers summed as INTEGER (proxy/engines/postgres_per_person.py);
        text and NUMERIC states stay in PostgreSQL's hash aggregation as they are."""
        narrow_sums(tree, typer, self.base_tables)
        # (and PostgreSQL's forms of what DuckDB does with booleans, on the whole tree)
        _boolean_extremes(tree, typer)
        _boolean_comparisons(tree, typer)

    def exact_sum(self, node: exp.Sum, argument: Kind) -> exp.Expr:
        # SUM(integer) is NUMERIC on PostgreSQL: exact, like DuckDB's 128-bit sum.
        return node

    def wide_integer(self) -> exp.DataType:
        return exp.DataType.build("DECIMAL")  # NUMERIC: exact, like DuckDB's HUGEINT

    def float_op(self, node: exp.Mul | exp.Div, typer: Typer) -> exp.Expr:
        """A DOUBLE product or quotient outside TRY (the rewrite's scaled sums and
        centred squares): PostgreSQL raises where one underflows to zero (squares of
        values near 1e-200), which would fail a query after its charge; guarded, it
        gives DuckDB's 0."""
        if typer.kind(node).family is not Family.FLOAT:
            return node
        a = _double(node.left, typer.kind(node.left))
        b = _double(node.right, typer.kind(node.right))
        if isinstance(node, exp.Mul):
            return _Total(typer).float_product(a, b)
        return _Total(typer).float_quotient(a, b)

    def double(self, text: str) -> exp.Expr:
        # PostgreSQL reads a bare 1e300 as a NUMERIC
        number = exp.Literal.string("Infinity") if text == "inf" else exp.Literal.number(text)
        return exp.Cast(this=number, to=exp.DataType.build("DOUBLE"))

    # --- total forms -----------------------------------------------------------------

    def total(self, node: exp.Expr, typer: Typer) -> exp.Expr:
        # TRY(...) is a call: its form takes its place under any operator, so a bare
        # operator at the top of the form keeps its grouping in parentheses.
        return _grouped(_Total(typer).form(node))


# Operators sqlglot prints without parentheses of their own (a tree needs a Paren node
# wherever an operator sits under a tighter-binding one).
_OPERATORS = (exp.Binary, exp.Not, exp.Neg, exp.BitwiseNot, exp.Between, exp.In, exp.Is)


def _grouped(node: exp.Expr) -> exp.Expr:
    """``node`` in parentheses when it is a bare operator."""
    return exp.Paren(this=node) if isinstance(node, _OPERATORS) else node


def _boolean_extremes(tree: exp.Expr, typer: Typer) -> None:
    """MIN/MAX over BOOLEAN (the per-person key of a one-row-per-person grouping,
    proxy/rewrite/per_person.py, and key_join.py) as BOOL_AND/BOOL_OR: PostgreSQL has
    no min(boolean), and FALSE < TRUE makes them the same aggregate."""
    for node in list(tree.find_all(exp.Min, exp.Max)):
        if node.args.get("count") is not None or node.args.get("expressions"):
            continue
        if typer.kind(node.this).family is Family.BOOL:
            kind = exp.LogicalAnd if isinstance(node, exp.Min) else exp.LogicalOr
            node.replace(kind(this=node.this.copy()))


_ORDERED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def _boolean_comparisons(tree: exp.Expr, typer: Typer) -> None:
    """A comparison of an integer with a boolean (``married = TRUE``) as DuckDB reads it:
    the boolean as the integer 0 or 1 (``2 = TRUE`` is false there). PostgreSQL has no
    such operator and refused the query with its own words (an answer oracle,
    2026-12-05)."""
    for node in list(tree.find_all(*_ORDERED)):
        sides = (node.this, node.expression)
        families = [typer.kind(side).family for side in sides]
        if sorted(families) != sorted((Family.BOOL, Family.INT)):
            continue
        flag = sides[families.index(Family.BOOL)]
        flag.replace(exp.Cast(this=flag.copy(), to=exp.DataType.build("INT")))


class _Total:
    def __init__(self, typer: Typer):
        # Kinds remembered while a total form is built: it types the levels of the
        # expression it is given, which it never changes (it builds a new one), and
        # typing a node types its subtree (160 nested COALESCEs: 78,000 kinds asked)
        self.typer = typer.remembering()

    def kind(self, node: exp.Expr) -> Kind:
        return self.typer.kind(node)

    def form(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Try):
            return self.form(node.this)
        if isinstance(node, _SAFE):
            return node.copy()
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            return self.arithmetic(node)
        if isinstance(node, exp.Div):
            return self.divide(node)
        if isinstance(node, exp.IntDiv):
            return self.int_divide(node)
        if isinstance(node, exp.Mod):
            return self.modulo(node)
        if isinstance(node, (exp.Neg, exp.Abs)):
            return self.sign_op(node)
        if isinstance(node, (exp.Like, exp.ILike)):
            return self.like(node)
        if isinstance(node, exp.Substring):
            return self.substring(node)
        if isinstance(node, exp.DateTrunc | exp.TimestampTrunc):
            return self.date_trunc(node)
        if isinstance(node, exp.Extract):
            return self.extract(node)
        if isinstance(node, exp.TimeToStr):
            return self.time_to_str(node)
        if isinstance(node, exp.Round):
            return self.round(node)
        if isinstance(node, (exp.Coalesce, exp.Least, exp.Greatest, exp.Case, exp.If)):
            return self.choice(node)
        if isinstance(node, _STRUCTURAL):
            return self.children(node)
        raise refuse(ENGINE, f"{type(node).__name__.upper()} under a total form")

    def choice(self, node: exp.Expr) -> exp.Expr:
        """COALESCE, LEAST, GREATEST and CASE over DATEs and TIMESTAMPs: PostgreSQL
        casts each DATE to the TIMESTAMP they share, and raised on one beyond 294276
        (a review, 2026-12-04: `COALESCE(<a far date on one person's rows>, ts)` failed
        on D only, after the charge). A DATE there is read as a TIMESTAMP or NULL, as
        the cast form does; comparisons are left alone (PostgreSQL's cross-type
        comparisons of a DATE with a TIMESTAMP do not raise)."""
        out = self.children(node)
        families = [self.kind(o).family for o in choices(node)]
        if Family.TIMESTAMP in families and Family.DATE in families:
            for operand, family in zip(choices(out), families, strict=True):
                if family is Family.DATE:
                    operand.replace(_date_as_timestamp(operand.copy()))
        return out

    def children(self, node: exp.Expr) -> exp.Expr:
        out = alone(node)  # the children are formed, not copied
        for key, value in node.args.items():
            if isinstance(value, exp.Expr):
                out.set(key, self.child(value))
            elif isinstance(value, list):
                out.set(key, [self.child(v) if isinstance(v, exp.Expr) else v for v in value])
        return out

    def child(self, node: exp.Expr) -> exp.Expr:
        # Structural helpers (CASE branches, data types, identifiers) are not values.
        if isinstance(node, (exp.If,)) and isinstance(node.parent, exp.Case):
            return self.children(node)
        if isinstance(node, (exp.DataType, exp.Identifier, exp.Var)):
            return node.copy()
        return self.form(node)

    # --- arithmetic ---------------------------------------------------------------------

    def arithmetic(self, node: exp.Binary) -> exp.Expr:
        kind = self.kind(node)
        left, right = self.form(node.left), self.form(node.right)
        op = "+" if isinstance(node, exp.Add) else "-" if isinstance(node, exp.Sub) else "*"
        if kind.family in (Family.INT, Family.DECIMAL):
            # exact in NUMERIC (built in place: a template copies its operands, a whole
            # chain at each level)
            exact = type(node)(this=_numeric(left), expression=_numeric(right))
            if kind.family is Family.INT:
                return _fits_int(exact, kind.bits)
            # DuckDB's DECIMAL is exact up to 38 digits; beyond, TRY gives NULL.
            return _strictly_within(exact, _numeric_constant("-1e38"), _numeric_constant("1e38"))
        if kind.family is Family.FLOAT:
            a = _double(left, self.kind(node.left))
            b = _double(right, self.kind(node.right))
            if op == "*":
                return self.float_product(a, b)
            signed = "__b" if op == "+" else "-__b"
            return _once(
                lambda a, b: template(
                    f"CASE WHEN ABS(__a) <= {HALF_MAX} AND ABS(__b) <= {HALF_MAX} "
                    f"THEN __a {op} __b "
                    f"WHEN SIGN(__a) <> SIGN({signed}) THEN __a {op} __b "
                    f"WHEN ABS(__a) <= {MAX_DOUBLE} - ABS(__b) THEN __a {op} __b "
                    "ELSE SIGN(__a) * CAST('Infinity' AS DOUBLE) END",
                    a=a,
                    b=b,
                ),
                a,
                b,
            )
        raise refuse(ENGINE, f"arithmetic on {kind.family} values")

    def float_product(self, a: exp.Expr, b: exp.Expr) -> exp.Expr:
        return _once(
            lambda a, b: template(
                "CASE WHEN __a = 0 OR __b = 0 THEN __a * __b "
                f"WHEN ABS(__b) <= 1 AND ABS(__a) < {TINY} / ABS(__b) "
                "THEN CAST(0 AS DOUBLE) "
                f"WHEN ABS(__b) > 1 AND ABS(__a) > {MAX_DOUBLE} / ABS(__b) "
                "THEN SIGN(__a) * SIGN(__b) * CAST('Infinity' AS DOUBLE) "
                "ELSE __a * __b END",
                a=a,
                b=b,
            ),
            a,
            b,
        )

    def divide(self, node: exp.Div) -> exp.Expr:
        lk, rk = self.kind(node.left), self.kind(node.right)
        if not (lk.numeric and rk.numeric):
            raise refuse(ENGINE, "a division of non-numbers")
        return self.float_quotient(
            _double(self.form(node.left), lk), _double(self.form(node.right), rk)
        )

    def float_quotient(self, a: exp.Expr, b: exp.Expr) -> exp.Expr:
        return _once(
            lambda a, b: template(
                f"CASE WHEN __b = 0 THEN {IEEE_BY_ZERO} WHEN __a = 0 THEN __a / __b "
                f"WHEN ABS(__b) < 1 AND ABS(__a) > {MAX_DOUBLE} * ABS(__b) "
                "THEN SIGN(__a) * SIGN(__b) * CAST('Infinity' AS DOUBLE) "
                f"WHEN ABS(__b) > 1 AND ABS(__a) < {TINY} * ABS(__b) THEN CAST(0 AS DOUBLE) "
                "ELSE __a / __b END",
                a=a,
                b=b,
            ),
            a,
            b,
        )

    def int_divide(self, node: exp.IntDiv) -> exp.Expr:
        """DuckDB's ``//``: two integers truncated towards zero (NULL by zero, and NULL
        where the quotient overflows, as TRY gives), anything else divided as ``/``.
        Computed in NUMERIC, exact; NULLIF rather than a CASE, so that a constant zero
        divisor folds to NULL instead of raising when PostgreSQL plans the query."""
        kind = self.kind(node)
        if kind.family is not Family.INT:
            return self.divide(exp.Div(this=node.left, expression=node.right))
        quotient = placed(
            "TRUNC(__a / NULLIF(__b, 0))",
            a=_numeric(self.form(node.left)),
            b=_numeric(self.form(node.right)),
        )
        return _fits_int(quotient, kind.bits)

    def modulo(self, node: exp.Mod) -> exp.Expr:
        kind = self.kind(node)
        if kind.family is not Family.INT:
            raise refuse(ENGINE, "% on non-integers")
        return _once(
            lambda a, b: template("CASE WHEN __b = 0 THEN NULL ELSE MOD(__a, __b) END", a=a, b=b),
            self.form(node.left),
            self.form(node.right),
        )

    def sign_op(self, node: exp.Expr) -> exp.Expr:
        kind = self.kind(node.this)
        inner = self.form(node.this)
        fn = "-" if isinstance(node, exp.Neg) else "ABS"

        def signed(value: exp.Expr) -> exp.Expr:
            # `-(v)` or `ABS(v)` built around the operand itself: a template copies its
            # parts, the whole chain below at each level (160 nested ABS: 6.4 s)
            return exp.Neg(this=exp.Paren(this=value)) if fn == "-" else exp.Abs(this=value)

        if kind.family is Family.INT:
            return _fits_int(signed(_numeric(inner)), kind.bits)
        if kind.numeric:
            return signed(inner)
        raise refuse(ENGINE, f"{fn} of a non-number")

    def round(self, node: exp.Round) -> exp.Expr:
        kind = self.kind(node.this)
        inner = self.form(node.this)
        digits = node.args.get("decimals")
        if kind.family in (Family.INT, Family.DECIMAL):
            out = exp.Round(this=_numeric(inner))
            if digits is not None:
                if not (isinstance(digits, exp.Literal) and digits.is_int):
                    raise refuse(ENGINE, "ROUND to a computed number of digits")
                out.set("decimals", digits.copy())
            return out
        if kind.family is Family.FLOAT and digits is None:
            # DuckDB rounds a DOUBLE half away from zero; PostgreSQL's round(float8) is
            # rint (half to even).
            return _once(
                lambda a: template(
                    "CASE WHEN __a >= 0 THEN FLOOR(__a + 0.5) ELSE CEIL(__a - 0.5) END", a=a
                ),
                inner,
            )
        raise refuse(ENGINE, "ROUND of a DOUBLE to decimals")

    # --- strings and dates ----------------------------------------------------------------

    def like(self, node: exp.Expr) -> exp.Expr:
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string) or "\\" in pattern.this:
            raise refuse(ENGINE, "LIKE with a computed pattern or a backslash in it")
        return self.children(node)

    def substring(self, node: exp.Substring) -> exp.Expr:
        start, length = node.args.get("start"), node.args.get("length")
        for part, low in ((start, 1), (length, 0)):
            if part is None:
                continue
            if not (isinstance(part, exp.Literal) and part.is_int and int(part.this) >= low):
                raise refuse(ENGINE, "SUBSTRING with computed or negative positions")
        return self.children(node)

    def date_trunc(self, node: exp.Expr) -> exp.Expr:
        unit = node.args.get("unit")
        name = (unit.name if unit is not None else "").upper().strip("'")
        if name not in _TRUNC_UNITS:
            raise refuse(ENGINE, f"DATE_TRUNC to {name or 'a computed unit'}")
        value = node.this
        kind = self.kind(value)
        if kind.family not in (Family.DATE, Family.TIMESTAMP):
            raise refuse(ENGINE, "DATE_TRUNC of a non-date")
        inner = _within_timestamps(self.form(value), kind.family)
        return exp.TimestampTrunc(this=inner, unit=exp.var(name))

    def extract(self, node: exp.Extract) -> exp.Expr:
        part = node.this.name.upper()
        if part not in _INTEGER_PARTS:
            raise refuse(ENGINE, f"EXTRACT({part})")
        kind = self.kind(node.expression)
        if kind.family not in (Family.DATE, Family.TIMESTAMP):
            raise refuse(ENGINE, f"EXTRACT({part}) of a non-date")
        # PostgreSQL has no HOUR or MINUTE of a DATE (DuckDB: 0), and raises on them
        # only when a row reaches them: a DATE is read as its midnight, within the years
        # a TIMESTAMP holds.
        value = _within_timestamps(self.form(node.expression), kind.family)
        # PostgreSQL's names (it raises on DAYOFWEEK and DAYOFYEAR, again only per row).
        unit = _PG_PARTS.get(part, part)
        # An infinite date's parts are infinite, which no BIGINT holds: NULL, as
        # DuckDB's TRY gives.
        return _once(
            lambda v: template(
                "CASE WHEN ISFINITE(__v) THEN __e END",
                v=v,
                e=exp.Cast(
                    this=exp.Extract(this=exp.var(unit), expression=v.copy()),
                    to=exp.DataType.build("BIGINT"),
                ),
            ),
            value,
        )

    def time_to_str(self, node: exp.TimeToStr) -> exp.Expr:
        """DuckDB's ``strftime(x, '%Y-%m')`` as ``to_char(x, 'YYYY-MM')`` (sqlglot writes
        the format) for the codes both read alike, of a date within the years a
        TIMESTAMP holds here (else NULL, as EXTRACT)."""
        if not strftime_supported(node):
            raise refuse(
                ENGINE, "strftime with a format other than %Y %m %d %H %M %S %y and - / : . _ ,"
            )
        kind = self.kind(node.this)
        if kind.family not in (Family.DATE, Family.TIMESTAMP):
            raise refuse(ENGINE, "strftime of a non-date")
        value = _within_timestamps(self.form(node.this), kind.family)
        return exp.TimeToStr(this=value, format=node.args["format"].copy())

    # --- casts ------------------------------------------------------------------------

    def cast(self, node: exp.Cast) -> exp.Expr:
        target = of_data_type(node.to)
        source = self.kind(node.this)
        inner = self.form(node.this)
        to = node.to.copy()
        if source.family is Family.NULL or isinstance(node.this, exp.Literal):
            # A literal is cast once, while PostgreSQL plans the query: a bad one is
            # refused by describe, before any charge, whatever the data.
            return exp.Cast(this=inner, to=to)
        if target.family is Family.TEXT:
            return exp.Cast(this=inner, to=exp.DataType.build("TEXT"))
        if target == source and target.family is not Family.DECIMAL:
            # The cast goes, its grouping must not: CAST(a OR b AS BOOLEAN) AND c
            # printed as `a OR b AND c` is a different filter.
            return _grouped(inner)
        if target.family is Family.INT:
            return self.to_int(inner, source, target.bits)
        if target.family is Family.DECIMAL:
            return self.to_decimal(inner, source, to)
        if target.family is Family.FLOAT:
            return self.to_double(inner, source, to)
        if target.family is Family.BOOL and source.family is Family.INT:
            return template("__a <> 0", a=inner)
        if target.family is Family.DATE and source.family is Family.TIMESTAMP:
            return exp.Cast(this=inner, to=to)
        if target.family is Family.TIMESTAMP and source.family is Family.DATE:
            return _date_as_timestamp(inner)
        raise refuse(ENGINE, f"a cast from {source.family} to {node.to.sql('duckdb')}")

    def to_int(self, inner: exp.Expr, source: Kind, bits: int) -> exp.Expr:
        lo, hi = _int_range(bits)
        if source.family is Family.INT:
            return _fits_int(_numeric(inner), bits)
        if source.family is Family.BOOL:
            return _fits_int(exp.Cast(this=inner, to=exp.DataType.build("INTEGER")), bits)
        if source.family is Family.DECIMAL:
            # numeric -> integer rounds half away from zero on both engines
            return _fits_int(exp.Round(this=_numeric(inner)), bits)
        if source.family is Family.FLOAT:
            # float8 -> integer rounds with rint (half to even) on both engines
            # (the type as a node: a template would read NUMERIC as DECIMAL(18, 3))
            return _once(
                lambda a: template(
                    f"CASE WHEN ROUND(__a) >= {lo} AND ROUND(__a) < {hi + 1} THEN __c END",
                    a=a,
                    c=exp.Cast(this=a.copy(), to=_pg_int(bits)),
                ),
                inner,
            )
        if source.family is Family.TEXT:
            checked = _once(
                lambda a: template(
                    "CASE WHEN __a ~ '^\\s*[+-]?[0-9]{1,40}(\\.[0-9]{0,40})?\\s*$' THEN __n END",
                    a=a,
                    n=_numeric(exp.Trim(this=a.copy())),
                ),
                inner,
            )
            return _fits_int(exp.Round(this=checked), bits)
        raise refuse(ENGINE, f"a cast from {source.family} to an integer")

    def to_decimal(self, inner: exp.Expr, source: Kind, to: exp.DataType) -> exp.Expr:
        params = [p.this.to_py() for p in to.expressions]
        # DuckDB's defaults: DECIMAL is DECIMAL(18, 3), DECIMAL(p) is DECIMAL(p, 0)
        precision = params[0] if params else 18
        scale = params[1] if len(params) > 1 else (0 if params else 3)
        bound = f"1e{int(precision) - int(scale)}"
        if source.family in (Family.INT, Family.DECIMAL):
            value = _numeric(inner)
        elif source.family is Family.FLOAT:
            # the shortest text that reads back as the same double, not 15 digits
            value = _once(
                lambda a: template(
                    "CASE WHEN ABS(__a) < 1e38 THEN __n END",
                    a=a,
                    n=_numeric(exp.Cast(this=a.copy(), to=exp.DataType.build("TEXT"))),
                ),
                inner,
            )
        elif source.family is Family.BOOL:
            value = exp.Cast(this=inner, to=exp.DataType.build("INTEGER"))
        else:
            raise refuse(ENGINE, f"a cast from {source.family} to DECIMAL")
        return _decimal_cast(value, to, int(scale), bound)

    def to_double(self, inner: exp.Expr, source: Kind, to: exp.DataType) -> exp.Expr:
        if to.this not in (exp.DataType.Type.DOUBLE,):
            raise refuse(ENGINE, "a cast to a 4-byte FLOAT")
        if source.family in (Family.INT, Family.BOOL):
            if source.family is Family.BOOL:
                inner = exp.Cast(this=inner, to=exp.DataType.build("INTEGER"))
            return exp.Cast(this=inner, to=exp.DataType.build("DOUBLE"))
        if source.family is Family.DECIMAL:
            # A NUMERIC may lie beyond a double's range (an unconstrained column).
            return _guarded_double(inner)
        if source.family is Family.TEXT:
            number = _once(
                lambda a: template(
                    "CASE WHEN LENGTH(__a) < 400 AND __a ~ '^\\s*[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)"
                    "([eE][+-]?[0-9]{1,3})?\\s*$' THEN __n END",
                    a=a,
                    n=_numeric(exp.Trim(this=a.copy())),
                ),
                inner,
            )
            return _guarded_double(number)
        raise refuse(ENGINE, f"a cast from {source.family} to DOUBLE")


def _decimal_cast(value: exp.Expr, to: exp.DataType, scale: int, bound: str) -> exp.Expr:
    """``value`` as the DECIMAL ``to`` (of ``scale``), NULL where it would overflow.
    Rounded to the scale first, read once (:func:`_strictly_within`): casting to a
    NUMERIC(p, s) rounds half away from zero, as ROUND does, so the cast of the rounded
    value is the cast of the value."""
    rounded = exp.Round(this=value, decimals=exp.Literal.number(scale))
    kept = _strictly_within(rounded, _numeric_constant(f"-{bound}"), _numeric_constant(bound))
    return exp.Cast(this=kept, to=to.copy())


__all__ = ["BIGINT", "FLOAT", "PostgresForms"]
