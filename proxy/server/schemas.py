"""Wire schemas. These are not the engine's objects: a response is built field by field
from `Result`/`Explanation`, so exact aggregates or a whole plan can never be serialised
by accident."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proxy.ledger_views import AdminKind, ConsumerKind


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Accuracy(_Strict):
    rel_error: float = Field(gt=0, description="relative error at `at_count`, e.g. 0.05")
    at_count: float = Field(gt=0, description="the count at which the error is stated")
    confidence: float = Field(0.95, gt=0, lt=1)


class QueryBody(_Strict):
    sql: str = Field(min_length=1, description="one SELECT over the tables of GET /v1/schema")
    dialect: str = Field("duckdb", max_length=32, description="sqlglot dialect of `sql`")
    epsilon: float | None = Field(None, gt=0, description="ε to spend (default: the policy's)")
    delta: float | None = Field(None, gt=0, lt=1)
    rho: float | None = Field(None, gt=0, description="zCDP ρ instead of ε (gaussian only)")
    accuracy: Accuracy | None = Field(None, description="spend what this accuracy needs")
    max_groups: int | None = Field(None, ge=1, description="tighten the policy's L0 bound")
    max_rows_per_group: int | None = Field(None, ge=1, description="tighten the L∞ bound")
    raw_noise: bool = Field(
        False, description="show counts with their raw noise (by default below 0 shows as 0)"
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"sql": "SELECT region, COUNT(*) AS n FROM users GROUP BY region", "epsilon": 0.5}
            ]
        },
    )


class ColumnNoise(_Strict):
    name: str
    noise_scale: float | None = Field(description="σ (gaussian) or b (laplace), if one statistic")
    half_width_95: float | None = Field(description="95% two-sided half-width of that noise")


class DeclaredBound(_Strict):
    column: str = Field(
        description="table.column, or a per-person subquery's aggregate (per_person)"
    )
    lower: float
    upper: float
    per_person: bool = Field(
        default=False,
        description="the bounds of a per-person subquery's aggregate, applied per person",
    )


class Clipping(_Strict):
    """What bounding cut (a DP estimate from a declared share of the budget)."""

    max_rows_per_group: int = Field(description="C: rows of one person counted per group")
    max_groups: int = Field(description="K: groups one person may touch")
    people_cut: list[float] = Field(
        description="per row: noisy count of people whose contribution bounding changed"
    )
    people: list[float] = Field(description="per row: noisy count of people")
    total_people_cut: float
    total_people: float
    fraction_cut: float = Field(description="share of people whose contribution bounding changed")
    fraction_cut_at_least: float = Field(description="that share at the low end of its noise")
    declared_bounds: list[DeclaredBound] = Field(
        default_factory=list,
        description="declared bounds the query clamps values to (counted in people_cut)",
    )


class QuantileGrid(_Strict):
    lower: float
    upper: float
    bins: int
    integer: bool
    width: float
    half_bin: float


class QuantileColumn(_Strict):
    """An output column that reads a quantile draw (no value interval: why in the note)."""

    name: str
    kind: str = Field(description="quantile, min or max")
    q: float | None = Field(description="the level of a quantile; null for MIN and MAX")
    grid: QuantileGrid
    offset_rows: float = Field(description="MIN/MAX: released this many rows inside the end")
    rank_error_95: float
    half_width_95: None = None
    interval_note: str


class Privacy(_Strict):
    epsilon: float = Field(description="ε charged by this answer; 0 when replayed")
    delta: float
    rho: float | None
    mechanism: str
    cached: bool
    charge_id: int | None = Field(description="ledger event that paid for these values")
    populations: list[str]
    remaining: dict[str, float] = Field(description="ε left per charged population")
    partition: dict[str, Any] = Field(description="public_domain, threshold or none")
    columns: list[ColumnNoise]
    query_epsilon: float = Field(description="what the release cost when first paid for")
    data_version: str = Field(
        "",
        description="the data the release describes: the files' identity, after the "
        "operator's [database] version string if one is set",
    )
    counts: Literal["at_least_zero", "raw"] = Field(
        "at_least_zero",
        description="how counts are shown: below 0 as 0 (default) or with their raw noise",
    )
    population_epsilon_moved: dict[str, float] = Field(
        default_factory=dict,
        description="per charged population: how much this answer raised the composed ε "
        "of its persons who have spent the most (0 on a replay)",
    )
    clipping: Clipping | None = Field(
        None, description="how much bounding cut; null when not estimated"
    )
    exact: str | None = Field(
        None,
        description="set when the answer read no person data (public tables or "
        "constants): exact and free, e.g. 'public data, no privacy cost'",
    )
    quantiles: list[QuantileColumn] = Field(
        default_factory=list, description="output columns that read a quantile draw"
    )


class Page(BaseModel):
    offset: int
    size: int
    total_rows: int


class QueryResponse(BaseModel):
    columns: list[str]
    rows: list[list[Any]] | list[dict[str, Any]] = Field(
        description="arrays by default; objects with ?shape=objects"
    )
    intervals_95: list[list[float | None]] = Field(
        description="per cell: 95% half-width of the noise where it can be stated, else null"
    )
    unsettled_cells: list[list[int]] = Field(
        default_factory=list,
        description="[row on this page, column] of cells another draw of the noise could "
        "have given another value (a comparison or CASE near its threshold)",
    )
    unsettled_rows: list[int] = Field(
        default_factory=list,
        description="rows on this page that HAVING or ORDER BY … LIMIT chose by noisy "
        "values and another draw of the noise could have left out",
    )
    privacy: Privacy
    warnings: list[str]
    page: Page
    next: str | None = Field(description="cursor for GET /v1/pages/{cursor}; null on the last page")


class Sensitivity(BaseModel):
    per_group: float
    l1: float
    l2: float


class NoiseOut(BaseModel):
    mechanism: str
    scale: float
    grid: float
    half_width_95: float


class StatisticOut(BaseModel):
    column: str
    kind: str
    argument: str | None
    bounds: list[float | None]
    sensitivity: Sensitivity
    noise: NoiseOut


class PartitionOut(BaseModel):
    mechanism: str
    scale: float
    tau: float
    delta: float


class Cost(BaseModel):
    epsilon: float
    delta: float
    rho: float | None


class QuantileAccuracyOut(BaseModel):
    rows: int
    rank_error: float
    quantile_error: float
    value_error_if_uniform: float


class QuantileOut(BaseModel):
    """A MEDIAN/quantile/MIN/MAX column: exponential mechanism over a public grid."""

    column: str
    kind: str = Field(description="quantile, min or max")
    q: float | None
    argument: str
    calls: list[str]
    grid: dict[str, float | int | bool]
    mechanism: str
    max_rows_per_group: int
    max_groups: int
    epsilon_per_group: float
    pure_epsilon: float
    rho: float
    score_sensitivity_rows: float
    scale_rows: float
    offset_rows: int = Field(description="MIN/MAX: rows from the end the draw aims at")
    rank_error_95: float = Field(description="rows from the target rank, 95%, any data")
    expected_rank_error: float
    accuracy: list[QuantileAccuracyOut]
    half_width_95: float | None
    interval_note: str
    note: str


class CandidateOut(BaseModel):
    value: int | float
    estimated_relative_error: float = Field(description="bias and noise, estimated")


class ChosenBoundOut(BaseModel):
    """An "auto" bound chosen for this query: the candidate of least estimated error."""

    bound: Literal["max_rows_per_group", "max_groups", "upper", "lower"]
    of: str = Field(description="the table, the tables and keys of the grouping, or table.column")
    chosen: int | float
    limit: int | float
    candidates: list[CandidateOut]
    share_cut: float = Field(
        description="estimated share of rows (person-group pairs, or a column's mass) cut"
    )
    people_cut: float | None = Field(description="estimated share of people above K")
    release_peak: int | None = Field(
        None,
        description="K only: the candidate whose pairs kept over the partition threshold "
        "are largest; no larger K is chosen (private keys only)",
    )


class ExplainResponse(BaseModel):
    core_sql: str
    outer_sql: str
    statistics: list[StatisticOut]
    quantiles: list[QuantileOut] = Field(default_factory=list)
    partition: PartitionOut | None
    public_domain_size: int | None
    limits: dict[str, int]
    auto_bounds: list[dict[str, Any]] = Field(
        default_factory=list,
        description='"auto" bounds not chosen yet: what the first query pays to choose them',
    )
    chosen_bounds: list[ChosenBoundOut] = Field(
        default_factory=list,
        description='"auto" bounds this query chose from released histograms (free)',
    )
    cost: Cost
    charges: list[str]
    cache: Literal["hit", "miss", "exact"] = Field(
        description="hit: answering would cost nothing; exact: public data, always free"
    )
    cache_key: str
    exact: str | None = Field(None, description="set for queries over public data only")


class PartitionBudget(BaseModel):
    name: str
    epsilon_spent: float
    remaining: float


class ShareBudget(BaseModel):
    analyst: str
    epsilon_cap: float = Field(description="this analyst's share of the population's cap")
    epsilon_spent: float = Field(description="what this analyst's own queries cost")
    remaining: float


class PopulationBudget(BaseModel):
    name: str
    epsilon_cap: float
    delta: float
    epsilon_spent: float = Field(
        description="composed ε borne by the population's persons who have spent the most "
        "(the largest over the population and its partitions)"
    )
    remaining: float = Field(description="epsilon_cap − epsilon_spent, at least 0")
    partitions: list[PartitionBudget]
    share: ShareBudget | None = Field(None, description="the caller's share, if limited")


class BudgetResponse(BaseModel):
    populations: list[PopulationBudget]


class ColumnOut(BaseModel):
    name: str
    type: str
    lower: float | None = None
    upper: float | None = None
    values: list[str | int | float | bool] | None = Field(None, description="public domain")
    unit: bool = Field(False, description="the column that identifies a person")


class TableOut(BaseModel):
    name: str
    public: bool
    population: str | None
    max_groups: int | Literal["auto"] | None = Field(
        description='K; "auto": chosen per query from the data, up to max_groups_limit'
    )
    max_groups_limit: int | None = Field(None, description='the limit of an "auto" K')
    max_rows_per_group: int | Literal["auto"] | None = Field(
        description='C; "auto": chosen per query from the data, up to max_rows_per_group_limit'
    )
    max_rows_per_group_limit: int | None = Field(None, description='the limit of an "auto" C')
    columns: list[ColumnOut]


class SchemaResponse(BaseModel):
    tables: list[TableOut]


class EventOut(BaseModel):
    id: int
    ts: float
    kind: str
    populations: list[str]
    epsilon: float | None = Field(description="ε of this event alone at its population's δ")
    rdp: list[float | None] | None = Field(
        description="a cost event's RDP curve at `orders` (null entries are +inf)"
    )
    delta_extra: float
    analyst: str
    fingerprint: str
    note: str
    parent_id: int | None
    cap: float | None


class LedgerResponse(BaseModel):
    events: list[EventOut]
    next_after_id: int | None
    orders: list[float] = Field(description="the RDP orders external curves must use")


class VerifyResponse(BaseModel):
    ok: bool
    events: int
    populations: int
    problems: list[str]


class CurveIn(_Strict):
    orders: list[float] = Field(description="exactly the ledger's orders (GET /v1/ledger)")
    values: list[float] = Field(description="RDP ε(α) at each order")


class ChargeBody(_Strict):
    population: str = Field(min_length=1, max_length=200)
    note: str = Field(min_length=1, max_length=500, description="what spent it, for the audit")
    curve: CurveIn | None = None
    rho: float | None = Field(None, gt=0, description="a zCDP ρ instead of a curve")
    delta_extra: float = Field(0.0, ge=0, lt=1)


class SpendOut(BaseModel):
    population: str
    epsilon_spent: float
    epsilon_cap: float
    remaining: float


class ChargeResponse(BaseModel):
    event_id: int
    population: str
    epsilon: float = Field(description="the charge alone, at the population's δ")
    spends: list[SpendOut]


class CapBody(_Strict):
    epsilon_cap: float = Field(ge=0, description="new ε cap of the root population")
    reason: str = Field(min_length=1, max_length=500)


class CapResponse(BaseModel):
    event_id: int
    population: str
    epsilon_cap: float
    epsilon_spent: float
    remaining: float


class Health(BaseModel):
    status: Literal["ok"]


class ErrorBody(BaseModel):
    code: str
    message: str
    hint: str
    position: dict[str, int] | None = None
    model_config = ConfigDict(extra="allow")


class ErrorResponse(BaseModel):
    error: ErrorBody


# --- console views (issue 17) ------------------------------------------------------------


class HistoryItem(BaseModel):
    fingerprint: str = Field(description="the release's cache key (as in the ledger)")
    charge_id: int = Field(description="the charge that paid for the release")
    first_ts: float
    last_ts: float
    asks: int = Field(description="answers this analyst got for it (charge and replays)")
    epsilon: float | None = Field(
        description="ε this analyst's own charge cost; 0 when it only got replays"
    )
    populations: list[str]
    cached: bool = Field(description="the release is stored: asking again costs nothing")
    automatic: str | None = Field(
        None,
        description="a release dpsql made itself, charged to the query that needed it (the "
        "histogram an automatic cap is chosen from): what it was; null for the analyst's "
        "own queries",
    )


class HistoryResponse(BaseModel):
    analyst: str
    queries: list[HistoryItem]


class PointOut(BaseModel):
    ts: float
    value: float | None = Field(description="null when not finite")


class SeriesOut(BaseModel):
    population: str
    epsilon: list[PointOut] = Field(
        description="composed ε of the population's persons after each event reaching them"
    )
    caps: list[PointOut] = Field(description="ε cap set at each time (roots only)")


class ConsumerOut(BaseModel):
    analyst: str = Field(description="for analysts, other callers are summed up in one row")
    fingerprint: str
    kind: ConsumerKind
    epsilon: float | None = Field(description="sum of the events' own ε (an upper bound)")
    charges: int
    replays: int


class CacheOut(BaseModel):
    charges: int
    replays: int
    hit_rate: float | None = Field(description="replays / (charges + replays)")


class AdminEventOut(BaseModel):
    id: int
    ts: float
    kind: AdminKind
    population: str
    analyst: str
    note: str
    cap: float | None
    epsilon: float | None


class UsageResponse(BaseModel):
    viewer: str
    role: Literal["analyst", "admin"]
    populations: list[str] = Field(description="root populations in view")
    series: list[SeriesOut]
    consumers: list[ConsumerOut]
    cache: CacheOut = Field(description="every query on the populations in view")
    own_cache: CacheOut = Field(description="the caller's own queries")
    cap_changes: list[AdminEventOut] = Field(description="admins only; empty for analysts")
    externals: list[AdminEventOut] = Field(description="admins only; empty for analysts")
