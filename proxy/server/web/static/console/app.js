// Entry point: sign in with an API key, then the Console and Budget tabs (#console,
// #budget). No data is in the page itself; everything comes from the /v1 routes.

import { api, session, whenUnauthorized } from "./api.js";
import { initConsole, showConsole } from "./console.js";
import { initDashboard, showBudget } from "./dashboard.js";
import { $, show } from "./dom.js";

let state = null; // { viewer, role } once signed in

function signedOut(message) {
  session.clear();
  state = null;
  show($("signin"), true);
  show($("nav"), false);
  show($("signout"), false);
  show($("view-console"), false);
  show($("view-budget"), false);
  $("whoami").textContent = "";
  const error = $("signin-error");
  error.textContent = message || "";
  show(error, Boolean(message));
  $("api-key").focus();
}

async function signIn() {
  // The usage view answers any valid key and says whose it is.
  const usage = await api("GET", "/v1/usage?top=1");
  state = { viewer: usage.viewer, role: usage.role };
  $("whoami").textContent = `${usage.viewer} (${usage.role})`;
  show($("signin"), false);
  show($("nav"), true);
  show($("signout"), true);
  await route();
}

async function route() {
  if (!state) return;
  const tab = location.hash === "#budget" ? "budget" : "console";
  show($("view-console"), tab === "console");
  show($("view-budget"), tab === "budget");
  $("tab-console").classList.toggle("active", tab === "console");
  $("tab-budget").classList.toggle("active", tab === "budget");
  document.body.dataset.view = tab;
  try {
    if (tab === "budget") await showBudget(state);
    else await showConsole(state);
  } catch (error) {
    if (error.status !== 401) console.error(error);
  }
}

function start() {
  initConsole();
  initDashboard();
  whenUnauthorized(() => signedOut("This API key is not valid (any more). Sign in again."));
  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    $("api-key").value = "";
    if (!key) return;
    session.set(key);
    try {
      await signIn();
    } catch (error) {
      if (error.status !== 401) signedOut(`${error.code}: ${error.message}`);
    }
  });
  $("signout").addEventListener("click", () => signedOut());
  window.addEventListener("hashchange", route);
  if (session.key()) signIn().catch(() => signedOut());
  else signedOut();
  document.body.dataset.ready = "true";
}

start();
