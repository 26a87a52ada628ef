"""Staleness probe for bench/entitlements/run.sh: how long after a write answered on one instance the change is
visible through GET /v1/users/{user_id}/entitlements on another instance sharing the database.

Each sample grants `premium` to a fresh user through instance A (admin key), after having read that user on
instance B so that B holds the old answer in its cache, then reads the user on B over a keep-alive connection
until the grant shows; the time from A's answer to B's first answer showing it is the sample. Every 10th sample
revokes instead of granting. Prints "p50_ms p99_ms max_ms samples".

usage: staleness.py WRITER_PORT READER_PORT ADMIN_KEY APP_KEY SAMPLES
"""
import http.client
import json
import sys
import time
import uuid

writer_port, reader_port, admin_key, app_key, samples = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
writer = http.client.HTTPConnection("127.0.0.1", int(writer_port))
reader = http.client.HTTPConnection("127.0.0.1", int(reader_port))


def call(connection, method, path, key, body=None):
    headers = {"Authorization": f"Bearer {key}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    if response.status >= 300:
        raise SystemExit(f"{method} {path} answered {response.status}: {data[:200]!r}")
    return json.loads(data)


def active(user):
    document = call(reader, "GET", f"/v1/users/{user}/entitlements", app_key)
    return document["entitlements"].get("premium", {}).get("active") is True


latencies = []
for n in range(samples):
    user = "stale-" + uuid.uuid4().hex
    revoke = n % 10 == 9
    grant_id = None
    if revoke:
        grant_id = call(writer, "POST", f"/v1/admin/users/{user}/grants", admin_key,
                        json.dumps({"entitlement": "premium", "reason": "bench"}))["grant_id"]
        while not active(user):
            pass
    active(user)  # the reader now holds the current answer
    active(user)
    if revoke:
        call(writer, "DELETE", f"/v1/admin/grants/{grant_id}", admin_key)
    else:
        call(writer, "POST", f"/v1/admin/users/{user}/grants", admin_key, json.dumps({"entitlement": "premium", "reason": "bench"}))
    answered = time.perf_counter()
    while active(user) == revoke:
        if time.perf_counter() - answered > 10:
            raise SystemExit(f"the change for {user} was not visible on the other instance after 10 s")
    latencies.append((time.perf_counter() - answered) * 1000)

latencies.sort()
def pick(q):
    return latencies[min(len(latencies) - 1, int(len(latencies) * q))]
print(f"{pick(0.5):.3f} {pick(0.99):.3f} {latencies[-1]:.3f} {len(latencies)}")
