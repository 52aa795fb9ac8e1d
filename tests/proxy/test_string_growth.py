"""The string-growth bound of proxy/string_growth.py on expressions (no engine)."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.errors import DPSQLError
from proxy.string_growth import MAX_BUILT_FACTOR, MAX_FACTOR, Growth, _Walk, check_string_growth


def _work(sql: str) -> Growth:
    walk = _Walk()
    walk.growth(sqlglot.parse_one(sql, read="duckdb"))
    return walk.work


@pytest.mark.parametrize(
    ("sql", "factor", "constant"),
    [
        ("lower(trim(name))", 2, 0),  # trim(name), then lower(...): each at most L
        ("'EU-' || region", 1, 3),
        ("replace(phone, '-', '')", 1, 0),  # a result no longer than phone
        ("replace(m, 'a', 'aaaa')", 4, 0),  # at most 4 × m
        ("CAST(age AS VARCHAR) || 'y'", 2, 64 + 64 + 1),
        ("CASE WHEN x > 1 THEN a ELSE b || b END", 2, 0),  # only b || b is built
        ("age + 1 > 3", 0, 0),  # numbers only: no string is built
        # constants count too: a CASE on the row can hand one person's rows a constant
        ("'a' || 'b'", 0, 2),
    ],
)
def test_the_work_of_an_expression(sql: str, factor: float, constant: float) -> None:
    work = _work(sql)
    assert (work.factor, work.constant) == (factor, constant)


def test_nesting_multiplies_and_is_refused() -> None:
    ok = "replace(replace(model, 'a', 'aa'), 'a', 'aa')"  # 2 + 4
    assert _work(ok).factor == 6
    check_string_growth(sqlglot.parse_one(ok), "WHERE")
    deep = f"replace({ok}, 'a', 'aa')"  # 2 + 4 + 8: strings past MAX_BUILT_FACTOR
    assert _work(deep).factor > MAX_BUILT_FACTOR
    with pytest.raises(DPSQLError) as info:
        check_string_growth(sqlglot.parse_one(deep), "WHERE")
    assert info.value.code == "unsupported_sql" and "8 times" in info.value.message
    # matching builds nothing: its passes meet the work bound instead
    passes = "model LIKE '%" + "ab" * 40 + "%'"
    assert _work(passes).factor == 80 > MAX_FACTOR
    with pytest.raises(DPSQLError) as info:
        check_string_growth(sqlglot.parse_one(passes), "WHERE")
    assert "64 times" in info.value.message


def test_a_row_dependent_replacement_is_refused() -> None:
    with pytest.raises(DPSQLError) as info:
        check_string_growth(sqlglot.parse_one("replace(m, 'a', m)"), "WHERE")
    assert "REPLACE" in info.value.message and "constant" in info.value.hint


def test_a_longer_pattern_divides_the_growth() -> None:
    # at most |m| / 4 matches of 'abcd', each replaced by 8 characters: 2 × m
    assert _work("replace(m, 'abcd', 'xxxxxxxx')").factor == 2


# A probe of 2026-12-02: each was answered, and one person's rows took seconds each
# (past the time limit, after the charge) where the others' took microseconds.
@pytest.mark.parametrize(
    ("sql", "says"),
    [
        (  # a 70-million-character constant handed to one person's rows by a CASE
            "lower(CASE WHEN user_id = 42 THEN replace(replace('"
            + "x" * 700
            + "', 'x', '"
            + "y" * 1000
            + "'), 'y', 'zz') ELSE '' END) = 'small'",
            "constant",
        ),
        ("regexp_matches(model, '(a|aa){1,1000}b')", "compiled size"),
        ("regexp_matches(model, prompt)", "literal"),
        (  # a small pattern over a long constant text on one person's rows
            "regexp_matches(CASE WHEN user_id = 42 THEN '"
            + "a" * 8000
            + "' || model ELSE model END, '(abcdefghij){1,30}x')",
            "characters per row",
        ),
        # a second probe, 2026-12-02: LIKE's matching cost, and growth hidden by TRY,
        # by a CAST of a constant, by strftime
        ("(model || model) LIKE ('%' || model || 'b%')", "LIKE pattern"),
        (
            "(CASE WHEN user_id = 42 THEN replace('"
            + "x" * 100
            + "', 'x', '"
            + "a" * 110
            + "') ELSE '' END) LIKE (CASE WHEN user_id = 42 THEN replace('%"
            + "y" * 100
            + "b%', 'y', '"
            + "a" * 55
            + "') ELSE '' END)",
            "characters per row",
        ),
        (
            "length(replace(replace(replace(TRY(CASE WHEN user_id = 42 THEN 'x' ELSE '' END), "
            "'x', '" + "x" * 1000 + "'), 'x', '" + "x" * 1000 + "'), 'x', 'xxxx')) > 0",
            "constant",
        ),
        (
            "length(replace(replace(CAST('x' AS VARCHAR), 'x', '"
            + "x" * 1000
            + "'), 'x', '"
            + "x" * 1000
            + "')) > 0",
            "constant",
        ),
        ("replace(TRY(replace(TRY(model), 'a', TRY(model))), 'a', TRY(model)) = ''", "REPLACE"),
        (
            "replace(replace(strftime(ts, '%Y'), '2', '"
            + "x" * 1000
            + "'), 'x', '"
            + "x" * 1000
            + "') = ''",
            "constant",
        ),
        # a probe of the engines: TRIM's set, on PostgreSQL and Spark
        (
            "length(trim(CASE WHEN user_id = 42 THEN model || '"
            + "a" * 9000
            + "' ELSE model END, '"
            + "b" * 9000
            + "a')) > 3",
            "characters per row",
        ),
        ("trim(model, model) = ''", "TRIM with characters"),
        # a probe of non-string costs, 2026-12-02: searches went uncounted (250 strpos
        # terms timed out on one person's 4-million-character value), a cast to VARINT
        # costs the text's length squared, and a counted repetition of a class blows up
        # RE2's DFA (six such patterns timed out on a 3-million-character value)
        (" OR ".join(f"strpos(model, '7x{k}') > 0" for k in range(250)), "characters per row"),
        (" OR ".join(f"contains(model, '7x{k}')" for k in range(250)), "characters per row"),
        ("CAST(model AS VARINT) = 5", "square"),
        ("TRY_CAST(model AS BIGNUM) = 5", "square"),
        ("regexp_matches(model, 'a[ab]{60}c')", "repeated character classes"),
        ("regexp_matches(model, 'a[ab]{8}[ab]{8}c')", "repeated character classes"),
        ("regexp_matches(model, 'a" + "[ab]" * 16 + "c')", "repeated character classes"),
    ],
    ids=[
        "constant-under-case",
        "regex-repetition",
        "regex-from-data",
        "regex-long-text",
        "like-pattern-from-data",
        "like-constants-under-case",
        "try-hides-constant",
        "cast-hides-constant",
        "try-hides-row-replacement",
        "strftime-hides-constant",
        "trim-long-set",
        "trim-set-from-data",
        "strpos-uncounted",
        "contains-uncounted",
        "varint-cast",
        "bignum-cast",
        "regex-dfa-blowup",
        "regex-dfa-blowup-split",
        "regex-dfa-blowup-spelled-out",
    ],
)
def test_blowups_refused(sql: str, says: str) -> None:
    with pytest.raises(DPSQLError) as info:
        check_string_growth(sqlglot.parse_one(sql, read="duckdb"), "WHERE")
    assert info.value.code == "unsupported_sql" and says in info.value.message


def test_ordinary_regexes_pass() -> None:
    for pattern in (
        "^gpt-4",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "(small|large|x{1,3})$",
        "[0-9]{10}",
        "^[a-z]+@[a-z]+[.]com$",
        "[[:alpha:]]+",
    ):
        check_string_growth(
            sqlglot.parse_one(f"regexp_matches(lower(model), '{pattern}')", read="duckdb"),
            "WHERE",
        )


def test_a_few_searches_pass() -> None:
    check_string_growth(
        sqlglot.parse_one(
            "contains(model, 'mini') OR starts_with(model, 'gpt') OR strpos(model, '-') > 3"
        ),
        "WHERE",
    )


def test_concat_ws_counts_its_separator_between_every_part() -> None:
    """A 32,000-character separator and 1,400 parts: 45 MB on each of one person's rows,
    counted as one separator (a probe, 2026-12-02)."""
    parts = ", ".join(["'a'"] * 5)
    assert _work(f"concat_ws(sep, {parts})").factor == 4
    sql = (
        "length(concat_ws(CASE WHEN user_id = 189 THEN replace('"
        + "x" * 32
        + "', 'x', '"
        + "y" * 1000
        + "') ELSE '' END, "
        + ", ".join(["'a'"] * 300)
        + ")) > 0"
    )
    with pytest.raises(DPSQLError):
        check_string_growth(sqlglot.parse_one(sql, read="duckdb"), "WHERE")


def test_the_bound_is_on_the_whole_query(small_demo) -> None:
    """150 WHERE conjuncts, each within the bound alone, ran 2.5 s on one person's rows
    against 0.09 s: the pieces of a query share one row's budget."""
    from proxy.request import QueryRequest

    piece = "model NOT LIKE '%abcdefghi{0}%'"  # 10 passes each
    sql = "SELECT COUNT(*) AS n FROM prompts WHERE " + " AND ".join(
        piece.format(i) for i in range(8)
    )
    before = len(small_demo.ledger.history(limit=100_000))
    with pytest.raises(DPSQLError) as info:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert "as a whole" in info.value.message
    assert len(small_demo.ledger.history(limit=100_000)) == before


