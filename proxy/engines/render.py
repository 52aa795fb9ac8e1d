"""Render an engine-neutral core (the rewrite's sqlglot trees, as DuckDB SQL) for another
engine, with the same semantics or not at all.

The rewrite rules build their trees once, in DuckDB's SQL. Most of that SQL means the
same on PostgreSQL and Spark, and sqlglot transpiles it; a few constructs are DuckDB's
own, and each gets an equivalent here:

* the L0 cut (``HASH(..., ?)``, the ``MIN(h, K + 1)`` list, ``__l[k]`` and ``EXCLUDE``)
  becomes a window per person over a keyed hash (:func:`_window_cut`), in the form the
  engine runs fastest (:class:`CutForm`);
* ``TRY(...)`` and ``TRY_CAST`` become the engine's total forms (:class:`Forms.total`):
  guarded CASE expressions on PostgreSQL, ``try_*`` functions on Spark; a construct with
  no total form of the same meaning is refused (``unsupported_sql``) before any charge;
* exact sums: DuckDB sums BIGINT in 128 bits; Spark's SUM(BIGINT) would wrap, so it sums
  in DECIMAL(38, 0) there (:meth:`Forms.exact_sum`); the rewrite's own ``HUGEINT``
  casts become the engine's exact wide integer (:meth:`Forms.wide_integer`);
* the keyed first grouping columns and join equalities (``HASH(HASH(values..., $1),
  $1)``, proxy/rewrite/keyed_groups.py) become the engine's keyed hash of the same values
  (:meth:`Forms.keyed_hash`, :func:`_keyed`): the engines' own hash tables are as
  unkeyed as DuckDB's;
* the distinct-values rule's unseeded ``HASH(person, value)`` (which C values a person
  with more keeps, proxy/rewrite/distinct_values.py) becomes the engine's keyed hash
  with a public seed 0 (:func:`_value_hash`): the rule needs a hash that differs from
  person to person, not a secret one;
* the secret seed stays a bound parameter (``$1`` on PostgreSQL, ``:p0`` on Spark,
  where the hash reads its text: spark_forms._seed_text); a keyed core reads it as
  ``$1`` everywhere, so every use is the engine's first one.

Schema and table names are mapped per engine (:meth:`Forms.table`).
"""

from __future__ import annotations

import enum
import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from accounting.mechanisms import secret_seed
from proxy.engines.kinds import Family, Kind, Typer, table_aliases
from proxy.errors import DPSQLError
from proxy.rewrite import keyed_groups, l0
from proxy.string_growth import STRING_WORK, check_rendered_rows, row_level

# A rendered core longer than this is refused: the guarded forms repeat operands, so a
# pathologically nested expression could otherwise grow without bound.
MAX_RENDERED = 1_000_000
# An operand a guard repeats is written out at each use up to this many nodes; a larger
# one is read once (:func:`read_once`), since nested guards would otherwise multiply it
# at every level (a review, 2026-12-04: 25 additions on a DECIMAL(38, 0) took over 300 s
# to render for PostgreSQL, the SQL doubling at each).
REPEATABLE_NODES = 64
# Repeated operands written out beyond this many nodes in all are refused while the
# forms are built, before the text (:data:`MAX_RENDERED`) would be: long before it.
_MAX_REPEATED_NODES = MAX_RENDERED // 10
TOO_DEEP = "an expression nested this deeply"


class CutForm(enum.Enum):
    """Two windows with the same kept groups (the rule of proxy/rewrite/l0.py, ties
    included; see :func:`_window_cut`), which engines run at different speeds."""

    # COUNT(*) OVER a RANGE frame (the groups hashing at or below each one) and a
    # whole-partition count: two window passes with peer checks.
    RANGE_COUNT = "range_count"
    # ROW_NUMBER and NTH_VALUE(h, K + 1) over one whole-partition ROWS frame: one window
    # pass; on PostgreSQL 15 it cut the window part of the core from about 0.55 s to
    # 0.1 s at 1M rows (README, "Engines: PostgreSQL and Spark SQL").
    ROW_NUMBER = "row_number"
    # ROW_NUMBER's window, with the hash computed in the per-person aggregation and
    # grouped on: GROUP BY (person, hash, keys) makes the same groups as (person, keys),
    # the hash being a function of them, and a sort-based grouping then hands the window
    # its rows already in (person, hash) order, so the engine sorts once instead of
    # hashing the groups and sorting them again (PostgreSQL picks that plan itself).
    GROUPED = "grouped"
    # ROW_NUMBER over its default frame and NTH_VALUE(h, K + 1) over the whole partition:
    # the same partition and order, which Spark computes in one window operator (it
    # refuses a frame on ROW_NUMBER; PostgreSQL would run two window passes).
    NUMBERED = "numbered"


