"""The PostgreSQL executor against a real server (tests/postgres_server.py): the same
bounded answers as DuckDB, total forms, refusals before any charge, read-only access, the
time limit and a seed that never appears in SQL text or logs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlglot import exp

from proxy.engine import Engine
from proxy.engines.kinds import Kind
from proxy.engines.postgres_forms import PostgresForms
from proxy.engines.render import CutForm, render
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from tests.engines import compare
from tests.engines.conftest import database_section, demo_text, pums_text, with_database
from tests.postgres_server import PgServer
from tests.reliability import neighbour_corpus as corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rewrite"
GOLDEN = sorted(FIXTURES.glob("*.sql"))
# Quantiles and the DISTINCT aggregates: answered on every engine (the per-engine forms of
# proxy/engines/render.py); their exact histograms and distinct sums are compared too.
QUANTILE_FIXTURES = frozenset(
    {
        "demo_min_max_no_keys",
        "demo_percentile_within_group",
        "demo_quantiles_private_key_l0",
        "pums_median_min_max",
    }
)
DISTINCT_FIXTURES = frozenset(
    {
        "demo_count_distinct_l0",
        "pums_count_distinct",
        "pums_sum_avg_distinct",
        "pums_var_distinct",
    }
)
# Fixtures whose functions have no total form with DuckDB's meaning on PostgreSQL (POWER
# and friends overflow differently) are refused there before any charge.
# Arithmetic over a per-person value (FLOOR(COUNT(*) / 3)): the PostgreSQL renderer types
# expressions from the catalog's columns and cannot type the derived table's aggregate
# columns, so it refuses the division (before any charge) instead of guessing.
DERIVED_ARITHMETIC = frozenset({"demo_per_person_histogram"})
REFUSED_ON_POSTGRES = frozenset({"pums_math_functions"}) | DERIVED_ARITHMETIC

# Row-level expressions that fail on some rows (DuckDB answers them under TRY): each
# engine must give the same answer, whatever the rows hold.
TOTALITY = (
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in / (tokens_in - tokens_in) > 1",
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in * 2147483647 * 4 > 0",
    # (a comparison with 0 would let DuckDB's optimizer drop the product altogether)
    "SELECT COUNT(*) AS n FROM users WHERE CAST(age * 100000000 AS VARCHAR) <> 'x'",
    "SELECT COUNT(*) AS n FROM prompts WHERE latency_ms * 1e300 * 1e300 > 1e308",
    "SELECT COUNT(*) AS n FROM prompts WHERE latency_ms * 1e-200 * 1e-200 = 0",
    "SELECT COUNT(*) AS n FROM prompts WHERE CAST(model AS INTEGER) IS NULL",
    "SELECT COUNT(*) AS n FROM users WHERE CAST(CAST(age AS VARCHAR) AS DOUBLE) > 40.5",
    "SELECT COUNT(*) AS n FROM users WHERE CAST(age / 3.0 AS INTEGER) = 20",
    "SELECT COUNT(*) AS n FROM prompts WHERE -tokens_in % (tokens_out - tokens_out) = 0",
    "SELECT plan, SUM(age / 7) AS s, AVG(CAST(age AS DOUBLE) / 3) AS a FROM users GROUP BY plan",
    "SELECT region, COUNT(*) AS n FROM users WHERE upper(plan) LIKE 'PR%' GROUP BY region",
    "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n FROM prompts GROUP BY w",
    "SELECT EXTRACT(month FROM ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m",
    "SELECT ROUND(age / 10) AS d, COUNT(*) AS n FROM users GROUP BY d",
    "SELECT COUNT(*) AS n FROM users WHERE CAST(age * 1.25 AS DECIMAL(4, 1)) > 50",
    "SELECT COUNT(*) AS n FROM prompts WHERE CAST(latency_ms AS DECIMAL(3, 0)) IS NULL",
    "SELECT COUNT(*) AS n FROM users WHERE ABS(-age) = age AND CAST(age - 18 AS BOOLEAN)",
    "SELECT COUNT(*) AS n FROM users WHERE CAST(signup_month AS TIMESTAMP) >= "
    "TIMESTAMP '2024-01-01'",
    "SELECT COUNT(*) AS n FROM prompts WHERE CAST(tokens_in AS SMALLINT) * 1000 > 0",
    # Literals DuckDB reads as DOUBLE beyond its range (+Infinity, 0) or that PostgreSQL
    # read as a DECIMAL(18, 3) HUGEINT: failed on PostgreSQL after the charge.
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > 1e400",
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > -1e400 AND tokens_in * 1e-400 = 0",
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in > -9223372036854775808",
    # squares and scaled sums of tiny DOUBLEs underflow to zero (an error on PostgreSQL)
    "SELECT VAR_POP(age * 1e-200) AS v, SUM(tokens_in * 5e-324) AS s FROM prompts "
    "JOIN users USING (user_id)",
    # DuckDB's // (and PostgreSQL's and Trino's / of two integers): truncated towards
    # zero, NULL by zero, a float division of anything else
    "SELECT plan, SUM(age // 7) AS s, SUM(-age // 7) AS t FROM users GROUP BY plan",
    "SELECT COUNT(*) AS n FROM prompts WHERE tokens_in // (tokens_in - tokens_in) > 1",
    "SELECT COUNT(*) AS n FROM users WHERE CAST(age AS DOUBLE) // 7 > 5.5",
    # DECIMAL keys are grouped and fetched as their text (Core.text_keys)
    "SELECT CAST(age / 7 AS DECIMAL(18, 3)) AS k, COUNT(*) AS n FROM users GROUP BY k",
)

# Constructs with no total form of DuckDB's meaning on PostgreSQL: refused, uncharged.
# DuckDB's strftime with the codes every engine writes alike (render.strftime_supported):
# to_char on PostgreSQL, date_format on Spark; other formats are refused.
STRFTIME = (
    "SELECT strftime(ts, '%Y-%m') AS ym, COUNT(*) AS n FROM prompts GROUP BY 1",
    "SELECT strftime(CAST(ts AS DATE), '%d/%m/%y %H:%M:%S') AS d, COUNT(*) AS n FROM prompts "
    "WHERE strftime(ts, '%H.%M') > '11.30' GROUP BY 1",
)
STRFTIME_REFUSED = tuple(
    f"SELECT COUNT(*) AS n FROM prompts WHERE strftime(ts, '{fmt}') <> 'x'"
    for fmt in ("%j", "%%Y", "%Y-%m-%dT%H", "%W", "%b")
)

REFUSED = (
    *STRFTIME_REFUSED,
    "SELECT COUNT(*) AS n FROM prompts WHERE regexp_matches(model, 'sm.*')",
    "SELECT COUNT(*) AS n FROM prompts WHERE model LIKE 'a\\%'",
    "SELECT COUNT(*) AS n FROM prompts WHERE CAST(model AS DATE) IS NULL",
    "SELECT COUNT(*) AS n FROM prompts WHERE substring(model, tokens_in, 2) = 'ma'",
)


@pytest.fixture(scope="module")
def pair(
    pg_sources: dict[str, str], engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Engine, Engine]]]:
    """policy name -> (DuckDB engine, PostgreSQL engine) over the same data."""
    out: dict[str, tuple[Engine, Engine]] = {}
    for name in ("demo", "pums"):
        texts = []
        for kind in ("duckdb", "postgres"):
            tmp = tmp_path_factory.mktemp(f"pg-{name}-{kind}")
            text = demo_text(tmp, engine_demo_db) if name == "demo" else pums_text(tmp)
            if kind == "postgres":
                text = with_database(text, database_section("postgres", pg_sources[name]))
            texts.append(Engine(parse_policy(text, base_dir=tmp)))
        out[name] = (texts[0], texts[1])
    yield out
    for engines in out.values():
        for engine in engines:
            engine.close()


def _read(path: Path) -> tuple[str, str]:
    text = path.read_text()
    policy = text.split("-- policy:")[1].split("\n")[0].strip()
    return policy, text.split("-- input\n")[1].split("-- expected")[0].strip()


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_queries_give_duckdbs_bounded_answers(
    path: Path, pair: dict[str, tuple[Engine, Engine]]
) -> None:
    policy, sql = _read(path)
    duck, pg = pair[policy]
    if path.stem in REFUSED_ON_POSTGRES:
        # Refused before any charge, with the reason, rather than answered differently.
        with pytest.raises(DPSQLError) as refused:
            pg.prepare(QueryRequest(sql))
        assert refused.value.code == "unsupported_sql"
        assert "postgres" in refused.value.message
        return
    compare.assert_same(duck, pg, sql)


def _facts(engine: Engine) -> dict[str, object]:
    def fetch(sql: str) -> tuple[list, list]:
        rows = engine.executor.evaluate(sql)
        return rows, rows

    return corpus.pums_facts(fetch, 1)


@pytest.mark.parametrize("entry", corpus.PUMS, ids=[e.name for e in corpus.PUMS])
def test_pums_corpus_gives_the_same_bounded_answers(
    entry: corpus.Entry, pair: dict[str, tuple[Engine, Engine]]
) -> None:
    duck, pg = pair["pums"]
    sql = entry.render(_facts(duck))
    try:
        plan, on_duck = compare.exact(duck, sql)
    except DPSQLError as error:
        with pytest.raises(DPSQLError) as refused:
            compare.exact(pg, sql)
        assert refused.value.code == error.code
        return
    _, on_pg = compare.exact(pg, sql)
    assert compare.differences(plan, on_duck, on_pg) == []


@pytest.mark.parametrize("sql", TOTALITY)
def test_total_forms_answer_like_duckdbs_try(
    sql: str, pair: dict[str, tuple[Engine, Engine]]
) -> None:
    duck, pg = pair["demo"]
    compare.assert_same(duck, pg, sql)


@pytest.mark.parametrize("sql", STRFTIME)
def test_strftime_answers_like_duckdb(sql: str, pair: dict[str, tuple[Engine, Engine]]) -> None:
    duck, pg = pair["demo"]
    compare.assert_same(duck, pg, sql)


@pytest.mark.parametrize("sql", REFUSED)
def test_what_postgres_cannot_mean_is_refused_before_any_charge(
    sql: str, pair: dict[str, tuple[Engine, Engine]]
) -> None:
    duck, pg = pair["demo"]
    duck.prepare(QueryRequest(sql, epsilon=1.0))  # DuckDB answers it
    before = pg.ledger.history(limit=10**6)
    with pytest.raises(DPSQLError) as refused:
        pg.run(QueryRequest(sql, epsilon=1.0))
    assert refused.value.code == "unsupported_sql"
    assert "postgres" in refused.value.message
    assert pg.ledger.history(limit=10**6) == before


def test_an_answer_end_to_end_and_from_the_cache(pair: dict[str, tuple[Engine, Engine]]) -> None:
    _, pg = pair["demo"]
    request = QueryRequest(
        "SELECT region, COUNT(*) AS n, AVG(age) AS a FROM users GROUP BY region", epsilon=1.0
    )
    first = pg.run(request)
    again = pg.run(request)
    # every region of the public domain, in the policy's order (the order of a release's
    # rows never follows the data; tests/reliability/test_row_order.py)
    assert [r[0] for r in first.rows] == ["north", "south", "east", "west"]
    assert not first.privacy.cached and again.privacy.cached
    assert again.rows == first.rows


def test_quantiles_and_distinct_counts_are_answered_and_charged(
    pair: dict[str, tuple[Engine, Engine]],
) -> None:
    # Refused on PostgreSQL before issue 16's per-engine forms; now released like on DuckDB.
    _, pg = pair["demo"]
    sql = (
        "SELECT model, MEDIAN(tokens_in) AS m, MAX(latency_ms) AS hi, "
        "COUNT(DISTINCT tokens_out) AS d FROM prompts GROUP BY model"
    )
    before = len(pg.ledger.history(limit=10**6))
    result = pg.run(QueryRequest(sql, epsilon=1.0))
    # (charged: the query, and on a first run the row-cap histograms of "auto" tables)
    assert len(pg.ledger.history(limit=10**6)) > before and result.privacy.epsilon > 0
    assert result.columns == ("model", "m", "hi", "d")
    assert result.rows
    for _, median, highest, _ in result.rows:
        assert 0 <= median <= 4000 and 0 <= highest <= 60000  # drawn from the grid


def test_a_person_over_c_distinct_values_keeps_c_on_both_engines(
    pair: dict[str, tuple[Engine, Engine]],
) -> None:
    # Which C values is each engine's hash's choice; how many is the rule's, everywhere.
    duck, pg = pair["demo"]
    sql = "SELECT COUNT(DISTINCT tokens_out) AS d FROM prompts"
    plan, on_duck = compare.exact(duck, sql, max_rows=3)
    _, on_pg = compare.exact(pg, sql, max_rows=3)
    kept_duck = compare.kept_values_per_person(duck, plan)
    kept_pg = compare.kept_values_per_person(pg, plan)
    assert kept_pg == kept_duck
    assert max(kept_pg.values()) == plan.max_rows  # some persons were cut to C
    [(plain,)] = pg.executor.evaluate("SELECT COUNT(DISTINCT tokens_out) FROM prompts")
    column = plan.statistics[0].column
    assert 0 < int(on_pg[column][0]) <= plain
    # the kept sets differ a little, the counts barely (values shared by many people)
    assert abs(int(on_pg[column][0]) - int(on_duck[column][0])) <= 0.05 * plain


class _TieProne(PostgresForms):
    """PostgreSQL's forms with a hash of five values (-2..2): ties at the K-th hash are
    then common, so the window forms of the L0 cut must drop tied groups alike."""

    def __init__(self, cut: CutForm):
        super().__init__()
        self.cut = cut

    def keyed_hash(self, values: list[exp.Expr], kinds: list[Kind], seed: exp.Expr) -> exp.Expr:
        hashed = exp.Paren(this=super().keyed_hash(values, kinds, seed))
        return exp.Mod(this=hashed, expression=exp.Literal.number(3))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n FROM prompts GROUP BY w",
        "SELECT date_trunc('day', ts) AS d, model, COUNT(*) AS n FROM prompts GROUP BY d, model",
    ],
)
def test_both_window_cuts_keep_the_same_groups_under_ties_on_postgres(
    sql: str, pair: dict[str, tuple[Engine, Engine]], pg_sources: dict[str, str]
) -> None:
    # tests/engines/test_render.py proves the forms equal to DuckDB's heap on DuckDB;
    # this runs them on PostgreSQL itself (its ROW_NUMBER run condition, NTH_VALUE
    # frames and tie order, and GROUPED's grouping on a hash with collisions), where
    # the GROUPED form is the one dpsql sends.
    _, pg = pair["demo"]
    _, plan = pg.prepare(QueryRequest(sql, epsilon=1.0))
    columns = ", ".join(("__u", *plan.key_columns, "__l0cut"))
    order = ", ".join(str(i + 1) for i in range(len(plan.key_columns) + 2))
    kept: dict[CutForm, list[tuple[object, ...]]] = {}
    with psycopg.connect(pg_sources["demo"], cursor_factory=psycopg.RawCursor) as conn:
        for cut in CutForm:
            text = render(plan.core_sql, _TieProne(cut), pg.executor.column_types()).sql
            assert ("NTH_VALUE" in text) is (cut is not CutForm.RANGE_COUNT)
            per_person = f"{text[: text.rindex('SELECT')]} SELECT {columns} FROM bounded"
            kept[cut] = conn.execute(f"{per_person} ORDER BY {order}", [42]).fetchall()
    assert kept[CutForm.ROW_NUMBER] == kept[CutForm.RANGE_COUNT] == kept[CutForm.GROUPED]
    per_person: dict[object, int] = {}
    for row in kept[CutForm.ROW_NUMBER]:
        per_person[row[0]] = per_person.get(row[0], 0) + 1
    assert max(per_person.values()) <= plan.max_groups
    # ties dropped groups: some person over K keeps fewer than K
    cut_persons = {row[0] for row in kept[CutForm.ROW_NUMBER] if row[-1] == 1}
    assert any(per_person[u] < plan.max_groups for u in cut_persons)


def test_the_connection_is_read_only(pair: dict[str, tuple[Engine, Engine]]) -> None:
    _, pg = pair["demo"]
    [(setting,)] = pg.executor.evaluate("SELECT current_setting('default_transaction_read_only')")
    assert setting == "on"
    with pytest.raises(pg.executor.evaluation_errors) as info:
        pg.executor.evaluate("CREATE TEMP TABLE dpsql_probe AS SELECT 1 AS x")
    assert "read-only transaction" in str(info.value)


def test_the_reader_role_cannot_write_even_outside_dpsql(
    pg_cluster: PgServer, pg_sources: dict[str, str]
) -> None:
    import psycopg

    with (
        psycopg.connect(pg_sources["demo"], autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("DELETE FROM users")


def test_the_time_limit_stops_the_server_side_query(
    pg_sources: dict[str, str], engine_demo_db: Path, tmp_path: Path
) -> None:
    text = with_database(
        demo_text(tmp_path, engine_demo_db), database_section("postgres", pg_sources["demo"])
    )
    text = text.replace("[proxy]\n", "[proxy]\nquery_timeout_s = 0.5\n", 1)
    engine = Engine(parse_policy(text, base_dir=tmp_path))
    try:
        with pytest.raises(DPSQLError) as info:
            engine.executor.run("SELECT COUNT(*) AS n FROM (SELECT pg_sleep(5)) AS t")
        assert info.value.code == "timeout"
        assert engine.executor.evaluate("SELECT 1") == [(1,)]  # the pool recovered
    finally:
        engine.close()


def test_the_seed_is_bound_never_written(
    pg_cluster: PgServer, pair: dict[str, tuple[Engine, Engine]]
) -> None:
    _, pg = pair["demo"]
    pg_cluster.execute("ALTER DATABASE demo SET log_statement = 'all'")
    pg_cluster.execute("ALTER DATABASE demo SET log_parameter_max_length = 0")
    try:
        pg.executor.close()  # new sessions pick up the logging settings
        sql = "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m"
        _, plan = pg.prepare(QueryRequest(sql, epsilon=1.0))
        seed = 7_406_317_529_183
        rendered = pg.executor.rendered(plan.core_sql)  # type: ignore[attr-defined]
        assert "$1" in rendered and str(seed) not in rendered
        pg.executor.run(plan.core_sql, [seed])
        log = pg_cluster.log_path.read_text(errors="replace")
        assert "hashint8extended" in log.lower()
        assert str(seed) not in log
    finally:
        pg_cluster.execute("ALTER DATABASE demo RESET log_statement")
        pg_cluster.execute("ALTER DATABASE demo RESET log_parameter_max_length")


def test_types_map_to_the_catalogs_names(pair: dict[str, tuple[Engine, Engine]]) -> None:
    duck, pg = pair["demo"]
    for table in ("users", "prompts", "tickets"):
        d = duck.executor.column_types()[("main", table)]
        p = pg.executor.column_types()[("main", table)]
        assert set(d) == set(p)
        assert {c: re.sub(r"\(.*", "", t) for c, t in d.items()} == {
            c: re.sub(r"\(.*", "", t) for c, t in p.items()
        }


def test_generate_loads_postgres_and_writes_parquet(pg_cluster: PgServer, tmp_path: Path) -> None:
    import duckdb
    import psycopg

    from proxy.cli import main

    dsn = pg_cluster.replace_database("generated")
    code = main(
        [
            "generate",
            "--out",
            str(tmp_path / "g.duckdb"),
            "--people",
            "40",
            "--prompts",
            "400",
            "--dsn",
            dsn,
            "--parquet",
            str(tmp_path / "lake"),
        ]
    )
    assert code == 0
    with psycopg.connect(dsn) as conn:
        counts = {
            t: conn.execute(f"SELECT COUNT(*) FROM public.{t}").fetchone()[0]  # type: ignore[index]
            for t in ("users", "prompts")
        }
    assert counts == {"users": 40, "prompts": 400}
    lake = tmp_path / "lake" / "main" / "prompts"
    [(n,)] = duckdb.sql(f"SELECT COUNT(*) FROM read_parquet('{lake}/*.parquet')").fetchall()
    assert n == 400


def _plan_nodes(node: dict[str, object]) -> Iterator[dict[str, object]]:
    yield node
    for child in node.get("Plans", []):  # type: ignore[union-attr]
        yield from _plan_nodes(child)


def test_the_grouped_cut_sorts_the_rows_once_on_postgres(
    pair: dict[str, tuple[Engine, Engine]], pg_sources: dict[str, str]
) -> None:
    # CutForm.GROUPED's point (proxy/engines/render.py): the per-person aggregation
    # groups by (person, hash, keys) with a sort, and the window reads that order; no
    # second sort between them. PostgreSQL's planner makes that choice by its costs.
    _, pg = pair["demo"]
    sql = "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n FROM prompts GROUP BY d"
    _, plan = pg.prepare(QueryRequest(sql, epsilon=1.0))
    text = pg.executor.rendered(plan.core_sql)
    with psycopg.connect(pg_sources["demo"], cursor_factory=psycopg.RawCursor) as conn:
        [(document,)] = conn.execute(f"EXPLAIN (FORMAT JSON) {text}", [42]).fetchall()
    nodes = list(_plan_nodes(document[0]["Plan"]))
    sorts = [n for n in nodes if n["Node Type"] == "Sort"]
    assert len(sorts) == 1, [n["Node Type"] for n in nodes]
    assert "hashtextextended" in str(sorts[0]["Sort Key"][1])  # (person, hash, day)
    [window] = [n for n in nodes if n["Node Type"] == "WindowAgg"]
    below = list(_plan_nodes(window))
    assert [n["Node Type"] for n in below].count("Sort") == 1
    assert any(n.get("Strategy") == "Sorted" for n in below if n["Node Type"] == "Aggregate")


def test_the_keyed_hash_spreads_bigints_postgres_folds_alike(pg_cluster: PgServer) -> None:
    """PostgreSQL hashes a BIGINT by folding it to 32 bits first, so 2^32 BIGINTs share
    each hash under every seed, hash_record_extended's too (a probe: 32,768 of them
    grouped in 150 s against 0.03 s). The keyed hash the renderer writes for a grouping
    (PostgresForms.keyed_hash) gives them distinct hashes, and so distinct buckets in
    PostgreSQL's own hash of the grouping column (hashint8)."""
    from proxy.engines.kinds import BIGINT, TEXT
    from tests.hash_collisions import pg_folded_integers

    values = pg_folded_integers(4096)
    forms = PostgresForms()
    seed = exp.Var(this="$1")
    keyed = forms.keyed_hash([exp.column("v")], [BIGINT], seed).sql(dialect="postgres")
    both = forms.keyed_hash(
        [exp.column("v"), exp.column("t")], [BIGINT, TEXT], seed
    ).sql(dialect="postgres")
    sql = (
        "SELECT COUNT(DISTINCT hashint8(v)), COUNT(DISTINCT hash_record_extended(ROW(v), $1)), "
        f"COUNT(DISTINCT hashint8({keyed})), COUNT(DISTINCT hashint8({both})) "
        "FROM (SELECT unnest($2::bigint[]) AS v, 'x' AS t) AS s"
    )
    with psycopg.connect(pg_cluster.dsn(), cursor_factory=psycopg.RawCursor) as conn:
        for seed_value in (7, 2**62 + 12345):
            plain, record, spread, spread_both = conn.execute(sql, [seed_value, values]).fetchone()  # type: ignore[misc]
            assert (plain, record) == (1, 1)  # the collision, whatever the seed
            # 4,096 values in 2^32 buckets: a handful of chance collisions at most
            assert spread >= 4090 and spread_both >= 4090


