from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from proxy.engines.spark import driver_memory
from proxy.policy import (
    AnalystPolicy,
    ColumnPolicy,
    DatabaseSettings,
    EngineKind,
    PolicyError,
    ProxySettings,
    load_policy,
    parse_policy,
)

REPO = Path(__file__).resolve().parents[2]
KEY = "ab" * 32

BASE = f"""
[proxy]
default_epsilon = 0.5
mechanism = "gaussian"

[database]
duckdb = "data/usage.duckdb"

[ledger]
path = "state/ledger.sqlite"

[populations.users]
epsilon_cap = 4.0
delta = 1e-6
partition = "users.region"

[tables.users]
population = "users"
unit = "user_id"
one_row_per_person = true
columns.region = {{ values = ["north", "south", "east", "west"] }}
columns.age    = {{ lower = 18, upper = 100 }}

[tables.prompts]
population = "users"
unit = "user_id"
max_groups = 4
max_rows_per_group = 10
columns.tokens = {{ lower = 0, upper = 4000 }}
columns.model  = {{ values = ["small", "medium", "large"] }}

[tables.regions]
public = true

[analysts.alice]
key_sha256 = "{KEY}"
role = "analyst"
"""


def parse(text: str = BASE, base_dir: Path = Path("/base")):
    return parse_policy(text, base_dir=base_dir)


