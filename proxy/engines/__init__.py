"""The engines that can run the bounded core, behind one interface
(:class:`proxy.engines.executor.Executor`): DuckDB (embedded, the default), PostgreSQL
and Spark SQL. ``[database] engine`` in the policy picks one; noise, accounting, caching
and the outer layer stay in the proxy whichever runs the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.policy import EngineKind, Policy

if TYPE_CHECKING:
    from proxy.engines.executor import Executor


def open_executor(policy: Policy) -> Executor:
    """The executor the policy names (imported on demand: each engine's client library
    is an optional extra)."""
    kind = policy.database.engine
    if kind is EngineKind.POSTGRES:
        from proxy.engines.postgres import PostgresExecutor

        return PostgresExecutor(policy)
    if kind is EngineKind.SPARK:
        from proxy.engines.spark import SparkExecutor

        return SparkExecutor(policy)
    from proxy.execute import DuckDBExecutor

    return DuckDBExecutor(policy)