class Forms(Protocol):
    """What one engine renders differently (see proxy/engines/postgres_forms.py and
    proxy/engines/spark_forms.py)."""

    engine: str  # shown in refusals
    dialect: str  # sqlglot dialect
    cut: CutForm  # the window form of the L0 cut

    def parameter(self, index: int) -> str: ...
    def table(self, db: str, name: str) -> exp.Table: ...
    # A catalog table's column as the engine spells it (None: as the catalog does)
    def column(self, db: str, table: str, name: str) -> str | None: ...
    def keyed_hash(self, values: list[exp.Expr], kinds: list[Kind], seed: exp.Expr) -> exp.Expr: ...
    def total(self, node: exp.Expr, typer: Typer) -> exp.Expr: ...
    def exact_sum(self, node: exp.Sum, argument: Kind) -> exp.Expr: ...
    def wide_integer(self) -> exp.DataType: ...
    def double(self, text: str) -> exp.Expr: ...  # text: a shortest repr, or "inf"
    def float_op(self, node: exp.Mul | exp.Div, typer: Typer) -> exp.Expr: ...
    def rows_by_person(self, rows: exp.Select) -> None: ...
    def per_person(self, tree: exp.Expr, typer: Typer) -> None: ...
    def dates(self, tree: exp.Expr, typer: Typer) -> None: ...
    def decimal_texts(self, tree: exp.Expr, typer: Typer) -> None: ...
    def in_lists(self, tree: exp.Expr, typer: Typer) -> None: ...
    def source_values(self, tree: exp.Expr, ctes: set[str]) -> None: ...
    # Make each row-level CTE and FROM subquery evaluate its list once per row.
    def fence_rows(self, tree: exp.Expr) -> None: ...
    # ``build(*values)`` with each large operand it repeats read once (read_once).
    def once(self, build: Callable[..., exp.Expr], *values: exp.Expr) -> exp.Expr: ...


@dataclass(frozen=True)
class Rendered:
    sql: str
    parameters: int  # how many positional parameters it takes, in order
    # The text reads a secret seed its DuckDB form did not (a long IN list keyed in a
    # core without one): the executor binds a fresh secret as its one parameter.
    own_seed: bool = False

    def bound(self, params: Sequence[Any]) -> Sequence[Any]:
        """``params``, or a fresh secret seed for a text that reads one of its own."""
        if self.own_seed and not params:
            return [secret_seed()]
        return params


def refuse(engine: str, what: str) -> DPSQLError:
    return DPSQLError(
        "unsupported_sql",
        f"the {engine} engine cannot run {what} with the same meaning as dpsql's "
        "reference (DuckDB) semantics",
        "rewrite that expression more simply (nothing was charged)",
    )


def uncast(node: exp.Expr) -> exp.Expr:
    """``node`` without the casts and parentheses around it (a NULL spelled ``CAST(NULL
    AS INT)`` is a NULL)."""
    while isinstance(node, (exp.Cast, exp.TryCast, exp.Paren)):
        node = node.this
    return node


def constant_items(node: exp.In, at_least: int) -> bool:
    """Whether ``node`` lists at least ``at_least`` items and every one is a constant
    (no column, no parameter): the lists an engine may look up in a hash table."""
    items = node.expressions
    return (
        node.args.get("query") is None
        and len(items) >= at_least
        and all(i.find(exp.Column, exp.Placeholder) is None for i in items)
    )


