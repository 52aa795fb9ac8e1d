"""The per-engine rendering of a core, without a server: DuckDB-only constructs are gone,
the seed stays a parameter, and the window form of the L0 cut keeps exactly the groups
DuckDB's heap form keeps -- checked on DuckDB itself, with a tie-prone hash."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from proxy.engine import Engine
from proxy.engines.kinds import Typer
from proxy.engines.postgres_forms import PostgresForms
from proxy.engines.render import (
    MAX_RENDERED,
    CutForm,
    Held,
    Rendered,
    alone,
    read_once,
    render,
)
from proxy.engines.spark_forms import SparkForms
from proxy.errors import DPSQLError
from proxy.policy import parse_policy
from proxy.request import QueryRequest
from proxy.rewrite import keyed_groups
from tests.copy_counter import deep_copies
from tests.engines.conftest import demo_text

L0_QUERIES = (
    "SELECT date_trunc('month', ts) AS m, COUNT(*) AS n FROM prompts GROUP BY m",
    "SELECT date_trunc('week', ts) AS w, model, COUNT(*) AS n, SUM(tokens_in) AS s "
    "FROM prompts GROUP BY w, model",
    "SELECT category, COUNT(*) AS n FROM tickets GROUP BY category",
)


@pytest.fixture(scope="module")
def engine(engine_demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    tmp = tmp_path_factory.mktemp("render")
    e = Engine(parse_policy(demo_text(tmp, engine_demo_db), base_dir=tmp))
    yield e
    e.close()


def _core(engine: Engine, sql: str) -> str:
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    return plan.core_sql


class _DuckDBWindow:
    """The window form of the cut, rendered back to DuckDB with a given hash: lets
    DuckDB itself compare the two forms of the cut on the same hashes."""

    engine = "duckdb-window"
    dialect = "duckdb"

    def source_values(self, tree: exp.Expr, ctes: set[str]) -> None:
        pass

    def fence_rows(self, tree: exp.Expr) -> None:
        pass

    def once(self, build: Callable[..., exp.Expr], *values: exp.Expr) -> exp.Expr:
        return build(*values)

    def __init__(self, hashed: str, cut: CutForm):
        self.hashed = hashed
        self.cut = cut

    def parameter(self, index: int) -> str:
        return "?"

    def table(self, db: str, name: str) -> exp.Table:
        return exp.Table(this=exp.to_identifier(name), db=exp.to_identifier(db))

    def keyed_hash(self, values: list[exp.Expr], kinds: object, seed: exp.Expr) -> exp.Expr:
        from proxy.engines.render import template

        # unqualified: the GROUPED form hashes inside pp, the others in pph over pp
        return template(self.hashed.replace("pp.", ""))

    def total(self, node: exp.Expr, typer: Typer) -> exp.Expr:
        return node

    def exact_sum(self, node: exp.Sum, argument: object) -> exp.Expr:
        return node

    def double(self, text: str) -> exp.Expr:
        return exp.Literal.number(text)

    def float_op(self, node: exp.Mul | exp.Div, typer: Typer) -> exp.Expr:
        return node

    def wide_integer(self) -> exp.DataType:
        return exp.DataType.build("HUGEINT")

    def rows_by_person(self, rows: exp.Select) -> None:
        pass

    def dates(self, tree: exp.Expr, typer: Typer) -> None:
        pass  # DuckDB holds its own dates

    def decimal_texts(self, tree: exp.Expr, typer: Typer) -> None:
        pass

    def in_lists(self, tree: exp.Expr, typer: Typer) -> None:
        pass

    def per_person(self, tree: exp.Expr, typer: Typer) -> None:
        pass


@pytest.mark.parametrize("sql", L0_QUERIES)
@pytest.mark.parametrize("modulus", [None, 3])
@pytest.mark.parametrize("cut", list(CutForm))
def test_the_window_cut_keeps_the_heaps_groups(
    sql: str, modulus: int | None, cut: CutForm, engine: Engine
) -> None:
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    # as the other engines read it (their groupings are not keyed), the seed a "?"
    core = keyed_groups.plain(sqlglot.parse_one(plan.core_sql, read="duckdb")).sql("duckdb")
    assert "MIN(pph.__h" in core and "EXCLUDE" in core
    names = plan.key_columns
    keys = ", ".join(f"pp.{k}" for k in names)
    original = f"CAST(HASH(pp.__u, {keys}, ?) >> 1 AS BIGINT)"
    assert original in core
    # A hash with three values makes ties at the K-th hash common: every form must
    # then drop the tied groups alike.
    hashed = original if modulus is None else f"CAST(HASH(pp.__u, {keys}, ?) % {modulus} AS BIGINT)"
    heap = core.replace(original, hashed)
    window = render(heap, _DuckDBWindow(hashed, cut), {}).sql  # type: ignore[arg-type]
    assert "EXCLUDE" not in window and "OVER" in window

    def kept(text: str) -> list[tuple[object, ...]]:
        per_person = f"SELECT __u, {', '.join(names)} FROM bounded ORDER BY ALL"
        return engine.executor.evaluate(text[: text.rindex("SELECT")] + per_person, [42])

    kept_heap, kept_window = kept(heap), kept(window)
    assert kept_heap == kept_window
    assert len(kept_heap) > 0


@pytest.mark.parametrize(
    ("forms", "parameter", "hash_name", "window"),
    [
        (
            PostgresForms(),
            "$1",
            "HASHINT8EXTENDED",
            "ROW_NUMBER() OVER (PARTITION BY pph.__u ORDER BY pph.__h",
        ),
        (
            SparkForms(views=True),
            ":p0",
            "XXHASH64",
            "ROW_NUMBER() OVER (PARTITION BY pph.__u ORDER BY pph.__h NULLS LAST) AS __r",
        ),
    ],
)
def test_duckdb_only_constructs_are_gone(
    forms: object, parameter: str, hash_name: str, window: str, engine: Engine
) -> None:
    core = _core(engine, L0_QUERIES[1])
    out: Rendered = render(core, forms, engine.executor.column_types())  # type: ignore[arg-type]
    text = out.sql
    assert out.parameters == 1 and parameter in text and "?" not in text
    for gone in ("EXCLUDE", "TRY(", "HASH(pp", ">> 1", "__l[", "MIN(pph.__h"):
        assert gone not in text, gone
    assert hash_name in text.upper()
    assert window in text
    # Spark shuffles the per-person rows by person once, for the aggregation and the cut
    assert ("/*+ REPARTITION(__u) */" in text) is isinstance(forms, SparkForms)


def test_spark_sums_integers_in_decimal(engine: Engine) -> None:
    core = _core(
        engine, "SELECT model, SUM(tokens_in) AS s, COUNT(*) AS n FROM prompts GROUP BY model"
    )
    text = render(core, SparkForms(views=True), engine.executor.column_types()).sql
    # a person's scaled sum of clamped integers is exact in DOUBLE
    # (proxy/engines/spark_per_person.py); the sums across persons stay DECIMAL
    assert text.count("SUM(CAST(__x0 AS DOUBLE))") == 2  # both branches of the scaling
    assert "SUM(CAST(__s0 AS DECIMAL(38, 0)))" in text
    # the sum of an unclamped column (trusted SQL, e.g. the bench's floor) stays DECIMAL
    floor = render(
        "SELECT SUM(p.tokens_in) FROM prompts p",
        SparkForms(views=True),
        engine.executor.column_types(),
    ).sql
    assert "SUM(CAST(p.tokens_in AS DECIMAL(38, 0)))" in floor


def test_spark_guards_dates_inside_casts_once(engine: Engine) -> None:
    """Spark's year guard reaches a far DATE inside a cast and a cast bounding BETWEEN
    (both raised "long overflow" on one person's rows), and a chain of casts is guarded
    once, not once per level (the SQL would double at each)."""
    types = engine.executor.column_types()

    def spark(condition: str) -> str:
        core = _core(engine, f"SELECT COUNT(*) AS n FROM prompts WHERE {condition}")
        return render(core, SparkForms(views=True), types).sql

    far = "CAST('5000000-01-01' AS DATE)"
    text = spark(
        "CAST(CASE WHEN user_id = 7 THEN DATE '5000000-01-01' ELSE CAST(ts AS DATE) END "
        "AS TIMESTAMP) > ts"
    )
    assert text.count(far) == 2 * text.count(f"{far} BETWEEN") > 0
    text = spark(
        "ts BETWEEN CAST(CASE WHEN user_id = 7 THEN '5000000-01-01' ELSE '2000-01-01' END "
        "AS DATE) AND TIMESTAMP '2030-01-01'"
    )
    assert "END AS DATE) BETWEEN CAST('0001-01-01' AS DATE)" in text
    chain = "ts"
    sizes = []
    for depth in range(1, 13):
        chain = f"CAST(CAST({chain} AS DATE) AS TIMESTAMP)"
        if depth in (4, 12):
            sizes.append(len(spark(f"{chain} > ts")))
    assert sizes[1] < 2 * sizes[0]


@pytest.mark.parametrize(
    ("forms", "sql"),
    [
        (PostgresForms(), "SELECT COUNT(*) AS n FROM prompts WHERE regexp_matches(model, 'x')"),
        (PostgresForms(), "SELECT COUNT(*) AS n FROM prompts WHERE CAST(model AS DATE) IS NULL"),
        (PostgresForms(), "SELECT COUNT(*) AS n FROM users WHERE ROUND(age * 1.5e0, 1) > 3"),
        (PostgresForms(), "SELECT COUNT(*) AS n FROM prompts WHERE EXTRACT(epoch FROM ts) > 0"),
        (SparkForms(views=True), "SELECT COUNT(*) AS n FROM prompts WHERE model LIKE 'a\\_b'"),
        # DuckDB's day and month names: PostgreSQL's to_char pads them, Spark's differ
        (PostgresForms(), "SELECT dayname(ts) AS d, COUNT(*) AS n FROM prompts GROUP BY 1"),
        (
            SparkForms(views=True),
            "SELECT monthname(ts) AS m, COUNT(*) AS n FROM prompts GROUP BY 1",
        ),
        (
            SparkForms(views=True),
            "SELECT COUNT(*) AS n FROM prompts WHERE CAST(latency_ms * 1e0 AS VARCHAR) = '1'",
        ),
    ],
)
def test_constructs_without_an_equivalent_are_refused(
    forms: object, sql: str, engine: Engine
) -> None:
    core = _core(engine, sql)
    with pytest.raises(DPSQLError) as refused:
        render(core, forms, engine.executor.column_types())  # type: ignore[arg-type]
    assert refused.value.code == "unsupported_sql"


QUANTILE_AND_DISTINCT = (
    "SELECT model, MEDIAN(tokens_in) AS m, MAX(latency_ms / 7.0) AS hi, "
    "COUNT(DISTINCT tokens_out) AS d, SUM(DISTINCT tokens_in) AS s, "
    "VARIANCE(DISTINCT tokens_in) AS v FROM prompts GROUP BY model"
)


@pytest.mark.parametrize(
    ("forms", "hashed", "wide", "semi"),
    [
        (
            PostgresForms(),
            "ORDER BY HASHINT8EXTENDED(COALESCE(CAST(__v AS BIGINT), 0)",
            "AS DECIMAL)",
            "EXISTS(",
        ),
        (SparkForms(views=True), "XXHASH64(0, __u, __v)", "AS DECIMAL(38, 0))", "SEMI JOIN"),
    ],
)
def test_quantile_and_distinct_cores_render_with_the_engines_forms(
    forms: object, hashed: str, wide: str, semi: str, engine: Engine
) -> None:
    core = _core(engine, QUANTILE_AND_DISTINCT)
    assert "HASH(__u, __v)" in core and "INT128" in core and "SEMI JOIN" in core
    text = render(core, forms, engine.executor.column_types()).sql  # type: ignore[arg-type]
    upper = text.upper()
    assert "HASH(__U, __V)" not in upper and "HUGEINT" not in upper and "INT128" not in upper
    assert hashed in text and wide in text and semi in text
    assert "TRY(" not in upper and "TRY_CAST(FLOOR" not in upper  # the bin's total form


def test_spark_divides_the_histogram_positions_as_double(engine: Engine) -> None:
    # DuckDB's DECIMAL / DECIMAL is a DOUBLE; Spark's would be a DECIMAL rounded to 6
    # places, and CEIL of it could move a kept position.
    core = _core(engine, "SELECT MEDIAN(tokens_in) AS m FROM prompts")
    assert "CEIL((2.0 * __hi" in core
    text = render(core, SparkForms(views=True), engine.executor.column_types()).sql
    assert "CEIL(CAST((2.0 * __hi" in text and "AS DOUBLE) / CAST((2.0 * __t) AS DOUBLE))" in text


# A hand-made core in the rewrite's shape: one group per person (MIN of a text key) and a
# scaled sum over a clamped integer column, with a person whose key varies, a person
# above the row cap C = 3, NULL values and a person whose values are all NULL.
_PER_PERSON_CORE = """
WITH r AS (SELECT CAST(u AS BIGINT) AS __u, CAST(k AS VARCHAR) AS __k0,
  CAST(CASE WHEN x < -5 THEN -5 WHEN x > 10 THEN 10 ELSE x END AS BIGINT) AS __x0
  FROM (VALUES (1, 'b', 4), (1, 'a', 12), (1, 'b', NULL), (2, 'c', -9), (2, 'c', 3),
               (2, 'c', 7), (2, 'c', 1), (2, 'c', 10), (3, NULL, 2), (3, 'a', 5),
               (4, 'd', NULL)) AS t(u, k, x)),
pp AS (SELECT __u, MIN(__k0) AS __k0, LEAST(COUNT(*), 3) AS __s0,
  CASE WHEN COUNT(__x0) > 3 THEN CAST(SUM(__x0) AS DOUBLE) * 3 / COUNT(__x0)
       ELSE SUM(__x0) END AS __s1,
  CASE WHEN COUNT(__x0) > 3 THEN CAST(SUM((__x0 - 2) * (__x0 - 2)) AS DOUBLE) * 3
       / COUNT(__x0) ELSE SUM((__x0 - 2) * (__x0 - 2)) END AS __s2
  FROM r GROUP BY __u)
SELECT * FROM pp ORDER BY __u
"""


def test_sparks_per_person_forms_give_the_same_rows_on_duckdb() -> None:
    import duckdb
    import sqlglot

    from proxy.engines import spark_per_person

    tree = sqlglot.parse_one(_PER_PERSON_CORE, read="duckdb")
    spark_per_person.per_person(tree, Typer({}))
    text = tree.sql(dialect="duckdb")
    # two levels (hash-aggregated by person and key first), sums of bounded values in DOUBLE
    assert "pp0 AS (SELECT __u, __k0," in text and "GROUP BY __u, __k0" in text
    assert "SUM(CAST(__x0 AS DOUBLE))" in text
    assert "SUM(CAST((__x0 - 2) * (__x0 - 2) AS DOUBLE))" in text
    con = duckdb.connect()
    before = con.execute(_PER_PERSON_CORE).fetchall()
    after = con.execute(text).fetchall()
    assert before == after
    # person 1: one group, MIN of their keys; person 4: all values NULL
    assert before[0][:3] == (1, "a", 3) and before[3][3] is None


@pytest.mark.parametrize(
    ("change", "kept"),
    [
        # a bound whose C * max|x| reaches 2^53: the sum stays exact (DECIMAL on Spark)
        (("x > 10 THEN 10", "x > 4000000000000000 THEN 4000000000000000"), "SUM(__x0)"),
        # an unclamped column: no bound known
        (("CASE WHEN x < -5 THEN -5 WHEN x > 10 THEN 10 ELSE x END", "x"), "SUM(__x0)"),
        # an integer key: Spark's hash aggregation keeps its MIN, one level suffices
        (("CAST(k AS VARCHAR)", "CAST(LENGTH(k) AS BIGINT)"), "FROM r GROUP BY __u)"),
    ],
)
def test_sparks_per_person_forms_only_where_they_are_exact(
    change: tuple[str, str], kept: str
) -> None:
    import sqlglot

    from proxy.engines import spark_per_person

    sql = _PER_PERSON_CORE.replace(*change)
    assert sql != _PER_PERSON_CORE
    tree = sqlglot.parse_one(sql, read="duckdb")
    spark_per_person.per_person(tree, Typer({}))
    assert kept in tree.sql(dialect="duckdb")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(DISTINCT prompt_id) AS n FROM prompts",
        "SELECT prompt_id, COUNT(*) AS n FROM prompts GROUP BY prompt_id",
        "SELECT model, MEDIAN(tokens_in) AS m FROM prompts GROUP BY model",
        "SELECT AVG(n) AS a FROM (SELECT user_id, COUNT(DISTINCT prompt_id) AS n FROM prompts "
        "GROUP BY user_id) t",
        "SELECT r.name, COUNT(*) AS n FROM users u JOIN regions r ON u.region = r.region "
        "GROUP BY r.name",
    ],
)
@pytest.mark.parametrize(
    ("forms", "hashes"),
    [
        (PostgresForms(), {"hashint8extended", "hashtextextended"}),
        (SparkForms(views=True), {"xxhash64"}),
    ],
    ids=["postgres", "spark"],
)
def test_groupings_and_joins_of_a_persons_values_are_keyed_on_every_engine(
    sql: str, forms: object, hashes: set[str], engine: Engine
) -> None:
    """Every grouping of the rendered core by the person and more (the per-person
    aggregation, the distinct values, the quantile histograms' counts, per-person
    DISTINCT layers) groups by the engine's keyed hash too (or by ``__h``/``__gh``, a
    keyed hash selected under that name), and every join on two tables' values also
    equates their keyed hashes: those engines' hash tables are unkeyed too."""
    dialect = "postgres" if isinstance(forms, PostgresForms) else "spark"
    text = render(_core(engine, sql), forms, engine.executor.column_types()).sql  # type: ignore[arg-type]
    tree = sqlglot.parse_one(text, read=dialect)
    seen = 0
    for group in tree.find_all(exp.Group):
        names = {c.name for e in group.expressions for c in e.find_all(exp.Column)}
        person = names & {"__u", "user_id"}
        if not person or names <= person or group.parent_select is tree:
            continue
        seen += 1
        called = {a.name.lower() for e in group.expressions for a in e.find_all(exp.Anonymous)}
        assert called & hashes or names & {"__h", "__gh"}, group.sql(dialect=dialect)
    assert seen
    for join in tree.find_all(exp.Join):
        on = join.args.get("on")
        values = [
            eq
            for eq in (on.find_all(exp.EQ) if on is not None else [])
            if all(isinstance(side, exp.Column) for side in (eq.this, eq.expression))
            and eq.this.name == "region"
        ]
        if values:
            called = {a.name.lower() for a in on.find_all(exp.Anonymous)}
            assert called & hashes, join.sql(dialect=dialect)


