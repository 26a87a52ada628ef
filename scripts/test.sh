#!/usr/bin/env bash
# The test command: installs what is missing, starts a throwaway PostgreSQL on a free port, asks Apple's own
# signed-data verifier for its verdicts (scripts/signed-parity/run.sh, for SignedDataParityTests), runs
# `swift test`, then runs schemathesis (scripts/schemathesis.sh), zzuf's receipt mutations (scripts/receipt-fuzz.sh)
# and slowhttptest's slow clients (scripts/slow-clients.sh, about a minute; SLOW_CLIENTS connections of each kind)
# against the real service started on that database, and checks that service's /metrics afterwards with
# `promtool check metrics`.
# Extra arguments go to `swift test` (e.g. `scripts/test.sh --filter HTTP`).
#
# RELEASE_BUILD: `auto` (default) also builds the release product after the tests when no arguments were given
# (a compiler crash may happen in release builds only), `1` always, `0` never.
# SCHEMATHESIS: `auto` (default) runs it when no arguments were given, `1` always, `0` never.
# SCHEMATHESIS_MAX_EXAMPLES (default 100) bounds its test cases per operation and phase.
# RECEIPT_FUZZ_MUTATIONS (default 100): zzuf copies of each shared receipt.
# SCHEMATHESIS_SEED (default 20261122, so that the test command gives the same answer twice) picks the
# generated cases; `random` lets schemathesis draw a new seed (it prints it, for SEED=... to replay).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages curl python3-venv
cd "$ROOT"

PGDIR=$(mktemp -d /tmp/entitlement-test-pg.XXXXXX)
SERVICE_PIDS=()
cleanup() {
    for pid in "${SERVICE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${SERVICE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    pg_stop "$PGDIR"
    rm -rf "$PGDIR"
}
trap cleanup EXIT
PG_FSYNC=off pg_start "$PGDIR" "$(free_port)"
export TEST_DATABASE_URL="$PG_DATABASE_URL"
export TEST_PG_DATA="$PGDIR" TEST_PG_BIN="$(pg_bindir)"
echo "test database: $TEST_DATABASE_URL" >&2

# Apple's verdicts on the signed-payload cases; a harness that fails fails the test command. Its Python venv is
# kept in .build (SIGNED_PARITY_VENV) so that later runs only check the pinned packages.
scripts/signed-parity/run.sh "$PGDIR/signed-parity" "${SIGNED_PARITY_VENV:-$ROOT/.build/signed-parity-venv}"
export SIGNED_PARITY_CASES="$PGDIR/signed-parity/cases.json"

# The webhook tests' receiver: the standardwebhooks package from PyPI in a venv of its own (kept in .build).
WEBHOOK_RECEIVER_PYTHON="$(scripts/webhook-receiver/run.sh "$ROOT/.build/webhook-receiver-venv")"
export WEBHOOK_RECEIVER_PYTHON

swift build --build-tests
status=0
# Serially: several suites measure latency and timeouts, which two cores shared by parallel suites would skew.
swift test --skip-build --no-parallel "$@" || status=$?

# After the tests, not beside them: the timing-sensitive suites would share the two cores with the compiler.
if [ "${RELEASE_BUILD:-auto}" = 1 ] || { [ "${RELEASE_BUILD:-auto}" = auto ] && [ $# -eq 0 ]; }; then
    started=$SECONDS
    if swift build -c release --product entitlement-service; then
        echo "release build: $((SECONDS - started)) s" >&2
    else
        echo "release build: FAILED" >&2
        status=1
    fi
fi

case "${SCHEMATHESIS:-auto}" in
    1) ;;
    auto) [ $# -eq 0 ] || exit "$status" ;;
    *) exit "$status" ;;
esac

ensure_promtool

