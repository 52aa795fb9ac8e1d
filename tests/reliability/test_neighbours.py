"""Neighbour tests (issue #10 §4): the adversarial corpus and the fuzzer's answered
queries through the neighbour harness, on D and on D' = D minus one person.

CI size: the corpus on the small fuzz database (300 people, 3,000 prompts) and on PUMS,
for both neighbour choices; 200 grammar + 200 mutation fuzz cases. Full size (``-m
slow``): the corpus on the 5,000-person demo (where the issue's literal queries fail) and
5,000 + 5,000 fuzz cases.

Cases that fail on today's engine are strict xfails that may only fail with the
violation kinds of their defect (:class:`KnownViolation`); anything else fails for real.
When a fix lands, the case XPASSes, the strict mark turns it red, and its entry in
``KNOWN_*`` below must go.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from proxy.errors import DPSQLError
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.reliability import neighbour_corpus as corpus
from tests.reliability.conftest import fz_demo_policy, fz_pums_policy
from tests.reliability.neighbour_corpus import Entry
from tests.reliability.neighbours import (
    CHOICES,
    NeighbourPair,
    NeighbourReport,
    Removal,
    ViolationKind,
    build_neighbours,
)
from tests.reliability.test_fuzz import SEEDS, mutate, queries

CI_TIMEOUT_S = 2.0  # corpus queries take < 0.2 s here; the §3 self-joins need minutes
FULL_TIMEOUT_S = 20.0
CI_FUZZ = (200, 200)  # grammar, mutation cases (the default suite's share of 15 min)
FULL_FUZZ = (5000, 5000)

# --- known defects ----------------------------------------------------------------------


class KnownViolation(Exception):
    """Raised when a case shows only the violations of its known defect: the strict
    xfail expects exactly this, so any other failure is reported as a real one."""


@dataclass(frozen=True)
class Known:
    reason: str
    kinds: frozenset[ViolationKind]


H, E = Removal.HEAVIEST, Removal.EVERYWHERE
# Every defect the corpus found is fixed (issue #10 §1–§3 and the new findings): no
# known violation remains. A future defect gets an entry here, with its own kinds.
KNOWN_CI: dict[tuple[str, Removal], Known] = {}
KNOWN_FULL: dict[tuple[str, Removal], Known] = {}
KNOWN_PUMS: dict[tuple[str, Removal], Known] = {}
TOLERATED: frozenset[ViolationKind] = frozenset()


def assert_clean(report: NeighbourReport, known: Known | None) -> None:
    """No violation, or (for a known defect) only violations of its kinds."""
    allowed = known.kinds if known is not None else frozenset()
    kinds = report.kinds() - TOLERATED
    unexpected = kinds - allowed
    assert not unexpected, report.describe()
    if kinds:
        raise KnownViolation(report.describe())


def _params(entries: tuple[Entry, ...], known: dict[tuple[str, Removal], Known]) -> list[Any]:
    out = []
    for entry in entries:
        for removal in CHOICES:
            found = known.get((entry.name, removal))
            marks = (
                [pytest.mark.xfail(strict=True, raises=KnownViolation, reason=found.reason)]
                if found is not None
                else []
            )
            out.append(
                pytest.param(entry, removal, found, id=f"{entry.name}-{removal}", marks=marks)
            )
    return out


# --- fixtures ---------------------------------------------------------------------------


@dataclass
class Side:
    pair: NeighbourPair
    facts: dict[str, Any]


@pytest.fixture(scope="module")
def nb_demo(
    tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path, au_ledgers: Path
) -> Iterator[dict[Removal, Side]]:
    yield from _sides(tmp_path_factory, fz_demo_db, CI_TIMEOUT_S, au_ledgers)


@pytest.fixture(scope="module")
def nb_full_demo(
    tmp_path_factory: pytest.TempPathFactory, au_ledgers: Path
) -> Iterator[dict[Removal, Side]]:
    # The demo's own size and seed (sample_data.generate defaults), as in the issue.
    db = generate(
        tmp_path_factory.mktemp("nb-full-data") / "usage.duckdb",
        people=5000,
        prompts=100_000,
        seed=7,
    )
    yield from _sides(tmp_path_factory, db, FULL_TIMEOUT_S, au_ledgers)


def _sides(
    factory: pytest.TempPathFactory, db: Path, timeout_s: float, ledgers: Path
) -> Iterator[dict[Removal, Side]]:
    folder = factory.mktemp("nb-demo")
    policy = fz_demo_policy(folder, db)
    sides: dict[Removal, Side] = {}
    try:
        for removal in CHOICES:
            neighbours = build_neighbours(
                policy, folder / removal, removal, timeout_s=timeout_s, ledgers=ledgers
            )
            pair = NeighbourPair(neighbours)
            sides[removal] = Side(pair, corpus.demo_facts(pair.exact_rows, neighbours.person))
        yield sides
    finally:
        for side in sides.values():
            side.pair.close()


@pytest.fixture(scope="module")
def nb_pums(
    tmp_path_factory: pytest.TempPathFactory, au_ledgers: Path
) -> Iterator[dict[Removal, Side]]:
    folder = tmp_path_factory.mktemp("nb-pums")
    policy = fz_pums_policy(folder)
    sides: dict[Removal, Side] = {}
    try:
        for removal in CHOICES:
            neighbours = build_neighbours(
                policy, folder / removal, removal, timeout_s=CI_TIMEOUT_S, ledgers=au_ledgers
            )
            pair = NeighbourPair(neighbours)
            sides[removal] = Side(pair, corpus.pums_facts(pair.exact_rows, neighbours.person))
        yield sides
    finally:
        for side in sides.values():
            side.pair.close()


# --- the harness itself ------------------------------------------------------------------


def test_corpus_size_and_reach(nb_demo: dict[Removal, Side], nb_pums: dict[Removal, Side]):
    """At least 40 distinct adversarial shapes, and most of them reach the answering
    path (a corpus of refusals would check nothing)."""
    names = [e.name for e in (*corpus.DEMO, *corpus.PUMS)]
    assert len(names) == len(set(names)) and len(names) >= 40, len(names)
    planned = 0
    for entries, sides in ((corpus.DEMO, nb_demo), (corpus.PUMS, nb_pums)):
        side = sides[Removal.HEAVIEST]
        for entry in entries:
            try:
                side.pair.d.prepare(QueryRequest(entry.render(side.facts), epsilon=1.0))
                planned += 1
            except Exception:  # refusals are counted, not judged, here
                continue
    assert planned >= 40, planned


@pytest.mark.parametrize("which", ["demo", "pums"])
def test_neighbours_differ_by_exactly_one_person(
    which: str, nb_demo: dict[Removal, Side], nb_pums: dict[Removal, Side]
):
    sides = nb_demo if which == "demo" else nb_pums
    for removal, side in sides.items():
        neighbours = side.pair.neighbours
        person = neighbours.person
        assert sum(n for _, n in neighbours.rows_removed) >= 1
        for table, rows in neighbours.rows_removed:
            unit = "user_id" if which == "demo" else "pid"
            name = table if which == "demo" else '"pums"."pums"'
            on_d, on_dp = side.pair.exact_rows(
                f"SELECT COUNT(*), COUNT(*) FILTER (WHERE {unit} = {person!r}) FROM {name}"
            )
            assert on_d[0][1] == rows and on_dp[0][1] == 0, (removal, table)
            assert on_d[0][0] - on_dp[0][0] == rows, (removal, table)
    heaviest = sides[Removal.HEAVIEST].pair.neighbours
    everywhere = sides[Removal.EVERYWHERE].pair.neighbours
    assert heaviest.person != everywhere.person
    assert all(n > 0 for _, n in everywhere.rows_removed)
    assert sum(n for _, n in heaviest.rows_removed) >= sum(n for _, n in everywhere.rows_removed)


def test_harness_catches_unbounded_contributions(tmp_path: Path, fz_demo_db: Path):
    """With Linf and L0 switched off (the audit flag), the heaviest person moves a count
    by their whole row count and touches every week: the harness must say so."""
    neighbours = build_neighbours(
        fz_demo_policy(tmp_path, fz_demo_db), tmp_path / "nb", Removal.HEAVIEST
    )
    with NeighbourPair(neighbours, bounding=False) as pair:
        report = pair.check("SELECT COUNT(*) AS n FROM prompts", run_engine=False)
        assert {ViolationKind.CELL, ViolationKind.L1, ViolationKind.L2} <= report.kinds()
        [cell] = [v for v in report.violations if v.kind is ViolationKind.CELL]
        rows = dict(neighbours.rows_removed)["prompts"]
        assert (cell.declared, cell.measured) == (10.0, float(rows)), cell.describe()
        weeks = pair.check(
            "SELECT date_trunc('week', ts) AS d, COUNT(*) AS n FROM prompts GROUP BY d",
            run_engine=False,
        )
        assert ViolationKind.PERSONS_GROUPS in weeks.kinds(), weeks.describe()
    with NeighbourPair(neighbours) as pair:  # the same queries, bounded: clean
        for sql in (
            "SELECT COUNT(*) AS n FROM prompts",
            "SELECT date_trunc('week', ts) AS d, COUNT(*) AS n FROM prompts GROUP BY d",
        ):
            report = pair.check(sql)
            assert report.ok and report.answered, report.describe()


def test_harness_catches_an_error_after_planning(
    tmp_path: Path, fz_demo_db: Path, monkeypatch: pytest.MonkeyPatch
):
    """An engine that fails after planning on one side only (here the executor is made
    to time out on D alone, as a data-dependent failure would): the harness reports it,
    and refusals at planning it does not."""
    neighbours = build_neighbours(
        fz_demo_policy(tmp_path, fz_demo_db), tmp_path / "nb", Removal.EVERYWHERE
    )
    with NeighbourPair(neighbours) as pair:
        real = type(pair.d.executor).run
        d_executor = pair.d.executor

        def run(self, sql, params=()):
            if self is d_executor:
                raise DPSQLError("timeout", "the query ran longer than 0.1 s", "")
            return real(self, sql, params)

        monkeypatch.setattr(type(pair.d.executor), "run", run)
        report = pair.check("SELECT COUNT(*) AS n FROM prompts")
        assert report.kinds() == {ViolationKind.ERROR_AFTER_PLANNING}, report.describe()
        assert "timeout" in report.violations[0].detail
        refused = pair.check("SELECT user_id, age FROM users")
        assert refused.ok and refused.outcome == "unsupported_sql", refused.describe()


@pytest.mark.parametrize(
    ("key", "table", "base"),
    [
        ("upper(region)", "users", ("north", "south", "east", "west")),
        ("substring(model, 1, 1)", "prompts", ("small", "medium", "large")),
    ],
)
def test_expression_domains_are_canonical(
    key: str, table: str, base: tuple[str, ...], nb_demo: dict[Removal, Side]
):
    """Planning reads no private data, so a plan must be a function of the request and
    the policy alone. The domain of a function of one domain column must come out in
    one canonical order — sorted, or the order of the policy's values — every time (50
    plannings; a different alias defeats the plan memo)."""
    engine = nb_demo[Removal.HEAVIEST].pair.d
    domains = set()
    for i in range(50):
        sql = f"SELECT {key} AS k{i}, COUNT(*) AS n FROM {table} GROUP BY 1"
        _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
        assert plan.domain is not None
        domains.add(tuple(d[0] for d in plan.domain))
    [found] = domains if len(domains) == 1 else [None]
    mapped = tuple(dict.fromkeys(_evaluate(engine, key, v) for v in base))
    assert found is not None and (found == tuple(sorted(found)) or found == mapped), (
        f"orders seen: {sorted(domains)}; policy order {mapped}"
    )


def _evaluate(engine: Any, key: str, value: str) -> Any:
    column = "region" if "region" in key else "model"
    [(out,)] = engine.executor.evaluate(
        f"SELECT {key.replace(column, 'v')} FROM (SELECT ? AS v)", [value]
    )
    return out


# --- the corpus -------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "removal", "known"), _params(corpus.DEMO, KNOWN_CI))
def test_corpus_demo(
    entry: Entry, removal: Removal, known: Known | None, nb_demo: dict[Removal, Side]
):
    side = nb_demo[removal]
    assert_clean(side.pair.check(entry.render(side.facts)), known)


@pytest.mark.parametrize(("entry", "removal", "known"), _params(corpus.PUMS, KNOWN_PUMS))
def test_corpus_pums(
    entry: Entry, removal: Removal, known: Known | None, nb_pums: dict[Removal, Side]
):
    side = nb_pums[removal]
    assert_clean(side.pair.check(entry.render(side.facts)), known)


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "removal", "known"), _params(corpus.DEMO, KNOWN_FULL))
def test_corpus_full_demo(
    entry: Entry, removal: Removal, known: Known | None, nb_full_demo: dict[Removal, Side]
):
    side = nb_full_demo[removal]
    report = side.pair.check(entry.render(side.facts))
    d, dp = report.core_seconds
    # The timing signal of issue #10 §3, printed with -s for RELIABILITY.md.
    print(f"\n{entry.name} {removal}: core {d:.3f} s on D, {dp:.3f} s on D'")
    assert_clean(report, known)


# --- the fuzzer's answered queries ------------------------------------------------------


@dataclass(frozen=True)
class FuzzDefect:
    """A known defect the fuzz cases hit, recognised by its violation text; its minimal
    query is a corpus entry with a strict xfail, which turns red once it is fixed."""

    corpus_entry: str
    pattern: re.Pattern[str]


# Both defects the fuzz found (tuple_key: a row-constructor key escaped as a ParseError;
# outer_limit_overflow: the outer layer failed after the charge) are fixed, their corpus
# entries pass, and a fuzz case showing either violation again is a real one. A defect is
# tolerated here only while its corpus entry is in KNOWN_CI
# (test_fuzz_defects_are_known_corpus_violations).
FUZZ_DEFECTS: tuple[FuzzDefect, ...] = ()


@dataclass
class FuzzTally:
    cases: int = 0
    answered: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    known: Counter[str] = field(default_factory=Counter)
    violations: list[NeighbourReport] = field(default_factory=list)

    def report(self, title: str, seconds: float) -> None:
        print(f"\n{title}: {self.cases} distinct cases in {seconds:.1f} s")
        for key, n in self.outcomes.most_common():
            print(f"  {key:24s} {n}")
        for name, n in self.known.items():
            print(f"  known defect x{n}: {name}")
        for r in self.violations[:20]:
            print("  VIOLATION " + r.describe(limit=2).replace("\n", "\n    "))


def fuzz_requests(grammar: int, mutations: int, seed: int) -> list[tuple[str, str]]:
    """The fuzzer's queries (its grammar, derandomized, and its mutations of the seed
    corpus), without repeats: (sql, dialect)."""
    out: list[tuple[str, str]] = []

    @settings(
        max_examples=grammar,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(queries())
    def collect(q: tuple[str, str, float | None]) -> None:
        out.append((q[0], q[1]))

    collect()
    rng = random.Random(seed)
    for _ in range(mutations):
        sql = mutate(rng.choice(SEEDS), rng) if rng.random() < 0.9 else rng.choice(SEEDS)
        out.append((sql, "duckdb"))
    return list(dict.fromkeys(out))


def test_fuzz_defects_are_known_corpus_violations() -> None:
    """A fuzz violation is let through only while its defect is open: its minimal query
    is a corpus entry with a strict xfail (in KNOWN_CI). Once the entry passes, the
    tolerance must go, or the fuzz run would hide the same violation found anew."""
    names = {e.name for e in corpus.DEMO}
    known = {name for name, _ in KNOWN_CI}
    for defect in FUZZ_DEFECTS:
        assert defect.corpus_entry in names, defect.corpus_entry
        assert defect.corpus_entry in known, f"{defect.corpus_entry} is fixed: drop its tolerance"


def fuzz_through(pair: NeighbourPair, requests: list[tuple[str, str]]) -> FuzzTally:
    tally = FuzzTally()
    for sql, dialect in requests:
        report = pair.check(sql, dialect=dialect)
        tally.cases += 1
        tally.answered += report.answered
        tally.outcomes[report.outcome] += 1
        if ViolationKind.DOMAIN_ORDER in report.kinds():
            tally.known["domain order (tolerated)"] += 1
        if not report.kinds() - TOLERATED:
            continue
        text = report.describe()
        defect = next((d for d in FUZZ_DEFECTS if d.pattern.search(text)), None)
        if defect is not None:
            tally.known[defect.corpus_entry] += 1
        else:
            tally.violations.append(report)
    return tally


def _fuzz(sides: dict[Removal, Side], size: tuple[int, int], seed: int) -> None:
    started = time.monotonic()
    requests = fuzz_requests(*size, seed=seed)
    print(f"\nneighbour fuzz: {len(requests)} distinct queries generated")
    for removal, side in sides.items():
        began = time.monotonic()
        tally = fuzz_through(side.pair, requests)
        tally.report(f"neighbour fuzz, {removal}", time.monotonic() - began)
        # The fuzzer must reach the answering path, or the harness checked nothing.
        assert tally.answered >= 0.05 * tally.cases, tally.outcomes
        assert not tally.violations, "\n".join(r.describe() for r in tally.violations[:5])
    print(f"neighbour fuzz total {time.monotonic() - started:.1f} s")


def test_fuzz_neighbours_ci(nb_demo: dict[Removal, Side]):
    _fuzz(nb_demo, CI_FUZZ, seed=20261129)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # two 6,500-case fuzz runs: about 5 min on a quiet machine
def test_fuzz_neighbours_full(nb_demo: dict[Removal, Side]):
    _fuzz(nb_demo, FULL_FUZZ, seed=1)
