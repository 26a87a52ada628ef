// The admin console. Every value from the API is inserted as text (textContent, setAttribute on SVG
// geometry only); the admin key lives in sessionStorage and leaves only as an Authorization header.
"use strict";

const KEY = "adminKey";
const $ = (id) => document.getElementById(id);

/** A failed API call: its status and the problem's detail. */
class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

function say(text, isError) {
  const message = $("message");
  message.textContent = text;
  message.className = isError ? "error" : "";
}

/** Calls the API with the admin key; answers the parsed JSON (or the Response when `raw`). */
async function api(path, options = {}, raw = false) {
  const headers = Object.assign({}, options.headers || {}, { Authorization: "Bearer " + sessionStorage.getItem(KEY) });
  if (options.body) headers["Content-Type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail || detail; } catch (_) { /* not a problem body */ }
    throw new ApiError(response.status, detail);
  }
  return raw ? response : response.json();
}

function cell(row, value) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "—" : String(value);
  row.appendChild(td);
  return td;
}

function fillTable(table, rows, columns) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const item of rows) {
    const tr = document.createElement("tr");
    for (const column of columns) cell(tr, typeof column === "function" ? column(item) : item[column]);
    body.appendChild(tr);
  }
  return body;
}

function unavailable(container, what) {
  const p = document.createElement("p");
  p.className = "unavailable";
  p.textContent = what + " is not available on this service yet.";
  container.replaceChildren(p);
}

// ---- Pages

const pages = ["sign-in", "customers", "revenue", "operations"];

function show(page) {
  const signedIn = sessionStorage.getItem(KEY) !== null;
  if (!signedIn) page = "sign-in";
  for (const name of pages) $("page-" + name).hidden = name !== page;
  $("nav").hidden = !signedIn;
  for (const button of document.querySelectorAll("nav button[data-page]")) {
    button.classList.toggle("current", button.dataset.page === page);
  }
  if (page === "revenue") loadRevenue().catch(report);
  if (page === "operations") loadOperations().catch(report);
}

function report(error) {
  if (error instanceof ApiError && error.status === 401) {
    sessionStorage.removeItem(KEY);
    show("sign-in");
    say("The admin key was refused (401): " + error.message, true);
  } else if (error instanceof ApiError && error.status === 403) {
    sessionStorage.removeItem(KEY);
    show("sign-in");
    say("That key is not an admin key (403): " + error.message, true);
  } else {
    say(error instanceof ApiError ? "The service answered " + error.status + ": " + error.message : String(error), true);
  }
}

async function signIn(event) {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("admin-key").value);
  $("admin-key").value = "";
  try {
    await api("/v1/admin/products");
    say("Signed in.");
    show("customers");
  } catch (error) {
    report(error);
  }
}

// ---- Customers

let currentUser = null;

async function loadCustomer(userID) {
  const path = encodeURIComponent(userID);
  let view;
  try {
    view = await api("/v1/admin/users/" + path);
  } catch (error) {
    if (!(error instanceof ApiError) || (error.status !== 404 && error.status !== 405)) throw error;
    // The customer view has not landed here: entitlements and transactions make the same page.
    const [entitlements, transactions] = await Promise.all([
      api("/v1/users/" + path + "/entitlements"),
      api("/v1/users/" + path + "/transactions"),
    ]);
    view = Object.assign({}, entitlements, { transactions: transactions.transactions });
  }
  currentUser = userID;
  $("customer-id").textContent = userID;
  const entitlements = Object.entries(view.entitlements || {}).map(([name, e]) => Object.assign({ name }, e));
  const body = fillTable($("entitlements"), entitlements, [
    "name",
    (e) => (e.active ? "active" : "inactive (" + (e.inactive_reason || "?") + ")"),
    "source",
    (e) => (e.source === "grant" ? "grant " + e.grant_id + (e.reason ? " — " + e.reason : "") : e.product_id + " (" + (e.environment || "") + ")"),
    (e) => e.expires_at || "never",
  ]);
  entitlements.forEach((e, index) => {
    const td = cell(body.rows[index], "");
    if (e.source === "grant" && e.active) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "revoke";
      button.textContent = "Revoke";
      button.addEventListener("click", () => revoke(e.grant_id).catch(report));
      td.replaceChildren(button);
    }
  });
  fillTable($("consumables"), Object.entries(view.consumables || {}), [(c) => c[0], (c) => c[1]]);
  fillTable($("transactions"), view.transactions || [], [
    "transaction_id", "original_transaction_id", "product_id", "environment", "purchase_date", "expires_date", "cancellation_date",
  ]);
  $("customer").hidden = false;
}

