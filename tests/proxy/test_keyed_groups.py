"""The keyed first grouping column (proxy/rewrite/keyed_groups.py): where the core has it,
and that it spreads values DuckDB's own hash puts in one bucket.

DuckDB's aggregate hash table hashes a row's grouping columns as ``hash(c0, c1, ...)``
does (the first column's hash mixed, then combined with the next). The collision sets
(tests/hash_collisions.py) are built by inverting DuckDB's hash: the integers share every
bit of it that picks a bucket and its salt, the texts share the whole hash.
"""

from __future__ import annotations

import secrets

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from proxy.engine import Engine
from proxy.request import QueryRequest
from proxy.rewrite import keyed_groups
from tests.hash_collisions import colliding_integers, colliding_texts


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def _buckets(con: duckdb.DuckDBPyConnection, table_hash: str, values: list, seed: int) -> int:
    """How many of 65,536 buckets (and salts) ``values`` fill under ``table_hash``."""
    row = con.execute(
        f"SELECT COUNT(DISTINCT ({table_hash}) & 65535), COUNT(DISTINCT ({table_hash}) >> 48) "
        "FROM (SELECT unnest($2) AS v) WHERE $1 IS NOT NULL",
        [seed, values],
    ).fetchone()
    assert row is not None
    return min(int(row[0]), int(row[1]))


def _keyed(by_bytes: bool) -> str:
    part = keyed_groups.part(exp.column("v"), by_bytes)
    return keyed_groups.companion([part]).sql(dialect="duckdb")


def test_colliding_integers_collide_in_duckdb(con: duckdb.DuckDBPyConnection) -> None:
    values = colliding_integers(2048)
    assert len(set(values)) == 2048
    assert _buckets(con, "hash(CAST(v AS BIGINT))", values, 1) == 1


def test_the_keyed_hash_spreads_colliding_integers(con: duckdb.DuckDBPyConnection) -> None:
    values = colliding_integers(2048)
    for _ in range(3):
        seed = secrets.randbits(63)
        # the table's hash of (keyed hash, value), as DuckDB groups by them
        spread = _buckets(con, f"hash({_keyed(False)}, v)", values, seed)
        # 2,048 values in 65,536 buckets: about 2,017 distinct when spread at random
        assert spread > 1900, spread


def test_colliding_texts_defeat_a_seed_without_the_prefix(
    con: duckdb.DuckDBPyConnection,
) -> None:
    values = colliding_texts(512)
    assert len(set(values)) == 512
    assert _buckets(con, "hash(v)", values, 1) == 1
    # a seed alone combines with a hash that already collides: no spread
    assert _buckets(con, f"hash({_keyed(False)}, v)", values, secrets.randbits(63)) == 1


def test_the_secret_prefix_spreads_colliding_texts(con: duckdb.DuckDBPyConnection) -> None:
    values = colliding_texts(512)
    for _ in range(3):
        spread = _buckets(con, f"hash({_keyed(True)}, v)", values, secrets.randbits(63))
        assert spread > 490, spread  # about 510 at random


def test_the_prefix_is_secret_text_of_8_to_15_characters(con: duckdb.DuckDBPyConnection) -> None:
    prefix = keyed_groups.part(exp.Literal.string(""), True).sql(dialect="duckdb")
    lengths = set()
    for _ in range(64):
        seed = secrets.randbits(63)
        (text,) = con.execute(f"SELECT {prefix}", [seed]).fetchone() or ("",)
        lengths.add(len(text))
        assert text.isdigit()
    assert lengths <= set(range(8, 16)) and len(lengths) >= 5


QUERIES = {
    "private key": "SELECT model, COUNT(*) FROM prompts GROUP BY model",
    "date key": "SELECT date_trunc('day', ts) AS d, COUNT(*) FROM prompts GROUP BY d",
    "distinct": "SELECT COUNT(DISTINCT prompt_id) FROM prompts",
    "distinct text by key": "SELECT model, COUNT(DISTINCT latency_ms) FROM prompts GROUP BY model",
    "quantiles": "SELECT model, MEDIAN(tokens_in) FROM prompts GROUP BY model",
    "no key": "SELECT COUNT(*) FROM prompts",
    "person key": "SELECT region, COUNT(*) FROM prompts JOIN users USING (user_id) GROUP BY region",
}
_PLAIN_BY_PERSON = ("no key", "person key")

# The groupings one person's values can fill with many groups (pp when grouped by
# person and keys); by the person alone, or across persons by key, they stay plain.
_KEYED_CTES = ("pp", "dv0", "qp", "qd")


def _groups(core_sql: str) -> list[tuple[str, exp.Group]]:
    tree = sqlglot.parse_one(core_sql, read="duckdb")
    out = []
    for group in tree.find_all(exp.Group):
        cte = group.find_ancestor(exp.CTE)
        out.append((cte.alias if cte is not None else "final", group))
    return out


