"""The admin console in a real browser (headless Chromium through Selenium) against the real service.

Usage: check_console.py BASE_URL APP_KEY ADMIN_KEY SCREENSHOT_DIR HOOK_PORT

The service (scripts/console/run.sh) holds 100 000 seeded customers and sends its webhooks to HOOK_PORT, where
this check runs a receiver answering 204. The check makes its own scenario through the API (receipts via the
fake App Store's verifyReceipt, Production and Sandbox, a server order, and a user whose id is markup), then
drives /admin: a wrong key is refused with a clear message; sign-in; the customer found by user id, by original
transaction id, by transaction id and by server order id (each read in under a second), with its entitlements
(each purchase's details: renewal, family sharing; purchased products the catalog lacks) and the source that wins; a
grant and its revocation, each seen among the customer's events; a double click on Grant granting once and emptying
the form; a long reason and entitlement wrapping within the page; the Apple actions disabled without an App Store
Server API key; a seeded customer; the markup user id shown as text with no script run; a user id with a
right-to-left override kept apart from the header around it; a slow answer for one customer never shown over the
customer asked for later; a service that cannot be reached and a 503's Retry-After said plainly; sign-out
forgetting the customer shown; Revenue's chart drawn from the scenario's purchases, Production and Sandbox apart; the purchases CSV
downloaded; Operations listing notifications, webhook deliveries (one redelivered and received again; a slow
answer for a status filter no longer chosen dropped) and the audit log; Receipts reading a shared Apple receipt with each purchase's owner. Writes a screenshot of each page to SCREENSHOT_DIR and exits non-zero on the first failed check.
"""
import base64
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE, APP_KEY, ADMIN_KEY, SHOTS, HOOK_PORT = sys.argv[1:6]
RUN = uuid.uuid4().hex[:8]
XSS_USER = "<img src=x onerror=alert(1)>"
MONTHLY, LIFETIME, COINS = "com.example.premium.monthly", "com.example.lifetime", "com.example.coins.100"
FIXTURES = os.environ.get("APPLE_FIXTURES") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "fixtures", "apple")
RECEIPT_USER, RECEIPT_ORIGINAL = "console-receipt-" + RUN, "1000000692878476"
# A user id holding a right-to-left override (U+202E): shown as is, it would reverse the header after it.
RTL_USER = "console-rtl-\u202e" + RUN
DETAILS_USER, UNKNOWN_PRODUCT = "console-details-" + RUN, "com.example.not.in.catalog"
# Delays, in the page, the answers to requests whose URL holds window.slowMatch by two seconds.
SLOW_FETCH = """
if (!window.realFetch) window.realFetch = window.fetch;
window.slowMatch = arguments[0];
window.fetch = function (url, options) {
  const answer = window.realFetch.call(this, url, options);
  return String(url).includes(window.slowMatch) ? answer.then((r) => new Promise((done) => setTimeout(() => done(r), 2000))) : answer;
};
"""


