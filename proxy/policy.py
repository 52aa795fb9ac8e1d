"""The TOML policy -> frozen dataclasses.

The policy is trusted (it is written by the operator), but a typo in it can silently
weaken a privacy guarantee, so loading is strict: unknown keys, missing units, loose or
inverted bounds and impossible budgets are all refused with a ``PolicyError`` whose
message starts with the dotted key path at fault (``tables.prompts.columns.tokens: ...``).
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from accounting.calibrate import Mechanism
from accounting.ledger import AnalystShare, Partitioning

Value = str | int | float

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
_SCRAM = re.compile(r"^SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$")
# Column types a CSV source may declare (DuckDB's names): the owner's declaration, never
# a guess from the rows (see proxy/csv_copies.py).
CSV_TYPE = re.compile(
    r"^(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT"
    r"|FLOAT|REAL|DOUBLE|DECIMAL\(\d{1,2}, ?\d{1,2}\)|VARCHAR|TEXT|DATE|TIME|TIMESTAMP"
    r"|TIMESTAMPTZ|UUID)$",
    re.IGNORECASE,
)
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
_MAX_DELTA = 1e-3
# [analysts.NAME] defaults = { ... }: what a door may use when a request names nothing.
# Every value is only a request field: the engine still refuses what the policy forbids.
ANALYST_DEFAULTS: dict[str, type] = {
    "epsilon": float,
    "delta": float,
    "rho": float,
    "accuracy": float,
    "accuracy_at_count": float,
    "accuracy_confidence": float,
    "max_groups": int,
    "max_rows_per_group": int,
    "intervals": bool,
}


class PolicyError(ValueError):
    """The policy file is inconsistent; the message names the offending key path."""


@dataclass(frozen=True)
class ColumnPolicy:
    name: str
    lower: float | None = None
    upper: float | None = None
    values: tuple[Value, ...] | None = None  # public key domain
    # upper = "auto": chosen per query from a DP histogram of the values (paid once; see
    # accounting/value_bounds.py) up to this limit; upper is then None.
    upper_limit: float | None = None
    # lower = "auto": the mirror image, chosen down to this limit; lower is then None.
    lower_limit: float | None = None


@dataclass(frozen=True)
class TablePolicy:
    name: str  # lower-case, possibly schema-qualified ("pums.pums")
    public: bool
    population: str | None
    unit: str | None
    max_groups: int | None
    max_rows_per_group: int | None
    columns: tuple[ColumnPolicy, ...]
    grants: tuple[str, ...] | None  # None: every analyst
    one_row_per_person: bool = False
    # max_rows_per_group = "auto": chosen from the data (a DP histogram of rows per
    # person, paid once) up to this limit; max_rows_per_group is then None.
    auto_rows_limit: int | None = None
    # max_groups = "auto": chosen per GROUP BY key from the data (a DP histogram of
    # groups per person, paid once per key; proxy/auto_groups.py) up to this limit;
    # max_groups is then None.
    auto_groups_limit: int | None = None

    def column(self, name: str) -> ColumnPolicy | None:
        wanted = name.lower()
        return next((c for c in self.columns if c.name == wanted), None)


@dataclass(frozen=True)
class PopulationPolicy:
    name: str
    epsilon_cap: float
    delta: float
    partition: str | None  # "table.column", each person has exactly one value
    # The most δ one query may spend: δ adds up over queries and partition selection,
    # so without a ceiling one request could use up the population's δ for everyone.
    max_query_delta: float = 0.0


@dataclass(frozen=True)
class AnalystPolicy:
    name: str
    key_sha256: str  # lower-case hex
    role: str  # "analyst" | "admin"
    tables: tuple[str, ...] | None  # None: every table
    # population -> the share (0, 1] of its ε cap and δ this analyst alone may spend
    shares: tuple[tuple[str, float], ...] = ()
    # Request defaults for this analyst's sessions (e.g. the Trino door's session
    # properties): (name, value) pairs from ANALYST_DEFAULTS, sorted by name.
    defaults: tuple[tuple[str, float | int | bool], ...] = ()
    # PostgreSQL's SCRAM verifier of the API key ("SCRAM-SHA-256$<iter>:<salt>$<stored>:
    # <server>"), from `dpsql keys create`: lets the PG door offer SCRAM-SHA-256.
    scram_sha256: str | None = None

    def default(self, name: str) -> float | int | bool | None:
        """The analyst's default for request field ``name`` (see ANALYST_DEFAULTS)."""
        return next((v for k, v in self.defaults if k == name), None)


