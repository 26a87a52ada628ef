#!/usr/bin/env bash
# The admin console's browser check: starts the service on a new database of a running PostgreSQL, with the
# fake App Store as its Apple, 100 000 seeded customers and webhooks sent to the check's receiver, and runs
# check_console.py in headless Chromium against it.
#
# Usage: scripts/console/run.sh WORK_DIR DATABASE_SERVER_URL SERVICE_BINARY FAKE_PORT SHARED_SECRET PRODUCTS_FILE
# DATABASE_SERVER_URL is a postgres:// URL without its database name (a database `console` is created there).
# Installs chromium and chromium-driver (Debian) when missing and Selenium (PyPI, requirements.txt) into
# .build/console-venv; screenshots go to .build/console-screenshots/. The service's log must hold no key.
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
set -uo pipefail
[ $# -eq 6 ] || { echo "usage: $0 WORK_DIR DATABASE_SERVER_URL SERVICE_BINARY FAKE_PORT SHARED_SECRET PRODUCTS_FILE" >&2; exit 2; }
WORK=$1 SERVER_URL=$2 BIN=$3 FAKE_PORT=$4 SECRET=$5 PRODUCTS=$6
ensure_packages chromium chromium-driver python3-venv
mkdir -p "$WORK"
VENV="$ROOT/.build/console-venv"
SHOTS="$ROOT/.build/console-screenshots"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    "$VENV/bin/python" -m pip install --quiet -r "$ROOT/scripts/console/requirements.txt" || exit 1
rm -rf "$SHOTS"

PORT_PART="${SERVER_URL##*:}"
as_pg_owner "$(pg_bindir)/createdb" -h 127.0.0.1 -p "${PORT_PART%%/*}" -U postgres console || exit 1
APP_KEY="app-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
ADMIN_KEY="admin-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
WEBHOOK_SECRET="whsec_$(head -c 32 /dev/urandom | base64 -w0)"
PORT=$(free_port)
HOOK_PORT=$(free_port)

# 100 000 customers before the service starts (scripts/console/seed.sql), so that the check's timings count.
started=$SECONDS
DATABASE_URL="$SERVER_URL/console" "$BIN" migrate 2>"$WORK/migrate.log" || { cat "$WORK/migrate.log" >&2; exit 1; }
as_pg_owner "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORT_PART%%/*}" -U postgres -d console \
    <"$ROOT/scripts/console/seed.sql" || exit 1
echo "console: seeded 100000 customers in $((SECONDS - started)) s"

# Webhooks go to the check's own receiver on HOOK_PORT (it answers 204 and keeps the event ids it got).
env DATABASE_URL="$SERVER_URL/console" PORT="$PORT" LISTEN_ADDR=127.0.0.1 \
    API_KEYS="$APP_KEY" ADMIN_API_KEYS="$ADMIN_KEY" APPLE_SHARED_SECRET="$SECRET" APPLE_BUNDLE_ID=com.example.app \
    APPLE_VERIFY_URL_PRODUCTION="http://127.0.0.1:$FAKE_PORT/verifyReceipt" \
    APPLE_VERIFY_URL_SANDBOX="http://127.0.0.1:$FAKE_PORT/sandbox/verifyReceipt" \
    WEBHOOK_URL="http://127.0.0.1:$HOOK_PORT/hook" WEBHOOK_SECRET="$WEBHOOK_SECRET" WEBHOOK_RETRY_BASE_MS=200 WEBHOOK_RETRY_MAX_MS=1000 \
    PRODUCTS_FILE="$PRODUCTS" "$BIN" serve 2>"$WORK/service.log" &
SERVICE_PID=$!
trap 'kill -TERM "$SERVICE_PID" 2>/dev/null; wait "$SERVICE_PID" 2>/dev/null' EXIT

status=0
deadline=$((SECONDS + 60))
until curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "$SERVICE_PID" 2>/dev/null; then
        echo "console: the service did not become ready" >&2
        tail -n 20 "$WORK/service.log" >&2
        exit 1
    fi
    sleep 0.2
done
"$VENV/bin/python" "$ROOT/scripts/console/check_console.py" "http://127.0.0.1:$PORT" "$APP_KEY" "$ADMIN_KEY" "$SHOTS" "$HOOK_PORT" || status=1
for secret in "$APP_KEY" "$ADMIN_KEY" "$SECRET" "$WEBHOOK_SECRET"; do
    if grep -qF -- "$secret" "$WORK/service.log"; then
        echo "console: a key or the shared secret reached the service log" >&2
        status=1
    fi
done
[ "$status" -eq 0 ] && echo "console: screenshots in $SHOTS: $(cd "$SHOTS" && ls *.png | tr '\n' ' ')"
exit "$status"
