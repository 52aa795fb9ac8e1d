// The budget dashboard: a gauge per population and partition (GET /v1/budget), composed ε
// over time, top consumers and the cache hit rate (GET /v1/usage); for admins also the
// ledger's verify status, cap changes and external charges, with forms for both.

import { api } from "./api.js";
import { epsilonChart, gauge } from "./charts.js";
import { $, eps, fill, h, short, show, when } from "./dom.js";

let state = null;

function pct(rate) {
  return rate === null ? "—" : `${(100 * rate).toFixed(1)}%`;
}

function card(name, used, cap, caption, small) {
  const canvas = h("canvas", { "data-population": name, "aria-label": `budget of ${name}`, role: "img" });
  const node = h(
    "div",
    { class: `gauge-card${small ? " small" : ""}`, "data-population": name },
    h("h3", {}, name),
    h("div", { class: "chart-box gauge" }, canvas),
    h("p", { class: "gauge-value", "data-used": used, "data-cap": cap }, `ε ${eps(used)} used of ${eps(cap)} · ${eps(Math.max(cap - used, 0))} left`),
    caption ? h("p", { class: "muted" }, caption) : null,
  );
  return { node, draw: () => gauge(canvas, used, cap) };
}

function renderGauges(budget) {
  const cards = [];
  for (const p of budget.populations) {
    // The root's gauge shows the persons who have spent the most: a charge to one
    // partition spends the budget of that partition's persons only.
    const used = Math.max(p.epsilon_cap - p.remaining, 0);
    cards.push(card(p.name, used, p.epsilon_cap, `most-spent persons; charges to all of ${p.name}: ε ${eps(p.epsilon_spent)}`, false));
    for (const part of p.partitions) cards.push(card(part.name, part.epsilon_spent, p.epsilon_cap, null, true));
  }
  fill($("gauges"), cards.length ? cards.map((c) => c.node) : [h("p", { class: "muted" }, "No population is visible to this key.")]);
  cards.forEach((c) => c.draw());
}

function renderUsage(usage) {
  $("budget-scope").textContent = usage.role === "admin" ? "(all populations)" : `(populations of your tables: ${usage.populations.join(", ") || "none"})`;
  epsilonChart($("epsilon-chart"), usage.series);
  $("cache-rate").textContent = `${pct(usage.cache.hit_rate)} of answers from the cache`;
  $("cache-rate").dataset.hitRate = usage.cache.hit_rate ?? "";
  $("own-cache-rate").textContent = `${usage.cache.replays} replays, ${usage.cache.charges} charges on these populations; yours: ${pct(usage.own_cache.hit_rate)} (${usage.own_cache.replays} of ${usage.own_cache.replays + usage.own_cache.charges})`;
  fill(
    $("consumers").tBodies[0],
    usage.consumers.length
      ? usage.consumers.map((c) =>
          h("tr", {}, h("td", {}, c.analyst), h("td", { title: c.fingerprint }, c.kind === "external" ? "external charge" : short(c.fingerprint) || "—"),
            h("td", { class: "n" }, eps(c.epsilon)), h("td", { class: "n" }, String(c.charges)), h("td", { class: "n" }, String(c.replays))))
      : [h("tr", {}, h("td", { colspan: 5, class: "muted" }, "Nothing charged yet."))],
  );
  if (usage.role !== "admin") return;
  fill(
    $("cap-changes").tBodies[0],
    usage.cap_changes.map((e) => h("tr", {}, h("td", {}, when(e.ts)), h("td", {}, e.population), h("td", { class: "n" }, eps(e.cap)), h("td", {}, e.analyst), h("td", {}, e.note))),
  );
  fill(
    $("externals").tBodies[0],
    usage.externals.length
      ? usage.externals.map((e) => h("tr", {}, h("td", {}, when(e.ts)), h("td", {}, e.population), h("td", { class: "n" }, eps(e.epsilon)), h("td", {}, e.analyst), h("td", {}, e.note)))
      : [h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No external charges."))],
  );
  for (const id of ["cap-population", "charge-population"]) {
    const select = $(id);
    const current = select.value;
    fill(select, usage.populations.map((p) => h("option", { value: p, selected: p === current }, p)));
  }
}

async function verify() {
  const badge = $("verify-status");
  badge.textContent = "checking…";
  try {
    const report = await api("POST", "/v1/ledger/verify", {});
    badge.textContent = report.ok ? `verified: ${report.events} events, ${report.populations} populations` : `FAILED: ${report.problems[0]}`;
    badge.className = `badge ${report.ok ? "ok" : "bad"}`;
    badge.dataset.ok = String(report.ok);
  } catch (error) {
    badge.textContent = `${error.code}: ${error.message}`;
    badge.className = "badge bad";
  }
}

async function submit(event, action) {
  event.preventDefault();
  const message = $("admin-message");
  try {
    message.textContent = await action();
    event.target.reset();
    await showBudget(state);
  } catch (error) {
    message.textContent = `${error.code}: ${error.message}${error.hint ? ` — ${error.hint}` : ""}`;
  }
}

export function initDashboard() {
  $("verify-btn").addEventListener("click", verify);
  $("cap-form").addEventListener("submit", (e) =>
    submit(e, async () => {
      const name = $("cap-population").value;
      const out = await api("PUT", `/v1/populations/${encodeURIComponent(name)}/cap`, {
        epsilon_cap: Number($("cap-value").value),
        reason: $("cap-reason").value,
      });
      return `cap of ${out.population} is now ε ${eps(out.epsilon_cap)} (ledger event #${out.event_id})`;
    }),
  );
  $("charge-form").addEventListener("submit", (e) =>
    submit(e, async () => {
      const out = await api("POST", "/v1/charges", {
        population: $("charge-population").value,
        rho: Number($("charge-rho").value),
        note: $("charge-note").value,
      });
      return `external charge of ε ${eps(out.epsilon)} recorded (ledger event #${out.event_id})`;
    }),
  );
}

export async function showBudget(s) {
  state = s;
  show($("admin"), s.role === "admin");
  const [budget, usage] = await Promise.all([api("GET", "/v1/budget"), api("GET", "/v1/usage")]);
  renderGauges(budget);
  renderUsage(usage);
  if (s.role === "admin") await verify();
  document.body.dataset.budgetLoaded = String(Date.now());
}