@dataclass(frozen=True)
class ProxySettings:
    default_epsilon: float = 0.5
    default_delta: float = 1e-9
    mechanism: str = "gaussian"
    max_groups: int = 1  # default L0 when a table names none
    max_rows_per_group: int = 1  # default Linf when a table names none
    max_sql_length: int = 20000
    max_nodes: int = 2000
    query_timeout_s: float = 30.0
    threads: int = 2
    memory_limit: str = "2GB"
    max_partition_groups: int = 10000
    # Share of each query's budget spent on the clipping estimate (how many people
    # bounding cut per group, and how many people there are); 0 turns it off.
    clipping_share: float = 0.05
    # ε paid once per table whose max_rows_per_group is "auto", for the histogram of
    # rows per person its cap is chosen from.
    auto_bounds_epsilon: float = 0.1


class EngineKind(StrEnum):
    """Where the bounded core runs (``[database] engine``); see proxy/engines/."""

    DUCKDB = "duckdb"
    POSTGRES = "postgres"
    SPARK = "spark"


@dataclass(frozen=True)
class DatabaseSettings:
    """``[database]`` beyond the DuckDB file: which engine runs the core, and how to
    reach it. Credentials stay out of the policy: libpq reads PGPASSWORD or a
    password file, Spark Connect its own token settings."""

    engine: EngineKind = EngineKind.DUCKDB
    dsn: str | None = None  # postgres: a libpq URL or key=value string
    master: str | None = None  # spark: a classic master URL, e.g. "local[2]"
    remote: str | None = None  # spark: a Spark Connect URL, e.g. "sc://host:15002"
    parquet: Path | None = None  # spark: DIR/<schema>/<table>/ registered as views
    # spark, classic master: the heap of the JVM dpsql starts, e.g. "6g" (None: dpsql
    # sizes it, proxy/engines/spark.py driver_memory)
    driver_memory: str | None = None
    # spark, classic master: partitions of a shuffle (None: dpsql sizes them from the
    # Parquet folders, proxy/engines/spark.py shuffle_partitions)
    shuffle_partitions: int | None = None

    @property
    def location(self) -> str:
        """Where the data is, without credentials (part of the data version)."""
        if self.engine is EngineKind.POSTGRES:
            return f"postgres:{_without_password(self.dsn or '')}"
        if self.engine is EngineKind.SPARK:
            return f"spark:{self.remote or self.master}:{self.parquet or ''}"
        return "duckdb"


def _without_password(dsn: str) -> str:
    if "://" not in dsn:
        return re.sub(r"password\s*=\s*\S+", "password=***", dsn)
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}@{host}" if parts.username else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class Policy:
    path: Path | None
    proxy: ProxySettings
    duckdb_path: Path | None
    ledger_path: Path
    tables: tuple[TablePolicy, ...]
    populations: tuple[PopulationPolicy, ...]
    analysts: tuple[AnalystPolicy, ...]
    # The data's identity (the operator's label, then a hash of the files' paths, sizes
    # and times): never released as it is. An Engine's copy holds the keyed version it
    # releases instead (proxy/data_version.py).
    data_version: str
    # (schema-qualified lower-case table name, CSV file) the engine loads at start-up
    csv_tables: tuple[tuple[str, Path], ...] = field(default=())
    # Per CSV table, its declared (column, DuckDB type) pairs: `[database.csv_types]`
    csv_types: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = field(default=())
    # `[ledger] url`: one PostgreSQL database holding the ledger, release cache,
    # idempotency records and pages of every proxy host (None: SQLite files beside
    # ledger_path)
    ledger_url: str | None = None
    database: DatabaseSettings = field(default=DatabaseSettings())

    def table(self, name: str) -> TablePolicy | None:
        wanted = name.lower()
        found = next((t for t in self.tables if t.name == wanted), None)
        if found is None and wanted.startswith("main."):
            # DuckDB's default schema: "main.users" is the table "users"
            return self.table(wanted[len("main.") :])
        return found

    def population(self, name: str) -> PopulationPolicy:
        for pop in self.populations:
            if pop.name == name:
                return pop
        raise KeyError(f"population {name!r} is not declared")

    def partitioning(self, population: str) -> Partitioning | None:
        """The ledger partitions of a population: its partition column and that column's
        declared values (the only partitions the ledger will accept)."""
        pop = self.population(population)
        if pop.partition is None:
            return None
        table_name, _, column_name = pop.partition.rpartition(".")
        table = next(t for t in self.tables if t.name == table_name)
        column = table.column(column_name)
        assert column is not None and column.values is not None  # checked at parse time
        return Partitioning(column_name, frozenset(str(v) for v in column.values))

    def shares(self, population: str) -> tuple[AnalystShare, ...]:
        """The analysts limited to a share of ``population``, for the ledger."""
        return tuple(
            AnalystShare(a.name, share)
            for a in self.analysts
            for pop, share in a.shares
            if pop == population
        )

    def tables_of(self, population: str) -> tuple[TablePolicy, ...]:
        return tuple(t for t in self.tables if t.population == population)

    def analyst(self, name: str) -> AnalystPolicy | None:
        return next((a for a in self.analysts if a.name == name), None)


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; relative paths in it are relative to its folder."""
    p = Path(path).resolve()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {p}: {exc.strerror}") from exc
    return replace(parse_policy(text, base_dir=p.parent), path=p)


def parse_policy(text: str, *, base_dir: Path) -> Policy:
    """Validate policy TOML text; relative paths resolve against ``base_dir``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"not valid TOML: {exc}") from exc
    _only(doc, "", {"proxy", "database", "ledger", "populations", "tables", "analysts"})
    proxy = _proxy(_sub(doc, "", "proxy"))
    populations = tuple(
        _population(name, _as_table(body, _key("populations", name)))
        for name, body in _sub(doc, "", "populations").items()
    )
    pop_names = {p.name for p in populations}
    tables = _tables(_sub(doc, "", "tables"), pop_names)
    for pop in populations:
        _check_partition(pop, tables)
        if proxy.default_delta > pop.max_query_delta:
            raise PolicyError(
                f"proxy.default_delta: {proxy.default_delta:g} is above "
                f"{_key('populations', pop.name)}.max_query_delta ({pop.max_query_delta:g})"
            )
    analysts = tuple(
        _analyst(name, _as_table(body, _key("analysts", name)), tables)
        for name, body in _sub(doc, "", "analysts").items()
    )
    duckdb_path, csv_tables, csv_types, version, database = _database(
        _sub(doc, "", "database"), base_dir, tables
    )
    ledger = _sub(doc, "", "ledger")
    _only(ledger, "ledger", {"path", "url"})
    ledger_path = _resolve(base_dir, _str(ledger, "ledger", "path", "state/ledger.sqlite"))
    ledger_url = _ledger_url(ledger)
    # The files' identity is always part of the version: an operator's version string
    # that is not changed with the data would otherwise replay stale releases as current.
    files = [duckdb_path] if duckdb_path is not None else [p for _, p in csv_tables]
    if database.parquet is not None:
        files = sorted(database.parquet.rglob("*.parquet"))
    derived = _derived_version(files, database.location)
    version = derived if version is None else f"{version}+{derived}"
    return Policy(
        path=None,
        proxy=proxy,
        duckdb_path=duckdb_path,
        ledger_path=ledger_path,
        tables=tables,
        populations=populations,
        analysts=analysts,
        data_version=version,
        csv_tables=csv_tables,
        csv_types=csv_types,
        ledger_url=ledger_url,
        database=database,
    )


