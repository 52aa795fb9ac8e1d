"""Neighbour tests of queries over a released answer: nested queries (proxy/nested.py)
and ROLLUP / CUBE / GROUPING SETS (proxy/grouping_sets.py, an outer query over the
finest grouping's release).

The neighbour harness (neighbours.py) stops at planning: it compares the bounded cores
of D and D' = D minus one person. A nested query is planned as its inner aggregate, and
its outer query runs after the charge on the released rows — post-processing by
construction. Here each query of a corpus goes end to end, and for each neighbour choice:

1. ``Engine.run`` on D and on D' gives the same outcome class: both answered, or both
   refused with the same code and the ledger untouched (an error after the charge, on
   one side or both, is a violation, as is an exception other than ``DPSQLError`` or a
   5xx code);
2. the inner query the engine charged (``Result.cache_key`` is its plan's key) passes
   the harness's own checks on D vs D' (cells within Δ∞, L1, L2, keys, histograms);
3. the answer is a function of the released inner table alone: an engine over a *blank*
   database (every private table emptied), sharing the side's release store and ledger,
   answers the same request from the cached release with the same columns, rows,
   intervals, unsettled cells and rows, and warnings — and never runs SQL on its private
   database;
4. nothing after the charge raises on any release the mechanism can emit: the same blank
   engine answers the request from *doctored* releases (every noised cell 0, ±1, or the
   mechanism's extremes, and a seeded mix of these), each of which must be answered.

The noise is at its normal scale (ε = 1 on the 300-person fuzz data, where the counts'
95% half-widths are in the hundreds): a noisy count of 0, a negative sum, a total near 0
all happen, and (4) makes them happen for sure.

Default suite: :data:`CI` (a handful of queries, a few seconds). ``-m slow``: :data:`FULL`.
"""

from __future__ import annotations

import functools
import random
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from proxy.catalog import split_name
from proxy.engine import Engine, Result
from proxy.errors import DPSQLError
from proxy.memo import Memo
from proxy.nested import NestedQuery
from proxy.policy import Policy
from proxy.request import QueryRequest
from tests.reliability import neighbour_corpus as corpus
from tests.reliability.conftest import FzChecker, fz_demo_policy
from tests.reliability.neighbours import (
    CHOICES,
    VERSION_KEY,
    NeighbourPair,
    Removal,
    _qualified,
    _rewrite,
    build_neighbours,
)

EPSILON = 1.0  # the noise at its normal scale
TIMEOUT_S = 2.0
AFTER_CHARGE = "failed after the charge"
INT_EXTREME = 2**62  # accounting.mechanisms.MAX_UNITS: integer noise is clipped here
FLOAT_EXTREME = 1e300  # proxy.release._FLOAT_LIMIT: float releases stay below this

# --- the corpus --------------------------------------------------------------------------


@dataclass(frozen=True)
class NestedEntry:
    name: str
    sql: str  # a template (neighbour_corpus.demo_facts: {pid}, {region})
    attacks: str
    # the refusal code both sides must give before any charge (None: answered)
    refused: str | None = None
    # whether the engine must take it as a query over a released answer (nested.split);
    # False only for refusals that stop before the split (the outer is checked first)
    nested: bool = True
    # the outer query runs a random function: its answer is no function of the release
    # (still never of the private data: the replay must read none)
    deterministic: bool = True
    # the outer query may fail above an aggregate (proxy/nested.total: such a failure is
    # a function of the released values, reported after the charge with a hint that the
    # inner answer is kept): "answered" or that failure, each reproduced from the release
    # alone; not necessarily alike on D and D', since the noise decides
    may_fail_after_charge: bool = False

    def render(self, facts: dict[str, Any]) -> str:
        return self.sql.format(**facts)


_BY_MODEL = "SELECT model, COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts GROUP BY model"
_BY_REGION = "SELECT region, COUNT(*) AS n, SUM(age) AS s FROM users GROUP BY region"
_BY_WEEK = (
    "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n, AVG(latency_ms) AS l "
    "FROM prompts GROUP BY w"
)

