"""SET, SHOW and RESET: the standard settings clients read and write, and dpsql's
privacy controls (``dpsql.epsilon``, ``dpsql.accuracy``, ...).

Standard settings are stored and echoed (dpsql honours none of them beyond what they
report); an unknown ``dpsql.*`` name is refused, so a typo in a privacy control never
silently falls back to the default budget.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from proxy.pgwire.sqlstate import (
    INSUFFICIENT_PRIVILEGE,
    INVALID_PARAMETER_VALUE,
    UNDEFINED_OBJECT,
    WireError,
)
from proxy.request import AccuracyTarget

SERVER_VERSION = "15.0"
SERVER_VERSION_NUM = "150000"


def version_string(dpsql_version: str) -> str:
    """What ``SELECT version()`` answers: SQLAlchemy parses "PostgreSQL X.Y"."""
    return (
        f"PostgreSQL {SERVER_VERSION} (dpsql {dpsql_version}, differentially private SQL) "
        "on x86_64-pc-linux-gnu, 64-bit"
    )


# name -> default. Reported at startup (those in STARTUP) and by SHOW.
STANDARD: dict[str, str] = {
    "server_version": f"{SERVER_VERSION} (dpsql)",
    "server_version_num": SERVER_VERSION_NUM,
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "datestyle": "ISO, MDY",
    "intervalstyle": "postgres",
    "timezone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "search_path": '"$user", public',
    "transaction_isolation": "read committed",
    "default_transaction_isolation": "read committed",
    "transaction_read_only": "on",
    "default_transaction_read_only": "on",
    "application_name": "",
    "extra_float_digits": "1",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "client_min_messages": "notice",
    "bytea_output": "hex",
    "max_identifier_length": "63",
    "max_index_keys": "32",
    "is_superuser": "off",
    "lc_collate": "C",
    "lc_ctype": "C",
    "lc_messages": "C",
    "lc_monetary": "C",
    "lc_numeric": "C",
    "lc_time": "C",
    "jit": "off",
    "default_text_search_config": "pg_catalog.english",
    "geqo": "on",
    "row_security": "on",
}
STARTUP = (
    "server_version",
    "server_encoding",
    "client_encoding",
    "datestyle",
    "intervalstyle",
    "timezone",
    "integer_datetimes",
    "standard_conforming_strings",
    "application_name",
    "is_superuser",
    "default_transaction_read_only",
)
# How PostgreSQL spells the names it reports (ParameterStatus, SHOW column names).
DISPLAY = {"datestyle": "DateStyle", "intervalstyle": "IntervalStyle", "timezone": "TimeZone"}
_ALIASES = {
    "transaction isolation level": "transaction_isolation",
    "time zone": "timezone",
    "session authorization": "session_authorization",
    "names": "client_encoding",
}

# dpsql's own settings. The read-only ones (remaining, last_release) are answered by
# the connection from the engine and the last answer.
PRIVACY = ("epsilon", "delta", "rho", "accuracy", "max_groups", "max_rows_per_group")
READ_ONLY = ("remaining", "last_release")


@dataclass(frozen=True)
class Privacy:
    """The budget the next user query asks for (None: the analyst's or the policy's)."""

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    accuracy: AccuracyTarget | None = None
    max_groups: int | None = None
    max_rows_per_group: int | None = None

    def show(self, name: str) -> str:
        value = getattr(self, name)
        if value is None:
            return "default"
        if isinstance(value, AccuracyTarget):
            return (
                f"rel_error={value.rel_error:g}, at_count={value.at_count:g}, "
                f"confidence={value.confidence:g}"
            )
        return f"{value:g}" if isinstance(value, float) else str(value)


def _positive_float(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _bad(name, text, "a positive number such as 0.5") from None
    if not math.isfinite(value) or value <= 0:
        raise _bad(name, text, "a positive number such as 0.5")
    return value


def _count(name: str, text: str) -> int:
    if not re.fullmatch(r"\d+", text) or int(text) < 1:
        raise _bad(name, text, "an integer >= 1")
    return int(text)


def parse_accuracy(text: str) -> AccuracyTarget:
    """``rel_error=0.05, at_count=1000[, confidence=0.95]``."""
    parts: dict[str, float] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip().lower()
        if key not in ("rel_error", "at_count", "confidence") or key in parts:
            raise _bad("dpsql.accuracy", text, "'rel_error=0.05, at_count=1000[, confidence=0.95]'")
        parts[key] = _positive_float("dpsql.accuracy", value.strip())
    if "rel_error" not in parts or "at_count" not in parts:
        raise _bad("dpsql.accuracy", text, "'rel_error=0.05, at_count=1000[, confidence=0.95]'")
    confidence = parts.get("confidence", 0.95)
    if not 0 < confidence < 1:
        raise _bad("dpsql.accuracy", text, "a confidence between 0 and 1")
    return AccuracyTarget(parts["rel_error"], parts["at_count"], confidence)


def _bad(name: str, text: str, wanted: str) -> WireError:
    return WireError(
        INVALID_PARAMETER_VALUE,
        f'invalid value for parameter "{name}": "{text}"',
        hint=f"use {wanted}, or DEFAULT",
    )


def with_privacy(current: Privacy, name: str, text: str | None) -> Privacy:
    """``current`` after ``SET dpsql.<name> = text`` (None: DEFAULT/RESET). The budget
    forms exclude each other, as the engine requires one of ε, ρ or an accuracy."""
    if text is None:
        return replace(current, **{name: None})
    full = f"dpsql.{name}"
    if name == "accuracy":
        return replace(current, epsilon=None, rho=None, accuracy=parse_accuracy(text))
    if name == "max_groups":
        return replace(current, max_groups=_count(full, text))
    if name == "max_rows_per_group":
        return replace(current, max_rows_per_group=_count(full, text))
    value = _positive_float(full, text)
    if name == "epsilon":
        return replace(current, epsilon=value, rho=None, accuracy=None)
    if name == "rho":
        return replace(current, rho=value, epsilon=None, accuracy=None)
    return replace(current, delta=value)


_ABSENT = object()  # a setting with no value (restored by removing it)


@dataclass
class SessionSettings:
    """One connection's settings."""

    values: dict[str, str] = field(default_factory=lambda: dict(STANDARD))
    privacy: Privacy = field(default_factory=Privacy)

    def get(self, name: str) -> str | None:
        return self.values.get(canonical(name))

    def set(self, name: str, value: str | None) -> None:
        key = canonical(name)
        _refuse_privilege(key, value, self.values.get("session_authorization"))
        if key == "session_authorization":
            return  # DEFAULT, RESET or the same name: it stays who authenticated
        if key.startswith("dpsql."):
            short = key[len("dpsql.") :]
            if short in READ_ONLY:
                raise WireError(
                    "55P02", f'parameter "{key}" cannot be changed', hint="it is read-only"
                )
            if short not in PRIVACY:
                raise unknown(key)
            self.privacy = with_privacy(self.privacy, short, value)
            return
        if value is not None:
            _refuse_other_display(key, value)
        if value is None:
            if key in STANDARD:
                self.values[key] = STANDARD[key]
            else:
                self.values.pop(key, None)
        else:
            self.values[key] = value

    # A transaction's view of the settings (proxy/pgwire/connection.py restores them as
    # PostgreSQL does: all at ROLLBACK, those set LOCAL at COMMIT). The dpsql.* settings
    # are one group: setting ε clears ρ and an accuracy target.
    @staticmethod
    def group_of(name: str) -> str:
        key = canonical(name)
        return "dpsql" if key.startswith("dpsql.") else key

    def state(self, group: str) -> object:
        return self.privacy if group == "dpsql" else self.values.get(group, _ABSENT)

    def restore(self, group: str, state: object) -> None:
        if group == "dpsql":
            assert isinstance(state, Privacy)
            self.privacy = state
        elif state is _ABSENT:
            self.values.pop(group, None)
        else:
            assert isinstance(state, str)
            self.values[group] = state

    def snapshot(self) -> tuple[dict[str, str], Privacy]:
        return dict(self.values), self.privacy

    def restore_all(self, snapshot: tuple[dict[str, str], Privacy]) -> None:
        self.values, self.privacy = dict(snapshot[0]), snapshot[1]

    def reset_all(self) -> None:
        # the session user is who authenticated: RESET ALL keeps it, as PostgreSQL
        user = self.values.get("session_authorization")
        self.values = dict(STANDARD)
        if user is not None:
            self.values["session_authorization"] = user
        self.privacy = Privacy()


