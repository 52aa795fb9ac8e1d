"""What a caller asks for: the SQL and how much privacy (or accuracy) to spend on it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AccuracyTarget:
    """Relative error ``rel_error`` at a count of ``at_count``, with ``confidence``."""

    rel_error: float
    at_count: float
    confidence: float = 0.95


@dataclass(frozen=True)
class QueryRequest:
    sql: str
    dialect: str = "duckdb"
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    accuracy: AccuracyTarget | None = None
    max_groups: int | None = None
    max_rows_per_group: int | None = None
    analyst: str = "local"
    tables: frozenset[str] | None = None  # tables this caller may read (None: all)
    # Counts are shown as max(noisy count, 0) unless the caller asks for the raw noisy
    # values (e.g. to average many answers without the clamp's bias).
    raw_noise: bool = False
    # Bounds of "auto" columns chosen for this query by the engine from their released
    # histograms, as (table, column, side "lower"/"upper", bound): set by Engine._prepare
    # only, never by a door (a bound is always a released edge within the policy's limit).
    value_bounds: tuple[tuple[str, str, str, float], ...] = ()
    # The zone the query's clock reads (now(), CURRENT_DATE) are in: a door's session
    # setting (PostgreSQL's TimeZone); None is UTC. Read by Engine._read_clock only,
    # which clears it: what follows sees the text with the time written in.
    time_zone: str | None = None
