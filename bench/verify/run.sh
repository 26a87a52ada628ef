#!/usr/bin/env bash
# bench/verify/run.sh: COUNT (default 1000) receipt verifications started at once against the fake App Store
# answering after LATENCY_MS (default 2000), from one client process on one uv loop (HTTPClient +
# AppStoreClient), first over plain HTTP, then over TLS through an nginx terminator trusting a throwaway CA.
#
# Every verification posts the same fake receipt: a consumable, a lifetime purchase and a monthly subscription
# renewed PERIODS times (default "1 12": a run per size; 12 months make a 28 KB answer).
#
# Prints, per transport and receipt: wall_ms, latency_ms, ratio = (wall - latency) / latency (goal: below
# 1.0), the client's peak RSS (VmHWM) and its worst loop stall (a 10 ms loop timer's lateness), and what
# the fake received. Installs what it lacks with apt-get, builds release, and stops every process it
# started (by PID) however it ends. Exits 0 when every verification of every run was verified.
#
# Usage: bench/verify/run.sh            (env: COUNT, LATENCY_MS, PERIODS, OUT, SKIP_BUILD=1)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
COUNT="${COUNT:-1000}"
LATENCY_MS="${LATENCY_MS:-2000}"
PERIODS="${PERIODS:-1 12}"
OUT="${OUT:-$REPO/bench/out/verify}"
BIN="$REPO/.build/release/entitlement-service"
BENCH="$REPO/.build/release/verify-bench"

log() { printf '%s\n' "bench: $*" >&2; }

# --- what it needs ---------------------------------------------------------------------------------------
missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if ((${#missing[@]})); then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 1,000 connections in the client, as many in the fake, twice that in nginx (client side + upstream).
wanted=$((COUNT * 2 + 512))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$wanted" ]; then
    hard="$(ulimit -Hn)"
    if [ "$hard" = unlimited ] || [ "$hard" -ge "$wanted" ]; then ulimit -n "$wanted"; else ulimit -n "$hard"; fi
fi
log "open files limit: $(ulimit -n)"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building release"
    (cd "$REPO" && swift build -c release >/dev/null)
fi

rm -rf "$OUT"
mkdir -p "$OUT/nginx/tmp"

# --- processes, stopped by PID on exit --------------------------------------------------------------------
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A TCP port nobody listens on (checked against /proc/net/tcp).
free_port() {
    local port hex
    while :; do
        port=$((20000 + RANDOM % 40000))
        hex="$(printf ':%04X ' "$port")"
        grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$port"; return; }
    done
}

# Polls `$@` until it succeeds, for at most 10 s.
wait_for() {
    local i
    for i in $(seq 1 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    log "timed out waiting for: $*"; return 1
}

# --- the fake App Store -----------------------------------------------------------------------------------
FAKE_APPLE_LATENCY_MS="$LATENCY_MS" "$BIN" fake-app-store --port 0 2>"$OUT/fake.log" &
PIDS+=($!)
wait_for grep -q "event=fake_app_store_listening" "$OUT/fake.log"
FAKE_PORT="$(sed -n 's/.*event=fake_app_store_listening port=\([0-9]*\).*/\1/p' "$OUT/fake.log" | head -1)"
[ -n "$FAKE_PORT" ] || { log "the fake did not report its port"; cat "$OUT/fake.log" >&2; exit 1; }
wait_for curl -fsS "http://127.0.0.1:$FAKE_PORT/control/config"
log "fake App Store on port $FAKE_PORT, latency $LATENCY_MS ms"

# --- a throwaway CA and a certificate for 127.0.0.1 -------------------------------------------------------
(
    cd "$OUT"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
        -subj "/CN=entitlement-service bench throwaway CA" -keyout ca.key -out ca.pem \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
        -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile server.ext \
        -out server.pem 2>/dev/null
)

# --- nginx terminating TLS in front of the fake -----------------------------------------------------------
TLS_PORT="$(free_port)"
cat >"$OUT/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
worker_rlimit_nofile $((COUNT * 4 + 1024));
pid $OUT/nginx/nginx.pid;
error_log $OUT/nginx/error.log warn;
events { worker_connections $((COUNT * 2 + 512)); multi_accept on; }
http {
    access_log off;
    client_body_temp_path $OUT/nginx/tmp/body;
    proxy_temp_path $OUT/nginx/tmp/proxy;
    fastcgi_temp_path $OUT/nginx/tmp/fastcgi;
    uwsgi_temp_path $OUT/nginx/tmp/uwsgi;
    scgi_temp_path $OUT/nginx/tmp/scgi;
    upstream fake_app_store { server 127.0.0.1:$FAKE_PORT; keepalive $((COUNT + 64)); }
    server {
        listen 127.0.0.1:$TLS_PORT ssl backlog=4096;
        ssl_certificate $OUT/server.pem;
        ssl_certificate_key $OUT/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        keepalive_requests 100000;
        location / {
            proxy_pass http://fake_app_store;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 120s;
        }
    }
}
EOF
nginx -p "$OUT/nginx" -c "$OUT/nginx/nginx.conf" -e "$OUT/nginx/error.log" &
PIDS+=($!)
wait_for curl -fsS --cacert "$OUT/ca.pem" "https://127.0.0.1:$TLS_PORT/control/config"
log "nginx TLS terminator on port $TLS_PORT"

# --- the runs ---------------------------------------------------------------------------------------------
status=0
run() {
    local transport="$1" base="$2" periods="$3"; shift 3
    curl -fsS -X POST "http://127.0.0.1:$FAKE_PORT/control/reset" >/dev/null
    log "$transport, $periods-period receipt: $COUNT verifications at once (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    local line
    line="$("$BENCH" --production-url "$base/verifyReceipt" --sandbox-url "$base/sandbox/verifyReceipt" \
        --latency-ms "$LATENCY_MS" --count "$COUNT" --periods "$periods" "$@" 2>"$OUT/bench-$transport-$periods.log")" || status=1
    local received ratio verdict
    received="$(curl -fsS "http://127.0.0.1:$FAKE_PORT/control/requests" | grep -o '"count":[0-9]*' | head -1)"
    ratio="$(sed -n 's/.* ratio=\([-0-9.]*\).*/\1/p' <<<"$line")"
    verdict="$(awk -v r="${ratio:-99}" 'BEGIN { print (r < 1.0) ? "ok" : "over" }')"
    printf 'transport=%s periods=%s %s fake_received=%s ratio_goal_below_1=%s\n' \
        "$transport" "$periods" "$line" "${received#\"count\":}" "$verdict"
}
for periods in $PERIODS; do
    run http "http://127.0.0.1:$FAKE_PORT" "$periods"
    run https "https://127.0.0.1:$TLS_PORT" "$periods" --ca-bundle "$OUT/ca.pem"
done
exit "$status"