async function find(event) {
  event.preventDefault();
  say("");
  await loadCustomer($("find-user").value).catch(report);
}

async function grant(event) {
  event.preventDefault();
  const body = { entitlement: $("grant-entitlement").value, reason: $("grant-reason").value };
  if ($("grant-duration").value) body.duration = $("grant-duration").value;
  try {
    await api("/v1/admin/users/" + encodeURIComponent(currentUser) + "/grants", { method: "POST", body: JSON.stringify(body) });
    say("Granted " + body.entitlement + ".");
    await loadCustomer(currentUser);
  } catch (error) { report(error); }
}

async function revoke(grantID) {
  if (!window.confirm("Revoke grant " + grantID + "?")) return;
  await api("/v1/admin/grants/" + encodeURIComponent(grantID), { method: "DELETE" });
  say("Revoked grant " + grantID + ".");
  await loadCustomer(currentUser);
}

// ---- Revenue

function environment() {
  return document.querySelector("input[name=environment]:checked").value;
}

function windowQuery() {
  const query = new URLSearchParams({ environment: environment() });
  if ($("revenue-from").value) query.set("from", $("revenue-from").value + "T00:00:00Z");
  if ($("revenue-to").value) query.set("to", $("revenue-to").value + "T00:00:00Z");
  return query;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attributes, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = String(text);
  return element;
}

/**
 * Draws `series` ({name, values: Map period → number}) over `periods` as bars (side by side) or lines, in
 * inline SVG built with DOM calls: no inline style, every label inserted as text.
 */
function chart(container, periods, series, kind) {
  const width = 760, height = 220, left = 50, bottom = 40, top = 10;
  const root = svg("svg", { width, height: height + 20 * Math.ceil(series.length / 3), viewBox: "0 0 " + width + " " + (height + 20 * Math.ceil(series.length / 3)), role: "img" });
  const max = Math.max(1, ...series.flatMap((s) => periods.map((p) => s.values.get(p) || 0)));
  const plotWidth = width - left - 10, plotHeight = height - bottom - top;
  const x = (i) => left + (plotWidth * i) / Math.max(1, periods.length);
  const y = (v) => top + plotHeight - (plotHeight * v) / max;
  root.appendChild(svg("line", { class: "axis", x1: left, y1: top + plotHeight, x2: width - 10, y2: top + plotHeight }));
  root.appendChild(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + plotHeight }));
  root.appendChild(svg("text", { x: 4, y: top + 10 }, Math.round(max * 100) / 100));
  root.appendChild(svg("text", { x: 4, y: top + plotHeight }, 0));
  const step = Math.max(1, Math.ceil(periods.length / 8));
  periods.forEach((p, i) => {
    if (i % step === 0) root.appendChild(svg("text", { x: x(i), y: height - bottom + 15 }, p.slice(0, 10)));
  });
  const slot = plotWidth / Math.max(1, periods.length);
  series.forEach((s, index) => {
    const group = svg("g", { class: "series series-" + (index % 6), "data-series": s.name });
    if (kind === "line") {
      const points = periods.map((p, i) => x(i) + slot / 2 + "," + y(s.values.get(p) || 0)).join(" ");
      group.appendChild(svg("polyline", { points }));
    } else {
      const barWidth = Math.max(1, (slot * 0.8) / series.length);
      periods.forEach((p, i) => {
        const value = s.values.get(p) || 0;
        if (value === 0) return;
        const bar = svg("rect", { x: x(i) + slot * 0.1 + barWidth * index, y: y(value), width: barWidth, height: top + plotHeight - y(value) });
        bar.appendChild(svg("title", {}, s.name + " " + p.slice(0, 10) + ": " + value));
        group.appendChild(bar);
      });
    }
    root.appendChild(group);
    const lx = left + (index % 3) * 240, ly = height + 20 * Math.floor(index / 3);
    const legend = svg("g", { class: "legend series-" + (index % 6) });
    legend.appendChild(svg("rect", { x: lx, y: ly - 9, width: 10, height: 10 }));
    legend.appendChild(svg("text", { x: lx + 14, y: ly }, s.name));
    root.appendChild(legend);
  });
  container.replaceChildren(root);
}