# --- sections -------------------------------------------------------------------------


def _ledger_url(body: Mapping[str, Any]) -> str | None:
    url = _opt_str(body, "ledger", "url")
    if url is None:
        return None
    if "path" in body:
        raise PolicyError("ledger: set path (SQLite files) or url (PostgreSQL), not both")
    scheme = url.partition("://")[0]
    if scheme not in ("postgresql", "postgres") or not url.partition("://")[2]:
        # The URL is not echoed: it may hold a password.
        raise PolicyError(f"ledger.url: must be a postgresql:// URL, got scheme {scheme!r}")
    return url


def _proxy(body: Mapping[str, Any]) -> ProxySettings:
    d = ProxySettings()
    _only(body, "proxy", set(ProxySettings.__dataclass_fields__))
    mechanism = _str(body, "proxy", "mechanism", d.mechanism)
    if mechanism not in {m.value for m in Mechanism}:
        raise PolicyError(f"proxy.mechanism: {mechanism!r} is not gaussian or laplace")
    memory = _str(body, "proxy", "memory_limit", d.memory_limit)
    if not _MEMORY.match(memory):
        raise PolicyError(f"proxy.memory_limit: {memory!r} is not a size like '2GB'")
    return ProxySettings(
        default_epsilon=_positive(body, "proxy", "default_epsilon", d.default_epsilon),
        default_delta=_delta(body, "proxy", "default_delta", d.default_delta),
        mechanism=mechanism,
        max_groups=_count(body, "proxy", "max_groups", d.max_groups),
        max_rows_per_group=_count(body, "proxy", "max_rows_per_group", d.max_rows_per_group),
        max_sql_length=_count(body, "proxy", "max_sql_length", d.max_sql_length),
        max_nodes=_count(body, "proxy", "max_nodes", d.max_nodes),
        query_timeout_s=_positive(body, "proxy", "query_timeout_s", d.query_timeout_s),
        threads=_count(body, "proxy", "threads", d.threads),
        memory_limit=memory,
        max_partition_groups=_count(body, "proxy", "max_partition_groups", d.max_partition_groups),
        clipping_share=_share(body, "proxy", "clipping_share", d.clipping_share),
        auto_bounds_epsilon=_positive(body, "proxy", "auto_bounds_epsilon", d.auto_bounds_epsilon),
    )


