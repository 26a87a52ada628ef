#!/usr/bin/env bash
# App Store Server Notifications V2 accepted per second by the service — each stored durably (PostgreSQL with
# fsync on) and applied (recorded for its purchase's owner, its webhook event written) — against a reference
# measured in the same run: the bare ES256 verification rate of one core, divided by the three signatures every
# notification carries (the signedPayload, its signed transaction and its signed renewal info).
#
# Why that reference: the three verifications are the one cost of accepting a notification that no design of the
# service can avoid (Apple's library verifies the same three), and they are pure CPU on the service's core.
# `ratio` = notifications/s ÷ (bare ES256/s ÷ 3) is the share of that floor the whole path reaches; what is missing
# is everything else the service does per notification (HTTP, JSON, the claims, the insert before the answer, the
# application's transaction with its events, PostgreSQL's commits).
#
# The notifications (bench/notifications/generate.py, run with the signed-parity harness's venv) are DID_RENEW of
# PURCHASES subscriptions whose owners are seeded in SQL, each with a new period's signed transaction and signed
# renewal info under a throwaway chain the service is told to trust; every one is new, so every one is stored,
# applied and writes one event (checked). A round: A = wrk POSTs up to ROUND_SIZE fresh notifications over
# CONNECTIONS connections for DURATION s (the rate: the notifications the round stored over the time from the first
# one received to the last one applied, from their rows; ROUND_SIZE should outlast DURATION); B = signed-bench's bare ES256 rate over REF_SECONDS (its round also measures the
# cached-chain and cold-chain rates). A B A B for ROUNDS rounds; the service and signed-bench on core CORE, wrk on
# the other core, PostgreSQL on both.
#
# Environment (all optional): ROUNDS=4 DURATION=8 ROUND_SIZE=12000 PURCHASES=500 CONNECTIONS=32 REF_SECONDS=3 CORE=0
#   FSYNC=on (off: PostgreSQL no longer waits for the disk, to see what durability costs; not the figure)
#   SERVICE_BIN, SIGNED_BENCH_BIN (prebuilt release binaries; else built), FIXTURES (signed-bench's, default
#   <repo>/../shared/fixtures/apple). Output: bench/out/notifications/.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages wrk curl python3 python3-venv

ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-8}
ROUND_SIZE=${ROUND_SIZE:-12000}
PURCHASES=${PURCHASES:-500}
CONNECTIONS=${CONNECTIONS:-32}
REF_SECONDS=${REF_SECONDS:-3}
CORE=${CORE:-0}
OTHER_CORE=$(( CORE == 0 ? 1 : 0 ))
FIXTURES=${FIXTURES:-$ROOT/../shared/fixtures/apple}
HERE="$ROOT/bench/notifications"
OUT="$ROOT/bench/out/notifications"
mkdir -p "$OUT"

if [ -z "${SERVICE_BIN:-}" ] || [ -z "${SIGNED_BENCH_BIN:-}" ]; then
    echo "building entitlement-service and signed-bench (release)" >&2
    (cd "$ROOT" && swift build -c release --product entitlement-service >&2 && swift build -c release --product signed-bench >&2)
fi
SERVICE_BIN=${SERVICE_BIN:-$ROOT/.build/release/entitlement-service}
SIGNED_BENCH_BIN=${SIGNED_BENCH_BIN:-$ROOT/.build/release/signed-bench}

bench_workspace notification-bench

echo "signing $((ROUNDS * ROUND_SIZE)) notifications" >&2
VENV="$ROOT/.build/signed-parity-venv"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    "$VENV/bin/python" -m pip install --quiet -r "$ROOT/scripts/signed-parity/requirements.txt"
"$VENV/bin/python" "$HERE/generate.py" "$WORK" "$ROUNDS" "$ROUND_SIZE" "$PURCHASES"

echo "starting a throwaway PostgreSQL (fsync ${FSYNC:-on})" >&2
PGDIR=$(mktemp -d /tmp/notification-bench-pg.XXXXXX)
PG_FSYNC=${FSYNC:-on} pg_start "$PGDIR" "$(free_port)"
DATABASE_URL="$PG_DATABASE_URL"
PSQL="$(pg_bindir)/psql"
sql() { "$PSQL" "$DATABASE_URL" -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }
DATABASE_URL="$DATABASE_URL" MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn "$SERVICE_BIN" migrate >&2
sql "INSERT INTO purchase_owners (original_transaction_id, user_id)
     SELECT 'bn-' || g, 'bench-user-' || g FROM generate_series(0, $PURCHASES - 1) AS g" >/dev/null

