"""Fixtures of the hostile-SQL suites (prefixed ``fz_``): small demo and PUMS engines with
caps so large that the budget never runs out, and a checker of the ledger invariants."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxy.engine import Engine, Result
from proxy.errors import CODES, DPSQLError
from proxy.policy import Policy, parse_policy
from proxy.request import QueryRequest
from sample_data.generate import generate
from tests.policies import fixed_caps
from tests.reliability.audit import Neighbours, Population, build_neighbours

FZ_ROOT = Path(__file__).resolve().parents[2]
FZ_CAP = 1e7


def _swap(text: str, old: str, new: str) -> str:
    assert old in text, f"the sample policy no longer contains {old!r}"
    return text.replace(old, new)


def fz_demo_policy(tmp: Path, db: Path) -> Policy:
    text = fixed_caps((FZ_ROOT / "sample_data" / "policy.toml").read_text())
    text = _swap(text, 'duckdb = "usage.duckdb"', f'duckdb = "{db}"')
    text = _swap(text, 'path = "../state/ledger.sqlite"', f'path = "{tmp / "ledger.sqlite"}"')
    text = _swap(text, "epsilon_cap = 4.0", f"epsilon_cap = {FZ_CAP}")
    # Thousands of partition-selection charges each add δ; keep them inside the cap.
    text = _swap(text, "delta = 1e-6 ", "delta = 1e-4 ")
    return parse_policy(text, base_dir=tmp)


def fz_pums_policy(tmp: Path) -> Policy:
    pums = FZ_ROOT / "sample_data" / "pums"
    text = (pums / "policy.toml").read_text()
    text = _swap(text, '"PUMS_pid.csv"', f'"{pums / "PUMS_pid.csv"}"')
    text = _swap(text, '"../../state/pums-ledger.sqlite"', f'"{tmp / "ledger.sqlite"}"')
    text = _swap(text, "epsilon_cap = 10.0", f"epsilon_cap = {FZ_CAP}")
    return parse_policy(text, base_dir=tmp)


@pytest.fixture(scope="session")
def fz_demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(
        tmp_path_factory.mktemp("fz-data") / "usage.duckdb", people=300, prompts=3000, seed=5
    )


@pytest.fixture(scope="module")
def fz_demo_engine(tmp_path_factory: pytest.TempPathFactory, fz_demo_db: Path) -> Iterator[Engine]:
    engine = Engine(fz_demo_policy(tmp_path_factory.mktemp("fz-demo"), fz_demo_db))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def fz_pums_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = Engine(fz_pums_policy(tmp_path_factory.mktemp("fz-pums")))
    yield engine
    engine.close()


@dataclass(frozen=True)
class FzOutcome:
    """``kind`` is "answered" or the refusal code; ``violation`` is empty when the ledger
    and error contract held."""

    kind: str
    cached: bool
    violation: str
    result: Result | None = None


class FzChecker:
    """Runs requests and checks the contract: an answer adds exactly one event (a charge
    for a miss, a replay of that charge for a hit); a refusal has a documented 4xx code
    and leaves the ledger as it was; nothing else escapes."""

    def __init__(self, engine: Engine):
        self.engine = engine
        events = engine.ledger.history(limit=10**6)
        self.last_id = events[-1].id if events else 0

    def _spent(self) -> dict[str, float]:
        ledger = self.engine.ledger
        return {p: ledger.spent(p).epsilon for p in ledger.populations()}

    def __call__(self, request: QueryRequest) -> FzOutcome:
        before = self._spent()
        kind, cached, problem, result = "answered", False, "", None
        try:
            result = self.engine.run(request)
            cached = result.privacy.cached
        except DPSQLError as error:
            kind = error.code
            if error.code not in CODES or CODES[error.code] >= 500:
                problem = f"{error.code}: {error.message}"
        except Exception as error:  # the contract: only DPSQLError may escape
            kind = "escaped"
            problem = f"{type(error).__name__}: {error}"
        new = self.engine.ledger.history(limit=1000, after_id=self.last_id)
        # A repeat of a release the analyst already holds is recorded without waiting
        # (Ledger.defer_repeat: committed within about 20 ms): wait for it here, or a
        # busy machine sees it land during the next case, whose refusal then seems to
        # have changed the ledger.
        deadline = time.monotonic() + 5.0
        while not new and result is not None and cached and time.monotonic() < deadline:
            time.sleep(0.005)
            new = self.engine.ledger.history(limit=1000, after_id=self.last_id)
        if new:
            self.last_id = new[-1].id
        after = self._spent()
        # Keys of a public domain with no aggregate are answered from the policy's values
        # (Engine._from_domain): free and with no ledger event, by design.
        free = (
            result is not None
            and not result.privacy.cached
            and result.privacy.charge_id is None
            and self._free(request)
        )
        ledger = self._ledger_problem(result, new, before, after, free=free)
        problem = "; ".join(p for p in (problem, ledger) if p)
        return FzOutcome(kind, cached, problem, result)

    def _free(self, request: QueryRequest) -> bool:
        try:
            return self.engine.prepare(request)[1].free
        except DPSQLError:
            return False

    @staticmethod
    def _ledger_problem(
        result: Result | None,
        new: list,
        before: dict[str, float],
        after: dict[str, float],
        *,
        free: bool = False,
    ) -> str:
        kinds = [e.kind for e in new]
        if result is None:
            if new or after != before:
                return f"refusal changed the ledger: events {kinds}"
            return ""
        if result.privacy.exact:
            # Public data or constants (issue 13 §8): exact, free, and no ledger event.
            if new or after != before:
                return f"a public answer changed the ledger: events {kinds}"
            return ""
        if free:
            if new or after != before:
                return f"a domain answer changed the ledger: events {kinds}"
            return ""
        if len(new) != 1:
            return f"answer added {len(new)} ledger events {kinds}"
        event = new[0]
        if result.privacy.cached:
            if event.kind != "replay" or event.parent_id != result.privacy.charge_id:
                return f"cache hit recorded {event.kind} (parent {event.parent_id})"
            if after != before:
                return "cache hit spent budget"
        else:
            if event.kind != "charge" or event.id != result.privacy.charge_id:
                return f"cache miss recorded {event.kind}, not its charge"
            if any(after.get(p, 0.0) < v for p, v in before.items()):
                return "spent ε went down"
        return ""


@pytest.fixture
def fz_checker() -> Callable[[Engine], FzChecker]:
    return FzChecker


# --- empirical privacy audit (prefixed ``au_``) ------------------------------------------


@pytest.fixture(scope="session")
def au_pool() -> Iterator[Executor]:
    """Two worker processes, so D and D' are sampled side by side (the pipeline is
    CPU-bound Python: threads would not overlap)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        yield pool


@pytest.fixture(scope="session")
def au_ledgers() -> Iterator[Path]:
    """Audit ledgers and caches on tmpfs when there is one: thousands of charges, each
    fsync'd, would otherwise dominate the run time (durability is not audited here)."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="dpsql-audit-", dir=shm if shm.is_dir() else None))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def au_neighbours(tmp_path_factory: pytest.TempPathFactory, au_ledgers: Path) -> Neighbours:
    return build_neighbours(
        tmp_path_factory.mktemp("audit"), Population(others=2000), ledgers=au_ledgers
    )
