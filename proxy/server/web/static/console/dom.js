// Small DOM and formatting helpers. Text always goes in as textContent, never as HTML:
// column names, values and SQL come from outside this page.

export const $ = (id) => document.getElementById(id);

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== undefined && c !== null));
  return node;
}

export function show(node, visible = true) {
  node.hidden = !visible;
  return node;
}

const MIDNIGHT = /^(\d{4}-\d{2}-\d{2})T00:00:00$/;

export function num(x) {
  if (x === null || x === undefined) return "—";
  if (typeof x === "string") return x.replace(MIDNIGHT, "$1"); // a date key, as a date
  if (typeof x !== "number") return String(x);
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  if (a >= 1000) return x.toLocaleString("en-US", { maximumFractionDigits: 0 });
  if (a >= 1) return x.toLocaleString("en-US", { maximumFractionDigits: 2 });
  return x.toPrecision(3);
}

export function eps(x) {
  if (x === null || x === undefined) return "—";
  return x.toFixed(x !== 0 && Math.abs(x) < 0.01 ? 4 : 3);
}

export function when(ts) {
  return new Date(ts * 1000).toLocaleString("en-GB", { hour12: false });
}

export function short(fingerprint) {
  return fingerprint ? fingerprint.slice(0, 12) : "";
}
