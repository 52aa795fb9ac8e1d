"""A secret-keyed first grouping column for the core's hash tables on DuckDB.

DuckDB's hash tables hash group values with a fixed, unkeyed hash: an invertible mix for
integers, dates and floats, a few multiply-xor steps for text, and the two halves of a
128-bit value combined. Someone who can plant rows can choose values that all land in
one bucket, so that grouping them costs time quadratic in their number. A probe
(2026-12-02) planted 32,768 such ``prompt_id`` values for one person:
``COUNT(DISTINCT prompt_id)`` took 4.9 s with that person against 0.35 s without, and
65,536 of them, or crafted 16-character texts, ran into the time limit. Whether one
person is present must not change the time that much.

Each grouping of the core that one person's values can fill with many groups (the
per-person aggregation by person and keys, the distinct values, the quantile
histograms' counts, the auto-K pairs) therefore groups first by
``HASH(HASH(v1, v2, ..., $1), $1)``, a hash of the grouped values under the per-query
secret seed ``$1``. It is a function of the other grouping values, so the groups are the
same; DuckDB combines the hashes of all grouping columns, so the table's hash becomes
keyed. It must come first (DuckDB's optimizer may drop a column that is a function of
the columns before it, and the executor turns off ``duplicate_groups``, which dropped it
even first in a grouping by one column). The same goes for the joins DuckDB may build on
such values (:func:`keyed_joins`, the quantile and distinct semi-joins). Groupings by the
person alone, and the cross-person grouping by key (each person adds at most K keys),
stay plain: one person's values cannot fill them, and their keys cost up to a third of
the public-key miss at 10M rows.

The secret stops a set of values chosen in advance from colliding only where DuckDB's
hash of a value does not collide by itself. Integers up to 64 bits, dates, timestamps,
floats and booleans are hashed by a bijection, so they never do. Texts, DECIMALs,
128-bit integers and anything the catalog does not type can collide whatever the seed,
so their part of the keyed hash is their text behind a secret prefix of 8 to 15
characters: the prefix hides the hash's starting state and where its 8-byte blocks
begin, which the known collisions need. With the prefix the 32,768 crafted texts
grouped in 0.006 s; without it, in 2.4 s.

Joins are keyed on equalities of two columns of two tables: of one kind, two integer
widths (in the wider), a float against a number (both as DOUBLE: 32,768 planted DOUBLEs
joined in 2.05 s plain, 0.005 s keyed), or one of the UUID, BLOB and TIME types the
typer leaves UNKNOWN (by their text: 32,768 UUIDs whose stored halves are equal share
one hash, 1.96 s against 0.01 s). Equalities of other types, and comparisons the total
forms put under TRY, are left alone: DuckDB joins those by a nested loop, not a hash
table. The textual ones are keyed on ``CAST(v AS VARCHAR)``, which the renderers of
PostgreSQL (a UUID, a BYTEA in hex) and Spark type as text and key so (RELIABILITY.md,
"Hash flooding").

Every engine runs keyed cores. The renderers for PostgreSQL and Spark
(proxy/engines/render.py) rewrite each keyed column as that engine's own keyed hash of
the same values (:func:`values_of`): their hash tables are unkeyed too, and
PostgreSQL's folds a BIGINT to 32 bits before hashing, so 2^32 BIGINTs share each hash
(RELIABILITY.md, "Hash flooding").
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from proxy.catalog import column_type
from proxy.engines.kinds import Family, Kind, Typer
from proxy.rewrite import core as C
from proxy.shape import Shape

# The core's seed as DuckDB's numbered parameter: every use in a keyed core reads the
# same one secret value (a ``?`` would be a new parameter each time).
SEED = "1"


def seed() -> exp.Placeholder:
    return exp.Placeholder(this=SEED)


def _prefix() -> exp.Expr:
    """Secret text 8 to 15 characters long, drawn from the seed: the digits of a keyed
    hash of it, cut at a length its low bits choose (SUBSTR(CAST(HASH($1, 1) AS
    VARCHAR), 1, 8 + CAST($1 % 8 AS INTEGER)))."""
    digits = exp.Cast(
        this=exp.Anonymous(this="HASH", expressions=[seed(), exp.Literal.number(1)]),
        to=exp.DataType.build("VARCHAR"),
    )
    length = exp.Add(
        this=exp.Literal.number(8),
        expression=exp.Cast(
            this=exp.Mod(this=seed(), expression=exp.Literal.number(8)),
            to=exp.DataType.build("INTEGER"),
        ),
    )
    return exp.Substring(this=digits, start=exp.Literal.number(1), length=length)


def hashed_by_bytes(kind: Kind) -> bool:
    """Whether DuckDB's hash of values of ``kind`` can collide for distinct values
    (and so needs the secret prefix): anything but an integer of at most 64 bits, a
    float, a date, a timestamp or a boolean."""
    if kind.family is Family.INT:
        return kind.bits > 64 or kind.bits == 0
    return kind.family not in (Family.FLOAT, Family.DATE, Family.TIMESTAMP, Family.BOOL)


def part(value: exp.Expr, by_bytes: bool) -> exp.Expr:
    """``value`` as the keyed hash reads it: behind the secret prefix when DuckDB hashes
    its type by bytes, else as it is."""
    if not by_bytes:
        return value
    return exp.DPipe(
        this=_prefix(),
        expression=exp.Cast(this=value, to=exp.DataType.build("VARCHAR")),
        safe=True,
    )


# An INTERVAL's text is not one per value: DuckDB calls '1 day' and '24 hours' equal (and
# '1 month -1 day' and '29 days': two intervals are equal when their totals are, a month
# counted as 30 days and a day as 24 hours, which 3,000 random pairs with mixed signs
# confirmed on DuckDB 2.0.1, its HASH agreeing).
_MONTH_US = 30 * 86_400_000_000
_INTERVAL_PARTS = (("year", 12 * _MONTH_US), ("month", _MONTH_US), ("day", 86_400_000_000),
                   ("hour", 3_600_000_000), ("minute", 60_000_000), ("microseconds", 1))


def interval_valued(shape: Shape, value: exp.Expr) -> bool:
    """Whether ``value`` is an INTERVAL (:meth:`Typer.is_interval` over the catalog's
    types: columns, literals, casts, differences of timestamps and arithmetic on them)."""
    return typer(shape).is_interval(value)


def interval_total(value: exp.Expr) -> exp.Expr:
    """An INTERVAL's total in microseconds as a HUGEINT (exact: a field of at most 64 bits
    times at most 31,104,000,000,000), one per value under DuckDB's equality."""
    terms = [
        exp.Mul(
            this=exp.Cast(
                this=exp.Extract(this=exp.var(unit.upper()), expression=value.copy()),
                to=exp.DataType.build("HUGEINT"),
            ),
            expression=exp.Literal.number(scale),
        )
        for unit, scale in _INTERVAL_PARTS
    ]
    total: exp.Expr = terms[0]
    for term in terms[1:]:
        total = exp.Add(this=total, expression=term)
    return exp.Paren(this=total)