def keyed_list(node: exp.In, keyed: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """``x IN (c1, ...)`` as ``CASE WHEN k(x) IN (k(c1), ...) THEN x IN (c1, ...) ELSE
    ... END``, k = ``keyed``, which must give equal values equal hashes (as the engine
    compares x with each c). CASE fixes the order: only rows whose keyed hash is listed
    meet the list itself. Where k(x) is not listed, x is not, and the ELSE gives what
    ``x IN (...)`` gives then: NULL for a NULL x or a list holding NULL, else FALSE."""
    items = node.expressions
    nulls = [i for i in items if isinstance(uncast(i), exp.Null)]
    listed = exp.In(
        this=keyed(node.this.copy()),
        expressions=[keyed(i.copy()) for i in items if not any(i is n for n in nulls)],
    )
    missing: exp.Expr = (
        exp.Null()
        if nulls
        else exp.Case(
            ifs=[
                exp.If(this=exp.Is(this=node.this.copy(), expression=exp.Null()), true=exp.Null())
            ],
            default=exp.false(),
        )
    )
    return exp.Case(ifs=[exp.If(this=listed, true=node.copy())], default=missing)


def template(text: str, **parts: exp.Expr) -> exp.Expr:
    """``text`` (DuckDB SQL) with the columns named like ``__a`` replaced by copies of
    ``parts``."""
    return _filled(text, parts, given=False)


def placed(text: str, **parts: exp.Expr) -> exp.Expr:
    """:func:`template` with each part put in itself at its first place (a copy at any
    other): for a caller that gives its parts up (they must not lie inside one another),
    repeating only small ones. The total forms and the DuckDB guards
    (proxy/guarded_arithmetic.py) rebuild every level of an expression around the forms
    of the level below, and a template's copy of them made that quadratic in the depth
    (a probe, 2026-12-04: 40 nested ``// 2`` took 0.78 s to render for PostgreSQL, 20
    levels 0.28 s); repeating a large part makes the SQL exponential."""
    return _filled(text, parts, given=True)


def _filled(text: str, parts: dict[str, exp.Expr], *, given: bool) -> exp.Expr:
    """``text`` parsed, each ``__name`` column replaced by ``parts[name]``: a copy, or
    (``given``) the part itself at its first place."""
    tree = _parsed(text).copy()
    seen: set[str] = set()
    for column in list(tree.find_all(exp.Column)):
        name = column.name
        if column.table or not name.startswith("__") or name[2:] not in parts:
            continue
        part = parts[name[2:]]
        put = part if given and name not in seen else part.copy()
        seen.add(name)
        if column is tree:
            return put
        column.replace(put)
    return tree


@dataclass(frozen=True)
class Held:
    """An operand a guard reads once: ``value``, read in the guard's body as
    ``__o.<name>`` (a column of the row of held values, or a field of the struct)."""

    name: str
    value: exp.Expr


HELD_ROW = "__o"  # the name the body reads the held operands under
_REFERENCE = "__ref"  # an operand's references while its guard is built


# DuckDB's strftime codes that sqlglot writes in both engines' own formats with DuckDB's
# meaning (PostgreSQL's to_char YYYY MM DD HH24 MI SS YY, Spark's date_format yyyy MM dd
# HH mm ss yy: zero-padded as DuckDB pads), and the characters that are text in all
# three. Others are refused: sqlglot writes %j as Spark's two-digit DD, %% as a percent
# before the next code, and a letter as a pattern of Spark's that raises.
STRFTIME_CODES = frozenset("YmdHMSy")
STRFTIME_TEXT = frozenset(" -/:._,")


def strftime_supported(node: exp.TimeToStr) -> bool:
    """Whether ``node``'s format is a literal of :data:`STRFTIME_CODES` and
    :data:`STRFTIME_TEXT` alone."""
    fmt = node.args.get("format")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string) or node.args.get("zone"):
        return False
    text, at = str(fmt.this), 0
    while at < len(text):
        if text[at] == "%":
            code = text[at + 1 : at + 2]
            if not code or code not in STRFTIME_CODES:
                return False
            at += 2
        elif text[at] in STRFTIME_TEXT:
            at += 1
        else:
            return False
    return bool(text)


def alone(node: exp.Expr) -> exp.Expr:
    """A copy of ``node`` without its children (their places empty), for a caller that
    fills them with forms of its own: the total forms rebuild every level of an
    expression, and copying the whole subtree at each level was quadratic in its depth
    (a probe, 2026-12-04: 160 nested COALESCEs took 5.5 s to render for PostgreSQL, two
    thirds of it copying)."""
    out = type(node)()
    if node.comments is not None:
        out.comments = list(node.comments)
    if node.type is not None:
        out.type = node.type.copy()
    if node._meta:
        out._meta = dict(node._meta)
    for key, value in node.args.items():
        if isinstance(value, list):
            out.args[key] = [v for v in value if not isinstance(v, exp.Expr)]
        elif not isinstance(value, exp.Expr):
            out.args[key] = value
    return out


# An operand holding a node whose work grows with a string's length is read once however
# small it is (a 3-node LIKE over a person's long text written out at each use of a
# guard ran many times a row: a probe of the PostgreSQL engine, 2026-12-06).
# (a row constructor is left where it stands: it is no operand a guard could hold)
_STRING_WORK = tuple(t for t in STRING_WORK if t is not exp.Tuple)


def simple(node: exp.Expr) -> bool:
    """An operand small enough to write out at each of its uses (walked no further than
    that: a guard asks it at each level of a chain), and doing no string work."""
    nodes = list(itertools.islice(node.walk(), REPEATABLE_NODES + 1))
    return len(nodes) <= REPEATABLE_NODES and not any(isinstance(n, _STRING_WORK) for n in nodes)


# Marks a form read_once built over values without an aggregate or a window, so that
# the next level's check stops there (walking the whole chain at each level would take
# time quadratic in its depth).
_UNAGGREGATED = "dpsql_unaggregated"


def _aggregated(node: exp.Expr) -> bool:
    """Whether ``node`` holds an aggregate or a window (not looking inside read_once's
    forms already found to hold none)."""
    stack = [node]
    while stack:
        found = stack.pop()
        if isinstance(found, (exp.AggFunc, exp.Window)):
            return True
        if not found.meta.get(_UNAGGREGATED):
            stack.extend(found.iter_expressions())
    return False