_LIST_TABLE = {"b": "BIGINT", "t": "VARCHAR", "n": "DECIMAL(10,2)", "ts": "TIMESTAMP", "f": "DOUBLE"}
_BIGS = ", ".join(str(v) for v in range(1, 10))
LONG_LISTS = [
    (f"b IN ({_BIGS})", "in (hashint8extended"),
    (f"b IN ({_BIGS}, NULL)", "in (hashint8extended"),
    (f"b IN ({_BIGS}, CAST(NULL AS BIGINT))", "in (hashint8extended"),
    (f"b IN (-9223372036854775808, 9223372036854775807, {_BIGS})", "in (hashint8extended"),
    (f"b IN (-3, 4.0, 1e30, 99999999999999999999, {_BIGS})", "hashtextextended"),
    ("t IN ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'ab')", "hashtextextended"),
    ("n IN (1.5, 2, 3.00, 4, 5, 6, 7, 8, 9.25)", "hashtextextended"),
    (
        "ts IN ('2024-01-01', '2024-01-02', '2024-01-03', '2024-01-04', '2024-01-05', "
        "'2024-01-06', '2024-01-07', '2024-01-08', '2024-01-09 12:00:00')",
        " or ",
    ),
    ("f IN (0.5, 1, 2, 3, 4, 5, 6, 7, -0.0)", " or "),
    # a list inside another's operand: keyed too (outer first, the inner list was keyed
    # in a detached copy and ran unkeyed: a review, 2026-12-04)
    (f"(CASE WHEN b IN ({_BIGS}) THEN b ELSE b * 2 END) IN ({_BIGS})", "in (hashint8extended"),
    (
        f"(CASE WHEN (CASE WHEN b IN ({_BIGS}) THEN b + 1 ELSE b END) IN ({_BIGS}) "
        f"THEN b ELSE b * 2 END) IN ({_BIGS})",
        "in (hashint8extended",
    ),
    (f"(CASE WHEN t IN ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'ab') THEN b END) IN ({_BIGS})", "hashtextextended"),
]


