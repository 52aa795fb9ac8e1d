"""What an answer carries: the rows, per-cell intervals, and its privacy metadata."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from accounting.calibrate import Mechanism
from accounting.confidence import ratio_interval, z_95
from accounting.mechanisms import Z_975
from proxy.cell_values import is_finite_number, is_number
from proxy.outer import CLIP_CUT, CLIP_PEOPLE, ROW
from proxy.plan import Plan
from proxy.quantile_release import answer_notes
from proxy.rewrite import core as C
from proxy.unsettled import NOTHING, Unsettled, has_window


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    noise_scale: float | None  # σ or b of the column's noise, when it is one statistic
    half_width_95: float | None  # 95% two-sided half-width of that noise


@dataclass(frozen=True)
class Clipping:
    """A DP estimate of how much per-person bounding changed the answer: per shown row,
    the noisy number of people whose contribution bounding changed (more than C rows in
    the group, more than K groups, or a value outside a column's declared bounds, which
    was clamped to them) and the noisy number of people; their totals and ratio."""

    max_rows_per_group: int
    max_groups: int
    people_cut: tuple[float, ...]  # per shown row (raw noisy values)
    people: tuple[float, ...]  # per shown row (raw noisy values)
    total_cut: float
    total_people: float
    total_cut_half_width: float  # 95% half-width of the noise in total_cut
    declared_bounds: tuple[C.DeclaredBound, ...] = ()  # the clamps counted too

    @property
    def fraction(self) -> float:
        return max(0.0, self.total_cut) / max(1.0, self.total_people)

    @property
    def fraction_at_least(self) -> float:
        """The fraction cut, at the low end of the noise's 95% interval."""
        return max(0.0, self.total_cut - self.total_cut_half_width) / max(1.0, self.total_people)

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rows_per_group": self.max_rows_per_group,
            "max_groups": self.max_groups,
            "people_cut": list(self.people_cut),
            "people": list(self.people),
            "total_people_cut": self.total_cut,
            "total_people": self.total_people,
            "fraction_cut": self.fraction,
            "fraction_cut_at_least": self.fraction_at_least,
            "declared_bounds": [
                {
                    "column": b.column,
                    "lower": b.lower,
                    "upper": b.upper,
                    "per_person": b.per_person,
                }
                for b in self.declared_bounds
            ],
        }


# Above this share of people cut, an answer says in words what bounding did to it.
CLIPPING_WARNING = 0.05


@dataclass(frozen=True)
class PrivacyInfo:
    epsilon: float  # charged by this answer (0 on a cache hit)
    delta: float
    rho: float | None
    mechanism: str
    cached: bool
    charge_id: int | None  # the charge that paid for these values
    populations: tuple[str, ...]
    remaining: dict[str, float]  # ε left per charged population
    partition: dict[str, Any]
    columns: tuple[ColumnInfo, ...]
    query_epsilon: float  # what the release cost when it was first paid for
    data_version: str = ""  # the data the release describes
    counts: str = "at_least_zero"  # how counts are shown: "at_least_zero" or "raw"
    # How much this answer raised the composed ε of each charged population's persons
    # who have spent the most (0 on a replay). Composition makes it smaller than
    # ``epsilon`` once a population has spent something.
    population_epsilon_moved: dict[str, float] | None = None
    clipping: Clipping | None = None  # how much bounding cut (None: not estimated)
    # Set for answers that read no person data (public tables, constants): exact and
    # free, e.g. "public data, no privacy cost" (proxy/public_queries.py).
    exact: str | None = None
    # Output columns that read a MEDIAN/quantile/MIN/MAX draw: target, grid, rank error
    # and why they have no interval (proxy/quantile_release.py).
    quantiles: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The one rendering of an answer's privacy metadata, shared by every door."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "mechanism": self.mechanism,
            "cached": self.cached,
            "charge_id": self.charge_id,
            "populations": list(self.populations),
            "remaining": dict(self.remaining),
            "partition": dict(self.partition),
            "columns": [asdict(c) for c in self.columns],
            "query_epsilon": self.query_epsilon,
            "data_version": self.data_version,
            "counts": self.counts,
            "population_epsilon_moved": dict(self.population_epsilon_moved or {}),
            "clipping": None if self.clipping is None else self.clipping.to_dict(),
            "exact": self.exact,
            "quantiles": [dict(q) for q in self.quantiles],
        }


