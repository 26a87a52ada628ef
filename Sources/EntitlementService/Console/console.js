// The admin console. Every value from the API is inserted as text (textContent, setAttribute on SVG
// geometry only); the admin key lives in sessionStorage and leaves only as an Authorization header.
"use strict";

const KEY = "adminKey";
const $ = (id) => document.getElementById(id);

/** A failed API call: its status, the problem's detail and its Retry-After (seconds) when it gave one. */
class ApiError extends Error {
  constructor(status, detail, retryAfter) { super(detail); this.status = status; this.retryAfter = retryAfter; }
}

/** No answer at all (the service is down or the network is): fetch rejected. */
class Unreachable extends Error {
  constructor() { super("The service cannot be reached."); }
}

/** An answer that came too late: a newer request of the same view was made since, so it is dropped unseen. */
class Superseded extends Error {}

function say(text, isError) {
  const message = $("message");
  message.textContent = text;
  message.className = isError ? "error" : "";
}

/** fetch(), its rejection (no answer at all: a TypeError saying "Failed to fetch") turned into Unreachable. */
async function reach(path, options) {
  try {
    return await fetch(path, options);
  } catch (_) {
    throw new Unreachable();
  }
}

/** Calls the API with the admin key; answers the parsed JSON (or the Response when `raw`). */
async function api(path, options = {}, raw = false) {
  const headers = Object.assign({}, options.headers || {}, { Authorization: "Bearer " + sessionStorage.getItem(KEY) });
  if (options.body) headers["Content-Type"] = "application/json";
  const response = await reach(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail || detail; } catch (_) { /* not a problem body */ }
    throw new ApiError(response.status, detail, response.headers.get("Retry-After"));
  }
  return raw ? response : response.json();
}

// Answers arrive in any order: a slow one must not land on another customer's view or under another filter.
// Each view counts its requests; an answer (or failure) for a request that is no longer the view's newest is
// dropped (Superseded, which report() ignores).
const generations = {};

/** Starts a new request of `view` (replacing what it shows): answers whether it is still the newest. */
function newRequest(view) {
  const generation = generations[view] = (generations[view] || 0) + 1;
  return () => generations[view] === generation;
}

/** For a request that adds to what `view` shows (an older page): whether no new request of it was made since. */
function sameRequest(view) {
  const generation = generations[view] || 0;
  return () => generations[view] === generation;
}

/** Makes every request in flight stale (on sign-out: no answer may show after it). */
function dropAllRequests() {
  for (const view of Object.keys(generations)) generations[view] += 1;
}

/** `promise`'s answer, or Superseded when `isCurrent()` no longer holds once it settled (whichever way). */
async function ifCurrent(isCurrent, promise) {
  let answer, failure = null;
  try { answer = await promise; } catch (error) { failure = error; }
  if (!isCurrent()) throw new Superseded();
  if (failure) throw failure;
  return answer;
}

/** Runs `action` with `control` disabled, so that a double click or a second Enter cannot run it twice. */
async function once(control, action) {
  if (control.disabled) return;
  control.disabled = true;
  try {
    return await action();
  } finally {
    control.disabled = false;
  }
}

/**
 * `text` between Unicode isolates (FSI … PDI), for a value from the API inside a sentence: a right-to-left
 * override in it then reorders only itself, not the words around it.
 */
function isolated(text) {
  return "\u2068" + text + "\u2069";
}

/** Text longer than this may break anywhere (class "long"); shorter (ids, times) stays on one line. */
const LONG_TEXT = 40;

