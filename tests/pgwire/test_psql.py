"""psql (Debian's postgresql-client) against a real `dpsql pg`."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.pgwire.conftest import ANA, PgDoor

PSQL = shutil.which("psql")
pytestmark = pytest.mark.skipif(PSQL is None, reason="psql (postgresql-client) is not installed")


def psql(
    door: PgDoor, *commands: str, who: tuple[str, str] = ANA
) -> subprocess.CompletedProcess[str]:
    args = [str(PSQL), "-X", "-h", door.host, "-p", str(door.port), "-U", who[0], "-d", "dpsql"]
    for command in commands:
        args += ["-c", command]
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PGPASSWORD": who[1], "PGSSLMODE": "disable"},
    )


def test_conninfo_dt_dn_and_describe(door: PgDoor) -> None:
    out = psql(door, r"\conninfo", r"\dt", r"\dn", r"\d prompts")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert 'connected to database "dpsql" as user "ana"' in text
    for table in ("prompts", "regions", "tickets", "users"):
        assert f" public | {table}" in text
    assert "List of schemas" in text
    assert 'Table "public.prompts"' in text
    assert "tokens_in  | integer" in text
    assert "ts         | timestamp without time zone" in text
    assert "flagged    | boolean" in text
    assert out.stderr == ""


def test_group_by_with_notice_then_a_free_repeat(door: PgDoor) -> None:
    sql = "SELECT plan, COUNT(*) AS n FROM users GROUP BY plan"
    out = psql(door, "SET dpsql.epsilon = 0.3", sql, "SHOW dpsql.epsilon", sql)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(" plan | ") == 2 and "(3 rows)" in out.stdout
    assert " 0.3\n" in out.stdout  # SHOW dpsql.epsilon
    notices = [line for line in out.stderr.splitlines() if line.startswith("NOTICE:")]
    assert len(notices) == 2
    assert "charged ε=0.3" in notices[0] and "remaining ε users=" in notices[0]
    assert "replayed from the cache, charged nothing" in notices[1]
    assert "n: noise scale" in out.stderr  # DETAIL carries each column's noise


def test_refusal_shows_sqlstate_and_hint(door: PgDoor) -> None:
    out = psql(door, r"\set VERBOSITY verbose", "SELECT user_id, age FROM users")
    assert out.returncode == 1
    assert "ERROR:  0A000: column user_id appears in the select list" in out.stderr
    assert "HINT:  aggregate it" in out.stderr


def test_show_remaining_and_last_release(door: PgDoor) -> None:
    out = psql(
        door,
        "SELECT region, COUNT(*) AS n FROM users WHERE age > 30 GROUP BY region",
        "SHOW dpsql.remaining",
        r"\x on",
        "SHOW dpsql.last_release",
    )
    assert out.returncode == 0, out.stderr
    assert "users=" in out.stdout
    assert '"mechanism": "gaussian"' in out.stdout and '"cached": false' in out.stdout


def test_syntax_error_position(door: PgDoor) -> None:
    out = psql(door, r"\set VERBOSITY verbose", "SELECT COUNT(* FROM users")
    assert out.returncode == 1
    assert "ERROR:  42601:" in out.stderr


def test_unknown_privacy_setting_is_refused(door: PgDoor) -> None:
    out = psql(door, r"\set VERBOSITY verbose", "SET dpsql.epsilo = 1")
    assert out.returncode == 1
    assert (
        "42704" in out.stderr
        and 'unrecognized configuration parameter "dpsql.epsilo"' in out.stderr
    )


def test_wrong_key_is_refused(door: PgDoor) -> None:
    out = psql(door, "SELECT 1", who=("ana", "not-the-key"))
    assert out.returncode == 2
    assert 'password authentication failed for user "ana"' in out.stderr