def _share(body: Mapping[str, Any], where: str, key: str, default: float) -> float:
    v = _number(body, where, key)
    v = default if v is None else v
    if not 0 <= v <= 0.5:
        raise PolicyError(f"{where}.{key}: {v!r} must lie in [0, 0.5]")
    return v


DEFAULT_QUERY_DELTA_SHARE = 0.01  # max_query_delta, as a share of the population's δ


def _population(name: str, body: Mapping[str, Any]) -> PopulationPolicy:
    where = _key("populations", name)
    if not _IDENT.match(name):
        # "/" and "=" are reserved for partition names such as users/region=north
        raise PolicyError(f"{where}: population name must be an identifier")
    _only(body, where, {"epsilon_cap", "delta", "partition", "max_query_delta"})
    if "epsilon_cap" not in body:
        raise PolicyError(f"{where}.epsilon_cap: required")
    if "delta" not in body:
        raise PolicyError(f"{where}.delta: required")
    partition = body.get("partition")
    if partition is not None and not isinstance(partition, str):
        raise PolicyError(f"{where}.partition: must be a string 'table.column'")
    delta = _delta(body, where, "delta", 0.0)
    max_query_delta = _delta(body, where, "max_query_delta", delta * DEFAULT_QUERY_DELTA_SHARE)
    if max_query_delta >= delta:
        raise PolicyError(f"{where}.max_query_delta: must be below delta ({delta:g})")
    return PopulationPolicy(
        name=name,
        epsilon_cap=_positive(body, where, "epsilon_cap", 0.0),
        delta=delta,
        partition=partition.lower() if partition is not None else None,
        max_query_delta=max_query_delta,
    )


def _tables(body: Mapping[str, Any], populations: set[str]) -> tuple[TablePolicy, ...]:
    out: list[TablePolicy] = []
    seen: set[str] = set()
    for raw_name, spec in body.items():
        where = _key("tables", raw_name)
        name = raw_name.lower()
        parts = name.split(".")
        if not 1 <= len(parts) <= 3 or not all(_IDENT.match(p) for p in parts):
            raise PolicyError(f"{where}: table name must be [catalog.][schema.]table")
        if name in seen:
            raise PolicyError(f"{where}: declared twice (names are case-insensitive)")
        seen.add(name)
        out.append(_table_policy(name, _as_table(spec, where), where, populations))
    return tuple(out)


def _table_policy(
    name: str, body: Mapping[str, Any], where: str, populations: set[str]
) -> TablePolicy:
    _only(
        body,
        where,
        {
            "public",
            "population",
            "unit",
            "max_groups",
            "max_rows_per_group",
            "columns",
            "grants",
            "one_row_per_person",
            "max_rows_per_group_limit",
            "max_groups_limit",
        },
    )
    public = _bool(body, where, "public", False)
    one_row = _bool(body, where, "one_row_per_person", False)
    private_only = (
        "population",
        "unit",
        "max_groups",
        "max_rows_per_group",
        "max_rows_per_group_limit",
        "max_groups_limit",
    )
    if public:
        for key in private_only:
            if key in body:
                raise PolicyError(f"{where}.{key}: a public table holds no person data")
        if one_row:
            raise PolicyError(f"{where}.one_row_per_person: a public table has no persons")
    else:
        for key in ("unit", "population"):
            if key not in body:
                raise PolicyError(f"{where}.{key}: required for a private table")
    population = _opt_str(body, where, "population")
    if population is not None and population not in populations:
        raise PolicyError(f"{where}.population: {population!r} is not declared in [populations]")
    unit = _opt_str(body, where, "unit")
    if unit is not None:
        if not _IDENT.match(unit):
            raise PolicyError(f"{where}.unit: {unit!r} is not a column name")
        unit = unit.lower()
    columns = _columns(_sub(body, where, "columns"), f"{where}.columns")
    for col in columns:
        for side, limit in (("upper", col.upper_limit), ("lower", col.lower_limit)):
            if public and limit is not None:
                raise PolicyError(
                    f'{where}.columns.{col.name}.{side}: "auto" is for private tables (a '
                    "public table's bounds are not needed)"
                )
        if col.name == unit and col.values is not None:
            # a public domain for the unit would let GROUP BY person pass as public keys
            raise PolicyError(f"{where}.columns.{col.name}: the unit column cannot have values")
    grants = body.get("grants")
    if grants is not None:
        grants = _names(grants, f"{where}.grants")
    auto_limit = None
    rows_per_group = body.get("max_rows_per_group")
    if rows_per_group == "auto":
        auto_limit = _opt_count(body, where, "max_rows_per_group_limit")
        if auto_limit is None:
            raise PolicyError(
                f"{where}.max_rows_per_group_limit: required with max_rows_per_group = "
                '"auto" (the largest value the data may choose)'
            )
        body = {k: v for k, v in body.items() if k != "max_rows_per_group"}
    elif "max_rows_per_group_limit" in body:
        raise PolicyError(
            f'{where}.max_rows_per_group_limit: only with max_rows_per_group = "auto"'
        )
    groups_limit = None
    if body.get("max_groups") == "auto":
        groups_limit = _opt_count(body, where, "max_groups_limit")
        if groups_limit is None:
            raise PolicyError(
                f'{where}.max_groups_limit: required with max_groups = "auto" (the most '
                "groups per person the data may choose)"
            )
        body = {k: v for k, v in body.items() if k != "max_groups"}
    elif "max_groups_limit" in body:
        raise PolicyError(f'{where}.max_groups_limit: only with max_groups = "auto"')
    elif isinstance(body.get("max_groups"), str):
        raise PolicyError(
            f'{where}.max_groups: must be an integer or "auto" (with max_groups_limit = N)'
        )
    return TablePolicy(
        name=name,
        public=public,
        population=population,
        unit=unit,
        max_groups=_opt_count(body, where, "max_groups"),
        max_rows_per_group=_opt_count(body, where, "max_rows_per_group"),
        columns=columns,
        grants=grants,
        one_row_per_person=one_row,
        auto_rows_limit=auto_limit,
        auto_groups_limit=groups_limit,
    )