def test_a_union_arm_cannot_carry_a_constant_to_the_outer_query(small_demo) -> None:
    """A probe (2026-12-02): an arm's 30,000-character constant on one person's rows
    reached the outer query as data, whose bound allows 64 times its length: 20-27x the
    time without the person."""
    from proxy.request import QueryRequest

    big = "replace('" + "x" * 100 + "', 'x', '" + "y" * 300 + "')"
    sql = (
        f"SELECT COUNT(*) AS n FROM (SELECT user_id, lower(CASE WHEN user_id = 189 THEN {big} "
        "ELSE model END) AS v FROM prompts UNION ALL SELECT user_id, category AS v FROM tickets) t "
        "WHERE lower(v) <> 'q'"
    )
    with pytest.raises(DPSQLError) as info:
        small_demo.run(QueryRequest(sql, epsilon=1.0))
    assert "UNION ALL" in info.value.message


def test_every_copy_is_counted_wherever_it_stands() -> None:
    """No engine computes the branches of a CASE, or separate aggregates' arguments,
    once: a CASE of 30 branches repeating one LIKE took 8 times one copy on DuckDB and
    timed out after the charge on PostgreSQL (a probe, 2026-12-06), where these repeats
    had been counted once."""
    key = "CASE WHEN lower(m) LIKE '%a%' THEN 'A' WHEN lower(m) LIKE '%b%' THEN 'B' END"
    once = _work(f"SELECT {key} AS k FROM t")
    # a GROUP BY key written as in the select list is one key, computed once; so is an
    # aggregate written twice (one statistic)
    assert _work(f"SELECT {key} AS k FROM t GROUP BY {key} ORDER BY {key}") == once
    same = "SUM(CASE WHEN lower(m) LIKE '%a%' THEN 1 ELSE 0 END)"
    assert _work(f"SELECT {same} AS a, {same} AS b FROM t ORDER BY {same}") == _work(
        f"SELECT {same} AS a FROM t"
    )
    # but the same key twice within one expression runs twice
    assert _work(f"SELECT {key} || {key} AS k FROM t").factor >= 2 * once.factor
    like = "body LIKE '%y" + "_" * 30 + "z%'"
    branches = " ".join(f"WHEN {like} THEN {k}" for k in range(3))
    assert _work(f"SELECT SUM(CASE {branches} ELSE 0 END) FROM t").factor == 3 * 32
    sums = ", ".join(f"SUM(CASE WHEN {like} THEN {k} ELSE 0 END)" for k in range(3))
    assert _work(f"SELECT {sums} FROM t").factor == 3 * 32