def mutated(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def refused(text: str) -> str:
    with pytest.raises(PolicyError) as info:
        parse(text)
    return str(info.value)


# --- the base file and the shipped policies -----------------------------------------


def test_base_policy_parses_into_frozen_objects():
    p = parse()
    assert p.path is None
    assert p.proxy == ProxySettings(default_epsilon=0.5)
    assert p.duckdb_path == Path("/base/data/usage.duckdb")
    assert p.ledger_path == Path("/base/state/ledger.sqlite")
    prompts = p.table("prompts")
    assert prompts is not None
    assert (prompts.population, prompts.unit, prompts.max_groups) == ("users", "user_id", 4)
    assert prompts.max_rows_per_group == 10 and prompts.grants is None
    assert prompts.column("TOKENS") == ColumnPolicy("tokens", 0.0, 4000.0, None)
    assert prompts.column("model") == ColumnPolicy(
        "model", None, None, ("small", "medium", "large")
    )
    assert prompts.column("nope") is None
    regions = p.table("regions")
    assert regions is not None and regions.public and regions.unit is None
    assert p.population("users").partition == "users.region"
    assert p.analysts == (AnalystPolicy("alice", KEY, "analyst", None),)
    assert p.tables_of("users") == (p.table("users"), prompts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.tables = ()
    assert hash(p) == hash(parse())
    with pytest.raises(KeyError):
        p.population("nobody")


def test_table_lookup_is_case_insensitive_and_knows_duckdbs_main_schema():
    p = parse()
    assert p.table("PROMPTS") is p.table("prompts")
    assert p.table("main.Users") is p.table("users")
    assert p.table("other.users") is None
    assert p.table("missing") is None


def test_demo_policy_loads():
    p = load_policy(REPO / "sample_data" / "policy.toml")
    assert p.path == REPO / "sample_data" / "policy.toml"
    assert p.duckdb_path == REPO / "sample_data" / "usage.duckdb"
    assert p.ledger_path == REPO / "state" / "ledger.sqlite"
    assert p.csv_tables == ()
    assert p.analysts == ()
    assert p.proxy.mechanism == "gaussian"
    assert [t.name for t in p.tables] == ["users", "prompts", "tickets", "regions"]
    pop = p.population("users")
    assert (pop.epsilon_cap, pop.delta, pop.partition) == (4.0, 1e-6, "users.region")
    users, prompts, tickets = p.table("users"), p.table("prompts"), p.table("tickets")
    assert users is not None and users.one_row_per_person
    assert prompts is not None and (prompts.max_groups, prompts.max_rows_per_group) == (4, None)
    assert prompts.auto_rows_limit == 256  # chosen from the data, up to this
    assert tickets is not None and (tickets.max_groups, tickets.auto_rows_limit) == (2, 32)
    assert prompts.column("tokens_out") == ColumnPolicy("tokens_out", 0.0, 8000.0, None)
    assert prompts.column("flagged") == ColumnPolicy("flagged", None, None, (False, True))
    regions = p.table("regions")
    assert regions is not None and regions.public
    assert len(p.data_version) == 16


def test_pums_policy_loads():
    p = load_policy(REPO / "sample_data" / "pums" / "policy.toml")
    assert p.duckdb_path is None
    assert p.csv_tables == (("pums.pums", REPO / "sample_data" / "pums" / "PUMS_pid.csv"),)
    t = p.table("PUMS.PUMS")
    assert t is not None and t is p.table("pums.pums")
    assert (t.population, t.unit, t.one_row_per_person) == ("pums", "pid", True)
    assert (t.max_groups, t.max_rows_per_group) == (1, 1)
    assert t.column("age") == ColumnPolicy("age", 0.0, 100.0, None)
    assert t.column("income") == ColumnPolicy("income", 0.0, 500000.0, None)
    assert t.column("sex") == ColumnPolicy("sex", 0.0, 1.0, (0, 1))
    educ = t.column("educ")
    assert educ is not None and educ.values == tuple(range(1, 17))
    assert t.column("race") is None
    pop = p.population("pums")
    assert (pop.epsilon_cap, pop.delta, pop.partition) == (10.0, 1e-6, None)


# --- optional features -----------------------------------------------------------------


def test_analysts_grants_and_csv_sources(tmp_path):
    text = (
        mutated(
            'duckdb = "data/usage.duckdb"',
            'csv = { "Main.Prompts" = "p.csv" }\n'
            'csv_types = { "Main.Prompts" = { user_id = "bigint", tokens = "DECIMAL(18, 2)" } }',
        )
        .replace('role = "analyst"', 'role = "admin"\ntables = ["Main.Prompts"]')
        .replace("max_groups = 4", 'max_groups = 4\ngrants = ["alice", "bob"]')
        + f'\n[analysts.bob]\nkey_sha256 = "{KEY.upper()}"\n'
    )
    text = text.replace("[tables.prompts]", '[tables."main.prompts"]')
    p = parse(text, base_dir=tmp_path)
    assert p.duckdb_path is None
    assert p.csv_tables == (("main.prompts", tmp_path / "p.csv"),)
    assert p.csv_types == (
        ("main.prompts", (("user_id", "BIGINT"), ("tokens", "DECIMAL(18, 2)"))),
    )
    alice, bob = p.analysts
    assert alice == AnalystPolicy("alice", KEY, "admin", ("main.prompts",))
    assert bob == AnalystPolicy("bob", KEY, "analyst", None)  # hash lower-cased, role default
    assert p.analyst("bob") is bob and p.analyst("carol") is None
    prompts = p.table("main.prompts")
    assert prompts is not None and prompts.grants == ("alice", "bob")


SCRAM = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy"


def test_analyst_defaults_and_scram_verifier():
    text = mutated(
        'role = "analyst"',
        'role = "analyst"\ndefaults = { epsilon = 0.25, delta = 1e-8 }\n'
        f'scram_sha256 = "{SCRAM}"',
    )
    alice = parse(text).analysts[0]
    assert alice.defaults == (("delta", 1e-8), ("epsilon", 0.25))
    assert alice.default("epsilon") == 0.25 and alice.default("rho") is None
    assert alice.scram_sha256 == SCRAM
    assert parse().analysts[0].defaults == ()  # none declared: the engine's apply


def test_schema_qualified_partition():
    text = mutated('partition = "users.region"', 'partition = "Crm.Users.region"').replace(
        "[tables.users]", '[tables."crm.users"]'
    )
    assert parse(text).population("users").partition == "crm.users.region"


def test_absolute_paths_are_kept_and_defaults_apply():
    text = mutated('duckdb = "data/usage.duckdb"', 'duckdb = "/data/x.duckdb"').replace(
        '[ledger]\npath = "state/ledger.sqlite"', ""
    )
    p = parse(text, base_dir=Path("/cfg"))
    assert p.duckdb_path == Path("/data/x.duckdb")
    assert p.ledger_path == Path("/cfg/state/ledger.sqlite")


def test_ledger_url_selects_the_shared_postgresql_store():
    assert parse().ledger_url is None  # default: SQLite files beside `path`
    url = "postgresql://dpsql@db.internal:5432/dpsql?sslmode=verify-full"
    p = parse(mutated('path = "state/ledger.sqlite"', f'url = "{url}"'))
    assert p.ledger_url == url
    assert p.ledger_path == Path("/base/state/ledger.sqlite")  # unused, still defined
    assert parse(mutated('path = "state/ledger.sqlite"', 'url = "postgres://h/db"')).ledger_url
    both = mutated('path = "state/ledger.sqlite"', f'path = "x.sqlite"\nurl = "{url}"')
    assert refused(both) == "ledger: set path (SQLite files) or url (PostgreSQL), not both"
    for bad, scheme in (("mysql://u:secret@h/db", "mysql"), ("postgresql://", "postgresql")):
        message = refused(mutated('path = "state/ledger.sqlite"', f'url = "{bad}"'))
        assert message == f"ledger.url: must be a postgresql:// URL, got scheme {scheme!r}"
        assert "secret" not in message
    assert (
        refused(mutated('path = "state/ledger.sqlite"', "url = 5"))
        == "ledger.url: must be a string"
    )


def test_explicit_data_version_carries_the_files_identity(tmp_path):
    # A version string the operator forgets to change must not make a changed file's
    # releases replay as current (issue #19 §3).
    text = mutated("[database]", '[database]\nversion = "2024-06-01"')
    data = tmp_path / "data" / "usage.duckdb"
    data.parent.mkdir()
    data.write_bytes(b"one")
    first = parse(text, base_dir=tmp_path).data_version
    assert first.startswith("2024-06-01+")
    data.write_bytes(b"one two")
    assert parse(text, base_dir=tmp_path).data_version not in (first, "2024-06-01")


def test_derived_data_version_follows_the_file(tmp_path):
    data = tmp_path / "data" / "usage.duckdb"
    missing = parse(base_dir=tmp_path).data_version
    data.parent.mkdir()
    data.write_bytes(b"x" * 10)
    first = parse(base_dir=tmp_path).data_version
    assert first != missing
    assert parse(base_dir=tmp_path).data_version == first  # stable while unchanged
    data.write_bytes(b"y" * 11)
    os.utime(data, ns=(1, 1))
    assert parse(base_dir=tmp_path).data_version not in (first, missing)


def test_derived_data_version_for_csv_sources(tmp_path):
    text = mutated(
        'duckdb = "data/usage.duckdb"',
        'csv = { "prompts" = "p.csv" }\ncsv_types = { prompts = { a = "BIGINT" } }',
    )
    (tmp_path / "p.csv").write_text("a\n1\n")
    first = parse(text, base_dir=tmp_path).data_version
    (tmp_path / "p.csv").write_text("a\n1\n2\n")
    assert parse(text, base_dir=tmp_path).data_version != first


def test_load_policy_reports_a_missing_file(tmp_path):
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "nope.toml")


def test_load_policy_resolves_against_the_files_folder(tmp_path):
    (tmp_path / "policy.toml").write_text(BASE)
    p = load_policy(tmp_path / "policy.toml")
    assert p.path == tmp_path / "policy.toml"
    assert p.duckdb_path == tmp_path / "data" / "usage.duckdb"


# --- [database] engine (issue #16) ----------------------------------------------------

DUCKDB_LINE = 'duckdb = "data/usage.duckdb"'


def on(database: str) -> str:
    return mutated(DUCKDB_LINE, database)


def test_duckdb_is_the_default_engine():
    assert parse().database == DatabaseSettings()
    assert parse().database.engine is EngineKind.DUCKDB


def test_a_postgres_engine_with_its_dsn():
    p = parse(on('engine = "postgres"\ndsn = "postgresql://reader@db.internal:5432/usage"'))
    assert p.database.engine is EngineKind.POSTGRES
    assert p.database.dsn == "postgresql://reader@db.internal:5432/usage"
    assert p.duckdb_path is None
    # key=value DSNs (libpq's other form) are accepted too
    kv = parse(on('engine = "postgres"\ndsn = "host=db port=5432 dbname=usage user=reader"'))
    assert kv.database.dsn == "host=db port=5432 dbname=usage user=reader"


def test_a_spark_engine_local_or_connect(tmp_path):
    local = parse(on('engine = "spark"\nmaster = "local[2]"\nparquet = "lake"'), tmp_path)
    assert local.database.engine is EngineKind.SPARK
    assert (local.database.master, local.database.remote) == ("local[2]", None)
    assert local.database.parquet == tmp_path / "lake"
    remote = parse(on('engine = "spark"\nremote = "sc://spark.internal:15002"'))
    assert remote.database.remote == "sc://spark.internal:15002"
    assert remote.database.parquet is None
    assert local.database.driver_memory is remote.database.driver_memory is None
    sized = parse(on('engine = "spark"\nmaster = "local[2]"\ndriver_memory = " 6G "'))
    assert sized.database.driver_memory == "6g"
    assert local.database.shuffle_partitions is remote.database.shuffle_partitions is None
    split = parse(on('engine = "spark"\nmaster = "local[2]"\nshuffle_partitions = 64'))
    assert split.database.shuffle_partitions == 64


def test_spark_sizes_its_own_jvm_from_the_machines_memory():
    gib = 2**30
    assert driver_memory(2 * gib) == "1g"  # never below Spark's own default
    assert driver_memory(23 * gib) == "5g"  # a quarter, whole GiB
    assert driver_memory(256 * gib) == "8g"
    assert driver_memory().endswith("g")


def test_the_data_version_names_the_engine_and_its_data():
    a = parse(on('engine = "postgres"\ndsn = "postgresql://r@a/usage"')).data_version
    b = parse(on('engine = "postgres"\ndsn = "postgresql://r@b/usage"')).data_version
    duck = parse().data_version
    assert len({a, b, duck}) == 3  # a cache never replays another database's releases


def test_the_location_never_shows_a_password():
    settings = DatabaseSettings(
        engine=EngineKind.POSTGRES, dsn="host=db user=reader password=hunter2"
    )
    assert "hunter2" not in settings.location


ENGINE_REFUSALS = [
    ('engine = "oracle"', "database.engine: 'oracle' is not one of"),
    ('engine = "postgres"', 'database.dsn: required for engine = "postgres"'),
    ('engine = "postgres"\ndsn = "mysql://x/y"', "database.dsn: must be a postgresql:// URL"),
    (
        'engine = "postgres"\ndsn = "postgresql://reader:secret@db/usage"',
        "database.dsn: must not hold a password",
    ),
    ('engine = "spark"', 'database: engine = "spark" needs one of master or remote'),
    (
        'engine = "spark"\nmaster = "local[2]"\nremote = "sc://h:15002"',
        'database: engine = "spark" needs one of master or remote',
    ),
    ('engine = "spark"\nremote = "http://h:15002"', "database.remote: must be a Spark Connect URL"),
    (
        'engine = "spark"\nremote = "sc://h:15002"\ndriver_memory = "4g"',
        "database.driver_memory: only for a classic master",
    ),
    (
        'engine = "spark"\nremote = "sc://h:15002"\nshuffle_partitions = 8',
        "database.shuffle_partitions: only for a classic master",
    ),
    *(
        (f'engine = "spark"\nmaster = "local[2]"\nshuffle_partitions = {n}', message)
        for n, message in (
            ("0", "database.shuffle_partitions: 0 must be >= 1"),
            ('"8"', "database.shuffle_partitions: must be an integer"),
            ("2.5", "database.shuffle_partitions: must be an integer"),
            ("100001", "database.shuffle_partitions: 100001 is more than 100,000"),
        )
    ),
    ('engine = "postgres"\ndsn = "x"\nshuffle_partitions = 8', "database.shuffle_partitions: only for engine = 'spark'"),
    *(
        (
            f'engine = "spark"\nmaster = "local[2]"\ndriver_memory = "{size}"',
            "database.driver_memory: a JVM",
        )
        for size in ("4", "4gb", "0g", "-1g", "4.5g", "99999999g", "4g; rm")
    ),
    (
        'engine = "postgres"\ndsn = "postgresql://r@h/d"\ndriver_memory = "4g"',
        "database.driver_memory: only for engine = 'spark'",
    ),
    (
        'engine = "postgres"\ndsn = "postgresql://r@h/d"\nduckdb = "x.duckdb"',
        "database.duckdb: only for engine = 'duckdb'",
    ),
    ('dsn = "postgresql://r@h/d"', "database.dsn: only for engine = 'postgres'"),
    (
        'engine = "postgres"\ndsn = "postgresql://r@h/d"\nmaster = "local"',
        "database.master: only for engine = 'spark'",
    ),
]


@pytest.mark.parametrize(("database", "message"), ENGINE_REFUSALS)
def test_engine_settings_are_checked(database: str, message: str):
    assert refused(on(database)).startswith(message)


# --- refusals: each names the key at fault ----------------------------------------------

UNKNOWN_KEYS = [
    ("[proxy]", "[extra]\nx = 1\n[proxy]", "extra: unknown key"),
    (
        'mechanism = "gaussian"',
        'mechanism = "gaussian"\nmechanizm = "laplace"',
        "proxy.mechanizm: unknown key",
    ),
    ("max_groups = 4", "max_groups = 4\nmax_group = 3", "tables.prompts.max_group: unknown key"),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = 0, upper = 4000, uper = 5 }",
        "tables.prompts.columns.tokens.uper: unknown key",
    ),
    ("delta = 1e-6", "delta = 1e-6\nepsilon = 1.0", "populations.users.epsilon: unknown key"),
    ('role = "analyst"', 'role = "analyst"\nemail = "a@b"', "analysts.alice.email: unknown key"),
    (
        'duckdb = "data/usage.duckdb"',
        'duckdb = "data/usage.duckdb"\nurl = "pg://"',
        "database.url: unknown key",
    ),
    (
        'path = "state/ledger.sqlite"',
        'path = "state/ledger.sqlite"\nwal = true',
        "ledger.wal: unknown key",
    ),
]


