"""Empirical privacy audit: neighbouring databases, pipeline runners and a statistical
lower bound on ε.

Two DuckDB databases differ by one *heavy* person: D holds them (one row in ``people``
and hundreds in ``events``), D' = D without any of their rows. The whole pipeline
(parse → … → ledger charge → DuckDB → noise → post-processing) runs N times on each with
the same request, and each answer is reduced to one number (a released cell, or whether
a group was released). For any event S, an (ε, δ)-DP mechanism satisfies
P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] + δ (and symmetrically), so Clopper–Pearson bounds
p_lo ≤ P[M(D) ∈ S] and q_hi ≥ P[M(D') ∈ S] give ε ≥ ln((p_lo − δ)/q_hi) with probability
at least 1 − α. S is a threshold event ``x ≥ t`` or its complement, chosen on one half of
the samples and evaluated on the other half, so the choice costs no multiple-testing
correction.

numpy's generator appears only in tests of the estimator (synthetic samples); every
audited value comes out of the engine's own OpenDP noise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from scipy import stats

from proxy.engine import Engine, Result
from proxy.policy import Policy, parse_policy
from proxy.request import QueryRequest

# --- the estimator ----------------------------------------------------------------------


def cp_lower(successes: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson lower bound: P[p ≥ bound] ≥ 1 − α for k ~ Bin(n, p)."""
    k = np.asarray(successes, dtype=np.float64)
    safe = np.maximum(k, 1.0)
    out = stats.beta.ppf(alpha, safe, n - safe + 1.0)
    return np.asarray(np.where(k <= 0, 0.0, out), dtype=np.float64)


