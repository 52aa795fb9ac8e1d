"""The outer layer's private DuckDB: released values only, and bounded in memory."""

from __future__ import annotations

import pyarrow as pa
import pytest

from proxy.errors import DPSQLError
from proxy.release import PostProcessor


def test_a_huge_value_built_from_a_released_number_is_a_clear_error() -> None:
    post = PostProcessor(memory_limit="64MB")
    released = pa.table({"n": pa.array([400], type=pa.int64())})
    with pytest.raises(DPSQLError) as error:
        post.run("SELECT length(string_agg(REPEAT('x', n * 1000000), '')) FROM released "
                 "CROSS JOIN range(4)", released)
    assert error.value.code == "bad_request"
    # The same connection still answers afterwards.
    names, rows = post.run("SELECT n + 1 AS m FROM released", released)
    assert (names, rows) == (["m"], [(401,)])