# Chains whose guards use an operand more than once (a review, 2026-12-04: 25 additions on
# a DECIMAL(38, 0), multiplied or ROUNDed, took over 300 s to render for PostgreSQL, the
# SQL doubling at each level; five at each level for a DOUBLE sum; Spark's DOUBLE
# quotients, ABS and // grew alike). Each: the condition at a depth, and two depths.
_D38 = "CAST('" + "9" * 38 + "' AS DECIMAL(38,0))"
_PINNED_D38 = f"(CASE WHEN user_id = 7 THEN {_D38} ELSE CAST(tokens_in AS DECIMAL(38,0)) END)"
_NESTED = (3, 9)  # a doubling would grow 2^6 = 64-fold between them
_WIDE = (2, 4)  # guards that repeat an operand four times or more: fewer levels
_WIDEST = (1, 2)
GUARDED_CHAINS = {
    "decimal38_chain_times": (
        lambda n: (
            "(CAST(tokens_in AS DECIMAL(38,0)) + "
            + " + ".join(str(i) for i in range(1, n + 1))
            + f") * {_PINNED_D38} > 0"
        ),
        _NESTED,
    ),
    "round_decimal38_chain": (
        lambda n: f"ROUND(({_PINNED_D38} + " + " + ".join("0" for _ in range(n)) + "), 2) > 0",
        _NESTED,
    ),
    "bigint_chain": (
        lambda n: "(CAST(tokens_in AS BIGINT)" + " * 3" * n + ") > 0",
        _NESTED,
    ),
    "decimal_casts": (
        lambda n: "CAST(" * n + "tokens_in" + " AS DECIMAL(20,2)) + 1" * n + " > 0",
        _WIDE,
    ),
    "abs_chain": (lambda n: "ABS(" * n + "tokens_in - 5" + ")" * n + " > 0", _NESTED),
    "integer_division_chain": (
        lambda n: "(CAST(tokens_in AS BIGINT)" + " // 2" * n + ") > 0",
        _NESTED,
    ),
    "double_sum_chain": (lambda n: "(latency_ms * 1e0" + " + 1.5" * n + ") > 0", _WIDEST),
    "double_quotient_chain": (lambda n: "(latency_ms" + " / 2" * n + ") > 0", _WIDE),
    "double_to_decimal_chain": (
        lambda n: "CAST(" * n + "latency_ms * 1.5e0" + " AS DECIMAL(20,3)) * 2.5e0" * n + " > 0",
        _WIDEST,
    ),
}