CI: tuple[NestedEntry, ...] = (
    NestedEntry(
        "nested_where_order_limit",
        f"SELECT model, n, s FROM ({_BY_MODEL}) WHERE s > 1000 AND n > 0 ORDER BY n DESC LIMIT 2",
        "outer WHERE and ORDER BY … LIMIT on noisy values choose the rows",
    ),
    NestedEntry(
        "nested_division_by_noisy_counts",
        f"SELECT region, s / n AS mean, s // n AS whole, s % n AS rest, 100 / (n - n) AS z, "
        f"1.0 / (SUM(n) OVER () - n) AS other FROM ({_BY_REGION}) ORDER BY region",
        "division, integer division and modulo by noisy counts that can be 0",
    ),
    NestedEntry(
        "nested_casts_of_noisy_values",
        f"SELECT model, CAST(n AS TINYINT) AS t, CAST(s AS SMALLINT) AS u, "
        "CAST(CAST(s AS VARCHAR) AS INTEGER) AS v, CAST(n * 1e300 AS INTEGER) AS w, "
        f"CAST(s AS DECIMAL(4, 1)) AS d FROM ({_BY_MODEL}) ORDER BY model",
        "casts that fail on some noisy values (overflow, precision)",
    ),
    NestedEntry(
        "nested_group_by_noisy_having",
        f"SELECT CASE WHEN n > 70 THEN 'big' ELSE 'small' END AS size, COUNT(*) AS k, "
        f"SUM(s) AS total, MAX(s) / NULLIF(MIN(n), 0) AS r FROM ({_BY_REGION}) "
        "GROUP BY size HAVING SUM(n) > 0 ORDER BY size",
        "outer GROUP BY on a comparison of noisy values, HAVING on their sum",
    ),
    NestedEntry(
        "nested_window_rank_share",
        f"WITH t AS ({_BY_MODEL}) SELECT model, n * 100.0 / SUM(n) OVER () AS pct, "
        "RANK() OVER (ORDER BY s DESC) AS r, s - LAG(s) OVER (ORDER BY n) AS step "
        "FROM t ORDER BY model",
        "windows over the inner answer (a share of a noisy total that can be 0)",
    ),
    NestedEntry(
        "rollup_count_sum_avg",
        "SELECT model, flagged, COUNT(*) AS n, SUM(tokens_out) AS s, AVG(latency_ms) AS a "
        "FROM prompts GROUP BY ROLLUP (model, flagged)",
        "ROLLUP: subtotals summed from the finest grouping's cells; AVG over noisy counts",
    ),
    NestedEntry(
        "nested_inner_refused",
        "SELECT SUM(n) AS total FROM (SELECT u.region, COUNT(*) AS n FROM users u "
        "JOIN users v ON u.age = v.age GROUP BY u.region)",
        "a nested query whose inner query is refused: refused alike, nothing charged",
        refused="unsupported_sql",
    ),
)

