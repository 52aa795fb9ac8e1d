"""Rule: the per-group histograms that MEDIAN, quantiles, MIN and MAX are drawn from.

For every argument of a quantile call the row-level relation ``r`` gains its clamped
value; each non-NULL value falls in one bin of the argument's public grid
(:func:`accounting.quantiles.grid_for` on the argument's derived range: integer bins for
integer arguments, exact when the range has at most 1024 integers). Then, per person,
group and argument:

* at most C values are kept (Linf), by a rule that reads only the person's own rows:
  a person with t > C values keeps C of them at evenly spaced positions of their own
  sorted values (positions ⌊(j + ½)·t/C⌋, j = 0..C − 1), i.e. the person's own C-point
  summary of their distribution; no hash, seed or tie-break is needed, and exactly C
  values are kept. A person with at most C values keeps them all;
* only the groups the main core keeps count (L0): the histograms are joined to the
  ``bounded`` CTE of the L0 rule (same seed, same kept groups), and with one group per
  person the person's rows go to the one group the main core gives them.

One person therefore moves one group's histogram of one argument by at most C in L1,
in at most K groups: the input :mod:`accounting.quantiles` needs. The core returns, per
group, ``__h<j>_b`` and ``__h<j>_n`` (the bins and counts of argument j's histogram,
sparse, unordered) next to the noised statistics; the release step draws each quantile
column from them (proxy/quantile_release.py).

Binning is total: a value is clamped to [L, U] where it is read, its bin
``FLOOR((x − L)/w)`` is computed in DOUBLE under TRY_CAST (NULL and NaN give no bin, so
the row is left out like a NULL) and clamped to [0, B − 1]. Nothing here can fail on a
row's value.

Written in DuckDB's SQL like every rule; proxy/engines/render.py gives PostgreSQL and
Spark the same meaning (the bin under their total forms, the positions' division in
DOUBLE as DuckDB's ``/``, EXISTS for the SEMI JOIN on PostgreSQL), so the histograms are
the same on every engine (tests/engines).
"""

from __future__ import annotations

from dataclasses import replace

import sqlglot
from sqlglot import exp

from accounting.quantiles import (
    DENOMINATOR,
    Grid,
    QuantileError,
    TargetKind,
    grid_for,
    quantile_numerator,
)
from proxy import shape as S
from proxy.errors import DPSQLError, unsupported
from proxy.render import duckdb_sql
from proxy.rewrite import core as C
from proxy.rewrite import keyed_groups
from proxy.rewrite.clamp_inputs import clamped_argument
from proxy.rewrite.total_forms import total_value

MAX_COUNT = 2**62  # histogram counts saturate here (a contraction: see accounting.quantiles)
_KINDS = {S.QUANTILE: TargetKind.QUANTILE, S.MINIMUM: TargetKind.MIN, S.MAXIMUM: TargetKind.MAX}
_TEMPORAL = ("DATE", "TIME", "TIMESTAMP", "INTERVAL")
DATE_HINT = (
    "quantiles of dates and times are answered on numbers: e.g. "
    "MEDIAN(LEAST(GREATEST(date_diff('day', DATE '2024-01-01', ts), 0), 366)) is the "
    "median day after 2024-01-01; or count per period: "
    "SELECT date_trunc('month', ts) AS m, COUNT(*) ... GROUP BY m"
)


def _temporal(core: C.Core, arg: exp.Expr) -> bool:
    for col in arg.find_all(exp.Column):
        info = core.shape.tables.get(col.table.lower())
        kind = info.column_types.get(col.name.lower(), "").upper() if info else ""
        if kind.startswith(_TEMPORAL):
            return True
    return False


def _name(call: S.AggregateCall) -> str:
    return {S.MINIMUM: "MIN", S.MAXIMUM: "MAX"}.get(call.kind, "the quantile")


def _bounded(core: C.Core, call: S.AggregateCall) -> tuple[exp.Expr, Grid]:
    """The clamped argument and its grid; refuses unbounded and temporal arguments."""
    assert call.arg is not None
    raw = total_value(call.arg)
    try:
        arg, rng = clamped_argument(core, raw, _name(call))
    except DPSQLError as error:
        if _temporal(core, call.arg):
            raise unsupported(
                f"{call.sql[:60]}: MIN, MAX and quantiles of a date or time column need "
                "bounds the policy cannot declare",
                DATE_HINT,
            ) from None
        raise error from None
    whole = rng.lower.is_integer() and rng.upper.is_integer()
    try:
        grid = grid_for(rng.lower, rng.upper, integer=rng.integer and whole)
    except QuantileError as error:
        raise unsupported(
            f"{call.sql[:60]}: no grid for the range [{rng.lower:g}, {rng.upper:g}]: {error}",
            "declare tighter lower/upper bounds, or clamp the value with LEAST(GREATEST(x, lo), hi)",
        ) from None
    return arg, grid