@dataclass(frozen=True)
class Result:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    privacy: PrivacyInfo
    warnings: tuple[str, ...] = ()
    cache_key: str = ""
    # Per cell: the 95% half-width of the noise where dpsql can state it (COUNT and SUM
    # columns exactly; AVG by the delta method on its noisy sum and count), else None.
    intervals: tuple[tuple[float | None, ...], ...] = ()
    # The query's text as answered when the engine changed it before planning (its
    # clock calls replaced by the time it arrived, proxy/clock.py): asked again, this
    # text means the same answer, the one a door must store to serve it again.
    answered_sql: str | None = None
    # What another draw of the noise could have answered otherwise (proxy/unsettled.py):
    # (row, column) of shown cells that are not numbers but are computed from noisy ones
    # and could read otherwise, and the shown rows HAVING or ORDER BY … LIMIT could have
    # left out.
    unsettled_cells: tuple[tuple[int, int], ...] = ()
    unsettled_rows: tuple[int, ...] = ()
    # The warnings (among ``warnings``) that say so: an answer read by an outer query
    # restates them as its own (proxy/engine.py, _run_nested).
    doubts: tuple[str, ...] = ()


def build_result(
    plan: Plan,
    names: list[str],
    rows: list[tuple[Any, ...]],
    *,
    charge_id: int | None,
    cached: bool,
    remaining: dict[str, float],
    moved: dict[str, float] | None = None,
    simulated: dict[tuple[int, int], float | None] | None = None,
    unsettled: Unsettled | None = None,
) -> Result:
    """The answer to a plan from its post-processed rows (hidden parts included), the
    simulated widths of its arithmetic cells, by (released row, output column), and what
    the noise could have answered otherwise."""
    clipping, clip_warnings = _clipping(plan, names, rows)
    doubts = _doubts(plan, names, rows, unsettled or NOTHING)
    names, rows, intervals, unreliable = _intervals(plan, names, rows, simulated or {})
    partition: dict[str, Any]
    if plan.threshold is None:
        partition = {
            "strategy": "public_domain" if plan.key_columns else "none",
            "groups": len(plan.domain or ()),
        }
    else:
        partition = {
            "strategy": "threshold",
            "mechanism": plan.threshold.mechanism,
            "tau": plan.threshold.tau,
            "scale": plan.threshold.scale,
            "delta": plan.threshold.delta,
        }
    columns = _column_infos(plan)
    drawn, drawn_notes = answer_notes(plan)
    return Result(
        columns=tuple(names),
        rows=rows,
        privacy=PrivacyInfo(
            epsilon=0.0 if cached else plan.epsilon,
            delta=0.0 if cached else plan.delta,
            rho=None if cached or plan.rho is None else plan.rho,
            mechanism=plan.mechanism,
            cached=cached,
            charge_id=charge_id,
            populations=plan.charge_targets,
            remaining=remaining,
            partition=partition,
            columns=columns,
            query_epsilon=plan.epsilon,
            data_version=plan.data_version,
            counts="raw" if plan.raw_noise else "at_least_zero",
            population_epsilon_moved=dict(moved or {}),
            clipping=clipping,
            quantiles=drawn,
        ),
        warnings=_warnings(columns, names, rows)
        + _imprecise(columns, rows, intervals)
        + unreliable
        + clip_warnings
        + drawn_notes
        + doubts.warnings
        + _selection_note(plan)
        + _domain_note(plan)
        + plan.notes,
        cache_key=plan.cache_key,
        intervals=intervals,
        unsettled_cells=doubts.cells,
        unsettled_rows=doubts.rows,
        doubts=doubts.warnings,
    )


@dataclass(frozen=True)
class _Doubts:
    cells: tuple[tuple[int, int], ...]  # (shown row, column)
    rows: tuple[int, ...]  # shown rows
    warnings: tuple[str, ...]


