// The query console: schema, SQL editor, budget controls, Explain, Run, the answer as a
// table and a chart, and the analyst's history from the ledger.

import { api } from "./api.js";
import { resultChart } from "./charts.js";
import { $, eps, fill, h, num, short, show, when } from "./dom.js";

let viewer = null;
let schemaLoaded = false;
let lastResult = null;

// dpsql stores no SQL text (the ledger keeps fingerprints), so the console remembers the
// requests it sent, by the charge that paid for each answer, to re-ask them later.
const MAX_REMEMBERED = 200;
const storeKey = () => `dpsql.console.queries.${viewer}`;

function remembered() {
  try {
    return JSON.parse(localStorage.getItem(storeKey()) || "{}");
  } catch {
    return {};
  }
}

function remember(chargeId, body) {
  if (chargeId === null || chargeId === undefined) return;
  const all = remembered();
  all[chargeId] = { body, ts: Date.now() };
  const ids = Object.keys(all).sort((a, b) => all[b].ts - all[a].ts);
  for (const id of ids.slice(MAX_REMEMBERED)) delete all[id];
  localStorage.setItem(storeKey(), JSON.stringify(all));
}

// --- request -------------------------------------------------------------------------
function requestBody() {
  const body = { sql: $("sql").value };
  if ($("budget-mode").value === "accuracy") {
    body.accuracy = {
      rel_error: Number($("rel-error").value),
      at_count: Number($("at-count").value),
      confidence: Number($("confidence").value),
    };
  } else {
    body.epsilon = Number($("epsilon").value);
  }
  return body;
}

function setRequest(body) {
  $("sql").value = body.sql;
  const accuracy = Boolean(body.accuracy);
  $("budget-mode").value = accuracy ? "accuracy" : "epsilon";
  if (accuracy) {
    $("rel-error").value = body.accuracy.rel_error;
    $("at-count").value = body.accuracy.at_count;
    $("confidence").value = body.accuracy.confidence;
  } else if (body.epsilon !== undefined) {
    $("epsilon").value = body.epsilon;
  }
  syncMode();
}

function syncMode() {
  const accuracy = $("budget-mode").value === "accuracy";
  show($("accuracy-controls"), accuracy);
  show($("epsilon-controls"), !accuracy);
}

function busy(on) {
  $("explain-btn").disabled = on;
  $("run-btn").disabled = on;
  document.body.classList.toggle("busy", on);
}

// --- errors --------------------------------------------------------------------------
function clearError() {
  show($("error-box"), false);
}

