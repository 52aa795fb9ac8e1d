"""Refusal hints that work (issue 13): for every refusal added or reworded for §6–§8, the
hint names a rewrite, and that rewrite is answered.

Each pair is (refused query, its code, the fragment of the hint that is the fix, the
query with that fix applied). The test checks that the refusal has a message and a hint,
that the hint contains the fragment, that nothing was charged, and that the rewritten
query (which contains the fragment too) is answered.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from proxy.engine import Engine
from proxy.errors import DPSQLError
from proxy.request import QueryRequest

P = "PUMS.PUMS"
BQ = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({options}) {rest}"


@dataclass(frozen=True)
class Pair:
    name: str
    refused: str
    code: str
    fragment: str  # the fix, as the hint spells it
    rewrite: str  # the refused query with the fix applied
    epsilon: float | None = 0.5  # the request's budget (None: the SQL names it)
    literal: bool = True  # the fragment is text of the rewrite (not a removal or a rule)


PAIRS = [
    Pair(
        "ln-domain",
        f"SELECT AVG(LN(income)) FROM {P}",
        "unsupported_sql",
        "LN(income + 1)",
        f"SELECT AVG(LN(income + 1)) FROM {P}",
    ),
    Pair(
        "log10-domain",
        f"SELECT AVG(LOG10(age)) FROM {P}",
        "unsupported_sql",
        "LOG(10, age + 1)",
        f"SELECT AVG(LOG(10, age + 1)) FROM {P}",
    ),
    Pair(
        "log-base",
        f"SELECT AVG(LOG(1, age)) FROM {P}",
        "unsupported_sql",
        "LOG(2, age + 1)",
        f"SELECT AVG(LOG(2, age + 1)) FROM {P}",
    ),
    Pair(
        "sqrt-domain",
        f"SELECT AVG(SQRT(age - 10)) FROM {P}",
        "unsupported_sql",
        "SQRT(GREATEST(age - 10, 0))",
        f"SELECT AVG(SQRT(GREATEST(age - 10, 0))) FROM {P}",
    ),
    Pair(
        "asin-domain",
        f"SELECT AVG(ASIN(age)) FROM {P}",
        "unsupported_sql",
        "ASIN(LEAST(GREATEST(age, -1), 1))",
        f"SELECT AVG(ASIN(LEAST(GREATEST(age, -1), 1))) FROM {P}",
    ),
    Pair(
        "tan-pole",
        f"SELECT AVG(TAN(age)) FROM {P}",
        "unsupported_sql",
        "TAN(LEAST(GREATEST(age, -1.5), 1.5))",
        f"SELECT AVG(TAN(LEAST(GREATEST(age, -1.5), 1.5))) FROM {P}",
    ),
    Pair(
        "exp-overflow",
        f"SELECT AVG(EXP(age)) FROM {P}",
        "unsupported_sql",
        "EXP(LEAST(age, 40))",
        f"SELECT AVG(EXP(LEAST(age, 40))) FROM {P}",
    ),
    Pair(
        "power-fraction",
        f"SELECT AVG(POWER(age - 50, 0.5)) FROM {P}",
        "unsupported_sql",
        "POWER(GREATEST(age - 50, 0), 0.5)",
        f"SELECT AVG(POWER(GREATEST(age - 50, 0), 0.5)) FROM {P}",
    ),
    Pair(
        "power-overflow",
        f"SELECT AVG(POWER(age, 10)) FROM {P}",
        "unsupported_sql",
        "POWER(LEAST(age, 63), 10)",
        f"SELECT AVG(POWER(LEAST(age, 63), 10)) FROM {P}",
    ),
    Pair(
        "power-pole",
        f"SELECT AVG(POWER(age, -1)) FROM {P}",
        "unsupported_sql",
        "POWER(age + 1, -1)",
        f"SELECT AVG(POWER(age + 1, -1)) FROM {P}",
    ),
    Pair(
        "var-arity",
        f"SELECT VAR(age, income) FROM {P}",
        "unsupported_sql",
        "VAR(age)",
        f"SELECT VAR(age) FROM {P}",
    ),
    Pair(
        "bq-option-twice",
        BQ.format(options="epsilon=1, epsilon=2", rest=f"COUNT(*) FROM {P}"),
        "bad_request",
        "epsilon = 1",
        BQ.format(options="epsilon = 1", rest=f"COUNT(*) FROM {P}"),
        None,
    ),
    Pair(
        "catalog",
        "SELECT COUNT(*) FROM PUMS.PUMS.PUMS",
        "not_found",
        "dpsql.PUMS.PUMS",
        "SELECT COUNT(*) FROM dpsql.PUMS.PUMS",
    ),
    Pair(
        "top-and-limit",
        f"SELECT TOP 2 sex, COUNT(*) FROM {P} GROUP BY sex LIMIT 3",
        "unsupported_sql",
        "LIMIT 2",
        f"SELECT sex, COUNT(*) FROM {P} GROUP BY sex LIMIT 2",
    ),
    Pair(
        "window-in-having",
        f"SELECT sex, COUNT(*) FROM {P} GROUP BY sex HAVING RANK() OVER (ORDER BY COUNT(*) DESC) = 1",
        "unsupported_sql",
        "RANK() OVER (ORDER BY COUNT(*) DESC) AS r",
        f"SELECT sex, COUNT(*), RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM {P} "
        "GROUP BY sex ORDER BY r",
    ),
    Pair(
        "window-on-rows",
        f"SELECT sex, SUM(ROW_NUMBER() OVER ()) FROM {P} GROUP BY sex",
        "unsupported_sql",
        "SUM(COUNT(*)) OVER ()",
        f"SELECT sex, SUM(COUNT(*)) OVER () FROM {P} GROUP BY sex",
    ),
    Pair("server-fact", "SELECT version()", "unsupported_sql", "SELECT 1 + 1", "SELECT 1 + 1"),
    Pair(
        "recursive-cte",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
        "unsupported_sql",
        "SELECT COUNT(*) FROM (VALUES (1), (2), (3)) AS r(n)",
        "SELECT COUNT(*) FROM (VALUES (1), (2), (3)) AS r(n)",
    ),
    Pair(
        "bq-unit",
        BQ.format(
            options="epsilon=1, privacy_unit_column=age",
            rest=f"sex, COUNT(*) FROM {P} GROUP BY sex",
        ),
        "unsupported_sql",
        "privacy_unit_column = pid",
        BQ.format(
            options="epsilon=1, privacy_unit_column = pid",
            rest=f"sex, COUNT(*) FROM {P} GROUP BY sex",
        ),
        None,
    ),
    Pair(
        "bq-no-noise",
        BQ.format(options="epsilon=1e20, privacy_unit_column=pid", rest=f"COUNT(*) FROM {P}"),
        "bad_request",
        "epsilon = 1",
        BQ.format(options="epsilon = 1, privacy_unit_column=pid", rest=f"COUNT(*) FROM {P}"),
        None,
    ),
    Pair(
        "bq-count-bounds",
        BQ.format(
            options="epsilon=1", rest=f"COUNT(*, contribution_bounds_per_group => (2, 5)) FROM {P}"
        ),
        "bad_request",
        "COUNT(*, contribution_bounds_per_group => (0, 5))",
        BQ.format(
            options="epsilon=1", rest=f"COUNT(*, contribution_bounds_per_group => (0, 5)) FROM {P}"
        ),
        None,
    ),
    Pair(
        "bq-option",
        BQ.format(
            options="epsilon=1, group_selection_strategy=PUBLIC_GROUPS", rest=f"COUNT(*) FROM {P}"
        ),
        "unsupported_sql",
        "drop group_selection_strategy",
        BQ.format(options="epsilon=1", rest=f"COUNT(*) FROM {P}"),
        None,
        literal=False,
    ),
    Pair(
        "bq-budget-twice",
        BQ.format(options="epsilon=1", rest=f"AVG(age) FROM {P}"),
        "bad_request",
        "drop epsilon from OPTIONS",
        BQ.format(options="delta=1e-9", rest=f"AVG(age) FROM {P}"),
        literal=False,
    ),
    Pair(
        "bq-bounds-order",
        BQ.format(
            options="epsilon=1",
            rest=f"SUM(age, contribution_bounds_per_group => (90, 10)) FROM {P}",
        ),
        "bad_request",
        "lower <= upper",
        BQ.format(
            options="epsilon=1",
            rest=f"SUM(age, contribution_bounds_per_group => (10, 90)) FROM {P}",
        ),
        None,
        literal=False,
    ),
    # --- #13 §2, §3, §5: COUNT(DISTINCT), per-person aggregates, UNION ALL -------------
    Pair(
        "count-distinct-two",
        f"SELECT COUNT(DISTINCT educ, sex) FROM {P}",
        "unsupported_sql",
        "||",
        f"SELECT COUNT(DISTINCT CAST(educ AS VARCHAR) || '|' || CAST(sex AS VARCHAR)) FROM {P}",
    ),
    Pair(
        "per-person-limit",
        f"SELECT AVG(n) FROM (SELECT pid, COUNT(*) AS n FROM {P} GROUP BY pid LIMIT 10) t",
        "unsupported_sql",
        "remove it from the subquery",
        f"SELECT AVG(n) FROM (SELECT pid, COUNT(*) AS n FROM {P} GROUP BY pid) t",
        literal=False,
    ),
    Pair(
        "per-person-unbounded",
        f"SELECT AVG(m) FROM (SELECT pid, MAX(pid) AS m FROM {P} GROUP BY pid) t",
        "unsupported_sql",
        "LEAST(GREATEST(",
        f"SELECT AVG(LEAST(GREATEST(m, 0), 1000)) FROM (SELECT pid, MAX(pid) AS m FROM {P} "
        "GROUP BY pid) t",
    ),
    Pair(
        "union-distinct",
        f"SELECT COUNT(*) FROM (SELECT pid FROM {P} UNION SELECT pid FROM {P} WHERE age > 50) t",
        "unsupported_sql",
        "UNION ALL",
        f"SELECT COUNT(*) FROM (SELECT pid FROM {P} UNION ALL SELECT pid FROM {P} "
        "WHERE age > 50) t",
    ),
    Pair(
        "union-of-aggregates",
        f"SELECT 'young' AS src, COUNT(*) AS n FROM {P} WHERE age < 30 UNION ALL "
        f"SELECT 'married', COUNT(*) FROM {P} WHERE married = 1",
        "unsupported_sql",
        "GROUP BY src",
        f"SELECT src, COUNT(*) AS n FROM (SELECT pid, 'young' AS src FROM {P} WHERE age < 30 "
        f"UNION ALL SELECT pid, 'married' FROM {P} WHERE married = 1) u GROUP BY src",
    ),
    Pair(
        "union-without-person",
        f"SELECT AVG(a) FROM (SELECT age AS a FROM {P} UNION ALL SELECT age FROM {P} "
        "WHERE sex = 1) t",
        "unsupported_sql",
        "select the person id in every arm",
        f"SELECT AVG(a) FROM (SELECT pid, age AS a FROM {P} UNION ALL SELECT pid, age FROM {P} "
        "WHERE sex = 1) t",
        literal=False,
    ),
]


@pytest.mark.parametrize("pair", PAIRS, ids=[p.name for p in PAIRS])
def test_the_hint_rewrite_is_answered(pums_engine: Engine, pair: Pair) -> None:
    before = len(pums_engine.ledger.history(limit=100000))
    with pytest.raises(DPSQLError) as info:
        pums_engine.run(QueryRequest(pair.refused, epsilon=pair.epsilon))
    error = info.value
    assert error.code == pair.code, error.message
    assert error.message.strip() and error.hint.strip()
    assert pair.fragment in error.hint, error.hint
    assert len(pums_engine.ledger.history(limit=100000)) == before
    if pair.literal:
        assert pair.fragment in pair.rewrite
    answer = pums_engine.run(QueryRequest(pair.rewrite, epsilon=pair.epsilon))
    assert answer.rows, pair.rewrite


def test_the_table_covers_every_refusal_kind() -> None:
    assert len({p.code for p in PAIRS}) == 3
    assert len(PAIRS) >= 20