@pytest.mark.parametrize(("condition", "form"), LONG_LISTS)
def test_long_in_lists_are_keyed_and_answer_as_before_on_postgres(
    condition: str, form: str, pg_cluster: PgServer
) -> None:
    """PostgreSQL hashes an IN list of 9 or more constants in an unkeyed table, which
    folded BIGINTs flood (PostgresForms.in_lists): the keyed form (integers, DECIMALs,
    text) or the OR chain (other kinds) gives every row the original's three-valued
    answer, NOT IN included, NULLs and other spellings of the same numbers too."""
    import sqlglot

    from proxy.engines.kinds import Typer

    database = "in_lists"
    dsn = pg_cluster.replace_database(database)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE tab (id INT, b BIGINT, t VARCHAR, n NUMERIC(10, 2), ts TIMESTAMP, "
            "f DOUBLE PRECISION)"
        )
        conn.execute(
            "INSERT INTO tab SELECT i, i - 2, chr(97 + i % 10) || CASE WHEN i % 3 = 0 "
            "THEN ' ' ELSE '' END, i / 2.0, TIMESTAMP '2024-01-01' + i * INTERVAL '12 hours', "
            "CASE WHEN i = 5 THEN CAST('-0.0' AS DOUBLE PRECISION) ELSE i / 2.0 END "
            "FROM generate_series(0, 30) AS i"
        )
        conn.execute("INSERT INTO tab VALUES (99, NULL, NULL, NULL, NULL, NULL)")
    sql = f"SELECT id, {condition} AS a, NOT ({condition}) AS b FROM tab ORDER BY id"
    tree = sqlglot.parse_one(sql, read="duckdb")
    original = tree.sql(dialect="postgres")
    PostgresForms().in_lists(tree, Typer({"": _LIST_TABLE, "tab": _LIST_TABLE}))
    for placeholder in list(tree.find_all(exp.Placeholder)):
        placeholder.replace(exp.Var(this="$1"))  # the seed, as render binds it
    keyed = tree.sql(dialect="postgres")
    assert keyed.lower().count(form) >= condition.count(" IN ("), keyed
    with psycopg.connect(dsn, cursor_factory=psycopg.RawCursor) as conn:
        expected = conn.execute(original).fetchall()  # type: ignore[arg-type]
        for seed in (7, 2**62 + 1):
            assert conn.execute(keyed, [seed]).fetchall() == expected  # type: ignore[arg-type]
    assert any(a is None for _, a, _ in expected)  # the NULL row, at least