def call(method, path, body=None, key=APP_KEY):
    request = urllib.request.Request(BASE + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def receipt(transaction_id, product, environment, **extra):
    """A fake receipt (base64 of {"fake": {...}} in Apple's field names) bought now; `extra`: more of the
    transaction's fields (in_app_ownership_type)."""
    now = int(time.time() * 1000)
    transaction = dict({"transaction_id": transaction_id, "product_id": product, "purchase_date_ms": now}, **extra)
    if product == MONTHLY:
        transaction["expires_date_ms"] = now + 30 * 86_400_000
    fake = {"bundle_id": "com.example.app", "environment": environment, "in_app": [transaction], "latest_receipt_info": [transaction]}
    return base64.b64encode(json.dumps({"fake": fake}).encode()).decode()


class Receiver(http.server.BaseHTTPRequestHandler):
    """The webhook receiver: answers 204 and keeps every `webhook-id` it got, in order."""
    received = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Receiver.received.append(self.headers.get("webhook-id"))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def scenario():
    """u-RUN: a Production monthly subscription, lifetime and coins, a server order and a premium grant; s-RUN: a
    Sandbox monthly; the markup user: a grant. Answers the users, the monthly's original transaction id and the order id."""
    user, sandbox_user = "console-" + RUN, "console-sandbox-" + RUN
    base = int(RUN, 16) % 10**9
    ids = []
    for offset, (who, product, environment) in enumerate([(user, MONTHLY, "Production"), (user, LIFETIME, "Production"),
                                                          (sandbox_user, MONTHLY, "Sandbox"), (user, COINS, "Production")]):
        ids.append(str(7_000_000_000 + base * 10 + offset))
        answer = call("POST", "/v1/receipts", {"user_id": who, "receipt_data": receipt(ids[-1], product, environment)})
        check(answer.get("status") == "verified" and answer.get("environment") == environment, f"receipt for {who}: {answer}")
    # The purchase of the shared RevenueCat receipt (original transaction 1000000692878476), owned here by a user of
    # its own through a fake receipt, for the Receipts page.
    answer = call("POST", "/v1/receipts", {"user_id": RECEIPT_USER, "receipt_data": receipt(RECEIPT_ORIGINAL, MONTHLY, "Production")})
    check(answer.get("status") == "verified", f"the receipt page's purchase: {answer}")
    order = call("POST", "/v1/orders", {"user_id": user, "product_id": LIFETIME})
    # A second source of premium, shorter than the subscription: listed, but the subscription wins.
    call("POST", "/v1/admin/users/" + user + "/grants", {"entitlement": "premium", "duration": "P1D", "reason": "second source"}, key=ADMIN_KEY)
    call("POST", "/v1/admin/users/" + urllib.parse.quote(XSS_USER, safe="") + "/grants",
         {"entitlement": "premium", "duration": "P1D", "reason": "markup user id"}, key=ADMIN_KEY)
    call("POST", "/v1/admin/users/" + urllib.parse.quote(RTL_USER, safe="") + "/grants",
         {"entitlement": "premium", "duration": "P1D", "reason": "right-to-left override"}, key=ADMIN_KEY)
    # The details user: a family-shared monthly subscription (Sandbox, apart from the Revenue checks' Production)
    # and a purchase of a product the catalog lacks.
    for offset, (product, extra) in enumerate([(MONTHLY, {"in_app_ownership_type": "FAMILY_SHARED"}), (UNKNOWN_PRODUCT, {})]):
        answer = call("POST", "/v1/receipts", {"user_id": DETAILS_USER, "receipt_data": receipt(str(7_100_000_000 + base * 10 + offset), product, "Sandbox", **extra)})
        check(answer.get("status") == "verified", f"the details user's receipt of {product}: {answer}")
    return user, sandbox_user, ids[0], ids[1], order["order_id"]


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print("ok:", what.split(":")[0] if ":" in what else what)


def browser(downloads):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1400"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    return driver


def main():
    os.makedirs(SHOTS, exist_ok=True)
    downloads = os.path.join(SHOTS, "downloads")
    os.makedirs(downloads, exist_ok=True)
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", int(HOOK_PORT)), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    user, sandbox_user, original_id, lifetime_id, order_id = scenario()
    driver = browser(downloads)
    wait = WebDriverWait(driver, 15, poll_frequency=0.05, ignored_exceptions=[StaleElementReferenceException])
    by_id = lambda element_id: driver.find_element(By.ID, element_id)

    def shot(name, element_id=None):
        """A screenshot of the page from its top, or from element `element_id` when given."""
        if element_id:
            driver.execute_script("document.getElementById(arguments[0]).scrollIntoView()", element_id)
        else:
            driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(os.path.join(SHOTS, name + ".png"))

    try:
        driver.get(BASE + "/admin")
        wait.until(lambda d: by_id("sign-in-form").is_displayed())
        loaded = driver.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd")
        check(0 < loaded < 1000, f"the page loads in under a second: {loaded:.0f} ms")

        # A wrong key: refused, said clearly, and not kept.
        by_id("admin-key").send_keys("wrong-" + RUN)
        by_id("sign-in-form").submit()
        wait.until(lambda d: "refused" in by_id("message").text)
        check("401" in by_id("message").text and by_id("page-sign-in").is_displayed(), "a wrong key is refused: " + by_id("message").text)
        check(driver.execute_script("return sessionStorage.getItem('adminKey')") is None, "a refused key is not kept")
        shot("sign-in-refused")
        # An app key: not an admin key, said so.
        by_id("admin-key").send_keys(APP_KEY)
        by_id("sign-in-form").submit()
        wait.until(lambda d: "not an admin key" in by_id("message").text)
        check("403" in by_id("message").text and by_id("page-sign-in").is_displayed(), "an app key is refused: " + by_id("message").text)

        by_id("admin-key").send_keys(ADMIN_KEY)
        by_id("sign-in-form").submit()
        wait.until(lambda d: by_id("page-customers").is_displayed())
        check(ADMIN_KEY not in driver.current_url, "the key is not in the URL")

        def find(by, value, user_id):
            """Finds the customer by `by` and waits for its view; answers how long the console took (ms)."""
            Select(by_id("find-by")).select_by_value(by)
            field = by_id("find-value")
            field.clear()
            field.send_keys(value)
            driver.execute_script("document.getElementById('customer-timing').textContent = ''")
            by_id("find-form").submit()
            wait.until(lambda d: by_id("customer").is_displayed() and by_id("customer-id").text == user_id
                       and by_id("customer-timing").text)
            took = int(by_id("customer-timing").text.split()[2])
            check(took < 1000, f"found {user_id!r} by {by} in {took} ms")
            return took

        def rows(table):
            return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in by_id(table).find_elements(By.CSS_SELECTOR, "tbody tr")]

        # The customer by every key, its entitlements and the source that wins.
        find("user_id", user, user)
        entitlements = rows("entitlements")
        check(any(r[0] == "premium" and r[1] == "active" and r[2] == "app_store" and MONTHLY in r[3] for r in entitlements), f"premium from the App Store: {entitlements}")
        check(any(r[0] == "pro" and r[2] == "app_store" for r in entitlements), f"pro from the lifetime purchase: {entitlements}")
        sources = rows("sources")
        check(any(r[0] == "premium" and r[1] == "app_store" and r[3] == original_id and r[7] == "wins" for r in sources)
              and any(r[0] == "premium" and r[1] == "grant" and r[6] == "active" and r[7] == "" for r in sources),
              f"premium's two sources, the subscription winning over the shorter grant: {sources}")
        check(["coins", "100"] in rows("consumables"), f"the balance: {rows('consumables')}")
        transactions = rows("transactions")
        check({original_id, lifetime_id} <= {r[0] for r in transactions}, f"the transactions: {transactions}")
        check(any(r[2] == "initial_purchase" for r in rows("events")), f"the purchase's event: {rows('events')}")
        check(by_id("refresh-apple").get_attribute("disabled") is not None and "API key" in by_id("apple-hint").text,
              "refresh from Apple is disabled without an App Store Server API key")
        shot("customer")
        find("original_transaction_id", original_id, user)
        find("transaction_id", lifetime_id, user)
        find("order_id", order_id, user)
        shot("customer-by-order-id")
        # Not found: said, naming what was looked for.
        Select(by_id("find-by")).select_by_value("original_transaction_id")
        by_id("find-value").clear()
        by_id("find-value").send_keys("1")
        by_id("find-form").submit()
        wait.until(lambda d: "Not found" in by_id("message").text)
        check("original_transaction_id" in by_id("message").text and not by_id("customer").is_displayed(), "an unknown purchase: " + by_id("message").text)
        # A user named ".." cannot be addressed from a browser (it resolves the name as a path step): said so, and
        # the customer shown before is gone, so that nothing done next reaches it.
        find("user_id", user, user)
        Select(by_id("find-by")).select_by_value("user_id")
        by_id("find-value").clear()
        by_id("find-value").send_keys("..")
        by_id("find-form").submit()
        wait.until(lambda d: "cannot address" in by_id("message").text)
        check(not by_id("customer").is_displayed(), "a user named '..': " + by_id("message").text)
        find("user_id", user, user)

        # Grant, then revoke: each in the entitlements, the grants and the customer's events.
        by_id("grant-entitlement").send_keys("beta")
        by_id("grant-duration").send_keys("P7D")
        by_id("grant-reason").send_keys("console check " + RUN)
        by_id("grant-form").submit()
        wait.until(lambda d: any(r[0] == "beta" and r[1] == "active" and r[2] == "grant" for r in rows("entitlements")))
        grant_fields = ["grant-entitlement", "grant-duration", "grant-reason"]
        check(all(by_id(f).get_attribute("value") == "" for f in grant_fields),
              "the grant form is emptied after a grant: " + repr([by_id(f).get_attribute("value") for f in grant_fields]))
        check(any("console check " + RUN in r[3] for r in rows("entitlements")), f"the grant and its reason: {rows('entitlements')}")
        check(any(r[2] == "grant" for r in rows("events")), f"the grant's event: {rows('events')}")
        shot("customer-granted")
        by_id("grants").find_element(By.XPATH, ".//tr[td[2]='beta']//button[contains(@class, 'revoke')]").click()
        driver.switch_to.alert.accept()
        wait.until(lambda d: any(r[0] == "beta" and r[1].startswith("inactive") for r in rows("entitlements")))
        check(any(r[0] == "beta" and "revoked" in r[1] for r in rows("entitlements")), f"the grant revoked: {rows('entitlements')}")
        check(any(r[2] == "grant_revoked" for r in rows("events")), f"the revocation's event: {rows('events')}")
        check(any(r[1] == "beta" and r[6] != "—" for r in rows("grants")), f"the grant shows its revocation: {rows('grants')}")
        shot("customer-revoked")

        # A double click on Grant grants once; the form is emptied after it, so that Enter again grants nothing.
        once = "once-" + RUN
        by_id("grant-entitlement").send_keys(once)
        by_id("grant-reason").send_keys("double click " + RUN)
        ActionChains(driver).double_click(by_id("grant-form").find_element(By.CSS_SELECTOR, "button[type=submit]")).perform()
        wait.until(lambda d: any(r[0] == once for r in rows("entitlements")))
        by_id("grant-reason").send_keys(Keys.ENTER)
        time.sleep(1)  # time for a second or third grant, were one sent
        granted = [g for g in call("GET", "/v1/admin/users/" + user, key=ADMIN_KEY)["grants"] if g["entitlement"] == once]
        check(len(granted) == 1, f"a double click on Grant, then Enter, grants once: {len(granted)} grant(s)")

        # A 1000-character reason and a 255-character entitlement, neither with a space: wrapped, not widening the page.
        wide = "wide-" + "w" * 250
        call("POST", "/v1/admin/users/" + user + "/grants", {"entitlement": wide, "reason": "r" * 1000}, key=ADMIN_KEY)
        find("user_id", user, user)
        wait.until(lambda d: any(r[1] == wide for r in rows("grants")))
        width = driver.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        check(width[0] <= width[1], f"a long reason and entitlement fit the page: {width[0]} px wide in {width[1]} px")
        shot("customer-long-text", "grants")

        # One of the 100 000 seeded customers, by its purchase.
        find("original_transaction_id", "5000054321", "load-54321")
        check(any(r[0] == "5000054321" for r in rows("transactions")), "the seeded customer's purchase")

        # A purchase's details (family sharing, renewal) and a purchased product the catalog lacks.
        find("user_id", DETAILS_USER, DETAILS_USER)
        entitlements = rows("entitlements")
        check(any(r[0] == "premium" and "family shared" in r[5] and ("renews" in r[5] or "auto-renew off" in r[5]) for r in entitlements),
              f"the subscription's details: {entitlements}")
        check(UNKNOWN_PRODUCT in by_id("unknown-products").text, "the product not in the catalog: " + by_id("unknown-products").text)
        shot("customer-details")

        # The markup user id: text, no element made, no script run.
        find("user_id", XSS_USER, XSS_USER)
        check(by_id("customer-id").text == XSS_USER, "the markup user id shows as text")
        check(len(driver.find_elements(By.CSS_SELECTOR, "main img")) == 0, "no element was made from it")
        try:
            driver.switch_to.alert
            check(False, "an alert ran")
        except NoAlertPresentException:
            check(True, "no script ran")
        shot("customer-markup-user-id")

        # A right-to-left override in the user id reorders the id only: the header's "as of …" stays after it.
        find("user_id", RTL_USER, RTL_USER)
        place = driver.execute_script("""const id = document.getElementById('customer-id').getBoundingClientRect();
            const hint = document.getElementById('customer-as-of').parentElement.getBoundingClientRect();
            return [id.right, hint.left];""")
        check(place[1] >= place[0] - 1, f"the right-to-left user id is isolated: its box ends at {place[0]:.0f}, the header's rest starts at {place[1]:.0f}")
        shot("customer-rtl-user-id")

        # A slow answer for one customer does not replace the customer asked for after it.
        driver.execute_script(SLOW_FETCH, "/v1/admin/users/" + sandbox_user)
        Select(by_id("find-by")).select_by_value("user_id")
        by_id("find-value").clear()
        by_id("find-value").send_keys(sandbox_user)
        by_id("find-form").submit()
        time.sleep(0.2)
        asked = time.monotonic()
        find("user_id", user, user)
        time.sleep(max(0, 2.5 - (time.monotonic() - asked)))
        check(by_id("customer-id").text == user and not any(r[0] == "premium" and "Sandbox" in r[3] for r in rows("entitlements")),
              f"a slow answer for {sandbox_user} is dropped: {by_id('customer-id').text} shown")
        driver.execute_script("window.fetch = window.realFetch")

        # The service out of reach, or answering 503 with Retry-After: said plainly.
        driver.execute_script("window.fetch = () => Promise.reject(new TypeError('Failed to fetch'))")
        by_id("find-form").submit()
        wait.until(lambda d: by_id("message").text)
        check(by_id("message").text == "The service cannot be reached.", "an unreachable service: " + by_id("message").text)
        driver.execute_script("""window.fetch = () => Promise.resolve(new Response(JSON.stringify({detail: 'Ask again after Retry-After seconds.'}),
            {status: 503, headers: {'Content-Type': 'application/problem+json', 'Retry-After': '7'}}))""")
        by_id("find-form").submit()
        wait.until(lambda d: "503" in by_id("message").text)
        check("7 s" in by_id("message").text, "a 503's Retry-After: " + by_id("message").text)
        driver.execute_script("window.fetch = window.realFetch")

        # Sign-out forgets the customer shown (no Revoke left to press); signing in again shows none.
        find("user_id", XSS_USER, XSS_USER)
        by_id("sign-out").click()
        wait.until(lambda d: by_id("page-sign-in").is_displayed())
        check(by_id("customer-id").get_attribute("textContent") == "" and not driver.find_elements(By.CSS_SELECTOR, "#customer button.revoke"),
              "sign-out forgets the customer shown")
        by_id("admin-key").send_keys(ADMIN_KEY)
        by_id("sign-in-form").submit()
        wait.until(lambda d: by_id("page-customers").is_displayed() and "Signed in" in by_id("message").text)
        check(not by_id("customer").is_displayed() and not rows("grants"), "after signing in again no customer is shown")

        # Revenue: the chart from the scenario's purchases, Production and Sandbox apart.
        driver.find_element(By.CSS_SELECTOR, "nav button[data-page=revenue]").click()
        series = lambda: {g.get_attribute("data-series"): len(g.find_elements(By.TAG_NAME, "rect"))
                          for g in by_id("chart-purchases").find_elements(By.CSS_SELECTOR, "g.series")}
        wait.until(lambda d: by_id("chart-purchases").get_attribute("data-environment") == "Production" and series())
        production = series()
        check(production.get(MONTHLY, 0) >= 1 and production.get(LIFETIME, 0) >= 1, f"the Production chart has the purchases: {production}")
        check(len(by_id("chart-subscriptions").find_elements(By.TAG_NAME, "polyline")) == 2, "active subscriptions and MRR are drawn")
        shot("revenue-production")
        driver.find_element(By.CSS_SELECTOR, "input[name=environment][value=Sandbox]").click()
        wait.until(lambda d: by_id("chart-purchases").get_attribute("data-environment") == "Sandbox")
        sandbox = series()
        check(sandbox.get(MONTHLY, 0) >= 1 and LIFETIME not in sandbox, f"the Sandbox chart has Sandbox's purchases only: {sandbox}")
        shot("revenue-sandbox")

        # The CSV of the purchases report (Sandbox, as toggled).
        by_id("download-csv").click()
        path = os.path.join(downloads, "purchases-Sandbox.csv")
        wait.until(lambda d: os.path.exists(path) and os.path.getsize(path) > 0)
        lines = open(path, encoding="utf-8").read().splitlines()
        check(lines[0].startswith("product_id,environment,") and any(l.startswith(MONTHLY + ",Sandbox,") for l in lines[1:])
              and not any(",Production," in l for l in lines), f"the CSV: {lines}")

        # Operations: the backlog, notifications (the seeded ones), deliveries (one redelivered), the audit log.
        # The scenario's events are first all delivered, so that a redelivery is a second receipt.
        deadline = time.monotonic() + 30
        while call("GET", "/v1/admin/webhooks/deliveries?status=pending", key=ADMIN_KEY)["deliveries"]:
            check(time.monotonic() < deadline, "the scenario's webhook events are delivered within 30 s")
            time.sleep(0.1)
        driver.find_element(By.CSS_SELECTOR, "nav button[data-page=operations]").click()
        started = time.monotonic()
        wait.until(lambda d: all(by_id(s).find_elements(By.CSS_SELECTOR, "tbody tr") for s in ["ops-backlog", "ops-notifications", "ops-deliveries", "ops-audit"]))
        took = (time.monotonic() - started) * 1000
        check(took < 1000, f"operations listed in {took:.0f} ms")
        check("receipt_retry_backlog" in by_id("ops-backlog").text, "the retry backlog: " + by_id("ops-backlog").text.replace("\n", " | "))
        check("DID_RENEW" in by_id("ops-notifications").text and "applied" in by_id("ops-notifications").text, "the notifications received")
        audit = by_id("ops-audit").text
        check("grant.revoke" in audit and "grant.create" in audit, "the audit log lists the grant and its revocation")
        check(XSS_USER in by_id("ops-deliveries").text and not driver.find_elements(By.CSS_SELECTOR, "main img"), "the markup user id in deliveries shows as text")
        wait.until(lambda d: "grant_revoked" in by_id("ops-deliveries").text and "delivered" in by_id("ops-deliveries").text)
        first = by_id("ops-deliveries").find_element(By.CSS_SELECTOR, "tbody tr")
        deliveries_before = len(Receiver.received)
        first.find_element(By.CSS_SELECTOR, "button.redeliver").click()
        wait.until(lambda d: "queued" in by_id("message").text)
        event_id = by_id("message").text.split()[1]
        wait.until(lambda d: Receiver.received.count(event_id) >= 2 and len(Receiver.received) > deliveries_before)
        check(True, f"event {event_id} redelivered and received again")
        shot("operations")
        shot("operations-deliveries", "ops-deliveries")
        shot("operations-audit", "ops-audit")
        # Older pages follow next_cursor.
        count = len(by_id("ops-audit").find_elements(By.CSS_SELECTOR, "tbody tr"))
        by_id("ops-audit").find_element(By.CSS_SELECTOR, "button.more").click()
        wait.until(lambda d: len(by_id("ops-audit").find_elements(By.CSS_SELECTOR, "tbody tr")) > count)
        check(True, "the audit log pages on")
        # The deliveries filter changed while the first status's answer is slow: that answer is dropped.
        driver.execute_script(SLOW_FETCH, "status=pending")
        Select(by_id("deliveries-status")).select_by_visible_text("pending")
        time.sleep(0.2)
        Select(by_id("deliveries-status")).select_by_visible_text("delivered")
        time.sleep(2.5)
        statuses = {r[3] for r in rows("ops-deliveries")}
        check(statuses == {"delivered"}, f"a slow answer for another status is dropped: {statuses}")
        driver.execute_script("window.fetch = window.realFetch")
        # A user id in a list opens the customer.
        by_id("ops-audit").find_element(By.XPATH, ".//button[contains(@class, 'user') and text()='%s']" % user).click()
        wait.until(lambda d: by_id("page-customers").is_displayed() and by_id("customer-id").text == user)
        check(True, "a user in the audit log opens the customer")

        # Receipts: the shared RevenueCat receipt read, each purchase with its owner here; a user opens the customer.
        driver.find_element(By.CSS_SELECTOR, "nav button[data-page=receipts]").click()
        with open(os.path.join(FIXTURES, "receipt_sandbox_autorenew_monthly_to_annual_revenuecat.b64")) as f:
            driver.execute_script("document.getElementById('receipt-data').value = arguments[0]", f.read().strip())
        by_id("receipt-form").submit()
        wait.until(lambda d: by_id("receipt").is_displayed() and rows("receipt-purchases"))
        purchases, summary = rows("receipt-purchases"), by_id("receipt-summary").text
        check(len(purchases) == 9 and all(r[2] == RECEIPT_ORIGINAL and r[6] == RECEIPT_USER for r in purchases),
              f"the receipt's nine purchases, owned here by {RECEIPT_USER}: {purchases}")
        check("com.revenuecat.sampleapp" in summary and "another app's" in summary and "Sandbox" in summary,
              "the receipt's summary: " + summary.replace("\n", " | "))
        shot("receipts")
        by_id("receipt-purchases").find_element(By.XPATH, ".//button[contains(@class, 'user')]").click()
        wait.until(lambda d: by_id("page-customers").is_displayed() and by_id("customer-id").text == RECEIPT_USER)
        check(True, "a receipt's owner opens the customer")
        driver.find_element(By.CSS_SELECTOR, "nav button[data-page=receipts]").click()
        driver.execute_script("document.getElementById('receipt-data').value = arguments[0]", base64.b64encode(b"not a receipt").decode())
        by_id("receipt-form").submit()
        wait.until(lambda d: "Not a readable receipt" in by_id("message").text)
        check(not by_id("receipt").is_displayed(), "an unreadable receipt is said so: " + by_id("message").text)

        # Nothing the policy refused, no script error.
        problems = [entry["message"] for entry in driver.get_log("browser")
                    if entry["level"] == "SEVERE" and ("Content Security Policy" in entry["message"] or "Uncaught" in entry["message"])]
        check(not problems, f"no policy violation or script error: {problems}")
    except Exception:
        shot("failure")
        print("page text at failure:\n" + driver.find_element(By.TAG_NAME, "body").text, file=sys.stderr)
        raise
    finally:
        driver.quit()
        receiver.shutdown()
    print("console: every check passed; screenshots in " + SHOTS)


if __name__ == "__main__":
    main()
