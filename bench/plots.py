"""Figures for BENCHMARKS.md, drawn from the harness's results (matplotlib, Agg backend)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SYSTEM_COLORS = {"dpsql gaussian": "#1f77b4", "dpsql laplace": "#2ca02c",
                 "smartnoise": "#d62728"}


def _data(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    section = results.get("sections", {}).get(name)
    return section["data"] if section else None


def scale(data: dict[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for query, marker in (("public key", "o"), ("private key", "s")):
        pts = sorted((p for p in data["points"] if p["query"] == query), key=lambda p: p["rows"])
        rows = [p["rows"] for p in pts]
        ax.plot(rows, [p["miss_s"] for p in pts], marker=marker, color="#1f77b4",
                label=f"dpsql cache miss, {query}")
        ax.plot(rows, [p["floor_s"] for p in pts], marker=marker, color="#7f7f7f",
                linestyle="--", label=f"floor (bare pre-aggregation), {query}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows (prompts; people = rows / 10)")
    ax.set_ylabel("latency, s (median)")
    ax.set_title("Scale: dpsql vs the DuckDB floor")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def smartnoise_latency(data: dict[str, Any], path: Path) -> None:
    sizes = sorted(data["sizes"], key=int)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for system, color in (("dpsql gaussian", SYSTEM_COLORS["dpsql gaussian"]),
                          ("smartnoise", SYSTEM_COLORS["smartnoise"])):
        med = []
        for s in sizes:
            vals = [v for v in data["sizes"][s][system].values() if v is not None]
            med.append(statistics.median(vals) if vals else math.nan)
        ax.plot([int(s) for s in sizes], med, marker="o", color=color,
                label="dpsql (cache miss)" if system.startswith("dpsql") else "SmartNoise SQL")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows = people (PUMS, scaled)")
    ax.set_ylabel("median over queries of median latency, ms")
    ax.set_title("Query latency: dpsql vs SmartNoise SQL")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def mae_ratio(data: dict[str, Any], path: Path) -> None:
    cells = [c for c in data["accuracy"] if c.get("smartnoise")]
    labels = [f"{c['query']} · {c['column']}" for c in cells]
    fig, ax = plt.subplots(figsize=(7.0, 0.32 * len(cells) + 1.4))
    y = list(range(len(cells)))
    for offset, system in ((-0.18, "dpsql gaussian"), (0.18, "dpsql laplace")):
        ratios = [(c[system] / c["smartnoise"]) if c.get(system) is not None else math.nan
                  for c in cells]
        ax.barh([v + offset for v in y], ratios, height=0.34, color=SYSTEM_COLORS[system],
                label=system)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(0.5, color="black", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("MAE ratio dpsql / SmartNoise at equal total ε (log; < 1 is better)")
    ax.set_title(f"Error at ε = {data['epsilon']:g} per query, {data['runs']} runs")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def session(data: dict[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    x = list(range(1, data["queries"] + 1))
    ax.plot(x, data["smartnoise"]["curve"], color=SYSTEM_COLORS["smartnoise"],
            label="SmartNoise odometer")
    for system in ("dpsql gaussian", "dpsql laplace"):
        ax.plot(x, data[system]["curve"], color=SYSTEM_COLORS[system],
                label=f"{system} ledger")
        ax.plot(x, data[system]["no_cache_curve"], color=SYSTEM_COLORS[system],
                linestyle=":", label=f"{system}, every query charged (no cache)")
    ax.set_xlabel("query of the session")
    ax.set_ylabel("total ε spent")
    ax.set_title(f"Analyst session, ε = {data['epsilon']:g} per query")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def accuracy(data: dict[str, Any], path: Path) -> None:
    """Median relative error per question (median over cells), per configuration."""
    qs = data["questions"]
    series = (("fixed", "demo: fixed caps (C = 10 / 3)", "#7f7f7f"),
              ("auto", "demo: auto caps (today)", "#1f77b4"),
              ("pums", "PUMS: dpsql", "#2ca02c"),
              ("smartnoise", "PUMS: SmartNoise SQL (its released groups)", "#d62728"))
    fig, ax = plt.subplots(figsize=(7.4, 0.3 * len(qs) + 1.6))
    y = list(range(len(qs)))
    for offset, (config, label, color) in zip((-0.2, 0.2, -0.2, 0.2), series, strict=True):
        values = []
        for q in qs:
            m = q["results"].get(config)
            if config == "smartnoise" and m and m.get("common_groups"):
                found = [m["cell_errors"][k] for k in m["common_groups"]
                         if k in m["cell_errors"]]
                values.append(statistics.median(found) if found else math.nan)
            else:
                values.append(m["median_rel_error"] if m and not m["error"] else math.nan)
        # Values of 0 cannot be drawn on a log axis; errors below 0.1% are shown there.
        values = [max(v, 1e-3) if not math.isnan(v) else math.nan for v in values]
        ax.barh([v + offset for v in y], values, height=0.38, color=color, label=label)
    for x, style in ((0.10, ":"), (0.15, "--")):
        ax.axvline(x, color="black", linewidth=0.8, linestyle=style)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels([q["name"] for q in qs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("median relative error over cells (log; lines at 10% and 15%)")
    ax.set_title(f"Accuracy at ε = {data['epsilon']:g} per query, {data['runs']} runs")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw(results: dict[str, Any], folder: Path) -> dict[str, str]:
    """Draw every figure whose section is in ``results``; returns {name: file name}."""
    made = {}
    for name, section, fn in (("scale", "scale", scale),
                              ("smartnoise_latency", "smartnoise", smartnoise_latency),
                              ("mae_ratio", "smartnoise", mae_ratio),
                              ("session", "session", session),
                              ("accuracy", "accuracy", accuracy)):
        data = _data(results, section)
        if data is None:
            continue
        path = folder / f"{name}.png"
        fn(data, path)
        made[name] = path.name
    return made