def companion(parts: Sequence[exp.Expr]) -> exp.Expr:
    """``HASH(HASH(parts..., $1), $1)``: the first grouping column of a keyed grouping
    (its parts from :func:`part`)."""
    inner = exp.Anonymous(this="HASH", expressions=[*parts, seed()])
    return exp.Anonymous(this="HASH", expressions=[inner, seed()])


def typer(shape: Shape) -> Typer:
    """Kinds of expressions over the query's tables, from the catalog's types."""
    return Typer({alias: info.column_types for alias, info in shape.tables.items()})


def unit_by_bytes(shape: Shape) -> bool:
    """Whether the person id is hashed by bytes (a text id, say)."""
    return hashed_by_bytes(typer(shape).kind(shape.unit))


def key_by_bytes(core: C.Core) -> tuple[bool, ...]:
    """Per key: whether the core's key column is hashed by bytes (DECIMAL keys are
    grouped as their text; date and time keys stay dates)."""
    kinds = typer(core.shape)
    return tuple(
        i in core.text_keys
        or (
            i not in core.dated_keys
            and i not in core.timed_keys
            and hashed_by_bytes(kinds.kind(key))
        )
        for i, key in enumerate(core.shape.keys)
    )


def keyed_first(group: list[exp.Expr], by_bytes: Sequence[bool]) -> list[exp.Expr]:
    """``group`` (column references) with the keyed hash of its values first."""
    if not group:
        return group
    parts = [part(g.copy(), b) for g, b in zip(group, by_bytes, strict=True)]
    return [companion(parts), *group]