def read_once(
    engine: str,
    build: Callable[..., exp.Expr],
    values: Sequence[exp.Expr],
    hold: Callable[[exp.Expr, list[Held]], exp.Expr],
) -> exp.Expr:
    """``build(*values)``, with each large value it uses more than once read once. The
    values become part of the result (not copied): the caller hands them over.

    ``build`` is called with a reference per value and may use each any number of times.
    A value used at most once, or :func:`simple`, is written in place of its references;
    the others are held: ``hold(body, held)`` gives the engine's form that evaluates
    them once and the body over them (PostgreSQL: a scalar subquery over a row of them;
    Spark: a lambda over a one-element array).

    Nothing is held where a value holds an aggregate or a window (the rewrite's own
    products of sums are guarded too): inside a subquery, ``COUNT(*)`` would count the
    subquery's one row and a window would run over it. Large values are then written
    out at each use, and refused with ``unsupported_sql`` once they would be written
    beyond a budget: quickly, whatever the data, long before the text would exceed
    :data:`MAX_RENDERED`."""
    # (references of their own: a held form built earlier reads __o.__p0 too)
    refs = [exp.column(f"__p{i}", table=_REFERENCE) for i in range(len(values))]
    body = build(*refs)
    uses: dict[str, list[exp.Column]] = {ref.name: [] for ref in refs}
    for column in body.find_all(exp.Column):
        if column.table == _REFERENCE and column.name in uses:
            uses[column.name].append(column)
    held = []
    holdable = not any(_aggregated(v) for v in values)
    for ref, value in zip(refs, values, strict=True):
        at = uses[ref.name]
        if len(at) > 1 and not simple(value):
            if holdable:
                held.append(Held(ref.name, value))
                for column in at:
                    column.set("table", exp.to_identifier(HELD_ROW))
                continue
            if sum(1 for _ in value.walk()) * len(at) > _MAX_REPEATED_NODES:
                raise refuse(engine, TOO_DEEP)
        for i, column in enumerate(at):
            # the value itself at its last use (read_once's callers hand over their
            # operands): copying it at each level would be quadratic in the depth
            placed = value if i == len(at) - 1 else value.copy()
            if column is body:
                body = placed
            else:
                column.replace(placed)
    out = hold(body, held) if held else body
    if holdable:
        out.meta[_UNAGGREGATED] = True
    return out


# A CASE larger than this is left as written (finding its repeats costs its size times
# its depth); check_rendered_rows still counts whatever it repeats.
_MAX_CASE_NODES = 4_000


def _repeated_work(case: exp.Case) -> exp.Expr | None:
    """The largest operand doing string work that ``case`` writes more than once: the
    clamp of an aggregate's argument (``CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE
    x END``) writes x three times, and each copy ran on PostgreSQL (a review,
    2026-12-06: four "count if contains" metrics came to 69 passes over the text)."""
    nodes = list(itertools.islice(case.walk(), _MAX_CASE_NODES + 1))
    if len(nodes) > _MAX_CASE_NODES or not any(isinstance(n, _STRING_WORK) for n in nodes):
        return None
    seen: dict[exp.Expr, int] = {}
    for node in nodes[1:]:  # breadth first: a repeated operand before its own parts
        if isinstance(node, (exp.Column, exp.Literal, exp.Identifier, exp.DataType)):
            continue
        seen[node] = seen.get(node, 0) + 1
    for node, count in seen.items():
        if count > 1 and any(isinstance(n, _STRING_WORK) for n in node.walk()):
            return node
    return None


def _cases_read_once(tree: exp.Expr, forms: Forms) -> None:
    """Each CASE of a row-level SELECT that writes a string-working operand more than
    once reads it once (the forms' read-once form), so the engine evaluates the
    operand once per row, as the query wrote it."""
    for select in list(tree.find_all(exp.Select)):
        if not row_level(select):
            continue
        for case in list(select.find_all(exp.Case)):
            if case.find_ancestor(exp.Select) is not select:
                continue  # (a held operand's own subquery: read there)
            repeated = _repeated_work(case)
            if repeated is None:
                continue
            operand = repeated.copy()

            def build(
                ref: exp.Expr, case: exp.Case = case, operand: exp.Expr = operand
            ) -> exp.Expr:
                return case.transform(lambda n: ref.copy() if n == operand else n)

            case.replace(forms.once(build, operand))


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, read="duckdb")


def _outermost(tree: exp.Expr, kinds: tuple[type[exp.Expr], ...]) -> list[exp.Expr]:
    found = []
    for node in tree.find_all(*kinds):
        parent = node.parent
        while parent is not None and not isinstance(parent, kinds):
            parent = parent.parent
        if parent is None:
            found.append(node)
    return found


def _double_literal(text: str) -> bool:
    return "e" in text.lower() or ("." not in text and len(text.lstrip("-")) > 38)