FULL: tuple[NestedEntry, ...] = (
    *CI,
    NestedEntry(
        "nested_distinct_comparisons",
        f"SELECT DISTINCT n > 70 AS big, CASE WHEN s < 0 THEN 'neg' WHEN s = 0 THEN 'zero' "
        f"ELSE 'pos' END AS sign FROM ({_BY_REGION}) ORDER BY 1, 2",
        "DISTINCT over comparisons of noisy values",
    ),
    NestedEntry(
        "nested_math_of_noisy_values",
        f"SELECT model, LN(n) AS a, SQRT(s) AS b, POWER(n, 400) AS c, EXP(s) AS d, "
        f"LOG10(s - n) AS e, ACOS(n) AS f FROM ({_BY_MODEL}) ORDER BY model",
        "functions whose domain a noisy value can leave (logs, roots, powers, exp)",
    ),
    NestedEntry(
        "nested_aggregates_of_noisy_values",
        f"SELECT COUNT(*) AS k, SUM(n) AS total, AVG(s) AS mean, MAX(n) - MIN(n) AS spread, "
        f"STDDEV(s) AS sd, SUM(s) / NULLIF(SUM(n), 0) AS ratio FROM ({_BY_REGION})",
        "aggregates over the inner rows, a ratio of noisy totals",
    ),
    NestedEntry(
        "nested_cte_chain",
        f"WITH t AS ({_BY_REGION}), u AS (SELECT region, s / n AS m, n FROM t WHERE n > 0), "
        "v AS (SELECT region, m * 2 AS m2 FROM u) SELECT region, m2 FROM v ORDER BY m2 DESC "
        "LIMIT 3",
        "a chain of row-level CTEs over the inner answer, LIMIT on a noisy ratio",
    ),
    NestedEntry(
        "nested_pinned_to_person",
        "SELECT region, n, s FROM (SELECT u.region, COUNT(*) AS n, SUM(p.tokens_in) AS s "
        "FROM prompts p JOIN users u ON u.user_id = p.user_id WHERE p.user_id = {pid} "
        "GROUP BY u.region) WHERE n > 5 OR s > 100 ORDER BY region",
        "an inner query pinned to the person D' lacks; outer WHERE on its noisy cells",
    ),
    NestedEntry(
        "nested_dates_keys_noisy_limit",
        f"SELECT w, n, l, date_diff('day', w, MAX(w) OVER ()) AS back FROM ({_BY_WEEK}) "
        "WHERE l > 0 ORDER BY n DESC, w LIMIT 3",
        "date keys from partition selection, a noisy average, ORDER BY … LIMIT",
    ),
    NestedEntry(
        "nested_group_by_noisy_value",
        f"SELECT n // 100 AS bucket, COUNT(*) AS k, AVG(s) AS a FROM ({_BY_MODEL}) "
        "GROUP BY n // 100 ORDER BY bucket",
        "outer GROUP BY the noisy value itself (its keys are noise)",
    ),
    NestedEntry(
        "nested_star_and_row_number",
        f"SELECT *, ROW_NUMBER() OVER (ORDER BY s) AS k FROM ({_BY_MODEL}) ORDER BY k",
        "a star over the released answer, with a window over a noisy order",
    ),
    NestedEntry(
        "cube_count_sum",
        "SELECT region, plan, COUNT(*) AS n, SUM(age) AS s FROM users "
        "GROUP BY CUBE (region, plan) ORDER BY region, plan",
        "CUBE over two public keys: sums of released cells",
    ),
    NestedEntry(
        "grouping_sets_avg_limit",
        "SELECT model, flagged, AVG(tokens_in) AS a, COUNT(*) AS n FROM prompts "
        "WHERE user_id = {pid} OR tokens_in > 50 GROUP BY GROUPING SETS ((model), (flagged), ()) "
        "ORDER BY n DESC LIMIT 4",
        "GROUPING SETS pinned to the person, an AVG over noisy counts, LIMIT on noise",
    ),
    NestedEntry(
        "rollup_partition_selected",
        "SELECT date_trunc('year', ts) AS y, model, COUNT(*) AS n, SUM(tokens_in) AS s "
        "FROM prompts GROUP BY ROLLUP (date_trunc('year', ts), model)",
        "ROLLUP over a key without declared values (partition selection on the cells)",
    ),
    NestedEntry(
        "nested_strings_sized_by_noise",
        f"SELECT model, LENGTH(REPEAT('x', n)) AS a, LENGTH(LPAD('y', s)) AS b, "
        f"LEFT(CAST(s AS VARCHAR), n) AS c FROM ({_BY_MODEL}) ORDER BY model",
        "strings whose size a noisy value sets (up to 2^62 characters): refused",
        refused="unsupported_sql",
        nested=False,  # refused by the split itself
    ),
    NestedEntry(
        "nested_group_all_rank_offset",
        f"SELECT model, SUM(n) AS k, RANK() OVER (ORDER BY SUM(s)) AS r FROM ({_BY_MODEL}) "
        "GROUP BY ALL ORDER BY k, model OFFSET 1",
        "GROUP BY ALL, a rank of noisy sums, OFFSET on a noisy order",
    ),
    NestedEntry(
        "nested_outer_refused",
        f"SELECT model, n, getenv('HOME') AS h FROM ({_BY_MODEL})",
        "an outer query dpsql's allowlist refuses: before any charge",
        refused="unsupported_sql",
    ),
    NestedEntry(
        "nested_outer_reads_private_table",
        f"SELECT model, n, (SELECT COUNT(*) FROM prompts) AS k FROM ({_BY_MODEL})",
        "an outer query that reads a private table beside the answer: refused",
        refused="unsupported_sql",
        nested=False,  # refused by the split itself
    ),
    NestedEntry(
        "nested_outer_random",
        f"SELECT model, n * random() AS r FROM ({_BY_MODEL})",
        "a random outer query (allowed: randomness independent of the data)",
        deterministic=False,
    ),
    NestedEntry(
        "nested_fails_above_an_aggregate",
        f"SELECT CHR(CAST(SUM(s) AS INTEGER)) AS c, SUM(n) AS k FROM ({_BY_MODEL})",
        "a function above an aggregate that fails on some noisy values (CHR of a "
        "surrogate or negative code point): documented to fail after the charge",
        may_fail_after_charge=True,
    ),
    NestedEntry(
        "nested_outer_unbindable",
        f"SELECT model, no_such_column FROM ({_BY_MODEL})",
        "an outer query that cannot bind on the released columns: before any charge",
        refused="bad_request",
    ),
    NestedEntry(
        "nested_inner_refused_per_person_key",
        "SELECT AVG(n) AS a FROM (SELECT age, COUNT(*) AS n FROM users u "
        "WHERE user_id IN (SELECT user_id FROM prompts p JOIN prompts q USING (user_id)) "
        "GROUP BY age)",
        "a nested query whose inner query is refused (a self-join in its semi-join)",
        refused="unsupported_sql",
    ),
)