@pytest.mark.parametrize("forms", [PostgresForms(), SparkForms(views=True)], ids=["pg", "spark"])
@pytest.mark.parametrize("name", sorted(GUARDED_CHAINS))
def test_guards_grow_linearly_with_a_chains_depth(name: str, forms: object, engine: Engine) -> None:
    """A guard reads a large operand once (render.read_once), so each level adds the
    same text: with c the text around the chain and a per level, (c + 9a) / (c + 3a)
    stays below 9 / 3, where a guard copying its operand twice would grow 64-fold (and
    (c + 4a) / (c + 2a) below 4 / 2, where four copies would grow 16-fold; a DOUBLE sum
    repeats each operand five times or more, too slowly to render twice as deep)."""
    build, (short, deep) = GUARDED_CHAINS[name]
    types = engine.executor.column_types()
    sizes = []
    for depth in (short, deep):
        core = _core(engine, f"SELECT COUNT(*) AS n FROM prompts WHERE {build(depth)}")
        sizes.append(len(render(core, forms, types).sql))  # type: ignore[arg-type]
    assert sizes[1] < deep / short * sizes[0], sizes


@pytest.mark.parametrize(
    ("forms", "held"),
    [
        (PostgresForms(), "OFFSET 0) AS __o)"),
        (SparkForms(views=True), "TRANSFORM(ARRAY(NAMED_STRUCT("),
    ],
    ids=["pg", "spark"],
)
def test_a_large_repeated_operand_is_read_once(forms: object, held: str, engine: Engine) -> None:
    build, _ = GUARDED_CHAINS["double_quotient_chain"]
    core = _core(engine, f"SELECT COUNT(*) AS n FROM prompts WHERE {build(3)}")
    assert held in render(core, forms, engine.executor.column_types()).sql  # type: ignore[arg-type]


