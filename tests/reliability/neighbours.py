"""The neighbour harness (issue #10 §4): one query, two databases that differ in one
person, and the checks a user-level DP engine must pass on them.

Neighbouring databases differ by ALL rows of one person in every private table of the
population. For a query, :meth:`NeighbourPair.check` plans it on both engines (planning
reads no private data, so the two plans must be identical), runs the bounded core on both
with the same secret L0 seed (so that every other person's sampled groups are the same),
and checks:

(a) the same outcome on both: answered, or the same refusal code at planning; never an
    error after planning (the core, the release step, or ``Engine.run`` with a cap that
    never runs out) and never an exception other than ``DPSQLError``;
(b) per released statistic, every cell moves by at most the declared Δ∞ and the whole
    column by at most the declared L1 and L2 (a group missing on one side counts as 0,
    public domains are completed as the release step completes them); with partition
    selection, each group's person count moves by at most 1 and at most K groups move;
(c) outside partition selection, the same released keys on both;
(d) for MEDIAN, quantiles, MIN and MAX: per argument, every group's histogram over the
    grid moves by at most C (the declared rows per person and group) in L1, and at most K
    groups' histograms move (the input the exponential mechanism's cost assumes).

Usage (the API the lead uses; keep it stable)::

    neighbours = build_neighbours(policy, folder, Removal.HEAVIEST, timeout_s=4.0)
    with NeighbourPair(neighbours) as pair:
        report = pair.check("SELECT region, COUNT(*) FROM users GROUP BY region")
        assert report.ok, report.describe()

``policy`` is any parsed policy over a DuckDB file or CSV sources whose caps never run
out (the harness also answers each query with ``Engine.run`` on both sides); the harness
copies the data into ``folder``, removes the person, and gives each side its own ledger
and release cache. Both sides get the same explicit data version, so their plans (cache
keys included) can be compared whole. ``NeighbourReport.violations`` lists what failed,
each with the query, the neighbour, the group, the statistic, and the declared and
measured values; ``NeighbourReport.core_seconds`` gives the core's run time on D and D'
(the timing signal of issue #10 §3).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import numpy as np

from proxy.catalog import split_name
from proxy.csv_copies import load_sources
from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.plan import Plan
from proxy.policy import Policy
from proxy.release import _exact_keys, release
from proxy.request import QueryRequest
from proxy.rewrite.l0 import takes_seed

# The seed of the L0 sampling hash, the same on both sides (any 63-bit value will do:
# what matters is that D and D' sample every other person's groups alike).
DEFAULT_SEED = 0x2D5F_0C1E_9A37_4B21
DATA_VERSION = "neighbour-harness"
VERSION_KEY = b"neighbour-harness-version-key"
# Float statistics: exact DECIMAL sums come back as float64, so each side carries up to
# one ulp of its own value; 1e-6 covers DECIMAL(38, 9) rounding of a whole column.
FLOAT_ABS_TOLERANCE = 1e-6
REL_TOLERANCE = 1e-9


class Removal(StrEnum):
    """Which person D' lacks.

    HEAVIEST: the most rows over all private tables of the population (ties: smallest
    id) — the person whose rows stress every per-person bound.
    EVERYWHERE: a person with rows in every private table, the one with the fewest rows
    (ties: smallest id) other than the HEAVIEST person when there is another — an
    ordinary person reached through every join path.
    CHOSEN: the person the caller names, e.g. the target of a targeted attack.
    """

    HEAVIEST = "heaviest"
    EVERYWHERE = "everywhere"
    CHOSEN = "chosen"  # the caller names the person (``build_neighbours(person=...)``)


# The two neighbours every query is checked on (CHOSEN is for targeted tests).
CHOICES: tuple[Removal, ...] = (Removal.HEAVIEST, Removal.EVERYWHERE)


class ViolationKind(StrEnum):
    """What broke; the issue each belongs to is in RELIABILITY.md "Neighbour tests"."""

    ESCAPED = "escaped"  # an exception other than DPSQLError
    PLANNING_DIFFERS = "planning_differs"  # refused on one side only, or different codes
    PLAN_DIFFERS = "plan_differs"  # both planned, but not the same plan
    DOMAIN_ORDER = "domain_order"  # the same plan but for the public domain's order
    ERROR_AFTER_PLANNING = "error_after_planning"  # core, release or Engine.run failed
    NON_FINITE = "non_finite"  # a statistic is NaN or infinite before noise
    CELL = "cell"  # one group moved by more than Δ∞
    L1 = "l1"  # the column moved by more than its L1 sensitivity
    L2 = "l2"  # the column moved by more than its L2 sensitivity
    PERSONS_CELL = "persons_cell"  # a group's person count moved by more than 1
    PERSONS_GROUPS = "persons_groups"  # more than K groups' person counts moved
    KEYS = "keys"  # different released keys outside partition selection
    HISTOGRAM_CELL = "histogram_cell"  # a group's quantile histogram moved by more than C
    HISTOGRAM_GROUPS = "histogram_groups"  # more than K groups' quantile histograms moved


@dataclass(frozen=True)
class Violation:
    kind: ViolationKind
    query: str
    neighbour: str
    detail: str
    statistic: str | None = None
    group: tuple[Any, ...] | None = None
    declared: float | None = None
    measured: float | None = None

    def describe(self) -> str:
        parts = [f"[{self.kind}] {self.neighbour}: {self.detail}"]
        if self.statistic is not None:
            parts.append(f"statistic {self.statistic}")
        if self.group is not None:
            parts.append(f"group {self.group!r}")
        if self.declared is not None or self.measured is not None:
            parts.append(f"declared {self.declared!r}, measured {self.measured!r}")
        parts.append(f"query: {self.query}")
        return "; ".join(parts)


@dataclass(frozen=True)
class NeighbourReport:
    """The result of one :meth:`NeighbourPair.check`.

    ``outcome`` is "answered", a refusal code both sides gave at planning, or
    "violation" when planning already disagreed. ``groups`` counts the compared groups
    (union of both sides). ``core_seconds`` is (D, D') wall time of the bounded core, NaN
    when it did not run.
    """

    query: str
    neighbour: str
    outcome: str
    violations: tuple[Violation, ...]
    core_seconds: tuple[float, float] = (math.nan, math.nan)
    groups: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def answered(self) -> bool:
        return self.outcome == "answered"

    def kinds(self) -> frozenset[ViolationKind]:
        return frozenset(v.kind for v in self.violations)

    def describe(self, limit: int = 8) -> str:
        lines = [f"{self.neighbour}: {self.outcome}, {len(self.violations)} violation(s)"]
        lines += ["  " + v.describe() for v in self.violations[:limit]]
        if len(self.violations) > limit:
            lines.append(f"  ... and {len(self.violations) - limit} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class Neighbours:
    """D and D' as two policies (own data copies, ledgers and caches)."""

    removal: Removal
    person: Any  # the unit value whose rows D' lacks
    rows_removed: tuple[tuple[str, int], ...]  # (table, rows) per private table
    d: Policy
    d_prime: Policy

    @property
    def label(self) -> str:
        rows = sum(n for _, n in self.rows_removed)
        return f"D' = D minus the {self.removal} person ({self.person!r}, {rows} rows)"


# --- building D and D' ------------------------------------------------------------------


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _qualified(table: str) -> str:
    db, name = split_name(table)
    return f"{_quote(db)}.{_quote(name)}"


def _population(policy: Policy, population: str | None) -> str:
    if population is not None:
        return population
    names = [p.name for p in policy.populations]
    if len(names) != 1:
        raise ValueError(f"name the population: the policy declares {names}")
    return names[0]


def _choose(
    con: duckdb.DuckDBPyConnection,
    tables: Sequence[tuple[str, str]],
    removal: Removal,
    person: Any = None,
) -> Any:
    """The person to remove, from per-table row counts (``tables``: (table, unit))."""
    if removal is Removal.CHOSEN:
        if person is None:
            raise ValueError("Removal.CHOSEN needs person=")
        return person
    counts: dict[Any, list[int]] = {}
    for i, (table, unit) in enumerate(tables):
        rows = con.execute(
            f"SELECT {_quote(unit)}, COUNT(*) FROM {_qualified(table)} "
            f"WHERE {_quote(unit)} IS NOT NULL GROUP BY 1"
        ).fetchall()
        for person, n in rows:
            counts.setdefault(person, [0] * len(tables))[i] = int(n)
    if not counts:
        raise ValueError("the population has no rows")
    heaviest = min(counts, key=lambda p: (-sum(counts[p]), p))
    if removal is Removal.HEAVIEST:
        return heaviest
    everywhere = [p for p, per in counts.items() if all(per)]
    if not everywhere:
        raise ValueError("no person has rows in every private table")
    others = [p for p in everywhere if p != heaviest] or everywhere
    return min(others, key=lambda p: (sum(counts[p]), p))


def _remove(
    con: duckdb.DuckDBPyConnection, tables: Sequence[tuple[str, str]], person: Any
) -> tuple[tuple[str, int], ...]:
    removed = []
    for table, unit in tables:
        [(n,)] = con.execute(
            f"SELECT COUNT(*) FROM {_qualified(table)} WHERE {_quote(unit)} = ?", [person]
        ).fetchall()
        _rewrite(con, table, f"{_quote(unit)} IS DISTINCT FROM ?", [person])
        removed.append((table, int(n)))
    return tuple(removed)


def _rewrite(
    con: duckdb.DuckDBPyConnection, table: str, keep: str = "TRUE", params: Sequence[Any] = ()
) -> None:
    """Write ``table`` afresh with the rows where ``keep`` holds, under its own DDL. A
    DELETE leaves the removed rows' strings in the table's compressed segments, where a
    filter pushed into the scan still reads them: D' then paid for the removed person's
    long values, hiding a timing gap between the two sides (a probe, 2026-12-02). Both
    sides are rewritten, so that their storage is alike."""
    db, name = split_name(table)
    [(ddl,)] = con.execute(
        "SELECT sql FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?", [db, name]
    ).fetchall()
    old = _quote(f"{name}__before_rewrite")
    con.execute(f"ALTER TABLE {_qualified(table)} RENAME TO {old}")
    con.execute(ddl)
    con.execute(
        f"INSERT INTO {_qualified(table)} SELECT * FROM {_quote(db)}.{old} WHERE {keep}",
        list(params),
    )
    con.execute(f"DROP TABLE {_quote(db)}.{old}")


def _side_policy(
    policy: Policy,
    folder: Path,
    *,
    duckdb_path: Path | None,
    csv: tuple[tuple[str, Path], ...],
    timeout_s: float | None,
) -> Policy:
    folder.mkdir(parents=True, exist_ok=True)
    proxy = policy.proxy
    if timeout_s is not None:
        proxy = dataclasses.replace(proxy, query_timeout_s=timeout_s)
    return dataclasses.replace(
        policy,
        proxy=proxy,
        duckdb_path=duckdb_path,
        csv_tables=csv,
        ledger_path=folder / "ledger.sqlite",
        data_version=DATA_VERSION,
    )


def build_neighbours(
    policy: Policy,
    folder: Path,
    removal: Removal,
    *,
    population: str | None = None,
    timeout_s: float | None = None,
    ledgers: Path | None = None,
    person: Any = None,
) -> Neighbours:
    """Copy ``policy``'s data into ``folder`` as D and D' (D minus every row of the
    person ``removal`` picks, in every private table of ``population``).

    DuckDB sources are copied and the rows deleted; CSV sources are read as the engine
    reads them (proxy/csv_copies.py: declared types) and both D and D' are written back through
    DuckDB, so that the only difference between the files is the person's rows.
    ``person`` names the person for ``Removal.CHOSEN``. ``timeout_s`` overrides the policy's query time limit on both sides; ``ledgers`` is
    where the two ledgers and release caches go (default ``folder``; a tmpfs folder spares
    the fsync of every charge).
    """
    folder.mkdir(parents=True, exist_ok=True)
    pop = _population(policy, population)
    tables = [(t.name, str(t.unit)) for t in policy.tables_of(pop) if not t.public and t.unit]
    if not tables:
        raise ValueError(f"population {pop} has no private table with a unit")
    if policy.duckdb_path is not None:
        d_file, dp_file = folder / "d.duckdb", folder / "d_prime.duckdb"
        shutil.copyfile(policy.duckdb_path, d_file)
        shutil.copyfile(policy.duckdb_path, dp_file)
        con = duckdb.connect(str(dp_file))
        try:
            person = _choose(con, tables, removal, person)
            removed = _remove(con, tables, person)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        con = duckdb.connect(str(d_file))
        try:
            for table, _ in tables:
                _rewrite(con, table)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        d_csv: tuple[tuple[str, Path], ...] = ()
        dp_csv: tuple[tuple[str, Path], ...] = ()
        d_db: Path | None = d_file
        dp_db: Path | None = dp_file
    else:
        con = duckdb.connect(":memory:")
        try:
            load_sources(policy, con)  # the engine's reader: declared types
            person = _choose(con, tables, removal, person)
            d_list, dp_list = [], []
            for name, _ in policy.csv_tables:
                target = folder / f"d-{name}.csv"
                con.execute(f"COPY {_qualified(name)} TO '{target}' (HEADER, DELIMITER ',')")
                d_list.append((name, target))
            removed = _remove(con, tables, person)
            for name, _ in policy.csv_tables:
                target = folder / f"d_prime-{name}.csv"
                con.execute(f"COPY {_qualified(name)} TO '{target}' (HEADER, DELIMITER ',')")
                dp_list.append((name, target))
        finally:
            con.close()
        d_csv, dp_csv, d_db, dp_db = tuple(d_list), tuple(dp_list), None, None
    state = (
        folder
        if ledgers is None
        else Path(tempfile.mkdtemp(prefix=f"neighbours-{removal}-", dir=ledgers))
    )
    return Neighbours(
        removal=removal,
        person=person,
        rows_removed=removed,
        d=_side_policy(
            policy, state / "engine-d", duckdb_path=d_db, csv=d_csv, timeout_s=timeout_s
        ),
        d_prime=_side_policy(
            policy, state / "engine-d_prime", duckdb_path=dp_db, csv=dp_csv, timeout_s=timeout_s
        ),
    )


# --- comparing the two sides ------------------------------------------------------------


def _python(value: Any) -> Any:
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN keys must compare equal to themselves
    return value


def _number(value: Any) -> int | float:
    """A statistic as an exact int or a float (SQL NULL, an empty input, counts as 0)."""
    value = value.item() if isinstance(value, np.generic) else value
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    return float(value)


def _key_rows(plan: Plan, exact: Mapping[str, np.ndarray]) -> list[tuple[Any, ...]]:
    # As the release reads them (DECIMAL keys come as their text: Core.text_keys).
    types = {name: kind.upper() for name, kind in plan.released_columns}
    keys = [
        [_python(v) for v in _exact_keys(list(exact[k]), types.get(k, ""))]
        for k in plan.key_columns
    ]
    rows = len(keys[0]) if keys else len(next(iter(exact.values())))
    return [tuple(k[i] for k in keys) for i in range(rows)]


def _groups(
    plan: Plan, exact: Mapping[str, np.ndarray], columns: Sequence[str]
) -> dict[tuple[Any, ...], dict[str, int | float]]:
    """Per group, the exact statistics the release step would noise: a public domain is
    completed (missing keys as 0, keys outside it dropped) as ``release`` does."""
    keys = _key_rows(plan, exact)
    values = {c: np.asarray(exact[c], dtype=object) for c in columns}
    found = {key: {c: _number(values[c][i]) for c in columns} for i, key in enumerate(keys)}
    if plan.domain is None:
        return found
    domain = [tuple(_python(v) for v in d) for d in plan.domain]
    return {d: found.get(d, {}) for d in domain}


@dataclass(frozen=True)
class _Side:
    """One engine's attempt: a plan, a refusal code at planning, or an escape."""

    plan: Plan | None = None
    refusal: str | None = None
    escaped: str | None = None


def _comparable(name: str, value: Any) -> Any:
    """A plan field as compared: a public domain's NaN keys equal to each other (a NaN
    is unequal to itself, so two lists holding one would always differ)."""
    if name == "domain" and value is not None:
        return [tuple(_python(v) for v in d) for d in value]
    return value


def _differing(a: Plan, b: Plan) -> list[str]:
    return [
        f.name
        for f in dataclasses.fields(a)
        if _comparable(f.name, getattr(a, f.name)) != _comparable(f.name, getattr(b, f.name))
    ]


def _only_domain_order(a: Plan, b: Plan) -> bool:
    return (
        set(_differing(a, b)) <= {"domain", "cache_key"}
        and a.domain is not None
        and b.domain is not None
        and sorted(map(repr, a.domain)) == sorted(map(repr, b.domain))
    )


def _plan_difference(a: Plan, b: Plan) -> str:
    text = f"the two plans differ in {', '.join(_differing(a, b))}"
    if _only_domain_order(a, b):
        text += " (only the order of the public domain)"
    return text


def _outcome(error: BaseException) -> str:
    if isinstance(error, DPSQLError):
        return f"{error.code} ({error.message[:120]})"
    return f"{type(error).__name__} escaped: {str(error)[:120]}"


class NeighbourPair:
    """Two engines, over D and D', with separate ledgers and release caches."""

    def __init__(self, neighbours: Neighbours, *, bounding: bool = True):
        # bounding=False only to show that the harness catches a violation (the engine's
        # audit flag: Linf and L0 skipped, sensitivities declared as if they ran).
        self.neighbours = neighbours
        # One key of the released data version for both sides (each has its own release
        # store, hence its own key), so that their plans, cache keys included, compare.
        key = VERSION_KEY
        self.d = Engine(
            neighbours.d, version_key=key, _unsafe_disable_bounding_for_audit=not bounding
        )
        try:
            self.d_prime = Engine(
                neighbours.d_prime,
                version_key=key,
                _unsafe_disable_bounding_for_audit=not bounding,
            )
        except BaseException:
            self.d.close()
            raise

    def __enter__(self) -> NeighbourPair:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.d.close()
        finally:
            self.d_prime.close()

    @property
    def engines(self) -> tuple[Engine, Engine]:
        return self.d, self.d_prime

    def exact_rows(self, sql: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Run trusted SQL on both raw databases (the harness's own facts, e.g. the sum
        a multiplier must straddle; never an analyst's query)."""
        out = []
        for engine in self.engines:
            out.append(engine.executor.evaluate(sql))
        return out[0], out[1]

    @staticmethod
    def _prepare(engine: Engine, request: QueryRequest) -> _Side:
        try:
            _, plan = engine.prepare(request)
        except DPSQLError as error:
            return _Side(refusal=error.code)
        except Exception as error:  # the contract: only DPSQLError may escape
            return _Side(escaped=f"{type(error).__name__}: {str(error)[:200]}")
        return _Side(plan=plan)

    def check(
        self,
        sql: str,
        *,
        dialect: str = "duckdb",
        epsilon: float = 1.0,
        seed: int = DEFAULT_SEED,
        run_engine: bool = True,
    ) -> NeighbourReport:
        """Plan ``sql`` on both sides, compare the bounded cores run with ``seed``, then
        (``run_engine``) answer it with ``Engine.run`` on both, which charges each
        side's own ledger at ``epsilon``."""
        label = self.neighbours.label
        request = QueryRequest(sql, dialect=dialect, epsilon=epsilon)
        found: list[Violation] = []

        def violation(kind: ViolationKind, detail: str, **facts: Any) -> None:
            found.append(Violation(kind, sql, label, detail, **facts))

        sides = [self._prepare(e, request) for e in self.engines]
        if any(s.escaped for s in sides):
            violation(
                ViolationKind.ESCAPED,
                f"planning: D {sides[0].escaped or 'ok'}; D' {sides[1].escaped or 'ok'}",
            )
            return NeighbourReport(sql, label, "violation", tuple(found))
        d_side, dp_side = sides
        if d_side.refusal or dp_side.refusal:
            if d_side.refusal != dp_side.refusal:
                violation(
                    ViolationKind.PLANNING_DIFFERS,
                    f"planning: D {d_side.refusal or 'planned'}, D' {dp_side.refusal or 'planned'}",
                )
                return NeighbourReport(sql, label, "violation", tuple(found))
            return NeighbourReport(sql, label, str(d_side.refusal), ())
        assert d_side.plan is not None and dp_side.plan is not None
        plan = d_side.plan
        if _differing(plan, dp_side.plan):
            difference = _plan_difference(plan, dp_side.plan)
            if not _only_domain_order(plan, dp_side.plan):
                violation(ViolationKind.PLAN_DIFFERS, difference)
                return NeighbourReport(sql, label, "answered", tuple(found))
            # Reported, and the comparison goes on with D's plan: groups are matched by
            # key value, so the order of the domain does not matter below.
            violation(ViolationKind.DOMAIN_ORDER, difference)

        exacts, seconds, failures = self._cores(plan, seed)
        if any(failures):
            violation(
                ViolationKind.ERROR_AFTER_PLANNING,
                f"bounded core: D {failures[0] or 'answered'}; D' {failures[1] or 'answered'}",
            )
            return NeighbourReport(sql, label, "answered", tuple(found), seconds)
        d_exact, dp_exact = exacts
        assert d_exact is not None and dp_exact is not None
        groups = self._compare(plan, d_exact, dp_exact, violation)
        _check_histograms(plan, d_exact, dp_exact, violation)
        self._released_keys(plan, d_exact, dp_exact, violation)
        if run_engine and all(v.kind is ViolationKind.DOMAIN_ORDER for v in found):
            self._run_engines(request, violation)
        return NeighbourReport(sql, label, "answered", tuple(found), seconds, groups)

    # --- the steps ------------------------------------------------------------------

    def _cores(
        self, plan: Plan, seed: int
    ) -> tuple[list[dict[str, np.ndarray] | None], tuple[float, float], list[str]]:
        params = [seed] if takes_seed(plan.core_sql) else []
        exacts: list[dict[str, np.ndarray] | None] = []
        seconds: list[float] = []
        failures: list[str] = []
        for engine in self.engines:
            start = time.perf_counter()
            try:
                exacts.append(engine.executor.run(plan.core_sql, params))
                failures.append("")
            except Exception as error:
                exacts.append(None)
                failures.append(_outcome(error))
            seconds.append(time.perf_counter() - start)
        return exacts, (seconds[0], seconds[1]), failures

    @staticmethod
    def _compare(
        plan: Plan,
        d_exact: Mapping[str, np.ndarray],
        dp_exact: Mapping[str, np.ndarray],
        violation: Any,
    ) -> int:
        columns = [n.statistic.column for n in plan.noise]
        if plan.threshold is not None:
            columns.append("__persons")
        on_d = _groups(plan, d_exact, columns)
        on_dp = _groups(plan, dp_exact, columns)
        keys = list(dict.fromkeys([*on_d, *on_dp]))
        for noise in plan.noise:
            _check_column(noise, keys, on_d, on_dp, violation)
        if plan.threshold is not None:
            moved = 0
            for key in keys:
                a = on_d.get(key, {}).get("__persons", 0)
                b = on_dp.get(key, {}).get("__persons", 0)
                if a != b:
                    moved += 1
                if abs(a - b) > 1:
                    violation(
                        ViolationKind.PERSONS_CELL,
                        "a group's person count moved by more than one person",
                        statistic="__persons",
                        group=key,
                        declared=1.0,
                        measured=float(abs(a - b)),
                    )
            if moved > plan.threshold.max_groups:
                violation(
                    ViolationKind.PERSONS_GROUPS,
                    "more groups' person counts moved than the person may touch (K)",
                    statistic="__persons",
                    declared=float(plan.threshold.max_groups),
                    measured=float(moved),
                )
        return len(keys)

    @staticmethod
    def _released_keys(
        plan: Plan,
        d_exact: Mapping[str, np.ndarray],
        dp_exact: Mapping[str, np.ndarray],
        violation: Any,
    ) -> None:
        """Run the release step itself on both exact tables: it must not fail, and
        outside partition selection both must release the same keys."""
        tables = []
        for name, exact in (("D", d_exact), ("D'", dp_exact)):
            try:
                tables.append(release(plan, exact))
            except Exception as error:
                violation(
                    ViolationKind.ERROR_AFTER_PLANNING, f"release on {name}: {_outcome(error)}"
                )
                return
        if plan.domain is None:
            # Partition selection may keep different groups; a group kept on both must
            # show its key alike, sign of a zero included (Python's == calls -0.0 and
            # 0.0 equal: repr does not).
            shown = [
                {
                    tuple(_python(v) for v in row): tuple(repr(v) for v in row)
                    for row in zip(
                        *(t.column(k).to_pylist() for k in plan.key_columns), strict=True
                    )
                }
                for t in tables
            ]
            for key in shown[0].keys() & shown[1].keys():
                if shown[0][key] != shown[1][key]:
                    violation(
                        ViolationKind.KEYS,
                        f"a group kept on both sides shows its key as {shown[0][key]} on D "
                        f"and {shown[1][key]} on D'",
                    )
                    return
            return
        keys = [
            [[_python(v) for v in t.column(k).to_pylist()] for k in plan.key_columns]
            for t in tables
        ]
        if keys[0] != keys[1] or tables[0].num_rows != tables[1].num_rows:
            violation(
                ViolationKind.KEYS,
                f"released keys differ outside partition selection "
                f"({tables[0].num_rows} rows on D, {tables[1].num_rows} on D')",
            )

    def _run_engines(self, request: QueryRequest, violation: Any) -> None:
        outcomes = []
        for engine in self.engines:
            try:
                result = engine.run(request)
                outcomes.append(("answered", len(result.rows) if result.rows else 0))
            except Exception as error:
                outcomes.append((_outcome(error), 0))
        if any(o[0] != "answered" for o in outcomes):
            violation(
                ViolationKind.ERROR_AFTER_PLANNING,
                f"Engine.run: D {outcomes[0][0]}; D' {outcomes[1][0]}",
            )


def _tolerance(declared: float, a: float, b: float, integer: bool) -> float:
    slack = REL_TOLERANCE * abs(declared) + 4e-16 * (abs(a) + abs(b))
    return slack if integer else slack + FLOAT_ABS_TOLERANCE


def _check_column(
    noise: Any,
    keys: Sequence[tuple[Any, ...]],
    on_d: Mapping[tuple[Any, ...], Mapping[str, int | float]],
    on_dp: Mapping[tuple[Any, ...], Mapping[str, int | float]],
    violation: Any,
) -> None:
    column = noise.statistic.column
    integer = bool(noise.statistic.integer)
    sens = noise.sensitivity
    diffs: list[float] = []
    slack = 0.0
    for key in keys:
        a = on_d.get(key, {}).get(column, 0)
        b = on_dp.get(key, {}).get(column, 0)
        if not (math.isfinite(a) and math.isfinite(b)):
            violation(
                ViolationKind.NON_FINITE,
                "a statistic is not finite before noise",
                statistic=column,
                group=key,
                measured=float(a) if not math.isfinite(a) else float(b),
            )
            return
        diff = abs(a - b)  # exact for integers
        tol = _tolerance(sens.per_group, a, b, integer)
        slack += tol
        diffs.append(float(diff))
        if diff > sens.per_group + tol:
            violation(
                ViolationKind.CELL,
                "one group moved by more than the per-group sensitivity Δ∞",
                statistic=column,
                group=key,
                declared=sens.per_group,
                measured=float(diff),
            )
    l1 = math.fsum(diffs)
    l2 = math.sqrt(math.fsum(d * d for d in diffs))
    if l1 > sens.l1 + slack + REL_TOLERANCE * sens.l1:
        violation(
            ViolationKind.L1,
            f"the column moved by more than its L1 sensitivity over {len(keys)} groups",
            statistic=column,
            declared=sens.l1,
            measured=l1,
        )
    if l2 > sens.l2 + slack + REL_TOLERANCE * sens.l2:
        violation(
            ViolationKind.L2,
            f"the column moved by more than its L2 sensitivity over {len(keys)} groups",
            statistic=column,
            declared=sens.l2,
            measured=l2,
        )


def _histograms(
    plan: Plan, exact: Mapping[str, np.ndarray], name: str, bins: int
) -> dict[tuple[Any, ...], np.ndarray]:
    """Per group, the dense histogram ``name`` (the core's ``<name>_b``/``<name>_n``
    lists) as the release step would read it; a public domain is completed with zeros."""
    keys = _key_rows(plan, exact)
    found = {}
    for i, key in enumerate(keys):
        dense = np.zeros(bins, dtype=np.int64)
        b, n = exact[f"{name}_b"][i], exact[f"{name}_n"][i]
        if b is not None and n is not None:
            np.add.at(dense, np.asarray(b, dtype=np.int64), np.asarray(n, dtype=np.int64))
        found[key] = dense
    if plan.domain is None:
        return found
    domain = [tuple(_python(v) for v in d) for d in plan.domain]
    return {d: found.get(d, np.zeros(bins, dtype=np.int64)) for d in domain}


def _check_histograms(
    plan: Plan,
    d_exact: Mapping[str, np.ndarray],
    dp_exact: Mapping[str, np.ndarray],
    violation: Any,
) -> None:
    """(d): each quantile argument's per-group histograms move by <= C in L1, in <= K
    groups (declared by the descriptors: max_rows and max_groups)."""
    seen = set()
    for drawn in plan.quantiles:
        name, grid, d = drawn.statistic.histogram, drawn.statistic.grid, drawn.descriptor
        if name in seen:
            continue
        seen.add(name)
        on_d = _histograms(plan, d_exact, name, grid.bins)
        on_dp = _histograms(plan, dp_exact, name, grid.bins)
        empty = np.zeros(grid.bins, dtype=np.int64)
        moved = 0
        for key in dict.fromkeys([*on_d, *on_dp]):
            l1 = int(np.abs(on_d.get(key, empty) - on_dp.get(key, empty)).sum())
            moved += l1 > 0
            if l1 > d.max_rows:
                violation(
                    ViolationKind.HISTOGRAM_CELL,
                    "a group's quantile histogram moved by more than C rows (L1)",
                    statistic=name,
                    group=key,
                    declared=float(d.max_rows),
                    measured=float(l1),
                )
        if moved > d.max_groups:
            violation(
                ViolationKind.HISTOGRAM_GROUPS,
                "more groups' quantile histograms moved than the person may touch (K)",
                statistic=name,
                declared=float(d.max_groups),
                measured=float(moved),
            )


def check_all(
    pair: NeighbourPair, queries: Sequence[str], **kwargs: Any
) -> Iterator[NeighbourReport]:
    """:meth:`NeighbourPair.check` over many queries (a generator, so callers can stop)."""
    for sql in queries:
        yield pair.check(sql, **kwargs)