def _target(call: S.AggregateCall) -> tuple[TargetKind, float | None]:
    """The target, with the level rounded as accounting rounds it (to 1e-4): levels that
    round to 0 or 1 are MIN and MAX, whose ranks every empty bin would otherwise tie."""
    kind = _KINDS[call.kind]
    if kind is not TargetKind.QUANTILE:
        return kind, None
    assert call.q is not None
    numerator = quantile_numerator(call.q)
    if numerator == 0:
        return TargetKind.MIN, None
    if numerator == DENOMINATOR:
        return TargetKind.MAX, None
    return kind, numerator / DENOMINATOR


def statistics(core: C.Core) -> tuple[tuple[C.QuantileStatistic, ...], dict[str, exp.Expr]]:
    """The quantile columns of a query and, per histogram, its clamped argument."""
    arguments: dict[str, exp.Expr] = {}  # arg sql -> clamped argument
    histograms: dict[str, str] = {}  # arg sql -> histogram name
    found: dict[tuple[TargetKind, float | None, str], C.QuantileStatistic] = {}
    for call in core.shape.aggregates:
        if call.kind not in S.QUANTILE_KINDS:
            continue
        arg, grid = _bounded(core, call)
        text = duckdb_sql(arg)
        if text not in histograms:
            histograms[text] = f"__h{len(histograms)}"
            arguments[text] = arg
        kind, q = _target(call)
        key = (kind, q, text)
        known = found.get(key)
        if known is not None:
            found[key] = replace(known, calls=(*known.calls, call.sql))
            continue
        found[key] = C.QuantileStatistic(
            kind=kind,
            q=q,
            arg_sql=text,
            grid=grid,
            column=f"__q{len(found)}",
            histogram=histograms[text],
            calls=(call.sql,),
        )
    by_histogram = {histograms[t]: a for t, a in arguments.items()}
    return tuple(found.values()), by_histogram


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _bin(value: str, grid: Grid) -> str:
    """SQL for the raw bin of a clamped value (NULL for NULL or NaN), as
    :meth:`accounting.quantiles.Grid.bin_index` before its clamp to [0, B − 1]."""
    if grid.bins == 1 or grid.width == 0.0:
        return f"TRY_CAST(CAST({value} AS DOUBLE) * 0 AS BIGINT)"
    return (
        f"TRY_CAST(FLOOR((CAST({value} AS DOUBLE) - {_number(grid.lower)}) / "
        f"{_number(grid.width)}) AS BIGINT)"
    )


