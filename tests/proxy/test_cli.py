"""The real `dpsql` console script, run as a subprocess on a real policy and ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.proxy.conftest import ROOT

DPSQL = str(Path(sys.executable).parent / "dpsql")


@pytest.fixture()
def policy_file(tmp_path: Path) -> Path:
    text = (ROOT / "sample_data" / "pums" / "policy.toml").read_text()
    text = text.replace('"PUMS_pid.csv"', f'"{ROOT / "sample_data" / "pums" / "PUMS_pid.csv"}"')
    text = text.replace('"../../state/pums-ledger.sqlite"', f'"{tmp_path / "ledger.sqlite"}"')
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


def run(policy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DPSQL, "--policy", str(policy), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SQL = "SELECT sex, COUNT(*) AS n FROM PUMS.PUMS GROUP BY sex"


def test_query_then_repeat_is_free(policy_file: Path) -> None:
    first = run(policy_file, "query", SQL, "--epsilon", "2", "--format", "json")
    assert first.returncode == 0, first.stderr
    body = json.loads(first.stdout)
    assert body["columns"] == ["sex", "n"]
    assert [r[0] for r in body["rows"]] == [0, 1]
    assert body["privacy"]["epsilon"] == pytest.approx(2.0, abs=1e-3)
    assert body["privacy"]["cached"] is False
    # Truth: 1000 people, about half of each sex; σ at ε=2 is a few people.
    assert sum(r[1] for r in body["rows"]) == pytest.approx(1000, abs=60)
    again = json.loads(run(policy_file, "query", SQL, "--epsilon", "2", "--format", "json").stdout)
    assert again["privacy"]["cached"] is True
    assert again["privacy"]["epsilon"] == 0.0
    assert again["rows"] == body["rows"]
    sorted_variant = run(
        policy_file, "query", SQL + " ORDER BY n DESC LIMIT 1", "--epsilon", "2", "--format", "json"
    )
    assert json.loads(sorted_variant.stdout)["privacy"]["cached"] is True


def test_csv_and_table_formats(policy_file: Path) -> None:
    out = run(policy_file, "query", SQL, "--format", "csv")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    # The count's 95% half-width rides along as an extra column (issue #12 §6).
    assert lines[0] == "sex,n,n_ci95" and len(lines) == 3
    assert all(float(line.split(",")[2]) > 0 for line in lines[1:])
    table = run(policy_file, "query", SQL)
    assert table.returncode == 0 and "sex" in table.stdout and "cached replay" in table.stdout
    assert "±" in table.stdout


def test_refusal_exit_code_and_no_charge(policy_file: Path) -> None:
    out = run(policy_file, "query", "SELECT age, income FROM PUMS.PUMS")
    assert out.returncode == 2
    assert "unsupported_sql" in out.stderr and "hint" in out.stderr
    budget = run(policy_file, "budget")
    assert budget.returncode == 0 and "pums" in budget.stdout
    assert "0.0000" in budget.stdout or " 0 " in budget.stdout


def test_explain_touches_no_budget(policy_file: Path) -> None:
    out = run(policy_file, "explain", SQL, "--epsilon", "1")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["cache"] == "miss (charged)"
    assert body["cost"]["epsilon"] == pytest.approx(1.0, abs=1e-3)
    assert "LEAST(COUNT(*), 1)" in body["core_sql"]
    history = run(policy_file, "ledger", "history")
    assert "charge" not in history.stdout


def test_ledger_verify_and_plan(policy_file: Path) -> None:
    run(policy_file, "query", SQL, "--epsilon", "0.5")
    verify = run(policy_file, "ledger", "verify")
    assert verify.returncode == 0 and verify.stdout.startswith("ok")
    plan = run(policy_file, "plan", "--rel-error", "0.05", "--at-count", "1000")
    assert plan.returncode == 0 and "ε =" in plan.stdout


def test_keys_create_prints_hash_of_key() -> None:
    import hashlib

    out = subprocess.run(
        [DPSQL, "keys", "create", "alice"], capture_output=True, text=True, timeout=60, check=True
    )
    key = out.stdout.split("\n")[1].strip()
    assert hashlib.sha256(key.encode()).hexdigest() in out.stdout
    assert 'role = "analyst"' in out.stdout


def test_generate_into_a_folder_writes_the_default_file_name(tmp_path: Path) -> None:
    # `--out .` used to fail with "PosixPath('.') has an empty name" and write nothing.
    from proxy.cli import main

    assert main(["generate", "--out", str(tmp_path), "--people", "20", "--prompts", "50"]) == 0
    import duckdb

    con = duckdb.connect(str(tmp_path / "usage.duckdb"), read_only=True)
    try:
        assert con.sql("SELECT COUNT(*) FROM prompts").fetchall() == [(50,)]
    finally:
        con.close()