# --- the engine that answers from a release only ----------------------------------------


class DoctoredStore:
    """The side's release store, read only: ``get`` returns its release, or (with
    ``doctor``) that release with its noised cells replaced. A miss must never be
    flown: the replaying engine would charge and read its (blank) database."""

    def __init__(self, store: Any):
        self.store = store
        self.doctor: Callable[[pa.Table], pa.Table] | None = None

    def get(self, key: str) -> tuple[int, pa.Table] | None:
        hit = self.store.get(key)
        if hit is None or self.doctor is None:
            return hit
        return hit[0], self.doctor(hit[1])

    def has(self, key: str) -> bool:
        return bool(self.store.has(key))

    def claim(self, key: str) -> bool:
        raise AssertionError(f"the replaying engine missed the release {key[:12]}")

    def finish(self, key: str) -> None:
        return None

    def put(self, key: str, charge_id: int, table: pa.Table) -> None:
        raise AssertionError("the replaying engine stored a release")

    def version_key(self) -> bytes:
        return VERSION_KEY

    def close(self) -> None:
        return None


class Replayer:
    """An engine over a blank database (every private table of the population empty,
    the public ones as they are) that shares a side's ledger and reads its releases:
    whatever it answers is a function of the request and the release alone. Its memos
    of releases and answers hold nothing, so that each run reads the store (a doctored
    release included). ``private_runs`` lists the SQL run on its private database
    (``Executor.run``, and ``evaluate`` of a text naming a private table)."""

    def __init__(self, side: Engine, policy: Policy, blank: Path):
        self.store = DoctoredStore(side.cache)
        self.engine = Engine(
            replace(policy, duckdb_path=blank, csv_tables=()),
            ledger=side.budgets.ledger,
            cache=self.store,  # type: ignore[arg-type]
            version_key=VERSION_KEY,
        )
        for memo in ("_released", "_answers", "_hit_results"):
            setattr(self.engine, memo, Memo(0))
        self.private_runs: list[str] = []
        names = [split_name(t.name)[1] for t in policy.tables if not t.public and t.unit]
        self._private = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.I)
        executor = self.engine.executor
        executor.run = self._counted(executor.run, every=True)  # type: ignore[method-assign]
        executor.evaluate = self._counted(executor.evaluate, every=False)  # type: ignore[method-assign]

    def _counted(self, real: Callable[..., Any], *, every: bool) -> Callable[..., Any]:
        """``real``, noting the SQL it runs: every statement (the core), or those that
        name a private table (``evaluate`` also types a domain's constants, planning)."""

        def counted(sql: str, *args: Any, **kwargs: Any) -> Any:
            if every or self._private.search(sql):
                self.private_runs.append(sql[:120])
            return real(sql, *args, **kwargs)

        return counted

    def close(self) -> None:
        self.engine.close()


