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

/** A cell holding `value` as text ("—" when absent), or the node itself when it is one (a button). */
function cell(row, value) {
  const td = document.createElement("td");
  if (value instanceof Node) td.appendChild(value);
  else td.textContent = value === null || value === undefined ? "—" : String(value);
  row.appendChild(td);
  return td;
}

/** Appends a row per item: each column a field name or a function of the item (text or a node). */
function appendRows(table, rows, columns) {
  const body = table.tBodies[0];
  for (const item of rows) {
    const tr = document.createElement("tr");
    for (const column of columns) cell(tr, typeof column === "function" ? column(item) : item[column]);
    body.appendChild(tr);
  }
  return body;
}

function fillTable(table, rows, columns) {
  table.tBodies[0].replaceChildren();
  return appendRows(table, rows, columns);
}

/** A button labelled `label` (as text) that runs `action`, reporting its failure. */
function button(label, action, className) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = label;
  if (className) element.className = className;
  element.addEventListener("click", () => Promise.resolve().then(action).catch(report));
  return element;
}

/** A user id as a link-like button that opens the customer (the id is its text, never markup). */
function userButton(userID) {
  if (userID === null || userID === undefined) return null;
  return button(userID, () => { show("customers"); return openCustomer(userID); }, "link user");
}

function unavailable(container, what) {
  const p = document.createElement("p");
  p.className = "unavailable";
  p.textContent = what + " is not available on this service yet.";
  container.replaceChildren(p);
}

// ---- Pages

const pages = ["sign-in", "customers", "revenue", "operations", "receipts"];

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
    await loadCapabilities();
    say("Signed in.");
    show("customers");
  } catch (error) {
    report(error);
  }
}

// ---- Customers

/** Items per page: of a customer's transactions and events, and of each Operations list. */
const PAGE = 50, OPERATIONS_PAGE = 20;
let currentUser = null;
let cursors = { transactions: null, events: null };
/** What this service's configuration enables (GET /v1/admin/capabilities); nothing until it answers. */
let capabilities = { app_store_server_api: false, webhooks: false };

async function loadCapabilities() {
  capabilities = await api("/v1/admin/capabilities");
  const apple = capabilities.app_store_server_api;
  for (const id of ["refresh-apple", "attach-order"]) $(id).disabled = !apple;
  $("attach-form").querySelector("button").disabled = !apple;
  $("apple-hint").textContent = apple ? "" :
    "Refresh from Apple and attaching an App Store order id need an App Store Server API key (APPLE_ISSUER_ID, APPLE_KEY_ID, APPLE_PRIVATE_KEY_FILE); this service has none.";
}

// A browser resolves a path segment "." or ".." itself, escaped as "%2E" or not (the URL standard reads both as
// dot segments): a user of that name cannot be addressed from a page, only through the API.
function userPath(userID) {
  if (userID === "." || userID === "..") {
    throw new Error('A browser cannot address a user named "' + userID + '": it reads the name as a path step. Use the API for this user.');
  }
  return "/v1/admin/users/" + encodeURIComponent(userID);
}

function state(item) {
  return item.active ? "active" : "inactive (" + (item.inactive_reason || "?") + ")";
}

const transactionColumns = [
  "transaction_id", "original_transaction_id", "product_id", "environment", "purchase_date", "expires_date", "cancellation_date",
];

function eventColumns() {
  return [
    "created_at", "sequence", "type", "product_id", "transaction_id", "delivery",
    (e) => redeliverButton(e.id, () => openCustomer(currentUser)),
  ];
}

/** Sends webhook event `eventID` again; disabled where WEBHOOK_URL is not set (the route would answer 409). */
function redeliverButton(eventID, then) {
  const element = button("Redeliver", async () => {
    await api("/v1/admin/webhooks/events/" + encodeURIComponent(eventID) + "/redeliver", { method: "POST" });
    say("Event " + eventID + " is queued to be sent again.");
    await then();
  }, "redeliver");
  element.disabled = !capabilities.webhooks;
  if (!capabilities.webhooks) element.title = "WEBHOOK_URL is not set: events are recorded, not sent.";
  return element;
}

/**
 * Shows the customer view of `userID`: the newest page of its transactions and events, and how long it took
 * since `started` (a look-up's start, else now).
 */