def _doubts(
    plan: Plan, names: list[str], rows: list[tuple[Any, ...]], found: Unsettled
) -> _Doubts:
    """``found`` (by released row) as shown rows and cells, and the words that say it:
    every cell and row choice another draw of the noise could change is named."""
    if not (found.cells or found.shown or found.left_out or found.failed or found.by_quantile):
        return _Doubts((), (), ())
    shown = len(plan.output_names)
    at = names.index(ROW) if ROW in names else None
    where = {} if at is None else {int(r[at]): i for i, r in enumerate(rows)}
    cells = tuple(
        sorted((where[row], c) for row, c in found.cells if row in where and c < shown)
    )
    kept = tuple(sorted(where[row] for row in found.shown if row in where))
    if found.failed:
        words: tuple[str, ...] = (
            f"the answer chooses rows or computes values that are not numbers from noisy "
            f"values{f' ({found.chooser})' if found.chooser else ''}, and dpsql could not "
            "simulate how the noise moves them: rows near a cut-off, and such values, may "
            "be otherwise",
        )
    else:
        words = doubt_warnings(
            plan.output_names,
            len(rows),
            cells,
            kept,
            len(found.left_out),
            found.left_out_total,
            found.chooser,
        )
    if found.by_quantile:
        words += (
            f"the rows shown were chosen ({found.chooser}) by a DP median, quantile, MIN "
            "or MAX, whose error is in ranks (see its note) and is not simulated: rows "
            "near the cut-off may be otherwise",
        )
    return _Doubts(cells, kept, words)


def doubt_warnings(
    columns: tuple[str, ...] | list[str],
    shown_rows: int,
    cells: tuple[tuple[int, int], ...],
    rows: tuple[int, ...],
    could_show: int,
    left_out: int | None,
    chooser: str,
) -> tuple[str, ...]:
    """The words for what another draw of the noise could have answered otherwise:
    one warning per column with unsettled cells, and one for the rows (``could_show`` of
    the ``left_out`` rows not shown could have been; None: how many were left out is not
    known, as of an outer query over an inner answer)."""
    out = []
    for c in sorted({c for _, c in cells}):
        k = sum(1 for _, col in cells if col == c)
        out.append(
            f"{k} of {shown_rows} values in column {columns[c]!r} could be "
            "otherwise: a comparison, a CASE or a condition over noisy values gives them, "
            "and within the 95% interval of those values it also gives another result "
            "(another value, or NULL for a number or a number for NULL); treat them as "
            "undecided (a larger epsilon narrows the noise)"
        )
    if rows or could_show:
        hidden = (
            f"{could_show} {'row' if could_show == 1 else 'rows'} not shown"
            if left_out is None
            else f"{could_show} of the {left_out} rows left out"
        )
        out.append(
            f"the rows shown were chosen by noisy values ({chooser}): {len(rows)} of "
            f"the {shown_rows} rows shown could have been left out, and {hidden} "
            "could have been shown, with another draw of the noise (each in at least 1 of "
            "40 simulated draws); rows near the cut-off are undecided (a larger epsilon "
            "narrows the noise)"
        )
    return tuple(out)


def _selection_note(plan: Plan) -> tuple[str, ...]:
    """Partition selection drops groups with few people, and how many it dropped is not
    released: say so on every answer it applies to (a fact of the plan, not the data;
    an audit found 292 of 438 PUMS income groups gone with no word, 2026-12-03)."""
    if plan.threshold is None:
        return ()
    # A window's intervals simulate the noise of the groups shown only.
    windowed = (
        "; a window (a share of the total, a rank, a running sum) reads only the groups "
        "shown, so the missing ones are in none of its values and none of its intervals, "
        "which can then be far too narrow (an honesty probe saw one month released alone "
        "as 100% ± 0 of a total it held 16% of)"
        if has_window(plan.outer_sql)
        else ""
    )
    return (
        "groups are shown only when their noisy count of people passes a threshold of "
        f"about {plan.threshold.tau:.0f} (partition selection): groups with fewer people "
        "are missing from this answer, and a missing group may still exist in the data"
        f"{windowed}; declare the key's values in the policy (a public domain) to get "
        "every group",
    )


def _domain_note(plan: Plan) -> tuple[str, ...]:
    """A public domain releases exactly its values: rows whose key is NULL or another
    value are in no group, where SQL would show them as groups of their own. Whether
    such rows exist is the data's, so the answer says it of every public-domain answer
    (an answer oracle, 2026-12-05: 138 of 4,000 prompts with a NULL model left out of
    a GROUP BY model, and of its percent-of-total window, with no word)."""
    if plan.threshold is not None or not plan.key_columns or plan.domain is None:
        return ()
    return (
        "the GROUP BY key has declared values (a public domain): each of them is a row, "
        "and rows whose key is NULL or not one of them (an unmatched LEFT JOIN, a CASE "
        "without ELSE) are counted in no group, where SQL would show them as groups of "
        "their own",
    )


