"""The server-api benchmark's helper: seeds subscriptions, and measures the fake App Store Server API's own limit.

  driver.py seed FAKE SERVICE APP_KEY COUNT IDS_FILE
      COUNT monthly subscriptions bought at the fake (one customer each, Production) and posted to the service as
      signed transactions (POST /v1/transactions, one user each); their original transaction ids go to IDS_FILE.
  driver.py reference FAKE IDS_FILE SECONDS CONCURRENCY
      CONCURRENCY threads (one keep-alive connection each) ask Get All Subscription Statuses about the seeded
      subscriptions in turn, as fast as the fake answers, for SECONDS; prints "<200s per second> <429s> <others>".
      With the fake's rate limit set, the 200s per second are the limit the fake enforces, as a client sees it.
"""
import http.client, json, sys, threading, time, uuid
from concurrent.futures import ThreadPoolExecutor

import jwt  # PyJWT with cryptography (the signed-parity venv)


def call(port, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path, body=json.dumps(body) if body is not None else None,
                       headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    if response.status >= 300:
        raise SystemExit(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data) if data else None


def seed(fake, service, app_key, count, ids_file):
    def one(index):
        bought = call(fake, "POST", "/control/storekit/purchases", {
            "product_id": "com.bench.premium.monthly", "type": "auto_renewable", "environment": "Production",
            "customer": f"bench-customer-{index}"})
        call(service, "POST", "/v1/transactions", {"user_id": f"bench-user-{index}", "signed_transaction": bought["signed_transaction"]},
             {"Authorization": f"Bearer {app_key}"})
        return bought["original_transaction_id"]
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(one, range(count)))
    with open(ids_file, "w") as out:
        out.write("\n".join(ids) + "\n")


def reference(fake, ids_file, seconds, concurrency):
    key = call(fake, "GET", "/control/server-api")
    ids = open(ids_file).read().split()
    now = int(time.time())
    token = jwt.encode({"iss": key["issuer_id"], "iat": now, "exp": now + 1800, "aud": "appstoreconnect-v1", "bid": key["bundle_id"],
                        "nonce": str(uuid.uuid4())}, key["private_key"], algorithm="ES256", headers={"kid": key["key_id"], "typ": "JWT"})
    counts = {"ok": 0, "limited": 0, "other": 0}
    lock = threading.Lock()
    start = time.monotonic()
    end = start + seconds

    def worker(offset):
        connection = http.client.HTTPConnection("127.0.0.1", fake, timeout=30)
        index = offset
        while time.monotonic() < end:
            connection.request("GET", f"/inApps/v1/subscriptions/{ids[index % len(ids)]}", headers={"Authorization": f"Bearer {token}"})
            response = connection.getresponse()
            response.read()
            kind = "ok" if response.status == 200 else "limited" if response.status == 429 else "other"
            if time.monotonic() <= end:
                with lock:
                    counts[kind] += 1
            index += concurrency
        connection.close()

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"{counts['ok'] / seconds:.2f} {counts['limited']} {counts['other']}")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "seed":
        seed(int(args[0]), int(args[1]), args[2], int(args[3]), args[4])
    elif command == "reference":
        reference(int(args[0]), args[1], float(args[2]), int(args[3]))
    else:
        raise SystemExit(__doc__)