def test_work_under_a_cast_to_a_number_is_counted() -> None:
    """A cast to a number read its input's total before walking it and dropped what the
    input added: a 52-character LIKE under CAST(... AS DOUBLE) counted nothing (a probe
    of the PostgreSQL engine, 2026-12-06)."""
    like = "CASE WHEN body LIKE '%y" + "_" * 50 + "z%' THEN 1 ELSE 2 END"
    assert _work(f"SELECT CAST({like} AS DOUBLE) * 1.5 FROM t").factor == 52
    # lower builds one copy, the cast to text another, the date cast reads it: 3 passes
    assert _work("SELECT CAST(CAST(lower(body) AS VARCHAR) AS DATE) FROM t").factor == 3
    with pytest.raises(DPSQLError):
        check_string_growth(
            sqlglot.parse_one(f"SELECT SUM(CAST({like} AS INT) + CAST({like} AS INT)) FROM t"),
            "the query as a whole",
        )


@pytest.mark.parametrize(
    ("sql", "factor"),
    [
        ("model LIKE '%mini%'", 4),  # one pass per character matched; % costs none
        ("model ILIKE 'gpt-4_%'", 6),
        ("model LIKE 'pg/_' || '%' ESCAPE '/'", 4),  # a constant built of constants
        ("model LIKE '%a%' OR model LIKE '%b%'", 2),
        ("trim(model, ' -.')", 1 + 3),  # the trimmed value, and 3 comparisons a character
    ],
)
def test_a_pattern_counts_one_pass_per_character(sql: str, factor: float) -> None:
    """A LIKE matcher tries the pattern's characters at each position after a ``%``: a
    pattern of 4,000 characters cost 4,000 passes over a person's text, where one for
    each 64 had been counted (an adversarial probe, 2026-12-06)."""
    assert _work(sql).factor == factor


