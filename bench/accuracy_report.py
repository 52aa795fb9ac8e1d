"""Goals, tables and the BENCHMARKS.md section of the accuracy benchmark, from its
measurements (plain data, as ``bench/accuracy.py: run`` returns them)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

CONFIGS = ("fixed", "auto", "pums")  # the dpsql configurations (not SmartNoise)
COVERAGE_GOAL = 0.93
# A question misses the coverage goal only when its shortfall is beyond sampling error:
# more than this many binomial standard deviations below 93%.
COVERAGE_Z = 3.0


@dataclass(frozen=True)
class Goal:
    goal: str
    measured: str
    met: bool
    note: str


def _find(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((q["results"] for q in data["questions"] if q["name"] == name), None)


def _pct(x: Any) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def coverage_shortfalls(data: dict[str, Any]) -> list[tuple[str, str, float, int]]:
    """(question, configuration, coverage, cells) for every question whose coverage is
    clearly (beyond sampling error) below the goal."""
    out = []
    for q in data["questions"]:
        for c in CONFIGS:
            m = q["results"].get(c)
            if not m or not m["with_interval"]:
                continue
            n, cov = m["with_interval"], m["covered"] / m["with_interval"]
            sd = math.sqrt(COVERAGE_GOAL * (1 - COVERAGE_GOAL) / n)
            if cov < COVERAGE_GOAL - COVERAGE_Z * sd:
                out.append((q["name"], c, cov, n))
    return out


def goals(data: dict[str, Any]) -> list[Goal]:
    """The issue's goals at ε = 1, judged on today's demo policy (``auto``) and on PUMS,
    with the fixed caps' figure beside each."""
    out = []
    for name, limit, label in (("prompts by region", 0.15,
                                "COUNT(*) of prompts by region within 15% of exact"),
                               ("mean tokens_out by plan", 0.10,
                                "AVG(tokens_out) by plan within 10% of exact")):
        r = _find(data, name)
        if r is None or "auto" not in r:
            continue
        a, f = r["auto"], r.get("fixed", {})
        out.append(Goal(
            label,
            f"worst group's median error {_pct(a['worst_rel_error'])} with auto caps "
            f"(C = {a['cap']}); {_pct(f.get('worst_rel_error'))} with fixed caps "
            f"(C = {f.get('cap')})",
            a["worst_rel_error"] <= limit,
            f"median over groups {_pct(a['median_rel_error'])} (auto); bias of the bounded "
            f"value {_pct(a['bias'])} (auto), {_pct(f.get('bias'))} (fixed)"))
    cov = {c: [0, 0] for c in CONFIGS}
    off = {c: [0, 0, 0, 0, 0] for c in CONFIGS}
    for q in data["questions"]:
        for c, m in q["results"].items():
            if c in cov:
                cov[c][0] += m["covered"]
                cov[c][1] += m["with_interval"]
                off[c][0] += m["off_cells_warned"]
                off[c][1] += m["off_cells"]
                off[c][2] += m["off_cells_wide"]
                off[c][3] += m["cells"] - m["off_cells"]
                off[c][4] += m["cells_wide"] - m["off_cells_wide"]
    if any(v[1] for v in cov.values()):
        total = sum(v[0] for v in cov.values()) / sum(v[1] for v in cov.values())
        short = coverage_shortfalls(data)
        out.append(Goal(
            "interval coverage of the bounded value ≥ 93%",
            f"{total:.1%} over all cells with an interval ("
            + ", ".join(f"{c} {v[0] / v[1]:.1%}" for c, v in cov.items() if v[1]) + "); "
            + ("below it beyond sampling error: " + "; ".join(
                f"{n} ({c}) {x:.1%} of {k:,}" for n, c, x, k in short) if short
               else "no question below it beyond sampling error"),
            total >= COVERAGE_GOAL and not short,
            f"{data['runs']} repetitions per question"))
    if any(v[1] for v in off.values()):
        judged = [c for c in ("auto", "pums") if off[c][1]]
        out.append(Goal(
            "every cell more than 10% off its exact value carries a warning",
            "; ".join(f"{c}: {v[0]:,} of {v[1]:,} ({v[0] / v[1]:.1%})"
                      for c, v in off.items() if v[1]),
            all(off[c][0] == off[c][1] for c in judged),
            "judged on today's policies (auto, PUMS). A warning on every cell whose 95% "
            "interval is at least 10% of its value would reach " + ", ".join(
                f"{c} {v[2]:,} of the {v[1]:,} off cells and {v[4]:,} of the {v[3]:,} within "
                "10%" for c, v in off.items() if v[1])))
    return out


