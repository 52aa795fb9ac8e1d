"""The policy's budget ledger: PostgreSQL with ``[ledger] url`` (one ledger for every
proxy host), else the SQLite file at ``[ledger] path`` (the processes of one host)."""

from __future__ import annotations

from accounting.ledger import Ledger
from proxy.policy import Policy


def open_ledger(policy: Policy) -> Ledger:
    if policy.ledger_url is not None:
        try:
            from accounting.store_postgres import PostgresLedger
        except ImportError as exc:
            raise RuntimeError(
                "[ledger] url needs the PostgreSQL client: pip install -e '.[postgres]'"
            ) from exc
        return PostgresLedger(policy.ledger_url)
    from accounting.store_sqlite import SQLiteLedger

    policy.ledger_path.parent.mkdir(parents=True, exist_ok=True)
    return SQLiteLedger(policy.ledger_path)