@pytest.mark.parametrize(
    "sql",
    [
        # DECIMAL keys are grouped as their text: PostgreSQL's NUMERIC carries a scale per
        # value (1.50 and 1.500), DuckDB's type one (a probe split such a key in two)
        "SELECT CASE WHEN flagged THEN CAST(tokens_in % 7 AS DECIMAL(10, 2)) ELSE "
        "CAST(tokens_in % 7 AS DECIMAL(10, 2)) * 1.0 END AS k, COUNT(*) AS n FROM prompts "
        "GROUP BY k",
        "SELECT COALESCE(CAST(tokens_in % 5 AS DECIMAL(10, 1)), 2.25) AS k, COUNT(*) AS n "
        "FROM prompts GROUP BY k",
    ],
)
def test_decimal_keys_of_mixed_scales_group_as_on_duckdb(
    sql: str, pair: dict[str, tuple[Engine, Engine]]
) -> None:
    duck, pg = pair["demo"]
    labels = []
    for engine in (duck, pg):
        plan, out = compare.exact(engine, sql)
        labels.append(sorted(out[plan.key_columns[0]].tolist()))
    assert labels[0] == labels[1]  # one group per value, labelled as DuckDB writes it


def test_the_keyed_hash_is_one_per_value_across_postgres_types(pg_cluster: PgServer) -> None:
    """Values PostgreSQL's = calls equal across two types get one keyed hash (the join's
    keyed equality must hold where the join's does; a probe: a TIMESTAMP = TIMESTAMPTZ
    join matched nothing, a VARCHAR = CHAR(n) join lost rows with trailing spaces)."""
    from proxy.engines.kinds import TEXT, Kind
    from proxy.engines.kinds import Family as F

    forms = PostgresForms()
    seed = exp.Var(this="$1")

    def keyed(column: str, kind: Kind) -> str:
        return forms.keyed_hash([exp.column(column)], [kind], seed).sql(dialect="postgres")

    stamp = Kind(F.TIMESTAMP)
    sql = (
        f"SELECT a = b, {keyed('a', stamp)} = {keyed('b', stamp)}, "
        f"v = c, {keyed('v', TEXT)} = {keyed('c', TEXT)} FROM (VALUES "
        "(TIMESTAMP '2024-01-01 10:00:00.5', TIMESTAMPTZ '2024-01-01 10:00:00.5+00', "
        "CAST('ab ' AS VARCHAR), CAST('ab' AS CHAR(5))), "
        "(TIMESTAMP 'infinity', TIMESTAMPTZ 'infinity', CAST('ab' AS VARCHAR), "
        "CAST('ab   ' AS CHAR(5))), "
        "(TIMESTAMP '0044-03-15 12:00:00.25 BC', TIMESTAMPTZ '0044-03-15 12:00:00.25+00 BC', "
        "CAST('' AS VARCHAR), CAST('' AS CHAR(5)))) AS s(a, b, v, c)"
    )
    with psycopg.connect(pg_cluster.dsn(), cursor_factory=psycopg.RawCursor) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for row in conn.execute(sql, [11]).fetchall():  # type: ignore[arg-type]
            assert row == (True, True, True, True)


