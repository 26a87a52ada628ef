#!/usr/bin/env python3
"""Apple's own App Store Server API client against the fake App Store's Server API.

Usage: check_server_api.py BASE_URL   (run with the parity venv's python: see run.sh)

Given a running fake App Store (`entitlement-service fake-app-store`), reads its key (`GET /control/server-api`)
and root certificate, makes purchases through its control API (a customer with more than a page of
transactions, an order of two purchases, a Production purchase, notifications sent to a throwaway receiver),
then calls every endpoint the service uses with Apple's `AppStoreServerAPIClient` (app-store-server-library,
its base URL pointed at the fake: Production at BASE_URL, Sandbox at BASE_URL/sandbox): Get Transaction Info,
Get Transaction History v2 (every page), Get All Subscription Statuses, Look Up Order ID and Get Notification
History (every page). Apple's client must decode every answer, and Apple's `SignedDataVerifier` (the fake's
root, online checks off) must accept every signed field in it. Also: a Sandbox purchase is 4040010 in
Production; Apple's client's token is accepted while a token signed with another key, or naming another key
id, is refused with 401; programmed 429 and 5000001 answers reach Apple's client as Apple's errors. Prints
one summary line; exits 1 on any failure.
"""
from __future__ import annotations

import base64
import json
import sys
import time
import uuid

from appstoreserverlibrary.api_client import (APIError, APIException, AppStoreServerAPIClient,
                                              GetTransactionHistoryVersion)
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.OrderLookupStatus import OrderLookupStatus
from appstoreserverlibrary.models.Status import Status
from appstoreserverlibrary.models.TransactionHistoryRequest import TransactionHistoryRequest
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from check_fake import Checker as FakeControl, Receiver


