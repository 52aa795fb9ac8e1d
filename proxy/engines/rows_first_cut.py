"""The L0 cut on DuckDB, rows first, for keys that are fine buckets of time.

proxy/rewrite/l0.py cuts after the per-person aggregation: every (person, key) group is
aggregated (``pp``), hashed (``pph``), each person above K groups gets a heap of their
K + 1 smallest group hashes (``heavy``) and a join cuts their groups (``bounded``). With a
daily key most groups hold a row or two, so ``pp`` is nearly as long as the table and
that second pass over it cost 0.4-0.9x the per-person floor at 1M-10M rows
(BENCHMARKS.md, "Issue 18: the L0 step").

Rows first (this module): before ``pp``, each person's rows are hashed as their group
(the same keyed hash of person and keys, so a group's rows share it) and a heap of the
person's 2(K + 1) smallest row hashes is kept. Its distinct values are the person's
smallest distinct group hashes (every group has a row), so when it holds K + 1 of them,
the (K + 1)-th, d, is the person's (K + 1)-th smallest distinct group hash: every group
hashing at or above d lies above the person's K smallest groups, which the cut would drop
whatever the ties, and its rows are dropped before ``pp``. The cut of l0.py then runs
unchanged on the groups left, which are a prefix of the person's groups in hash order
holding at least K of them: it keeps the same groups with the same values, so the core
returns the same rows. (If exactly K groups are left, they hash below d with K distinct
hashes, no tie at the K-th, and the cut keeps them all: the same K the full cut keeps.)
A person whose heap holds fewer than K + 1 distinct hashes (their smallest groups hold
many rows) loses nothing early. ``__l0cut`` (the clipping estimate's mark of the kept
rows of persons above K groups) is set for a person cut early or cut by ``heavy``.

Which form runs is decided by the core's text alone, never by the data, so the choice
says nothing about anyone: rows first when a key truncates time to a day or finer (groups
of a few rows), the form of l0.py otherwise. On a monthly key rows first cost 1.45x the
core (the heap fills with one group's rows and the extra pass over the rows buys nothing);
on the daily key it took the core from 1.93x to 1.27x the floor at 1M rows and from 1.71x
to 0.93x at 10M (bench/measurement_notes.md, "The L0 cut rows first").

DuckDB only (the executor applies it to the core as it runs, proxy/execute.py): the other
engines' cuts are windows (proxy/engines/render.py).
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from proxy.render import owned_duckdb_sql
from proxy.rewrite import l0
from proxy.rewrite.l0 import HEAP_K

# Truncations whose buckets hold few of one person's rows.
_FINE_UNITS = frozenset(
    {"DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND", "NANOSECOND"}
)

_CTES = ("r", "pp", "pph", "heavy", "bounded")
_CUT_SQL = l0._CUT.sql("duckdb")


def _fine_time(key: exp.Expr) -> bool:
    """Whether ``key`` is a truncation of time to a day or finer, or a cast to DATE
    (under TRY, casts and the one-branch CASE that keeps it in range, as the rewrite
    writes them)."""
    node = key
    while isinstance(node, exp.Try | exp.TryCast | exp.Cast | exp.Paren | exp.Case):
        if isinstance(node, exp.Case):
            ifs = node.args.get("ifs") or []
            if len(ifs) != 1 or node.args.get("default") is not None:
                return False
            node = ifs[0].args["true"]
            continue
        if isinstance(node, exp.Cast | exp.TryCast) and node.to.this is exp.DataType.Type.DATE:
            return True
        node = node.this
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc | exp.DatetimeTrunc):
        unit = node.args.get("unit")
        return unit is not None and unit.name.upper() in _FINE_UNITS
    return False


@lru_cache(maxsize=64)
def _templates(k: int, n_keys: int) -> dict[str, exp.Expr]:
    """The CTE bodies of the rows-first form for K = ``k`` and ``n_keys`` keys (parsed
    once; copied per use). ``$1`` is the core's seed."""
    keys = ", ".join(f"r.__k{i}" for i in range(n_keys))
    texts = {
        # each row with its group's keyed hash, as l0.py's pph hashes the group
        "rh": f"SELECT r.*, CAST(HASH(r.__u, {keys}, $1) >> 1 AS BIGINT) AS __h FROM r",
        # the (K+1)-th smallest distinct hash among each person's 2(K+1) smallest rows
        # (NULL when fewer distinct: nothing is dropped early for that person). MIN(h,
        # n) lists them in ascending order, so the distinct ones are the first and each
        # above its predecessor (a filter: LIST_DISTINCT's hash set made the whole core
        # 1.5x the floor at 1M rows instead of 1.2x).
        "early": (
            f"SELECT __u, LIST_FILTER(__l, LAMBDA x, i : i = 1 OR x > __l[i - 1])[{k + 1}] "
            "AS __d FROM "
            f"(SELECT rh.__u, MIN(rh.__h, {2 * (k + 1)}) AS __l FROM rh "
            f"GROUP BY rh.__u HAVING COUNT(*) > {k})"
        ),
        "rk": (
            "SELECT rh.*, early.__d IS NOT NULL AS __c FROM rh "
            "LEFT JOIN early ON rh.__u = early.__u "
            "WHERE early.__d IS NULL OR rh.__h < early.__d"
        ),
        "bounded": (
            "SELECT pp.* EXCLUDE (__h, __c), "
            "CAST(pp.__c OR heavy.__u IS NOT NULL AS INTEGER) AS __l0cut "
            "FROM pp LEFT JOIN heavy ON pp.__u = heavy.__u "
            "WHERE heavy.__u IS NULL OR pp.__h < heavy.__t "
            "OR (pp.__h = heavy.__t AND NOT heavy.__tie)"
        ),
    }
    bodies = {name: sqlglot.parse_one(text, read="duckdb") for name, text in texts.items()}
    # l0.py's heavy, over pp (which carries the hash now) instead of pph
    bodies["heavy"] = l0._heavy(k).transform(_pph_as_pp)
    return bodies