async function openCustomer(userID, started = performance.now()) {
  if (userID !== currentUser) {
    // Another customer: the one shown goes first, so that no action meant for the new one reaches it.
    currentUser = null;
    $("customer").hidden = true;
  }
  const view = await api(userPath(userID) + "?transactions_limit=" + PAGE + "&events_limit=" + PAGE);
  currentUser = userID;
  $("customer-id").textContent = view.user_id;
  $("customer-as-of").textContent = view.as_of;
  const entitlements = Object.entries(view.entitlements || {}).map(([name, e]) => Object.assign({ name }, e));
  fillTable($("entitlements"), entitlements, [
    "name", state, "source",
    (e) => (e.source === "grant" ? "grant " + e.grant_id + " — " + e.reason : e.product_id + " (" + e.environment + ")"),
    (e) => e.expires_at || "never",
  ]);
  const sources = entitlements.flatMap((e) => (e.sources || []).map((source) => Object.assign({ name: e.name }, source)));
  const body = fillTable($("sources"), sources, [
    "name", "source", (s) => (s.source === "grant" ? "grant " + s.grant_id : s.product_id), "original_transaction_id",
    "transaction_id", (s) => s.expires_at || "never", state, (s) => (s.wins ? "wins" : ""),
  ]);
  sources.forEach((s, index) => body.rows[index].classList.toggle("wins", s.wins === true));
  fillTable($("consumables"), Object.entries(view.consumables || {}), [(c) => c[0], (c) => c[1]]);
  fillTable($("grants"), view.grants || [], [
    "grant_id", "entitlement", "reason", "created_at", "created_by", (g) => g.expires_at || "never",
    (g) => (g.revoked_at ? g.revoked_at + " by " + g.revoked_by : null),
    (g) => (g.revoked_at ? null : button("Revoke", () => revoke(g.grant_id, g.entitlement), "revoke")),
  ]);
  fillTable($("events"), view.events || [], eventColumns());
  fillTable($("transactions"), view.transactions || [], transactionColumns);
  cursors = { transactions: view.next_transactions_cursor, events: view.next_events_cursor };
  $("transactions-more").hidden = !cursors.transactions;
  $("events-more").hidden = !cursors.events;
  $("customer-timing").textContent = "read in " + Math.round(performance.now() - started) + " ms";
  $("customer").hidden = false;
}

/** Appends the next older page of the customer's transactions or events (the other list asked for one item). */
async function more(list) {
  const other = list === "events" ? "transactions" : "events";
  const query = new URLSearchParams({ [list + "_cursor"]: cursors[list], [list + "_limit"]: PAGE, [other + "_limit"]: 1 });
  const view = await api(userPath(currentUser) + "?" + query);
  appendRows($(list), view[list] || [], list === "events" ? eventColumns() : transactionColumns);
  cursors[list] = view["next_" + list + "_cursor"];
  $(list + "-more").hidden = !cursors[list];
}

/** Finds the customer by the chosen key: a user id directly, anything else through GET /v1/admin/lookup. */
async function find(event) {
  event.preventDefault();
  say("");
  const by = $("find-by").value, value = $("find-value").value, started = performance.now();
  try {
    let userID = value;
    if (by !== "user_id") {
      try {
        userID = (await api("/v1/admin/lookup?" + new URLSearchParams({ [by]: value }))).user_id;
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) {
          $("customer").hidden = true;
          return say("Not found: " + error.message, true);
        }
        throw error;
      }
    }
    await openCustomer(userID, started);
    if (by !== "user_id") say("Found by " + $("find-by").selectedOptions[0].textContent + ".");
  } catch (error) { report(error); }
}

async function grant(event) {
  event.preventDefault();
  const body = { entitlement: $("grant-entitlement").value, reason: $("grant-reason").value };
  if ($("grant-duration").value) body.duration = $("grant-duration").value;
  try {
    await api(userPath(currentUser) + "/grants", { method: "POST", body: JSON.stringify(body) });
    say("Granted " + body.entitlement + ".");
    await openCustomer(currentUser);
  } catch (error) { report(error); }
}