def keyed_sql(core: C.Core, columns: Sequence[tuple[str, bool]], table: str = "") -> str:
    """The text of ``keyed``'s first column for SQL-text rules: ``columns`` are (column
    name, hashed by bytes), of ``table`` if given; "" outside a keyed core."""
    if not core.keyed_grouping or not columns:
        return ""
    parts = [
        part(exp.column(name, table=table or None), by_bytes) for name, by_bytes in columns
    ]
    return companion(parts).sql(dialect="duckdb")


def person_key_columns(core: C.Core, keys: Sequence[str]) -> list[tuple[str, bool]]:
    """(``__u``, then each of ``keys``: core key columns ``__k<i>``) with whether each is
    hashed by bytes, for :func:`keyed_sql`."""
    by_bytes = key_by_bytes(core)
    return [("__u", unit_by_bytes(core.shape)), *((k, by_bytes[int(k[3:])]) for k in keys)]


def same_pairs(core: C.Core, keys: Sequence[str], left: str, right: str) -> str:
    """`` AND keyed(left's person, keys) = keyed(right's ...)`` in a keyed core, else "":
    for a semi-join of every (person, key) pair with the kept ones (the quantile and
    distinct rules), which DuckDB may build on all the pairs (a probe: 3.9 s against
    0.6 s keyed)."""
    if not core.keyed_grouping:
        return ""
    pairs = person_key_columns(core, keys)
    return f" AND {keyed_sql(core, pairs, left)} = {keyed_sql(core, pairs, right)}"


def argument_by_bytes(core: C.Core, arg_sql: str) -> bool:
    """Whether the aggregate argument of canonical text ``arg_sql`` is hashed by bytes."""
    kinds = typer(core.shape)
    for call, arg in core.arguments.items():
        if core.argument_sql.get(call) == arg_sql:
            return hashed_by_bytes(kinds.kind(arg))
    return True


# The name of a keyed hash a rule selects, groups by and joins on (the quantile
# histograms' per-person counts).
HASHED = "__gh"


def is_companion(node: exp.Expr) -> bool:
    """Whether ``node`` is a keyed first grouping column (or its selected name)."""
    if isinstance(node, exp.Column) and node.name == HASHED:
        return True
    if not (isinstance(node, exp.Anonymous) and str(node.this).upper() == "HASH"):
        return False
    args = node.expressions
    return (
        len(args) == 2
        and isinstance(args[1], exp.Placeholder)
        and args[1].this == SEED
        and isinstance(args[0], exp.Anonymous)
        and str(args[0].this).upper() == "HASH"
    )


def values_of(node: exp.Expr) -> list[exp.Expr]:
    """The grouped values a keyed first column (:func:`is_companion`, not ``__gh``)
    hashes, without their secret prefix: what another engine's keyed hash of the same
    values reads (proxy/engines/render.py)."""
    out: list[exp.Expr] = []
    for arg in node.expressions[0].expressions[:-1]:
        if (
            isinstance(arg, exp.DPipe)
            and isinstance(arg.this, exp.Substring)
            and isinstance(arg.expression, exp.Cast)
        ):
            arg = arg.expression.this  # part(value, by_bytes=True)
        out.append(arg)
    return out


def plain(tree: exp.Expr) -> exp.Expr:
    """A keyed core (parsed) as the plain rules write it, in place: no keyed first
    grouping column, no ``__gh``, the seed a ``?`` read once (the L0 hash's). For the
    engines whose cores are plain (proxy/engines/render.py) and for the measurements of
    what the keys cost."""
    for group in list(tree.find_all(exp.Group)):
        if group.expressions and is_companion(group.expressions[0]):
            group.set("expressions", group.expressions[1:])
    for alias in list(tree.find_all(exp.Alias)):
        if alias.alias == HASHED:
            alias.pop()
    for star in list(tree.find_all(exp.Star)):
        kept = [c for c in star.args.get("except_") or [] if c.name != HASHED]
        star.set("except_", kept or None)
    for eq in list(tree.find_all(exp.EQ)):
        # a join's keyed equality (keyed_joins, the semi-joins on __gh or a keyed hash)
        if all(is_companion(side) for side in (eq.this, eq.expression)):
            parent = eq.parent
            if isinstance(parent, exp.And):
                other = parent.expression if parent.this is eq else parent.this
                parent.replace(other)
    for node in list(tree.find_all(exp.Placeholder)):
        if node.this == SEED:
            node.replace(exp.Placeholder())
    return tree