def _column_infos(plan: Plan) -> tuple[ColumnInfo, ...]:
    return tuple(ColumnInfo(name, scale, half) for name, scale, half in plan.column_noise)


def _clipping(
    plan: Plan, names: list[str], rows: list[tuple[Any, ...]]
) -> tuple[Clipping | None, tuple[str, ...]]:
    if CLIP_CUT not in names:
        return None, ()
    cut_at, people_at = names.index(CLIP_CUT), names.index(CLIP_PEOPLE)
    # Summed raw: clamping each noisy row at 0 first would bias the total upwards.
    cut = tuple(float(r[cut_at] or 0) for r in rows)
    people = tuple(float(r[people_at] or 0) for r in rows)
    std = next(
        (
            Mechanism(n.descriptor.mechanism).std(n.descriptor.scale)
            for n in plan.noise
            if n.statistic.kind == C.CLIPPED
        ),
        0.0,
    )
    clip = Clipping(
        plan.max_rows,
        plan.max_groups,
        cut,
        people,
        sum(cut),
        sum(people),
        Z_975 * std * math.sqrt(len(rows)),
        plan.declared_bounds,
    )
    # Warn only when the noise cannot explain it: at the low end of its interval.
    groups = f" or rows in more than {plan.max_groups} groups" if plan.max_groups > 1 else ""
    clamps = _clamp_words(plan.declared_bounds)
    # People are counted whole: a positive low end of the interval means at least one.
    at_least = math.ceil(clip.total_cut - clip.total_cut_half_width)
    if clip.total_people < 1:
        return clip, ()
    if at_least < 1:
        # The noise cannot tell the cut from none: said so, with how many it may be
        # (every answer says how much bounding changed it; this one was silent).
        return clip, (_unmeasured_cut(plan, clip),)
    if plan.declared_bounds and all(b.per_person for b in plan.declared_bounds):
        return clip, (_per_person_warning(clip, at_least),)
    if clip.fraction_at_least <= CLIPPING_WARNING:
        # Few people, but maybe many rows: those cut are the ones with the most (an
        # audit: 0.3% of the people cut took 16% of one group's rows, with no word).
        return clip, (
            f"at least {at_least} {'person' if at_least == 1 else 'people'} (about "
            f"{clip.fraction:.1%} of those in these groups) had more than {plan.max_rows} "
            f"rows in a group{groups}{clamps[0]}; dpsql counted at most that much of each"
            f"{clamps[1]}, so counts and sums can be lower than the true totals by a larger "
            "share than theirs (those cut have the most rows), and averages and ratios "
            "shift when their rows differ from the others'. Ask with a larger "
            f"{_knobs(plan)} (up to the policy's limit) to see more of them, at the cost "
            f"of more noise{clamps[2]}.",
        )
    return clip, (
        f"about {clip.fraction:.0%} (at least {clip.fraction_at_least:.0%}) of the people "
        f"in these groups had more than "
        f"{plan.max_rows} rows in a group{groups}{clamps[0]}: dpsql counted at most that "
        f"much of each of them{clamps[1]}, so counts and sums are lower than the true "
        "totals, and by a larger share than the people's: those cut are the ones with the "
        "most rows (an audit saw counts 26-42% low where 13-14% of the people were cut); "
        "averages and ratios shift too when their rows differ from the others' (an "
        "honesty probe saw an average 12% low where heavy users' rows differed). Ask with "
        f"a larger {_knobs(plan)} (up to the policy's limit) to see more of them, at the "
        f"cost of more noise{clamps[2]}.",
    )


def _knobs(plan: Plan) -> str:
    """The request's caps that would keep more of those cut: the rows per group, and the
    groups per person where a person can be in more than one (an hourly key with K = 4
    kept 4 of each person's 24 hours, and the advice named the rows alone)."""
    return "max_rows_per_group or max_groups" if plan.max_groups > 1 else "max_rows_per_group"


def _bounds_named(bounds: tuple[C.DeclaredBound, ...]) -> str:
    """The declared bounds a query clamps to, as the warnings name them."""
    return "; ".join(f"{b.column} outside [{b.lower:,.6g}, {b.upper:,.6g}]" for b in bounds)


