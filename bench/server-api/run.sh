#!/usr/bin/env bash
# App Store Server API benchmark: subscriptions refreshed per second by the renewal refresher (Get All Subscription
# Statuses) against the fake App Store answering after 100 ms, as a ratio to the limit the fake enforces, measured
# in the same run; with the service's worst loop stall and its peak RSS.
#
# One `serve` instance (release build) and the fake App Store (`entitlement-service fake-app-store`, its Server API
# with `latency_ms` LATENCY_MS and `rate_limit_per_second` LIMIT: 50, Apple's limit for this endpoint in
# Production), COUNT subscriptions bought at the fake and posted to the service as signed transactions. Then ROUNDS
# rounds of two phases, alternating A B A B:
#
#   A refresher  every subscription made due in SQL; after DURATION s they are put off again. Refreshes per second
#                = the rows recorded in the phase (their updated_at) over the time from the first to the last one.
#                Also the 429s the fake answered, and event_loop_lag_max_seconds (the service's timer-lag probe:
#                the largest lag of the last 10 s, read at the phase's end).
#   B reference  bench/server-api/driver.py: 16 threads (as many requests in flight as the refresher keeps) asking
#                Get All Subscription Statuses of the fake as fast as it answers for DURATION s: its 200s per
#                second are the fake's limit as a client sees it.
#
# The refresher holds itself to four fifths of Apple's limit (RequestBudget), so 0.8 is the ceiling of the ratio.
# Environment (all optional): ROUNDS=3 DURATION=15 (s) COUNT=1500 LATENCY_MS=100 LIMIT=50 SERVICE_BIN (a prebuilt
#   entitlement-service). Output: bench/out/server-api/.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages curl python3 python3-venv

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
COUNT=${COUNT:-1500}
LATENCY_MS=${LATENCY_MS:-100}
LIMIT=${LIMIT:-50}
HERE="$ROOT/bench/server-api"
OUT="$ROOT/bench/out/server-api"
mkdir -p "$OUT"

bench_service_bin
# PyJWT and cryptography: the signed-parity harness's venv (made by scripts/test.sh), else made here alike.
VENV="$ROOT/.build/signed-parity-venv"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install --quiet -r "$ROOT/scripts/signed-parity/requirements.txt"
fi
PY="$VENV/bin/python"

PIDS=()
PGDIR=""
WORK=$(mktemp -d /tmp/server-api-bench.XXXXXX)
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$PGDIR" ]; then pg_stop "$PGDIR"; rm -rf "$PGDIR"; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "starting a throwaway PostgreSQL (fsync=off)" >&2
PGDIR=$(mktemp -d /tmp/server-api-bench-pg.XXXXXX)
PG_FSYNC=off pg_start "$PGDIR" "$(free_port)"
DATABASE_URL="$PG_DATABASE_URL"
PSQL="$(pg_bindir)/psql"
sql() { "$PSQL" "$DATABASE_URL" -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }

wait_ready() {
    local deadline=$((SECONDS + 60))
    until curl -fsS -o /dev/null "$1" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || { echo "$1 did not answer (see $OUT/*.log)" >&2; exit 1; }
        sleep 0.1
    done
}

FAKE_PORT=$(free_port)
FAKE_APPLE_API_KEY_FILE="$WORK/key.p8" LOG_LEVEL=warn "$SERVICE_BIN" fake-app-store --port "$FAKE_PORT" \
    --root-certificate-out "$WORK/root.der" >"$OUT/fake.log" 2>&1 &
PIDS+=($!)
FAKE="http://127.0.0.1:$FAKE_PORT"
wait_ready "$FAKE/control/server-api"
curl -fsS -o /dev/null -X PUT "$FAKE/control/server-api/config" -d "{\"latency_ms\": $LATENCY_MS, \"rate_limit_per_second\": $LIMIT}"
KEY_JSON=$(curl -fsS "$FAKE/control/server-api")
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$KEY_JSON" "$1"; }

SERVICE_PORT=$(free_port)
APP_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
env DATABASE_URL="$DATABASE_URL" PORT="$SERVICE_PORT" LISTEN_ADDR=127.0.0.1 API_KEYS="$APP_KEY" LOG_LEVEL=warn \
    MIGRATIONS_DIR="$ROOT/migrations" PRODUCTS_FILE="$HERE/products.json" APPLE_BUNDLE_ID="$(field bundle_id)" \
    APPLE_ROOT_CERTIFICATES="$WORK/root.der" APPLE_APP_APPLE_ID=1234567890 APPLE_PRIVATE_KEY_FILE="$WORK/key.p8" \
    APPLE_KEY_ID="$(field key_id)" APPLE_ISSUER_ID="$(field issuer_id)" \
    APPLE_API_URL_PRODUCTION="$FAKE" APPLE_API_URL_SANDBOX="$FAKE/sandbox" \
    "$SERVICE_BIN" serve >"$OUT/service.log" 2>&1 &
SERVICE_PID=$!
PIDS+=($SERVICE_PID)
wait_ready "http://127.0.0.1:$SERVICE_PORT/readyz"

echo "seeding $COUNT subscriptions" >&2
"$PY" "$HERE/driver.py" seed "$FAKE_PORT" "$SERVICE_PORT" "$APP_KEY" "$COUNT" "$WORK/ids"
[ "$(sql "SELECT count(*) FROM subscriptions WHERE latest_receipt IS NULL")" = "$COUNT" ] || { echo "seeding failed" >&2; exit 1; }

fake_statuses() { curl -fsS "$FAKE/control/server-api/requests" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("statuses", {}).get(sys.argv[1], 0))' "$1"; }
metric() { curl -fsS "http://127.0.0.1:$SERVICE_PORT/metrics" | awk -v name="$1" '$1 == name { print $2 }'; }

printf '%-6s %-12s %-14s %-7s %-12s %-14s\n' round "A refresh/s" "B reference/s" ratio "A 429s" "A worst stall" | tee "$OUT/results.txt"
for round in $(seq 1 "$ROUNDS"); do
    limited=$(fake_statuses 429)
    started=$(sql "SELECT now()")
    sql "UPDATE subscriptions SET next_refresh_at = now()"
    sleep "$DURATION"
    stall=$(metric event_loop_lag_max_seconds)
    sql "UPDATE subscriptions SET next_refresh_at = now() + interval '1 day'"
    sleep 2
    refreshes=$(sql "SELECT round(((count(*) - 1) / extract(epoch FROM max(updated_at) - min(updated_at)))::numeric, 2)
                       FROM subscriptions WHERE updated_at > '$started'")
    limited=$(( $(fake_statuses 429) - limited ))
    read -r reference reference_limited _ < <("$PY" "$HERE/driver.py" reference "$FAKE_PORT" "$WORK/ids" "$DURATION" 16)
    ratio=$(python3 -c "print(f'{$refreshes / $reference:.3f}')")
    printf '%-6s %-12s %-14s %-7s %-12s %-14s\n' "$round" "$refreshes" "$reference" "$ratio" "$limited" \
        "$(python3 -c "print(f'{$stall * 1000:.1f} ms')")" | tee -a "$OUT/results.txt"
done
echo "service peak RSS: $(awk '/VmHWM/ { printf "%.0f MB", $2 / 1024 }' "/proc/$SERVICE_PID/status"), now $(awk '/VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$SERVICE_PID/status")" | tee -a "$OUT/results.txt"
python3 - "$OUT/results.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line[:1].isdigit()]
print("median: refreshes/s %.2f, reference/s %.2f, ratio %.3f" % tuple(statistics.median(float(r[i]) for r in rows) for i in (1, 2, 3)))
PY