def _blank_copy(source: Path, target: Path, private: list[str]) -> Path:
    shutil.copyfile(source, target)
    con = duckdb.connect(str(target))
    try:
        for table in private:
            _rewrite(con, table, "FALSE")
            [(n,)] = con.execute(f"SELECT COUNT(*) FROM {_qualified(table)}").fetchall()
            assert n == 0, table
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return target


# --- doctored releases ------------------------------------------------------------------


def _doctored(
    table: pa.Table, *, columns: tuple[str, ...], pick: Callable[[bool, int], Any]
) -> pa.Table:
    """``table`` with each cell of ``columns`` (noised statistics) set by ``pick(is
    integer, row)``."""
    out = table
    for name in columns:
        if name not in table.column_names:
            continue
        i = out.column_names.index(name)
        kind = out.schema.field(name).type
        integer = pa.types.is_integer(kind)
        values = [pick(integer, r) for r in range(out.num_rows)]
        out = out.set_column(i, name, pa.array(values, type=kind))
    return out


_VALUES_INT = (0, 1, -1, INT_EXTREME, -INT_EXTREME, 127, 32768)
_VALUES_FLOAT = (0.0, -0.0, 1.0, -1.0, 0.5, FLOAT_EXTREME, -FLOAT_EXTREME, 1e-300)


def doctors(full: bool) -> list[tuple[str, Callable[[bool, int], Any]]]:
    """The releases to try: every noised cell one value the mechanism can emit, then
    seeded mixes (a count of 0 beside a large sum, …)."""
    constants: list[tuple[str, Callable[[bool, int], Any]]] = []
    pairs = [(0, 0.0), (-1, -1.0), (INT_EXTREME, FLOAT_EXTREME), (-INT_EXTREME, -FLOAT_EXTREME)]
    if full:
        pairs += [(1, 1.0), (127, 0.5), (32768, 1e-300)]
    for i, f in pairs:
        constants.append((f"all {i}/{f}", lambda integer, _r, i=i, f=f: i if integer else f))
    mixes = 6 if full else 2
    for seed in range(mixes):
        rng = random.Random(seed)
        memo: dict[tuple[bool, int, int], Any] = {}

        def mix(integer: bool, r: int, rng=rng, memo=memo) -> Any:
            # (a fresh draw per call: each column of a row gets its own)
            return rng.choice(_VALUES_INT if integer else _VALUES_FLOAT)

        constants.append((f"mix {seed}", mix))
    return constants


# --- the checks -------------------------------------------------------------------------


def _shown(result: Result) -> tuple[Any, ...]:
    """What an answer shows, comparable with ==: (NaN and -0.0 by repr)."""
    return (
        result.columns,
        [tuple(repr(v) for v in row) for row in result.rows],
        [tuple(repr(w) for w in row) for row in result.intervals],
        result.unsettled_cells,
        result.unsettled_rows,
        result.warnings,
    )


def _outcome(error: BaseException) -> str:
    if isinstance(error, DPSQLError):
        return error.code
    return f"escaped {type(error).__name__}: {str(error)[:200]}"