def common_error(m: dict[str, Any] | None, groups: list[str]) -> float:
    """Median over ``groups`` of a measure's per-cell median relative error."""
    if m is None:
        return math.nan
    found = [m["cell_errors"][k] for k in groups if k in m["cell_errors"]]
    return statistics.median(found) if found else math.nan


def cells(m: dict[str, Any] | None) -> list[str]:
    """error (worst cell) | bias | coverage | warned | off cells warned."""
    if m is None:
        return ["—"] * 5
    if m["error"]:
        return ["refused: " + m["error"][:80], "", "", "", ""]
    rows = (f"; {m['rows_per_run']:.1f}/{m['exact_groups']} groups"
            if m["rows_per_run"] < m["exact_groups"] - 1e-9 else "")
    err = (f"{_pct(m['median_rel_error'])} ({_pct(m['worst_rel_error'])}{rows})"
           if m["rows_per_run"] > 0 else f"nothing released ({m['exact_groups']} groups)")
    cov = _pct(m["covered"] / m["with_interval"]) if m["with_interval"] else "—"
    if m["null_intervals"]:
        cov += f" ({m['null_intervals']} null)"
    off = (f"{m['off_cells_warned']:,}/{m['off_cells']:,} ({m['off_cells_wide']:,} wide)"
           if m["off_cells"] else "none off")
    warned = _pct(m["warned_runs"] / m["runs"]) if m["runs"] else "—"
    return [err, _pct(m["bias"]), cov, warned, off]


def smartnoise_cells(dp: dict[str, Any] | None, sn: dict[str, Any] | None,
                     q: dict[str, Any]) -> list[str]:
    """SmartNoise's error on the groups it releases in most runs | dpsql's on them."""
    if not q.get("smartnoise_sql"):
        return ["not asked", ""]
    if sn is None:
        return ["skipped", ""]
    if sn["error"]:
        return ["refused: " + sn["error"][:80], ""]
    if not sn["common_groups"]:
        return [f"nothing released in most runs ({sn['rows_per_run']:.1f} of "
                f"{sn['exact_groups']} groups per run)", "—"]
    rows = (f" ({len(sn['common_groups'])}/{sn['exact_groups']} groups)"
            if len(sn["common_groups"]) < sn["exact_groups"] else "")
    return [_pct(common_error(sn, sn["common_groups"])) + rows,
            _pct(common_error(dp, sn["common_groups"]))]


DEMO_HEAD = ["question", "fixed: error (worst)", "bias", "coverage", "warned", "off warned",
             "auto: error (worst)", "bias", "coverage", "warned", "off warned"]
PUMS_HEAD = ["question", "dpsql: error (worst)", "bias", "coverage", "warned", "off warned",
             "SmartNoise error", "dpsql, same groups"]


def demo_rows(data: dict[str, Any]) -> list[list[str]]:
    return [[q["name"], *cells(q["results"].get("fixed")), *cells(q["results"].get("auto"))]
            for q in data["questions"] if q["data"] == "demo"]


def pums_rows(data: dict[str, Any]) -> list[list[str]]:
    return [[q["name"], *cells(q["results"].get("pums")),
             *smartnoise_cells(q["results"].get("pums"), q["results"].get("smartnoise"), q)]
            for q in data["questions"] if q["data"] == "pums"]


def _draws(data: dict[str, Any]) -> str:
    draws = data.get("auto_cap_draws") or {}
    return "; ".join(
        f"{t}: " + ", ".join(f"C = {c} in {n}" for c, n in caps.items())
        + f" of {sum(caps.values())}" for t, caps in draws.items())