function renderError(error) {
  const box = $("error-box");
  box.querySelector(".code").textContent = error.code;
  box.querySelector(".message").textContent = error.message;
  box.querySelector(".hint").textContent = error.hint ? `Hint: ${error.hint}` : "";
  const details = [];
  const d = error.details || {};
  if (d.position) details.push(["position", `line ${d.position.line}, column ${d.position.column}`]);
  for (const name of ["population", "query_epsilon", "needed", "spent", "cap"]) {
    if (d[name] !== undefined) details.push([name, typeof d[name] === "number" ? `ε ${eps(d[name])}` : d[name]]);
  }
  if (error.status) details.push(["status", String(error.status)]);
  fill(box.querySelector(".details"), details.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  box.dataset.code = error.code;
  show(box, true);
}

// --- schema --------------------------------------------------------------------------
function insert(text) {
  const area = $("sql");
  area.setRangeText(text, area.selectionStart, area.selectionEnd, "end");
  area.focus();
}

async function loadSchema() {
  const schema = await api("GET", "/v1/schema");
  fill(
    $("schema-tables"),
    schema.tables.map((t) =>
      h(
        "div",
        { class: "schema-table", "data-table": t.name },
        h("h3", {}, h("button", { type: "button", class: "link", onclick: () => insert(t.name) }, t.name), " ",
          h("span", { class: "badge" }, t.public ? "public" : `people: ${t.population}`)),
        h(
          "ul",
          {},
          t.columns.map((c) =>
            h(
              "li",
              {},
              h("button", { type: "button", class: "link", onclick: () => insert(c.name) }, c.name),
              " ",
              h("span", { class: "muted" }, c.type.toLowerCase()),
              c.unit ? h("span", { class: "badge" }, "person id") : null,
              c.lower !== null || c.upper !== null ? h("span", { class: "bounds" }, `[${num(c.lower)}, ${num(c.upper)}]`) : null,
              c.values ? h("span", { class: "bounds" }, `{${c.values.join(", ")}}`) : null,
            ),
          ),
        ),
      ),
    ),
  );
  schemaLoaded = true;
}

// --- explain -------------------------------------------------------------------------
function renderExplain(ex) {
  const badge = $("explain-cache");
  badge.textContent = ex.cache === "hit" ? "cache hit: running costs nothing" : "cache miss: running charges the cost";
  badge.className = `badge ${ex.cache === "hit" ? "ok" : "warn"}`;
  badge.dataset.cache = ex.cache;
  const cost = ex.cache === "hit" ? `ε 0 now (the release cost ε ${eps(ex.cost.epsilon)} when first paid)` : `ε ${eps(ex.cost.epsilon)}, δ ${ex.cost.delta.toExponential(2)}${ex.cost.rho !== null ? `, ρ ${ex.cost.rho.toPrecision(3)}` : ""}`;
  $("explain-cost").textContent = cost;
  $("explain-cost").dataset.epsilon = ex.cost.epsilon;
  $("explain-charges").textContent = ex.charges.join(", ");
  $("explain-limits").textContent = `at most ${ex.limits.max_groups} group(s) and ${ex.limits.max_rows_per_group} row(s) per group per person`;
  $("explain-partition").textContent = ex.partition
    ? `chosen privately: a group is released when its noisy count of people passes τ = ${num(ex.partition.tau)}`
    : ex.public_domain_size !== null
      ? `public domain: all ${ex.public_domain_size} group(s) are released, empty ones as noisy zeros`
      : "one row";
  fill(
    $("explain-noise").tBodies[0],
    ex.statistics.map((s) =>
      h("tr", {}, h("td", {}, s.column), h("td", {}, s.kind), h("td", {}, s.argument || ""),
        h("td", {}, s.kind.includes("sum") && s.bounds.some((b) => b !== null) ? `[${num(s.bounds[0])}, ${num(s.bounds[1])}]` : ""),
        h("td", {}, s.noise.mechanism), h("td", { class: "n" }, num(s.noise.scale)), h("td", { class: "n" }, `± ${num(s.noise.half_width_95)}`)),
    ),
  );
  $("explain-core-sql").textContent = ex.core_sql;
  $("explain-outer-sql").textContent = ex.outer_sql;
  show($("explain"), true);
}

async function explain(body = requestBody()) {
  clearError();
  busy(true);
  try {
    const ex = await api("POST", "/v1/explain", body);
    renderExplain(ex);
    return ex;
  } catch (error) {
    renderError(error);
    return null;
  } finally {
    busy(false);
  }
}

// --- run -----------------------------------------------------------------------------
function renderResult(r) {
  lastResult = r;
  const p = r.privacy;
  const badge = $("result-badge");
  badge.textContent = p.cached ? "free: replayed from the cache" : `charged ε ${eps(p.epsilon)}`;
  badge.className = `badge ${p.cached ? "ok" : "warn"}`;
  badge.dataset.cached = String(p.cached);
  const remaining = Object.entries(p.remaining).map(([k, v]) => `${k} ${eps(v)}`).join(", ");
  $("result-status").textContent =
    `${p.mechanism} noise; paid by ledger charge #${p.charge_id} (ε ${eps(p.query_epsilon)} when first paid); ` +
    `ε left: ${remaining || "—"}.` + (r.next ? ` Showing the first ${r.rows.length} of ${r.page.total_rows} rows.` : "");
  fill($("warnings"), r.warnings.map((w) => h("li", {}, w)));
  const table = $("result-table");
  fill(table.tHead, h("tr", {}, r.columns.map((c) => h("th", {}, c))));
  const empty = p.partition.strategy === "threshold"
    ? "No group had enough people to be released (groups are chosen privately)."
    : "No rows.";
  fill(
    table.tBodies[0],
    r.rows.length === 0 ? [h("tr", {}, h("td", { colspan: r.columns.length, class: "muted" }, empty))] : r.rows.map((row, i) =>
      h("tr", {}, row.map((v, j) => {
        const half = r.intervals_95[i] ? r.intervals_95[i][j] : null;
        // "?": another draw of the noise could have given another value (the warnings say why)
        const unsettled = (r.unsettled_cells || []).some(([row, col]) => row === i && col === j);
        return h("td", { class: typeof v === "number" ? "n" : "" }, num(v),
          half !== null && half !== undefined ? h("span", { class: "pm" }, ` ± ${num(half)}`) : null,
          unsettled ? h("span", { class: "pm", title: "another draw of the noise could have given another value" }, " ?") : null);
      })),
    ),
  );
  drawChart();
  show($("result"), true);
}

function drawChart(measure) {
  const r = lastResult;
  const plan = resultChart($("result-chart"), r.columns, r.rows, r.intervals_95, measure);
  const note = $("chart-note");
  if (plan.kind && plan.key !== null && plan.measures.length > 1) {
    const select = h("select", { id: "chart-measure", "aria-label": "column to chart", onchange: (e) => drawChart(Number(e.target.value)) },
      plan.measures.map((j) => h("option", { value: j, selected: j === plan.measure }, r.columns[j])));
    fill(note, "Chart ", select, `: ${plan.note}`);
  } else {
    fill(note, plan.note);
  }
  show($("result-chart").parentElement, Boolean(plan.kind));
}

async function run(body = requestBody()) {
  clearError();
  busy(true);
  try {
    const r = await api("POST", "/v1/query", body);
    remember(r.privacy.charge_id, body);
    renderResult(r);
  } catch (error) {
    renderError(error);
  } finally {
    busy(false);
  }
  await loadHistory();
}

// --- history -------------------------------------------------------------------------
async function rerun(body) {
  setRequest(body);
  const ex = await explain(body);
  if (ex && ex.cache === "hit") await run(body);
  else if (ex) $("explain-cache").textContent = `no longer cached: Run would charge ε ${eps(ex.cost.epsilon)}`;
}

async function loadHistory() {
  let data;
  try {
    data = await api("GET", "/v1/history?limit=50");
  } catch (error) {
    renderError(error);
    return;
  }
  const known = remembered();
  fill(
    $("history-table").tBodies[0],
    data.queries.length
      ? data.queries.map((q) => {
          const saved = known[q.charge_id];
          const sql = saved ? saved.body.sql : null;
          return h("tr", { "data-fingerprint": q.fingerprint },
            h("td", {}, when(q.last_ts)),
            h("td", { class: "sql-cell", title: sql || q.automatic || q.fingerprint }, sql || h("span", { class: "muted" }, q.automatic
              // dpsql's own release for a query of this analyst's: not another client's
              ? `${q.automatic}: released by dpsql to choose a cap for your query, paid once`
              : `${short(q.fingerprint)} (asked from another client)`)),
            h("td", { class: "n" }, eps(q.epsilon)),
            h("td", { class: "n" }, String(q.asks)),
            h("td", {}, q.populations.join(", ")),
            h("td", {}, sql
              ? h("button", { type: "button", class: "rerun", onclick: () => rerun(saved.body) }, q.cached ? "Re-run (free)" : "Re-ask")
              : null));
        })
      : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No queries yet."))],
  );
}

// --- wiring --------------------------------------------------------------------------
export function initConsole() {
  $("budget-mode").addEventListener("change", syncMode);
  // An explanation describes the request it was asked for: editing makes it stale.
  for (const id of ["sql", "budget-mode", "epsilon", "rel-error", "at-count", "confidence"]) {
    $(id).addEventListener("input", () => show($("explain"), false));
  }
  $("explain-btn").addEventListener("click", () => explain());
  $("run-btn").addEventListener("click", () => run());
  $("sql").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      if (e.shiftKey) run();
      else explain();
    }
  });
  syncMode();
}

export async function showConsole(state) {
  if (viewer !== state.viewer) schemaLoaded = false;
  viewer = state.viewer;
  try {
    if (!schemaLoaded) await loadSchema();
  } catch (error) {
    renderError(error);
  }
  await loadHistory();
}