def _double_text(text: str) -> str:
    """The DOUBLE DuckDB reads ``text`` as, written so that every engine reads it alike:
    the shortest decimal of the double, or "inf" past its range (1e400 is +Infinity on
    DuckDB, a planning error on PostgreSQL and Spark; 1e-400 is 0 on DuckDB, an error on
    PostgreSQL). A literal has no sign (a minus is a negation around it)."""
    value = float(text)
    return "inf" if math.isinf(value) else repr(value).replace("e+", "e")


def _ctes(tree: exp.Expr) -> dict[str, exp.CTE]:
    with_ = tree.args.get("with_")
    if not isinstance(with_, exp.With):
        return {}
    return {cte.alias: cte for cte in with_.expressions}


def _window_cut(tree: exp.Expr, forms: Forms, kinds: Typer) -> None:
    """The L0 cut without DuckDB's list heap: a person keeps a group iff at most K of
    their groups hash at or below it. That is the rule of proxy/rewrite/l0.py exactly:
    with t_1 <= t_2 <= ... the person's sorted hashes, a group with hash h is kept iff
    h < t_K, or h = t_K < t_{K+1} -- i.e. iff #{groups with hash <= h} <= K (a tie at
    the K-th hash drops the tied groups, as there).

    :attr:`CutForm.ROW_NUMBER` computes the same set from one window: number the
    person's groups r = 1, 2, ... in hash order (ties in any order) and let t be the
    (K+1)-th hash (NULL when the person has at most K groups -- the hash is never NULL).
    A group is kept iff r <= K and h <> t: a group at r > K has at least r > K hashes
    at or below it; one at r <= K has h <= t_{K+1}, and more than K hashes at or below
    it iff h = t_{K+1} (its tie run reaches past K)."""
    ctes = _ctes(tree)
    if not {"pp", "pph", "heavy", "bounded"} <= set(ctes):
        return
    k = l0.cut_k(ctes["heavy"].this)
    if k is None:
        raise refuse(forms.engine, "this L0 cut")
    pp = ctes["pp"].this
    names = [e.alias_or_name for e in pp.expressions]
    keys = [exp.column(n, table="pp") for n in names if n.startswith("__k")]
    placeholder = next(ctes["pph"].this.find_all(exp.Placeholder), None)
    if placeholder is None:
        raise refuse(forms.engine, "an L0 cut without its seed")
    if forms.cut is CutForm.GROUPED:
        _grouped_hash(pp, len(keys), forms, kinds, placeholder)
        pph = exp.Select(expressions=[exp.Star()])
    else:
        values: list[exp.Expr] = [exp.column("__u", table="pp"), *keys]
        typed = [kinds.kind(v) for v in values]
        hashed = forms.keyed_hash(values, typed, placeholder.copy())
        pph = exp.Select(expressions=[exp.Star(), exp.alias_(hashed, "__h", copy=False)])
    pph.set("from_", exp.From(this=exp.Table(this=exp.to_identifier("pp"))))
    ctes["pph"].set("this", pph)
    # the engine may distribute the per-person rows by person for the cut's window
    forms.rows_by_person(ctes["r"].this)
    if forms.cut is not CutForm.RANGE_COUNT:
        # The same frame for both, so that the engine computes them in one window pass.
        window = "PARTITION BY pph.__u ORDER BY pph.__h"
        frame = f"{window} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
        numbered = window if forms.cut is CutForm.NUMBERED else frame
        windowed = template(
            f"SELECT pph.*, ROW_NUMBER() OVER ({numbered}) AS __r, "
            f"NTH_VALUE(pph.__h, {k + 1}) OVER ({frame}) AS __t FROM pph"
        )
        heavier = template("CASE WHEN __w.__t IS NULL THEN 0 ELSE 1 END")
        keep = template(f"__w.__r <= {k} AND (__w.__t IS NULL OR __w.__h <> __w.__t)")
    else:
        windowed = template(
            "SELECT pph.*, COUNT(*) OVER (PARTITION BY pph.__u ORDER BY pph.__h "
            "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __c, "
            "COUNT(*) OVER (PARTITION BY pph.__u) AS __g FROM pph"
        )
        heavier = template(f"CASE WHEN __w.__g > {k} THEN 1 ELSE 0 END")
        keep = template(f"__w.__c <= {k}")
    # __l0cut marks the kept rows of persons with more than K groups, as the DuckDB cut
    # does (the clipping estimate counts them).
    cut = exp.Select(
        expressions=[
            *(exp.column(n, table="__w") for n in names),
            exp.alias_(heavier, "__l0cut", copy=False),
        ],
        from_=exp.From(
            this=exp.Subquery(this=windowed, alias=exp.TableAlias(this=exp.to_identifier("__w")))
        ),
        where=exp.Where(this=keep),
    )
    ctes["bounded"].set("this", cut)
    ctes["heavy"].pop()


