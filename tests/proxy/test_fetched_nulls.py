"""A fetched column's NULLs: read from the value DuckDB hands back, never through a
module lookup that another thread's import can catch half-built.

The defect this guards (2026-12-05, the load suite on a loaded machine): the executor
looked numpy.ma up in ``sys.modules`` while a second request's DuckDB was importing it
for the process's first result with NULLs, found the module without its attributes yet,
and answered "internal" after the charge.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import duckdb
import numpy as np
import pytest

from proxy.execute import _with_nulls


@pytest.fixture
def half_built_numpy_ma(monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.modules as another thread's import of numpy.ma leaves it part-way: the module
    registered, none of its names defined yet."""
    monkeypatch.setitem(sys.modules, "numpy.ma", types.ModuleType("numpy.ma"))


def test_nulls_are_read_while_numpy_ma_is_half_imported(half_built_numpy_ma: None) -> None:
    masked = np.ma.masked_array([1.5, 2.5, 3.5], mask=[False, True, False])
    assert _with_nulls(masked).tolist() == [1.5, None, 3.5]
    assert _with_nulls(np.array([4, 5])).tolist() == [4, 5]


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (np.ma.masked_array([1, 2], mask=np.ma.nomask), [1, 2]),
        (np.ma.masked_array([1, 2], mask=[False, False]), [1, 2]),
        (np.ma.masked_array([1, 2], mask=True), [None, None]),
        (np.ma.masked_array(["a", "b", "c"], mask=[True, False, True]), [None, "b", None]),
        (np.ma.masked_array(np.array([], dtype=np.int64), mask=[]), []),
        (np.array(["x", None], dtype=object), ["x", None]),
    ],
)
def test_every_mask_shape_becomes_none_where_masked(column: object, expected: list[object]) -> None:
    assert _with_nulls(column).tolist() == expected


def test_duckdb_results_with_nulls_come_back_as_none(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "n.duckdb"))
    try:
        fetched = con.execute(
            "SELECT * FROM (VALUES (1, 'a', 1.5), (NULL, NULL, NULL), (3, 'c', NULL)) t(i, s, d)"
        ).fetchnumpy()
    finally:
        con.close()
    assert {k: _with_nulls(v).tolist() for k, v in fetched.items()} == {
        "i": [1, None, 3],
        "s": ["a", None, "c"],
        "d": [1.5, None, None],
    }