function seriesBy(points, key, value) {
  const map = new Map();
  for (const point of points) {
    if (!map.has(point[key])) map.set(point[key], { name: point[key], values: new Map() });
    const values = map.get(point[key]).values;
    values.set(point.period_start, (values.get(point.period_start) || 0) + Number(value(point) || 0));
  }
  return [...map.values()];
}

async function loadRevenue() {
  const query = windowQuery();
  query.set("interval", $("revenue-interval").value);
  let report;
  try {
    report = await api("/v1/admin/reports/timeseries?" + query);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      for (const id of ["chart-purchases", "chart-revenue", "chart-subscriptions"]) unavailable($(id), "The time-series report");
      return;
    }
    throw error;
  }
  for (const span of document.querySelectorAll(".interval-name")) span.textContent = report.interval;
  const periods = report.periods;
  chart($("chart-purchases"), periods, seriesBy(report.points, "product_id", (p) => p.purchases), "bar");
  chart($("chart-revenue"), periods, seriesBy(report.points, "product_id", (p) => p.revenue), "bar");
  const subscriptions = report.subscriptions;
  chart($("chart-subscriptions"), periods, [
    ...seriesBy(subscriptions.map((s) => Object.assign({ series: "active subscriptions" }, s)), "series", (s) => s.active_subscriptions),
    ...seriesBy(subscriptions.map((s) => Object.assign({ series: "MRR estimate" }, s)), "series", (s) => s.mrr),
  ], "line");
  $("chart-purchases").dataset.environment = report.environment;
  fillTable($("revenue-table"), report.points, [
    (p) => p.period_start.slice(0, 10), "product_id", "purchases", "refunded",
    (p) => (p.revenue === null ? "—" : p.revenue + " " + (p.price_currency || "")),
  ]);
}

async function downloadCSV() {
  const query = windowQuery();
  query.set("format", "csv");
  const response = await api("/v1/admin/reports/purchases?" + query, {}, true);
  const blob = await response.blob();
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = "purchases-" + environment() + ".csv";
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  say("Downloaded the purchases report (" + environment() + ").");
}

// ---- Operations

async function listInto(container, path, key, columns, what) {
  let body;
  try {
    body = await api(path);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 405)) return unavailable(container, what);
    throw error;
  }
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  for (const column of columns) {
    const th = document.createElement("th");
    th.textContent = column;
    head.appendChild(th);
  }
  table.appendChild(document.createElement("tbody"));
  fillTable(table, body[key] || [], columns.map((c) => (item) => (typeof item[c] === "object" && item[c] !== null ? JSON.stringify(item[c]) : item[c])));
  container.replaceChildren(table);
}

async function loadBacklog() {
  const response = await fetch("/metrics");
  const text = response.ok ? await response.text() : "";
  const lines = text.split("\n").filter((line) => /^[a-z_]*(retry|backlog)[a-z_]*(\{[^}]*\})? /.test(line));
  const container = $("ops-backlog");
  if (lines.length === 0) return unavailable(container, "The retry backlog");
  const pre = document.createElement("pre");
  pre.textContent = lines.join("\n");
  container.replaceChildren(pre);
}

async function loadOperations() {
  await Promise.all([
    loadBacklog(),
    listInto($("ops-notifications"), "/v1/admin/notifications", "notifications",
      ["received_at", "notification_type", "subtype", "environment", "status"], "The notifications list"),
    listInto($("ops-deliveries"), "/v1/admin/webhooks/deliveries", "deliveries",
      ["created_at", "type", "user_id", "status", "attempts", "last_response_status"], "The webhook deliveries list"),
    listInto($("ops-audit"), "/v1/admin/audit?limit=50", "events", ["occurred_at", "actor", "action", "subject", "user_id"], "The audit log"),
  ]);
}

// ---- Wiring

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-form").addEventListener("submit", signIn);
  $("find-form").addEventListener("submit", find);
  $("grant-form").addEventListener("submit", grant);
  $("revenue-form").addEventListener("submit", (event) => { event.preventDefault(); loadRevenue().catch(report); });
  for (const radio of document.querySelectorAll("input[name=environment]")) radio.addEventListener("change", () => loadRevenue().catch(report));
  $("download-csv").addEventListener("click", () => downloadCSV().catch(report));
  $("sign-out").addEventListener("click", () => { sessionStorage.removeItem(KEY); say("Signed out."); show("sign-in"); });
  for (const button of document.querySelectorAll("nav button[data-page]")) {
    button.addEventListener("click", () => show(button.dataset.page));
  }
  show(sessionStorage.getItem(KEY) === null ? "sign-in" : "customers");
});
