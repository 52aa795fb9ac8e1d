"""Which rows the declared bounds change: the flag the clipping estimate counts.

Bounding changes a person's contribution in two ways: the caps cut rows (more than C in
a group, more than K groups) and the clamps move values that lie outside a column's
declared bounds onto them. The clipping estimate counts the people either changed
(proxy/rewrite/per_person.py ``raw_statistic``), so that an answer says how much
bounding moved it even when the policy's bounds, not the caps, are what bit.

The flag of a row is 1 when any clamp the core applies to its values (each marked by
proxy/rewrite/clamp_inputs.py with its :class:`DeclaredBound`) binds, else 0. It
compares the same column (or the same DOUBLE of it) with the same literals as the clamp
itself, so it adds no way for a row to fail. Per person it enters the estimate as one
more reason for the 0/1 already counted, so the estimate's sensitivity is unchanged.

A clamp in a branch of the analyst's CASE or IF moves a value only on the rows that take
the branch: ``SUM(CASE WHEN k = 'x' THEN v ELSE 0 END)`` reads no ``v`` where ``k`` is
not 'x', so a clamp's test holds there only with the branch's conditions (each
``CASE WHEN c THEN TRUE ELSE FALSE END``: CASE's own reading of ``c``, NULL as not
taken). The conditions are the argument's own, already total (proxy/rewrite/total_forms.py),
so testing them on every row adds no way to fail either. Other conditional forms
(COALESCE, a simple ``CASE x WHEN ...``) are not followed: their clamps count on every
row, which can only overstate the estimate.

The gates are copies of the analyst's conditions, one set per clamp, so their size is
the clamps times the conditions around each: a flat CASE of n branches each reading a
clamped column gates its clamps with 1, 2, ..., n conditions, and a sum of n clamped
columns under the derived range's CASE copies that whole sum into each of its clamps'
gates. Both are quadratic in the query (tens of seconds of copying and rendering at a
few hundred branches, before the charge). Past :data:`GATE_NODES` nodes of gates the
tests are taken on every row instead, as for COALESCE: it can only overstate the
estimate, and the limit reads the query's text alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from proxy import shape as S
from proxy.rewrite import core as C
from proxy.rewrite.clamp_inputs import clamp_columns
from proxy.rewrite.total_forms import total_value

FLAG = "__cl"

# Nodes of the analyst's conditions the gates may copy in all (about one query at the
# node limit, proxy/policy.py); past it no clamp is gated.
GATE_NODES = 2_000


def _declared_clamps(arguments: Iterable[exp.Expr]) -> list[tuple[exp.Case, exp.Expr]]:
    """Each clamp a declared bound marked, with the argument it sits in."""
    return [
        (node, argument)
        for argument in arguments
        for node in argument.find_all(exp.Case)
        if node.meta.get(C.DECLARED) is not None
    ]


def _taken(condition: exp.Expr, value: bool) -> exp.Expr:
    """TRUE where CASE would (``value``) or would not (``not value``) take a branch on
    ``condition`` (CASE's own coercion of it, NULL counting as not taken), and NULL
    where the condition fails. It is tested under TRY, as the analyst's CASE is: copied
    out bare, ``t8 * 2 > n`` raised on one person's TINYINT after the charge (a review,
    2026-12-04). Where it fails the analyst's CASE gave NULL and read nothing, so no
    branch behind it counts."""
    taken = exp.Try(
        this=exp.Case(
            ifs=[exp.If(this=condition.copy(), true=exp.Boolean(this=True))],
            default=exp.Boolean(this=False),
        )
    )
    return taken if value else exp.Not(this=taken)


def _plain_case(node: exp.Expr | None) -> bool:
    """The analyst's searched CASE (not a clamp; a ``CASE x WHEN ...`` was respelled as
    a searched one when the query was bound, proxy/spellings.py)."""
    return (
        isinstance(node, exp.Case)
        and node.meta.get(C.DECLARED) is None
        and node.args.get("this") is None
    )


def _branch_conditions(clamp: exp.Expr, root: exp.Expr) -> list[tuple[exp.Expr, bool]]:
    """What must hold on a row for ``root`` to evaluate ``clamp``, as far as the
    analyst's searched CASEs and IFs around it say (none: evaluated on every row), in
    the order the analyst's SQL tests them: outer CASEs first, a CASE's branches in
    their order. Each is the condition itself (not a copy) and whether its branch is
    taken (:func:`_taken` builds the test), so that their size is known before any is
    copied."""
    gates: list[tuple[exp.Expr, bool]] = []
    node = clamp
    while node is not root and node.parent is not None:
        parent, key = node.parent, node.arg_key
        level: list[tuple[exp.Expr, bool]] = []
        if _plain_case(parent) and key == "default":
            level = [(b.this, False) for b in parent.args.get("ifs") or []]
        elif isinstance(parent, exp.If) and parent.arg_key == "ifs":
            # a WHEN branch (of the analyst's CASE; a clamp's own are not gates)
            case = parent.parent
            if case is not None and _plain_case(case):
                branches = case.args.get("ifs") or []
                index = next(i for i, b in enumerate(branches) if b is parent)
                level = [(b.this, False) for b in branches[:index]]
                if key == "true":
                    level.append((parent.this, True))
        elif isinstance(parent, exp.If):
            # IF(c, a, b), anywhere but among a CASE's branches (a CASE's ELSE may be
            # one: taken for a branch, it raised StopIteration, a probe 2026-12-05)
            if key == "true":
                level = [(parent.this, True)]
            elif key == "false":
                level = [(parent.this, False)]
        gates = level + gates  # (walking outwards: an outer CASE is tested first)
        node = parent
    return gates


def _number(node: exp.Expr) -> Decimal | None:
    """The value of a numeric literal (or a minus over one), exactly; else None."""
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not (isinstance(node, exp.Literal) and node.is_number):
        return None
    try:
        value = Decimal(node.this)
    except InvalidOperation:
        return None
    return -value if negative else value


def _moot(clamp: exp.Case, branch: exp.If) -> bool:
    """Whether the analyst's own LEAST or GREATEST above the clamp gives every row this
    branch sets the value it would have given the raw value. For the upper bound hi:
    where x > hi the clamp reads hi, and ``LEAST(.., c)`` with a constant c <= hi reads
    c either way (min(hi, c, ...) = min(x, c, ...); the other arguments are the same on
    both sides, and a NULL among them is skipped alike); a ``GREATEST`` between them
    keeps both sides at or above hi, so it is looked through. The lower bound likewise,
    with the roles of the two swapped. Counting such a row as cut overstated the
    clipping (an oracle query, 2026-12-05: ``SUM(LEAST(tokens_in, 1000))`` under an
    upper bound of 1000). Only these two functions and parentheses are looked through:
    a cast between them may round the bound past c."""
    upper = isinstance(branch.this, exp.GT)
    if not upper and not isinstance(branch.this, exp.LT):
        return False
    bound = _number(branch.args["true"])
    if bound is None:
        return False
    through, reads = (exp.Greatest, exp.Least) if upper else (exp.Least, exp.Greatest)
    node: exp.Expr = clamp
    while True:
        parent = node.parent
        while isinstance(parent, exp.Paren):
            node, parent = parent, parent.parent
        if isinstance(parent, reads):
            for argument in (parent.this, *parent.expressions):
                if argument is node:
                    continue
                constant = _number(argument.unnest())
                if constant is not None and (constant <= bound if upper else constant >= bound):
                    return True
            return False
        if not isinstance(parent, through):
            return False
        node = parent


def _within(conditions: Iterable[exp.Expr], limit: int) -> bool:
    """Whether ``conditions`` have at most ``limit`` nodes in all (counting stops past
    it, so this costs at most ``limit`` steps plus one per condition)."""
    left = limit
    for condition in conditions:
        for _ in condition.walk():
            left -= 1
            if left < 0:
                return False
    return True


def _nested(gates: list[exp.Expr], test: exp.Expr) -> exp.Expr:
    """``test`` where every gate holds, each gate tested only where the ones before it
    hold (``CASE WHEN g1 THEN CASE WHEN g2 THEN test END END``): the rows the analyst's
    own CASEs test each condition on, and no others. ANDed instead, an inner
    condition ran on every row, and where it raised under TRY on one person's rows
    only (rows the outer CASE kept from it) DuckDB redid their vectors row by row: 1.74
    s against 0.14 s without that person (a review, 2026-12-04)."""
    for gate in reversed(gates):
        test = exp.Case(ifs=[exp.If(this=gate, true=test)])
    return test


def clamp_tests(
    arguments: Iterable[exp.Expr],
) -> tuple[list[exp.Expr], tuple[C.DeclaredBound, ...]]:
    """For the declared clamps in ``arguments``: a test per clamp, TRUE on a row where
    it moves the value (its conditions, within the branches that evaluate it), in order
    and each once; and the bounds they test."""
    bounds: dict[C.DeclaredBound, None] = {}
    # (the texts of the gates, of the clamp's conditions; the gates, the conditions)
    found: list[tuple[frozenset[str], tuple[str, ...], list[exp.Expr], list[exp.Expr]]] = []
    sites = [
        (clamp, _branch_conditions(clamp, argument))
        for clamp, argument in _declared_clamps(arguments)
    ]
    # Gated only while the copies stay within GATE_NODES (the module's docstring).
    gated = _within((c for _, conditions in sites for c, _ in conditions), GATE_NODES)
    for clamp, conditions in sites:
        bounds[clamp.meta[C.DECLARED]] = None
        binds = [
            branch.this.copy()
            for branch in clamp.args.get("ifs") or []
            if not _moot(clamp, branch)
        ]
        if not binds:
            continue
        gates = [_taken(c, taken) for c, taken in conditions] if gated else []
        texts = tuple(b.sql(dialect="duckdb") for b in binds)
        found.append((frozenset(g.sql(dialect="duckdb") for g in gates), texts, gates, binds))
    # The gate sets of each clamp's tests, to find the ones evaluated under fewer.
    gate_sets: dict[tuple[str, ...], list[frozenset[str]]] = {}
    for gate_texts, texts, _, _ in found:
        gate_sets.setdefault(texts, []).append(gate_texts)
    tests: dict[str, exp.Expr] = {}
    for gate_texts, texts, gates, binds in found:
        # A copy of the same clamp evaluated under fewer conditions (e.g. in the
        # condition of a CASE whose branch holds another copy) already tests these rows.
        if gate_texts and any(other < gate_texts for other in gate_sets[texts]):
            continue
        if not gates:
            for text, test in zip(texts, binds, strict=True):
                tests.setdefault(text, test)
            continue
        either = binds[0] if len(binds) == 1 else exp.or_(*binds, copy=False)
        test = _nested(gates, either)
        tests.setdefault(test.sql(dialect="duckdb"), test)
    return list(tests.values()), tuple(bounds)


def clamped_flag(core: C.Core) -> tuple[exp.Expr | None, tuple[C.DeclaredBound, ...]]:
    """``CASE WHEN <a declared clamp binds> THEN 1 ELSE 0 END`` over the rows of ``r``,
    and the bounds it tests; (None, ()) when the query's aggregates clamp nothing.

    Reads the clamped arguments of the released statistics and, for MEDIAN, quantiles,
    MIN and MAX (clamped later by their own rule), the same columns clamped the same
    way; and the flag column of a derived table whose values were clamped as it was
    derived."""
    arguments = list(core.arguments.values())
    arguments += [
        clamp_columns(core, total_value(call.arg))
        for call in core.shape.aggregates
        if call.kind in S.QUANTILE_KINDS and call.arg is not None
    ]
    found, declared = clamp_tests(arguments)
    conditions: dict[exp.Expr, None] = dict.fromkeys(found)  # in order, each once
    bounds: dict[C.DeclaredBound, None] = dict.fromkeys(declared)
    for alias, info in core.shape.tables.items():
        # A per-person subquery's table: its hidden flag marks the people whose
        # per-person values the derivation clamped (proxy/per_person_values.py).
        if info.bounded_flag is not None:
            unit = core.shape.unit
            # (named as the query names it: the person id's table is this one)
            table = unit.args["table"].copy() if unit.table.lower() == alias else alias
            flagged = exp.EQ(
                this=exp.column(info.bounded_flag.column, table=table),
                expression=exp.Literal.number(1),
            )
            conditions.setdefault(flagged, None)
            bounds.update(dict.fromkeys(info.bounded_flag.bounds))
    if not conditions:
        return None, ()
    return flag_case([c.copy() for c in conditions]), tuple(bounds)


def flag_case(tests: list[exp.Expr]) -> exp.Expr:
    """``CASE WHEN <any of tests> THEN 1 ELSE 0 END`` (``tests`` not empty; used as is)."""
    test = tests[0] if len(tests) == 1 else exp.or_(*tests, copy=False)
    return exp.Case(
        ifs=[exp.If(this=test, true=exp.Literal.number(1))], default=exp.Literal.number(0)
    )