async function revoke(grantID, entitlement) {
  if (!window.confirm("Revoke the grant of " + entitlement + " (" + grantID + ")?")) return;
  await api("/v1/admin/grants/" + encodeURIComponent(grantID), { method: "DELETE" });
  say("Revoked grant " + grantID + ".");
  await openCustomer(currentUser);
}

async function refreshFromApple() {
  say("Asking Apple…");
  await api(userPath(currentUser) + "/refresh", { method: "POST" });
  say("Refreshed from Apple.");
  await openCustomer(currentUser);
}

async function attachOrder(event) {
  event.preventDefault();
  const orderID = $("attach-order").value;
  try {
    say("Asking Apple…");
    const answer = await api(userPath(currentUser) + "/apple-orders", { method: "POST", body: JSON.stringify({ order_id: orderID }) });
    say("Attached order " + orderID + (answer.transferred_from ? ", moved from user " + answer.transferred_from : "") + ".");
    $("attach-order").value = "";
    await openCustomer(currentUser);
  } catch (error) { report(error); }
}

// ---- Revenue

function environment() {
  return document.querySelector("input[name=environment]:checked").value;
}

function windowQuery() {
  const query = new URLSearchParams({ environment: environment() });
  if ($("revenue-from").value) query.set("from", $("revenue-from").value + "T00:00:00Z");
  // "To" is a day included: the window ends where the next day starts.
  if ($("revenue-to").value) {
    const end = new Date(Date.parse($("revenue-to").value + "T00:00:00Z") + 86400000);
    query.set("to", end.toISOString().slice(0, 19) + "Z");
  }
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
    ...seriesBy(subscriptions.filter((s) => s.trials > 0).map((s) => Object.assign({ series: "free trials" }, s)), "series", (s) => s.trials),
    // One MRR line per currency: prices in different currencies are never added together.
    ...seriesBy(subscriptions.filter((s) => s.mrr !== null).map((s) => Object.assign({ series: "MRR estimate (" + s.price_currency + ")" }, s)),
      "series", (s) => s.mrr),
  ], "line");
  $("chart-purchases").dataset.environment = report.environment;
  fillTable($("revenue-table"), report.points, [
    (p) => p.period_start.slice(0, 10), "product_id", "purchases", "refunded", "trials",
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

/**
 * A newest-first list from `path` (its items under `key`) with an "Older" button following `next_cursor`;
 * `columns` are [heading, field name or function of the item].
 */
async function pagedList(container, path, key, columns) {
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  for (const [heading] of columns) {
    const th = document.createElement("th");
    th.textContent = heading;
    head.appendChild(th);
  }
  table.appendChild(document.createElement("tbody"));
  let cursor = null;
  const older = button("Older", () => page(), "more");
  async function page() {
    const separator = path.includes("?") ? "&" : "?";
    const body = await api(path + (cursor ? separator + "cursor=" + encodeURIComponent(cursor) : ""));
    appendRows(table, body[key] || [], columns.map((c) => c[1]));
    cursor = body.next_cursor;
    older.hidden = !cursor;
  }
  await page();
  container.replaceChildren(table, older);
}

/** The retry backlog's gauges from /metrics (read from the database by a worker, not at scrape time). */
async function loadBacklog() {
  const response = await fetch("/metrics");
  const text = response.ok ? await response.text() : "";
  const help = new Map();
  const samples = [];
  for (const line of text.split("\n")) {
    const described = /^# HELP ([a-z_]+) (.*)$/.exec(line);
    if (described) help.set(described[1], described[2]);
    const sample = /^([a-z_]*(?:retry|backlog)[a-z_]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (sample) samples.push({ name: sample[1] + (sample[2] || ""), value: sample[3], help: help.get(sample[1]) });
  }
  const container = $("ops-backlog");
  if (samples.length === 0) return unavailable(container, "The retry backlog");
  const table = document.createElement("table");
  table.id = "backlog";
  table.appendChild(document.createElement("tbody"));
  appendRows(table, samples, ["name", "value", "help"]);
  container.replaceChildren(table);
}

function loadDeliveries() {
  const status = $("deliveries-status").value;
  return pagedList($("ops-deliveries"), "/v1/admin/webhooks/deliveries?limit=" + OPERATIONS_PAGE + (status ? "&status=" + status : ""), "deliveries", [
    ["Created", "created_at"], ["Type", "type"], ["User", (d) => userButton(d.user_id)], ["Status", "status"],
    ["Attempts", "attempts"], ["Last answer", "last_response_status"], ["Next attempt", "next_attempt_at"],
    ["", (d) => redeliverButton(d.event_id, loadDeliveries)],
  ]);
}

async function loadOperations() {
  await loadCapabilities();
  await Promise.all([
    loadBacklog(),
    pagedList($("ops-notifications"), "/v1/admin/notifications?limit=" + OPERATIONS_PAGE, "notifications", [
      ["Received", "received_at"], ["Type", "notification_type"], ["Subtype", "subtype"], ["Environment", "environment"],
      ["State", "state"], ["Original transaction", "original_transaction_id"], ["User", (n) => userButton(n.user_id)],
    ]),
    loadDeliveries(),
    pagedList($("ops-audit"), "/v1/admin/audit?limit=" + OPERATIONS_PAGE, "events", [
      ["When", "occurred_at"], ["Actor", "actor"], ["Action", "action"], ["Subject", "subject"],
      ["User", (e) => userButton(e.user_id)], ["After", (e) => (e.after === null ? null : JSON.stringify(e.after))],
    ]),
  ]);
}

// ---- Receipts

/** Reads the pasted receipt (POST /v1/admin/receipts/inspect): what it claims, and each purchase's owner here. */
async function readReceipt(event) {
  event.preventDefault();
  say("");
  try {
    const receipt = await api("/v1/admin/receipts/inspect", { method: "POST", body: JSON.stringify({ receipt_data: $("receipt-data").value }) });
    const forThisApp = receipt.for_this_app === null ? "(APPLE_BUNDLE_ID not set)" : receipt.for_this_app ? "yes" : "no: another app's";
    fillTable($("receipt-summary"), [
      ["Format", receipt.format === "app_receipt" ? "app receipt" : "iOS 6 transaction receipt"], ["Bundle", receipt.bundle_id],
      ["For this app", forThisApp], ["Environment", receipt.environment], ["App version", receipt.application_version],
      ["Original app version", receipt.original_application_version], ["Created", receipt.created_at], ["Expires", receipt.expires_at],
    ], [(r) => r[0], (r) => r[1]]);
    fillTable($("receipt-purchases"), receipt.purchases, [
      "product_id", "transaction_id", "original_transaction_id", "purchase_date", "expires_date", "cancellation_date",
      (p) => userButton(p.user_id),
    ]);
    $("receipt").hidden = false;
    say("Read " + receipt.purchases.length + " purchase(s); not verified with Apple.");
  } catch (error) {
    $("receipt").hidden = true;
    if (error instanceof ApiError && error.status === 422) return say("Not a readable receipt: " + error.message, true);
    report(error);
  }
}

// ---- Wiring

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in-form").addEventListener("submit", signIn);
  $("find-form").addEventListener("submit", find);
  $("grant-form").addEventListener("submit", grant);
  $("attach-form").addEventListener("submit", attachOrder);
  $("receipt-form").addEventListener("submit", readReceipt);
  $("refresh-apple").addEventListener("click", () => refreshFromApple().catch(report));
  $("transactions-more").addEventListener("click", () => more("transactions").catch(report));
  $("events-more").addEventListener("click", () => more("events").catch(report));
  $("deliveries-status").addEventListener("change", () => loadDeliveries().catch(report));
  $("revenue-form").addEventListener("submit", (event) => { event.preventDefault(); loadRevenue().catch(report); });
  for (const radio of document.querySelectorAll("input[name=environment]")) radio.addEventListener("change", () => loadRevenue().catch(report));
  $("download-csv").addEventListener("click", () => downloadCSV().catch(report));
  $("sign-out").addEventListener("click", () => { sessionStorage.removeItem(KEY); say("Signed out."); show("sign-in"); });
  for (const button of document.querySelectorAll("nav button[data-page]")) {
    button.addEventListener("click", () => show(button.dataset.page));
  }
  show(sessionStorage.getItem(KEY) === null ? "sign-in" : "customers");
  if (sessionStorage.getItem(KEY) !== null) loadCapabilities().catch(report);
});