@pytest.mark.parametrize(("old", "new", "message"), UNKNOWN_KEYS)
def test_unknown_keys_are_refused(old, new, message):
    assert refused(mutated(old, new)) == message


REFUSALS = [
    # private tables need a unit and a declared population
    (
        'population = "users"\nunit = "user_id"\nmax_groups',
        'population = "users"\nmax_groups',
        "tables.prompts.unit: required for a private table",
    ),
    ('unit = "user_id"\nmax_groups', 'unit = "user_id"\npublic = false\nmax_groups', None),
    (
        'population = "users"\nunit = "user_id"\nmax_groups',
        'unit = "user_id"\nmax_groups',
        "tables.prompts.population: required for a private table",
    ),
    (
        'population = "users"\nunit = "user_id"\nmax_groups',
        'population = "customers"\nunit = "user_id"\nmax_groups',
        "tables.prompts.population: 'customers' is not declared in [populations]",
    ),
    ("[tables.regions]\npublic = true", "[tables.regions]", "tables.regions.unit: required"),
    # bounds
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = 10, upper = 5 }",
        "tables.prompts.columns.tokens: lower 10 > upper 5",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = 0.5, upper = 0.25 }",
        "tables.prompts.columns.tokens: lower 0.5 > upper 0.25",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = 0 }",
        "tables.prompts.columns.tokens: declare both lower and upper, or neither",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ upper = 4000 }",
        "tables.prompts.columns.tokens: declare both lower and upper, or neither",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = nan, upper = 4000 }",
        "tables.prompts.columns.tokens.lower: nan is not finite",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = 0, upper = inf }",
        "tables.prompts.columns.tokens.upper: inf is not finite",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = -inf, upper = 0 }",
        "tables.prompts.columns.tokens.lower: -inf is not finite",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        '{ lower = "0", upper = 4000 }',
        "tables.prompts.columns.tokens.lower: must be a number",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = false, upper = true }",
        "tables.prompts.columns.tokens.lower: must be a number",
    ),
    # value domains
    ('["small", "medium", "large"]', "[]", "tables.prompts.columns.model.values: must be a"),
    (
        '["small", "medium", "large"]',
        '["small", 1]',
        "tables.prompts.columns.model.values: mixes number and string values",
    ),
    (
        '["small", "medium", "large"]',
        '["small", "small"]',
        "tables.prompts.columns.model.values: lists a value twice",
    ),
    (
        '["small", "medium", "large"]',
        "[1.0, nan]",
        "tables.prompts.columns.model.values: nan is not finite",
    ),
    (
        "{ lower = 0, upper = 4000 }",
        "{ lower = 0, upper = 4, values = [1, 5] }",
        "tables.prompts.columns.tokens.values: 5 lies outside [lower, upper]",
    ),
    (
        'columns.model  = { values = ["small", "medium", "large"] }',
        "columns.user_id = { values = [1, 2] }",
        "tables.prompts.columns.user_id: the unit column cannot have values",
    ),
    # populations
    ("epsilon_cap = 4.0\n", "", "populations.users.epsilon_cap: required"),
    ("epsilon_cap = 4.0", "epsilon_cap = 0", "populations.users.epsilon_cap: must be > 0"),
    ("epsilon_cap = 4.0", "epsilon_cap = -1.0", "populations.users.epsilon_cap: must be > 0"),
    ("epsilon_cap = 4.0", "epsilon_cap = inf", "populations.users.epsilon_cap: inf is not finite"),
    ("epsilon_cap = 4.0", "epsilon_cap = nan", "populations.users.epsilon_cap: nan is not finite"),
    ("delta = 1e-6\n", "", "populations.users.delta: required"),
    ("delta = 1e-6", "delta = 1e-3", "populations.users.delta: 0.001 must be > 0 and < 0.001"),
    ("delta = 1e-6", "delta = 0.5", "populations.users.delta: 0.5 must be"),
    ("delta = 1e-6", "delta = 0", "populations.users.delta: 0.0 must be"),
    ("delta = 1e-6", "delta = -1e-9", "populations.users.delta: -1e-09 must be"),
    (
        "[populations.users]",
        '[populations."users/region=north"]',
        'populations."users/region=north": population name must be an identifier',
    ),
    # partitions
    (
        'partition = "users.region"',
        'partition = "users.age"',
        "populations.users.partition: column 'age' needs a declared values domain",
    ),
    (
        'partition = "users.region"',
        'partition = "users.plan"',
        "populations.users.partition: column 'plan' needs a declared values domain",
    ),
    (
        'partition = "users.region"',
        'partition = "prompts.model"',
        "populations.users.partition: table 'prompts' must declare one_row_per_person = true",
    ),
    (
        "one_row_per_person = true\n",
        "",
        "populations.users.partition: table 'users' must declare one_row_per_person = true",
    ),
    (
        'partition = "users.region"',
        'partition = "accounts.region"',
        "populations.users.partition: 'accounts.region' does not name a declared table.column",
    ),
    (
        'partition = "users.region"',
        'partition = "region"',
        "populations.users.partition: 'region' does not name a declared table.column",
    ),
    (
        'partition = "users.region"',
        "partition = 3",
        "populations.users.partition: must be a string",
    ),
    # L0 / Linf
    ("max_groups = 4", "max_groups = 0", "tables.prompts.max_groups: 0 must be >= 1"),
    ("max_groups = 4", "max_groups = -2", "tables.prompts.max_groups: -2 must be >= 1"),
    ("max_groups = 4", "max_groups = 1.5", "tables.prompts.max_groups: must be an integer"),
    ("max_groups = 4", "max_groups = 4.0", "tables.prompts.max_groups: must be an integer"),
    ("max_groups = 4", "max_groups = true", "tables.prompts.max_groups: must be an integer"),
    (
        "max_rows_per_group = 10",
        "max_rows_per_group = 0",
        "tables.prompts.max_rows_per_group: 0 must be >= 1",
    ),
    (
        "max_rows_per_group = 10",
        'max_rows_per_group = "10"',
        "tables.prompts.max_rows_per_group: must be an integer",
    ),
    # public tables hold no person data
    (
        "public = true",
        'public = true\nunit = "region"',
        "tables.regions.unit: a public table holds no person data",
    ),
    (
        "public = true",
        'public = true\npopulation = "users"',
        "tables.regions.population: a public table holds no person data",
    ),
    (
        "public = true",
        "public = true\nmax_groups = 2",
        "tables.regions.max_groups: a public table holds no person data",
    ),
    (
        "public = true",
        "public = true\none_row_per_person = true",
        "tables.regions.one_row_per_person: a public table has no persons",
    ),
    ("public = true", 'public = "yes"', "tables.regions.public: must be true or false"),
    # analysts
    ('role = "analyst"', 'role = "root"', "analysts.alice.role: 'root' is not analyst or admin"),
    (
        f'key_sha256 = "{KEY}"',
        'key_sha256 = "abc"',
        "analysts.alice.key_sha256: must be 64 hexadecimal characters",
    ),
    (
        f'key_sha256 = "{KEY}"',
        f'key_sha256 = "{"g" * 64}"',
        "analysts.alice.key_sha256: must be 64 hexadecimal characters",
    ),
    (f'key_sha256 = "{KEY}"\n', "", "analysts.alice.key_sha256: must be 64 hexadecimal"),
    (
        'role = "analyst"',
        'role = "analyst"\ntables = ["secrets"]',
        "analysts.alice.tables: 'secrets' is not declared in [tables]",
    ),
    (
        'role = "analyst"',
        'role = "analyst"\ntables = "prompts"',
        "analysts.alice.tables: must be a list of names",
    ),
    (
        'role = "analyst"',
        'role = "analyst"\ndefaults = { epsilon = 0 }',
        "analysts.alice.defaults.epsilon: must be > 0",
    ),
    (
        'role = "analyst"',
        'role = "analyst"\ndefaults = { delta = 0.5 }',
        "analysts.alice.defaults.delta: 0.5 must be > 0 and < 0.001",
    ),
    (
        'role = "analyst"',
        'role = "analyst"\ndefaults = { sigma = 0.1 }',
        "analysts.alice.defaults.sigma: unknown key",
    ),
    (
        'role = "analyst"',
        'role = "analyst"\nscram_sha256 = "md5abc"',
        "analysts.alice.scram_sha256: must be",
    ),
    # proxy settings
    (
        'mechanism = "gaussian"',
        'mechanism = "exponential"',
        "proxy.mechanism: 'exponential' is not gaussian or laplace",
    ),
    ("default_epsilon = 0.5", "default_epsilon = 0", "proxy.default_epsilon: must be > 0"),
    (
        "default_epsilon = 0.5",
        "default_epsilon = 0.5\ndefault_delta = 0.01",
        "proxy.default_delta: 0.01 must be > 0 and < 0.001",
    ),
    ("default_epsilon = 0.5", "default_epsilon = 0.5\nthreads = 0", "proxy.threads: 0 must be"),
    (
        "default_epsilon = 0.5",
        "default_epsilon = 0.5\nmax_groups = 0",
        "proxy.max_groups: 0 must be",
    ),
    (
        "default_epsilon = 0.5",
        "default_epsilon = 0.5\nquery_timeout_s = -1",
        "proxy.query_timeout_s: must be > 0",
    ),
    (
        "default_epsilon = 0.5",
        'default_epsilon = 0.5\nmemory_limit = "2GB\'; SELECT 1; --"',
        "proxy.memory_limit: ",
    ),
    # database
    (
        'duckdb = "data/usage.duckdb"',
        'duckdb = "x.duckdb"\ncsv = { users = "u.csv" }',
        "database: give either duckdb or csv, not both",
    ),
    (
        'duckdb = "data/usage.duckdb"',
        'csv = { "PUMS.PUMS" = "p.csv" }',
        'database.csv."PUMS.PUMS": table is not declared in [tables]',
    ),
    (
        'duckdb = "data/usage.duckdb"',
        "csv = { users = 3 }",
        "database.csv.users: must be a file path string",
    ),
    (
        'duckdb = "data/usage.duckdb"',
        'csv = { users = "u.csv" }',
        "database.csv_types.users: a CSV table needs its column types declared",
    ),
    (
        'duckdb = "data/usage.duckdb"',
        'csv = { users = "u.csv" }\ncsv_types = { users = { id = "INT; DROP" } }',
        "database.csv_types.users.id: 'INT; DROP' is not a column type",
    ),
    (
        'duckdb = "data/usage.duckdb"',
        'csv = { users = "u.csv" }\ncsv_types = { users = { id = "BIGINT" }, x = { a = "INTEGER" } }',
        "database.csv_types.x: not a table of [database] csv",
    ),
    (
        'duckdb = "data/usage.duckdb"',
        'csv = { users = "u.csv" }\ncsv_types = { users = {} }',
        "database.csv_types.users: declares no column",
    ),
    ('duckdb = "data/usage.duckdb"', "duckdb = 1", "database.duckdb: must be a string"),
    # names and shapes
    ("[tables.regions]", '[tables."a b"]', 'tables."a b": table name must be'),
    ("[tables.regions]", "[tables.Users]", "tables.Users: declared twice"),
    ("columns.model  =", "columns.Tokens =", "tables.prompts.columns.Tokens: declared twice"),
    (
        'unit = "user_id"\nmax_groups',
        'unit = "user id"\nmax_groups',
        "tables.prompts.unit: 'user id' is not a column name",
    ),
    ("[tables.regions]\npublic = true", "[tables]\nregions = 3", "tables.regions: must be a table"),
    ("[proxy]", "[proxy\n", "not valid TOML"),
]


