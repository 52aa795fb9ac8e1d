"""`dpsql` command line: the same Engine as the server, in-process.

Start-up is most of a one-shot command's time, and almost all of it is imports: every
heavy library (the engine with DuckDB, pyarrow and sqlglot, the policy with NumPy, the
server with FastAPI and uvicorn, the PostgreSQL door, rich) is imported inside the
command that needs it, never here. tests/proxy/test_cli_startup.py holds that line.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import hashlib
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from proxy.errors import DPSQLError

if TYPE_CHECKING:
    from rich.console import Console

    from proxy.policy import Policy
    from proxy.request import QueryRequest

DEFAULT_POLICY = os.environ.get("DPSQL_POLICY", "sample_data/policy.toml")


def _policy(path: str) -> Policy:
    # The policy module imports the accounting package (NumPy): not needed for --help.
    from proxy.policy import PolicyError, load_policy

    try:
        return load_policy(path)
    except (PolicyError, OSError) as error:
        raise DPSQLError(
            "policy_error",
            f"cannot load policy {path}: {error}",
            "pass --policy FILE or set DPSQL_POLICY",
        ) from None


class _HidePandas:
    """A meta-path finder under which ``import pandas`` fails (see below)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("hidden while pyarrow probes for it", name=name)


def _skip_pyarrow_pandas_probe() -> None:
    """Keep pyarrow from importing pandas in this process (0.15 s, when installed).

    The first ``pa.array(...)`` of a process imports pandas, only to recognise pandas
    objects among its inputs. The engine hands pyarrow Python lists and NumPy arrays
    (DuckDB's results come through fetchnumpy and Arrow), never pandas objects, so the
    probe's answer changes nothing here: it is made once with pandas hidden, and pyarrow
    records "no pandas" for that check. Anything that needs pandas can still import it
    (pyarrow's own to_pandas retries the import and then recognises pandas again)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _HidePandas)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_HidePandas)


def _engine(args: argparse.Namespace, *, answers: bool = True) -> Any:
    """The engine for one command; ``answers`` when it will answer queries (its
    post-processing database is then opened with the rest)."""
    policy = _policy(args.policy)
    _skip_pyarrow_pandas_probe()
    # Imported here: the engine imports DuckDB, pyarrow, sqlglot and the planner, and
    # opens its executor and ledger on a thread of their own meanwhile.
    from proxy.engine_opening import Opening

    return Opening(policy, post=answers).engine()


def _request(args: argparse.Namespace) -> QueryRequest:
    from proxy.request import AccuracyTarget, QueryRequest

    accuracy = None
    if getattr(args, "rel_error", None) is not None:
        accuracy = AccuracyTarget(args.rel_error, args.at_count, args.confidence)
    return QueryRequest(
        sql=args.sql,
        dialect=args.dialect,
        epsilon=args.epsilon,
        delta=args.delta,
        rho=args.rho,
        accuracy=accuracy,
        max_groups=args.max_groups,
        max_rows_per_group=args.max_rows_per_group,
        raw_noise=getattr(args, "raw_noise", False),
        analyst=os.environ.get("USER", "cli"),
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _cell(value: Any, width: float | None) -> str:
    text = f"{value:.6g}" if isinstance(value, float) else str(value)
    return text if width is None else f"{text} ± {width:.3g}"


def cmd_query(args: argparse.Namespace, out: Console) -> int:
    engine = _engine(args)
    try:
        result = engine.run(_request(args))
    finally:
        engine.close()
    p = result.privacy
    meta = {**p.to_dict(), "warnings": list(result.warnings)}
    if args.format == "json":
        body = {
            "columns": list(result.columns),
            "rows": [[_json_value(v) for v in r] for r in result.rows],
            "intervals_95": [list(w) for w in result.intervals],
            "unsettled_cells": [list(cell) for cell in result.unsettled_cells],
            "unsettled_rows": list(result.unsettled_rows),
            "privacy": meta,
        }
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
        return 0
    if args.format == "csv":
        from proxy.server import formats

        page = formats.Page(
            columns=result.columns,
            rows=result.rows,
            intervals=result.intervals,
            privacy=p.to_dict(),
            warnings=result.warnings,
            offset=0,
            total_rows=len(result.rows),
            next=None,
        )
        sys.stdout.write(formats.render(page, formats.CSV).decode())
        return 0
    from rich.table import Table

    table = Table(*result.columns)
    doubtful = set(result.unsettled_cells)
    for i, (row, widths) in enumerate(zip(result.rows, result.intervals, strict=True)):
        # "?": another draw of the noise could have given another value (a comparison
        # near its threshold), or left the row out (HAVING, LIMIT); the warnings say which
        table.add_row(
            *(
                _cell(v, w) + (" ?" if (i, c) in doubtful else "")
                for c, (v, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    out.print(table)
    if result.unsettled_cells:
        out.print("[dim]? another draw of the noise could have given another value[/dim]")
    if p.exact:
        out.print(f"[dim]exact: {p.exact}[/dim]")
        return 0
    out.print("[dim]± is the 95% interval of the noise (not of the bounding's bias)[/dim]")
    cost = "0 (cached replay)" if p.cached else f"ε={p.epsilon:.4g} δ={p.delta:.3g}"
    left = ", ".join(f"{k}: {v:.4g}" for k, v in p.remaining.items())
    out.print(f"[dim]cost {cost}; mechanism {p.mechanism}; remaining ε {left}[/dim]")
    for c in p.columns:
        if c.half_width_95 is not None:
            out.print(f"[dim]  {c.name}: ±{c.half_width_95:.4g} (95%)[/dim]")
    for w in result.warnings:
        out.print(f"[yellow]warning:[/yellow] {w}")
    return 0


def cmd_explain(args: argparse.Namespace, out: Console) -> int:
    engine = _engine(args)
    try:
        ex = engine.explain(_request(args))
    finally:
        engine.close()
    body = ex.to_dict()
    if body["cache"] != "exact":
        body["cache"] = "hit (free)" if ex.cached else "miss (charged)"
    sys.stdout.write(json.dumps(body, indent=2) + "\n")
    return 0


def _budgets(args: argparse.Namespace) -> Any:
    from proxy.budgets import Budgets

    return Budgets(_policy(args.policy))


def cmd_budget(args: argparse.Namespace, out: Console) -> int:
    budgets = _budgets(args)
    try:
        views = budgets.views(sorted(p.name for p in budgets.policy.populations))
    finally:
        budgets.close()
    from rich.table import Table

    table = Table("population", "spent ε", "cap ε", "remaining ε", "")
    for view in views:
        for v in (view, *view.partitions):
            frac = 0.0 if v.epsilon_cap <= 0 else min(1.0, v.epsilon_spent / v.epsilon_cap)
            bar = "█" * round(frac * 20) + "░" * (20 - round(frac * 20))
            name = v.name if v is view else "  " + v.name
            table.add_row(
                name, f"{v.epsilon_spent:.4f}", f"{v.epsilon_cap:g}", f"{v.remaining:.4f}", bar
            )
    out.print(table)
    out.print(
        "[dim]spent: what the population's persons who have spent the most have borne "
        "(composed over all queries, so less than the sum of the queries' ε)[/dim]"
    )
    return 0


def cmd_ledger(args: argparse.Namespace, out: Console) -> int:
    budgets = _budgets(args)
    try:
        if args.action == "verify":
            report = budgets.verify()
            out.print(
                f"{'ok' if report.ok else 'FAILED'}: {report.events} events, "
                f"{report.populations} populations"
            )
            for problem in report.problems:
                out.print(f"  - {problem}")
            return 0 if report.ok else 1
        from rich.table import Table

        table = Table("id", "time (UTC)", "kind", "populations", "ε", "analyst", "note", "parent")
        for view in budgets.events(limit=args.limit):
            e = view.event
            table.add_row(
                str(e.id),
                time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.ts)),
                e.kind,
                ",".join(e.populations),
                "" if view.epsilon is None else f"{view.epsilon:.4g}",
                e.analyst,
                e.note,
                "" if e.parent_id is None else str(e.parent_id),
            )
        out.print(table)
        return 0
    finally:
        budgets.close()


def _bound(value: int | str | None, limit: int | None) -> str:
    """A table's K or C as `dpsql schema` shows it: "auto (up to 200)", 4, or the
    proxy's default when the table names none."""
    if value == "auto":
        return f"auto (chosen from the data, up to {limit})"
    return "proxy default" if value is None else str(value)