def _is_keyed(first: exp.Expr) -> bool:
    if isinstance(first, exp.Column) and first.name == "__gh":
        # grouped by its alias (the quantile histograms join on it too)
        select = first.find_ancestor(exp.Select)
        assert select is not None
        (first,) = [e.this for e in select.expressions if e.alias_or_name == "__gh"]
    sql = first.sql(dialect="duckdb")
    return sql.startswith("HASH(HASH(") and sql.endswith(", $1), $1)")


@pytest.mark.parametrize("sql", QUERIES.values(), ids=QUERIES.keys())
def test_every_grouping_of_a_persons_values_is_keyed_first(demo_engine: Engine, sql: str) -> None:
    _, plan = demo_engine.prepare(QueryRequest(sql, epsilon=1.0))
    groups = _groups(plan.core_sql)
    checked = [(name, g) for name, g in groups if name in _KEYED_CTES]
    assert any(name == "pp" for name, _ in checked), plan.core_sql
    for name, group in checked:
        if [g.sql() for g in group.expressions] == ["__u"]:
            continue  # by the person alone
        first = group.expressions[0]
        assert _is_keyed(first), (name, group.sql(dialect="duckdb"))
        if first.name == "__gh":
            select = first.find_ancestor(exp.Select)
            assert select is not None
            (first,) = [e.this for e in select.expressions if e.alias_or_name == "__gh"]
        hashed = {c.name for c in first.find_all(exp.Column)}
        rest = {c.name for g in group.expressions[1:] for c in g.find_all(exp.Column)}
        # (a quantile bin is a public grid position, not a person's value)
        assert rest - {"__b"} <= hashed, (name, rest - hashed)


def test_text_values_are_hashed_behind_the_prefix(demo_engine: Engine) -> None:
    _, plan = demo_engine.prepare(QueryRequest(QUERIES["private key"], epsilon=1.0))
    (pp,) = [g for name, g in _groups(plan.core_sql) if name == "pp"]
    first = pp.expressions[0].sql(dialect="duckdb")
    assert "|| CAST(__k0 AS TEXT)" in first  # model, a VARCHAR
    assert "|| CAST(__u AS TEXT)" not in first  # user_id, an integer
    _, plan = demo_engine.prepare(QueryRequest(QUERIES["date key"], epsilon=1.0))
    (pp,) = [g for name, g in _groups(plan.core_sql) if name == "pp"]
    assert "||" not in pp.expressions[0].sql(dialect="duckdb")  # a date is hashed one-to-one


@pytest.mark.parametrize("sql", QUERIES.values(), ids=QUERIES.keys())
def test_the_keyed_core_gives_the_plain_cores_rows(demo_engine: Engine, sql: str) -> None:
    """Grouping first by a function of the grouped values changes no group: the keyed
    core and the plain one (as the other engines get it) return the same rows."""
    from proxy.rewrite.l0 import takes_seed

    _, plan = demo_engine.prepare(QueryRequest(sql, epsilon=1.0))
    plain = _plain(plan.core_sql)
    run = demo_engine.executor.run
    keyed = run(plan.core_sql, [12345] if takes_seed(plan.core_sql) else [])
    other = run(plain, [12345] if takes_seed(plain) else [])
    assert _rows(keyed) == _rows(other)


def _plain(core_sql: str) -> str:
    """The core without its keyed first grouping columns (the L0 seed as ``?``)."""
    return keyed_groups.plain(sqlglot.parse_one(core_sql, read="duckdb")).sql("duckdb")


def _rows(result: dict) -> list[tuple]:
    """The rows, each histogram as its sorted (bin, count) pairs (ARRAY_AGG's order is
    the engine's)."""
    names = sorted(n for n in result if not n.endswith(("_b", "_n")))
    histograms = sorted(n[:-2] for n in result if n.endswith("_b"))
    rows = []
    for i in range(len(result[names[0]])):
        row = [repr(result[n][i]) for n in names]
        for h in histograms:
            bins, counts = result[h + "_b"][i], result[h + "_n"][i]
            pairs = [] if bins is None else zip(bins.tolist(), counts.tolist(), strict=True)
            row.append(repr(sorted(pairs)))
        rows.append(tuple(row))
    return sorted(rows)


PER_PERSON_DISTINCT = [
    "SELECT AVG(n) FROM (SELECT user_id, COUNT(DISTINCT prompt_id) AS n FROM prompts "
    "GROUP BY user_id) t",
    "SELECT AVG(n) FROM (SELECT user_id, COUNT(DISTINCT model) AS n FROM prompts "
    "GROUP BY user_id) t",
    "SELECT AVG(s), AVG(c) FROM (SELECT user_id, SUM(DISTINCT tokens_in) AS s, "
    "COUNT(*) AS c, AVG(DISTINCT latency_ms) AS a FROM prompts WHERE NOT flagged "
    "GROUP BY user_id) t",
    "SELECT COUNT(*) FROM (SELECT user_id FROM prompts GROUP BY user_id "
    "HAVING COUNT(DISTINCT model) > 1) t",
]