@pytest.mark.parametrize(("old", "new", "message"), REFUSALS)
def test_inconsistent_policies_are_refused(old, new, message):
    text = mutated(old, new)
    if message is None:  # a control: the explicit default is accepted
        parse(text)
        return
    assert refused(text).startswith(message)


def test_quoted_table_names_appear_quoted_in_messages():
    text = mutated("[tables.prompts]", '[tables."PUMS.PUMS"]').replace(
        "{ lower = 0, upper = 4000 }", "{ lower = 10, upper = 5 }"
    )
    assert refused(text) == 'tables."PUMS.PUMS".columns.tokens: lower 10 > upper 5'


def test_partition_table_of_another_population_is_refused():
    text = BASE + (
        "\n[populations.staff]\nepsilon_cap = 1.0\ndelta = 1e-7\n"
        '[tables.staff]\npopulation = "staff"\nunit = "staff_id"\none_row_per_person = true\n'
        'columns.region = { values = ["north", "south"] }\n'
    )
    parse(text)
    bad = text.replace('partition = "users.region"', 'partition = "staff.region"')
    assert refused(bad) == "populations.users.partition: table 'staff' is not of population 'users'"


def test_query_delta_ceiling_defaults_to_a_share_of_the_population_delta():
    pop = parse().population("users")
    assert pop.max_query_delta == pytest.approx(pop.delta / 100)
    text = mutated("delta = 1e-6", "delta = 1e-6\nmax_query_delta = 1e-7")
    assert parse(text).population("users").max_query_delta == 1e-7
    for bad in ("max_query_delta = 1e-6", "max_query_delta = 2e-6", "max_query_delta = 1e-10"):
        with pytest.raises(PolicyError, match="max_query_delta"):
            parse(mutated("delta = 1e-6", f"delta = 1e-6\n{bad}"))