def cmd_schema(args: argparse.Namespace, out: Console) -> int:
    engine = _engine(args, answers=False)
    try:
        tables = engine.schema(None)
    finally:
        engine.close()
    if args.format == "json":
        sys.stdout.write(json.dumps([t.to_dict() for t in tables], indent=2) + "\n")
        return 0
    from rich.table import Table

    for t in tables:
        kind = "public" if t.public else f"population {t.population}"
        if not t.public:
            kind += "; " + "; ".join(
                f"{name} {_bound(value, limit)}"
                for name, value, limit in (
                    ("max_groups", t.max_groups, t.max_groups_limit),
                    ("max_rows_per_group", t.max_rows_per_group, t.max_rows_per_group_limit),
                )
            )
        out.print(f"[bold]{t.name}[/bold] ({kind})")
        table = Table("column", "type", "bounds", "values")
        for c in t.columns:
            bounds = "" if c.lower is None else f"[{c.lower:g}, {c.upper:g}]"
            values = "" if c.values is None else ", ".join(map(str, c.values))
            name = f"{c.name} (person id)" if c.unit else c.name
            table.add_row(name, c.type, bounds, values)
        out.print(table)
    return 0


def cmd_plan(args: argparse.Namespace, out: Console) -> int:
    from accounting.planning import budget_for_accuracy

    policy = _policy(args.policy) if Path(args.policy).exists() else None
    mechanism = args.mechanism or (policy.proxy.mechanism if policy else "gaussian")
    delta = args.delta or (policy.proxy.default_delta if policy else 1e-9)
    budget = budget_for_accuracy(
        rel_error=args.rel_error,
        at_count=args.at_count,
        confidence=args.confidence,
        sensitivity=args.sensitivity,
        mechanism=mechanism,
        cells=args.cells,
        delta=delta,
    )
    out.print(
        f"to keep |error| ≤ {args.rel_error:g}·{args.at_count:g} with probability "
        f"{args.confidence:g} ({mechanism}, Δ={args.sensitivity:g}, {args.cells} cell(s)):"
    )
    out.print(
        f"  ε = {budget.epsilon:.4g} at δ = {delta:g}"
        + (f"  (ρ = {budget.rho:.4g})" if budget.rho is not None else "")
    )
    out.print(f"  noise scale {budget.scale:.4g}")
    if budget.absurd:
        out.print(f"[red]that is not a meaningful privacy guarantee:[/red] {budget.note}")
    return 0