@dataclass
class NestedReport:
    query: str
    neighbour: str
    outcomes: tuple[str, str] = ("", "")
    violations: list[str] = field(default_factory=list)
    doctored_runs: int = 0
    doctored_failures: list[str] = field(default_factory=list)  # allowed ones only

    @property
    def ok(self) -> bool:
        return not self.violations

    def describe(self) -> str:
        head = f"{self.neighbour}: D {self.outcomes[0]}, D' {self.outcomes[1]}"
        return "\n  ".join([head, *self.violations, f"query: {self.query}"])


class NestedNeighbours:
    """One neighbour pair with a replaying engine per side."""

    def __init__(self, pair: NeighbourPair, blank: Path):
        self.pair = pair
        self.replayers: list[Replayer] = []
        try:
            policies = (pair.neighbours.d, pair.neighbours.d_prime)
            for side, policy in zip(pair.engines, policies, strict=True):
                self.replayers.append(Replayer(side, policy, blank))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for r in self.replayers:
            r.close()

    def split(self, engine: Engine, request: QueryRequest) -> NestedQuery | None:
        return engine._nested(engine._translate(request)[0])

    def check(self, entry: NestedEntry, sql: str, *, doctored: tuple[bool, bool]) -> NestedReport:
        """Checks 1–4 of the module docstring; ``doctored``: per side (D, D'), whether
        to answer doctored releases too (check 4)."""
        request = QueryRequest(sql, epsilon=EPSILON)
        report = NestedReport(sql, self.pair.neighbours.label)
        bad = report.violations.append
        names = ("D", "D'")

        # The split is planning (reads no data): the same on both sides.
        splits: list[NestedQuery | str | None] = []
        for engine in self.pair.engines:
            try:
                splits.append(self.split(engine, request))
            except DPSQLError as error:
                splits.append(error.code)
            except Exception as error:
                bad(f"[escaped] the split: {_outcome(error)}")
                return report
        found, other = splits
        inner_sql = ""
        if isinstance(found, NestedQuery) and isinstance(other, NestedQuery):
            inner_sql = found.inner.sql(dialect=request.dialect)
            if other.inner.sql(dialect=request.dialect) != inner_sql:
                bad("[split_differs] D and D' split the query into different inner queries")
        elif found != other:
            bad(f"[split_differs] D {found!r}, D' {other!r}")
        if entry.nested and not isinstance(found, NestedQuery):
            bad(f"[not_nested] the engine does not answer it as an outer query ({found!r})")
            return report

        # 1. The same outcome class on D and D'; nothing fails after the charge.
        results: list[Result | None] = []
        outcomes: list[str] = []
        for name, engine in zip(names, self.pair.engines, strict=True):
            checked = FzChecker(engine)(request)
            kind, problem = checked.kind, checked.violation
            if checked.result is None and problem.startswith("refusal changed the ledger"):
                kind, problem = (
                    AFTER_CHARGE,
                    (
                        ""
                        if entry.may_fail_after_charge and checked.kind == "bad_request"
                        else f"{checked.kind} after the charge ({problem})"
                    ),
                )
            outcomes.append(kind)
            results.append(checked.result)
            if problem:
                bad(f"[after_charge] {name}: {problem}")
        report.outcomes = (outcomes[0], outcomes[1])
        expected = {entry.refused} if entry.refused else {"answered"}
        if entry.may_fail_after_charge:
            expected.add(AFTER_CHARGE)
        elif outcomes[0] != outcomes[1]:
            bad(f"[outcome_differs] D {outcomes[0]}, D' {outcomes[1]}")
        for name, kind in zip(names, outcomes, strict=True):
            if kind not in expected:
                bad(f"[outcome] {name}: expected {' or '.join(sorted(expected))}, got {kind}")

        if entry.refused:
            # Refusals come before any data is read: the blank engines refuse alike.
            for name, replayer in zip(names, self.replayers, strict=True):
                replayer.private_runs.clear()
                try:
                    replayer.engine.run(request)
                    got = "answered"
                except Exception as error:
                    got = _outcome(error)
                if got != entry.refused:
                    bad(f"[refusal_reads_data] {name}'s blank engine: {got}")
            return report
        if report.violations:
            return report
        assert isinstance(found, NestedQuery)

        # 2. The inner release the engine charged: its bounded core on D vs D'.
        plan = self.pair.d.prepare(QueryRequest(inner_sql, epsilon=EPSILON))[1]
        for name, engine, result in zip(names, self.pair.engines, results, strict=True):
            key = result.cache_key if result is not None else None
            if key is None and not engine.cache.has(plan.cache_key):
                bad(f"[charged_other] {name}: no release stored under the inner query's key")
            elif key is not None and key != plan.cache_key:
                bad(
                    f"[charged_other] {name} answered from release {key[:12]}, the inner "
                    f"query's plan is {plan.cache_key[:12]}"
                )
        inner_report = self.pair.check(inner_sql, epsilon=EPSILON, run_engine=False)
        if not inner_report.ok or not inner_report.answered:
            bad(f"[inner_core] {inner_report.describe()}")

        # 3. A function of the release alone: answered again from it over blank data.
        for name, replayer, result in zip(names, self.replayers, results, strict=True):
            replayer.store.doctor = None
            replayer.private_runs.clear()
            try:
                again: Result | None = replayer.engine.run(request)
                got = "answered"
            except Exception as error:
                again, got = None, _outcome(error)
            want = "answered" if result is not None else "bad_request"
            if got != want:
                bad(f"[not_post_processing] {name}: {want} on its data, {got} from the release")
            if result is not None and again is not None:
                if not again.privacy.cached or again.privacy.charge_id != result.privacy.charge_id:
                    bad(f"[replay] {name}: not answered from the release the run charged")
                if entry.deterministic and _shown(again) != _shown(result):
                    bad(
                        f"[not_post_processing] {name}: the answer from the release alone "
                        f"differs:\n    run    {_shown(result)[:3]}\n"
                        f"    replay {_shown(again)[:3]}"
                    )
            if replayer.private_runs:
                bad(
                    f"[private_read] {name}: ran on the private database after the release: "
                    f"{replayer.private_runs[:2]}"
                )

        # 4. Nothing after the charge raises, whatever the noise released.
        columns = tuple(n.statistic.column for n in plan.noise)
        for name, replayer, wanted in zip(names, self.replayers, doctored, strict=True):
            if not wanted:
                continue
            for label, pick in doctors(full=all(doctored)):
                replayer.store.doctor = functools.partial(_doctored, columns=columns, pick=pick)
                replayer.private_runs.clear()
                try:
                    replayer.engine.run(request)
                    report.doctored_runs += 1
                except Exception as error:
                    if entry.may_fail_after_charge and _outcome(error) == "bad_request":
                        report.doctored_failures.append(label)
                    else:
                        bad(
                            f"[after_charge] {name}, a release with noised cells {label}: "
                            f"{_outcome(error)}"
                        )
                finally:
                    replayer.store.doctor = None
                if replayer.private_runs:
                    bad(f"[private_read] {name} ({label}): {replayer.private_runs[:2]}")
        return report


