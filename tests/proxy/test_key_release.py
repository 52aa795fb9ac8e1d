"""Released keys (proxy/release.py `_key_array`), from two probes of 2026-12-02:

* a float key of -0.0 is released as 0.0: DuckDB groups -0.0 with 0.0 and shows the
  value it met first, so the sign could say whose row came first;
* a release with no rows keeps its keys' types, so that an outer layer calling a date
  function on a key binds (it failed with a BinderException after the charge)."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest


def test_negative_zero_key_released_as_zero(small_demo: Engine) -> None:
    sql = (
        "SELECT CAST('-0.0' AS DOUBLE) * CAST(age >= 0 AS INTEGER) AS k, COUNT(*) AS n "
        "FROM users GROUP BY k"
    )
    result = small_demo.run(QueryRequest(sql, epsilon=10.0))
    [(key, _)] = result.rows
    assert key == 0.0 and math.copysign(1.0, key) == 1.0


def test_empty_release_keeps_key_types(small_demo: Engine) -> None:
    """Nobody passes partition selection (one person per group at a small ε); the outer
    layer's year() still binds on the empty key column."""
    sql = (
        "SELECT year(date_trunc('month', signup_month)) AS y, COUNT(*) AS n FROM users "
        "WHERE user_id IN (7, 35) GROUP BY date_trunc('month', signup_month)"
    )
    spent = small_demo.ledger.spent("users").epsilon
    result = small_demo.run(QueryRequest(sql, epsilon=0.1))
    assert result.columns == ("y", "n") and result.rows == []
    assert small_demo.ledger.spent("users").epsilon > spent  # answered (and charged), not refused


def test_outer_value_past_64_bits_is_answered(small_demo: Engine) -> None:
    """The interval code read a HUGEINT cell with np.isfinite, which raised a TypeError
    (HTTP 500) after the charge; the cell now gets no interval and the answer stands."""
    sql = (
        "SELECT CAST(COUNT(*) AS HUGEINT) * 1000000000000000000000 AS v FROM users "
        "WHERE user_id <= 150"
    )
    result = small_demo.run(QueryRequest(sql, epsilon=60.0))
    assert len(result.rows) == 1 and result.rows[0][0] > 2**64


@pytest.mark.parametrize(
    ("sql", "apart"),
    [
        # 2^56 and 2^56 + 1 are one float64: the release kept one group, chosen by the data
        (
            "SELECT CAST(age + 72057594037927918 AS DECIMAL(18, 0)) AS k, COUNT(*) AS n "
            "FROM users GROUP BY k",
            ("72057594037927936", "72057594037927937"),
        ),
        (
            "SELECT CASE WHEN age = 19 THEN 0.50000000000000001 ELSE 0.5 END AS k, "
            "COUNT(*) AS n FROM users GROUP BY k",
            ("0.50000000000000001", "0.50000000000000000"),
        ),
    ],
    ids=["decimal-18-0", "decimal-18-17"],
)
def test_decimal_keys_are_kept_apart(
    small_demo: Engine, sql: str, apart: tuple[str, str]
) -> None:
    """A probe of the bounding arithmetic (2026-12-02): such a cell moved by 299 where
    its declared sensitivity was 1, as two groups met as one float64 in the release.
    DECIMAL keys are now grouped and fetched as their text: every value apart, exact."""
    result = small_demo.run(QueryRequest(sql, epsilon=5000.0))
    keys = {str(k) for k, _ in result.rows}
    assert set(apart) <= keys
    assert all(isinstance(k, Decimal) for k, _ in result.rows)


def test_time_ns_keys_are_refused(small_demo: Engine) -> None:
    """A Python time holds microseconds: two TIME_NS groups would meet as one key."""
    sql = (
        "SELECT CAST('12:00:00.0000000' || CAST(age % 10 AS VARCHAR) AS TIME_NS) AS k, "
        "COUNT(*) AS n FROM users GROUP BY k"
    )
    before = len(small_demo.ledger.history(limit=100_000))
    with pytest.raises(DPSQLError) as info:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert info.value.code == "unsupported_sql" and "exactly" in info.value.message
    assert len(small_demo.ledger.history(limit=100_000)) == before


def test_decimal_keys_over_a_public_domain_keep_their_counts(small_demo: Engine) -> None:
    """Decimal('0.1') is not the float 0.1: every group of a DECIMAL key with a public
    domain was released as 0."""
    sql = "SELECT CASE WHEN age > 40 THEN 0.1 ELSE 0.2 END AS k, COUNT(*) AS n FROM users GROUP BY k"
    truth = dict(
        (k, n)
        for k, n in small_demo.executor.evaluate(
            "SELECT CASE WHEN age > 40 THEN 0.1 ELSE 0.2 END AS k, COUNT(*) FROM users GROUP BY k"
        )
    )
    result = small_demo.run(QueryRequest(sql, epsilon=5000.0))
    assert len(result.rows) == 2
    for k, n in result.rows:
        assert abs(n - truth[k]) < 1


def test_decimal_key_text_is_read_exactly_and_never_fails() -> None:
    from proxy.release import _exact_keys

    read = _exact_keys(["1.50", None, "1.00E-7", "NaN", "not a number"], "DECIMAL(10, 2)")
    assert read[:3] == [Decimal("1.50"), None, Decimal("1E-7")]
    assert read[3].is_nan() and read[4] == "not a number"