def cmd_keys(args: argparse.Namespace, out: Console) -> int:
    key = "dpsql_" + secrets.token_urlsafe(32)
    digest = hashlib.sha256(key.encode()).hexdigest()
    sys.stdout.write(f"API key for {args.name} (shown once, store it now):\n  {key}\n\n")
    from proxy.pgwire.auth import scram_verifier

    sys.stdout.write("Add to the policy:\n")
    sys.stdout.write(f'[analysts.{args.name}]\nkey_sha256 = "{digest}"\nrole = "{args.role}"\n')
    # lets the PostgreSQL door use SCRAM-SHA-256 (the key never crosses the wire)
    sys.stdout.write(f'scram_sha256 = "{scram_verifier(key)}"\n')
    return 0


def cmd_generate(args: argparse.Namespace, out: Console) -> int:
    from sample_data.generate import generate

    target = Path(args.out)
    if target.is_dir():  # `--out .` or `--out data/`: the file goes inside, as named by default
        target = target / "usage.duckdb"
    path = generate(target, people=args.people, prompts=args.prompts, seed=args.seed, progress=True)
    out.print(f"wrote {path}")
    if args.dsn or args.parquet:
        import duckdb

        from sample_data.export import to_parquet, to_postgres

        con = duckdb.connect(str(path), read_only=True)
        try:
            if args.dsn:
                for table in to_postgres(con, args.dsn):
                    out.print(f"loaded {table} into PostgreSQL")
            if args.parquet:
                for folder in to_parquet(con, Path(args.parquet)):
                    out.print(f"wrote {folder}")
        finally:
            con.close()
    return 0


def _serve_settings(args: argparse.Namespace) -> Any:
    from proxy.server.settings import Settings

    env = dict(os.environ)
    env["DPSQL_POLICY"] = str(Path(args.policy).resolve())
    if getattr(args, "rate_limit", None):
        env["DPSQL_RATE_LIMIT"] = args.rate_limit
    try:
        return Settings.from_env(env)
    except ValueError as error:
        raise DPSQLError(
            "bad_request", f"bad server setting: {error}", "check DPSQL_* variables"
        ) from None


