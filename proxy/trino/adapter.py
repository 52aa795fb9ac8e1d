"""The Trino door's only way into the engine: every call it makes is in this module.

Doors never re-implement a privacy rule or touch the ledger: answers come from
``Engine.run`` (which refuses before any charge), and the catalog the shadow is built
from is the engine's view of the policy (public, data-free facts).
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.result import Result
from proxy.trino.results import ResultStore, open_result_store
from proxy.trino.shadow import ShadowTable


class EngineAdapter:
    def __init__(self, engine: Engine):
        self._engine = engine

    def run(self, request: QueryRequest) -> Result:
        """A private answer: charged unless the same release is cached. A repeat of a
        release the analyst already holds is answered from memory (``Engine.run`` tries
        ``run_cached`` first: the same answer and replay record), which BI tools
        re-asking the same dashboard query hit most."""
        return self._engine.run(request)

    def check(self, request: QueryRequest) -> None:
        """Plan ``request``, refusing what the engine would refuse; runs, charges and
        records nothing (a query the door sends later, checked before an earlier one is
        charged)."""
        self._engine.prepare(request)

    def output_columns(self, request: QueryRequest) -> tuple[tuple[str, str], ...] | None:
        """The answer's (name, DuckDB type) columns, planned: nothing runs or is charged."""
        return self._engine.output_columns(request)

    def run_cached(self, request: QueryRequest) -> Result | None:
        """The answer when memory alone holds it (a repeat of a release the analyst
        already holds), else None having recorded nothing: never plans, executes,
        charges or waits for the disk, so the door may call it on the event loop."""
        return self._engine.run_cached(request)

    def visible_tables(self, tables: frozenset[str]) -> tuple[ShadowTable, ...]:
        """The caller's readable tables with their columns and DuckDB types."""
        return tuple(
            ShadowTable(info.db, info.name, tuple(info.column_types.items()))
            for info in self._engine.catalog.visible_to(tables)
        )

    def analyst_defaults(self, analyst: str) -> Mapping[str, float | int | bool]:
        found = self._engine.policy.analyst(analyst)
        return {} if found is None else dict(found.defaults)

    @property
    def sql_limits(self) -> tuple[int, int]:
        """(max SQL length, max syntax nodes) of the policy, for parsing statements."""
        settings = self._engine.policy.proxy
        return settings.max_sql_length, settings.max_nodes

    def results_store(self) -> ResultStore:
        """Where the door keeps its paged results: with the policy's other shared state."""
        return open_result_store(self._engine.policy)
