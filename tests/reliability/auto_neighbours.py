"""What the neighbour suites of the "auto" settings share (test_auto_group_neighbours.py,
test_auto_value_neighbours.py): the fuzz demo's policy with one line made "auto", the
neighbour pair built on it, and the corpus entries checked through the harness."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from proxy.policy import Policy, parse_policy
from tests.policies import fixed_caps
from tests.reliability import neighbour_corpus as corpus
from tests.reliability.conftest import FZ_CAP, FZ_ROOT
from tests.reliability.neighbours import NeighbourPair, Removal, build_neighbours

Pair = tuple[NeighbourPair, dict[str, object]]


def auto_policy(folder: Path, db: Path, declared: str, auto: str) -> Policy:
    """The demo policy at the fuzz suites' cap and δ, on ``db``, with the line
    ``declared`` replaced by ``auto`` and the auto releases paid at ε = 1."""
    text = fixed_caps((FZ_ROOT / "sample_data" / "policy.toml").read_text())
    for old, new in (
        (declared, auto),
        ('duckdb = "usage.duckdb"', f'duckdb = "{db}"'),
        ('path = "../state/ledger.sqlite"', f'path = "{folder / "ledger.sqlite"}"'),
        ("epsilon_cap = 4.0", f"epsilon_cap = {FZ_CAP}"),
        ("delta = 1e-6 ", "delta = 1e-4 "),
        ("auto_bounds_epsilon = 0.25", "auto_bounds_epsilon = 1.0"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return parse_policy(text, base_dir=folder)


def neighbour_pair(policy: Policy, folder: Path, removal: Removal, ledgers: Path) -> Iterator[Pair]:
    """D and D' without ``removal``'s person under ``policy``, with the corpus facts."""
    neighbours = build_neighbours(policy, folder / removal, removal, timeout_s=2.0, ledgers=ledgers)
    with NeighbourPair(neighbours) as found:
        yield found, corpus.demo_facts(found.exact_rows, neighbours.person)


def check_entries(
    pair: NeighbourPair, facts: dict[str, object], entries: Sequence[corpus.Entry]
) -> int:
    """Check every entry on D and D' (each must hold); how many were answered."""
    answered = 0
    for entry in entries:
        report = pair.check(entry.render(facts), run_engine=False)
        assert report.ok, report.describe()
        answered += report.outcome == "answered"
    return answered
