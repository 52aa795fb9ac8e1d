"""pgjdbc (Debian's libpostgresql-jdbc-java) with the machine's JDK: the driver behind
Metabase, DBeaver and Tableau. A single-file Java program run with `java File.java`."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.pgwire.conftest import ANA, PgDoor

JAR = Path("/usr/share/java/postgresql.jar")
JAVA = shutil.which("java")
PROBE = Path(__file__).with_name("java") / "JdbcProbe.java"
pytestmark = pytest.mark.skipif(
    JAVA is None or not JAR.exists(),
    reason="needs a JDK and Debian's libpostgresql-jdbc-java (.ci/run installs both)",
)


def test_database_metadata_query_prepared_fetch_and_refusal(door: PgDoor) -> None:
    url = f"jdbc:postgresql://{door.host}:{door.port}/dpsql?sslmode=disable"
    out = subprocess.run(
        [str(JAVA), "-cp", str(JAR), str(PROBE), url, *ANA],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    seen: dict[str, list[str]] = defaultdict(list)
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        seen[key].append(value)
    assert seen["product"] == ["PostgreSQL 15.0 (dpsql)"]
    assert seen["schema"] == ["information_schema", "pg_catalog", "public"]
    assert seen["table"] == [
        "public.prompts:TABLE",
        "public.regions:TABLE",
        "public.tickets:TABLE",
        "public.users:TABLE",
    ]
    assert seen["column"][:4] == [
        "prompt_id:-5:int8",
        "user_id:-5:int8",
        "ts:93:timestamp",
        "model:12:text",
    ]
    assert "flagged:-7:bool" in seen["column"]
    assert seen["primary_keys"] == ["0"]
    assert int(seen["type_info"][0]) > 20
    assert seen["query_types"] == ["text,int8"]
    assert [r.split("=")[0] for r in seen["row"]] == ["north", "south", "east", "west"]
    assert len(seen["prepared"]) == 7 and len(set(seen["prepared"])) == 1  # replays agree
    assert seen["fetched"] == ["3"]
    assert seen["refusal"] == ["0A000"]