def _columns(body: Mapping[str, Any], where: str) -> tuple[ColumnPolicy, ...]:
    out: list[ColumnPolicy] = []
    seen: set[str] = set()
    for raw_name, spec in body.items():
        here = _key(where, raw_name)
        if not _IDENT.match(raw_name):
            raise PolicyError(f"{here}: not a column name")
        name = raw_name.lower()
        if name in seen:
            raise PolicyError(f"{here}: declared twice (names are case-insensitive)")
        seen.add(name)
        spec = _as_table(spec, here)
        _only(spec, here, {"lower", "upper", "values", "upper_limit", "lower_limit"})
        limits: dict[str, float | None] = {"upper": None, "lower": None}
        for side, other, extreme in (("upper", "lower", "largest"), ("lower", "upper", "smallest")):
            if isinstance(spec.get(side), str) and spec[side] != "auto":
                raise PolicyError(
                    f'{here}.{side}: must be a number or "auto" (chosen from the data up to '
                    f"a {side}_limit)"
                )
            if spec.get(side) == "auto":
                limits[side] = _number(spec, here, f"{side}_limit")
                if limits[side] is None:
                    raise PolicyError(
                        f'{here}.{side}_limit: required with {side} = "auto" (the {extreme} '
                        "bound the data may choose)"
                    )
                if other not in spec:
                    raise PolicyError(
                        f'{here}.{other}: required with {side} = "auto" (a number, or "auto" '
                        f"with a {other}_limit)"
                    )
                if "values" in spec:
                    raise PolicyError(f'{here}.values: not with {side} = "auto"')
            elif f"{side}_limit" in spec:
                raise PolicyError(f'{here}.{side}_limit: only with {side} = "auto"')
        upper_limit, lower_limit = limits["upper"], limits["lower"]
        spec = {
            k: v
            for k, v in spec.items()
            if not (k in ("upper", "lower") and v == "auto") and not k.endswith("_limit")
        }
        if upper_limit is None and lower_limit is None and ("lower" in spec) != ("upper" in spec):
            raise PolicyError(f"{here}: declare both lower and upper, or neither")
        lower = _number(spec, here, "lower")
        upper = _number(spec, here, "upper")
        if lower is not None and upper is not None and lower > upper:
            raise PolicyError(f"{here}: lower {_fmt(lower)} > upper {_fmt(upper)}")
        # The widest bounds the data may choose: each side's number or its limit.
        low = lower if lower_limit is None else lower_limit
        high = upper if upper_limit is None else upper_limit
        if (upper_limit is not None or lower_limit is not None) and not (
            low is not None and high is not None and high > low
        ):
            shown = "upper_limit" if upper_limit is not None else "upper"
            below = "lower_limit" if lower_limit is not None else "lower"
            raise PolicyError(
                f"{here}: {shown} {_fmt(high or 0.0)} must be above {below} {_fmt(low or 0.0)}"
            )
        values = _domain(spec["values"], f"{here}.values") if "values" in spec else None
        if values is not None and lower is not None and upper is not None:
            for v in values:
                if isinstance(v, str) or not lower <= v <= upper:
                    raise PolicyError(f"{here}.values: {v!r} lies outside [lower, upper]")
        out.append(
            ColumnPolicy(
                name=name,
                lower=lower,
                upper=upper,
                values=values,
                upper_limit=upper_limit,
                lower_limit=lower_limit,
            )
        )
    return tuple(out)


