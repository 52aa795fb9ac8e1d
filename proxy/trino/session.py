"""Session properties: how a Trino client chooses the privacy of its answers.

Clients set them with ``SET SESSION dpsql.epsilon = 0.5`` (answered with
``X-Trino-Set-Session``, which the client then sends back in ``X-Trino-Session`` on every
request) or directly in ``X-Trino-Session``. What a property may not say, the analyst's
``defaults`` in the policy say, then the policy's ``[proxy]`` defaults (applied by the
engine). A property only fills a field of the engine's request: the engine refuses
values it cannot honour, so nothing here can loosen the policy.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from proxy.errors import DPSQLError
from proxy.request import AccuracyTarget, QueryRequest

PREFIX = "dpsql."


class Kind(Enum):
    DOUBLE = "double"
    INTEGER = "integer"
    BOOLEAN = "boolean"


@dataclass(frozen=True)
class Property:
    name: str  # without the "dpsql." prefix
    kind: Kind
    description: str


PROPERTIES: tuple[Property, ...] = (
    Property(
        "epsilon", Kind.DOUBLE, "ε to spend on each new answer (the policy's default if unset)"
    ),
    Property("delta", Kind.DOUBLE, "δ to spend on each new answer, with epsilon"),
    Property("rho", Kind.DOUBLE, "zCDP ρ to spend instead of epsilon"),
    Property(
        "accuracy",
        Kind.DOUBLE,
        "target relative error (e.g. 0.05) at accuracy_at_count; replaces epsilon",
    ),
    Property("accuracy_at_count", Kind.DOUBLE, "the count at which accuracy holds (default 1000)"),
    Property(
        "accuracy_confidence", Kind.DOUBLE, "confidence of the accuracy target (default 0.95)"
    ),
    Property(
        "max_groups", Kind.INTEGER, "groups one person may touch (may only tighten the policy)"
    ),
    Property(
        "max_rows_per_group",
        Kind.INTEGER,
        "rows of one person counted per group (may only tighten the policy)",
    ),
    Property(
        "intervals",
        Kind.BOOLEAN,
        "add a <column>_ci95 column with the 95% noise half-width of each noisy column",
    ),
)
BY_NAME = {p.name: p for p in PROPERTIES}
BUDGETS = ("epsilon", "rho", "accuracy")  # at most one of them per request
Value = float | int | bool


def _bad(message: str) -> DPSQLError:
    return DPSQLError(
        "bad_request",
        message,
        "SHOW SESSION lists the dpsql.* properties and their types",
    )


def parse_value(name: str, text: str) -> Value:
    """A property's value from its SQL or header text, checked against its kind."""
    prop = BY_NAME.get(name)
    if prop is None:
        raise _bad(f"unknown session property {PREFIX}{name}")
    raw = text.strip().strip("'").strip()
    try:
        if prop.kind is Kind.BOOLEAN:
            lowered = raw.lower()
            if lowered not in ("true", "false"):
                raise ValueError(raw)
            return lowered == "true"
        if prop.kind is Kind.INTEGER:
            whole = int(raw)
            if whole < 1 or whole > 2**62:
                raise ValueError(raw)
            return whole
        value = float(raw)
        if not math.isfinite(value) or value <= 0:
            # refused at SET, as Trino checks a property's value (1e400 was accepted,
            # and every later query refused: a probe of the doors, 2026-12-06)
            raise ValueError(raw)
    except ValueError:
        raise _bad(
            f"session property {PREFIX}{name} must be a {prop.kind.value}, not {raw[:40]!r}"
        ) from None
    return value


@dataclass(frozen=True)
class Session:
    """The dpsql properties in force for one statement (unset ones are absent)."""

    values: tuple[tuple[str, Value], ...] = ()
    # The client's X-Trino-Time-Zone: the zone the statement's clock reads are in
    time_zone: str | None = None

    def get(self, name: str) -> Value | None:
        return dict(self.values).get(name)

    @property
    def intervals(self) -> bool:
        return bool(self.get("intervals"))

    def request(self, sql: str, *, analyst: str, tables: frozenset[str]) -> QueryRequest:
        """The engine request for ``sql`` (dialect trino) under these properties."""
        got = dict(self.values)
        accuracy = None
        if "accuracy" in got:
            accuracy = AccuracyTarget(
                float(got["accuracy"]),
                float(got.get("accuracy_at_count", 1000.0)),
                float(got.get("accuracy_confidence", 0.95)),
            )
        budgets = [k for k in BUDGETS if k in got]
        if len(budgets) > 1:
            raise _bad(
                f"session properties {', '.join(PREFIX + b for b in budgets)} are all set; "
                "set exactly one of them (RESET SESSION the others)"
            )

        def number(key: str) -> float | None:
            return None if key not in got else float(got[key])

        def count(key: str) -> int | None:
            return None if key not in got else int(got[key])

        return QueryRequest(
            sql=sql,
            dialect="trino",
            epsilon=number("epsilon"),
            delta=number("delta"),
            rho=number("rho"),
            accuracy=accuracy,
            max_groups=count("max_groups"),
            max_rows_per_group=count("max_rows_per_group"),
            analyst=analyst,
            tables=tables,
            time_zone=self.time_zone,
        )


def from_header(
    header: str | None, defaults: Mapping[str, Value], time_zone: str | None = None
) -> Session:
    """``X-Trino-Session: dpsql.epsilon=0.5,other=x`` over the analyst's defaults.

    Properties without the ``dpsql.`` prefix belong to Trino itself (clients send some,
    e.g. query_max_run_time); they are accepted and have no effect."""
    sent: dict[str, Value] = {}
    for part in (header or "").split(","):
        if "=" not in part:
            continue
        key, _, raw = part.partition("=")
        key = key.strip().lower()
        if not key.startswith(PREFIX):
            continue
        sent[key[len(PREFIX) :]] = parse_value(key[len(PREFIX) :], urllib.parse.unquote_plus(raw))
    values: dict[str, Value] = dict(defaults)
    if any(k in sent for k in BUDGETS):
        # A budget the session names replaces the analyst's default budget of any kind.
        for k in BUDGETS:
            values.pop(k, None)
    values.update(sent)
    return Session(tuple(sorted(values.items())), time_zone)


def header_value(name: str, value: Value) -> str:
    """One ``name=value`` item of ``X-Trino-Set-Session``."""
    text = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"{PREFIX}{name}={urllib.parse.quote(text)}"


def show_rows(
    session: Session, defaults: Mapping[str, Value]
) -> list[tuple[str, str, str, str, str]]:
    """``SHOW SESSION``: Name, Value, Default, Type, Description."""
    rows = []
    for prop in PROPERTIES:
        value = session.get(prop.name)
        default = defaults.get(prop.name)
        rows.append(
            (
                PREFIX + prop.name,
                ""
                if value is None
                else str(value).lower()
                if isinstance(value, bool)
                else str(value),
                "" if default is None else str(default),
                prop.kind.value,
                prop.description,
            )
        )
    return rows