def cp_upper(successes: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound: P[p ≤ bound] ≥ 1 − α for k ~ Bin(n, p)."""
    k = np.asarray(successes, dtype=np.float64)
    safe = np.minimum(k, n - 1.0)
    out = stats.beta.ppf(1.0 - alpha, safe + 1.0, n - safe)
    return np.asarray(np.where(k >= n, 1.0, out), dtype=np.float64)


def epsilon_from_bounds(p_low: np.ndarray, q_high: np.ndarray, delta: float) -> np.ndarray:
    """ln((p_lo − δ)/q_hi), and 0 where that is undefined or negative."""
    num = np.asarray(p_low, dtype=np.float64) - delta
    den = np.asarray(q_high, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(num / den)
    return np.asarray(np.where((num > 0) & (den > 0) & (eps > 0), eps, 0.0), dtype=np.float64)


@dataclass(frozen=True)
class EpsilonBound:
    """A lower bound on ε that holds with probability ≥ 1 − alpha.

    The event is ``x >= threshold`` (``upper``) or ``x < threshold``; ``first`` names the
    dataset whose probability is the numerator ("D" or "D'"). ``p_low``/``q_high`` are the
    Clopper–Pearson bounds on the held-out half (each at α/2), ``k_p``/``k_q`` the counts
    there, ``n_p``/``n_q`` the held-out sizes.
    """

    epsilon: float
    threshold: float
    upper: bool
    first: str
    p_low: float
    q_high: float
    k_p: int
    k_q: int
    n_p: int
    n_q: int
    alpha: float
    delta: float

    def describe(self) -> str:
        op = ">=" if self.upper else "<"
        other = "D'" if self.first == "D" else "D"
        return (
            f"ε_lb={self.epsilon:.3f} from P[x {op} {self.threshold:g}]: "
            f"{self.first} {self.k_p}/{self.n_p} (lo {self.p_low:.3g}) vs "
            f"{other} {self.k_q}/{self.n_q} (hi {self.q_high:.3g}), α={self.alpha:g}"
        )


def _candidates(a: np.ndarray, b: np.ndarray, limit: int) -> np.ndarray:
    """Thresholds halfway between consecutive distinct observed values: a test placed in
    the middle of a gap generalises to the held-out half better than one on a sample."""
    pooled = np.unique(np.concatenate([a, b]))
    if len(pooled) < 2:
        return pooled
    lo, hi = pooled[:-1], pooled[1:]
    with np.errstate(invalid="ignore"):
        mids = np.where(np.isneginf(lo), hi, (lo + hi) / 2.0)
    if len(mids) > limit:
        mids = np.unique(np.quantile(mids, np.linspace(0.0, 1.0, limit), method="nearest"))
    return np.asarray(mids, dtype=np.float64)


def _event_counts(sorted_x: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """How many of ``sorted_x`` are >= each threshold."""
    return len(sorted_x) - np.searchsorted(sorted_x, thresholds, side="left")


def _all_bounds(
    a: np.ndarray, b: np.ndarray, thresholds: np.ndarray, delta: float, alpha: float
) -> list[tuple[np.ndarray, bool, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    na, nb = len(a), len(b)
    ge_a = _event_counts(np.sort(a), thresholds)
    ge_b = _event_counts(np.sort(b), thresholds)
    out = []
    for upper in (True, False):
        ka = ge_a if upper else na - ge_a
        kb = ge_b if upper else nb - ge_b
        for first, kp, np_, kq, nq in (("D", ka, na, kb, nb), ("D'", kb, nb, ka, na)):
            p_lo = cp_lower(kp, np_, alpha)
            q_hi = cp_upper(kq, nq, alpha)
            out.append((epsilon_from_bounds(p_lo, q_hi, delta), upper, first, p_lo, q_hi, kp, kq))
    return out


def epsilon_lower_bound(
    on_d: Sequence[float] | np.ndarray,
    on_d_prime: Sequence[float] | np.ndarray,
    *,
    delta: float,
    alpha: float = 0.05,
    max_candidates: int = 512,
) -> EpsilonBound:
    """The best threshold test's lower bound on ε, valid with probability ≥ 1 − α.

    Preconditions: both samples are i.i.d. outputs of the mechanism on D and on D' (at
    least 4 each; -inf is allowed, e.g. for "group not released"); 0 ≤ δ < 1; 0 < α < 1.
    Even-indexed samples choose the event and direction (maximising the same bound
    computed there); odd-indexed samples evaluate it with one-sided Clopper–Pearson
    bounds at α/2 each, so the returned ε is a valid lower bound of the mechanism's ε at
    δ with probability ≥ 1 − α (union bound over the two intervals).
    """
    a = np.asarray(on_d, dtype=np.float64)
    b = np.asarray(on_d_prime, dtype=np.float64)
    if len(a) < 4 or len(b) < 4 or np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("need at least 4 non-NaN samples on each side")
    if not (0 < alpha < 1 and 0 <= delta < 1):
        raise ValueError("need 0 < alpha < 1 and 0 <= delta < 1")
    sel_a, sel_b, hold_a, hold_b = a[0::2], b[0::2], a[1::2], b[1::2]
    thresholds = _candidates(sel_a, sel_b, max_candidates)
    best: tuple[float, float, bool, str] = (-1.0, float(thresholds[0]), True, "D")
    for eps, upper, first, *_ in _all_bounds(sel_a, sel_b, thresholds, delta, alpha):
        top = float(eps.max())
        if top > best[0]:
            # Several thresholds often tie (a gap with no samples): take the middle one.
            tied = np.flatnonzero(eps >= top - 1e-12)
            best = (top, float(thresholds[tied[len(tied) // 2]]), upper, first)
    _, t, upper, first = best
    [row] = [
        r
        for r in _all_bounds(hold_a, hold_b, np.array([t]), delta, alpha / 2.0)
        if r[1] == upper and r[2] == first
    ]
    eps, _, _, p_lo, q_hi, kp, kq = row
    n_p, n_q = (len(hold_a), len(hold_b)) if first == "D" else (len(hold_b), len(hold_a))
    return EpsilonBound(
        epsilon=float(eps[0]),
        threshold=t,
        upper=upper,
        first=first,
        p_low=float(p_lo[0]),
        q_high=float(q_hi[0]),
        k_p=int(kp[0]),
        k_q=int(kq[0]),
        n_p=n_p,
        n_q=n_q,
        alpha=alpha,
        delta=delta,
    )


def perfect_separation_bound(n: int, alpha: float, delta: float = 0.0) -> float:
    """The largest ε_lb N samples per side can show (n = N//2 held out): p = 1, q = 0."""
    p_lo = float(cp_lower(n, n, alpha / 2.0))
    q_hi = float(cp_upper(0, n, alpha / 2.0))
    return float(epsilon_from_bounds(np.array([p_lo]), np.array([q_hi]), delta)[0])


# --- neighbouring databases ------------------------------------------------------------

HEAVY_UID = 0
KINDS = ("x", "y", "z")
REGIONS = ("north", "south", "east", "west")
TEAMS = ("t0", "t1", "t2", "t3")
TAGS = ("g0", "g1", "g2", "g3")
SPREAD_PREFIX = "s"


@dataclass(frozen=True)
class Population:
    """How the two neighbouring databases are filled.

    Every ordinary person has 1–3 rows in ``events``, all in one (kind, tag, team) so
    that bounding them is deterministic; the heavy person has ``heavy_rows`` rows with
    ``amount = 100`` (the upper bound), kind ``x``, team ``t1`` (an existing group) and
    tag ``solo`` (a group of their own). ``spread_groups`` > 0 also gives them one row in
    each of that many ``spread`` groups ``s0, s1, …`` that hold ``spread_people``
    ordinary persons each (so a group's release is near its threshold).
    """

    others: int = 1000
    heavy_rows: int = 500
    spread_groups: int = 0
    spread_people: int = 0


SCHEMA = """
CREATE TABLE people (uid INTEGER, region VARCHAR);
CREATE TABLE events (uid INTEGER, amount DOUBLE, kind VARCHAR, tag VARCHAR, team VARCHAR,
                     spread VARCHAR, seq INTEGER);
CREATE TABLE kinds (kind VARCHAR, label VARCHAR);
"""


def _rows(pop: Population) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    people: list[tuple[Any, ...]] = [(HEAVY_UID, "north")]
    # ``seq`` numbers each person's rows: the join-chain query splits them on its bits.
    events: list[tuple[Any, ...]] = [
        (HEAVY_UID, 100.0, "x", "solo", "t1", None, i) for i in range(pop.heavy_rows)
    ]
    events += [
        (HEAVY_UID, 100.0, "x", "solo", "t1", f"{SPREAD_PREFIX}{g}", pop.heavy_rows + g)
        for g in range(pop.spread_groups)
    ]
    uid = 1
    for i in range(pop.others):
        people.append((uid, REGIONS[i % 4]))
        for j in range(1 + i % 3):
            events.append(
                (
                    uid,
                    float((i * 37) % 101),
                    KINDS[i % 3],
                    TAGS[i % 4],
                    TEAMS[(i // 4) % 4],
                    None,
                    j,
                )
            )
        uid += 1
    for g in range(pop.spread_groups):
        for _ in range(pop.spread_people):
            people.append((uid, REGIONS[uid % 4]))
            events.append((uid, 50.0, "y", "g0", "t0", f"{SPREAD_PREFIX}{g}", 0))
            uid += 1
    return people, events


def build_database(path: Path, pop: Population, *, with_heavy: bool) -> Path:
    """Write D (``with_heavy``) or D' (the same minus every row of the heavy person)."""
    people, events = _rows(pop)
    if not with_heavy:
        people = [r for r in people if r[0] != HEAVY_UID]
        events = [r for r in events if r[0] != HEAVY_UID]
    people_t = pa.table(list(zip(*people, strict=True)), names=["uid", "region"])
    events_t = pa.table(
        list(zip(*events, strict=True)),
        names=["uid", "amount", "kind", "tag", "team", "spread", "seq"],
    )
    kinds_t = pa.table({"kind": list(KINDS), "label": ["ex", "why", "zed"]})
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    try:
        con.execute(SCHEMA)
        for name, table in (("people", people_t), ("events", events_t), ("kinds", kinds_t)):
            con.register("incoming", table)
            con.execute(f"INSERT INTO {name} SELECT * FROM incoming")
            con.unregister("incoming")
    finally:
        con.close()
    return path


def policy_text(db: Path, ledger: Path, *, mechanism: str = "gaussian") -> str:
    """C = 1 row per person per group and K = 1 group, so the heavy person's 500 rows
    are far above what one person may contribute; the cap never runs out."""
    return f"""
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
mechanism = "{mechanism}"

[database]
duckdb = "{db}"
version = "audit"

[ledger]
path = "{ledger}"

[populations.users]
epsilon_cap = 1e12
delta = 5e-4

[tables.people]
population = "users"
unit = "uid"
one_row_per_person = true
columns.region = {{ values = {list(REGIONS)!r} }}

[tables.events]
population = "users"
unit = "uid"
max_groups = 1
max_rows_per_group = 1
columns.amount = {{ lower = 0, upper = 100 }}
columns.kind = {{ values = {list(KINDS)!r} }}

[tables.kinds]
public = true
""".replace("'", '"')


@dataclass(frozen=True)
class Neighbours:
    """The two database files of one audit population."""

    root: Path
    d: Path
    d_prime: Path
    population: Population
    ledgers: Path  # ledgers and caches; a tmpfs folder spares their fsyncs

    def policy(self, which: str, label: str, *, mechanism: str = "gaussian") -> Policy:
        """A policy over D ("D") or D' ("D'") with its own ledger and cache under
        ``label`` (one per engine, so no answer is ever shared between engines)."""
        db = self.d if which == "D" else self.d_prime
        ledger = self.ledgers / f"{label}-{'d' if which == 'D' else 'dp'}.sqlite"
        return parse_policy(policy_text(db, ledger, mechanism=mechanism), base_dir=self.root)


def build_neighbours(
    root: Path, pop: Population = Population(), *, ledgers: Path | None = None
) -> Neighbours:
    root.mkdir(parents=True, exist_ok=True)
    return Neighbours(
        ledgers=ledgers or root / "ledgers",
        root=root,
        d=build_database(root / "d.duckdb", pop, with_heavy=True),
        d_prime=build_database(root / "d_prime.duckdb", pop, with_heavy=False),
        population=pop,
    )


# --- the audited queries ----------------------------------------------------------------


def _only_cell(result: Result) -> float:
    [row] = result.rows
    return float(row[0])


def _cell_of(key: str) -> Callable[[Result], float]:
    def cell(result: Result) -> float:
        for row in result.rows:
            if row[0] == key:
                return float(row[1])
        return -math.inf  # the group was not released

    return cell


def _present(key: str) -> Callable[[Result], float]:
    def present(result: Result) -> float:
        return 1.0 if any(row[0] == key for row in result.rows) else 0.0

    return present


def _spread_released(result: Result) -> float:
    return float(sum(1 for row in result.rows if str(row[0]).startswith(SPREAD_PREFIX)))


def _total(result: Result) -> float:
    """The sum of the last column over every released row."""
    return float(sum(float(row[-1]) for row in result.rows))


CHAIN_LINKS = 10


def join_chain_sql(links: int = CHAIN_LINKS) -> str:
    """Issue #10 §2 on the audit schema: each link LEFT JOINs people on the person id
    plus a condition on one bit of the event's ``seq``, then joins people again through
    it on the id alone; a CASE over the second copy is a public key. The heavy person's
    500 rows (seq 0..499) have 500 distinct bit patterns, so with 10 links they sit in
    500 of the 1024 groups while L0 = 1 is assumed: they move the sum of all cells by
    500 and the column by L2 = √500 ≈ 22.4, where 1 is declared."""
    joins, keys = [], []
    for i in range(links):
        joins.append(
            f"LEFT JOIN people t{i} ON t{i}.uid = e.uid AND e.seq % {2 ** (i + 1)} < {2**i} "
            f"LEFT JOIN people q{i} ON q{i}.uid = t{i}.uid"
        )
        keys.append(f"CASE WHEN q{i}.region IS NULL THEN 'a' ELSE 'b' END AS g{i}")
    names = ", ".join(f"g{i}" for i in range(links))
    return f"SELECT {', '.join(keys)}, COUNT(*) FROM events e {' '.join(joins)} GROUP BY {names}"


@dataclass(frozen=True)
class AuditQuery:
    name: str
    sql: str
    extract: Callable[[Result], float]
    note: str


QUERIES: tuple[AuditQuery, ...] = (
    AuditQuery("count", "SELECT COUNT(*) FROM events", _only_cell, "released count"),
    AuditQuery("sum", "SELECT SUM(amount) FROM events", _only_cell, "released sum"),
    AuditQuery("avg", "SELECT AVG(amount) FROM events", _only_cell, "released mean"),
    AuditQuery(
        "group_public",
        "SELECT kind, COUNT(*) FROM events GROUP BY kind",
        _cell_of("x"),
        "count of public key kind='x'",
    ),
    AuditQuery(
        "group_private_existing",
        "SELECT team, COUNT(*) FROM events GROUP BY team",
        _cell_of("t1"),
        "count of private key team='t1' (-inf if not released)",
    ),
    AuditQuery(
        "group_private_solo",
        "SELECT tag, COUNT(*) FROM events GROUP BY tag",
        _present("solo"),
        "is the heavy person's own group 'solo' released",
    ),
    AuditQuery(
        "join_private",
        "SELECT COUNT(*) FROM events e JOIN people p ON e.uid = p.uid WHERE p.region = 'north'",
        _only_cell,
        "count over events ⋈ people on the unit",
    ),
    AuditQuery(
        "join_public",
        "SELECT SUM(e.amount) FROM events e JOIN kinds k ON e.kind = k.kind WHERE k.label = 'ex'",
        _only_cell,
        "sum over events ⋈ public kinds",
    ),
    AuditQuery(
        "join_chain",
        join_chain_sql(),
        _total,
        f"sum of all {2**CHAIN_LINKS} cells of a {CHAIN_LINKS}-link LEFT JOIN chain",
    ),
)

SPREAD_QUERY = AuditQuery(
    "group_private_spread",
    "SELECT spread, COUNT(DISTINCT uid) FROM events WHERE spread IS NOT NULL GROUP BY spread",
    _spread_released,
    "number of released 'spread' groups (the heavy person is in all of them)",
)


def threshold_tau(
    neighbours: Neighbours, query_name: str, *, epsilon: float, mechanism: str = "gaussian"
) -> int:
    """The partition-selection threshold τ the engine plans for this query (a dry run)."""
    engine = Engine(neighbours.policy("D", f"tau-{mechanism}", mechanism=mechanism))
    try:
        plan = engine.explain(QueryRequest(query(query_name).sql, epsilon=epsilon)).plan
    finally:
        engine.close()
    if plan.threshold is None:
        raise ValueError(f"{query_name} has no partition selection")
    return plan.threshold.tau


def spread_neighbours(
    root: Path, *, groups: int, epsilon: float, mechanism: str, ledgers: Path | None = None
) -> Neighbours:
    """Neighbours whose heavy person is in ``groups`` private groups that each hold τ − 1
    ordinary persons: without the heavy person a group is released with probability
    Pr[Z ≥ 1], with them Pr[Z ≥ 0]. L0 = 1 lets them count in one group only; without
    bounding they count in all of them."""
    probe = build_neighbours(
        root / "probe", Population(others=10, spread_groups=2, spread_people=2), ledgers=ledgers
    )
    tau = threshold_tau(probe, SPREAD_QUERY.name, epsilon=epsilon, mechanism=mechanism)
    pop = Population(others=10, heavy_rows=500, spread_groups=groups, spread_people=tau - 1)
    return build_neighbours(root, pop, ledgers=ledgers)


def query(name: str) -> AuditQuery:
    for q in (*QUERIES, SPREAD_QUERY):
        if q.name == name:
            return q
    raise KeyError(name)


# --- running the pipeline --------------------------------------------------------------

# Each run asks for ε·(1 + i·EPS_STEP): a different plan (so a cache miss with fresh
# noise) whose noise scale differs from the first run's by less than N·EPS_STEP.
EPS_STEP = 1e-10


@dataclass(frozen=True)
class Samples:
    values: np.ndarray
    epsilon: float  # the largest ε charged by any run (at ``delta``)
    delta: float  # the largest δ charged
    scales: tuple[float, float]  # min and max noise scale of the first released column
    seconds: float


def sample(
    engine: Engine, sql: str, extract: Callable[[Result], float], *, epsilon: float, n: int
) -> Samples:
    """Run the whole pipeline ``n`` times (every run a charged cache miss)."""
    values = np.empty(n, dtype=np.float64)
    eps_max = delta_max = 0.0
    lo, hi = math.inf, -math.inf
    start = time.perf_counter()
    for i in range(n):
        result = engine.run(QueryRequest(sql, epsilon=epsilon * (1.0 + i * EPS_STEP)))
        if result.privacy.cached or result.privacy.epsilon <= 0:
            raise AssertionError(f"run {i} was not a charged cache miss: {result.privacy}")
        values[i] = extract(result)
        eps_max = max(eps_max, result.privacy.epsilon)
        delta_max = max(delta_max, result.privacy.delta)
        scale = _first_scale(result)
        if not math.isnan(scale):
            lo, hi = min(lo, scale), max(hi, scale)
    scales = (lo, hi) if lo <= hi else (math.nan, math.nan)
    return Samples(values, eps_max, delta_max, scales, time.perf_counter() - start)


def _first_scale(result: Result) -> float:
    for column in result.privacy.columns:
        if column.noise_scale is not None:
            return column.noise_scale
    scale = result.privacy.partition.get("scale")
    return float(scale) if scale is not None else math.nan


def sample_on(
    neighbours: Neighbours,
    which: str,
    query_name: str,
    *,
    n: int,
    epsilon: float,
    bounding: bool,
    mechanism: str,
    label: str,
) -> Samples:
    """A fresh engine (own ledger and cache) over D or D', sampled ``n`` times. A module
    function taking only picklable arguments, so a process pool can run it."""
    q = query(query_name)
    engine = Engine(
        neighbours.policy(which, label, mechanism=mechanism),
        _unsafe_disable_bounding_for_audit=not bounding,
    )
    try:
        return sample(engine, q.sql, q.extract, epsilon=epsilon, n=n)
    finally:
        engine.close()


@dataclass(frozen=True)
class AuditResult:
    query: str
    bounding: bool
    mechanism: str
    n: int  # runs on each of D and D'
    epsilon_charged: float  # the largest ε any run charged, at delta_charged
    delta_charged: float
    bound: EpsilonBound
    on_d: np.ndarray = field(repr=False, compare=False)
    on_d_prime: np.ndarray = field(repr=False, compare=False)
    scales: tuple[float, float] = (math.nan, math.nan)
    seconds: float = 0.0  # wall time of both sides

    @property
    def violation(self) -> bool:
        return self.bound.epsilon > self.epsilon_charged

    def bound_at(self, alpha: float) -> EpsilonBound:
        return epsilon_lower_bound(
            self.on_d, self.on_d_prime, delta=self.delta_charged, alpha=alpha
        )


def audit(
    neighbours: Neighbours,
    query_name: str,
    *,
    n: int,
    epsilon: float = 1.0,
    bounding: bool = True,
    mechanism: str = "gaussian",
    alpha: float = 0.05,
    pool: Executor | None = None,
) -> AuditResult:
    """Sample the query n times on D and on D' (fresh engines and ledgers; in parallel
    when a process pool is given) and bound ε from the two output distributions."""
    label = f"{query_name}-{'b' if bounding else 'u'}-{mechanism}-{epsilon:g}-{n}"
    kwargs: dict[str, Any] = dict(
        n=n, epsilon=epsilon, bounding=bounding, mechanism=mechanism, label=label
    )
    start = time.perf_counter()
    if pool is None:
        d, dp = (sample_on(neighbours, w, query_name, **kwargs) for w in ("D", "D'"))
    else:
        futures = [pool.submit(sample_on, neighbours, w, query_name, **kwargs) for w in ("D", "D'")]
        d, dp = (f.result() for f in futures)
    delta = max(d.delta, dp.delta)
    return AuditResult(
        query=query_name,
        bounding=bounding,
        mechanism=mechanism,
        n=n,
        epsilon_charged=max(d.epsilon, dp.epsilon),
        delta_charged=delta,
        bound=epsilon_lower_bound(d.values, dp.values, delta=delta, alpha=alpha),
        on_d=d.values,
        on_d_prime=dp.values,
        scales=(min(d.scales[0], dp.scales[0]), max(d.scales[1], dp.scales[1])),
        seconds=time.perf_counter() - start,
    )
