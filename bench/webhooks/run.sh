#!/usr/bin/env bash
# Webhook delivery benchmark: events delivered per second by two service instances to a local receiver, and
# the time from a change's commit to its delivery, against the receiver's own capacity measured in the same run.
#
# The receiver is scripts/webhook-receiver/receiver.py: Python's ThreadingHTTPServer verifying every request with
# the `standardwebhooks` package (its venv made by scripts/webhook-receiver/run.sh). Three phases:
#
#   capacity  wrk → receiver: one request signed by the standardwebhooks package, sent again and again
#             (CONNECTIONS connections, DURATION s). The receiver's requests per second: the reference.
#   drain     a backlog of BACKLOG-ish events (admin grants, one per user, written while no WEBHOOK_URL was set,
#             then made pending in SQL), sent by two `serve` instances with WEBHOOK_URL set, started together.
#             Events per second from the first to the last arrival: the headline figure, and its ratio to
#             the capacity.
#   live      wrk → both instances: grants at about LIVE_RATE a second for DURATION s with delivery on (a rate
#             the machine sustains: at full speed the changes themselves take every CPU and the queue only
#             grows); every event's commit → delivery time (the event row's created_at, taken in the writing
#             transaction, to the receiver's clock at arrival: one machine, one clock): p50, p99, max.
#
# PostgreSQL is a throwaway cluster with fsync=off (the figures are about delivery, not the disk). Nothing is
# pinned: the two cores are shared by PostgreSQL, both instances, the receiver and wrk, as in one small host.
#
# Environment (all optional): DURATION=10 (s) CONNECTIONS=16 BACKLOG_SECONDS=5 (s of grants to build the
#   backlog) LIVE_RATE=200 (changes/s) WEBHOOK_CONCURRENCY=8 (each instance's requests in flight: two instances
#   then hold as many connections as wrk does, which matters to a threaded Python server, whose throughput falls
#   as its threads grow) SERVICE_BIN (a prebuilt entitlement-service). Output: bench/out/webhooks/.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages wrk curl python3 python3-venv

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
BACKLOG_SECONDS=${BACKLOG_SECONDS:-5}
LIVE_RATE=${LIVE_RATE:-200}
HERE="$ROOT/bench/webhooks"
OUT="$ROOT/bench/out/webhooks"
mkdir -p "$OUT"

bench_service_bin
PY=$("$ROOT/scripts/webhook-receiver/run.sh" "$ROOT/.build/webhook-receiver-venv")

bench_workspace webhook-bench

echo "starting a throwaway PostgreSQL (fsync=off)" >&2
PGDIR=$(mktemp -d /tmp/webhook-bench-pg.XXXXXX)
PG_FSYNC=off pg_start "$PGDIR" "$(free_port)"
DATABASE_URL="$PG_DATABASE_URL"
PSQL="$(pg_bindir)/psql"
sql() { "$PSQL" "$DATABASE_URL" -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }
DATABASE_URL="$DATABASE_URL" MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn "$SERVICE_BIN" migrate >&2

SECRET=$(python3 -c 'import base64, secrets; print("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())')
ADMIN_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

# The receiver, on a free port it reports on its first line.
"$PY" "$ROOT/scripts/webhook-receiver/receiver.py" --secret "$SECRET" --port 0 >"$WORK/receiver.out" 2>"$OUT/receiver.log" &
PIDS+=($!)
until grep -q '^listening ' "$WORK/receiver.out" 2>/dev/null; do sleep 0.05; done
RECEIVER="http://127.0.0.1:$(awk '/^listening / { print $2 }' "$WORK/receiver.out")"
control() { curl -fsS -o /dev/null -X POST "$RECEIVER/control" -d "$1"; }

# wrk_rate FILE: the Requests/sec figure of a wrk output.
wrk_rate() { awk '/^Requests\/sec:/ { print $2 }' "$1"; }

# ---- 1. The receiver's own capacity --------------------------------------------------------------------------
echo "capacity: wrk → receiver, ${DURATION} s" >&2
eval "$("$PY" - "$SECRET" <<'PY'
import json, shlex, sys, time, uuid
from datetime import datetime, timezone
from standardwebhooks.webhooks import Webhook
body = json.dumps({"id": str(uuid.uuid4()), "type": "grant", "created_at": "2026-11-22T01:20:00Z", "user_id": "u1",
                   "sequence": 1, "entitlements": {"premium": {"active": True, "source": "grant", "grant_id": "g",
                   "reason": "bench", "expires_at": None}}, "consumables": {}}, separators=(",", ":"), sort_keys=True)
now = datetime.now(tz=timezone.utc)
msg_id = str(uuid.uuid4())
signature = Webhook(sys.argv[1]).sign(msg_id=msg_id, timestamp=now, data=body)
for name, value in [("SIGNED_ID", msg_id), ("SIGNED_TIMESTAMP", str(int(now.timestamp()))),
                    ("SIGNED_SIGNATURE", signature), ("SIGNED_BODY", body)]:
    print(f"export {name}={shlex.quote(value)}")
PY
)"
wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$HERE/signed.lua" "$RECEIVER/hook" >"$OUT/capacity.txt"
CAPACITY=$(wrk_rate "$OUT/capacity.txt")
curl -fsS "$RECEIVER/received" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["invalid"] == 0, d["invalid"]'
control '{"reset": true}'