def test_the_keyed_hash_of_a_timestamp_is_one_to_one_and_total(pg_cluster: PgServer) -> None:
    """Distinct instants get distinct keyed hashes, from the first to the last that
    PostgreSQL holds and a microsecond apart far from now (a form that rounded them,
    e.g. through a DOUBLE epoch, would give a planted flood one bucket), and no value
    makes the hash fail (the infinities, 4714 BC, 294276 AD, and a TIMESTAMPTZ(0) that
    PostgreSQL rounded past the last TIMESTAMP: a CAST to TIMESTAMP failed on it, after
    the charge, in a review's probe)."""
    from proxy.engines.kinds import Family as F
    from proxy.engines.kinds import Kind

    forms = PostgresForms()
    keyed = forms.keyed_hash([exp.column("t")], [Kind(F.TIMESTAMP)], exp.Var(this="$1"))
    edges = (
        "'infinity'", "'-infinity'", "'4714-11-24 00:00:00 BC'",
        "'294276-12-31 23:59:59.999999'", "'2000-01-01'", "'1970-01-01'",
    )
    sql = (
        f"SELECT COUNT(DISTINCT t), COUNT(DISTINCT {keyed.sql(dialect='postgres')}) FROM ("
        f"SELECT CAST(v AS TIMESTAMP) AS t FROM (VALUES {', '.join(f'({e})' for e in edges)}) "
        "AS e(v) UNION ALL SELECT TIMESTAMP '200000-01-01' + i * INTERVAL '1 microsecond' "
        "FROM generate_series(1, 5000) AS g(i) UNION ALL SELECT NULL) AS s"
    )
    with psycopg.connect(pg_cluster.dsn(), cursor_factory=psycopg.RawCursor) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        distinct, hashes = conn.execute(sql, [11]).fetchone()  # type: ignore[arg-type, misc]
    assert distinct == len(edges) + 5000
    assert hashes == distinct + 1  # NULL hashes too, as '' would
    past = (
        f"SELECT {keyed.sql(dialect='postgres')} FROM (SELECT CAST("
        "'294276-12-31 23:59:59.9+00' AS TIMESTAMPTZ(0)) AS t) AS s"
    )
    with psycopg.connect(pg_cluster.dsn(), cursor_factory=psycopg.RawCursor) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        assert len(conn.execute(past, [11]).fetchall()) == 1  # type: ignore[arg-type]
    # A text the typer took for a timestamp fails when the core is bound (before any
    # charge), not row by row when it runs.
    text_sql = f"SELECT {keyed.sql(dialect='postgres')} FROM (VALUES ('x')) AS s(t)"
    with psycopg.connect(pg_cluster.dsn(), cursor_factory=psycopg.RawCursor) as conn:
        prepared = conn.pgconn.prepare(b"", text_sql.encode(), [20])
        assert prepared.status != psycopg.pq.ExecStatus.COMMAND_OK
        assert b"extract" in (prepared.error_message or b"").lower()