# Kinds whose equal values DuckDB always hashes alike: a keyed equality is added only
# between two columns of one of these, of the same kind, two integers of two widths
# (cast to the wider one first), or two numbers of which one is a float (both as DOUBLE).
_JOINABLE = (Family.INT, Family.TEXT, Family.DATE, Family.TIMESTAMP, Family.DECIMAL)

# Numbers DuckDB compares with a float by casting them to DOUBLE.
_WITH_FLOATS = (Family.FLOAT, Family.INT, Family.DECIMAL)


def _widths(a: Kind, b: Kind) -> bool:
    """Whether ``a`` and ``b`` are integers of two known widths."""
    return a.family is b.family is Family.INT and a.bits > 0 and b.bits > 0


def _floats(a: Kind, b: Kind) -> bool:
    """Whether ``a`` and ``b`` are numbers that DuckDB compares as DOUBLEs: one a float
    (REAL or DOUBLE), the other a float, an integer or a DECIMAL of a known precision
    (at most 38 digits: within a DOUBLE's range, so that PostgreSQL's cast of it to
    DOUBLE PRECISION cannot raise)."""
    return Family.FLOAT in (a.family, b.family) and all(
        k.family in _WITH_FLOATS and (k.family is not Family.DECIMAL or k.precision)
        for k in (a, b)
    )


# Types the catalog names that the typer leaves UNKNOWN, whose text DuckDB writes one way
# per value (an INTERVAL's does not: '1 day' equals '24 hours'), and Spark's BINARY
# (written as its hex: see _as_text).
_TEXTUAL = frozenset({"UUID", "BLOB", "BYTEA", "TIME", "BINARY"})


def _textual(shape: Shape, a: exp.Column, b: exp.Column) -> bool:
    """Whether columns ``a`` and ``b`` have one and the same catalog type of _TEXTUAL."""
    types = {column_type(shape.tables, c.table, c.name) for c in (a, b)}
    return len(types) == 1 and types <= _TEXTUAL


def _as_text(column: exp.Expr, kind: str) -> exp.Expr:
    """A _TEXTUAL column's value as text (the renderers of PostgreSQL and Spark type a
    cast to VARCHAR as text and key it so, where they skip a type they do not know).
    DuckDB writes a BLOB with its bytes escaped, PostgreSQL a BYTEA in hex (the executor
    sets bytea_output): one text per value on each. A BINARY (a type name only Spark's
    catalog gives) is written as its hex: Spark's cast of one to text keeps its bytes
    today, but whether they must be valid UTF-8 is a setting of the session's, and the
    hex is one text per value whatever it is."""
    value = exp.Hex(this=column) if kind == "BINARY" else column
    return exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))