# start_instances [ENV...]: two `serve` processes on ports of their own, sharing the database; waits for both.
PORTS=()
start_instances() {
    local port deadline
    PORTS=()
    for index in 1 2; do
        port=$(free_port)
        env DATABASE_URL="$DATABASE_URL" PORT="$port" LISTEN_ADDR=127.0.0.1 ADMIN_API_KEYS="$ADMIN_KEY" \
            MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn DATABASE_POOL_SIZE=16 "$@" \
            "$SERVICE_BIN" serve >>"$OUT/service-$index.log" 2>&1 &
        PIDS+=($!)
        PORTS+=("$port")
    done
    for port in "${PORTS[@]}"; do
        deadline=$((SECONDS + 60))
        until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
            [ $SECONDS -lt $deadline ] || { echo "an instance did not come up (see $OUT/service-*.log)" >&2; exit 1; }
            sleep 0.1
        done
    done
}
stop_instances() {
    for pid in "${PIDS[@]:1}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=("${PIDS[0]}")
}
# grants SECONDS PREFIX [RATE]: wrk against both instances at once (one user per request), at full speed or about
# RATE requests a second in all (each connection pausing between its requests).
grants() {
    local index=0 pids=() pause=0
    [ -n "${3:-}" ] && pause=$((1000 * CONNECTIONS / $3))
    for port in "${PORTS[@]}"; do
        index=$((index + 1))
        wrk -t1 -c$((CONNECTIONS / 2)) -d"$1s" -s "$HERE/grants.lua" "http://127.0.0.1:$port" -- "$ADMIN_KEY" "$2-$index" "$pause" \
            >"$OUT/$2-$index.txt" &
        pids+=($!)
    done
    wait "${pids[@]}"
}
# await_delivered SECONDS: until no event is pending.
await_delivered() {
    local deadline=$((SECONDS + $1))
    until [ "$(sql "SELECT count(*) FROM webhook_events WHERE delivery_status = 'pending'")" = 0 ]; do
        [ $SECONDS -lt $deadline ] || { echo "events still pending after $1 s" >&2; exit 1; }
        sleep 0.2
    done
}
: >"$OUT/service-1.log"; : >"$OUT/service-2.log"
WEBHOOKS=(WEBHOOK_URL="$RECEIVER/hook" WEBHOOK_SECRET="$SECRET" WEBHOOK_CONCURRENCY="${WEBHOOK_CONCURRENCY:-8}")

# ---- 2. A backlog drained by two instances -------------------------------------------------------------------
echo "drain: building a backlog (${BACKLOG_SECONDS} s of grants, no WEBHOOK_URL)" >&2
start_instances
grants "$BACKLOG_SECONDS" backlog
stop_instances
BACKLOG=$(sql "UPDATE webhook_events SET delivery_status = 'pending', pending_since = now(), next_attempt_at = now() RETURNING 1" | wc -l)
echo "drain: $BACKLOG events, two instances with WEBHOOK_URL" >&2
start_instances "${WEBHOOKS[@]}"
await_delivered 600
curl -fsS "$RECEIVER/received" >"$WORK/drain.json"
stop_instances
control '{"reset": true}'

# ---- 3. Live: commit → delivery while changes stream in ------------------------------------------------------
echo "live: ${DURATION} s of grants at about $LIVE_RATE/s against both instances, delivery on" >&2
sql "TRUNCATE webhook_events" >/dev/null
start_instances "${WEBHOOKS[@]}"
grants "$DURATION" live "$LIVE_RATE"
await_delivered 600
curl -fsS "$RECEIVER/received" >"$WORK/live.json"
sql "SELECT event_id, extract(epoch FROM created_at) FROM webhook_events" | tr '|' ' ' >"$WORK/live-created.txt"
stop_instances

python3 - "$CAPACITY" "$BACKLOG" "$WORK/drain.json" "$WORK/live.json" "$WORK/live-created.txt" "$OUT"/live-*.txt <<'PY'
import json, sys
capacity, backlog = float(sys.argv[1]), int(sys.argv[2])
drain, live = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
created = dict(line.split() for line in open(sys.argv[5]) if line.strip())
assert drain["invalid"] == 0 and live["invalid"] == 0, "a request did not verify"

arrivals = sorted(e["received_at"] for e in drain["events"])
drained = len({e["headers"]["webhook-id"] for e in drain["events"]})
assert drained == backlog, f"{drained} of {backlog} backlog events arrived"
drain_rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])

first = {}
for e in live["events"]:
    first.setdefault(e["headers"]["webhook-id"], e["received_at"])
assert set(first) == set(created), f"{len(set(created) - set(first))} live events never arrived"
latencies = sorted(first[i] - float(created[i]) for i in created)
pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
produced = sum(float(next(l.split()[1] for l in open(f) if l.startswith("Requests/sec:"))) for f in sys.argv[6:])

print(f"receiver capacity (wrk, signed requests)      {capacity:10.0f} req/s")
print(f"drain: {backlog} events, 2 instances          {drain_rate:10.0f} events/s   ratio to capacity {drain_rate / capacity:.2f}")
print(f"live: {len(created)} events at {produced:.0f} changes/s; commit → delivery "
      f"p50 {pick(0.50):.1f} ms, p99 {pick(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms; "
      f"{len(live['events']) - len(first)} sent twice")
PY