@pytest.mark.parametrize("sql", PER_PERSON_DISTINCT)
def test_a_per_person_distinct_is_read_from_a_keyed_layer_with_the_same_values(
    sql: str, demo_db: object, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A per-person subquery's AGG(DISTINCT x) comes from (person, x) groups keyed first
    (proxy/per_person_values._distinct_layers); the exact core gives what DuckDB's own
    DISTINCT gives."""
    from pathlib import Path

    from proxy import per_person_values
    from proxy.rewrite.l0 import takes_seed
    from tests.proxy.conftest import demo_policy

    def exact(engine: Engine) -> list[tuple]:
        _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
        return _rows(engine.executor.run(plan.core_sql, [5] if takes_seed(plan.core_sql) else []))

    tmp = Path(str(tmp_path))
    keyed_engine = Engine(demo_policy(tmp / "a", Path(str(demo_db))))
    try:
        _, plan = keyed_engine.prepare(QueryRequest(sql, epsilon=1.0))
        assert "DISTINCT" not in plan.core_sql.upper()
        assert "HASH(HASH(" in plan.core_sql
        keyed = exact(keyed_engine)
    finally:
        keyed_engine.close()
    monkeypatch.setattr(per_person_values, "_distinct_layers", lambda a, shape: a)
    plain_engine = Engine(demo_policy(tmp / "b", Path(str(demo_db))))
    try:
        _, plan = plain_engine.prepare(QueryRequest(sql, epsilon=1.0))
        assert "DISTINCT" in plan.core_sql.upper()
        assert exact(plain_engine) == keyed
    finally:
        plain_engine.close()


def test_joins_on_values_are_keyed_and_joins_on_the_person_are_not(demo_engine: Engine) -> None:
    """A column equality of a join is also an equality of the two columns' keyed
    hashes (keyed_groups.keyed_joins): DuckDB may build the join's table on one
    person's planted rows. Person-id equalities are left as they are."""
    sql = "SELECT COUNT(*) FROM prompts p JOIN regions r ON r.region = p.model"
    _, plan = demo_engine.prepare(QueryRequest(sql, epsilon=1.0))
    tree = sqlglot.parse_one(plan.core_sql, read="duckdb")
    (r,) = [c for c in tree.find_all(exp.CTE) if c.alias == "r"]
    (join,) = r.this.args["joins"]
    keyed = [
        eq
        for eq in join.args["on"].find_all(exp.EQ)
        if keyed_groups.is_companion(eq.this) and keyed_groups.is_companion(eq.expression)
    ]
    assert len(keyed) == 1 and "||" in keyed[0].sql(dialect="duckdb")  # text: prefixed
    person = "SELECT region, COUNT(*) FROM prompts JOIN users USING (user_id) GROUP BY region"
    _, plan = demo_engine.prepare(QueryRequest(person, epsilon=1.0))
    (r,) = [c for c in sqlglot.parse_one(plan.core_sql, read="duckdb").find_all(exp.CTE) if c.alias == "r"]
    for join in r.this.args.get("joins") or []:
        assert not any(keyed_groups.is_companion(e) for e in join.find_all(exp.Anonymous))


@pytest.mark.parametrize("sql", [QUERIES["quantiles"], QUERIES["distinct text by key"]])
def test_the_semi_joins_on_every_persons_pairs_are_keyed(demo_engine: Engine, sql: str) -> None:
    """qh and dk join every (person, key) pair with the kept ones: DuckDB built that
    semi-join's table on all the pairs (a probe: 3.9 s against 0.6 s keyed)."""
    _, plan = demo_engine.prepare(QueryRequest(sql, epsilon=1.0))
    tree = sqlglot.parse_one(plan.core_sql, read="duckdb")
    semis = [j for j in tree.find_all(exp.Join) if (j.kind or "").upper() == "SEMI"]
    assert semis
    for join in semis:
        on = join.args["on"]
        assert any(
            keyed_groups.is_companion(eq.this) and keyed_groups.is_companion(eq.expression)
            for eq in on.find_all(exp.EQ)
        ), join.sql(dialect="duckdb")


def test_duckdb_keeps_the_keyed_column_of_a_one_column_grouping(demo_engine: Engine) -> None:
    """DuckDB's duplicate_groups optimizer dropped the keyed column of GROUP BY
    keyed(k), k (a probe: 1.76 s against 0.004 s); the executor turns it off."""
    cursor = demo_engine.executor._db.cursor()  # type: ignore[attr-defined]
    try:
        plan = cursor.execute(
            "EXPLAIN SELECT k FROM (SELECT unnest([1, 2, 3]) AS k) GROUP BY HASH(HASH(k, $1), $1), k",
            [7],
        ).fetchall()[0][1]
    finally:
        cursor.close()
    assert "Groups: #0, #1" in " ".join(plan.split())  # without the setting: "Groups: #0"


JOIN_SPELLINGS = [
    "SELECT COUNT(*) FROM prompts p, regions r WHERE p.model = r.region",
    "SELECT COUNT(*) FROM prompts p CROSS JOIN regions r WHERE r.region = p.model",
    "SELECT COUNT(*) FROM prompts p JOIN regions r ON p.prompt_id = 777 WHERE p.model = r.region",
    "SELECT COUNT(*) FROM prompts p JOIN regions r ON p.model IS NOT DISTINCT FROM r.region",
    "SELECT COUNT(*) FROM prompts p JOIN regions r ON NOT (p.model IS DISTINCT FROM r.region)",
    "SELECT AVG(n) FROM (SELECT p.user_id, COUNT(*) AS n FROM prompts p, regions r "
    "WHERE r.region = p.model GROUP BY p.user_id) t",
    # a join inside a UNION ALL's arm (a probe, 2026-12-03: 2.40 s against 0.002 s)
    "SELECT COUNT(*) FROM (SELECT p.user_id, p.prompt_id, r.name FROM prompts p JOIN regions r "
    "ON r.region = p.model UNION ALL SELECT user_id, ticket_id, category FROM tickets) t "
    "WHERE prompt_id = 777",
    "SELECT COUNT(*) FROM (SELECT p.user_id, p.prompt_id, r.name FROM prompts p, regions r "
    "WHERE r.region = p.model AND p.prompt_id = 777 "
    "UNION ALL SELECT user_id, ticket_id, category FROM tickets) t",
]


@pytest.mark.parametrize("sql", JOIN_SPELLINGS)
def test_every_spelling_of_a_join_on_values_is_keyed(demo_engine: Engine, sql: str) -> None:
    """A join DuckDB makes of a WHERE equality, or of IS NOT DISTINCT FROM, is keyed as
    an ON equality is (a probe: 2.2-2.5 s against 0.003 s on planted texts)."""
    _, plan = demo_engine.prepare(QueryRequest(sql, epsilon=1.0))
    tree = sqlglot.parse_one(plan.core_sql, read="duckdb")
    keyed = [
        eq
        for eq in tree.find_all(exp.EQ)
        if keyed_groups.is_companion(eq.this) and keyed_groups.is_companion(eq.expression)
        and "region" in eq.sql(dialect="duckdb")
    ]
    assert keyed, plan.core_sql[:500]


@pytest.mark.parametrize("name", _PLAIN_BY_PERSON)
def test_groupings_by_the_person_alone_stay_plain(demo_engine: Engine, name: str) -> None:
    """One person's rows make one group there: nothing to key, and the keys cost up to a
    third of the public-key miss at 10M rows (BENCHMARKS.md)."""
    _, plan = demo_engine.prepare(QueryRequest(QUERIES[name], epsilon=1.0))
    for cte, group in _groups(plan.core_sql):
        assert not _is_keyed(group.expressions[0]), (cte, group.sql(dialect="duckdb"))


WIDTHS = (
    "SELECT COUNT(*) FROM users u JOIN prompts p ON p.user_id = u.user_id "
    "AND p.prompt_id = u.age"
)


def test_a_join_of_two_integer_widths_is_keyed_in_the_wider(demo_engine: Engine) -> None:
    """INTEGER = BIGINT: both sides are cast to BIGINT before their keyed hashes, so equal
    values still match, and the keyed core gives the plain core's rows."""
    from proxy.rewrite.l0 import takes_seed

    _, plan = demo_engine.prepare(QueryRequest(WIDTHS, epsilon=1.0))
    tree = sqlglot.parse_one(plan.core_sql, read="duckdb")
    keyed = [
        eq
        for eq in tree.find_all(exp.EQ)
        if keyed_groups.is_companion(eq.this) and keyed_groups.is_companion(eq.expression)
    ]
    assert len(keyed) == 1
    casts = [c.to.sql(dialect="duckdb") for c in keyed[0].find_all(exp.Cast)]
    assert casts.count("BIGINT") == 2, keyed[0].sql(dialect="duckdb")
    run = demo_engine.executor.run
    plain = _plain(plan.core_sql)
    assert _rows(run(plan.core_sql, [3] if takes_seed(plan.core_sql) else [])) == _rows(
        run(plain, [3] if takes_seed(plain) else [])
    )