def _domain(raw: Any, where: str) -> tuple[Value, ...]:
    if not isinstance(raw, list) or not raw:
        raise PolicyError(f"{where}: must be a non-empty list")
    kinds = set()
    for v in raw:
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int | float):
            if not math.isfinite(v):
                raise PolicyError(f"{where}: {v!r} is not finite")
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("string")
        else:
            raise PolicyError(f"{where}: {v!r} is not a string, number or boolean")
    if len(kinds) > 1:
        raise PolicyError(f"{where}: mixes {' and '.join(sorted(kinds))} values")
    if len(set(raw)) != len(raw):
        raise PolicyError(f"{where}: lists a value twice")
    return tuple(raw)


def _check_partition(pop: PopulationPolicy, tables: tuple[TablePolicy, ...]) -> None:
    if pop.partition is None:
        return
    where = f"{_key('populations', pop.name)}.partition"
    table_name, _, column_name = pop.partition.rpartition(".")
    table = next((t for t in tables if t.name == table_name), None)
    if not table_name or table is None:
        raise PolicyError(f"{where}: {pop.partition!r} does not name a declared table.column")
    if table.population != pop.name:
        raise PolicyError(f"{where}: table {table.name!r} is not of population {pop.name!r}")
    if not table.one_row_per_person:
        raise PolicyError(
            f"{where}: table {table.name!r} must declare one_row_per_person = true "
            "so that each person has exactly one value"
        )
    column = table.column(column_name)
    if column is None or column.values is None:
        raise PolicyError(f"{where}: column {column_name!r} needs a declared values domain")


def _analyst(name: str, body: Mapping[str, Any], tables: tuple[TablePolicy, ...]) -> AnalystPolicy:
    where = _key("analysts", name)
    _only(body, where, {"key_sha256", "role", "tables", "shares", "defaults", "scram_sha256"})
    key = _opt_str(body, where, "key_sha256")
    if key is None or not _SHA256_HEX.match(key):
        raise PolicyError(f"{where}.key_sha256: must be 64 hexadecimal characters")
    role = _str(body, where, "role", "analyst")
    if role not in ("analyst", "admin"):
        raise PolicyError(f"{where}.role: {role!r} is not analyst or admin")
    allowed = body.get("tables")
    if allowed is not None:
        allowed = tuple(t.lower() for t in _names(allowed, f"{where}.tables"))
        declared = {t.name for t in tables}
        for t in allowed:
            if t not in declared:
                raise PolicyError(f"{where}.tables: {t!r} is not declared in [tables]")
    shares = _sub(body, where, "shares")
    populations = {t.population for t in tables if t.population}
    for pop, share in shares.items():
        if pop not in populations:
            raise PolicyError(f"{where}.shares: {pop!r} is not a declared population")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise PolicyError(f"{where}.shares.{pop}: must be a number in (0, 1]")
    scram = _opt_str(body, where, "scram_sha256")
    if scram is not None and not _SCRAM.match(scram):
        raise PolicyError(
            f"{where}.scram_sha256: must be 'SCRAM-SHA-256$<iterations>:<salt>$<stored>:<server>'"
        )
    return AnalystPolicy(
        name=name,
        key_sha256=key.lower(),
        role=role,
        tables=allowed,
        shares=tuple(sorted((p, float(v)) for p, v in shares.items())),
        defaults=_analyst_defaults(_sub(body, where, "defaults"), f"{where}.defaults"),
        scram_sha256=scram,
    )


def _analyst_defaults(body: Mapping[str, Any], where: str) -> tuple[tuple[str, Any], ...]:
    _only(body, where, set(ANALYST_DEFAULTS))
    out: list[tuple[str, Any]] = []
    for key in sorted(body):
        kind = ANALYST_DEFAULTS[key]
        if kind is bool:
            out.append((key, _bool(body, where, key, False)))
        elif kind is int:
            out.append((key, _count(body, where, key, 1)))
        elif key == "delta":
            out.append((key, _delta(body, where, key, 0.0)))
        else:
            out.append((key, _positive(body, where, key, 1.0)))
    budgets = [k for k, _ in out if k in ("epsilon", "rho", "accuracy")]
    if len(budgets) > 1:
        raise PolicyError(f"{where}: give at most one of epsilon, rho and accuracy")
    return tuple(out)


def _database(
    body: Mapping[str, Any], base_dir: Path, tables: tuple[TablePolicy, ...]
) -> tuple[
    Path | None,
    tuple[tuple[str, Path], ...],
    tuple[tuple[str, tuple[tuple[str, str], ...]], ...],
    str | None,
    DatabaseSettings,
]:
    _only(body, "database", {"csv_types", "version", "engine"}.union(*_ENGINE_KEYS.values()))
    if "duckdb" in body and "csv" in body:
        raise PolicyError("database: give either duckdb or csv, not both")
    settings = _engine_settings(body, base_dir)
    duckdb = _opt_str(body, "database", "duckdb")
    csv: list[tuple[str, Path]] = []
    declared = {t.name for t in tables}
    for target, file in _sub(body, "database", "csv").items():
        where = _key("database.csv", target)
        if not isinstance(file, str):
            raise PolicyError(f"{where}: must be a file path string")
        if target.lower() not in declared:
            raise PolicyError(f"{where}: table is not declared in [tables]")
        csv.append((target.lower(), _resolve(base_dir, file)))
    types = _csv_types(_sub(body, "database", "csv_types"), csv)
    version = _opt_str(body, "database", "version")
    return (_resolve(base_dir, duckdb) if duckdb else None), tuple(csv), types, version, settings