def test_a_core_without_a_seed_keys_its_long_in_list_under_one_of_its_own(
    pair: dict[str, tuple[Engine, Engine]],
) -> None:
    """A core that reads no seed (one group per person, no keyed grouping) still keys a
    long IN list on PostgreSQL: the rendered text reads $1 and the executor binds a
    fresh secret to it (Rendered.own_seed); the answer is DuckDB's."""
    duck, pg = pair["demo"]
    ids = ", ".join(str(i) for i in range(1, 400, 7))
    sql = f"SELECT COUNT(*) AS n, SUM(tokens_in) AS s FROM prompts WHERE prompt_id IN ({ids})"
    compare.assert_own_seed_list_keyed(duck, pg, sql, "hashint8extended")
    assert pg.run(QueryRequest(sql, epsilon=1.0)).rows  # end to end, charged and answered


def test_the_keyed_hash_of_a_float_is_one_per_value_on_postgres(pg_cluster: PgServer) -> None:
    """A join of a float with a number is keyed on both sides cast to DOUBLE
    (keyed_groups._floats): PostgreSQL's = holds for -0.0 and 0.0, for two NaNs, and for
    a BIGINT beyond 2^53 against the DOUBLE it rounds to, and so must their keyed
    hashes (hashfloat8extended hashes every zero and every NaN alike)."""
    forms, seed = PostgresForms(), exp.Var(this="$1")

    def keyed(column: str) -> str:
        return compare.keyed_double(forms, column, seed, "postgres")

    sql = (
        f"SELECT a = b, {keyed('a')} = {keyed('b')} FROM (VALUES "
        "(CAST('-0' AS DOUBLE PRECISION), CAST(0 AS DOUBLE PRECISION)), "
        "(CAST('NaN' AS DOUBLE PRECISION), -CAST('NaN' AS DOUBLE PRECISION)), "
        "(CAST(9007199254740993 AS DOUBLE PRECISION), CAST(9007199254740992 AS DOUBLE PRECISION)), "
        "(CAST(CAST(1.5 AS REAL) AS DOUBLE PRECISION), 1.5)) AS s(a, b)"
    )
    with psycopg.connect(pg_cluster.dsn(), cursor_factory=psycopg.RawCursor) as conn:
        rows = conn.execute(sql, [11]).fetchall()  # type: ignore[arg-type]
    assert rows == [(True, True)] * 4