def _unmeasured_cut(plan: Plan, clip: Clipping) -> str:
    """The clipping estimate within its noise: the bounds, and from none to how many
    people they may have changed (the estimate's upper end)."""
    upper_end = math.floor(clip.total_cut + clip.total_cut_half_width)
    most = max(0, min(upper_end, math.floor(clip.total_people)))
    clamped = _bounds_named(plan.declared_bounds)
    if plan.declared_bounds and all(b.per_person for b in plan.declared_bounds):
        did = f"set each person's value of {clamped} to the nearest bound"
    else:
        groups = f" and {plan.max_groups} groups per person" if plan.max_groups > 1 else ""
        did = f"counted at most {plan.max_rows} rows per person in a group{groups}"
        did += f", and set values of {clamped} to the nearest bound" if clamped else ""
    return (
        f"dpsql {did}; how many people that changed is within the noise of its estimate "
        f"at this budget: from none to about {most:,} of the "
        f"{max(0.0, clip.total_people):,.0f} people in these groups (a larger epsilon "
        "measures it)"
    )


def _per_person_warning(clip: Clipping, at_least: int) -> str:
    """A per-person subquery's clipping: its values were clamped, no row was cut."""
    named = _bounds_named(clip.declared_bounds)
    who = (
        f"at least {at_least} {'person' if at_least == 1 else 'people'} (about "
        f"{clip.fraction:.1%} of those in these groups)"
        if clip.fraction_at_least <= CLIPPING_WARNING
        else f"about {clip.fraction:.0%} (at least {clip.fraction_at_least:.0%}) of the "
        "people in these groups"
    )
    return (
        f"{who} had a per-person value beyond its bounds ({named}): dpsql set each such "
        "value to the nearest bound before the outer query read it, so sums and averages "
        "of these values are pulled towards the bounds, by more than the noise says. The "
        "bounds follow from the policy (the tables' max_rows_per_group and column "
        "bounds): wider ones keep more of these values, at the cost of more noise."
    )


def _clamp_words(bounds: tuple[C.DeclaredBound, ...]) -> tuple[str, str, str]:
    """The clipping warning's words for the declared bounds it counts: the reason, what
    dpsql did, and the way round (empty when the query clamps nothing)."""
    if not bounds:
        return "", "", ""
    named = ", ".join(f"{b.column} outside [{b.lower:g}, {b.upper:g}]" for b in bounds)
    return (
        f", or a value of {named}",
        " and set each such value to the nearest bound",
        "; the bounds are the policy's, so a value beyond them is counted at the bound "
        "(filter on the column to see how many rows lie beyond it)",
    )


def _intervals(
    plan: Plan,
    names: list[str],
    rows: list[tuple[Any, ...]],
    simulated: dict[tuple[int, int], float | None],
) -> tuple[list[str], list[tuple[Any, ...]], tuple[tuple[float | None, ...], ...], tuple[str, ...]]:
    """Strip the hidden AVG parts from the answer and turn them into half-widths
    (Fieller's interval of the centred sum over the count, within the bounds the mean is
    clamped to); AVG cells whose noisy count is within its own noise of 0 get the whole
    range and a warning."""
    shown = len(plan.output_names)
    base = [half for _, _, half in plan.column_noise]
    position = {name: i for i, name in enumerate(names)}
    cells = []
    tiny = dict.fromkeys((a.index for a in plan.avg_intervals), 0)
    at = position.get(ROW)
    sim_columns = {c for _, c in simulated}
    z = z_95(Mechanism(plan.mechanism))
    unstable = dict.fromkeys(sorted(sim_columns), 0)
    infinite = dict.fromkeys(range(shown), 0)
    for row in rows:
        widths: list[float | None] = list(base)
        if at is not None:
            for c in sim_columns:
                widths[c] = simulated.get((int(row[at]), c))
                if widths[c] is None and c < shown and is_finite_number(row[c]):
                    unstable[c] += 1
        for a in plan.avg_intervals:
            s = row[position[f"__ci{a.index}_s"]]
            n = row[position[f"__ci{a.index}_n"]]
            value = row[a.index]
            if s is None or n is None or not is_number(value):
                continue
            found = (
                ratio_interval(float(s), float(n), a.std_sum, a.std_count, z)
                if float(n) >= z * a.std_count
                else None
            )
            if found is None:
                # The mean divides by a count that may well be 0: Fieller's set is
                # unbounded, and what holds is the range the mean is clamped to.
                tiny[a.index] += 1
                found = (a.lower - a.centre, a.upper - a.centre)
            low = min(max(a.centre + found[0], a.lower), a.upper)
            high = min(max(a.centre + found[1], a.lower), a.upper)
            width = max(high - float(value), float(value) - low, 0.0)
            widths[a.index] = width if math.isfinite(width) else None
        # Text has no half-width: a constant label column (SELECT 'All' AS segment) was
        # shown as "All ± 0"
        for c in range(min(shown, len(widths))):
            value = row[c]
            if isinstance(value, str):
                widths[c] = None
            elif isinstance(value, float) and not math.isfinite(value):
                # (DECIMAL and integer cells are never infinite)
                infinite[c] += 1
        cells.append(tuple(widths))
    warnings = tuple(
        f"{k} of {len(rows)} values in column {plan.output_names[a.index]!r} average over a "
        f"noisy count below its 95% noise half-width ({z * a.std_count:.3g}): they are "
        f"unreliable; their interval is the whole declared range [{a.lower:g}, {a.upper:g}]"
        for a, k in zip(plan.avg_intervals, tiny.values(), strict=True)
        if k
    ) + tuple(
        # Every number carries its uncertainty, or a word on why it has none.
        f"{k} of {len(rows)} values in column {plan.output_names[c]!r} have no interval: "
        "near the released values the expression fails, or a HAVING beside a window "
        "keeps or drops the row, so the noise gives them no stable width; treat them "
        "as imprecise (a larger epsilon narrows the noise)"
        for c, k in unstable.items()
        if k
    ) + tuple(
        # A ratio over a count shown as 0 (below 0 shows as 0) is infinite: it has no
        # width, and the warning above counts finite cells only (an honesty probe,
        # 2026-12-06: 43 infinite cells in 20 answers with no word).
        f"{k} of {len(rows)} values in column {plan.output_names[c]!r} are infinite or "
        "not a number: they divide by a noisy value shown as 0 (a count below 0 shows as "
        "0), so they say nothing about the data; filter such rows out (e.g. HAVING "
        "COUNT(*) > a few half-widths) or ask with a larger epsilon"
        for c, k in infinite.items()
        if k
    )
    return names[:shown], [tuple(r[:shown]) for r in rows], tuple(cells), warnings