class ServerAPIChecker(FakeControl):
    def __init__(self, base: str):
        super().__init__(base)
        self.key = self.call("GET", "/control/server-api")
        self.customer = f"judge-{uuid.uuid4().hex[:12]}"
        self.calls = 0

    def client(self, environment: str, signing_key: bytes | None = None, key_id: str | None = None) -> AppStoreServerAPIClient:
        """Apple's client for `environment`, its base URL the fake's; the fake's key unless another is given."""
        client = AppStoreServerAPIClient((signing_key or self.key["private_key"].encode()), key_id or self.key["key_id"],
                                         self.key["issuer_id"], self.key["bundle_id"], Environment(environment))
        client._base_url = self.base + (self.key["sandbox_path"] if environment == "Sandbox" else self.key["production_path"])
        return client

    def api(self, name: str, call):
        """One call of Apple's client; None (and a failure) when it raises."""
        self.calls += 1
        try:
            return call()
        except APIException as error:
            self.failures.append(f"{name}: Apple's client raised HTTP {error.http_status_code} ({error.raw_api_error})")
        except Exception as error:  # noqa: BLE001 - any other exception is a failure to report
            self.failures.append(f"{name}: Apple's client raised {type(error).__name__}: {error}")
        return None

    def refused(self, name: str, call, status: int, code: int | None = None):
        """A call Apple's client must see refused with HTTP `status` (and Apple's `code`)."""
        self.calls += 1
        try:
            call()
            self.failures.append(f"{name}: expected HTTP {status}, the call succeeded")
        except APIException as error:
            if error.http_status_code != status or error.raw_api_error != code:
                self.failures.append(f"{name}: expected HTTP {status} ({code}), got {error.http_status_code} ({error.raw_api_error})")

    def buy(self, body: dict) -> dict:
        return self.call("POST", "/control/storekit/purchases", {"customer": self.customer, **body})

    def run(self) -> int:
        receiver = Receiver()
        notify = {"url": receiver.url}
        sandbox, production = self.client("Sandbox"), self.client("Production")

        # A customer with more than a page of transactions: a subscription renewed 21 times, an order of two
        # purchases, and a lifetime purchase.
        subscription = self.buy({"product_id": "com.example.monthly", "type": "auto_renewable", "notify": notify})
        original = subscription["original_transaction_id"]
        for _ in range(21):
            self.call("POST", f"/control/storekit/purchases/{original}/renew", {"notify": notify})
        self.call("POST", f"/control/storekit/purchases/{original}/auto_renew_off", {"notify": notify})
        coins = self.buy({"product_id": "com.example.coins", "type": "consumable", "quantity": 2})
        bundle = self.buy({"product_id": "com.example.lifetime", "type": "non_consumable", "order_id": coins["order_id"]})
        transaction_ids = {subscription["transaction_id"], coins["transaction_id"], bundle["transaction_id"]}
        latest = self.call("GET", f"/control/storekit/purchases/{original}")["transactions"]
        transaction_ids |= {t["transaction_id"] for t in latest}

        # Get Transaction Info.
        info = self.api("transaction info", lambda: sandbox.get_transaction_info(coins["transaction_id"]))
        if info is not None:
            self.verify("transaction info", "transaction", info.signedTransactionInfo, "Sandbox",
                        {"transactionId": coins["transaction_id"], "quantity": 2})
        self.refused("Sandbox purchase asked of Production",
                     lambda: production.get_transaction_info(coins["transaction_id"]), 404, APIError.TRANSACTION_ID_NOT_FOUND)

        # Get Transaction History v2, every page.
        seen, revision, pages = [], None, 0
        while True:
            page = self.api("transaction history", lambda: sandbox.get_transaction_history(
                coins["transaction_id"], revision, TransactionHistoryRequest(), GetTransactionHistoryVersion.V2))
            if page is None:
                break
            pages += 1
            if page.bundleId != self.key["bundle_id"] or page.environment != Environment.SANDBOX:
                self.failures.append(f"transaction history: bundleId {page.bundleId}, environment {page.environment}")
            for jws in page.signedTransactions or []:
                decoded = self.verify("transaction history", "transaction", jws, "Sandbox")
                if decoded is not None:
                    seen.append(decoded.transactionId)
            if not page.hasMore:
                break
            revision = page.revision
        if set(seen) != transaction_ids or len(seen) != len(transaction_ids) or pages < 2:
            self.failures.append(f"transaction history: {len(seen)} transactions in {pages} pages, expected "
                                 f"{len(transaction_ids)} in at least 2")

        # Get All Subscription Statuses.
        statuses = self.api("subscription statuses", lambda: sandbox.get_all_subscription_statuses(coins["transaction_id"]))
        items = [item for group in (statuses.data or []) for item in (group.lastTransactions or [])] if statuses else []
        if len(items) != 1 or items[0].originalTransactionId != original or items[0].status != Status.ACTIVE:
            self.failures.append(f"subscription statuses: expected {original} active, got {items}")
        for item in items:
            self.verify("subscription status", "transaction", item.signedTransactionInfo, "Sandbox", {"originalTransactionId": original})
            self.verify("subscription status", "renewal_info", item.signedRenewalInfo, "Sandbox", {"autoRenewStatus": 0})
        expired = self.api("subscription statuses (expired only)",
                           lambda: sandbox.get_all_subscription_statuses(original, [Status.EXPIRED]))
        if expired is not None and expired.data:
            self.failures.append("subscription statuses: the EXPIRED filter kept an active subscription")

        # Look Up Order ID: the order of two purchases, an unknown order, a Production order.
        order = self.api("order lookup", lambda: sandbox.look_up_order_id(coins["order_id"]))
        if order is not None:
            if order.status != OrderLookupStatus.VALID or len(order.signedTransactions or []) != 2:
                self.failures.append(f"order lookup: status {order.status}, {len(order.signedTransactions or [])} transactions")
            for jws in order.signedTransactions or []:
                self.verify("order lookup", "transaction", jws, "Sandbox")
        unknown = self.api("unknown order", lambda: production.look_up_order_id(coins["order_id"]))
        if unknown is not None and unknown.status != OrderLookupStatus.INVALID:
            self.failures.append(f"order lookup: a Sandbox order in Production has status {unknown.status}, expected INVALID")
        bought = self.buy({"product_id": "com.example.lifetime", "type": "non_consumable", "environment": "Production", "notify": notify})
        in_production = self.api("Production order lookup", lambda: production.look_up_order_id(bought["order_id"]))
        for jws in (in_production.signedTransactions or []) if in_production else []:
            self.verify("Production order lookup", "transaction", jws, "Production", {"transactionId": bought["transaction_id"]})

        # Get Notification History, every page, in each environment.
        delivered = receiver.take()
        now = int(time.time() * 1000)
        for environment, client in (("Sandbox", sandbox), ("Production", production)):
            uuids, token = [], None
            while True:
                page = self.api(f"{environment} notification history", lambda: client.get_notification_history(
                    token, NotificationHistoryRequest(startDate=now - 3_600_000, endDate=now + 60_000)))
                if page is None:
                    break
                for item in page.notificationHistory or []:
                    decoded = self.verify(f"{environment} notification history", "notification", item.signedPayload, environment)
                    if decoded is not None:
                        uuids.append(decoded.notificationUUID)
                    if not item.sendAttempts or item.sendAttempts[0].sendAttemptResult is None:
                        self.failures.append(f"{environment} notification history: an item without a decoded send attempt")
                if not page.hasMore:
                    break
                token = page.paginationToken
            sent = {self.verifiers[environment].verify_and_decode_notification(body["signedPayload"]).notificationUUID
                    for body in delivered if self.environment_of(body) == environment}
            if not sent or not sent <= set(uuids):
                self.failures.append(f"{environment} notification history: {len(sent - set(uuids))} of {len(sent)} sent notifications missing")

        # Tokens: Apple's own were accepted above; another key, or another key id, is refused.
        other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        self.refused("token signed with another key", lambda: self.client("Sandbox", signing_key=other).get_transaction_info(
            coins["transaction_id"]), 401)
        self.refused("token naming another key id", lambda: self.client("Sandbox", key_id="OTHERKEY01").get_transaction_info(
            coins["transaction_id"]), 401)

        # Programmed answers reach Apple's client as Apple's errors.
        self.call("POST", "/control/server-api/scenarios", {"endpoint": "transaction_info", "environment": "Sandbox", "steps": [
            {"status": 429, "retry_after_ms": 1000}, {"error_code": 5000001}, {"error_code": 4040010}]})
        self.refused("programmed 429", lambda: sandbox.get_transaction_info(coins["transaction_id"]), 429, APIError.RATE_LIMIT_EXCEEDED)
        self.refused("programmed 5000001", lambda: sandbox.get_transaction_info(coins["transaction_id"]), 500,
                     APIError.GENERAL_INTERNAL_RETRYABLE)
        self.refused("programmed 4040010", lambda: sandbox.get_transaction_info(coins["transaction_id"]), 404,
                     APIError.TRANSACTION_ID_NOT_FOUND)
        self.api("after the programmed answers", lambda: sandbox.get_transaction_info(coins["transaction_id"]))

        receiver.server.shutdown()
        for failure in self.failures:
            print("check_server_api: " + failure, file=sys.stderr)
        verdict = "FAILED" if self.failures else "OK"
        print(f"check_server_api: {self.calls} calls of Apple's AppStoreServerAPIClient to the fake, {self.verified} signed "
              f"fields verified by Apple's SignedDataVerifier, {len(self.failures)} failures: {verdict}")
        return 1 if self.failures else 0

    def environment_of(self, body: dict) -> str | None:
        """The environment a delivered notification names (read unverified, to pick the verifier)."""
        payload = body["signedPayload"].split(".")[1]
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))).get("data") or {}
        return data.get("environment")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_server_api.py BASE_URL", file=sys.stderr)
        return 2
    return ServerAPIChecker(argv[1]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
