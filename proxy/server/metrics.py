"""Prometheus metrics in a registry of the app's own (never the process-global one), so
two apps in one process never share counters. Each worker counts its own requests."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.queries = Counter(
            "dpsql_queries",
            "Queries answered or refused, by outcome (charged, cached, refused)",
            ["outcome"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "dpsql_refusals", "Error responses by error code", ["code"], registry=self.registry
        )
        self.epsilon = Counter(
            "dpsql_query_epsilon",
            "Sum of the epsilon of each charge this worker made, by population: a plain sum "
            "of per-query figures, larger than the composed spend (see "
            "dpsql_population_epsilon_spent)",
            ["population"],
            registry=self.registry,
        )
        self.spent = Gauge(
            "dpsql_population_epsilon_spent",
            "Composed epsilon borne by the persons of a population (or partition) who have "
            "spent the most, as GET /v1/budget reports it; read from the ledger at scrape time",
            ["population"],
            registry=self.registry,
        )
        self.remaining = Gauge(
            "dpsql_population_epsilon_remaining",
            "Epsilon cap minus dpsql_population_epsilon_spent, as GET /v1/budget reports it",
            ["population"],
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "dpsql_cache_hits", "Answers replayed from the release cache", registry=self.registry
        )
        self.latency = Histogram(
            "dpsql_request_seconds",
            "Request latency by route",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