def _grouped_hash(
    pp: exp.Expr, n_keys: int, forms: Forms, kinds: Typer, seed: exp.Placeholder
) -> None:
    """:attr:`CutForm.GROUPED`: the per-person aggregation ``pp`` (``GROUP BY __u,
    __k0, ...`` over r) also outputs the keyed hash of its group as ``__h`` and groups
    by ``__u, __h, __k0, ...``: the same groups, since the hash is a function of the
    person and the keys, in an order whose prefix is the window's. A keyed grouping's
    first column (already the engine's keyed hash of the person and the keys, see
    :func:`_keyed`) becomes that ``__h``: one hash per row keys both the grouping and
    the cut."""
    group = pp.args.get("group")
    expected = ["__u", *(f"__k{i}" for i in range(n_keys))]
    columns = list(group.expressions) if isinstance(group, exp.Group) else []
    keyed = columns[0] if columns and not isinstance(columns[0], exp.Column) else None
    if keyed is not None:
        columns = columns[1:]
    if [g.sql() for g in columns] != expected:
        raise refuse(forms.engine, "this L0 cut")
    values: list[exp.Expr] = [exp.column(name) for name in expected]
    hashed = (
        keyed.copy()
        if keyed is not None
        else forms.keyed_hash(values, [kinds.kind(v) for v in values], seed.copy())
    )
    pp.set("expressions", [*pp.expressions, exp.alias_(hashed, "__h", copy=False)])
    # by the output name: the hash (and its one seed parameter) is written once
    assert isinstance(group, exp.Group)
    group.set("expressions", [exp.column("__u"), exp.column("__h"), *values[1:]])


def _keyed(tree: exp.Expr, forms: Forms, kinds: Typer) -> None:
    """Each keyed first grouping column and keyed join equality side (DuckDB's
    ``HASH(HASH(values..., $1), $1)``, proxy/rewrite/keyed_groups.py) as the engine's
    keyed hash of the same values under the same secret seed. It is a function of the
    values as the engine groups them (:meth:`Forms.keyed_hash`), so the groups and the
    join's matches do not change; the engine hashes it with the other grouping
    columns, so its hash table's buckets cannot be chosen without the seed."""
    for call in list(tree.find_all(exp.Anonymous)):
        if keyed_groups.is_companion(call):
            values = keyed_groups.values_of(call)
            typed = [kinds.kind(v) for v in values]
            call.replace(forms.keyed_hash(values, typed, keyed_groups.seed()))


def _value_hash(tree: exp.Expr, forms: Forms, kinds: Typer) -> None:
    """DuckDB's unseeded ``HASH(a, b)`` (only the distinct-values rule writes one) as the
    engine's hash of the same record. Which values a person over the cap keeps then
    differs from DuckDB's choice, as the L0 cut's kept groups do: the bound (at most C
    values per person and group) is the same on every engine."""
    ctes = _ctes(tree)
    for call in list(tree.find_all(exp.Anonymous)):
        if str(call.this).upper() == "HASH":
            values = list(call.expressions)
            typed = [_distinct_value_kind(v, call, ctes, kinds) for v in values]
            call.replace(forms.keyed_hash(values, typed, exp.Literal.number(0)))


def _distinct_value_kind(
    value: exp.Expr, call: exp.Expr, ctes: dict[str, exp.CTE], kinds: Typer
) -> Kind:
    """The kind of a value the distinct-values rule hashes. Its ``__v`` is the one CTE
    column named alike in several CTEs (dv0, dv1, ... one per DISTINCT argument, of
    different types): typed by name alone it took the first one's type, and PostgreSQL
    cast a text value to BIGINT after the charge. ``dk<i>`` reads ``dv<i>``'s."""
    cte = call.find_ancestor(exp.CTE)
    if isinstance(value, exp.Column) and value.name == "__v" and cte is not None:
        name = str(cte.alias)
        source = ctes.get("dv" + name[2:]) if name.startswith("dk") else None
        if source is not None and isinstance(source.this, exp.Select):
            for item in source.this.expressions:
                if isinstance(item, exp.Alias) and item.alias == "__v":
                    return kinds.kind(item.this)
    return kinds.kind(value)


def _wide_integers(tree: exp.Expr, forms: Forms) -> None:
    """The rewrite's ``CAST(... AS HUGEINT)`` (exact integer arithmetic of the distinct
    sums) in the engine's exact type: NUMERIC on PostgreSQL, DECIMAL(38, 0) on Spark."""
    for node in list(tree.find_all(exp.DataType)):
        if node.this is exp.DataType.Type.INT128:
            node.replace(forms.wide_integer())


def _cte_columns(tree: exp.Expr, typer: Typer) -> dict[str, str]:
    """Unqualified CTE column -> DuckDB type name, so that sums over ``__x``/``__s``
    columns know their argument's type."""
    out: dict[str, str] = {}
    for name in ("r", "pp"):
        cte = _ctes(tree).get(name)
        if cte is None:
            continue
        for item in cte.this.expressions:
            if isinstance(item, exp.Alias):
                kind = typer.kind(item.this)
                if kind.family is Family.UNKNOWN and item.alias in out:
                    # pp's MIN(__k0) AS __k0 (one group per person) is r's __k0
                    continue
                out[item.alias] = _type_name(kind)
    return out