def _csv_types(
    body: Mapping[str, Any], csv: list[tuple[str, Path]]
) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """Every CSV table's declared column types. Inferring them from the rows would let
    one person's value choose a column's type (a number column in which only one person
    wrote text becomes text), which every analyst sees in the schema and in the plans."""
    given = {name.lower(): (name, value) for name, value in body.items()}
    out = []
    for target, file in csv:
        where = _key("database.csv_types", target)
        if target not in given:
            raise PolicyError(
                f"{where}: a CSV table needs its column types declared (read off the rows, "
                "one person's value could choose a column's type); add "
                f"[{where}] with a type for every column of {file.name}"
                + _suggested_types(file)
            )
        name, columns = given.pop(target)
        columns = _as_table(columns, _key("database.csv_types", name))
        pairs = []
        for column, kind in columns.items():
            if not isinstance(kind, str) or not CSV_TYPE.match(kind.strip()):
                raise PolicyError(
                    f"{where}.{column}: {kind!r} is not a column type; use one of BOOLEAN, "
                    "INTEGER, BIGINT, DOUBLE, DECIMAL(p, s), VARCHAR, DATE, TIMESTAMP, ..."
                )
            pairs.append((column.lower(), kind.strip().upper()))
        if not pairs:
            raise PolicyError(f"{where}: declares no column")
        out.append((target, tuple(pairs)))
    for name, _ in given.values():
        raise PolicyError(
            f"{_key('database.csv_types', name)}: not a table of [database] csv"
        )
    return tuple(out)


def _suggested_types(file: Path) -> str:
    """A starting point for the operator (who may read the file): DuckDB's guess of each
    column's type, to check against what the column means."""
    try:
        import duckdb

        rows = duckdb.connect().execute(
            "DESCRIBE SELECT * FROM read_csv_auto(?, header = true)", [str(file)]
        ).fetchall()
    except Exception:  # the file is read again, with a clear error, when the engine starts
        return ""
    lines = "".join(f"\n  {name} = \"{kind}\"" for name, kind, *_ in rows)
    return f"; DuckDB guesses, to check:{lines}"


# Which keys belong to which engine: a key of another engine is a typo or a leftover,
# and silently ignoring it could point dpsql at data the operator did not mean.
_ENGINE_KEYS = {
    EngineKind.DUCKDB: {"duckdb", "csv"},
    EngineKind.POSTGRES: {"dsn"},
    EngineKind.SPARK: {"master", "remote", "parquet", "driver_memory", "shuffle_partitions"},
}
# Spark settings of the JVM dpsql starts, and what a Spark Connect server sets instead.
_CLASSIC_ONLY = {"driver_memory": "memory", "shuffle_partitions": "spark.sql.shuffle.partitions"}
# More shuffle partitions than this is a typo: each costs every map task a file.
_MAX_SHUFFLE_PARTITIONS = 100_000
# A JVM memory size as Spark reads spark.driver.memory: a whole number of k, m, g or t.
_JVM_MEMORY = re.compile(r"[1-9][0-9]{0,6}[kmgt]")