def test_analyst_shares_of_a_population():
    text = BASE.replace(
        f'key_sha256 = "{KEY}"', f'key_sha256 = "{KEY}"\nshares = {{ users = 0.25 }}'
    )
    p = parse(text)
    assert p.analyst("alice").shares == (("users", 0.25),)
    assert [(s.analyst, s.share) for s in p.shares("users")] == [("alice", 0.25)]
    for bad in ("{ users = 0 }", "{ users = 1.5 }", "{ nobody = 0.5 }", '{ users = "x" }'):
        with pytest.raises(PolicyError, match="shares"):
            parse(BASE.replace(f'key_sha256 = "{KEY}"', f'key_sha256 = "{KEY}"\nshares = {bad}'))


def test_analyst_request_defaults_are_typed_and_sorted():
    text = mutated(
        'role = "analyst"',
        'role = "analyst"\ndefaults = { max_groups = 2, epsilon = 0.25, intervals = true }',
    )
    alice = parse(text).analyst("alice")
    assert alice is not None
    assert alice.defaults == (("epsilon", 0.25), ("intervals", True), ("max_groups", 2))
    assert parse().analyst("alice").defaults == ()


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ("{ epsilon = -1 }", "analysts.alice.defaults.epsilon: must be > 0"),
        ("{ max_groups = 0.5 }", "analysts.alice.defaults.max_groups: must be an integer"),
        ('{ intervals = "yes" }', "analysts.alice.defaults.intervals: must be true or false"),
        ("{ epsilon = 1, rho = 0.1 }", "analysts.alice.defaults: give at most one of"),
        ("{ mechanism = 1 }", "analysts.alice.defaults.mechanism: unknown key"),
        ("3", "analysts.alice.defaults: must be a table"),
    ],
)
def test_bad_analyst_defaults_are_refused(defaults, message):
    assert refused(
        mutated('role = "analyst"', f'role = "analyst"\ndefaults = {defaults}')
    ).startswith(message)


def test_auto_row_caps_need_a_limit():
    auto = mutated("max_rows_per_group = 10", 'max_rows_per_group = "auto"')
    with pytest.raises(PolicyError, match="max_rows_per_group_limit: required"):
        parse(auto)
    ok = parse(auto.replace('"auto"', '"auto"\nmax_rows_per_group_limit = 64'))
    assert ok.table("prompts").auto_rows_limit == 64
    with pytest.raises(PolicyError, match="only with"):
        parse(
            mutated(
                "max_rows_per_group = 10", "max_rows_per_group = 10\nmax_rows_per_group_limit = 64"
            )
        )