class _ColumnKinds(Typer):
    """Kinds of the values the keyed hashes read: table columns, and every CTE's
    columns, typed in the order the CTEs are written (each from those before it). A
    column of a CTE is typed by its name alone, whichever CTE it is read from: the
    rewrite names a value once (``__u``, ``__k0``, ``__v``, ...)."""

    def __init__(self, tree: exp.Expr, aliases: Mapping[str, Mapping[str, str]]):
        self._ctes = {name.lower() for name in _ctes(tree)}
        known: dict[str, str] = {}
        super().__init__({**aliases, "": known})
        for cte in _ctes(tree).values():
            body = cte.this
            if not isinstance(body, exp.Select):
                continue
            for item in body.expressions:
                if isinstance(item, exp.Alias) and item.alias not in known:
                    known[item.alias] = _type_name(self.kind(item.this))

    def kind(self, node: exp.Expr) -> Kind:
        if isinstance(node, exp.Column) and node.table.lower() in self._ctes:
            node = exp.column(node.name)
        return super().kind(node)


def _type_name(kind: Kind) -> str:
    if kind.family is Family.INT:
        return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}.get(kind.bits, "HUGEINT")
    return {
        Family.DECIMAL: "DECIMAL(38, 9)",
        Family.FLOAT: "DOUBLE",
        Family.TEXT: "VARCHAR",
        Family.BOOL: "BOOLEAN",
        Family.DATE: "DATE",
        Family.TIMESTAMP: "TIMESTAMP",
    }.get(kind.family, "UNKNOWN")


def _sources(select: exp.Select) -> list[tuple[str, exp.Expr]]:
    """(alias, source) of what a SELECT reads in its FROM and JOINs."""
    found = [select.args.get("from_"), *(select.args.get("joins") or [])]
    return [(s.this.alias_or_name.lower(), s.this) for s in found if s is not None]


def _catalog_table(
    source: exp.Expr, ctes: set[str], types: Mapping[tuple[str, str], Mapping[str, str]]
) -> tuple[str, str] | None:
    if not isinstance(source, exp.Table) or (not source.db and source.name.lower() in ctes):
        return None
    key = ((source.db or "main").lower(), source.name.lower())
    return key if key in types else None


def _column_table(
    column: exp.Column, ctes: set[str], types: Mapping[tuple[str, str], Mapping[str, str]]
) -> tuple[str, str] | None:
    """The catalog table a column reads, by its scope: the nearest SELECT whose FROM or
    JOINs name its qualifier (or, unqualified, the SELECT's one source)."""
    qualifier = column.table.lower()
    select = column.find_ancestor(exp.Select)
    while select is not None:
        sources = _sources(select)
        if not qualifier:
            if len(sources) != 1:
                return None
            key = _catalog_table(sources[0][1], ctes, types)
            return key if key and column.name.lower() in types[key] else None
        for alias, source in sources:
            if alias == qualifier:
                return _catalog_table(source, ctes, types)
        select = select.find_ancestor(exp.Select)  # a correlated reference
    return None


def _spelled_columns(
    tree: exp.Expr,
    forms: Forms,
    ctes: set[str],
    types: Mapping[tuple[str, str], Mapping[str, str]],
) -> None:
    """Each column of a catalog table written as the engine spells it: PostgreSQL keeps
    the capitals of a quoted name that the catalog holds in lower case
    (proxy/engines/postgres_names.py). A name resolved wrongly here fails the engine's
    own prepare (the executor's ``describe``), before any charge."""
    for column in list(tree.find_all(exp.Column)):
        if isinstance(column.this, exp.Star):
            continue
        table = _column_table(column, ctes, types)
        if table is None:
            continue
        spelled = forms.column(*table, column.name.lower())
        if spelled is not None and spelled != column.name:
            column.set("this", exp.to_identifier(spelled, quoted=True))


def printed(tree: exp.Expr, dialect: str) -> str:
    """The engine's text of a rendered tree; raises where the dialect has no form for a
    node (the tests check that the text groups its operators as the tree does)."""
    return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)


