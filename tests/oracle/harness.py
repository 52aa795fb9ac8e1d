"""An "honest answers" differential oracle for dpsql.

When nobody exceeds the contribution limits and no value is clamped, and the budget is
huge (noise negligible), dpsql's answer must equal the plain SQL answer DuckDB computes on
the raw data, up to the noise dpsql reports (its 95% half-widths) and documented by-design
differences (public domains release empty groups; private keys go through partition
selection; names and types of unaliased outputs; ...).

This module holds: the datasets (PUMS CSV, the generated demo data and a copy of it with
NULLs), the policies (generous caps, a huge population cap), the engine factory, the
reference answer (DuckDB on the same data), the caps a query needs so that nobody is cut
(computed exactly with DuckDB), and the comparison.

Built by a helper session (2026-12-05; RELIABILITY.md, "An answer oracle"); used by
test_answer_oracle.py beside it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest

MAIN = Path(__file__).resolve().parents[2]

RHO = 1e6  # the largest per-query budget the engine accepts (proxy/budget.py BUDGET_RANGES)
PUMS_CSV = MAIN / "sample_data" / "pums" / "PUMS_pid.csv"
PUMS_TYPES = {
    "age": "BIGINT",
    "sex": "BIGINT",
    "educ": "BIGINT",
    "race": "BIGINT",
    "income": "DOUBLE",
    "married": "BIGINT",
    "pid": "BIGINT",
}
DEMO_PEOPLE, DEMO_PROMPTS, DEMO_SEED = 400, 4000, 5

# Caps the demo policy allows; each query asks for the tightest (C, K) under which nobody
# is cut (computed from the data), so the noise stays small.
POLICY_MAX_GROUPS = 1000
POLICY_MAX_ROWS = 1000


# --------------------------------------------------------------------------- datasets
def make_demo_db(folder: Path, *, nulls: bool = False) -> Path:
    """The generated demo data (seeded); with ``nulls`` a copy where some values are NULL
    (deterministically chosen rows), to exercise NULL semantics."""
    from sample_data.generate import generate

    folder.mkdir(parents=True, exist_ok=True)
    name = "usage_nulls.duckdb" if nulls else "usage.duckdb"
    out = folder / name
    if out.exists():
        return out
    base = folder / "usage.duckdb"
    if not base.exists():
        generate(base, people=DEMO_PEOPLE, prompts=DEMO_PROMPTS, seed=DEMO_SEED)
    if not nulls:
        return base
    tmp = folder / f".{name}.tmp"
    shutil.copyfile(base, tmp)
    con = duckdb.connect(str(tmp))
    con.execute("UPDATE prompts SET tokens_out = NULL WHERE prompt_id % 13 = 0")
    con.execute("UPDATE prompts SET latency_ms = NULL WHERE prompt_id % 17 = 3")
    con.execute("UPDATE prompts SET model = NULL WHERE prompt_id % 29 = 5")
    con.execute("UPDATE prompts SET flagged = NULL WHERE prompt_id % 31 = 7")
    con.execute("UPDATE users SET age = NULL WHERE user_id % 11 = 4")
    con.execute("UPDATE users SET plan = NULL WHERE user_id % 19 = 6")
    con.execute("UPDATE tickets SET resolution_minutes = NULL WHERE ticket_id % 5 = 1")
    con.execute("CHECKPOINT")
    con.close()
    tmp.rename(out)
    return out


def pums_reference() -> duckdb.DuckDBPyConnection:
    """PUMS.PUMS as the engine reads it: the CSV with the policy's declared types."""
    con = duckdb.connect()
    cols = ", ".join(f"'{k}': '{v}'" for k, v in PUMS_TYPES.items())
    con.execute("CREATE SCHEMA PUMS")
    con.execute(
        f"CREATE TABLE PUMS.PUMS AS SELECT * FROM read_csv('{PUMS_CSV}', header=true, "
        f"columns={{{cols}}})"
    )
    return con


# --------------------------------------------------------------------------- policies
def _replace(text: str, old: str, new: str) -> str:
    if old not in text:
        raise RuntimeError(f"policy text changed: {old!r} not found")
    return text.replace(old, new)


def pums_policy_text(ledger_dir: Path, *, income_upper: float | None = None) -> str:
    text = (MAIN / "sample_data" / "pums" / "policy.toml").read_text()
    text = _replace(text, '"PUMS_pid.csv"', f'"{PUMS_CSV}"')
    text = _replace(text, '"../../state/pums-ledger.sqlite"', f'"{ledger_dir / "ledger.sqlite"}"')
    text = _replace(text, "epsilon_cap = 10.0", "epsilon_cap = 1e12")
    if income_upper is not None:
        text = _replace(
            text,
            "columns.income  = { lower = 0, upper = 500000 }",
            f"columns.income  = {{ lower = 0, upper = {income_upper} }}",
        )
    return text