def _equalities(condition: exp.Expr, shape: Shape, kinds: Typer) -> list[exp.Expr]:
    """``keyed(a) = keyed(b)`` for each conjunct of ``condition`` that equates two columns
    of two tables (``=``, ``IS NOT DISTINCT FROM`` or ``NOT ... IS DISTINCT FROM``), of
    the same kind or two integer widths, not both person ids."""
    units = {
        alias: str(info.policy.unit).lower()
        for alias, info in shape.tables.items()
        if info.policy.unit
    }
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    out: list[exp.Expr] = []
    for c in conjuncts:
        c = c.unnest()
        while isinstance(c, exp.Try) or (
            isinstance(c, exp.Cast) and c.to.this is exp.DataType.Type.BOOLEAN
        ):
            # the total form of a comparison that might raise (TRY(CAST(a = b AS
            # BOOLEAN))): true only where a = b is, so keyed(a) = keyed(b) may join it
            c = c.this.unnest()
        negated = isinstance(c, exp.Not) and isinstance(c.this.unnest(), exp.NullSafeNEQ)
        if negated:
            c = c.this.unnest()
        if not (isinstance(c, (exp.EQ, exp.NullSafeEQ)) or negated):
            continue
        a, b = c.this.unnest(), c.expression.unnest()
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        if a.table.lower() == b.table.lower():
            continue
        if all(units.get(x.table.lower()) == x.name.lower() for x in (a, b)):
            continue  # a person-id join: one row per person on the build side
        ka, kb = kinds.kind(a), kinds.kind(b)
        left: exp.Expr = a.copy()
        right: exp.Expr = b.copy()
        if ka != kb and _widths(ka, kb):
            # integers of two widths (INTEGER = BIGINT): both sides in the wider one, so
            # that equal values hash alike
            wide = ka if ka.bits > kb.bits else kb
            to = exp.DataType.build("HUGEINT" if wide.bits > 64 else "BIGINT")
            left, right = exp.Cast(this=left, to=to), exp.Cast(this=right, to=to.copy())
            ka = kb = wide
        elif _floats(ka, kb):
            # A float against a number: DuckDB compares them as DOUBLEs, so a = b implies
            # CAST(a AS DOUBLE) = CAST(b AS DOUBLE) (exact for a REAL, never raising for
            # an integer or a DECIMAL), and its HASH of a DOUBLE is one per value (-0.0
            # and 0.0 alike, every NaN alike: tests/proxy/test_keyed_float_joins.py).
            # A REAL hashes otherwise than the same DOUBLE, hence the cast on both sides.
            to = exp.DataType.build("DOUBLE")
            left, right = exp.Cast(this=left, to=to), exp.Cast(this=right, to=to.copy())
            out.append(exp.EQ(this=companion([left]), expression=companion([right])))
            continue
        if kinds.is_interval(a) and kinds.is_interval(b):
            # INTERVALs: DuckDB (and PostgreSQL) call two equal when their totals are, and
            # their text is not one per value ('1 day', '24 hours'): keyed on the total
            out.append(
                exp.EQ(
                    this=companion([part(interval_total(left), True)]),
                    expression=companion([part(interval_total(right), True)]),
                )
            )
            continue
        if ka == kb and ka.family is Family.UNKNOWN and _textual(shape, a, b):
            # UUIDs (DuckDB hashes their two 64-bit halves combined), BLOBs and TIMEs of
            # one type on both sides: keyed by their text, one per value
            kind = column_type(shape.tables, a.table, a.name)
            left, right = _as_text(left, kind), _as_text(right, kind)
            out.append(
                exp.EQ(this=companion([part(left, True)]), expression=companion([part(right, True)]))
            )
            continue
        if ka != kb or ka.family not in _JOINABLE or (
            ka.family is Family.DECIMAL and not ka.precision
        ):
            continue
        by_bytes = hashed_by_bytes(ka)
        out.append(
            exp.EQ(
                this=companion([part(left, by_bytes)]),
                expression=companion([part(right, by_bytes)]),
            )
        )
    return out


def keyed_joins(joins: Sequence[exp.Expr], shape: Shape) -> list[exp.Expr]:
    """``joins`` (copies) with each equality of two columns of the same kind that are not
    both person ids (``=``, ``IS NOT DISTINCT FROM``) ANDed with ``keyed(a) = keyed(b)``.
    DuckDB builds a join's hash table on whichever side it estimates smaller: a filter on
    one person's planted rows made it build on their 32,768 crafted texts (2.3 s against
    0.003 s without them, a probe, 2026-12-02). The extra equality holds exactly when the
    first does (NULLs included: every NULL has one keyed hash), and DuckDB hashes both as
    the join's keys, so the table's hash becomes keyed. Joins on the person id are left
    alone: their build side has one row per person."""
    kinds = typer(shape)
    out = []
    for join in joins:
        join = join.copy()
        on = join.args.get("on")
        extra = _equalities(on, shape, kinds) if on is not None else []
        if extra:
            join.set("on", exp.and_(on, *extra, copy=False))
        out.append(join)
    return out


def keyed_where(where: exp.Expr, shape: Shape) -> exp.Expr:
    """``where`` with the keyed equalities of :func:`keyed_joins` for its conjuncts that
    equate columns of two tables: DuckDB makes a join of ``FROM a, b WHERE a.x = b.y``
    too (a probe: 2.39 s against 0.004 s)."""
    extra = _equalities(where, shape, typer(shape))
    return exp.and_(where, *extra, copy=False) if extra else where
