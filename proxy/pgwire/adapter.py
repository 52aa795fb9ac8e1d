"""The one place the PostgreSQL door calls the engine.

Everything the door needs from dpsql's core goes through :class:`EngineDoor`: answer a
query (``Engine.run``, which refuses before any charge, charges, or replays from the
cache), the budget left for the caller's populations, the tables and column types the
caller may see (for the data-free catalog), and the policy facts authentication needs.
The lead can point this module at a façade without touching the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy import thread_imports
from proxy.engine import Engine
from proxy.pgwire.session_settings import Privacy
from proxy.pgwire.shadow import PUBLIC, VisibleColumn, VisibleTable
from proxy.policy import AnalystPolicy, ColumnPolicy, Policy, load_policy
from proxy.request import QueryRequest
from proxy.result import Result
from proxy.server.auth import Caller

DIALECT = "postgres"


@dataclass(frozen=True)
class Ask:
    """One user query as the door received it, with the connection's privacy settings."""

    sql: str
    privacy: Privacy
    caller: Caller
    time_zone: str | None = None  # the session's TimeZone: where now() is read


def _bounds_note(rule: ColumnPolicy) -> str:
    """The clamping bounds of a column, a side chosen from the data ("auto") named with
    its limit; "" for a column without bounds. A one-sided "auto" leaves the other side
    a number and this side None (proxy/policy.py): formatting None raised TypeError, which
    closed every connection of an analyst who could see such a column."""
    low = _side(rule.lower, rule.lower_limit, "from")
    high = _side(rule.upper, rule.upper_limit, "up to")
    if low is None or high is None:
        return ""
    return f"clamped to [{low}, {high}]"


def _side(bound: float | None, limit: float | None, word: str) -> str | None:
    """One side of a column's bounds: its number, or "auto" with its limit; None when
    the column has neither."""
    if bound is not None:
        return f"{bound:g}"
    return None if limit is None else f"auto ({word} {limit:g})"


class EngineDoor:
    def __init__(self, engine: Engine):
        self._engine = engine

    @classmethod
    def open(cls, policy_path: str) -> EngineDoor:
        # Answers run on a pool of threads: import now what the engine imports lazily.
        thread_imports.import_now()
        return cls(Engine(load_policy(policy_path)))

    @property
    def policy(self) -> Policy:
        return self._engine.policy

    def analyst(self, name: str) -> AnalystPolicy | None:
        return self._engine.policy.analyst(name)

    @staticmethod
    def _request(ask: Ask) -> QueryRequest:
        # Per-analyst defaults (the policy's [analysts.NAME] defaults) are applied by
        # the engine, for every door alike.
        privacy = ask.privacy
        return QueryRequest(
            sql=ask.sql,
            dialect=DIALECT,
            epsilon=privacy.epsilon,
            delta=privacy.delta,
            rho=privacy.rho,
            accuracy=privacy.accuracy,
            max_groups=privacy.max_groups,
            max_rows_per_group=privacy.max_rows_per_group,
            analyst=ask.caller.name,
            tables=ask.caller.tables,
            time_zone=ask.time_zone,
        )

    def run(self, ask: Ask) -> Result:
        """Answer with noise, charging unless cached. Blocking: call it off the loop."""
        request = self._request(ask)
        # Every repeat's event is committed before its answer: the door's load test
        # counts them from another process the moment the answers are out.
        return self._engine.run(request, from_memory=False)

    def output_columns(self, ask: Ask) -> tuple[tuple[str, str], ...] | None:
        """The answer's (name, DuckDB type) columns, planned: nothing runs or is charged."""
        return self._engine.output_columns(self._request(ask))

    def remaining(self, caller: Caller) -> dict[str, float]:
        """ε left per population the caller's tables belong to."""
        populations = sorted(
            {
                t.population
                for t in self._engine.policy.tables
                if t.name in caller.tables and t.population
            }
        )
        return {p: self._engine.remaining(p) for p in populations}

    def visible_tables(self, caller: Caller) -> tuple[VisibleTable, ...]:
        """The caller's tables with column types and policy notes: no data, no statistics."""
        out = []
        for info in self._engine.catalog.visible_to(caller.tables):
            policy = info.policy
            columns = []
            for name, type_ in info.column_types.items():
                rule = policy.column(name)
                note = ""
                if name == policy.unit:
                    note = "person id (unit of privacy): never released"
                elif rule is not None and rule.values is not None:
                    note = "public values: " + ", ".join(
                        str(v).lower() if isinstance(v, bool) else str(v) for v in rule.values
                    )
                elif rule is not None:
                    note = _bounds_note(rule)
                columns.append(VisibleColumn(name, type_, note))
            note = (
                "dpsql public table"
                if policy.public
                else f"dpsql private table: population {policy.population}, "
                "answered with differential privacy"
            )
            schema = PUBLIC if info.db == "main" else info.db
            out.append(VisibleTable(schema, info.name, tuple(columns), note))
        return tuple(sorted(out, key=lambda t: (t.schema, t.name)))

    def all_table_keys(self) -> tuple[tuple[str, str], ...]:
        return tuple(
            (PUBLIC if t.db == "main" else t.db, t.name) for t in self._engine.catalog.tables()
        )

    def close(self) -> None:
        self._engine.close()