# A cell whose 95% half-width is at least this share of its value is flagged (issue #12:
# every cell more than 10% off must carry a warning; one naming its column suffices).
LOW_PRECISION = 0.10


def _imprecise(
    columns: tuple[ColumnInfo, ...],
    rows: list[tuple[Any, ...]],
    intervals: tuple[tuple[float | None, ...], ...],
) -> tuple[str, ...]:
    """One warning per column with cells whose 95% interval reaches ±10% of the value:
    how many, how wide, and what narrows them. Cells already said to be within noise of
    0 (:func:`_warnings`) and cells without an interval (their own warning) are not
    counted again."""
    out = []
    for i, info in enumerate(columns):
        ratios = []
        for row, widths in zip(rows, intervals, strict=True):
            value, width = row[i], widths[i]
            if width is None or not is_number(value):
                continue
            value = float(value)  # a DECIMAL cell too (Decimal and float do not mix)
            if info.half_width_95 is not None and abs(value) < info.half_width_95:
                continue  # said by _warnings
            if width >= LOW_PRECISION * abs(value):
                ratios.append(width / abs(value) if value else math.inf)
        if ratios:
            finite = [r for r in ratios if math.isfinite(r)]
            span = f"±{min(finite):.0%} to ±{max(finite):.0%} of the value" if finite else ""
            if len(finite) < len(ratios):  # a value of 0 with any width at all
                zeros = f"{len(ratios) - len(finite)} of them 0, ± a width of their own"
                span = f"{span} ({zeros})" if span else zeros
            out.append(
                f"{len(ratios)} of {len(rows)} values in column {info.name!r} are imprecise: "
                f"their 95% interval is {span}; a larger epsilon or a coarser "
                "key (fewer, larger groups) narrows it"
            )
    return tuple(out)


def _warnings(
    columns: tuple[ColumnInfo, ...], names: list[str], rows: list[tuple[Any, ...]]
) -> tuple[str, ...]:
    warnings = []
    for i, info in enumerate(columns):
        if info.half_width_95 is None:
            continue
        small = sum(
            1 for r in rows if is_number(r[i]) and abs(r[i]) < info.half_width_95
        )
        if small:
            warnings.append(
                f"{small} of {len(rows)} values in column {info.name!r} are smaller than their "
                f"95% noise half-width ({info.half_width_95:.3g}): treat them as indistinguishable from 0"
            )
    return tuple(warnings)
