"""Per-rule golden fixtures: what each rewrite rule changes, one file per rule.

In the style of sqlglot's optimizer fixtures, but a dpsql rule maps a ``Core`` to a
``Core`` rather than SQL to SQL: each case runs the rules in order on one query and
records, in ``tests/fixtures/rules/<rule>.sql``, the fields of the core that this rule
changed (WHERE, keys, the aggregates' arguments, the CTEs it wrote, the final SQL, ...),
as SQL. A query the rule leaves alone is listed as unchanged, so each file also says
where the rule does nothing. The whole-pipeline fixtures (tests/fixtures/rewrite/) check
the final core and run it on DuckDB; these pin each step on the way.

Set DPSQL_UPDATE_GOLDEN=1 to rewrite the files after an intended change; review the
diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from proxy.engine import Engine
from proxy.plan import limits
from proxy.request import QueryRequest
from proxy.rewrite import RULES, initial_core
from proxy.rewrite.core import Core

FIXTURES = Path(__file__).parent.parent / "fixtures" / "rules"

# (policy, query): each exercises at least one rule beyond the common path.
CASES: tuple[tuple[str, str], ...] = (
    ("pums", "SELECT COUNT(*) AS n FROM PUMS.PUMS"),
    ("pums", "SELECT sex, AVG(income) AS a FROM PUMS.PUMS GROUP BY sex"),
    ("pums", "SELECT married, VAR_POP(age) AS v FROM PUMS.PUMS WHERE income / age > 10 GROUP BY 1"),
    ("demo", "SELECT model, SUM(tokens_in) AS s, COUNT(*) AS n FROM prompts GROUP BY model"),
    ("demo", "SELECT date_trunc('week', ts) AS w, COUNT(*) AS n FROM prompts GROUP BY 1"),
    ("demo", "SELECT plan, MEDIAN(age) AS m FROM users GROUP BY plan"),
    (
        "demo",
        "SELECT u.region, AVG(p.latency_ms) AS l FROM prompts p JOIN users u "
        "ON u.user_id = p.user_id GROUP BY u.region",
    ),
    ("demo", "SELECT model, COUNT(DISTINCT tokens_in) AS d FROM prompts GROUP BY model"),
)


def _sql(node: exp.Expr | None) -> str:
    return "" if node is None else node.sql(dialect="duckdb")


def _pretty(sql: str) -> str:
    return sqlglot.transpile(sql, read="duckdb", write="duckdb", pretty=True)[0] if sql else ""


def _fields(core: Core) -> dict[str, str]:
    """The core as named SQL texts (what the fixtures compare)."""
    return {
        "from": _sql(core.from_),
        "joins": "\n".join(_sql(j) for j in core.joins),
        "where": _sql(core.where),
        "keys": "\n".join(_sql(k) for k in core.keys),
        "arguments": "\n".join(f"{a} <- {_sql(v)}" for a, v in sorted(core.arguments.items())),
        "statistics": "\n".join(
            f"{s.column or '?'}: {s.kind}({s.arg_sql or ''}) in [{s.lower:g}, {s.upper:g}]"
            f"{' integer' if s.integer else ''}"
            for s in core.statistics
        ),
        "quantiles": "\n".join(
            f"{q.column}: {q.kind} q={q.q} of {q.arg_sql} over {q.histogram}" for q in core.quantiles
        ),
        "ctes": "\n".join(f"{name} AS {_pretty(_sql(body))}" for name, body in core.ctes),
        "limits": f"max_rows {core.max_rows}, max_groups {core.max_groups}"
        f"{', one group per person' if core.one_group_per_person else ''}",
        "sql": _pretty(core.sql),
    }


def _steps(engine: Engine, sql: str) -> dict[str, dict[str, str]]:
    """For each rule: the fields it changed (empty when it changed nothing)."""
    request = QueryRequest(sql, epsilon=1.0)
    shape = engine.checked_shape(request).shape
    max_rows, max_groups = limits(request, shape, engine.policy)
    core = initial_core(shape, max_rows=max_rows, max_groups=max_groups)
    out: dict[str, dict[str, str]] = {}
    for rule in RULES:
        before = _fields(core)
        core = rule(core)
        after = _fields(core)
        out[_rule_name(rule)] = {k: v for k, v in after.items() if v != before[k]}
    return out


def _rule_name(rule: object) -> str:
    return str(getattr(rule, "__module__", "")).rsplit(".", 1)[-1]


def _render(cases: list[tuple[str, str, dict[str, str]]]) -> str:
    parts = []
    for policy, sql, changed in cases:
        lines = [f"-- policy: {policy}", "-- input", sql]
        if not changed:
            lines.append("-- unchanged")
        for field, text in changed.items():
            lines += [f"-- {field}", text]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def engines(pums_engine: Engine, demo_engine: Engine) -> dict[str, Engine]:
    return {"pums": pums_engine, "demo": demo_engine}


@pytest.fixture(scope="module")
def rendered(engines: dict[str, Engine]) -> dict[str, str]:
    per_rule: dict[str, list[tuple[str, str, dict[str, str]]]] = {
        _rule_name(r): [] for r in RULES
    }
    for policy, sql in CASES:
        for rule, changed in _steps(engines[policy], sql).items():
            per_rule[rule].append((policy, sql, changed))
    return {rule: _render(cases) for rule, cases in per_rule.items()}


@pytest.mark.parametrize("rule", [_rule_name(r) for r in RULES])
def test_rule_matches_its_fixture(rule: str, rendered: dict[str, str]) -> None:
    path = FIXTURES / f"{rule}.sql"
    got = rendered[rule]
    if os.environ.get("DPSQL_UPDATE_GOLDEN"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"{path} is missing: run with DPSQL_UPDATE_GOLDEN=1 and review it"
    assert got == path.read_text(), f"rule {rule} changed what it does; see {path}"


def test_every_rule_changes_something(rendered: dict[str, str]) -> None:
    # A rule whose fixture is all "unchanged" is either dead or not exercised here.
    for rule, text in rendered.items():
        assert text.count("-- unchanged") < len(CASES), f"{rule} changed no case"
