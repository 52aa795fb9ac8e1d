"""One person's line of a CSV source must be one row, and only theirs (a review,
2026-12-06).

A CSV written by an exporter that does not quote text fields can hold a person's value
starting with a double quote (``7,2,"x``). DuckDB's reader then reads a quoted field
from there to the next line ending in a quote (``40,1,y"``), so every line between them
(persons 8 to 39) and the closing person's own line became part of person 7's field:
with person 7 in the file those 33 people had no rows, without them they had theirs. A
count declared Δ∞ = 1 moved by 32 between D and D' = D minus person 7's line.

The neighbouring files are written here as raw text (the harness's own D and D' are
written back through the engine's typed reader, which would already have parsed them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from tests.reliability.neighbours import NeighbourPair, Neighbours, Removal, _side_policy

PERSON = 7  # their text starts with a quote
CLOSER = 40  # their text ends with one


def _rows(with_person: bool) -> str:
    rows = ["pid,visits,code"]
    for p in range(1, 301):
        if p == PERSON and not with_person:
            continue
        code = '"x' if p == PERSON else 'y"' if p == CLOSER else f"c{p % 3}"
        rows.append(f"{p},{p % 4},{code}")
    return "\n".join(rows) + "\n"


def _policy_text(csv: Path) -> str:
    return f"""
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
[database]
csv = {{ "t" = "{csv}" }}
csv_types = {{ t = {{ pid = "BIGINT", visits = "BIGINT", code = "VARCHAR" }} }}
[ledger]
path = "ledger.sqlite"
[populations.p]
epsilon_cap = 1000.0
delta = 1e-6
[tables.t]
population = "p"
unit = "pid"
one_row_per_person = true
columns.visits = {{ lower = 0, upper = 3 }}
"""


def _pair(tmp_path: Path) -> Neighbours:
    sides = []
    for name, with_person in (("d", True), ("d_prime", False)):
        csv = tmp_path / f"{name}.csv"
        csv.write_text(_rows(with_person))
        policy = parse_policy(_policy_text(csv), base_dir=tmp_path)
        sides.append(
            _side_policy(
                policy,
                tmp_path / f"engine-{name}",
                duckdb_path=None,
                csv=policy.csv_tables,
                timeout_s=None,
            )
        )
    return Neighbours(Removal.CHOSEN, PERSON, (("t", 1),), sides[0], sides[1])


def test_a_persons_quote_does_not_take_other_peoples_lines(tmp_path: Path) -> None:
    neighbours = _pair(tmp_path)
    try:
        pair = NeighbourPair(neighbours)
    except DPSQLError as refused:
        # Refusing such a file at start is sound too: nothing is answered from it.
        assert refused.code == "policy_error", refused
        return
    with pair:
        for sql in ("SELECT COUNT(*) AS n FROM t", "SELECT SUM(visits) AS s FROM t"):
            report = pair.check(sql)
            assert report.ok, report.describe()


def test_a_quoted_field_on_one_line_is_read(tmp_path: Path) -> None:
    """A field quoted within its line (a comma or a quote inside) is still one value."""
    csv = tmp_path / "ok.csv"
    csv.write_text('pid,visits,code\n1,1,"a,b"\n2,2,"say ""hi"""\n3,3,plain\n')
    engine = Engine(parse_policy(_policy_text(csv), base_dir=tmp_path))
    try:
        rows = engine.executor.run("SELECT pid, code FROM main.t ORDER BY pid")
        assert list(rows["code"]) == ["a,b", 'say "hi"', "plain"]
    finally:
        engine.close()


@pytest.mark.parametrize("line_break", ["\n", "\r\n"])
def test_a_field_across_lines_is_refused_at_start(tmp_path: Path, line_break: str) -> None:
    csv = tmp_path / "multi.csv"
    csv.write_text(f'pid,visits,code\n1,1,"a{line_break}b"\n2,2,c\n')
    with pytest.raises(DPSQLError) as refused:
        Engine(parse_policy(_policy_text(csv), base_dir=tmp_path)).close()
    assert refused.value.code == "policy_error"
    assert "line" in refused.value.message
