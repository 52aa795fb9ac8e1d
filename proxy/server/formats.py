"""JSON, CSV and Arrow IPC renderings of one page of an answer.

JSON carries the privacy metadata in its body; every format also carries it in
``X-DPSQL-*`` headers, the only place CSV and Arrow have for it (Arrow also keeps it in
the schema metadata under ``dpsql.privacy``).
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from proxy.errors import bad_request

JSON = "application/json"
CSV = "text/csv"
ARROW = "application/vnd.apache.arrow.stream"
_BY_NAME = {"json": JSON, "csv": CSV, "arrow": ARROW}
_BY_MEDIA = {JSON: JSON, CSV: CSV, ARROW: ARROW, "application/*": JSON, "*/*": JSON, "text/*": CSV}


def negotiate(format_param: str | None, accept: str | None) -> str:
    """``?format=`` wins; else the first acceptable type in Accept order; else JSON."""
    if format_param:
        media = _BY_NAME.get(format_param.lower())
        if media is None:
            raise bad_request(
                f"unknown format {format_param!r}", "use format=json, format=csv or format=arrow"
            )
        return media
    if not accept:
        return JSON
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media.lower() in _BY_MEDIA and q > 0:
            ranked.append((-q, i, _BY_MEDIA[media.lower()]))
    return min(ranked)[2] if ranked else JSON


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    return str(value)


# What a spreadsheet reads as the start of a formula in a cell it opens from CSV. A text
# value is data a person wrote (a key released with enough people behind it, a public
# table's text), and "=HYPERLINK(...)" or "@SUM(...)" must not run in the analyst's
# spreadsheet: such text gets a leading apostrophe, which spreadsheets show as text.
# Numbers keep their sign: only text values are changed (JSON and Arrow keep the text).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(text: str) -> str:
    return "'" + text if text.startswith(_FORMULA_START) else text


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    out = json_value(value)
    return _csv_text(out) if isinstance(out, str) else out


@dataclass(frozen=True)
class Page:
    columns: Sequence[str]
    rows: Sequence[tuple[Any, ...]]
    intervals: Sequence[tuple[float | None, ...]]  # per cell 95% half-width, or None
    privacy: dict[str, Any]
    warnings: Sequence[str]
    offset: int
    total_rows: int
    next: str | None
    # (row on this page, column) of cells another draw of the noise could have made
    # another value, and rows on this page it could have left out (proxy/unsettled.py)
    unsettled_cells: Sequence[tuple[int, int]] = ()
    unsettled_rows: Sequence[int] = ()


def headers(page: Page, media: str) -> dict[str, str]:
    p = page.privacy
    out = {
        "X-DPSQL-Epsilon": repr(float(p["epsilon"])),
        "X-DPSQL-Delta": repr(float(p["delta"])),
        "X-DPSQL-Mechanism": str(p["mechanism"]),
        "X-DPSQL-Cached": "true" if p["cached"] else "false",
        "X-DPSQL-Remaining": ",".join(f"{k}={v!r}" for k, v in p["remaining"].items()),
        "X-DPSQL-Total-Rows": str(page.total_rows),
    }
    if p.get("data_version"):
        out["X-DPSQL-Data-Version"] = str(p["data_version"])
    if p.get("rho") is not None:
        out["X-DPSQL-Rho"] = repr(float(p["rho"]))
    if p.get("charge_id") is not None:
        out["X-DPSQL-Charge-Id"] = str(p["charge_id"])
    if media != JSON:
        # ensure_ascii: column aliases may be any text; header values must be ASCII.
        out["X-DPSQL-Privacy"] = json.dumps(
            {**p, "warnings": list(page.warnings)}, separators=(",", ":"), ensure_ascii=True
        )
    if page.next is not None:
        out["X-DPSQL-Next"] = page.next
        out["Link"] = f'</v1/pages/{page.next}>; rel="next"'
    return out


def render(page: Page, media: str, *, objects: bool = False) -> bytes:
    if media == CSV:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        # Each column that has intervals gets a "<name>_ci95" column after the values:
        # the 95% half-width of each cell (empty where none can be stated).
        widths = [
            i for i in range(len(page.columns)) if any(w[i] is not None for w in page.intervals)
        ]
        writer.writerow(
            [
                _csv_text(str(c))
                for c in (*page.columns, *(f"{page.columns[i]}_ci95" for i in widths))
            ]
        )
        writer.writerows(
            [*(_csv_value(v) for v in row), *(_csv_value(w[i]) for i in widths)]
            for row, w in zip(page.rows, page.intervals, strict=True)
        )
        return buf.getvalue().encode()
    if media == ARROW:
        return _arrow(page)
    rows: list[Any]
    if objects:
        rows = [
            {c: json_value(v) for c, v in zip(page.columns, row, strict=True)} for row in page.rows
        ]
    else:
        rows = [[json_value(v) for v in row] for row in page.rows]
    body = {
        "columns": list(page.columns),
        "rows": rows,
        "intervals_95": [[json_value(w) for w in row] for row in page.intervals],
        "unsettled_cells": [list(cell) for cell in page.unsettled_cells],
        "unsettled_rows": list(page.unsettled_rows),
        "privacy": page.privacy,
        "warnings": list(page.warnings),
        "page": {"offset": page.offset, "size": len(page.rows), "total_rows": page.total_rows},
        "next": page.next,
    }
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


def _arrow(page: Page) -> bytes:
    arrays = []
    for i in range(len(page.columns)):
        values = [row[i] for row in page.rows]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            # Mixed kinds or integers beyond 64 bits (outer-layer arithmetic): as text.
            arrays.append(pa.array([None if v is None else str(v) for v in values]))
    schema_meta = {
        b"dpsql.privacy": json.dumps(page.privacy, separators=(",", ":")).encode(),
        b"dpsql.warnings": json.dumps(list(page.warnings)).encode(),
        # Per cell, the 95% half-width (null where none can be stated), row by row.
        b"dpsql.intervals_95": json.dumps(
            [[json_value(w) for w in row] for row in page.intervals]
        ).encode(),
        b"dpsql.unsettled_cells": json.dumps([list(c) for c in page.unsettled_cells]).encode(),
        b"dpsql.unsettled_rows": json.dumps(list(page.unsettled_rows)).encode(),
    }
    table = pa.Table.from_arrays(arrays, names=list(page.columns)).replace_schema_metadata(
        schema_meta
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