def test_an_operand_that_cannot_be_held_is_refused_before_it_grows() -> None:
    """An aggregate is never moved into a subquery (COUNT(*) there would count its one
    row): repeated instead, within a budget, and refused as soon as it would pass it,
    long before the text would reach MAX_RENDERED."""
    value: exp.Expr = exp.Count(this=exp.Star())
    calls = 0

    def twice(v: exp.Expr) -> exp.Expr:
        return exp.Add(this=v, expression=v.copy())

    def never(body: exp.Expr, held: list[Held]) -> exp.Expr:
        raise AssertionError("an aggregate was held")

    with pytest.raises(DPSQLError) as refused:
        for _ in range(64):
            value = read_once("postgres", twice, [value], never)
            calls += 1
    assert refused.value.code == "unsupported_sql"
    assert calls < 20 and sum(1 for _ in value.walk()) < MAX_RENDERED // 10


@pytest.mark.parametrize(
    ("forms", "dialect", "head"),
    [
        (PostgresForms(), "postgres", "IN (HASHINT8EXTENDED("),
        (SparkForms(views=True), "spark", "IN (XXHASH64("),
    ],
)
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_an_in_list_inside_another_lists_operand_is_keyed(
    forms: PostgresForms | SparkForms, dialect: str, head: str, depth: int
) -> None:
    """Each long IN list is keyed, however deep in another list's operand. Outer first,
    the outer form wrote its operand anew and the inner list was keyed in the detached
    original, so the text ran it unkeyed (a review, 2026-12-04); and the nested forms
    stay small (a large operand read once)."""
    items = ", ".join(str(i) for i in range(1, 40, 3))
    condition = "b"
    for _ in range(depth):
        condition = f"CASE WHEN {condition} IN ({items}) THEN b ELSE b * 2 END"
    tree = sqlglot.parse_one(f"SELECT ({condition}) IN ({items}) AS a FROM tab", read="duckdb")
    forms.in_lists(tree, Typer({"": {"b": "BIGINT"}, "tab": {"b": "BIGINT"}}))
    text = tree.sql(dialect=dialect).upper()
    assert text.count(head) >= depth + 1, text
    assert len(text) < 4_000 * (depth + 1), len(text)


