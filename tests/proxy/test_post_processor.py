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


def test_a_chain_of_integer_products_is_evaluated_as_written() -> None:
    """DuckDB's expression rewriter multiplies a chain's constants together: its time
    grows exponentially with the chain (160 nested `COUNT(*) * 2` in HAVING took 6 s to
    bind before the charge, 20 more levels about 3x that; 2026-12-04), and 70 levels over
    a zero overflowed (2^70) where the value is 0. The outer layer's DuckDB runs without
    it, so the chain is evaluated level by level."""
    released = pa.table({"n": pa.array([0, 3], type=pa.int64())})
    chain = "n"
    for _ in range(70):
        chain = f"({chain} * 2)"
    _, rows = PostProcessor().run(f"SELECT TRY({chain}) AS v FROM released", released)
    assert rows == [(0,), (None,)]  # 3 * 2^70 overflows a BIGINT: NULL under TRY