# The DuckDB suite's database of floats, UUIDs, BYTEAs, TIMEs and INTERVALs
# (tests/proxy/test_keyed_float_joins.py), in PostgreSQL's types, under the same policy.
_TYPED_TABLES = (
    "CREATE TABLE ev (user_id BIGINT, f DOUBLE PRECISION, r REAL, i INTEGER, b BIGINT, "
    "d NUMERIC(18, 3))",
    "CREATE TABLE pub (x DOUBLE PRECISION, y REAL, n BIGINT, m NUMERIC(10, 1))",
    "CREATE TABLE ex (user_id BIGINT, u UUID, bl BYTEA, tm TIME, iv INTERVAL)",
    "CREATE TABLE pex (u UUID, bl BYTEA, tm TIME, iv INTERVAL)",
    # upper-case UUIDs against lower-case ones; '1 day' and '24 hours' for each person
    "INSERT INTO ex SELECT i % 30 + 1, CAST(upper(md5(CAST(i % 7 AS TEXT))) AS UUID), "
    "decode(lpad(to_hex(i % 5), 2, '0'), 'hex'), NULL, CASE WHEN i / 30 % 2 = 0 "
    "THEN INTERVAL '1 day' ELSE INTERVAL '24 hours' END FROM generate_series(0, 299) AS i",
    "INSERT INTO pex SELECT CAST(md5(CAST(i AS TEXT)) AS UUID), "
    "decode(lpad(to_hex(i), 2, '0'), 'hex'), NULL, INTERVAL '1 day' * i "
    "FROM generate_series(0, 3) AS i",
)