def _run_server(
    settings: Any, host: str, port: int, workers: int, tls: tuple[str, str] | None = None
) -> None:
    import uvicorn

    from proxy.server.logs import uvicorn_log_config

    # Workers rebuild the settings from the environment (uvicorn's import-string factory).
    os.environ.update(settings.to_env())
    uvicorn.run(
        "proxy.server.app:app_from_env",
        factory=True,
        http="proxy.server.protocol:NoDelayProtocol",
        host=host,
        port=port,
        workers=workers,
        log_config=uvicorn_log_config(settings.log_level.upper(), json_lines=settings.json_logs),
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=5,
        ssl_certfile=None if tls is None else tls[0],
        ssl_keyfile=None if tls is None else tls[1],
    )


def _pg_settings(args: argparse.Namespace, host: str, port: int) -> Any:
    from proxy.pgwire.server import PgSettings

    if (args.tls_cert is None) != (args.tls_key is None):
        raise DPSQLError("bad_request", "give --tls-cert and --tls-key together", "")
    rate = args.rate_limit or os.environ.get("DPSQL_RATE_LIMIT") or PgSettings.rate_limit
    return PgSettings(
        host=host,
        port=port,
        tls_cert=None if args.tls_cert is None else Path(args.tls_cert),
        tls_key=None if args.tls_key is None else Path(args.tls_key),
        rate_limit=rate,
    )


def cmd_serve(args: argparse.Namespace, out: Console) -> int:
    settings = _serve_settings(args)
    _policy(args.policy)  # refuse a broken policy before starting workers
    if args.workers < 1:
        raise DPSQLError("bad_request", "--workers must be >= 1", "e.g. --workers 2")
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise DPSQLError(
                "bad_request", "--tls-cert and --tls-key go together", "give both PEM files"
            )
        for path in (args.tls_cert, args.tls_key):
            if not Path(path).is_file():
                raise DPSQLError("bad_request", f"no such file: {path}", "give readable PEM files")
        tls = (str(Path(args.tls_cert).resolve()), str(Path(args.tls_key).resolve()))
    if args.pg_port is None:
        _run_server(settings, args.host, args.port, args.workers, tls)
        return 0
    import threading

    from proxy.pgwire import server as pg

    pg_settings = _pg_settings(args, args.pg_host or args.host, args.pg_port)
    ready = threading.Event()
    door = threading.Thread(
        target=pg.run,
        args=(str(Path(args.policy).resolve()), pg_settings),
        kwargs={"ready": ready, "stop_signals": ()},
        name="dpsql-pg",
        daemon=True,
    )
    door.start()
    ready.wait(timeout=120)
    try:
        _run_server(settings, args.host, args.port, args.workers, tls)
    finally:
        pg.stop_pg()
        door.join(timeout=10)
    return 0


def cmd_pg(args: argparse.Namespace, out: Console) -> int:
    """The PostgreSQL door alone."""
    import logging.config

    from proxy.pgwire import server as pg
    from proxy.server.logs import uvicorn_log_config
    from proxy.server.settings import Settings

    _policy(args.policy)
    # The served process's log lines (proxy/server/logs.py), as `dpsql serve` writes
    # them: without a handler, Python's last-resort one would print the door's
    # tracebacks, messages included.
    env = Settings.from_env({**os.environ, "DPSQL_POLICY": str(args.policy)})
    logging.config.dictConfig(uvicorn_log_config(env.log_level.upper(), json_lines=env.json_logs))
    pg.run(str(Path(args.policy).resolve()), _pg_settings(args, args.host, args.port))
    return 0


def _sample_dir() -> Path:
    """The installed sample_data package: generator, demo policy and PUMS sample."""
    import sample_data

    return Path(sample_data.__file__).resolve().parent


