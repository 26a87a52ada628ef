#!/usr/bin/env bash
# HTTP benchmark: our server against a minimal C server (bench/http/reference.c: libuv + http-parser),
# both answering GET /healthz with {"status":"ok"} over keep-alive connections.
#
# Both servers run pinned to one core, wrk to the other; runs alternate A B A B so drift (thermal, noisy
# neighbours) hits both alike. Prints each run's requests/s and p99 latency, then the median ratios
# ours/reference.
#
# Environment (all optional):
#   OURS_CMD       command starting our server; it must listen on $LISTEN_ADDR:$PORT.
#                  Default: the release build's `entitlement-service serve`, with a throwaway PostgreSQL
#                  when DATABASE_URL is unset.
#   REFERENCE_CMD  command starting the reference server (default: reference.c, compiled here).
#   ROUNDS=4 DURATION=10 (s) WARMUP=2 (s) CONNECTIONS=64 SERVER_CPU=0 CLIENT_CPU=1
#   BENCH_LOGS=1   keep the servers' output in bench/out/*.log (by default it goes to /dev/null: our
#                  access log writes a line per request)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages wrk gcc curl

ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT="$ROOT/bench/out"
mkdir -p "$OUT"

PIDS=()
PGDIR=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$PGDIR" ]; then pg_stop "$PGDIR"; rm -rf "$PGDIR"; fi
}
trap cleanup EXIT

if [ "$(nproc)" -lt 2 ]; then
    echo "warning: fewer than 2 CPUs; server and wrk share one" >&2
    CLIENT_CPU=$SERVER_CPU
fi

echo "building the reference server" >&2
gcc -O2 -Wall -o "$OUT/reference" "$ROOT/bench/http/reference.c" -luv -lhttp_parser
REFERENCE_CMD=${REFERENCE_CMD:-"$OUT/reference"}

if [ -z "${OURS_CMD:-}" ]; then
    echo "building entitlement-service (release)" >&2
    (cd "$ROOT" && swift build -c release --product entitlement-service >&2)
    OURS_CMD="$ROOT/.build/release/entitlement-service serve"
    if [ -z "${DATABASE_URL:-}" ]; then
        PGDIR=$(mktemp -d /tmp/entitlement-bench-pg.XXXXXX)
        pg_start "$PGDIR" "$(free_port)"
        export DATABASE_URL="$PG_DATABASE_URL"
    fi
fi

# start_server NAME COMMAND: starts COMMAND pinned to SERVER_CPU on a free port; waits until /healthz answers.
# Sets SERVER_PORT.
start_server() {
    local name="$1" command="$2" port log=/dev/null pid
    port=$(free_port)
    [ -n "${BENCH_LOGS:-}" ] && log="$OUT/$name.log"
    PORT=$port LISTEN_ADDR=127.0.0.1 taskset -c "$SERVER_CPU" bash -c "exec $command" >"$log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_healthy "$port" "$pid" "$name (command: $command)"
    SERVER_PORT=$port
}

# load PORT SECONDS: runs wrk against /healthz; prints "requests_per_second p99_ms errors".
load() {
    local output
    output=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"$2s" --latency "http://127.0.0.1:$1/healthz")
    python3 - "$output" <<'PY'
import re, sys
text = sys.argv[1]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
value, unit = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", text, re.M).groups()
p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
errors += int(non2xx.group(1)) if non2xx else 0
print(f"{rps:.0f} {p99:.3f} {errors}")
PY
}

start_server ours "$OURS_CMD"
OURS_PORT=$SERVER_PORT
start_server reference "$REFERENCE_CMD"
REFERENCE_PORT=$SERVER_PORT

echo "warming up (${WARMUP}s each)" >&2
load "$OURS_PORT" "$WARMUP" >/dev/null
load "$REFERENCE_PORT" "$WARMUP" >/dev/null

RESULTS="$OUT/http-results.txt"
: >"$RESULTS"
printf "%-6s %-10s %12s %10s %7s\n" round server "req/s" "p99 ms" errors
for round in $(seq 1 "$ROUNDS"); do
    for name in ours reference; do
        port=$OURS_PORT
        [ "$name" = reference ] && port=$REFERENCE_PORT
        read -r rps p99 errors < <(load "$port" "$DURATION")
        printf "%-6s %-10s %12s %10s %7s\n" "$round" "$name" "$rps" "$p99" "$errors"
        echo "$name $rps $p99 $errors" >>"$RESULTS"
    done
done

python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def median(name, column):
    return statistics.median(float(row[column]) for row in rows if row[0] == name)
ours_rps, ref_rps = median("ours", 1), median("reference", 1)
ours_p99, ref_p99 = median("ours", 2), median("reference", 2)
errors = sum(int(row[3]) for row in rows)
print(f"median req/s: ours {ours_rps:.0f}, reference {ref_rps:.0f}, ratio ours/reference {ours_rps / ref_rps:.3f}")
print(f"median p99:   ours {ours_p99:.3f} ms, reference {ref_p99:.3f} ms, ratio ours/reference {ours_p99 / ref_p99:.3f}")
if errors:
    print(f"warning: {errors} socket errors or non-2xx responses across the runs")
PY