def test_a_long_pattern_over_a_column_is_refused() -> None:
    long = "body LIKE '%y" + "_" * 100 + "z%'"
    with pytest.raises(DPSQLError) as refused:
        check_string_growth(sqlglot.parse_one(long, read="duckdb"), "WHERE")
    assert refused.value.code == "unsupported_sql"
    check_string_growth(sqlglot.parse_one("body LIKE '%" + "y" * 60 + "%'"), "WHERE")


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        # (bound: GROUP BY positions are written out as their expressions)
        ("SELECT COUNT(*) FROM t GROUP BY concat(body, body, body, body, body)", True),
        ("SELECT COUNT(DISTINCT body || body || body || body || body) FROM t", True),
        # copies add up across the stored expressions
        ("SELECT COUNT(*) FROM t GROUP BY body || body, body || lower(body), body", True),
        ("SELECT COUNT(*) FROM t GROUP BY region || '-' || plan, region", False),
        (
            "SELECT COUNT(*) FROM a JOIN b ON a.x || a.x || a.x = b.y || b.y GROUP BY a.x || a.x",
            True,
        ),
        ("SELECT COUNT(DISTINCT body), COUNT(DISTINCT upper(body)) FROM t", False),
        ("SELECT concat(body, body, body, body, body) AS k FROM t WHERE body <> ''", False),
    ],
)
def test_stored_strings_hold_at_most_four_copies_of_a_column(sql: str, refused: bool) -> None:
    """A key of 60 copies of a text column ran out of memory after the charge on one
    person's 48 MB of text (an adversarial probe, 2026-12-06)."""
    from proxy.string_growth import check_stored_strings

    tree = sqlglot.parse_one(sql, read="duckdb")
    if refused:
        with pytest.raises(DPSQLError) as error:
            check_stored_strings(tree)
        assert "copies of" in error.value.message
    else:
        check_stored_strings(tree)


def test_only_text_columns_count_as_stored_copies() -> None:
    """A number read in ten join keys is no string held ten times (the audit's chain of
    ten joins on the person id was refused by the first version of the check)."""
    from proxy.string_growth import check_stored_strings

    joins = " ".join(f"JOIN p t{i} ON t{i}.uid = e.uid" for i in range(10))
    tree = sqlglot.parse_one(f"SELECT COUNT(*) FROM e {joins}", read="duckdb")
    check_stored_strings(tree, is_text=lambda column: column.name != "uid")
    with pytest.raises(DPSQLError):
        check_stored_strings(tree)  # (read as text, which an unknown column may be)


def test_a_rendered_core_refused_for_the_strings_it_builds_says_that_limit() -> None:
    # (it said "would run 64 times over the longest input value per row ...; the limit
    # is 64", and 54 against 64 for CORR of a DECIMAL on PostgreSQL: the limit passed
    # was the 8 times a row may build, not named)
    from proxy.string_growth import check_rendered_rows

    built = " || ".join(["CAST(a AS VARCHAR)"] * 10)
    tree = sqlglot.parse_one(f"SELECT {built} AS x FROM t", read="duckdb")
    with pytest.raises(DPSQLError) as caught:
        check_rendered_rows(tree, "postgres")
    message = caught.value.message
    assert f"the limit is {MAX_BUILT_FACTOR} times" in message and "build" in message