@pytest.fixture(scope="module")
def typed(pg_cluster: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    from proxy.policy import parse_policy
    from tests.engines.conftest import database_section, with_database
    from tests.proxy.test_keyed_float_joins import POLICY

    database = "typed_joins"
    with psycopg.connect(pg_cluster.replace_database(database), autocommit=True) as conn:
        for statement in _TYPED_TABLES:
            conn.execute(statement)
    folder = tmp_path_factory.mktemp("typed-pg")
    section = database_section("postgres", pg_cluster.grant_reader(database))
    text = with_database(POLICY, section).format(folder=folder)
    engine = Engine(parse_policy(text, base_dir=folder))
    yield engine
    engine.close()


@pytest.mark.parametrize("join", ["ex.u = pex.u", "pex.bl = ex.bl", "ex.iv = pex.iv"])
def test_uuid_and_bytea_joins_are_keyed_by_their_text_on_postgres(
    join: str, typed: Engine
) -> None:
    """A UUID or BYTEA join is keyed on the value's text (keyed_groups._textual), an
    INTERVAL join on its total's text (keyed_groups.interval_total; '1 day' meets '24
    hours'): the rendered join equates hashtextextended of both sides, and the core
    counts what the plain core counts, values given in upper and lower case included."""
    import sqlglot

    from proxy.request import QueryRequest
    from proxy.rewrite import keyed_groups

    sql = f"SELECT COUNT(*) AS n FROM ex JOIN pex ON {join}"
    _, plan = typed.prepare(QueryRequest(sql, epsilon=1.0))
    rendered = typed.executor.rendered(plan.core_sql)  # type: ignore[attr-defined]
    on = rendered.split(" JOIN ", 1)[1].split(" WHERE ", 1)[0]
    assert on.lower().count("hashtextextended") == 2, on
    plain = keyed_groups.plain(sqlglot.parse_one(plan.core_sql, read="duckdb")).sql("duckdb")
    keyed = typed.executor.run(plan.core_sql, [11])
    assert int(keyed[plan.statistics[0].column][0]) > 100  # rows do match
    assert {k: v.tolist() for k, v in keyed.items()} == {
        k: v.tolist() for k, v in typed.executor.run(plain, [11] if "?" in plain else []).items()
    }
    assert typed.run(QueryRequest(sql, epsilon=1.0)).rows


def test_a_persons_distinct_intervals_count_equal_intervals_once_on_postgres(
    typed: Engine,
) -> None:
    """PostgreSQL too calls '1 day' and '24 hours' equal and writes them apart: the
    per-person COUNT(DISTINCT) of an INTERVAL groups by its total
    (keyed_groups.interval_total, EXTRACT of each field), one value per person here."""
    from proxy.request import QueryRequest

    sql = (
        "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(DISTINCT iv) AS n FROM ex "
        "GROUP BY user_id) t"
    )
    _, plan = typed.prepare(QueryRequest(sql, epsilon=1.0))
    out = typed.executor.run(plan.core_sql, [11])
    total, count = (int(out[s.column][0]) for s in plan.statistics[:2])
    assert (total, count) == (30 * (1 - 50), 30), out  # n = 1 each, centred on 50


# Dates and timestamps at and beyond both ends of the years 1-9999, PostgreSQL's own
# ends and infinities among them (tests/proxy/test_date_keys.py's table, in PostgreSQL).
_DATE_EDGES = (
    "0001-01-01 00:00:00", "0001-12-31 23:59:59.999999 BC", "4713-01-01 00:00:00 BC",
    "9999-12-31 23:59:59.999999", "10000-01-01 00:00:00", "294276-12-31 23:59:59.999999",
    "infinity", "-infinity", "2024-02-29 13:45:10.123456",
)


@pytest.fixture(scope="module")
def dated(pg_cluster: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    from tests.proxy.test_date_keys import POLICY

    database = "date_edges"
    with psycopg.connect(pg_cluster.replace_database(database), autocommit=True) as conn:
        conn.execute("CREATE TABLE ev (user_id BIGINT, ts TIMESTAMP, d DATE)")
        for i, edge in enumerate(_DATE_EDGES):
            conn.execute(
                f"INSERT INTO ev SELECT {i} * 10 + j % 5, CAST('{edge}' AS TIMESTAMP), "
                f"CAST(CAST('{edge}' AS TIMESTAMP) AS DATE) FROM generate_series(0, 11) AS j"
            )
        conn.execute(
            "INSERT INTO ev SELECT 1000 + j % 40, TIMESTAMP '2024-01-01' + j * INTERVAL "
            "'7 hours', DATE '2024-01-01' + j FROM generate_series(0, 399) AS j"
        )
    folder = tmp_path_factory.mktemp("dated-pg")
    section = database_section("postgres", pg_cluster.grant_reader(database))
    engine = Engine(parse_policy(with_database(POLICY, section).format(folder=folder), base_dir=folder))
    yield engine
    engine.close()


@pytest.mark.parametrize("unit", ["day", "month", "quarter", "year", "hour"])
@pytest.mark.parametrize("column", ["ts", "d"])
def test_a_truncated_date_key_is_tested_once_and_keeps_its_values_on_postgres(
    dated: Engine, unit: str, column: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The day key of the private-key benchmark was truncated four times a row on
    PostgreSQL (the range tested on the truncated key, and the key read again in the
    keyed hash): now the range is tested on the column, once (per_person's
    _truncated_within, and postgres_forms._within_timestamps does not test a value read
    within the range again). Same keys, same counts, on values beyond every end."""
    from proxy.rewrite import per_person

    sql = f"SELECT date_trunc('{unit}', {column}) AS k, COUNT(*) AS n FROM ev GROUP BY 1"

    def exact(engine: Engine) -> tuple[str, list[tuple[str, ...]]]:
        _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
        out = engine.executor.run(plan.core_sql, [compare.SEED])
        cols = list(out.values())
        rows = sorted(tuple(str(c[i]) for c in cols) for i in range(len(cols[0])))
        return engine.executor.rendered(plan.core_sql), rows  # type: ignore[attr-defined]

    rendered, got = exact(dated)
    with monkeypatch.context() as m:
        m.setattr(per_person, "_truncated_within", lambda core, key: None)
        reference = Engine(dated.policy)
        try:
            old, expected = exact(reference)
        finally:
            reference.close()
    r = rendered.split(" AS __k0", 1)[0]
    assert r.count("DATE_TRUNC") == 1 and r.count("BETWEEN") == 1, r
    assert old.split(" AS __k0", 1)[0].count("DATE_TRUNC") == 2
    assert got == expected
    keys = [k for k, *_ in got]
    assert any(k.startswith("0001-01-01") for k in keys) and any(k.startswith("9999") for k in keys)
    assert not any(k.startswith(("10000", "2942", "-", "inf")) for k in keys)
