"""The settings every DuckDB connection to the data is opened with (the executor's, and
the one that builds a CSV source's copy, which DuckDB requires to match within a
process): the policy's threads and memory, no extension installed or loaded on the
fly, and division by zero as NULL rather than an error.

A module of its own, importing nothing of the planner, so that a cold `dpsql` command
can build the CSV copy on a thread while the planner is still being imported
(proxy/engine_opening.py).
"""

from __future__ import annotations

from typing import Any

from proxy.policy import Policy


def sandbox_settings(policy: Policy) -> dict[str, Any]:
    """DuckDB's connection settings for ``policy``'s data."""
    return {
        "threads": policy.proxy.threads,
        "memory_limit": policy.proxy.memory_limit,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "error_on_division_by_zero": False,
    }
