"""The admin console in a real browser (headless Chromium through Selenium) against the real service.

Usage: check_console.py BASE_URL APP_KEY ADMIN_KEY SCREENSHOT_DIR

Makes its own scenario through the API (receipts via the fake App Store's verifyReceipt, Production and Sandbox,
and a user whose id is markup), then drives /admin: a wrong key is refused with a clear message; sign-in; a
customer's entitlement and its source; a grant and its revocation; the markup user id shown as text with no
script run; Revenue's chart drawn from the scenario's purchases, Production and Sandbox apart; the purchases CSV
downloaded; Operations. Writes a screenshot of each page to SCREENSHOT_DIR and exits non-zero on the first
failed check.
"""
import base64
import json
import os
import sys
import time
import urllib.parse
import urllib.request
import uuid

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BASE, APP_KEY, ADMIN_KEY, SHOTS = sys.argv[1:5]
RUN = uuid.uuid4().hex[:8]
XSS_USER = "<img src=x onerror=alert(1)>"
MONTHLY, LIFETIME = "com.example.premium.monthly", "com.example.lifetime"


def call(method, path, body=None, key=APP_KEY):
    request = urllib.request.Request(BASE + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def receipt(transaction_id, product, environment):
    """A fake receipt (base64 of {"fake": {...}} in Apple's field names) bought now."""
    now = int(time.time() * 1000)
    transaction = {"transaction_id": transaction_id, "product_id": product, "purchase_date_ms": now}
    if product == MONTHLY:
        transaction["expires_date_ms"] = now + 30 * 86_400_000
    fake = {"bundle_id": "com.example.app", "environment": environment, "in_app": [transaction], "latest_receipt_info": [transaction]}
    return base64.b64encode(json.dumps({"fake": fake}).encode()).decode()


def scenario():
    """u-RUN: a Production monthly subscription and lifetime; s-RUN: a Sandbox monthly; the markup user: a grant."""
    user, sandbox_user = "console-" + RUN, "console-sandbox-" + RUN
    base = int(RUN, 16) % 10**9
    for offset, (who, product, environment) in enumerate([(user, MONTHLY, "Production"), (user, LIFETIME, "Production"),
                                                          (sandbox_user, MONTHLY, "Sandbox")]):
        answer = call("POST", "/v1/receipts", {"user_id": who, "receipt_data": receipt(str(7_000_000_000 + base * 10 + offset), product, environment)})
        check(answer.get("status") == "verified" and answer.get("environment") == environment, f"receipt for {who}: {answer}")
    call("POST", "/v1/admin/users/" + urllib.parse.quote(XSS_USER, safe="") + "/grants",
         {"entitlement": "premium", "duration": "P1D", "reason": "markup user id"}, key=ADMIN_KEY)
    return user, sandbox_user


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
    user, sandbox_user = scenario()
    driver = browser(downloads)
    wait = WebDriverWait(driver, 15, ignored_exceptions=[StaleElementReferenceException])
    by_id = lambda element_id: driver.find_element(By.ID, element_id)
    shot = lambda name: driver.save_screenshot(os.path.join(SHOTS, name + ".png"))
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

        by_id("admin-key").send_keys(ADMIN_KEY)
        by_id("sign-in-form").submit()
        wait.until(lambda d: by_id("page-customers").is_displayed())
        check(ADMIN_KEY not in driver.current_url, "the key is not in the URL")

        # The customer: entitlement and its source.
        def find(user_id):
            field = by_id("find-user")
            field.clear()
            field.send_keys(user_id)
            by_id("find-form").submit()
            wait.until(lambda d: by_id("customer").is_displayed() and by_id("customer-id").text == user_id)

        def entitlement_rows():
            return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in by_id("entitlements").find_elements(By.CSS_SELECTOR, "tbody tr")]

        find(user)
        rows = entitlement_rows()
        check(any(r[0] == "premium" and r[1] == "active" and r[2] == "app_store" and MONTHLY in r[3] for r in rows), f"premium from the App Store: {rows}")
        check(any(r[0] == "pro" and r[2] == "app_store" for r in rows), f"pro from the lifetime purchase: {rows}")
        shot("customer")

        # Grant, then revoke.
        by_id("grant-entitlement").send_keys("beta")
        by_id("grant-duration").send_keys("P7D")
        by_id("grant-reason").send_keys("console check " + RUN)
        by_id("grant-form").submit()
        wait.until(lambda d: any(r[0] == "beta" and r[1] == "active" and r[2] == "grant" for r in entitlement_rows()))
        check(any("console check " + RUN in r[3] for r in entitlement_rows()), f"the grant and its reason: {entitlement_rows()}")
        shot("customer-granted")
        by_id("entitlements").find_element(By.CSS_SELECTOR, "button.revoke").click()
        driver.switch_to.alert.accept()
        wait.until(lambda d: any(r[0] == "beta" and r[1].startswith("inactive") for r in entitlement_rows()))
        check(any(r[0] == "beta" and "revoked" in r[1] for r in entitlement_rows()), f"the grant revoked: {entitlement_rows()}")
        shot("customer-revoked")

        # The markup user id: text, no element made, no script run.
        find(XSS_USER)
        check(by_id("customer-id").text == XSS_USER, "the markup user id shows as text")
        check(len(driver.find_elements(By.CSS_SELECTOR, "main img")) == 0, "no element was made from it")
        try:
            driver.switch_to.alert
            check(False, "an alert ran")
        except NoAlertPresentException:
            check(True, "no script ran")
        shot("customer-markup-user-id")

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

        # Operations.
        driver.find_element(By.CSS_SELECTOR, "nav button[data-page=operations]").click()
        wait.until(lambda d: by_id("ops-audit").find_elements(By.TAG_NAME, "table"))
        audit = by_id("ops-audit").text
        check("grant" in audit, "the audit log lists the grants")
        for section in ["ops-notifications", "ops-deliveries", "ops-backlog"]:
            wait.until(lambda d: by_id(section).text.strip())
            print(f"{section}: {by_id(section).text.strip().splitlines()[0]}")
        shot("operations")

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
    print("console: every check passed; screenshots in " + SHOTS)


if __name__ == "__main__":
    main()