def _ctes(core: C.Core, grids: dict[str, Grid]) -> list[tuple[str, exp.Expr]]:
    """The histogram CTEs, from generated names and public numbers only."""
    one = core.one_group_per_person or not core.keys
    keys = [] if one else list(core.key_columns())
    g = "".join(f", {k}" for k in keys)
    arms = []
    for index, (name, grid) in enumerate(grids.items()):
        arms.append(
            f"SELECT __u{g}, {index} AS __a, LEAST(GREATEST(__f, 0), {grid.bins - 1}) AS __b "
            f"FROM (SELECT __u{g}, {_bin(f'{name}_v', grid)} AS __f FROM r) "
            "WHERE NOT __f IS NULL"
        )
    on = "".join(f" AND qd.{k} IS NOT DISTINCT FROM qp.{k}" for k in keys)
    # Every (person, group) of a person's rows meets here: grouped and joined first by
    # their keyed hash (rewrite/keyed_groups.py), in a keyed core.
    first, hashed, joined = "", "", ""
    if core.keyed_grouping:
        columns = [*keyed_groups.person_key_columns(core, keys), ("__a", False)]
        first = "__gh, "
        hashed = f"{keyed_groups.keyed_sql(core, columns)} AS __gh, "
        joined = "qd.__gh = qp.__gh AND "
    # (qd's columns named, not qd.*: __gh stays behind without DuckDB's EXCLUDE)
    picked_qd = ", ".join(f"qd.{c}" for c in ("__u", *keys, "__a", "__b", "__c"))
    ctes = {
        "qv": " UNION ALL ".join(arms),
        # Per person, group and argument: the values there (t); per bin: c.
        "qp": f"SELECT {hashed}__u{g}, __a, COUNT(*) AS __t FROM qv GROUP BY {first}__u{g}, __a",
        "qd": (
            f"SELECT {hashed}__u{g}, __a, __b, COUNT(*) AS __c FROM qv "
            f"GROUP BY {first}__u{g}, __a, __b"
        ),
        "qc": (
            f"SELECT {picked_qd}, qp.__t FROM qd JOIN qp ON {joined}qd.__u = qp.__u "
            f"AND qd.__a = qp.__a{on}"
        ),
    }
    if core.bounding:
        c = int(core.max_rows)
        # A person with t > C values keeps the values at their own positions
        # ⌊(j + ½)·t/C⌋, j = 0..C−1, in value order: exactly C of them, spread like the
        # person's values. Bin b, holding positions [lo, hi) of the person's sorted
        # values, keeps F(hi) − F(lo) with F(x) = #{j ≥ 0 : (j + ½)·t/C < x} =
        # max(0, ⌈(2xC − t)/(2t)⌉); the sum over bins telescopes to F(t) = C. Computed in
        # DOUBLE (exact for t < 2^52/C), so no person's count can overflow.
        f_hi = f"GREATEST(0, CAST(CEIL((2.0 * __hi * {c} - __t) / (2.0 * __t)) AS BIGINT))"
        f_lo = f"GREATEST(0, CAST(CEIL((2.0 * (__hi - __c) * {c} - __t) / (2.0 * __t)) AS BIGINT))"
        ctes["qs"] = (
            f"SELECT __u{g}, __a, __b, {f_hi} - {f_lo} AS __n FROM ("
            f"SELECT __u{g}, __a, __b, __c, __t, CAST(SUM(__c) OVER (PARTITION BY __u{g}, __a "
            "ORDER BY __b ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS BIGINT) AS __hi "
            f"FROM qc WHERE __t > {c})"
        )
        ctes["qk"] = (
            f"SELECT __u{g}, __a, __b, __c AS __n FROM qc WHERE __t <= {c} UNION ALL "
            "SELECT * FROM qs WHERE __n > 0"
        )
    else:  # an audit run without bounding: every value counts
        ctes["qk"] = f"SELECT __u{g}, __a, __b, __c AS __n FROM qc"
    all_keys = core.key_columns()
    if one:
        picked = "".join(f"bounded.{k}, " for k in all_keys)
        ctes["qh"] = (
            f"SELECT {picked}qk.__a, qk.__b, SUM(qk.__n) AS __n FROM qk "
            f"JOIN bounded ON qk.__u = bounded.__u GROUP BY {picked}qk.__a, qk.__b"
        )
    else:
        same = "".join(f" AND qk.{k} IS NOT DISTINCT FROM bounded.{k}" for k in keys)
        # (qk holds every (person, key) pair: keyed, as DuckDB may build on it)
        same += keyed_groups.same_pairs(core, keys, "qk", "bounded")
        picked = "".join(f"qk.{k}, " for k in keys)
        ctes["qh"] = (
            f"SELECT {picked}qk.__a, qk.__b, SUM(qk.__n) AS __n FROM qk "
            f"SEMI JOIN bounded ON qk.__u = bounded.__u{same} "
            f"GROUP BY {picked}qk.__a, qk.__b"
        )
    lists = []
    for index, name in enumerate(grids):
        lists.append(f"ARRAY_AGG(__b) FILTER (WHERE __a = {index}) AS {name}_b")
        lists.append(
            f"ARRAY_AGG(CAST(LEAST(__n, {MAX_COUNT}) AS BIGINT)) "
            f"FILTER (WHERE __a = {index}) AS {name}_n"
        )
    group = f" GROUP BY {', '.join(all_keys)}" if all_keys else ""
    ctes["qg"] = f"SELECT {''.join(k + ', ' for k in all_keys)}{', '.join(lists)} FROM qh{group}"
    return [(name, sqlglot.parse_one(sql, read="duckdb")) for name, sql in ctes.items()]


def apply(core: C.Core) -> C.Core:
    stats, arguments = statistics(core)
    if not stats:
        return core
    grids = {s.histogram: s.grid for s in stats}
    ctes = dict(core.ctes)
    r = ctes["r"].copy()
    for name, arg in arguments.items():
        r.append("expressions", exp.alias_(arg.copy(), f"{name}_v", copy=False))
    ctes["r"] = r
    ctes.update(_ctes(core, grids))
    return replace(core, ctes=tuple(ctes.items()), quantiles=stats)


def with_histograms(core: C.Core, final: exp.Select) -> exp.Select:
    """The main core's per-group result with each group's histograms joined on (NULL-
    safe) keys. Every histogram group is a group of ``bounded``, so the join adds no row."""
    names = sorted({s.histogram for s in core.quantiles})
    columns = [exp.column(f"{n}_{part}", table="__qg") for n in names for part in ("b", "n")]
    keys = core.key_columns()
    on: exp.Expr = (
        exp.and_(
            *(
                exp.NullSafeEQ(this=exp.column(k, table="__m"), expression=exp.column(k, "__qg"))
                for k in keys
            )
        )
        if keys
        else exp.true()
    )
    wrapped = exp.Select(
        expressions=[exp.Column(this=exp.Star(), table=exp.to_identifier("__m")), *columns],
        from_=exp.From(
            this=exp.Subquery(this=final, alias=exp.TableAlias(this=exp.to_identifier("__m")))
        ),
    )
    return wrapped.join(
        exp.Table(
            this=exp.to_identifier("qg"), alias=exp.TableAlias(this=exp.to_identifier("__qg"))
        ),
        on=on,
        join_type="LEFT",
        copy=False,
    )