def render(sql: str, forms: Forms, types: Mapping[tuple[str, str], Mapping[str, str]]) -> Rendered:
    """``sql`` (a core, a domain probe or trusted SQL, in DuckDB's dialect) for the engine
    of ``forms``; refuses with ``unsupported_sql`` what it cannot express there."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError:
        raise refuse(forms.engine, "this SQL text") from None
    aliases = table_aliases(tree, types)
    typer = Typer(aliases)
    # (the keyed hashes read CTE columns too: r's keys, pp's person and keys)
    columns = _ColumnKinds(tree, aliases)
    _keyed(tree, forms, columns)
    _window_cut(tree, forms, columns)
    _value_hash(tree, forms, columns)
    # Sums see the CTE columns' types (r's arguments, pp's per-person statistics).
    sums = Typer({**aliases, "": _cte_columns(tree, typer)})
    # the engine's own form of the per-person aggregation, typed as the rewrite wrote it
    forms.per_person(tree, sums)
    # DECIMALs cast to text as DuckDB writes them (DECIMAL keys are grouped as their text)
    forms.decimal_texts(tree, sums)
    # The rewrite's own DOUBLE products and quotients outside any TRY (a person's
    # scaled sum, centred squares): an engine that raises on float underflow guards
    # them. Innermost first, so that a guarded operand is never guarded twice.
    tries = (exp.Try, exp.TryCast)
    floats: list[exp.Mul | exp.Div] = [
        n
        for n in tree.find_all(exp.Mul, exp.Div)  # breadth first: reversed, deepest first
        if isinstance(n, (exp.Mul, exp.Div)) and n.find_ancestor(*tries) is None
    ]
    for op in reversed(floats):
        op.replace(forms.float_op(op, sums))
    for node in _outermost(tree, tries):
        # (the quantile histogram bins r's clamped arguments under TRY: typed by sums)
        node.replace(forms.total(node, sums))
    for total in list(tree.find_all(exp.Sum)):
        total.replace(forms.exact_sum(total, sums.kind(total.this)))
    _wide_integers(tree, forms)
    # Dates and timestamps the engine cannot convert to its own ranges (Spark).
    forms.dates(tree, typer)
    placeholders = [p.this for p in tree.find_all(exp.Placeholder)]
    own_seed = not placeholders
    if own_seed or placeholders == [keyed_groups.SEED] * len(placeholders):
        # Long IN lists, which the engine may look up in an unkeyed hash table: keyed
        # under the core's seed, or under one of their own where the text reads no
        # parameter (the executor binds it, Rendered.own_seed).
        forms.in_lists(tree, sums)
    own_seed = own_seed and any(True for _ in tree.find_all(exp.Placeholder))
    ctes = set(_ctes(tree))  # (after the forms, which may add one)
    # Table columns holding values their catalog type cannot (PostgreSQL's NUMERIC).
    forms.source_values(tree, ctes)
    _spelled_columns(tree, forms, ctes, types)
    for table in list(tree.find_all(exp.Table)):
        if not table.db and table.name.lower() in ctes:
            continue
        if isinstance(table.this, exp.Identifier):
            mapped = forms.table((table.db or "main").lower(), table.name.lower())
            alias = table.args.get("alias")
            if alias is None and isinstance(table.parent, (exp.From, exp.Join)):
                # columns may name the table itself ("users.age"): keep that name
                alias = exp.TableAlias(this=exp.to_identifier(table.name.lower()))
            if alias is not None:
                mapped.set("alias", alias.copy())
            table.replace(mapped)
    for literal in list(tree.find_all(exp.Literal)):
        if not literal.is_string and _double_literal(literal.this):
            # DuckDB reads 1e300 (and integers beyond 128 bits) as a DOUBLE; PostgreSQL
            # as NUMERIC, Spark as a DECIMAL that may not hold it
            literal.replace(forms.double(_double_text(literal.this)))
    for i, sub in enumerate(tree.find_all(exp.Subquery)):
        if not sub.alias and isinstance(sub.parent, (exp.From, exp.Join)):
            # DuckDB and Spark name a FROM subquery themselves; PostgreSQL 15 needs one
            sub.set("alias", exp.TableAlias(this=exp.to_identifier(f"__q{i}")))
    count = 0
    for placeholder in list(tree.find_all(exp.Placeholder)):
        if placeholder.this == keyed_groups.SEED:
            # a keyed core's one seed, however often it is read
            placeholder.replace(exp.Var(this=forms.parameter(0)))
            count = max(count, 1)
            continue
        placeholder.replace(exp.Var(this=forms.parameter(count)))
        count += 1
    # Each row-level SELECT evaluated once per row, then its string work counted as
    # written, every copy; past the limit, a CASE's repeated string work is read once
    # and counted again (reading once costs PostgreSQL a subplan per row: 1.4 times the
    # core of two "if contains" aggregates at 1M rows, bench/pg_fence.py)
    forms.fence_rows(tree)
    try:
        check_rendered_rows(tree, forms.engine)
    except DPSQLError:
        _cases_read_once(tree, forms)
        forms.fence_rows(tree)
        check_rendered_rows(tree, forms.engine)
    try:
        text = printed(tree, forms.dialect)
    except SqlglotError as error:
        first = str(error).splitlines()[0][:120] if str(error) else "a construct"
        raise refuse(forms.engine, f"this query ({first})") from None
    if len(text) > MAX_RENDERED:
        raise refuse(forms.engine, TOO_DEEP)
    return Rendered(text, count, own_seed)