def print_table(data: dict[str, Any]) -> None:
    for head, rows in ((DEMO_HEAD, demo_rows(data)), (PUMS_HEAD, pums_rows(data))):
        widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
        for line in [head, *rows]:
            print("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
        print()
    print(f"{data['runs']} repetitions at ε = {data['epsilon']:g} per query. error: median over "
          "cells of each cell's median relative error (worst cell's); bias: of the "
          "noise-free bounded value; off warned: cells > 10% off whose answer warned about "
          "them (how many of them had a 95% interval ≥ 10% of the value)")
    print(f"auto caps of this run: {data['auto_caps']}")
    if data.get("auto_cap_draws"):
        print(f"auto caps over independent histogram releases: {_draws(data)}")
    for g in goals(data):
        print(f"[{'met' if g.met else 'MISSED'}] {g.goal}: {g.measured} ({g.note})")


# --- BENCHMARKS.md ------------------------------------------------------------------------
def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(data: dict[str, Any], figure: str | None, provenance: str) -> str:
    """The "Accuracy at ε = 1" section."""
    runs, eps = data["runs"], data["epsilon"]
    size = data["demo_size"]
    sn = data.get("smartnoise") or {}
    parts = [
        f"## 8. Accuracy at ε = {eps:g}",
        "",
        f"`bench/accuracy.py` (issue #12): {len(data['questions'])} questions an analyst "
        f"would ask, each answered {runs} times at ε = {eps:g} (δ = {data['delta']:g}) per "
        "query, every time a fresh charged release, against the exact answer of plain "
        f"DuckDB. Demo data: the generator's default ({size['people']:,} people, "
        f"{size['prompts']:,} prompts, seed {size['seed']}); PUMS: `sample_data/pums` "
        "(1,000 people, one row each). Reproduce: `.venv/bin/python -m bench.accuracy` "
        "(prints these tables; `--quick` for 20 repetitions) or "
        "`.venv/bin/python -m bench.run --only accuracy` (this section).",
        "",
        "* **fixed**: the demo policy with the row caps it had before issue #12 (prompts "
        "C = 10, tickets C = 3; K = 4 and 2 groups). **auto**: today's demo policy, "
        "`max_rows_per_group = \"auto\"`: each query's C chosen from a DP histogram of "
        "rows per person (released once per table) by what the query releases. Both with today's bounding (per-person sums scaled to C rows at "
        "the person's own mean), clipping estimate and intervals.",
        "* **error**: per cell, the median over the runs of |released − exact| / |exact|; "
        "shown is the median over the question's cells and, in brackets, the worst cell "
        "(and released groups per run when partition selection drops some). **bias**: the "
        "same for the noise-free *bounded* value (the core SQL run without noise, through "
        "the select list): what bounding alone changed. **coverage**: share of released "
        "cells whose 95% interval contains the bounded value (intervals describe noise, "
        "not bounding; a core that samples groups per person is re-run with the seed the "
        "release drew); *null*: cells released without an interval. **warned**: answers "
        "with any warning. **off warned**: of the cells more than 10% off their exact "
        "value, those whose answer carried a warning about them (one naming their column, "
        "or one about the whole answer: clipping, rows left out, empty release); *wide*: "
        "of them, those whose 95% interval was at least 10% of the value (null included).",
        "",
    ]
    if figure:
        parts += [f"![accuracy](bench/figures/{figure})", ""]
    parts += [f"### 7a. Demo data: fixed caps against auto caps ({runs} runs per question)", "",
              _table(DEMO_HEAD, demo_rows(data)), ""]
    caps = ", ".join(f"{t}: C = {c}" for t, c in data["auto_caps"].items())
    line = f"Auto caps in this run (per question): {caps}."
    if data.get("auto_cap_draws"):
        line += (" The caps rest on one noisy histogram per table (`auto_bounds_epsilon`, 0.25 in the demo policy, paid once); over "
                 f"independent releases they came out as: {_draws(data)}.")
    parts += [line, ""]
    sn_note = (f"SmartNoise SQL {sn['versions'].get('smartnoise-sql', '?')} (its own venv, "
               "`bench/peers/smartnoise.py`; per-statistic ε chosen so its odometer charges "
               f"ε = {eps:g} per query; its VARIANCE/STDDEV are the population forms and are "
               "compared with those)" if sn.get("versions") else
               f"SmartNoise SQL: not run ({sn.get('skipped', 'not asked')})")
    parts += [
        f"### 7b. PUMS: dpsql against SmartNoise SQL ({runs} runs per question)",
        "",
        f"{sn_note}. SmartNoise's thresholding drops small groups; its error is over the "
        "groups it releases in at least half of its runs, and *dpsql, same groups* is "
        "dpsql's error on exactly those groups. PUMS has one row per person (C = 1, K = 1): "
        "there is nothing to choose, so it has one dpsql column.",
        "",
        _table(PUMS_HEAD, pums_rows(data)),
        "",
        "### 7c. The questions",
        "",
        _table(["question", "data", "SQL", "exercises"],
               [[q["name"], q["data"], f"`{q['sql']}`", q["what"]] for q in data["questions"]]),
        "",
        "### 7d. Goals (issue #12)",
        "",
        _table(["goal", "measured", "verdict", "note"],
               [[g.goal, g.measured, "met" if g.met else "missed", g.note]
                for g in goals(data)]),
        "",
        "Warnings seen with auto caps on three of the issue's questions (distinct texts, shortened):",
        "",
    ]
    for name in ("prompts by region", "mean tokens_out by plan", "top 10 busiest days"):
        r = _find(data, name) or {}
        texts = (r.get("auto") or {}).get("warnings") or ["(none)"]
        parts += [f"* {name}: " + " / ".join(f"“{t}”" for t in texts)]
    parts += ["", provenance, ""]
    return "\n".join(parts)
