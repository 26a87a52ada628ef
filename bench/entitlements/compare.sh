#!/usr/bin/env bash
# Two builds of the service, alternating on one seeded database: the service's CPU per entitlements read of
# build B as a ratio to build A's, measured in the same run (A B A B …), for a change's before and after.
#
#   bench/entitlements/compare.sh BEFORE_BIN AFTER_BIN [cold|hot]
#
# cold: `?at=` reads (never from the cache: HTTP, the snapshot read, the evaluation, the answer); hot: reads
# answered from the cache (filled by the warm-up). Each run: the build started alone on SERVICE_CPU, a 2 s wrk
# warm-up, then DURATION seconds of wrk (one thread, CONNECTIONS connections, a random user per request) on
# CLIENT_CPU; the service's CPU time (user + system, from /proc) over the run divided by the requests wrk
# counted, and PostgreSQL's the same way. PostgreSQL (fsync off, seed.sql with USERS users) runs on both CPUs.
# Prints each run's rate and CPU per request, then the median CPU per request of each build, the service's and
# PostgreSQL's, and their ratios (below 1: B costs less).
#
# Environment (all optional): USERS=20000 ROUNDS=3 DURATION=5 CONNECTIONS=64 SERVICE_CPU=0 CLIENT_CPU=1
#   A_ENV, B_ENV   extra environment for build A or B (e.g. B_ENV=DATABASE_POOL_SIZE=3 with the same binary)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages wrk curl python3

[ $# -ge 2 ] || { sed -n 2,15p "${BASH_SOURCE[0]}" >&2; exit 2; }
BUILD_A=$(realpath "$1") BUILD_B=$(realpath "$2") MODE=${3:-cold}
USERS=${USERS:-20000} ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5} CONNECTIONS=${CONNECTIONS:-64}
SERVICE_CPU=${SERVICE_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
HERE="$ROOT/bench/entitlements"
case "$MODE" in cold) AT=$(date -u +%Y-%m-%dT%H:%M:%SZ) ;; hot) AT="" ;; *) echo "mode: cold or hot" >&2; exit 2 ;; esac

bench_workspace entitlement-compare
PGDIR=$(mktemp -d /tmp/entitlement-compare-pg.XXXXXX)
PG_FSYNC=off pg_start "$PGDIR" "$(free_port)" >&2
DATABASE_URL="$PG_DATABASE_URL"
echo "migrating and loading $USERS users" >&2
DATABASE_URL="$DATABASE_URL" MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn "$BUILD_A" migrate >&2
"$(pg_bindir)/psql" "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -v users="$USERS" -P footer=off -f "$HERE/seed.sql" >/dev/null
API_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

# wrk_reads SECONDS PORT: wrk reading random users' entitlements (with `?at=` in cold mode) into $WORK/wrk.out.
wrk_reads() {
    if [ -n "$AT" ]; then export BENCH_AT=$AT; else unset BENCH_AT; fi
    BENCH_USERS=$USERS BENCH_API_KEY=$API_KEY taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNECTIONS" -d"$1s" -s "$HERE/entitlements.lua" "http://127.0.0.1:$2" >"$WORK/wrk.out"
}

# measure BIN EXTRA_ENV: one run; prints "requests_per_second cpu_us_per_request postgres_cpu_us_per_request".
measure() {
    local port pid cpu0 cpu1 pg0 pg1
    port=$(free_port)
    env DATABASE_URL="$DATABASE_URL" LISTEN_ADDR=127.0.0.1 PORT="$port" API_KEYS="$API_KEY" ADMIN_API_KEYS="admin-$API_KEY" \
        ENTITLEMENT_CACHE_SIZE=$((USERS > 100000 ? USERS : 100000)) PRODUCTS_FILE="$HERE/products.json" LOG_LEVEL=warn \
        MIGRATIONS_DIR="$ROOT/migrations" $2 taskset -c "$SERVICE_CPU" "$1" serve >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_healthy "$port" "$pid" "$1"
    wrk_reads 2 "$port"
    cpu0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat") pg0=$(pg_cpu_ticks "$PGDIR")
    wrk_reads "$DURATION" "$port"
    cpu1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat") pg1=$(pg_cpu_ticks "$PGDIR")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    python3 - "$WORK/wrk.out" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" "$((pg1 - pg0))" <<'PY'
import re, sys
text, ticks, hz, pg = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if re.search(r"Non-2xx or 3xx responses", text):
    sys.exit("wrk saw answers other than 2xx:\n" + text)
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
requests = int(re.search(r"(\d+) requests in", text).group(1))
print(f"{rate:.0f} {ticks / hz / requests * 1e6:.1f} {pg / hz / requests * 1e6:.1f}")
PY
}

echo "$MODE reads, $USERS users, $CONNECTIONS connections, ${DURATION}s per run, $ROUNDS rounds (A B in turn)"
echo "  A: $BUILD_A ${A_ENV:-}"
echo "  B: $BUILD_B ${B_ENV:-}"
: >"$WORK/runs"
for round in $(seq 1 "$ROUNDS"); do
    for build in A B; do
        if [ $build = A ]; then bin=$BUILD_A extra=${A_ENV:-}; else bin=$BUILD_B extra=${B_ENV:-}; fi
        measure "$bin" "$extra" >"$WORK/measure.out"
        read -r rate cpu pg <"$WORK/measure.out"
        printf "round %s  %s  %7s req/s  %6s µs of service CPU, %6s µs of PostgreSQL's per request\n" "$round" "$build" "$rate" "$cpu" "$pg"
        echo "$build $rate $cpu $pg" >>"$WORK/runs"
    done
done
python3 - "$WORK/runs" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
cpu = {b: statistics.median(float(r[2]) for r in runs if r[0] == b) for b in "AB"}
rate = {b: statistics.median(float(r[1]) for r in runs if r[0] == b) for b in "AB"}
pg = {b: statistics.median(float(r[3]) for r in runs if r[0] == b) for b in "AB"}
print(f"median CPU per request: A {cpu['A']:.1f} µs, B {cpu['B']:.1f} µs; ratio B/A {cpu['B'] / cpu['A']:.3f}")
if pg['A'] > 0:  # hot reads never reach PostgreSQL
    print(f"median PostgreSQL CPU per request: A {pg['A']:.1f} µs, B {pg['B']:.1f} µs; ratio B/A {pg['B'] / pg['A']:.3f}")
print(f"median rate: A {rate['A']:.0f}/s, B {rate['B']:.0f}/s; ratio B/A {rate['B'] / rate['A']:.3f}")
PY