_OFF = ("off", "false", "no", "0", "f", "n")


def _refuse_other_display(key: str, value: str) -> None:
    """The door writes dates in ISO style, intervals in PostgreSQL's style and text in
    UTF-8 whatever a client asks: another DateStyle, IntervalStyle or client_encoding
    is refused (as PgBouncer refuses settings it cannot honour) rather than announced
    and ignored, which made psycopg fail on every date (a probe, 2026-12-06). The
    order of day and month (``ISO, DMY``) changes only how input is read: accepted."""
    text = value.strip().strip("'\"").lower()
    words = [w.strip() for w in text.replace(",", " ").split()]
    ok = {
        "datestyle": bool(words) and words[0] in ("iso", "mdy", "dmy", "ymd") and "iso" in words,
        "intervalstyle": text == "postgres",
        "client_encoding": text.replace("-", "").replace("_", "") in ("utf8", "unicode"),
    }.get(key, True)
    if not ok:
        raise WireError(
            "22023",
            f'dpsql answers with {key} = "{STANDARD[key]}" only, not "{value.strip()}"',
            hint="leave the setting at its default; dates are ISO 8601 and text is UTF-8",
        )


def _refuse_privilege(key: str, value: str | None, user: str | None) -> None:
    """Settings that state who the session is or what it may do are not the client's to
    change: it is the analyst that authenticated, with no privilege, read-only. Refused
    as PostgreSQL refuses them to a non-superuser (the value is otherwise echoed by SHOW
    and ParameterStatus as if it held). Setting the value they already have, RESET and
    DEFAULT pass, as there; drivers send none of these on connect."""
    text = None if value is None else value.strip()
    if key == "is_superuser":
        raise WireError("55P02", 'parameter "is_superuser" cannot be changed')
    if key == "session_authorization" and text is not None and text != user:
        raise WireError(INSUFFICIENT_PRIVILEGE, "permission denied to set session authorization")
    if key == "role" and text is not None and text.lower() != "none" and text != user:
        raise WireError(INSUFFICIENT_PRIVILEGE, f'permission denied to set role "{text}"')
    if (
        key in ("transaction_read_only", "default_transaction_read_only")
        and text is not None
        and text.lower() in _OFF
    ):
        raise WireError(
            INSUFFICIENT_PRIVILEGE,
            f'permission denied to set parameter "{key}" to "{text}"',
            hint="dpsql answers read-only queries only",
        )


def canonical(name: str) -> str:
    key = " ".join(name.strip().strip('"').lower().split())
    return _ALIASES.get(key, key)


def unknown(name: str) -> WireError:
    hint = (
        f"dpsql settings: {', '.join('dpsql.' + p for p in PRIVACY + READ_ONLY)}"
        if name.startswith("dpsql.")
        else ""
    )
    return WireError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"', hint=hint)


def unquote(value: str) -> str:
    """A SET value as text: 'x' and "x" unquoted, lists kept as written."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'" and "'," not in value:
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"' and '",' not in value:
        return value[1:-1]
    return value