# The real service (the debug binary just built) on its own database of the throwaway server, with the fake
# App Store as its Apple, a small catalog and fresh keys; its log is kept to check no secret reached it.
BIN="$(swift build --show-bin-path)/entitlement-service"
WORK="$PGDIR/schemathesis"
mkdir -p "$WORK"
PG_PORT="${PG_DATABASE_URL##*:}"
as_pg_owner "$(pg_bindir)/createdb" -h 127.0.0.1 -p "${PG_PORT%%/*}" -U postgres schemathesis
APP_KEY="app-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
ADMIN_KEY="admin-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
SECRET="secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cat >"$WORK/products.json" <<'EOF'
{"products": [
  {"product_id": "com.example.premium.monthly", "type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "4.99", "price_currency": "USD"},
  {"product_id": "com.example.coins.100", "type": "consumable", "currency": "coins", "amount": 100, "price": "0.99", "price_currency": "USD"},
  {"product_id": "com.example.lifetime", "type": "non_consumable", "entitlements": ["pro"], "price": "19.99", "price_currency": "USD"},
  {"product_id": "com.example.pass.month", "type": "non_renewing", "entitlements": ["pass"], "duration": "P1M"}
]}
EOF

# wait_ready URL SECONDS: polls URL until it answers 200.
wait_ready() {
    local deadline=$((SECONDS + $2))
    until curl -fsS --max-time 2 -o /dev/null "$1" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || { echo "$1 did not become ready in $2 s" >&2; return 1; }
        sleep 0.2
    done
}

FAKE_PORT=$(free_port)
FAKE_APPLE_SHARED_SECRET="$SECRET" "$BIN" fake-app-store --port "$FAKE_PORT" 2>"$WORK/fake.log" &
SERVICE_PIDS+=($!)
SERVICE_PORT=$(free_port)
env DATABASE_URL="${PG_DATABASE_URL%/*}/schemathesis" PORT="$SERVICE_PORT" LISTEN_ADDR=127.0.0.1 \
    API_KEYS="$APP_KEY" ADMIN_API_KEYS="$ADMIN_KEY" APPLE_SHARED_SECRET="$SECRET" APPLE_BUNDLE_ID=com.example.app \
    APPLE_VERIFY_URL_PRODUCTION="http://127.0.0.1:$FAKE_PORT/verifyReceipt" \
    APPLE_VERIFY_URL_SANDBOX="http://127.0.0.1:$FAKE_PORT/sandbox/verifyReceipt" \
    APPLE_TIMEOUT_MS=500 RETRY_BASE_MS=1000 RETRY_MAX_MS=5000 PRODUCTS_FILE="$WORK/products.json" \
    "$BIN" serve 2>"$WORK/service.log" &
SERVICE_PID=$!
SERVICE_PIDS+=("$SERVICE_PID")
schemathesis_status=0
seed="${SCHEMATHESIS_SEED:-20261122}"
[ "$seed" = random ] && seed=""
if wait_ready "http://127.0.0.1:$SERVICE_PORT/readyz" 60; then
    BASE_URL="http://127.0.0.1:$SERVICE_PORT" APP_KEY="$APP_KEY" ADMIN_KEY="$ADMIN_KEY" \
        MAX_EXAMPLES="${SCHEMATHESIS_MAX_EXAMPLES:-100}" SEED="$seed" scripts/schemathesis.sh || schemathesis_status=$?
    # zzuf's mutations of the shared receipts against the local receipt reader: each answered 200 or 422.
    scripts/receipt-fuzz.sh "http://127.0.0.1:$SERVICE_PORT" "$ADMIN_KEY" "${RECEIPT_FUZZ_MUTATIONS:-100}" || schemathesis_status=1
    # slowhttptest's slow heads, bodies and reads at once: the service keeps answering and closes them all itself.
    scripts/slow-clients.sh "http://127.0.0.1:$SERVICE_PORT" "$APP_KEY" || schemathesis_status=1
    # Its metrics after that traffic must pass Prometheus's own checks.
    if curl -fsS --max-time 10 "http://127.0.0.1:$SERVICE_PORT/metrics" -o "$WORK/metrics.txt" &&
        "$PROMTOOL" check metrics <"$WORK/metrics.txt"; then
        echo "promtool: /metrics passed ($(grep -vc '^#' "$WORK/metrics.txt") samples)"
    else
        echo "promtool: /metrics FAILED" >&2
        schemathesis_status=1
    fi
else
    tail -n 20 "$WORK/service.log" >&2
    schemathesis_status=1
fi
kill -TERM "$SERVICE_PID" 2>/dev/null || true
wait "$SERVICE_PID" 2>/dev/null || true

# No key and no shared secret may ever appear in what the service logged.
for secret in "$APP_KEY" "$ADMIN_KEY" "$SECRET"; do
    if grep -qF -- "$secret" "$WORK/service.log"; then
        echo "schemathesis: a key or the shared secret reached the service log" >&2
        schemathesis_status=1
    fi
done
if grep -q 'level=error' "$WORK/service.log"; then
    echo "schemathesis: warning: the service logged errors meanwhile:" >&2
    grep 'level=error' "$WORK/service.log" | head -n 20 >&2
fi
[ "$schemathesis_status" -eq 0 ] || status=1

# Apple's own library (SignedDataVerifier) on what the fake App Store signs: scripts/signed-parity/check_fake.py
# against the fake started above, in the parity harness's venv (run.sh creates it and installs the pinned library).
if ! { scripts/signed-parity/run.sh "$WORK/signed-parity" "$ROOT/.build/signed-parity-venv" &&
       "$ROOT/.build/signed-parity-venv/bin/python" scripts/signed-parity/check_fake.py "http://127.0.0.1:$FAKE_PORT"; }; then
    echo "check_fake: FAILED" >&2
    status=1
fi

# Apple's own App Store Server API client (AppStoreServerAPIClient) against the same fake's Server API:
# scripts/signed-parity/check_server_api.py, in the same venv.
if ! "$ROOT/.build/signed-parity-venv/bin/python" scripts/signed-parity/check_server_api.py "http://127.0.0.1:$FAKE_PORT"; then
    echo "check_server_api: FAILED" >&2
    status=1
fi

# The admin console in headless Chromium (Selenium, in a venv of its own) against a fresh service on its own
# database with the same fake App Store: scripts/console/check_console.py. Screenshots: .build/console-screenshots/.
if ! scripts/console/run.sh "$PGDIR/console" "${PG_DATABASE_URL%/*}" "$BIN" "$FAKE_PORT" "$SECRET" "$WORK/products.json"; then
    echo "console: FAILED" >&2
    status=1
fi
exit "$status"