echo '{"products": [{"product_id": "com.example.premium.monthly", "type": "auto_renewable", "entitlements": ["premium"]}]}' >"$WORK/products.json"
PORT=$(free_port)
: >"$OUT/service.log"
env DATABASE_URL="$DATABASE_URL" PORT="$PORT" LISTEN_ADDR=127.0.0.1 API_KEYS="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')" \
    MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn DATABASE_POOL_SIZE=16 PRODUCTS_FILE="$WORK/products.json" \
    APPLE_BUNDLE_ID=com.example.app APPLE_APP_APPLE_ID=1234567890 APPLE_ROOT_CERTIFICATES="$WORK/root.der" \
    taskset -c "$CORE" "$SERVICE_BIN" serve >>"$OUT/service.log" 2>&1 &
SERVICE_PID=$!
PIDS+=("$SERVICE_PID")
# The service's CPU time so far (user + system), in clock ticks.
service_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVICE_PID/stat"; }
TICK=$(getconf CLK_TCK)
deadline=$((SECONDS + 60))
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "the service did not come up (see $OUT/service.log)" >&2; exit 1; }
    sleep 0.1
done

echo "round notifications/s bare_es256/s floor/s ratio service_cpu_us_per_notification (load average: $(cut -d' ' -f1-3 /proc/loadavg))" | tee "$OUT/rounds.txt"
for round in $(seq 0 $((ROUNDS - 1))); do
    # A: the round's notifications, every one new.
    start=$(sql "SELECT clock_timestamp()")
    events_before=$(sql "SELECT count(*) FROM webhook_events")
    ticks_before=$(service_ticks)
    taskset -c "$OTHER_CORE" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$HERE/notify.lua" "http://127.0.0.1:$PORT" -- "$WORK/round-$round.txt" \
        >"$OUT/wrk-$round.txt"
    # Those answered are stored; any the service has not applied yet, it applies within moments.
    stored=$(sql "SELECT count(*) FROM app_store_notifications WHERE received_at >= '$start'")
    deadline=$((SECONDS + 120))
    until [ "$(sql "SELECT count(*) FROM app_store_notifications WHERE received_at >= '$start' AND state = 'applied'")" = "$stored" ]; do
        [ $SECONDS -lt $deadline ] || { echo "round $round: notifications not all applied (see $OUT/service.log)" >&2; exit 1; }
        sleep 0.2
    done
    [ "$stored" -lt "$ROUND_SIZE" ] || echo "round $round: all $ROUND_SIZE notifications sent before ${DURATION} s ended; raise ROUND_SIZE" >&2
    ticks=$(( $(service_ticks) - ticks_before ))
    rate=$(sql "SELECT round(count(*) / extract(epoch FROM max(applied_at) - min(received_at)))
                  FROM app_store_notifications WHERE received_at >= '$start'")
    events=$(( $(sql "SELECT count(*) FROM webhook_events") - events_before ))
    [ "$events" = "$stored" ] || { echo "round $round: $events events for $stored notifications" >&2; exit 1; }
    # B: the reference on the service's core.
    taskset -c "$CORE" "$SIGNED_BENCH_BIN" --fixtures "$FIXTURES" --rounds 1 --seconds "$REF_SECONDS" >"$OUT/signed-$round.txt"
    bare=$(sed -n 's/^round=.* bare_es256_per_s=\([0-9]*\).*/\1/p' "$OUT/signed-$round.txt")
    python3 -c "import sys; n, b, cpu, count = map(float, sys.argv[2:]); print(f'{sys.argv[1]} {n:.0f} {b:.0f} {b / 3:.0f} {n / (b / 3):.3f} {cpu / count * 1e6:.0f}')" \
        "$round" "$rate" "$bare" "$(python3 -c "print($ticks / $TICK)")" "$stored" | tee -a "$OUT/rounds.txt"
done
python3 - "$OUT/rounds.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]).read().splitlines()[1:]]
column = lambda i: statistics.median(float(r[i]) for r in rows)
print(f"median notifications/s {column(1):.0f}  bare ES256/s {column(2):.0f}  floor {column(3):.0f}/s  ratio {column(4):.3f}"
      f"  service CPU {column(5):.0f} µs/notification")
PY