/** A cell holding `value` as text ("—" when absent), or the node itself when it is one (a button). */
function cell(row, value) {
  const td = document.createElement("td");
  if (value instanceof Node) td.appendChild(value);
  else td.textContent = value === null || value === undefined ? "—" : String(value);
  // A 1000-character reason with no space would otherwise widen the page to thousands of pixels.
  if (td.textContent.length > LONG_TEXT) td.className = "long";
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
  element.addEventListener("click", () => once(element, action).catch(report));
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

/** Ends the session: the key goes, and so does everything read with it (no customer is left to act on). */
function signOut() {
  sessionStorage.removeItem(KEY);
  forget();
  show("sign-in");
}

/** How an API failure reads: its status and detail, and the seconds of its Retry-After when it gave one. */
function failure(error) {
  const retry = /^\d+$/.test(error.retryAfter || "") ? " (Retry-After: " + error.retryAfter + " s)" : "";
  return "The service answered " + error.status + ": " + error.message + retry;
}

function report(error) {
  if (error instanceof Superseded) return;
  if (error instanceof ApiError && error.status === 401) {
    signOut();
    say("The admin key was refused (401): " + error.message, true);
  } else if (error instanceof ApiError && error.status === 403) {
    signOut();
    say("That key is not an admin key (403): " + error.message, true);
  } else if (error instanceof ApiError) {
    say(failure(error), true);
  } else {
    say(error instanceof Unreachable ? error.message : String(error), true);
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
  const userID = currentUser;
  return [
    "created_at", "sequence", "type", "product_id", "transaction_id", "delivery",
    (e) => redeliverButton(e.id, () => reopen(userID)),
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

/** Hides the customer shown and empties its view, and drops any answer still coming for it. */
function clearCustomer() {
  newRequest("customer");
  currentUser = null;
  cursors = { transactions: null, events: null };
  $("customer").hidden = true;
  for (const id of ["customer-id", "customer-as-of", "customer-timing", "unknown-products"]) $(id).textContent = "";
  for (const table of $("customer").querySelectorAll("table")) table.tBodies[0].replaceChildren();
  $("grant-form").reset();
  $("attach-form").reset();
}

/** Forgets everything read with the key (on sign-out, or when the key is refused mid-session). */
function forget() {
  dropAllRequests();
  clearCustomer();
  $("find-value").value = "";
  for (const id of ["ops-backlog", "ops-notifications", "ops-deliveries", "ops-audit", "chart-purchases", "chart-revenue",
    "chart-subscriptions"]) $(id).replaceChildren();
  $("revenue-table").tBodies[0].replaceChildren();
  $("receipt").hidden = true;
  for (const table of $("receipt").querySelectorAll("table")) table.tBodies[0].replaceChildren();
}

/** The App Store purchase's state in short words: renewal, billing trouble, family sharing. */
function details(e) {
  if (e.source !== "app_store") return null;
  const labels = [];
  if (e.will_renew) labels.push("renews");
  else if (e.product_type === "auto_renewable") labels.push("auto-renew off");
  if (e.in_grace_period) labels.push("grace period");
  if (e.in_billing_retry) labels.push("billing retry");
  if (e.ownership === "family_shared") labels.push("family shared");
  return labels.join(", ") || null;
}

/**
 * Shows the customer view of `userID`: the newest page of its transactions and events, and how long it took
 * since `started` (a look-up's start, else now). An answer overtaken by a newer look-up is dropped.
 */
async function openCustomer(userID, started = performance.now()) {
  const isCurrent = newRequest("customer");
  if (userID !== currentUser) {
    // Another customer: the one shown goes first, so that no action meant for the new one reaches it.
    currentUser = null;
    $("customer").hidden = true;
  }
  const view = await ifCurrent(isCurrent, api(userPath(userID) + "?transactions_limit=" + PAGE + "&events_limit=" + PAGE));
  currentUser = userID;
  $("customer-id").textContent = view.user_id;
  $("customer-as-of").textContent = view.as_of;
  const entitlements = Object.entries(view.entitlements || {}).map(([name, e]) => Object.assign({ name }, e));
  fillTable($("entitlements"), entitlements, [
    "name", state, "source",
    (e) => (e.source === "grant" ? "grant " + e.grant_id + " — " + e.reason : e.product_id + " (" + e.environment + ")"),
    (e) => e.expires_at || "never", details,
  ]);
  // Purchases of products the catalog lacks grant nothing: said, so that "why no premium?" has its answer.
  const unknown = view.unknown_products || [];
  $("unknown-products").textContent = unknown.length ? "Purchased, not in the catalog (grants nothing): " + unknown.join(", ") : "";
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

/**
 * Appends the next older page of the customer's transactions or events (the other list asked for one item);
 * dropped when another customer (or the same one again) was opened meanwhile.
 */
async function more(list) {
  const other = list === "events" ? "transactions" : "events";
  const query = new URLSearchParams({ [list + "_cursor"]: cursors[list], [list + "_limit"]: PAGE, [other + "_limit"]: 1 });
  const view = await ifCurrent(sameRequest("customer"), api(userPath(currentUser) + "?" + query));
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
      // The look-up is the customer view's request too: a later find overtakes it.
      const isCurrent = newRequest("customer");
      try {
        userID = (await ifCurrent(isCurrent, api("/v1/admin/lookup?" + new URLSearchParams({ [by]: value })))).user_id;
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

/** Shows `userID` again after a change made to it, unless another customer is shown by now. */
async function reopen(userID) {
  if (currentUser === userID) await openCustomer(userID);
}

/**
 * Grants from the form, once: the Grant button is disabled while the request is out (a double click or a second
 * Enter would grant twice), and the form is emptied after it, so that Enter again grants nothing.
 */
async function grant(event) {
  event.preventDefault();
  const form = $("grant-form"), userID = currentUser;
  const body = { entitlement: $("grant-entitlement").value, reason: $("grant-reason").value };
  if ($("grant-duration").value) body.duration = $("grant-duration").value;
  try {
    await once(form.querySelector("button[type=submit]"), async () => {
      await api(userPath(userID) + "/grants", { method: "POST", body: JSON.stringify(body) });
      form.reset();
      say("Granted " + isolated(body.entitlement) + ".");
      await reopen(userID);
    });
  } catch (error) { report(error); }
}

async function revoke(grantID, entitlement) {
  if (!window.confirm("Revoke the grant of " + isolated(entitlement) + " (" + grantID + ")?")) return;
  const userID = currentUser;
  await api("/v1/admin/grants/" + encodeURIComponent(grantID), { method: "DELETE" });
  say("Revoked grant " + grantID + ".");
  await reopen(userID);
}

async function refreshFromApple() {
  const userID = currentUser;
  say("Asking Apple…");
  await api(userPath(userID) + "/refresh", { method: "POST" });
  say("Refreshed from Apple.");
  await reopen(userID);
}

async function attachOrder(event) {
  event.preventDefault();
  const form = $("attach-form"), orderID = $("attach-order").value, userID = currentUser;
  try {
    await once(form.querySelector("button[type=submit]"), async () => {
      say("Asking Apple…");
      const answer = await api(userPath(userID) + "/apple-orders", { method: "POST", body: JSON.stringify({ order_id: orderID }) });
      say("Attached order " + isolated(orderID) + (answer.transferred_from ? ", moved from user " + isolated(answer.transferred_from) : "") + ".");
      $("attach-order").value = "";
      await reopen(userID);
    });
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
  // The environment toggled twice quickly: only the last one's report is drawn.
  const isCurrent = newRequest("revenue");
  let report;
  try {
    report = await ifCurrent(isCurrent, api("/v1/admin/reports/timeseries?" + query));
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
 * `columns` are [heading, field name or function of the item]. Shown only while `isCurrent()` holds when its
 * first page arrives (a filter changed meanwhile asked for another list).
 */
async function pagedList(container, path, key, columns, isCurrent) {
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
    const body = await ifCurrent(isCurrent, api(path + (cursor ? separator + "cursor=" + encodeURIComponent(cursor) : "")));
    appendRows(table, body[key] || [], columns.map((c) => c[1]));
    cursor = body.next_cursor;
    older.hidden = !cursor;
  }
  await page();
  container.replaceChildren(table, older);
}

/** The retry backlog's gauges from /metrics (read from the database by a worker, not at scrape time). */
async function loadBacklog(isCurrent) {
  const response = await ifCurrent(isCurrent, reach("/metrics"));
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

function loadDeliveries(isCurrent = newRequest("deliveries")) {
  const status = $("deliveries-status").value;
  return pagedList($("ops-deliveries"), "/v1/admin/webhooks/deliveries?limit=" + OPERATIONS_PAGE + (status ? "&status=" + status : ""), "deliveries", [
    ["Created", "created_at"], ["Type", "type"], ["User", (d) => userButton(d.user_id)], ["Status", "status"],
    ["Attempts", "attempts"], ["Last answer", "last_response_status"], ["Next attempt", "next_attempt_at"],
    ["", (d) => redeliverButton(d.event_id, () => loadDeliveries())],
  ], isCurrent);
}

async function loadOperations() {
  const isCurrent = newRequest("operations"), deliveries = newRequest("deliveries");
  await ifCurrent(isCurrent, loadCapabilities());
  await Promise.all([
    loadBacklog(isCurrent),
    pagedList($("ops-notifications"), "/v1/admin/notifications?limit=" + OPERATIONS_PAGE, "notifications", [
      ["Received", "received_at"], ["Type", "notification_type"], ["Subtype", "subtype"], ["Environment", "environment"],
      ["State", "state"], ["Original transaction", "original_transaction_id"], ["User", (n) => userButton(n.user_id)],
    ], isCurrent),
    loadDeliveries(deliveries),
    pagedList($("ops-audit"), "/v1/admin/audit?limit=" + OPERATIONS_PAGE, "events", [
      ["When", "occurred_at"], ["Actor", "actor"], ["Action", "action"], ["Subject", "subject"],
      ["User", (e) => userButton(e.user_id)], ["After", (e) => (e.after === null ? null : JSON.stringify(e.after))],
    ], isCurrent),
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
  $("refresh-apple").addEventListener("click", () => once($("refresh-apple"), refreshFromApple).catch(report));
  for (const list of ["transactions", "events"]) {
    $(list + "-more").addEventListener("click", () => once($(list + "-more"), () => more(list)).catch(report));
  }
  $("deliveries-status").addEventListener("change", () => loadDeliveries().catch(report));
  $("revenue-form").addEventListener("submit", (event) => { event.preventDefault(); loadRevenue().catch(report); });
  for (const radio of document.querySelectorAll("input[name=environment]")) radio.addEventListener("change", () => loadRevenue().catch(report));
  $("download-csv").addEventListener("click", () => downloadCSV().catch(report));
  $("sign-out").addEventListener("click", () => { signOut(); say("Signed out."); });
  for (const button of document.querySelectorAll("nav button[data-page]")) {
    button.addEventListener("click", () => show(button.dataset.page));
  }
  show(sessionStorage.getItem(KEY) === null ? "sign-in" : "customers");
  if (sessionStorage.getItem(KEY) !== null) loadCapabilities().catch(report);
});
