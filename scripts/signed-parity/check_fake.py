#!/usr/bin/env python3
"""Apple's own library on what the fake App Store signs.

Usage: check_fake.py BASE_URL   (run with the parity venv's python: see run.sh)

Given a running fake App Store (`entitlement-service fake-app-store`), fetches its root certificate and
configuration, creates a purchase of each product type, changes a subscription's lifecycle, and has the fake
send notifications (one older than the others, one copied, one to Production, one tampered) to a throwaway
HTTP receiver this script runs on 127.0.0.1:0. Every signed transaction, renewal info and notification (and
the ones nested in notifications) must pass Apple's `SignedDataVerifier` (app-store-server-library, online
checks off, strict X.509 as shipped) configured with the fake's root, bundle id, app Apple id and the payload's
environment; the tampered notification must fail it. Prints one summary line; exits 1 on any failure.
"""
from __future__ import annotations

import http.server
import json
import sys
import threading
import time
import urllib.error
import urllib.request

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

DAY_MS = 86_400_000


class Receiver:
    """An HTTP server on 127.0.0.1:0 that answers 200 to every POST and keeps the bodies."""

    def __init__(self):
        bodies = self.bodies = []
        lock = self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    bodies.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/notifications"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self) -> list[dict]:
        with self.lock:
            taken, self.bodies[:] = list(self.bodies), []
        return taken


class Checker:
    def __init__(self, base: str):
        self.base = base.rstrip("/")
        self.failures: list[str] = []
        self.verified = 0
        signing = self.call("GET", "/control/signing")
        self.bundle_id, self.app_apple_id = signing["bundle_id"], signing["app_apple_id"]
        root = self.fetch("/control/signing/root.der")
        self.verifiers = {
            name: SignedDataVerifier([root], False, Environment(name), self.bundle_id, self.app_apple_id)
            for name in ("Sandbox", "Production")
        }

    def fetch(self, path: str, body: dict | None = None) -> bytes:
        request = urllib.request.Request(self.base + path, method="GET" if body is None else "POST",
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        try:
            return json.loads(self.fetch(path, body if method == "POST" else None))
        except urllib.error.HTTPError as error:
            raise SystemExit(f"check_fake: {method} {path} answered {error.code}: {error.read().decode()}")

    def verify(self, name: str, kind: str, jws: str, environment: str, expect: dict | None = None):
        """Apple's verdict on one payload; `expect` are members its decoded form must have."""
        method = {"transaction": "verify_and_decode_signed_transaction", "renewal_info": "verify_and_decode_renewal_info",
                  "notification": "verify_and_decode_notification"}[kind]
        try:
            decoded = getattr(self.verifiers[environment], method)(jws)
        except VerificationException as error:
            self.failures.append(f"{name}: Apple's verifier refused the {kind}: {error.status.name}")
            return None
        except Exception as error:  # noqa: BLE001 - any other exception is a failure to report
            self.failures.append(f"{name}: Apple's verifier raised {type(error).__name__}: {error}")
            return None
        self.verified += 1
        for key, value in (expect or {}).items():
            actual = getattr(decoded, key)
            actual = getattr(actual, "value", actual)
            if actual != value:
                self.failures.append(f"{name}: {key} is {actual!r}, expected {value!r}")
        return decoded

    def verify_answer(self, name: str, answer: dict, environment: str = "Sandbox"):
        """The signed transaction (and renewal info) of a purchase answer."""
        payload = answer["payload"]
        self.verify(name, "transaction", answer["signed_transaction"], environment, {
            "transactionId": payload["transactionId"], "type": payload["type"], "bundleId": self.bundle_id,
            "environment": environment})
        if "signed_renewal_info" in answer:
            self.verify(name + " renewal info", "renewal_info", answer["signed_renewal_info"], environment,
                        {"originalTransactionId": answer["original_transaction_id"]})

    def verify_notification(self, name: str, body: dict, environment: str, expect: dict):
        decoded = self.verify(name, "notification", body["signedPayload"], environment, expect)
        if decoded is None or decoded.data is None:
            return
        if decoded.data.signedTransactionInfo:
            self.verify(name + " transaction", "transaction", decoded.data.signedTransactionInfo, environment)
        if decoded.data.signedRenewalInfo:
            self.verify(name + " renewal info", "renewal_info", decoded.data.signedRenewalInfo, environment)

    def run(self) -> int:
        receiver = Receiver()
        answers = {}
        for kind in ("consumable", "non_consumable", "auto_renewable", "non_renewing"):
            answers[kind] = self.call("POST", "/control/storekit/purchases", {
                "product_id": f"com.example.{kind}", "type": kind,
                "app_account_token": "7e3fb20b-4cdb-47cc-936d-99d65f608138"})
            self.verify_answer(kind, answers[kind])
        original = answers["auto_renewable"]["original_transaction_id"]
        notify = {"url": receiver.url}
        for action, body in (("renew", {}), ("grace_period", {}), ("renew", {}), ("auto_renew_off", {}),
                             ("upgrade", {"product_id": "com.example.auto_renewable.yearly"}),
                             ("refund", {}), ("expire", {})):
            answer = self.call("POST", f"/control/storekit/purchases/{original}/{action}", {**body, "notify": notify})
            self.verify_answer(action, answer)
            for delivered in receiver.take():
                self.verify_notification(f"{action} notification", delivered, "Sandbox", {
                    "notificationType": answer["notification_type"], "subtype": answer["subtype"]})
        one_time = answers["consumable"]["transaction_id"]
        sent = self.call("POST", "/control/storekit/notifications", {
            "url": receiver.url, "notification_type": "REFUND", "transaction_id": one_time, "copies": 2,
            "signed_date": int(time.time() * 1000) - 30 * DAY_MS})
        delivered = receiver.take()
        if len(delivered) != 2 or delivered[0] != delivered[1]:
            self.failures.append(f"copies: expected the same body twice, got {len(delivered)} bodies")
        for body in delivered:
            self.verify_notification("older copied notification", body, "Sandbox", {
                "notificationUUID": sent["notification_uuid"], "signedDate": sent["payload"]["signedDate"]})
        production = self.call("POST", "/control/storekit/purchases", {
            "product_id": "com.example.lifetime", "type": "non_consumable", "environment": "Production",
            "notify": notify})
        self.verify_answer("production purchase", production, "Production")
        for body in receiver.take():
            self.verify_notification("production notification", body, "Production", {"notificationType": "ONE_TIME_CHARGE"})
        self.call("POST", "/control/storekit/notifications", {"url": receiver.url, "notification_type": "TEST"})
        for body in receiver.take():
            self.verify_notification("test notification", body, "Sandbox", {"notificationType": "TEST"})
        self.call("POST", "/control/storekit/notifications", {
            "url": receiver.url, "notification_type": "DID_RENEW", "transaction_id": original, "tamper": True})
        for body in receiver.take():
            try:
                self.verifiers["Sandbox"].verify_and_decode_notification(body["signedPayload"])
                self.failures.append("tampered notification: Apple's verifier accepted it")
            except VerificationException:
                pass
        receiver.server.shutdown()
        for failure in self.failures:
            print("check_fake: " + failure, file=sys.stderr)
        verdict = "FAILED" if self.failures else "OK"
        print(f"check_fake: {self.verified} signed payloads of the fake App Store verified by Apple's "
              f"SignedDataVerifier, {len(self.failures)} failures: {verdict}")
        return 1 if self.failures else 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_fake.py BASE_URL", file=sys.stderr)
        return 2
    return Checker(argv[1]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
