"""Rule: reads of the clock (``now()``, ``CURRENT_DATE`` …) become the time the request
arrived, written into its text before anything else reads it.

Metabase's relative filters ("previous 30 days") and notebooks write
``ts >= CAST(now() AS date) - INTERVAL '30 day'``. The clock is public: it says nothing
about any person. But a release is cached and replayed by its text, and a text that
reads the clock means another thing each time it runs. So the clock is read once per
request, in UTC (or the zone a door's session names: PostgreSQL's ``SET TIME ZONE``),
and each call is replaced in the text by a typed literal of that wall-clock time.
Every later step — the memoised parse, plan and structure, the release cache, the doors'
cache-hit paths — then sees a query that means one thing, and the answer carries a note
saying which time it is for. Time arithmetic on the literal is computed at planning
(proxy/constant_times.py), so ``CAST(now() AS date)`` keys the cache by the day alone: a
dashboard reloaded the same day replays its release instead of paying again.

The calls are found in the token stream and only their characters are replaced, so the
rest of the text (in whatever dialect it is written) is left exactly as sent. Calls to
the time of day alone (``CURRENT_TIME``, ``LOCALTIME``) are not read: they stay, and are
refused as before.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from proxy import dialect_dates
from proxy.errors import DPSQLError

# Names that read the clock when called with no argument, by what they return.
_TIMESTAMP_CALLS = frozenset(
    {
        "now",
        "get_current_timestamp",
        "transaction_timestamp",
        "statement_timestamp",
        "current_localtimestamp",
        "current_datetime",
        "getdate",
        "sysdate",
    }
)
_DATE_CALLS = frozenset({"today"})
# Keywords that read the clock, with or without ``()`` (or a precision, ``(3)``).
_TIMESTAMP_WORDS = frozenset(
    {TokenType.CURRENT_TIMESTAMP, TokenType.CURRENT_DATETIME, TokenType.LOCALTIMESTAMP}
)
_DATE_WORDS = frozenset({TokenType.CURRENT_DATE})

# A cheap screen before tokenizing: every text that reads the clock matches it.
_SCREEN = re.compile(
    r"now|current_|localtimestamp|today|transaction_timestamp|statement_timestamp|getdate"
    r"|sysdate",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ClockRead:
    """A request's text with its clock calls replaced, and what the answer should say."""

    sql: str
    note: str


# One call of the clock: (start, stop) in the text, whether it reads a date, and the
# fractional digits a precision asks for.
Call = tuple[int, int, bool, int | None]


def _precision(tokens: list[Token], i: int, end: int) -> int | None:
    """The fractional digits a keyword's ``(n)`` asks for, else None."""
    if end >= i + 3 and tokens[i + 2].token_type == TokenType.NUMBER:
        try:
            return max(0, min(6, int(tokens[i + 2].text)))
        except ValueError:
            return None
    return None


def _rounded(stamp: dt.datetime, digits: int) -> dt.datetime:
    """``stamp`` rounded to ``digits`` fractional digits of a second (as PostgreSQL rounds
    ``CURRENT_TIMESTAMP(n)``)."""
    unit = 10 ** (6 - digits)
    micro = stamp.microsecond
    down = micro - micro % unit
    out = stamp.replace(microsecond=down)
    return out + dt.timedelta(microseconds=unit) if micro % unit * 2 >= unit else out


def _call_end(tokens: list[Token], i: int, *, optional: bool) -> int | None:
    """Index of the last token of the call starting at ``tokens[i]``: its ``()`` or
    ``(n)`` when present; ``i`` itself when the parentheses are ``optional`` and absent;
    None when the name is not called as the clock is."""
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is None or nxt.token_type != TokenType.L_PAREN:
        return i if optional else None
    j = i + 2
    if optional and j < len(tokens) and tokens[j].token_type == TokenType.NUMBER:
        j += 1  # CURRENT_TIMESTAMP(3): a precision, below the microseconds written
    if j < len(tokens) and tokens[j].token_type == TokenType.R_PAREN:
        return j
    return None