def demo_policy_text(sample_policy: Path, keys: dict[str, tuple[str, str]]) -> str:
    """The sample policy with absolute paths and one [analysts.NAME] per (role, key)."""
    import re

    from proxy.policy import load_policy

    base = load_policy(sample_policy)
    text = sample_policy.read_text(encoding="utf-8")
    assert base.duckdb_path is not None
    text, n_db = re.subn(
        r'(?m)^duckdb\s*=\s*".*"', f"duckdb = {json.dumps(str(base.duckdb_path))}", text
    )
    text, n_ledger = re.subn(
        r'(?m)^path\s*=\s*".*"', f"path = {json.dumps(str(base.ledger_path))}", text
    )
    if n_db != 1 or n_ledger != 1:
        raise DPSQLError(
            "policy_error",
            f"{sample_policy} must have one 'duckdb =' and one 'path =' line",
            "restore the sample policy",
        )
    for name, (role, key) in keys.items():
        digest = hashlib.sha256(key.encode()).hexdigest()
        text += f'\n[analysts.{name}]\nkey_sha256 = "{digest}"\nrole = "{role}"\n'
    return text


def demo_banner(url: str, policy_path: Path, analyst_key: str, admin_key: str) -> str:
    """What `dpsql demo` prints: the keys, the console URL and curl examples."""
    sql = "SELECT region, COUNT(*) AS n FROM users GROUP BY region"
    return f"""
dpsql demo: {policy_path}
API keys (shown once; new keys each time the demo starts):
  analyst  {analyst_key}
  admin    {admin_key}

Web console: open {url}/ in a browser and paste a key (the admin key also shows every
analyst, cap changes and external charges on the Budget tab).

Paste into another terminal:

export DPSQL_URL={url}
export DPSQL_KEY={analyst_key}
export DPSQL_ADMIN_KEY={admin_key}

# a private answer (charges ε = 0.5 of the users' budget)
curl -s $DPSQL_URL/v1/query -H "Authorization: Bearer $DPSQL_KEY" \\
  -H 'Content-Type: application/json' \\
  -d '{{"sql": "{sql}", "epsilon": 0.5}}'

# the same question again: replayed from the cache, costs 0
curl -s $DPSQL_URL/v1/query -H "Authorization: Bearer $DPSQL_KEY" \\
  -H 'Content-Type: application/json' \\
  -d '{{"sql": "{sql}", "epsilon": 0.5}}'

# the budget left
curl -s $DPSQL_URL/v1/budget -H "Authorization: Bearer $DPSQL_KEY"

# a refusal: row-level data is never released
curl -s $DPSQL_URL/v1/query -H "Authorization: Bearer $DPSQL_KEY" \\
  -H 'Content-Type: application/json' -d '{{"sql": "SELECT user_id, age FROM users"}}'

# CSV instead of JSON
curl -s "$DPSQL_URL/v1/query?format=csv" -H "Authorization: Bearer $DPSQL_KEY" \\
  -H 'Content-Type: application/json' \\
  -d '{{"sql": "SELECT model, AVG(latency_ms) AS ms FROM prompts GROUP BY model"}}'

Web console: {url}/   API docs: {url}/docs   (Ctrl-C stops the server)
"""


def cmd_demo(args: argparse.Namespace, out: Console) -> int:
    sample = _sample_dir()
    sample_policy = sample / "policy.toml"
    if not sample_policy.exists():
        raise DPSQLError(
            "policy_error", f"{sample_policy} is missing", "run `make demo` from a source checkout"
        )
    base = _policy(str(sample_policy))
    assert base.duckdb_path is not None
    if not base.duckdb_path.exists():
        from sample_data.generate import generate

        out.print(f"generating the sample data into {base.duckdb_path} ...")
        generate(base.duckdb_path, people=5000, prompts=100000, seed=7, progress=True)
    keys = {
        "demo_analyst": ("analyst", "dpsql_" + secrets.token_urlsafe(32)),
        "demo_admin": ("admin", "dpsql_" + secrets.token_urlsafe(32)),
    }
    state = base.ledger_path.parent
    state.mkdir(parents=True, exist_ok=True)
    policy_path = state / "demo-policy.toml"
    policy_path.write_text(demo_policy_text(sample_policy, keys), encoding="utf-8")
    policy_path.chmod(0o600)
    _policy(str(policy_path))
    url = f"http://127.0.0.1:{args.port}"
    analyst_key, admin_key = keys["demo_analyst"][1], keys["demo_admin"][1]
    banner = demo_banner(url, policy_path, analyst_key, admin_key)
    sys.stdout.write(banner)
    sys.stdout.flush()
    from dataclasses import replace

    settings = _serve_settings(argparse.Namespace(policy=str(policy_path), rate_limit=None))
    _run_server(replace(settings, json_logs=False), "127.0.0.1", args.port, 1)
    return 0


