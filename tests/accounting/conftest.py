"""``store``: a fresh, empty ledger store of each kind (SQLite file, PostgreSQL database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.accounting.stores import KINDS, StoreTarget


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTarget:
    if request.param == "sqlite":
        return StoreTarget("sqlite", str(tmp_path / "ledger.sqlite"))
    db = request.getfixturevalue("pg_database")
    return StoreTarget("postgres", db.dsn, db.admin_dsn)