def _pph_as_pp(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Table | exp.Identifier) and node.name == "pph":
        return exp.to_identifier("pp") if isinstance(node, exp.Identifier) else exp.to_table("pp")
    return node


def _reader(table: exp.Table) -> str | None:
    """The name of the CTE whose body reads ``table`` (None: the main query)."""
    cte = table.find_ancestor(exp.CTE)
    return cte.alias if cte is not None else None


def rows_first(sql: str) -> str:
    """``sql`` (a DuckDB core) with its L0 cut in the rows-first form, or ``sql`` itself:
    when it has no such cut, when K is above l0.HEAP_K (the heap per person would be
    large), when its hash is not keyed by ``$1``, or when no key is a fine bucket of
    time. The result returns the same rows as ``sql`` (see the module docstring)."""
    if "heavy AS (" not in sql or "$1" not in sql:
        return sql
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError:
        return sql
    with_ = tree.args.get("with_")
    if not isinstance(with_, exp.With):
        return sql
    ctes = {cte.alias: cte for cte in with_.expressions}
    if any(name not in ctes for name in _CTES) or set(ctes) & {"rh", "early", "rk"}:
        return sql
    k = l0.cut_k(ctes["heavy"].this)
    r, pp = ctes["r"].this, ctes["pp"].this
    if not isinstance(r, exp.Select) or {e.alias_or_name for e in r.expressions} & {
        "__h",
        "__c",
    }:
        return sql
    keys = [e for e in r.expressions if e.alias.startswith("__k")]
    if k is None or k > HEAP_K or not keys or not any(_fine_time(e.this) for e in keys):
        return sql
    if not isinstance(pp, exp.Select) or pp.args.get("from_") is None:
        return sql
    # pp must aggregate r's rows as they are (a filter on its groups would make groups
    # it drops count towards a person's early bound), and only the cut may read pp, pph
    # and heavy, in l0.py's own forms (a change there must be made here too; pph is
    # dropped, pp carrying the hash)
    if any(pp.args.get(a) for a in ("where", "having", "joins", "qualify")):
        return sql
    if any(
        t.name in ("pp", "pph", "heavy") and _reader(t) not in ("pph", "heavy", "bounded")
        for t in tree.find_all(exp.Table)
    ):
        return sql
    if ctes["bounded"].this.sql("duckdb") != _CUT_SQL or ctes["pph"].this.sql(
        "duckdb"
    ) != l0._hashed(len(keys), True).sql("duckdb"):
        return sql
    source = pp.args["from_"].this
    if not (isinstance(source, exp.Table) and source.name == "r" and not source.alias):
        return sql
    # Whether pp is r's only reader: then the core as written scans r's rows once and
    # never writes them out (see the end).
    r_read_once = sum(t.name == "r" and not t.db for t in tree.find_all(exp.Table)) == 1
    # the keys the hash reads: r's, in pph's order (l0.py hashes pp.__u, pp.__k0, ...)
    if [e.alias for e in keys] != [f"__k{i}" for i in range(len(keys))]:
        return sql
    bodies = {name: body.copy() for name, body in _templates(k, len(keys)).items()}
    # pp aggregates the rows left, under the name r (its columns may be qualified so)
    pp.set("from_", exp.From(this=exp.to_table("rk").as_("r")))
    pp.select("MIN(r.__h) AS __h", "BOOL_OR(r.__c) AS __c", dialect="duckdb", copy=False)
    ctes["heavy"].set("this", bodies.pop("heavy"))
    ctes["bounded"].set("this", bodies.pop("bounded"))
    # rh, early and rk go between r and pp; pph (pp with its hash) is pp itself now
    built = []
    for cte in with_.expressions:
        if cte.alias == "pph":
            continue
        if cte.alias == "pp":
            for name in ("rh", "early", "rk"):
                alias = exp.TableAlias(this=exp.to_identifier(name))
                built.append(exp.CTE(this=bodies[name], alias=alias))
        built.append(cte)
    with_.set("expressions", built)
    # rh is read twice: inlined (a scan of the rows each time), not written out. So is r
    # when the core read it once: inlined twice through rh, DuckDB would otherwise write
    # every row out, and the memory a person can make the statement take would follow
    # their rows rather than their groups as in the core (a review, 2026-12-05: one
    # person's 20M rows on one day took 655 MB against the core's 95 MB, and failed at a
    # 128 MB limit with nowhere to spill).
    names = [c.alias for c in built]
    built[names.index("rh")].set("materialized", False)
    if r_read_once:
        built[names.index("r")].set("materialized", False)
    return owned_duckdb_sql(tree)