def _add_request_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("sql", help="one SELECT over the tables `dpsql schema` lists")
    p.add_argument(
        "--dialect", default="duckdb", help="SQL dialect: duckdb, postgres, bigquery, trino, ..."
    )
    p.add_argument("--epsilon", type=float, help="ε to spend (default: the policy's)")
    p.add_argument("--delta", type=float, help="δ of this query (default: the policy's)")
    p.add_argument("--rho", type=float, help="zCDP ρ instead of ε (gaussian mechanism only)")
    p.add_argument(
        "--rel-error", type=float, help="spend what this relative error at --at-count needs"
    )
    p.add_argument("--at-count", type=float, default=1000.0, help="the count --rel-error refers to")
    p.add_argument(
        "--confidence", type=float, default=0.95, help="probability the error target holds"
    )
    p.add_argument("--max-groups", type=int, help="tighten the policy's groups per person (L0)")
    p.add_argument(
        "--max-rows-per-group", type=int, help="tighten the policy's rows per person per group"
    )
    p.add_argument(
        "--raw-noise",
        action="store_true",
        help="show counts with their raw noise (by default a count below 0 shows as 0)",
    )


def _add_tls_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tls-cert",
        help="PEM certificate: serve HTTPS, and TLS on the PostgreSQL door (Trino clients "
        "send keys only over TLS)",
    )
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpsql", description="Differentially private SQL proxy")
    parser.add_argument("--policy", default=DEFAULT_POLICY, help="policy TOML file")
    # --policy is accepted before or after the subcommand (`dpsql ledger verify --policy F`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--policy", default=argparse.SUPPRESS, help="policy TOML file")
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser(
        "query", parents=[common], help="answer a query with DP noise (charges the budget)"
    )
    _add_request_args(q)
    q.add_argument("--format", choices=("table", "json", "csv"), default="table")
    q.set_defaults(func=cmd_query)
    e = sub.add_parser(
        "explain", parents=[common], help="show the rewritten query, noise and cost; reads no data"
    )
    _add_request_args(e)
    e.set_defaults(func=cmd_explain)
    b = sub.add_parser("budget", parents=[common], help="spent, cap and remaining ε per population")
    b.set_defaults(func=cmd_budget)
    lg = sub.add_parser("ledger", parents=[common], help="verify or list the budget ledger")
    lg.add_argument(
        "action",
        choices=("verify", "history"),
        help="verify: recompute every total from the events; history: list the events",
    )
    lg.add_argument("--limit", type=int, default=50, help="events to list")
    lg.set_defaults(func=cmd_ledger)
    sc = sub.add_parser(
        "schema", parents=[common], help="tables, columns, bounds and public domains"
    )
    sc.add_argument("--format", choices=("table", "json"), default="table")
    sc.set_defaults(func=cmd_schema)
    pl = sub.add_parser("plan", parents=[common], help="budget needed for an accuracy target")
    pl.add_argument("--rel-error", type=float, required=True)
    pl.add_argument("--at-count", type=float, required=True)
    pl.add_argument("--confidence", type=float, default=0.95)
    pl.add_argument("--sensitivity", type=float, default=1.0)
    pl.add_argument("--cells", type=int, default=1)
    pl.add_argument("--mechanism", choices=("gaussian", "laplace"))
    pl.add_argument("--delta", type=float)
    pl.set_defaults(func=cmd_plan)
    k = sub.add_parser("keys", parents=[common], help="API keys")
    k.add_argument("action", choices=("create",))
    k.add_argument("name")
    k.add_argument("--role", choices=("analyst", "admin"), default="analyst")
    k.set_defaults(func=cmd_keys)
    g = sub.add_parser("generate", parents=[common], help="generate the sample LLM-usage dataset")
    g.add_argument(
        "--out",
        default="sample_data/usage.duckdb",
        help="the DuckDB file to write (a folder: usage.duckdb inside it)",
    )
    g.add_argument("--people", type=int, default=5000)
    g.add_argument("--prompts", type=int, default=100000)
    g.add_argument("--seed", type=int, default=7)
    g.add_argument(
        "--dsn", help="also load the tables into this PostgreSQL database (postgresql://...)"
    )
    g.add_argument("--parquet", help="also write the tables as DIR/<schema>/<table>/ for Spark")
    g.set_defaults(func=cmd_generate)
    sv = sub.add_parser("serve", parents=[common], help="serve the HTTP API (uvicorn)")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--workers", type=int, default=1)
    sv.add_argument("--rate-limit", help="per-key limit, e.g. '50/second;2000/minute'")
    sv.add_argument("--pg-port", type=int, help="also serve the PostgreSQL protocol here")
    sv.add_argument("--pg-host", help="address of the PostgreSQL door (default: --host)")
    _add_tls_args(sv)
    sv.set_defaults(func=cmd_serve)
    pgp = sub.add_parser(
        "pg", parents=[common], help="serve the PostgreSQL wire protocol (psql, JDBC, BI tools)"
    )
    pgp.add_argument("--host", default="127.0.0.1")
    pgp.add_argument("--port", type=int, default=5433)
    pgp.add_argument("--rate-limit", help="per-analyst limit, e.g. '50/second;2000/minute'")
    _add_tls_args(pgp)
    pgp.set_defaults(func=cmd_pg)
    dm = sub.add_parser(
        "demo",
        parents=[common],
        help="sample data, demo keys and a local server with curl examples",
    )
    dm.add_argument("--port", type=int, default=8000)
    dm.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Called without ``argv`` (the ``dpsql`` program itself), a one-shot
    command ends its process when it is done (:func:`_exit_now`); with ``argv`` (a caller
    in the same process) it returns the exit code."""
    args = build_parser().parse_args(argv)
    one_shot = args.func in _ONE_SHOT
    if one_shot:
        # A one-shot command lives well under a second: reference counting frees what it
        # drops, and the cycle collector's passes over the freshly imported modules cost
        # about a tenth of a cold `dpsql query`. Servers keep it (see app_from_env).
        gc.disable()
        # NumPy's OpenBLAS starts a thread per core at import, each with its own buffer:
        # about 50 ms of a cold command, which does no linear algebra. Read at import,
        # so set before the first command imports NumPy; an operator's setting stands.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    code = _dispatch(args)
    if one_shot and argv is None and hasattr(threading, "_shutdown"):
        _exit_now(code)
    return code


def _dispatch(args: argparse.Namespace) -> int:
    from rich.console import Console  # after parsing: `--help` and usage errors skip it

    # No emoji codes: nothing printed here uses them, and a column name or value such as
    # ":sparkles:" is shown as written (loading rich's emoji table cost a few ms).
    out = Console(stderr=False, emoji=False)
    err = Console(stderr=True, emoji=False)
    try:
        code: int = args.func(args, out)
        return code
    except DPSQLError as error:
        err.print(f"[red]{error.code}[/red]: {error.message}")
        if error.hint:
            err.print(f"hint: {error.hint}")
        for key, value in error.details.items():
            err.print(f"  {key}: {value}")
        return 2
    except ValueError as error:  # bad arguments to planning and the like
        err.print(f"[red]bad_request[/red]: {error}")
        return 2


def _exit_now(code: int) -> NoReturn:
    """End the process of a finished one-shot command without the interpreter's teardown.

    The teardown (a last garbage collection that gc.disable does not skip, then freeing
    every module of DuckDB, pyarrow, sqlglot, NumPy and OpenDP object by object) took
    about 90 ms of a cold `dpsql query` that lasts half a second, and it writes nothing.
    What an ordinary exit does that matters still happens, in its order: threading's
    shutdown (its exit hooks, e.g. thread pools told to stop, then every non-daemon
    thread joined), the exit handlers (among them the ledger's fsync of repeats it has
    not waited for, accounting/replay_records.py, and logging's flush), and the flush of
    the output. Every charge was durable before its answer was printed, and the command
    has closed its engine or budgets, so skipping the rest loses nothing a crash would
    not."""
    # The interpreter's own first step at exit (Py_FinalizeEx), private to threading:
    # checked by the caller, which exits the ordinary way without it.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started without it (`>&-`): nothing to flush, as at exit
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            # As the interpreter does when it cannot flush (e.g. a closed pipe): 120.
            code = code or 120
    os._exit(code)


# Commands that answer and exit (not serve, pg, demo or generate).
_ONE_SHOT = frozenset(
    {cmd_query, cmd_explain, cmd_budget, cmd_ledger, cmd_schema, cmd_plan, cmd_keys}
)

if __name__ == "__main__":
    sys.exit(main())
