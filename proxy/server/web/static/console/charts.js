// Charts with Chart.js and its error-bar plugin (both vendored under /static/vendor).
// Each canvas records what it shows in data-chart-kind, so a test can tell.

import { num } from "./dom.js";

const Chart = window.Chart;
const ErrorBars = window.ChartErrorBars;
Chart.register(ErrorBars.BarWithErrorBarsController, ErrorBars.BarWithErrorBar);
Chart.defaults.animation = false; // answers appear at once, and screenshots are stable
Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;

export const COLORS = ["#1f4e79", "#c55a11", "#548235", "#7030a0", "#bf9000", "#2e75b6", "#a5a5a5"];
const BAND = "rgba(31, 78, 121, 0.18)";
const ISO_TIME = /^\d{4}-\d{2}(-\d{2})?([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$/;

function reset(canvas) {
  const old = Chart.getChart(canvas);
  if (old) old.destroy();
  canvas.removeAttribute("data-chart-kind");
}

function draw(canvas, kind, config) {
  reset(canvas);
  const chart = new Chart(canvas, { ...config, options: { responsive: true, maintainAspectRatio: false, ...config.options } });
  canvas.setAttribute("data-chart-kind", kind);
  return chart;
}

// The columns of an answer that carry noise (some cell has a 95% interval) are measures;
// the others are keys. One key and a measure make a chart: a line with its band when the
// key is a time, bars with error bars otherwise; no key makes one bar per measure.
export function planResultChart(columns, rows, intervals) {
  const measures = columns.map((_, j) => j).filter((j) => intervals.some((row) => row[j] !== null && row[j] !== undefined));
  const keys = columns.map((_, j) => j).filter((j) => !measures.includes(j));
  if (!rows.length) return { kind: null, note: "no rows to chart" };
  if (!measures.length) return { kind: null, note: "no noisy numeric column to chart" };
  if (keys.length > 1) return { kind: null, note: "a chart needs at most one group key" };
  if (keys.length === 0) return { kind: "bar-error", key: null, measures };
  const key = keys[0];
  const isTime = rows.every((r) => typeof r[key] === "string" && ISO_TIME.test(r[key]));
  return { kind: isTime ? "line-band" : "bar-error", key, measures };
}

export function resultChart(canvas, columns, rows, intervals, measure) {
  const plan = planResultChart(columns, rows, intervals);
  reset(canvas);
  if (!plan.kind) return plan;
  if (plan.key === null) {
    const data = plan.measures.map((j) => errorPoint(rows[0][j], intervals[0][j]));
    draw(canvas, "bar-error", {
      type: "barWithErrorBars",
      data: { labels: plan.measures.map((j) => columns[j]), datasets: [{ label: "value ± 95%", data, backgroundColor: COLORS[0] }] },
      options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true } } },
    });
    return { ...plan, note: "each bar: the noisy value; whiskers: its 95% interval" };
  }
  const j = plan.measures.includes(measure) ? measure : plan.measures[0];
  const order = rows.map((_, i) => i);
  if (plan.kind === "line-band") order.sort((a, b) => (rows[a][plan.key] < rows[b][plan.key] ? -1 : 1));
  const labels = order.map((i) => num(rows[i][plan.key]));
  const value = order.map((i) => rows[i][j]);
  const half = order.map((i) => intervals[i][j]);
  if (plan.kind === "line-band") {
    const lower = value.map((v, i) => (v === null || half[i] === null ? null : v - half[i]));
    const upper = value.map((v, i) => (v === null || half[i] === null ? null : v + half[i]));
    draw(canvas, "line-band", {
      type: "line",
      data: {
        labels,
        datasets: [
          { label: "lower", data: lower, borderWidth: 0, pointRadius: 0, fill: false },
          { label: "95% interval", data: upper, borderWidth: 0, pointRadius: 0, fill: "-1", backgroundColor: BAND },
          { label: columns[j], data: value, borderColor: COLORS[0], backgroundColor: COLORS[0], pointRadius: 2, fill: false },
        ],
      },
      options: { plugins: { legend: { labels: { filter: (item) => item.text !== "lower" } } } },
    });
    return { ...plan, measure: j, note: `${columns[j]} by ${columns[plan.key]}: the line is the noisy value, the band its 95% interval` };
  }
  draw(canvas, "bar-error", {
    type: "barWithErrorBars",
    data: { labels, datasets: [{ label: `${columns[j]} ± 95%`, data: value.map((v, i) => errorPoint(v, half[i])), backgroundColor: COLORS[0] }] },
    options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true } } },
  });
  return { ...plan, measure: j, note: `${columns[j]} by ${columns[plan.key]}: bars are noisy values, whiskers their 95% intervals` };
}

function timeLabel(ms, span) {
  const d = new Date(ms);
  if (span > 86400000) return d.toLocaleString("en-GB", { hour12: false, month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  return d.toLocaleTimeString("en-GB", { hour12: false });
}

function errorPoint(value, half) {
  if (value === null || typeof value !== "number") return { y: null };
  if (half === null || half === undefined) return { y: value };
  return { y: value, yMin: value - half, yMax: value + half };
}

// A half-doughnut: ε used against what is left of the cap.
export function gauge(canvas, used, cap) {
  const left = Math.max(cap - used, 0);
  const ratio = cap > 0 ? used / cap : 1;
  const color = ratio >= 0.9 ? "#c00000" : ratio >= 0.7 ? "#bf9000" : "#548235";
  return draw(canvas, "gauge", {
    type: "doughnut",
    data: { labels: ["ε used", "ε left"], datasets: [{ data: [Math.min(used, cap), left], backgroundColor: [color, "#e7e6e6"], borderWidth: 0 }] },
    options: { rotation: -90, circumference: 180, cutout: "68%", plugins: { legend: { display: false }, tooltip: { enabled: true } } },
  });
}

// One line per population (composed ε after each event reaching its persons) and a
// dashed step line per root for its cap.
export function epsilonChart(canvas, series) {
  const now = Date.now();
  const datasets = [];
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    if (s.epsilon.length) {
      datasets.push({
        label: s.population,
        data: s.epsilon.map((p) => ({ x: p.ts * 1000, y: p.value })),
        borderColor: color,
        backgroundColor: color,
        pointRadius: 1.5,
        stepped: true,
      });
    }
    if (s.caps.length) {
      const caps = s.caps.map((p) => ({ x: p.ts * 1000, y: p.value }));
      caps.push({ x: Math.max(now, caps[caps.length - 1].x), y: caps[caps.length - 1].y });
      datasets.push({ label: `${s.population} cap`, data: caps, borderColor: color, borderDash: [6, 4], borderWidth: 1, pointRadius: 0, stepped: true });
    }
  });
  const start = Math.min(...datasets.flatMap((d) => d.data.map((p) => p.x)).filter((x) => Number.isFinite(x)), now);
  return draw(canvas, "epsilon-over-time", {
    type: "line",
    data: { datasets },
    options: {
      parsing: true,
      scales: {
        x: { type: "linear", min: start, max: now, ticks: { maxTicksLimit: 6, callback: (v) => timeLabel(v, now - start) } },
        y: { beginAtZero: true, title: { display: true, text: "ε" } },
      },
    },
  });
}