def _zone(name: str | None) -> dt.tzinfo:
    """The zone a session names (``UTC``, ``Europe/Paris``), refused before any charge
    when it names none dpsql knows."""
    if name is None or name.strip().strip("'\"").upper() in ("UTC", "GMT", "Z", "ZULU", ""):
        return dt.UTC
    text = name.strip().strip("'\"")
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(text)
    except (ValueError, KeyError, OSError):
        raise DPSQLError(
            "bad_request",
            f"the query reads the clock, and the session's time zone {text[:60]!r} is not "
            "one dpsql can read it in",
            "SET TIME ZONE 'UTC', or a zone name such as 'Europe/Paris'",
        ) from None


@functools.lru_cache(maxsize=256)
def _clock_calls(sql: str, dialect: str) -> tuple[tuple[Call, ...], str] | None:
    """Where ``sql`` calls the clock, and the calls' names for the note; None when it
    does not (or does not tokenize: the parser then says why). It depends on the text
    alone, and a request's text is read here up to three times (run, translate, plan):
    kept for the texts seen last."""
    if not _SCREEN.search(sql):
        return None
    try:
        tokens = dialect_dates.reader(dialect).tokenize(sql)
    except (TokenError, ValueError, RecursionError):
        return None
    calls: list[Call] = []
    read: dict[str, None] = {}
    for i, token in enumerate(tokens):
        if i > 0 and tokens[i - 1].token_type in (TokenType.DOT, TokenType.ALIAS):
            continue  # a qualified name (t.now()) or an alias (AS current_date): no clock
        kind = token.token_type
        name = token.text.lower()
        digits = None
        if kind in _TIMESTAMP_WORDS or kind in _DATE_WORDS:
            end = _call_end(tokens, i, optional=True)
            dated = kind in _DATE_WORDS
            if end is not None and not dated:
                digits = _precision(tokens, i, end)
        elif kind == TokenType.VAR and (name in _TIMESTAMP_CALLS or name in _DATE_CALLS):
            end = _call_end(tokens, i, optional=False)
            dated = name in _DATE_CALLS
        else:
            continue
        if end is None:
            continue
        calls.append((token.start, tokens[end].end + 1, dated, digits))
        read[token.text.upper() if kind != TokenType.VAR else f"{name}()"] = None
    if not calls:
        return None
    return tuple(calls), ", ".join(read)


def read_clock(
    sql: str, dialect: str, now: dt.datetime, zone: str | None = None
) -> ClockRead | None:
    """``sql`` with each call that reads the clock replaced by ``now`` as a wall-clock
    time in ``zone`` (a session's TimeZone; None: UTC), as PostgreSQL reads ``now()``
    into a ``timestamp`` or a ``date`` in the session's zone:
    ``CAST('YYYY-MM-DD HH:MM:SS.ffffff' AS TIMESTAMP)`` for the timestamp calls and
    ``CAST('YYYY-MM-DD' AS DATE)`` for the date calls (BigQuery: ``DATETIME``, its type
    without a zone). None when the text reads no clock (or does not tokenize: the
    parser then says why)."""
    found = _clock_calls(sql, dialect)
    if found is None:
        return None
    calls, names = found
    tz = _zone(zone)
    stamp = now.astimezone(tz).replace(tzinfo=None) if now.tzinfo else now
    where = "UTC" if tz is dt.UTC else str(zone).strip().strip("'\"")
    timestamp_type = "DATETIME" if dialect == "bigquery" else "TIMESTAMP"

    def written(at: dt.datetime) -> str:
        return f"CAST('{at.strftime('%Y-%m-%d %H:%M:%S.%f')}' AS {timestamp_type})"

    as_date = f"CAST('{stamp.date().isoformat()}' AS DATE)"
    spans = [
        (begin, stop, as_date if dated else written(_rounded(stamp, 6 if d is None else d)))
        for begin, stop, dated, d in calls
    ]
    out, last = [], 0
    for start, stop, literal in spans:
        out.append(sql[last:start])
        out.append(literal)
        last = stop
    out.append(sql[last:])
    only_dates = all(dated for _, _, dated, _ in calls)
    when = stamp.date().isoformat() if only_dates else stamp.strftime("%Y-%m-%d %H:%M:%S")
    note = (
        f"{names} read as {when} {where}, when the query arrived: the answer is for that "
        "time; asked again later, it is a new query, charged again unless the times it "
        "computes come out the same (for a date, the same day)"
    )
    return ClockRead("".join(out), note)
