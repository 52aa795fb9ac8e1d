"""API keys: ``Authorization: Bearer <key>``, checked against the policy's SHA-256 digests.

Every digest is compared, in constant time, whichever matches, so the time to refuse a
key says nothing about how close it came. The analyst's readable tables are the policy's
``analysts.NAME.tables`` intersected with each table's ``grants``.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from dataclasses import dataclass

from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from proxy.errors import DPSQLError
from proxy.policy import AnalystPolicy, Policy


@dataclass(frozen=True)
class Caller:
    name: str
    role: str  # "analyst" | "admin"
    tables: frozenset[str]  # lower-case policy table names this caller may read

    @property
    def admin(self) -> bool:
        return self.role == "admin"


def _unauthorized(message: str) -> DPSQLError:
    return DPSQLError(
        "unauthorized",
        message,
        "send the header 'Authorization: Bearer <key>' with a key from `dpsql keys create`",
    )


def readable_tables(policy: Policy, analyst: AnalystPolicy) -> frozenset[str]:
    allowed = None if analyst.tables is None else set(analyst.tables)
    return frozenset(
        t.name
        for t in policy.tables
        if (allowed is None or t.name in allowed) and (t.grants is None or analyst.name in t.grants)
    )


class Authenticator:
    def __init__(self, policy: Policy):
        self._keys = [
            (bytes.fromhex(a.key_sha256), Caller(a.name, a.role, readable_tables(policy, a)))
            for a in policy.analysts
        ]

    def __call__(self, authorization: str | None) -> Caller:
        if not authorization:
            raise _unauthorized("no API key was sent")
        scheme, _, key = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _unauthorized("the Authorization header must be 'Bearer <key>'")
        digest = hashlib.sha256(key.strip().encode("utf-8", "surrogateescape")).digest()
        found: Caller | None = None
        for known, caller in self._keys:
            if hmac.compare_digest(known, digest):
                found = caller
        if found is None:
            raise _unauthorized("the API key is not valid")
        return found


class RateLimiter:
    """Per-key request limits (the ``limits`` library, in this worker's memory); the
    spec "off" disables them."""

    def __init__(self, spec: str):
        off = spec.strip().lower() in ("", "off", "none")
        self._items: list[RateLimitItem] = [] if off else parse_many(spec)
        self._limiter = SlidingWindowCounterRateLimiter(MemoryStorage())

    def check(self, key: str) -> None:
        for item in self._items:
            if not self._limiter.hit(item, key):
                stats = self._limiter.get_window_stats(item, key)
                retry = max(1, math.ceil(stats.reset_time - time.time()))
                raise DPSQLError(
                    "rate_limited",
                    f"more than {item} requests for this API key",
                    f"retry after {retry} s",
                    details={"retry_after_s": retry},
                )