def _engine_settings(body: Mapping[str, Any], base_dir: Path) -> DatabaseSettings:
    name = _str(body, "database", "engine", EngineKind.DUCKDB.value)
    try:
        engine = EngineKind(name)
    except ValueError:
        choices = ", ".join(repr(k.value) for k in EngineKind)
        raise PolicyError(f"database.engine: {name!r} is not one of {choices}") from None
    for other, keys in _ENGINE_KEYS.items():
        for key in sorted(keys & set(body)) if other is not engine else ():
            raise PolicyError(f"database.{key}: only for engine = {other.value!r}")
    if engine is EngineKind.POSTGRES:
        dsn = _opt_str(body, "database", "dsn")
        if not dsn:
            raise PolicyError('database.dsn: required for engine = "postgres"')
        if "://" in dsn and not dsn.startswith(("postgresql://", "postgres://")):
            raise PolicyError("database.dsn: must be a postgresql:// URL or key=value pairs")
        if "://" in dsn and urlsplit(dsn).password:
            raise PolicyError(
                "database.dsn: must not hold a password (use PGPASSWORD or a password file)"
            )
        return DatabaseSettings(engine=engine, dsn=dsn)
    if engine is EngineKind.SPARK:
        master = _opt_str(body, "database", "master")
        remote = _opt_str(body, "database", "remote")
        if (master is None) == (remote is None):
            raise PolicyError('database: engine = "spark" needs one of master or remote')
        if remote is not None and not remote.startswith("sc://"):
            raise PolicyError("database.remote: must be a Spark Connect URL (sc://host:port)")
        parquet = _opt_str(body, "database", "parquet")
        for key in sorted(_CLASSIC_ONLY.keys() & set(body)) if remote is not None else ():
            raise PolicyError(
                f"database.{key}: only for a classic master (a Spark Connect server's "
                f"{_CLASSIC_ONLY[key]} is set where it runs)"
            )
        memory = _opt_str(body, "database", "driver_memory")
        if memory is not None:
            memory = memory.strip().lower()
            if not _JVM_MEMORY.fullmatch(memory):
                raise PolicyError(
                    'database.driver_memory: a JVM memory size such as "4g" or "512m"'
                )
        partitions = _opt_count(body, "database", "shuffle_partitions")
        if partitions is not None and partitions > _MAX_SHUFFLE_PARTITIONS:
            raise PolicyError(
                f"database.shuffle_partitions: {partitions} is more than "
                f"{_MAX_SHUFFLE_PARTITIONS:,}"
            )
        return DatabaseSettings(
            engine=engine,
            master=master,
            remote=remote,
            parquet=_resolve(base_dir, parquet) if parquet else None,
            driver_memory=memory,
            shuffle_partitions=partitions,
        )
    return DatabaseSettings()


def _derived_version(files: Iterable[Path], location: str = "duckdb") -> str:
    digest = hashlib.sha256()
    if location != "duckdb":
        # The engine and where it is: a cache must not replay releases of other data.
        digest.update(f"{location}\n".encode())
    for f in files:
        try:
            st = f.stat()
            digest.update(f"{f}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(f"{f}|missing\n".encode())
    return digest.hexdigest()[:16]


# --- typed field readers ---------------------------------------------------------------


def _key(prefix: str, name: str) -> str:
    part = name if _BARE_KEY.match(name) else '"' + name.replace('"', '\\"') + '"'
    return f"{prefix}.{part}" if prefix else part


def _fmt(x: float) -> str:
    return str(int(x)) if x.is_integer() else repr(x)


def _only(body: Mapping[str, Any], where: str, allowed: set[str]) -> None:
    for k in body:
        if k not in allowed:
            raise PolicyError(f"{_key(where, k)}: unknown key")


def _as_table(body: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise PolicyError(f"{where}: must be a table")
    return body


def _sub(parent: Mapping[str, Any], where: str, key: str) -> Mapping[str, Any]:
    return _as_table(parent.get(key, {}), _key(where, key))


def _resolve(base_dir: Path, file: str) -> Path:
    p = Path(file)
    return p if p.is_absolute() else (base_dir / p).resolve()


def _str(body: Mapping[str, Any], where: str, key: str, default: str) -> str:
    v = body.get(key, default)
    if not isinstance(v, str):
        raise PolicyError(f"{where}.{key}: must be a string")
    return v


def _opt_str(body: Mapping[str, Any], where: str, key: str) -> str | None:
    v = body.get(key)
    if v is not None and not isinstance(v, str):
        raise PolicyError(f"{where}.{key}: must be a string")
    return v


def _bool(body: Mapping[str, Any], where: str, key: str, default: bool) -> bool:
    v = body.get(key, default)
    if not isinstance(v, bool):
        raise PolicyError(f"{where}.{key}: must be true or false")
    return v


def _number(body: Mapping[str, Any], where: str, key: str) -> float | None:
    if key not in body:
        return None
    v = body[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise PolicyError(f"{where}.{key}: must be a number")
    if not math.isfinite(v):
        raise PolicyError(f"{where}.{key}: {v} is not finite")
    return float(v)


def _positive(body: Mapping[str, Any], where: str, key: str, default: float) -> float:
    v = _number(body, where, key)
    v = default if v is None else v
    if v <= 0:
        raise PolicyError(f"{where}.{key}: must be > 0")
    return v


def _delta(body: Mapping[str, Any], where: str, key: str, default: float) -> float:
    v = _number(body, where, key)
    v = default if v is None else v
    if not 0 < v < _MAX_DELTA:
        raise PolicyError(f"{where}.{key}: {v!r} must be > 0 and < {_MAX_DELTA}")
    return v


def _count(body: Mapping[str, Any], where: str, key: str, default: int) -> int:
    v = _opt_count(body, where, key)
    return default if v is None else v


def _opt_count(body: Mapping[str, Any], where: str, key: str) -> int | None:
    if key not in body:
        return None
    v = body[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise PolicyError(f"{where}.{key}: must be an integer")
    if v < 1:
        raise PolicyError(f"{where}.{key}: {v} must be >= 1")
    return v


def _names(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise PolicyError(f"{where}: must be a list of names")
    return tuple(raw)