def demo_policy_text(
    db: Path, ledger_dir: Path, *, tokens_in_upper: int | None = None
) -> str:
    """The demo policy with fixed, generous caps (the request tightens them per query),
    a huge population cap, and optionally a tight tokens_in bound (to force clamping)."""
    text = (MAIN / "sample_data" / "policy.toml").read_text()
    text = _replace(text, 'duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = _replace(text, 'path = "../state/ledger.sqlite"', f'path = "{ledger_dir / "ledger.sqlite"}"')
    text = _replace(text, "epsilon_cap = 4.0", "epsilon_cap = 1e12")
    text = _replace(
        text,
        'max_groups = 4                 # L0: groups one person may touch in one query\n'
        'max_rows_per_group = "auto"',
        f"max_groups = {POLICY_MAX_GROUPS}\nmax_rows_per_group = {POLICY_MAX_ROWS}\n#",
    )
    text = _replace(text, "max_rows_per_group_limit = 256", "")
    text = _replace(
        text,
        'max_groups = 2\nmax_rows_per_group = "auto"\nmax_rows_per_group_limit = 32',
        f"max_groups = {POLICY_MAX_GROUPS}\nmax_rows_per_group = {POLICY_MAX_ROWS}",
    )
    if tokens_in_upper is not None:
        text = _replace(
            text,
            "columns.tokens_in  = { lower = 0, upper = 4000 }",
            f"columns.tokens_in  = {{ lower = 0, upper = {tokens_in_upper} }}",
        )
    return text


@dataclass
class Dataset:
    """One engine and its reference connection over the same data."""

    name: str
    engine: Engine
    ref: duckdb.DuckDBPyConnection
    person: str  # the person id column's name
    multi_row: bool  # many rows per person (caps computed per query)
    policy_text: str
    folder: Path

    def close(self) -> None:
        self.engine.close()
        self.ref.close()


def open_dataset(name: str, root: Path) -> Dataset:
    """``pums``, ``demo``, ``demo_nulls``, ``demo_tight`` (tokens_in upper = 1000, so some
    values are clamped) or ``pums_tight`` (income upper = 100000)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    laplace = name.endswith("_laplace")
    name = name.removesuffix("_laplace")
    if name in ("pums", "pums_tight"):
        text = pums_policy_text(folder, income_upper=100000 if name == "pums_tight" else None)
        if laplace:
            text = _replace(text, 'mechanism = "gaussian"', 'mechanism = "laplace"')
        engine = Engine(parse_policy(text, base_dir=folder))
        full = name + ("_laplace" if laplace else "")
        return Dataset(full, engine, pums_reference(), "pid", False, text, folder)
    data = root / "data"
    db = make_demo_db(data, nulls=name == "demo_nulls")
    # The engine holds its file read-only; the reference reads a byte copy of it.
    engine_db = folder / db.name
    shutil.copyfile(db, engine_db)
    text = demo_policy_text(
        engine_db, folder, tokens_in_upper=1000 if name == "demo_tight" else None
    )
    if laplace:
        text = _replace(text, 'mechanism = "gaussian"         # gaussian', 'mechanism = "laplace"         # gaussian')
    engine = Engine(parse_policy(text, base_dir=folder))
    ref = duckdb.connect(str(db), read_only=True)
    full = name + ("_laplace" if laplace else "")
    return Dataset(full, engine, ref, "user_id", True, text, folder)


# --------------------------------------------------------------------------- caps
def _select_of(tree: exp.Expr) -> exp.Select | None:
    return tree if isinstance(tree, exp.Select) else None


def _group_exprs(select: exp.Select) -> list[exp.Expr]:
    """The GROUP BY expressions, with ordinals and select aliases resolved."""
    group = select.args.get("group")
    if group is None:
        return []
    items = select.expressions
    aliases = {i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias)}
    out = []
    if group.args.get("all"):
        return [
            (i.this if isinstance(i, exp.Alias) else i).copy()
            for i in items
            if not (i.find(exp.AggFunc) or i.find(exp.Window))
        ]
    for g in group.expressions:
        if isinstance(g, exp.Literal) and g.is_int:
            item = items[int(g.this) - 1]
            out.append((item.this if isinstance(item, exp.Alias) else item).copy())
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases:
            # DuckDB prefers a column of the FROM over an alias of the same name; the
            # generated corpus never shadows, so an alias is the alias.
            out.append(aliases[g.name.lower()].copy())
        else:
            out.append(g.copy())
    return out


def _grouping(sql: str) -> tuple[exp.Select, list[exp.Expr]] | None:
    """The SELECT over rows of ``sql`` and its GROUP BY expressions; None when ``sql``
    does not parse or is not one SELECT over rows."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except Exception:
        return None
    select = _select_of(tree)
    if select is None:
        return None
    return select, _group_exprs(select)


def _rows_by_person(select: exp.Select, keys: list[exp.Expr], person: str) -> exp.Select:
    """``select``'s rows as (``__p`` the person, ``__k0``... its group keys)."""
    q = select.copy()
    for arg in ("group", "having", "order", "limit", "offset", "qualify", "distinct"):
        q.set(arg, None)
    q.set(
        "expressions",
        [exp.alias_(exp.column(person) if "." not in person else sqlglot.parse_one(person), "__p")]
        + [exp.alias_(k, f"__k{i}") for i, k in enumerate(keys)],
    )
    return q


def caps_sql(sql: str, person: str) -> str | None:
    """SQL giving (max rows of a person in one group, max groups of a person) for the
    grouping of ``sql``; None if the query is not one SELECT over rows."""
    found = _grouping(sql)
    if found is None:
        return None
    select, keys = found
    q = _rows_by_person(select, keys, person)
    keycols = ", ".join(["__p"] + [f"__k{i}" for i in range(len(keys))])
    return (
        f"WITH __r AS ({q.sql(dialect='duckdb')}), "
        f"__g AS (SELECT {keycols}, COUNT(*) AS __n FROM __r GROUP BY ALL) "
        "SELECT COALESCE(MAX(__n), 0), COALESCE((SELECT MAX(c) FROM (SELECT __p, COUNT(*) AS c "
        "FROM __g GROUP BY __p)), 0) FROM __g"
    )


def persons_sql(sql: str, person: str) -> str | None:
    """SQL giving each group's key values and its number of distinct persons."""
    found = _grouping(sql)
    if found is None:
        return None
    select, keys = found
    if not keys:
        return None
    q = _rows_by_person(select, keys, person)
    keycols = ", ".join(f"__k{i}" for i in range(len(keys)))
    return (
        f"WITH __r AS ({q.sql(dialect='duckdb')}) SELECT {keycols}, COUNT(DISTINCT __p) "
        f"FROM __r GROUP BY ALL"
    )


def without_limit(sql: str) -> str | None:
    """The query without its top-level LIMIT/OFFSET (None when it has none)."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except Exception:
        return None
    if not isinstance(tree, exp.Select) or not (tree.args.get("limit") or tree.args.get("offset")):
        return None
    tree = tree.copy()
    tree.set("limit", None)
    tree.set("offset", None)
    return tree.sql(dialect="duckdb")


# --------------------------------------------------------------------------- values
def norm(v: Any) -> Any:
    """A comparable form of a cell: numbers as float, times as ISO text."""
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float, decimal.Decimal)):
        f = float(v)
        return f
    if isinstance(v, dt.datetime):
        if v.time() == dt.time(0) and v.tzinfo is None:
            return v.date().isoformat()
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, str):
        # A date-time string with a midnight time is the same key as the date
        m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[ T]00:00:00(\.0+)?", v)
        return m.group(1) if m else v
    return repr(v)


def key_of(values: list[Any]) -> tuple[Any, ...]:
    out = []
    for v in values:
        n = norm(v)
        if isinstance(n, float):
            n = 0.0 if n == 0 else float(f"{n:.9g}")
        out.append(n)
    return tuple(out)


def is_num(v: Any) -> bool:
    return isinstance(v, float) and not math.isnan(v)


# --------------------------------------------------------------------------- outcome
CLIP_WORDS = ("had more than", "dpsql counted at most", "beyond its bounds", "are left out",
              "more than 5% ", "set each such value")


UNMEASURED = "within the noise of its estimate"


def clipping_claimed(result: Any) -> tuple[bool, float, float]:
    """(does the answer say bounding changed it, its total people cut, half-width)."""
    clip = result.privacy.clipping
    # (the note that the cut is within the estimate's noise states the bounds, and
    # that the cut may be none: no claim that bounding changed the answer)
    words = any(
        any(w in msg for w in CLIP_WORDS) and UNMEASURED not in msg for msg in result.warnings
    )
    if clip is None:
        return words, 0.0, 0.0
    return words, clip.total_cut, clip.total_cut_half_width


@dataclass
class Outcome:
    qid: str
    dataset: str
    sql: str
    status: str  # answered / refused / error / ref_error / skipped
    code: str = ""
    message: str = ""
    problems: list[str] = field(default_factory=list)  # defects
    allowed: list[str] = field(default_factory=list)  # by-design differences seen
    notes: list[str] = field(default_factory=list)
    got: Any = None
    want: Any = None
    caps: tuple[int, int] | None = None
    category: str = ""

    @property
    def matched(self) -> bool:
        return self.status == "answered" and not self.problems


@dataclass
class Query:
    qid: str
    dataset: str
    sql: str
    category: str = ""
    person: str | None = None  # person column for the caps query (default: dataset's)
    expect_cut: bool = False  # deliberately run with caps below the data's maximum
    cap_delta: tuple[int, int] = (0, 0)  # subtract from the computed (C, K)
    caps: tuple[int, int] | None = None  # fixed (C, K) instead of computed ones
    caps_from: str | None = None  # the SQL whose grouping decides the caps (nested queries)
    cut_sql: str | None = None  # DuckDB SQL giving the exact number of people cut
    no_caps: bool = False  # do not send caps (per-person subqueries: C is the inner cap)
    exact_cut: int | None = None  # expected people cut (when known)
    ref_sql: str | None = None  # DuckDB text when it differs (dialects)
    dialect: str = "duckdb"
    loose: bool = False  # compare quantile-like outputs loosely


def _top_select(sql: str) -> exp.Select | None:
    """``sql`` parsed, when it is one SELECT."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except Exception:
        return None
    return tree if isinstance(tree, exp.Select) else None


def _agg_columns(sql: str, ncols: int) -> list[bool] | None:
    """Per output column: does its select expression hold an aggregate or window."""
    tree = _top_select(sql)
    if tree is None:
        return None
    items = tree.expressions
    if any(isinstance(i, exp.Star) for i in items) or len(items) != ncols:
        return None
    return [bool(i.find(exp.AggFunc) or i.find(exp.Window)) for i in items]


def _order_spec(sql: str, names: list[str]) -> list[tuple[int, bool, bool | None]] | None:
    """The top-level ORDER BY as (output column, descending, nulls_first) when every item
    names an output column; [] without ORDER BY; None when some item cannot be placed."""
    tree = _top_select(sql)
    if tree is None:
        return None
    order = tree.args.get("order")
    if order is None:
        return []
    items = tree.expressions
    texts = [(i.this if isinstance(i, exp.Alias) else i).sql(dialect="duckdb").lower() for i in items]
    lower = [n.lower() for n in names]
    out = []
    for o in order.expressions:
        e = o.this
        desc = bool(o.args.get("desc"))
        nf = o.args.get("nulls_first")
        idx = None
        if isinstance(e, exp.Literal) and e.is_int:
            idx = int(e.this) - 1
        elif isinstance(e, exp.Column) and not e.table and e.name.lower() in lower:
            idx = lower.index(e.name.lower())
        elif e.sql(dialect="duckdb").lower() in texts:
            idx = texts.index(e.sql(dialect="duckdb").lower())
        if idx is None:
            return None
        out.append((idx, desc, nf))
    return out


def _tol(exact: Any, half: float | None) -> float:
    base = 1e-6 * max(1.0, abs(exact)) if is_num(exact) else 0.0
    if half is None:
        return base + 1e-6
    return 4.0 * half + base + 1e-6


def compare(
    q: Query,
    ds: Dataset,
    result: Any,
    exact_cols: list[str],
    exact_rows: list[tuple[Any, ...]],
    full_rows: list[tuple[Any, ...]] | None,
    plan: Any,
    persons: dict[tuple[Any, ...], int] | None,
    out: Outcome,
) -> None:
    """Fill ``out.problems`` (defects) and ``out.allowed`` (by-design differences)."""
    got_cols = list(result.columns)
    rows = [list(r) for r in result.rows]
    ivals = [list(i) for i in result.intervals] if result.intervals else [[None] * len(got_cols)] * len(rows)
    out.got = [tuple(r) for r in result.rows]
    out.want = exact_rows
    # --- columns
    if len(got_cols) != len(exact_cols):
        out.problems.append(f"column count {len(got_cols)} != {len(exact_cols)}: {got_cols} vs {exact_cols}")
        return
    text = ref_text(q)
    aliased = _aliased(text, len(got_cols))
    for i, (g, w) in enumerate(zip(got_cols, exact_cols, strict=False)):
        if g == w:
            continue
        if aliased is not None and aliased[i]:
            out.problems.append(f"column {i} named {g!r}, SQL names it {w!r}")
        elif re.sub(r"[\s\"]", "", g).lower() != re.sub(r"[\s\"]", "", w).lower():
            out.allowed.append(f"unaliased column {i} named {g!r} (DuckDB: {w!r})")
    ncols = len(got_cols)
    quant = {c.get("column") for c in result.privacy.quantiles} | {
        c.get("name") for c in result.privacy.quantiles
    }
    aggs = _agg_columns(text, ncols)
    noisy = []
    for j in range(ncols):
        n = any(iv[j] not in (None, 0.0) for iv in ivals) or got_cols[j] in quant
        if aggs is not None and aggs[j]:
            n = True
        noisy.append(n)
    key_idx = [j for j in range(ncols) if not noisy[j]]
    # --- rows: match by key columns
    exact_n = [[norm(v) for v in r] for r in exact_rows]
    pool_rows = [[norm(v) for v in r] for r in (full_rows if full_rows is not None else exact_rows)]
    got_n = [[norm(v) for v in r] for r in rows]
    partition = result.privacy.partition or {}
    strategy = partition.get("strategy")
    domain = None
    if plan is not None and getattr(plan, "domain", None) is not None:
        domain = {key_of(list(d)) for d in plan.domain}
    matched: list[int | None] = _assign(got_n, pool_rows, key_idx, ivals, noisy, strategy == "public_domain")
    limited = full_rows is not None
    # --- extra rows
    margins = having_margins(ds, text)
    for gi, m in enumerate(matched):
        if m is not None:
            continue
        g = got_n[gi]
        near_zero = all(
            (not noisy[j]) or g[j] is None or not is_num(g[j]) or abs(g[j]) <= _tol(0.0, ivals[gi][j]) or ivals[gi][j] is None
            for j in range(ncols)
        )
        if key_idx and _near_boundary(margins, [got_n[gi][j] for j in key_idx]):
            out.allowed.append(f"HAVING boundary: row {tuple(rows[gi])} kept by noise")
        elif strategy == "public_domain":
            out.allowed.append(f"empty public-domain group released: {tuple(rows[gi])}")
            if not near_zero and _is_count_like(text, ncols):
                out.notes.append(f"empty domain group not near 0: {tuple(rows[gi])}")
        else:
            out.problems.append(f"extra row not in the exact answer: {tuple(rows[gi])}")
    # --- missing rows
    exact_keys_limited = None
    if limited:
        exact_keys_limited = [key_of([e[j] for j in key_idx]) for e in exact_n]
    shown = set(m for m in matched if m is not None)
    for ei, e in enumerate(pool_rows):
        if ei in shown:
            continue
        ek = key_of([e[j] for j in key_idx])
        if limited and ek not in (exact_keys_limited or []):
            continue  # beyond the LIMIT in the exact answer too
        reason = _missing_allowed(ek, e, strategy, partition, persons, domain, key_idx, ds, q)
        if not reason and key_idx and _near_boundary(margins, [e[j] for j in key_idx]):
            reason = "HAVING boundary: an aggregate HAVING reads is within 1% of its threshold"
        if reason:
            out.allowed.append(f"missing group {tuple(exact_rows[ei]) if not limited else tuple(e)}: {reason}")
        elif limited:
            # beyond a LIMIT a missing row may be a tie at the boundary or displaced by
            # empty domain groups
            out.notes.append(f"LIMIT boundary: exact row {tuple(e)} not shown")
        else:
            out.problems.append(f"missing row {tuple(e)}")
    if strategy == "threshold" and persons and not limited and not key_idx and "having" not in text.lower():
        # keys not shown: at least every group well above the threshold must be there
        tau = float(partition.get("tau") or 0)
        sure = sum(1 for n in persons.values() if n > tau + 2)
        if len(rows) < sure and not out.problems:
            out.problems.append(f"{len(rows)} groups shown, {sure} groups have more than tau + 2 people")
    if limited:
        want_n = len(exact_rows)
        extra_domain = sum(1 for m in matched if m is None) if strategy == "public_domain" else 0
        if len(rows) - extra_domain > want_n:
            out.problems.append(f"{len(rows)} rows shown, LIMIT allows {want_n}")
        elif len(rows) < want_n and not any("missing group" in a or "empty" in a for a in out.allowed):
            out.problems.append(f"{len(rows)} rows shown, exact answer has {want_n}")
        # displaced rows: every shown row must be within the exact (limited) answer, or
        # tied with its boundary, or an empty domain row
        for gi, m in enumerate(matched):
            if m is None:
                continue
            ek = key_of([pool_rows[m][j] for j in key_idx])
            if ek not in exact_keys_limited:
                out.notes.append(f"LIMIT boundary: shown row {tuple(rows[gi])} is beyond the exact LIMIT")
    nested_domain = any("declared values of its key, empty ones included" in w for w in result.warnings)
    if nested_domain:
        out.allowed.append(
            "outer query over an inner answer keyed on a public domain: its empty groups are "
            "rows too (README, 'Notes that hold whatever the data'); value differences allowed"
        )
    # --- values (a deliberate cut changes them: only the claims are checked then)
    for gi, m in enumerate(matched):
        if m is None or q.expect_cut:
            continue
        e = pool_rows[m]
        g = got_n[gi]
        for j in range(ncols):
            ev, gv, half = e[j], g[j], ivals[gi][j]
            if got_cols[j] in quant or (q.loose and noisy[j]):
                if is_num(ev) and is_num(gv) and abs(ev - gv) > max(0.05 * abs(ev), 2.0):
                    out.notes.append(f"quantile-like cell {got_cols[j]}={gv} vs exact {ev}")
                continue
            if ev is None and gv is None:
                continue
            if ev is None or gv is None:
                name = got_cols[j]
                unreliable = any(
                    "average over a noisy count below" in w and repr(name) in w for w in result.warnings
                )
                if ev is None and is_num(gv) and noisy[j] and unreliable:
                    out.allowed.append(
                        f"empty input: SQL NULL, dpsql an average over a noisy count near 0 with the "
                        f"whole declared range as interval ({name}={gv:.6g})"
                    )
                elif ev is None and is_num(gv) and noisy[j] and abs(gv) <= _tol(0.0, half):
                    out.allowed.append(
                        f"empty input: SQL NULL, dpsql a noisy 0 ({name}={gv:.6g}, half-width {half})"
                    )
                else:
                    out.problems.append(
                        f"NULL mismatch in {got_cols[j]!r}, row {tuple(rows[gi])}: exact {ev!r}, got {gv!r}"
                    )
                continue
            if is_num(ev) and is_num(gv):
                if not noisy[j]:
                    if abs(ev - gv) > 1e-9 * max(1, abs(ev)):
                        out.problems.append(f"key/constant {got_cols[j]!r}: exact {ev!r}, got {gv!r}")
                    continue
                if half is None and not any(repr(got_cols[j]) in w or got_cols[j] in w for w in result.warnings):
                    # README, 'What an interval covers': every released number has a 95%
                    # half-width, or null with a warning saying why
                    msg = (f"numeric cell {got_cols[j]!r} ({type(rows[gi][j]).__name__}) has no 95% "
                           "interval and no warning says why")
                    if msg not in out.problems:
                        out.problems.append(msg)
                    continue
                tol = _tol(ev, half)
                if gv == 0.0 and half == 0.0 and ev > 0 and re.search(r"(?i)\b(var|std)", text):
                    # a variance drawn below 0 and clamped to 0: its profile interval
                    # degenerates at the clamp (a rare noise event, not a wrong answer)
                    out.allowed.append(
                        f"variance clamped at 0 with a 0 half-width ({got_cols[j]}; exact {ev:.6g})"
                    )
                    continue
                if abs(ev - gv) > tol:
                    out.problems.append(
                        f"value {got_cols[j]!r}, row {tuple(rows[gi])}: exact {ev!r}, got {gv!r} "
                        f"(|diff| {abs(ev - gv):.6g} > tol {tol:.3g}, 95% half-width {half})"
                    )
                continue
            if isinstance(ev, float) and isinstance(gv, float):  # NaN
                if not (math.isnan(ev) and math.isnan(gv)):
                    out.problems.append(f"value {got_cols[j]!r}: exact {ev!r}, got {gv!r}")
                continue
            if ev != gv:
                if isinstance(ev, float) != isinstance(gv, float):
                    try:
                        if abs(float(gv) - float(ev)) <= 1e-9 * max(1.0, abs(float(ev))):
                            out.allowed.append(f"typed differently: {got_cols[j]} {gv!r} vs {ev!r}")
                            continue
                    except (TypeError, ValueError):
                        pass
                out.problems.append(f"value {got_cols[j]!r}: exact {ev!r}, got {gv!r}")
    if nested_domain:
        value_problems = [p for p in out.problems if p.startswith(("value ", "NULL mismatch"))]
        out.problems = [p for p in out.problems if p not in value_problems]
        out.allowed += [f"(nested over a public domain) {p}" for p in value_problems]
    # --- order
    spec = _order_spec(text, got_cols)
    if spec is None:
        out.notes.append("ORDER BY not checked (an item is not an output column)")
    elif spec:
        prev = None
        for gi, m in enumerate(matched):
            if m is None:
                continue
            if prev is not None:
                pg, pm = prev
                if not _ordered(pool_rows[pm], pool_rows[m], got_n[pg], got_n[gi], ivals[pg], ivals[gi], spec):
                    out.problems.append(
                        f"rows out of ORDER BY order: {tuple(rows[pg])} before {tuple(rows[gi])} "
                        f"(exact {tuple(pool_rows[pm])} / {tuple(pool_rows[m])})"
                    )
            prev = (gi, m)


def _assign(got_n, pool_rows, key_idx, ivals, noisy, empty_ok):
    """Match released rows to exact rows with equal keys at the least total distance
    (scipy's assignment); a released row may stay unmatched (an empty domain group)."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    groups: dict = {}
    for gi, g in enumerate(got_n):
        groups.setdefault(key_of([g[j] for j in key_idx]), ([], []))[0].append(gi)
    for ei, e in enumerate(pool_rows):
        k = key_of([e[j] for j in key_idx])
        if k in groups:
            groups[k][1].append(ei)
    matched: list = [None] * len(got_n)
    big = 1e12
    for gis, eis in groups.values():
        if not eis:
            continue
        n, m = len(gis), len(eis)
        cost = np.full((n, m + n), big)
        for a, gi in enumerate(gis):
            for b, ei in enumerate(eis):
                cost[a, b] = _distance(got_n[gi], pool_rows[ei], ivals[gi], noisy)
            zero = [0.0 if noisy[j] else got_n[gi][j] for j in range(len(got_n[gi]))]
            # an unmatched released row: cheap only for an empty domain group near 0
            # (as many released rows as exact ones with this key: all are matched)
            cost[a, m + a] = big / 2 + (_distance(got_n[gi], zero, ivals[gi], noisy) if empty_ok else 0.0)
        rows_, cols_ = linear_sum_assignment(cost)
        for a, b in zip(rows_, cols_, strict=False):
            if b < m:
                matched[gis[a]] = eis[b]
    return matched


def _aliased(sql: str, n: int) -> list[bool] | None:
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except Exception:
        return None
    if not isinstance(tree, exp.Select) or len(tree.expressions) != n:
        return None
    return [isinstance(i, (exp.Alias, exp.Column)) for i in tree.expressions]


def _is_count_like(sql: str, n: int) -> bool:
    return "count" in sql.lower() and "avg" not in sql.lower()


def _distance(g: list[Any], e: list[Any], iv: list[Any], noisy: list[bool]) -> float:
    d = 0.0
    for j, (a, b) in enumerate(zip(g, e, strict=False)):
        if not noisy[j]:
            continue
        if is_num(a) and is_num(b):
            d += min(abs(a - b) / (1e-6 + (iv[j] or 0.0) + 1e-6 * max(1.0, abs(b))), 1e6)
        elif (a is None) != (b is None) or a != b:
            d += 1e3
    return d


def _missing_allowed(ek, e, strategy, partition, persons, domain, key_idx, ds, q) -> str:
    if strategy == "threshold":
        tau = float(partition.get("tau") or 0)
        if persons is None:
            return f"partition selection (tau {tau:g}; persons per group unknown)"
        n = persons.get(ek)
        if n is None:
            return f"partition selection (tau {tau:g}; group persons not found)"
        if n <= tau + 2:
            return f"partition selection: {n} person(s), threshold about {tau:g}"
        return ""
    if strategy == "public_domain" and domain is not None:
        if ek not in domain and len(ek) == len(next(iter(domain), ())):
            return "key outside the declared public domain (dropped by design, proxy/domains.py)"
        if any(v is None for v in ek) or not ek:
            return "NULL key (or keys not shown) outside the declared public domain: dropped (proxy/domains.py)"
    return ""


def having_margins(ds: Dataset, text: str) -> tuple[dict, list[float]] | None:
    """For a grouped query with HAVING: per group (keyed by its sorted key values), the
    exact values of the aggregates HAVING reads, and HAVING's numeric literals."""
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except Exception:
        return None
    if not isinstance(tree, exp.Select) or tree.args.get("having") is None:
        return None
    having = tree.args["having"].this
    aliases = {i.alias.lower(): i.this for i in tree.expressions if isinstance(i, exp.Alias)}
    having = having.copy().transform(
        lambda n: aliases[n.name.lower()].copy()
        if isinstance(n, exp.Column) and not n.table and n.name.lower() in aliases
        and aliases[n.name.lower()].find(exp.AggFunc) else n
    )
    aggs = [a.copy() for a in having.find_all(exp.AggFunc)]
    lits = [float(lit.this) for lit in having.find_all(exp.Literal) if lit.is_number]
    keys = _group_exprs(tree)
    if not aggs or not keys:
        return None
    q = tree.copy()
    for arg in ("having", "order", "limit", "offset", "qualify"):
        q.set(arg, None)
    q.set("expressions", [exp.alias_(k, f"__k{i}") for i, k in enumerate(keys)]
          + [exp.alias_(a, f"__a{i}") for i, a in enumerate(aggs)])
    try:
        rows = ds.ref.execute(q.sql(dialect="duckdb")).fetchall()
    except Exception:
        return None
    out = {}
    for r in rows:
        k = tuple(sorted(repr(v) for v in key_of(list(r[: len(keys)]))))
        out[k] = [float(v) for v in r[len(keys):] if isinstance(v, (int, float, decimal.Decimal))]
    return out, lits


def _near_boundary(margins, key_values) -> bool:
    if margins is None:
        return False
    table, lits = margins
    vals = table.get(tuple(sorted(repr(v) for v in key_of(list(key_values)))))
    if vals is None:
        return False
    return any(abs(v - lit) <= max(2.0, 0.01 * abs(lit)) for v in vals for lit in lits)


def _ordered(pe, ce, pg, cg, piv, civ, spec) -> bool:
    """Is the pair (previous, current) in ORDER BY order, within noise? Uses the exact
    values and allows inversions where they are within the cells' tolerance."""
    for idx, desc, nulls_first in spec:
        a, b = pe[idx], ce[idx]
        if a is None and b is None:
            ga, gb = pg[idx], cg[idx]
            if is_num(ga) and is_num(gb) and ga != gb:  # empty inputs: released values decide
                return (ga > gb) if desc else (ga < gb)
            continue
        if a == b:
            continue
        if a is None or b is None:
            # DuckDB: NULLS LAST by default for ASC and DESC
            nf = bool(nulls_first) if nulls_first is not None else False
            a_first = (a is None) == nf
            return a_first
        if is_num(a) and is_num(b):
            tol = _tol(a, piv[idx]) + _tol(b, civ[idx])
            if abs(a - b) <= tol:
                # tie within noise: the released values decide
                ga, gb = pg[idx], cg[idx]
                if is_num(ga) and is_num(gb) and ga != gb:
                    return (ga > gb) if desc else (ga < gb)
                continue
            return (a > b) if desc else (a < b)
        try:
            return (a > b) if desc else (a < b)
        except TypeError:
            return True
    return True


# --------------------------------------------------------------------------- running
def needed_caps(ds: Dataset, q: Query) -> tuple[int, int] | None:
    if q.caps is not None:
        return q.caps
    if not ds.multi_row or q.no_caps:
        return None
    found = None
    for person in person_candidates(ds, q):
        sql = caps_sql(q.caps_from or ref_text(q), person)
        if sql is None:
            return None
        try:
            found = ds.ref.execute(sql).fetchone()
            break
        except Exception:
            continue
    if found is None:
        return None
    c, k = found
    c, k = max(int(c), 1), max(int(k), 1)
    c = min(c - q.cap_delta[0], POLICY_MAX_ROWS) if c - q.cap_delta[0] >= 1 else 1
    k = min(k - q.cap_delta[1], POLICY_MAX_GROUPS) if k - q.cap_delta[1] >= 1 else 1
    return c, k


def person_candidates(ds: Dataset, q: Query) -> list[str]:
    """The person column as the caps query may name it: as given, else bare, else
    qualified by each private table's alias in FROM and JOINs."""
    if q.person:
        return [q.person]
    out = [ds.person]
    try:
        tree = sqlglot.parse_one(q.caps_from or ref_text(q), read="duckdb")
        for t in tree.find_all(exp.Table):
            if t.name.lower() in ("prompts", "tickets", "users", "pums"):
                out.append(f"{t.alias_or_name}.{ds.person}")
    except Exception:
        pass
    return out


def group_persons(ds: Dataset, q: Query, key_positions: int) -> dict[tuple[Any, ...], int] | None:
    for person in person_candidates(ds, q):
        sql = persons_sql(ref_text(q), person)
        if sql is None:
            return None
        try:
            rows = ds.ref.execute(sql).fetchall()
        except Exception:
            continue
        return {key_of(list(r[:-1])): int(r[-1]) for r in rows}
    return None


_SPELLINGS = [
    (r"\bVARP\s*\(", "VAR_POP("),
    (r"\bVAR\s*\(", "VAR_SAMP("),
    (r"\bSTDEVP\s*\(", "STDDEV_POP("),
    (r"\bSTDEV\s*\(", "STDDEV_SAMP("),
    (r"\bSTD\s*\(", "STDDEV_SAMP("),
]


def reference_sql(sql: str) -> str:
    """DuckDB's text for the SQL Server / SmartNoise spellings dpsql documents (VAR,
    STD, STDEV, VARP, STDEVP, TOP n); other text unchanged."""
    out = sql
    for pat, rep in _SPELLINGS:
        out = re.sub(pat, rep, out, flags=re.I)
    m = re.match(r"(?is)^\s*SELECT\s+TOP\s+(\d+)\s+(.*)$", out)
    if m:
        out = f"SELECT {m.group(2).rstrip().rstrip(';')} LIMIT {m.group(1)}"
    return out


def ref_text(q: Query) -> str:
    return q.ref_sql or reference_sql(q.sql)


def run_query(ds: Dataset, q: Query, *, rho: float = RHO) -> Outcome:
    out = Outcome(q.qid, ds.name, q.sql, "answered", category=q.category)
    caps = needed_caps(ds, q)
    out.caps = caps
    budget = {"epsilon": 1e4} if ds.name.endswith("_laplace") else {"rho": rho}
    req = QueryRequest(
        q.sql,
        **budget,
        dialect=q.dialect,
        max_rows_per_group=None if caps is None else caps[0],
        max_groups=None if caps is None else caps[1],
    )
    try:
        plan = ds.engine.prepare(req)[1]
    except DPSQLError:
        plan = None
    except Exception:
        plan = None
    try:
        result = ds.engine.run(req)
    except DPSQLError as error:
        out.status, out.code, out.message = "refused", error.code, error.message
        return out
    except Exception as error:  # an internal failure is a defect
        out.status, out.code, out.message = "error", type(error).__name__, str(error)[:300]
        out.problems.append(f"exception {type(error).__name__}: {str(error)[:300]}")
        return out
    ref_sql = ref_text(q)
    try:
        cur = ds.ref.execute(ref_sql)
        exact_cols = [d[0] for d in cur.description]
        exact_rows = cur.fetchall()
        full_sql = without_limit(ref_sql)
        full_rows = ds.ref.execute(full_sql).fetchall() if full_sql else None
    except Exception as error:
        out.status, out.code, out.message = "ref_error", type(error).__name__, str(error)[:300]
        out.got = [tuple(r) for r in result.rows]
        return out
    persons = group_persons(ds, q, 0) if (result.privacy.partition or {}).get("strategy") == "threshold" else None
    compare(q, ds, result, exact_cols, exact_rows, full_rows, plan, persons, out)
    # --- what the answer says about bounding
    words, cut, half = clipping_claimed(result)
    clip = result.privacy.clipping
    out.notes.append(f"clipping: people cut {cut:.3g} (half-width {half:.3g}), exact {q.exact_cut}, warned {words}")
    if q.expect_cut:
        if clip is None:
            out.problems.append("caps set below the data's maximum, but no clipping estimate")
        elif cut < 0.5:
            out.problems.append(
                f"caps set below the data's maximum (C, K = {caps}), but clipping says {cut:.3g} people cut"
            )
        if q.exact_cut is not None and clip is not None and abs(cut - q.exact_cut) > max(1.0, 4 * half):
            out.problems.append(f"clipping says {cut:.3g} people cut, exactly {q.exact_cut} were")
        if not words:
            out.problems.append("caps cut people, but no warning says bounding changed the answer")
    else:
        if clip is not None and cut > max(0.5, 4 * half):
            out.problems.append(
                f"nobody is cut (C, K = {caps}), but clipping says {cut:.3g} people cut "
                f"(per row {clip.people_cut})"
            )
        if words:
            out.problems.append(
                "nobody is cut, but a warning says bounding changed the answer: "
                + " | ".join(w[:160] for w in result.warnings if any(x in w for x in CLIP_WORDS))
            )
        if q.exact_cut is not None and clip is not None and abs(cut - q.exact_cut) > max(1.0, 4 * half):
            out.problems.append(f"clipping says {cut:.3g} people cut, exactly {q.exact_cut} were")
    return out


def pairs_over_sql(sql: str, person: str, cap: int) -> str | None:
    """SQL counting the (person, group) pairs with more than ``cap`` rows."""
    base = caps_sql(sql, person)
    if base is None:
        return None
    head = base.split(" SELECT COALESCE(MAX(__n)")[0]
    return f"{head} SELECT COUNT(*) FROM __g WHERE __n > {int(cap)}"


def exact_people_cut(ds: Dataset, q: Query, caps: tuple[int, int] | None) -> int | None:
    """People whose contribution the row cap changes, counted once per group (only when
    the group cap K is not binding)."""
    if caps is None or not ds.multi_row:
        return None
    for person in person_candidates(ds, q):
        need = caps_sql(ref_text(q), person)
        if need is None:
            return None
        try:
            _, k_needed = ds.ref.execute(need).fetchone()
            if int(k_needed) > caps[1]:
                return None
            sql = pairs_over_sql(ref_text(q), person, caps[0])
            return int(ds.ref.execute(sql).fetchone()[0]) if sql else None
        except Exception:
            continue
    return None