# --- fixtures ---------------------------------------------------------------------------


@dataclass
class Side:
    nested: NestedNeighbours
    facts: dict[str, Any]


@pytest.fixture(scope="module")
def nn_sides(
    tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path, au_ledgers: Path
) -> Iterator[dict[Removal, Side]]:
    folder = tmp_path_factory.mktemp("nn-demo")
    policy = fz_demo_policy(folder, fz_demo_db)
    private = [t.name for t in policy.tables if not t.public and t.unit]
    blank = _blank_copy(fz_demo_db, folder / "blank.duckdb", private)
    sides: dict[Removal, Side] = {}
    try:
        for removal in CHOICES:
            neighbours = build_neighbours(
                policy, folder / removal, removal, timeout_s=TIMEOUT_S, ledgers=au_ledgers
            )
            pair = NeighbourPair(neighbours)
            try:
                nested = NestedNeighbours(pair, blank)
            except BaseException:
                pair.close()
                raise
            sides[removal] = Side(nested, corpus.demo_facts(pair.exact_rows, neighbours.person))
        yield sides
    finally:
        for side in sides.values():
            side.nested.close()
            side.nested.pair.close()


# --- the tests --------------------------------------------------------------------------


def _run(entry: NestedEntry, removal: Removal, sides: dict[Removal, Side], full: bool) -> None:
    side = sides[removal]
    # Doctored releases on D for the HEAVIEST neighbour in the default suite (the outer
    # query and the release shapes are the same on every side); on every side in full.
    doctored = (True, True) if full else (removal is Removal.HEAVIEST, False)
    report = side.nested.check(entry, entry.render(side.facts), doctored=doctored)
    print(
        f"\n{entry.name} {removal}: D {report.outcomes[0]}, D' {report.outcomes[1]}; "
        f"{report.doctored_runs} doctored releases answered, "
        f"{len(report.doctored_failures)} failed as allowed {report.doctored_failures}"
    )
    assert report.ok, report.describe()