def test_a_decimal_text_inside_another_is_written_with_its_scale() -> None:
    """PostgresForms.decimal_texts rounds each DECIMAL cast to text to its type's scale;
    one inside another's operand was rounded in a detached copy (outer first) and kept
    PostgreSQL's per-value scale, which can split a group."""
    inner = "CAST(CAST(n AS VARCHAR) AS DECIMAL(10, 2))"
    tree = sqlglot.parse_one(f"SELECT CAST({inner} * 1.0 AS VARCHAR) AS k FROM tab", read="duckdb")
    PostgresForms().decimal_texts(
        tree, Typer({"": {"n": "DECIMAL(10,2)"}, "tab": {"n": "DECIMAL(10,2)"}})
    )
    assert tree.sql(dialect="postgres").upper().count("ROUND(") == 2, tree.sql(dialect="postgres")


def _summed_chain(engine: Engine, step: str, depth: int) -> str:
    """The core of a SUM over ``step`` nested ``depth`` times from tokens_in."""
    chain = "tokens_in"
    for _ in range(depth):
        chain = step.format(e=chain)
    return _core(engine, f"SELECT model, SUM({chain}) AS s FROM prompts GROUP BY model")


@pytest.mark.parametrize("forms", [PostgresForms(), SparkForms(views=True)], ids=["pg", "spark"])
@pytest.mark.parametrize(
    "step", ["COALESCE({e}, 0)", "({e} + 1)", "CASE WHEN tokens_in > 3 THEN {e} END"]
)
def test_total_forms_type_each_level_once(
    step: str, forms: object, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A total form types the levels of the expression it rebuilds, and typing a node
    types its subtree: unremembered, 160 nested COALESCEs asked 78,000 kinds and took
    5.5 s to render for PostgreSQL (2026-12-04). The kinds asked grow with the chain."""
    calls = 0
    kind = Typer._kind

    def counted(self: Typer, node: exp.Expr) -> object:
        nonlocal calls
        calls += 1
        return kind(self, node)

    types = engine.executor.column_types()
    counts = []
    for depth in (20, 40):
        core = _summed_chain(engine, step, depth)
        monkeypatch.setattr(Typer, "_kind", counted)
        calls = 0
        render(core, forms, types)  # type: ignore[arg-type]
        monkeypatch.undo()
        counts.append(calls)
    assert counts[1] < 2.5 * counts[0], counts


def test_a_node_alone_has_no_children() -> None:
    """The total forms rebuild each level around forms of its children: the node is
    copied alone (render.alone), since a whole copy at every level is quadratic."""
    node = sqlglot.parse_one("COALESCE(COALESCE(a, 1), 2, 3) /* kept */", read="duckdb")
    out = alone(node)
    assert type(out) is type(node) and out.comments == node.comments
    assert not list(out.iter_expressions())
    assert node.sql() == "COALESCE(COALESCE(a, 1), 2, 3) /* kept */"  # unchanged


@pytest.mark.parametrize("forms", [PostgresForms(), SparkForms(views=True)], ids=["pg", "spark"])
@pytest.mark.parametrize("step", ["(-{e})", "ABS({e})", "COALESCE({e}, 0)", "({e} // 2)"])
def test_total_forms_copy_no_chain_at_every_level(step: str, forms: object, engine: Engine) -> None:
    """The total forms rebuild each level of an expression: copying the chain below at
    each (a whole copy of the node, a template's copy of its parts) was quadratic in its
    depth (2026-12-04: 160 nested ABS took 6.4 s to render for PostgreSQL, 320 nested
    negations 9.3 s for Spark; 20, 40 and 60 nested ``// 2`` made PostgreSQL copy
    43,895, 124,925 and 252,755 subtrees). The copies grow linearly with the chain: each
    20 more levels add no more copies than the 20 before (within a fifth)."""
    types = engine.executor.column_types()
    counts = []
    for depth in (20, 40, 60):
        core = _summed_chain(engine, step, depth)
        counts.append(
            deep_copies(lambda core=core: render(core, forms, types))  # type: ignore[misc, arg-type]
        )
    assert counts[2] - counts[1] <= 1.2 * (counts[1] - counts[0]) + 200, counts


@pytest.mark.parametrize(
    "sql",
    [
        # four "count if contains" metrics, and an "average if contains" of 20 characters:
        # the clamp wrote each argument three times (and the clipping flag once more),
        # which the rendered count refused on PostgreSQL (a review, 2026-12-06)
        "SELECT SUM(CASE WHEN model LIKE '%gpt-4%' THEN 1 ELSE 0 END) AS a, "
        "SUM(CASE WHEN model LIKE '%claude%' THEN 1 ELSE 0 END) AS b, "
        "SUM(CASE WHEN model LIKE '%llama%' THEN 1 ELSE 0 END) AS c, "
        "SUM(CASE WHEN model LIKE '%mistral%' THEN 1 ELSE 0 END) AS d FROM prompts",
        "SELECT AVG(CASE WHEN model LIKE '%abcdefghijklmnopqrst%' THEN tokens_in END) AS n "
        "FROM prompts",
        # (a pattern Spark matches without backtracking)
        "SELECT VAR_SAMP(CAST(CASE WHEN model LIKE '%" + "y" * 50 + "%' THEN 1 ELSE 2 END "
        "AS DOUBLE) * 1.5) AS v FROM prompts",
    ],
    ids=["four_contains", "average_contains", "variance_of_a_long_pattern"],
)
@pytest.mark.parametrize("forms", [PostgresForms(), SparkForms(views=True)], ids=["pg", "spark"])
def test_a_case_reads_its_string_work_once(sql: str, forms: object, engine: Engine) -> None:
    """Queries whose CASE the clamp writes out several times render within the count of
    the rendered string work: where the copies would pass the limit (the long pattern),
    the CASE reads its operand once."""
    _, plan = engine.prepare(QueryRequest(sql, epsilon=1.0))
    text = render(plan.core_sql, forms, engine.executor.column_types()).sql  # type: ignore[arg-type]
    tree = sqlglot.parse_one(text, read="postgres" if isinstance(forms, PostgresForms) else "spark")
    likes = list(tree.find_all(exp.Like))
    written = list(sqlglot.parse_one(sql, read="duckdb").find_all(exp.Like))
    # at most the clamped argument, held once, and the clipping flag beside it
    assert len(written) <= len(likes) <= 2 * len(written), text
