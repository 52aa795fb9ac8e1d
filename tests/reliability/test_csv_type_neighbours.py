"""A CSV column's type is the policy's, not the rows' (found by review 3).

With ``read_csv_auto`` a code column of numbers in which only person 7 wrote ``x9`` was
VARCHAR on D and BIGINT on D' = D minus person 7: the type reached the schema an analyst
reads, the keys' type of every release and the plan (whether ``code = 1`` compares text
or numbers), so D and D' differed before any charge. Types are now declared
(``[database.csv_types]``) and each field is cast with TRY_CAST: person 7's ``x9`` is a
NULL in their own row, and both sides have the same schema and plans.

The two CSV files are written here as raw text: the harness's own D and D' are written
back through the engine's typed reader, which would already have turned ``x9`` into NULL.
"""

from __future__ import annotations

from pathlib import Path

from proxy.engine import Engine
from proxy.policy import parse_policy
from tests.reliability.neighbours import NeighbourPair, Neighbours, Removal, _side_policy

PERSON = 7  # the only person whose code is not a number


def _rows(with_person: bool) -> str:
    rows = ["pid,visits,code"]
    rows += [
        f"{p},{p % 4},{'x9' if p == PERSON else p % 3}"
        for p in range(1, 301)
        if with_person or p != PERSON
    ]
    return "\n".join(rows) + "\n"


def _policy_text(csv: Path, types: str) -> str:
    return f"""
[proxy]
default_epsilon = 1.0
default_delta = 1e-9
[database]
csv = {{ "t" = "{csv}" }}
csv_types = {{ t = {{ {types} }} }}
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


def _pair(tmp_path: Path, types: str) -> Neighbours:
    sides = []
    for name, with_person in (("d", True), ("d_prime", False)):
        csv = tmp_path / f"{name}.csv"
        csv.write_text(_rows(with_person))
        policy = parse_policy(_policy_text(csv, types), base_dir=tmp_path)
        sides.append(
            _side_policy(
                policy, tmp_path / f"engine-{name}", duckdb_path=None,
                csv=policy.csv_tables, timeout_s=None,
            )
        )
    return Neighbours(Removal.CHOSEN, PERSON, (("t", 1),), sides[0], sides[1])


def test_one_persons_value_does_not_set_a_csv_columns_type(tmp_path: Path) -> None:
    neighbours = _pair(tmp_path, 'pid = "BIGINT", visits = "BIGINT", code = "BIGINT"')
    with NeighbourPair(neighbours) as pair:
        d, d_prime = (e.executor.column_types()[("main", "t")] for e in pair.engines)
        assert d == d_prime == {"pid": "BIGINT", "visits": "BIGINT", "code": "BIGINT"}
        for sql in (
            "SELECT code, COUNT(*) FROM t GROUP BY code",
            "SELECT COUNT(*) FROM t WHERE code = 1",
            "SELECT code, SUM(visits) FROM t GROUP BY code",
        ):
            report = pair.check(sql)
            assert report.ok, report.describe()
            assert report.answered, report.outcome  # (a refusal on both sides compares nothing)


def test_a_value_not_of_its_type_is_null_in_that_row_only(tmp_path: Path) -> None:
    neighbours = _pair(tmp_path, 'pid = "BIGINT", visits = "BIGINT", code = "BIGINT"')
    engine = Engine(neighbours.d)
    try:
        rows = engine.executor.run("SELECT pid, code FROM main.t WHERE pid IN (6, 7, 8)")
        assert [int(p) for p in rows["pid"]] == [6, 7, 8]
        assert list(rows["code"]) == [0, None, 2]
    finally:
        engine.close()


def test_a_text_column_stays_text_on_both_sides(tmp_path: Path) -> None:
    neighbours = _pair(tmp_path, 'pid = "BIGINT", visits = "BIGINT", code = "VARCHAR"')
    with NeighbourPair(neighbours) as pair:
        d, d_prime = (e.executor.column_types()[("main", "t")] for e in pair.engines)
        assert d["code"] == d_prime["code"] == "VARCHAR"
        report = pair.check("SELECT COUNT(*) FROM t WHERE code = '1'")
        assert report.ok, report.describe()
        assert report.answered, report.outcome