@pytest.mark.parametrize("removal", CHOICES, ids=str)
@pytest.mark.parametrize("entry", CI, ids=lambda e: e.name)
def test_nested_corpus(entry: NestedEntry, removal: Removal, nn_sides: dict[Removal, Side]):
    _run(entry, removal, nn_sides, full=False)


@pytest.mark.slow
@pytest.mark.parametrize("removal", CHOICES, ids=str)
@pytest.mark.parametrize("entry", FULL, ids=lambda e: e.name)
def test_nested_corpus_full(entry: NestedEntry, removal: Removal, nn_sides: dict[Removal, Side]):
    _run(entry, removal, nn_sides, full=True)


def test_corpus_names_are_distinct():
    names = [e.name for e in FULL]
    assert len(names) == len(set(names))


# --- the harness catches what it is for -------------------------------------------------


def _kinds(report: NestedReport) -> set[str]:
    return {v.split("]", 1)[0].lstrip("[") for v in report.violations}


def test_harness_catches_a_private_read_after_the_release(
    nn_sides: dict[Removal, Side], monkeypatch: pytest.MonkeyPatch
):
    """An outer step that reads the private database (here each whole number it shows
    replaced by the rows of prompts) is answered on D and D' alike, but the blank
    engines answer otherwise from the same release, and say what they ran."""
    real = Engine._run_outer

    def peeking(self: Engine, found: NestedQuery, table: pa.Table) -> Any:
        names, rows = real(self, found, table)
        [(k,)] = self.executor.evaluate("SELECT COUNT(*) FROM prompts")
        return names, [
            tuple(k if isinstance(v, int) and not isinstance(v, bool) else v for v in row)
            for row in rows
        ]

    monkeypatch.setattr(Engine, "_run_outer", peeking)
    entry = NestedEntry("peek", f"SELECT model, n AS peeked FROM ({_BY_MODEL})", "a break")
    report = nn_sides[Removal.HEAVIEST].nested.check(entry, entry.sql, doctored=(False, False))
    assert report.outcomes == ("answered", "answered"), report.describe()
    assert {"not_post_processing", "private_read"} <= _kinds(report), report.describe()


def test_harness_catches_a_failure_on_a_noisy_value(
    nn_sides: dict[Removal, Side], monkeypatch: pytest.MonkeyPatch
):
    """An outer step that fails after the charge on some released values (here any
    negative whole number, which the noise gives a small count now and then): the
    doctored releases make it fail for sure."""
    real = Engine._run_outer

    def failing(self: Engine, found: NestedQuery, table: pa.Table) -> Any:
        for name in table.column_names:
            values = table.column(name).to_pylist()
            if any(isinstance(v, int) and v < 0 for v in values):
                raise DPSQLError("bad_request", "a negative cell", "")
        return real(self, found, table)

    monkeypatch.setattr(Engine, "_run_outer", failing)
    entry = NestedEntry("fail", f"SELECT model, n AS failing FROM ({_BY_MODEL})", "a break")
    report = nn_sides[Removal.HEAVIEST].nested.check(entry, entry.sql, doctored=(True, False))
    assert "after_charge" in _kinds(report), report.describe()
