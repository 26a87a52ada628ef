#!/usr/bin/env bash
# Entitlements benchmark: GET /v1/users/{user_id}/entitlements through our service, three figures in one run:
#
#   hot       wrk → entitlement-service, every user in its cache (ENTITLEMENT_CACHE_SIZE ≥ USERS, filled by the
#             warm-up): a random user per request (entitlements.lua), app key. Compared with `reference`: the
#             minimal C server of bench/http/reference.c answering GET /healthz, on the same core.
#   reference-sized  the same C server with its /healthz body padded to the mean length of the service's answers
#             (REFERENCE_BODY_BYTES, measured over 200 random users before the runs): the floor for an answer as long
#             as the service's, for information beside the goal's ratio.
#   cold      the same with `?at=` (a read at an instant never comes from the cache): wrk → entitlement-service
#             → PostgreSQL. Compared with `pgbench`, below.
#   staleness a write (a grant, every 10th a revocation) answered by one service instance, then reads of that
#             user on a second instance sharing the database until the change shows (staleness.py):
#             p50/p99/max of the time from the write's answer to the first read showing it, STALE_SAMPLES per
#             round.
#   pgbench   pgbench → PostgreSQL: the four statements of UserSnapshotStore for a random user in one pipeline
#             (BEGIN … COMMIT inside \startpipeline … \endpipeline: one Sync, one round trip, as the service sends them), queries.sql.
#             Once per mode of PGBENCH_MODES: `prepared` parses each statement once per connection, as the
#             service does when it prepares its pipelined statements (PQsendPrepare), and is the best PostgreSQL
#             can do for these statements: the headline ratio. `extended` sends unnamed statements, parsed and
#             planned every time (PQsendQueryParams, what the service sent before it prepared them), for
#             reference. Each mode runs once per client count of PGBENCH_CLIENTS: CONNECTIONS (as many as
#             wrk's), 8 and 4. On two cores 64 backends cost PostgreSQL up to twice the CPU per transaction of
#             4 or 8 (and vary from run to run), so the goal is judged against the best of them: what
#             PostgreSQL does with these statements at its best.
#   pgbatch   pgbench → PostgreSQL: what the service itself sends for cold reads, batches of 10 users
#             (about what UserSnapshotLoader's batches hold with 64 clients) with each table read once for
#             all of them, queries-batched.sql, prepared, once per client count of PGBATCH_CLIENTS (the read
#             pool's size and 4); its rate is counted in reads (10 per transaction). For information, not a goal: it shows what PostgreSQL
#             could do for the service with no HTTP, evaluation or answer in the way.
#
# Data: a throwaway PostgreSQL cluster in a temporary directory with fsync=off (nothing here needs durability;
# the benchmark only reads), migrated by `entitlement-service migrate`, loaded by seed.sql with USERS users
# (non-consumables, subscription chains and their subscriptions rows, coin packs and balances, season passes,
# grants), then VACUUM ANALYZE; catalog products.json.
#
# Fairness: runs alternate (hot, reference, reference-sized, cold, pgbench modes…, staleness, hot, …) so drift and other work on the machine hit all
# alike; every run has the same client count and duration; the client (wrk or pgbench, one thread) runs on
# CLIENT_CPU, PostgreSQL on PG_CPUS, the service on SERVICE_CPU, identically for every run (while pgbench
# runs, the service idles and PostgreSQL has its CPU). Prints each run's throughput and p99 latency (wrk
# --latency; for pgbench, computed from its per-transaction log), the CPU used by the service, PostgreSQL,
# the client and everything else on the machine, then the median ratios hot ÷ reference and cold ÷ pgbench, and the staleness percentiles.
# Before each round it measures the service CPU's latency to memory over 1–64 MB (memory-latency.c): the hot
# runs read about 15 MB of held answers at random, and the machine's neighbours change that latency over time.
#
# Environment (all optional):
#   USERS=20000 ROUNDS=3 DURATION=15 (s) WARMUP=5 (s) CONNECTIONS=64
#   SERVICE_CPU=0 CLIENT_CPU=1 PG_CPUS=0,1   taskset CPU lists
#   PGBENCH_MODES="prepared"                 pgbench -M modes to run (also: extended); the first gives the ratio
#   PGBENCH_CLIENTS="CONNECTIONS 8 4"        pgbench client counts
#   PGBATCH_CLIENTS="READ_POOL_SIZE 4"       client counts of the batched pgbench runs (empty: none)
#   STALE_SAMPLES=200                        staleness samples per round
#   DATABASE_POOL_SIZE       the service's main pool (unset: the service's default)
#   DATABASE_READ_POOL_SIZE  the service's pool for entitlement reads (unset: the service's default, 2)
#   SERVICE_BIN              a prebuilt entitlement-service to measure instead of building this checkout's
#   PROFILE=cold|hot         afterwards, one more wrk run of that mode (any other value: cold) with `perf record`
#                            attached to the warm service, and where its CPU time went (perf_categories.py);
#                            perf.data stays in bench/out/entitlements/
#   BENCH_LOGS=1             keep the service's output in bench/out/entitlements/service.log
# Each run's wrk or pgbench output is kept in bench/out/entitlements/roundN-NAME.txt.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages wrk curl python3 gcc

USERS=${USERS:-20000}
STALE_SAMPLES=${STALE_SAMPLES:-200}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-5}
CONNECTIONS=${CONNECTIONS:-64}
SERVICE_CPU=${SERVICE_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PG_CPUS=${PG_CPUS:-0,1}
read -r -a MODES <<<"${PGBENCH_MODES:-prepared}"
# The size of the service's pool for entitlement reads: its default (Configuration.swift) unless
# DATABASE_READ_POOL_SIZE says otherwise.
READ_POOL_SIZE=${DATABASE_READ_POOL_SIZE:-2}
read -r -a PGBENCH_COUNTS <<<"${PGBENCH_CLIENTS:-$CONNECTIONS 8 4}"
read -r -a PGBATCH_COUNTS <<<"${PGBATCH_CLIENTS-$READ_POOL_SIZE 4}"
HERE="$ROOT/bench/entitlements"
# Users per transaction of queries-batched.sql.
PGBATCH_READS=$(grep -c '^\\set u' "$HERE/queries-batched.sql")
OUT="$ROOT/bench/out/entitlements"
mkdir -p "$OUT"

if [ "$(nproc)" -lt 2 ]; then
    echo "warning: fewer than 2 CPUs; everything shares CPU 0" >&2
    SERVICE_CPU=0 CLIENT_CPU=0 PG_CPUS=0
fi

BIN=$(pg_bindir)
PGBENCH="$BIN/pgbench"
PSQL="$BIN/psql"
[ -x "$PGBENCH" ] || { echo "pgbench not found in $BIN (package postgresql-contrib)" >&2; exit 1; }

SERVICE_PID=""
OTHER_PIDS=()
PGDIR=""
WORK=$(mktemp -d /tmp/entitlement-bench.XXXXXX)
cleanup() {
    stop_service
    for pid in "${OTHER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    if [ -n "$PGDIR" ]; then pg_stop "$PGDIR"; rm -rf "$PGDIR"; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# stop_service: SIGTERM to the service, then waits for it to exit.
stop_service() {
    if [ -n "$SERVICE_PID" ]; then
        kill "$SERVICE_PID" 2>/dev/null || true
        wait "$SERVICE_PID" 2>/dev/null || true
        SERVICE_PID=""
    fi
}

echo "building the reference server and the memory probe" >&2
gcc -O2 -Wall -o "$WORK/reference" "$ROOT/bench/http/reference.c" -luv -lhttp_parser
gcc -O2 -Wall -o "$WORK/memory-latency" "$HERE/memory-latency.c"

bench_service_bin

echo "starting a throwaway PostgreSQL (fsync=off)" >&2
PGDIR=$(mktemp -d /tmp/entitlement-bench-pg.XXXXXX)
PG_FSYNC=off pg_start "$PGDIR" "$(free_port)"
DATABASE_URL="$PG_DATABASE_URL"
# Backends fork from the postmaster and inherit its affinity.
POSTMASTER_PID=$(head -n 1 "$PGDIR/postmaster.pid")
for pid in "$POSTMASTER_PID" $(ps -o pid= --ppid "$POSTMASTER_PID"); do
    taskset -p -c "$PG_CPUS" "$pid" >/dev/null
done

echo "migrating and loading $USERS users" >&2
DATABASE_URL="$DATABASE_URL" MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn "$SERVICE_BIN" migrate >&2
"$PSQL" "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -v users="$USERS" -P footer=off -f "$HERE/seed.sql" >&2

API_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
ADMIN_KEY="admin-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
SERVICE_PORT=$(free_port)
CACHE_SIZE=$((USERS > 100000 ? USERS : 100000))
AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# service_env: the environment every service instance runs with.
service_env() {
    echo DATABASE_URL="$DATABASE_URL" LISTEN_ADDR=127.0.0.1 API_KEYS="$API_KEY" ADMIN_API_KEYS="$ADMIN_KEY" \
        ENTITLEMENT_CACHE_SIZE="$CACHE_SIZE" PRODUCTS_FILE="$HERE/products.json" LOG_LEVEL=warn MIGRATIONS_DIR="$ROOT/migrations"
}

# start_service: starts the service pinned to SERVICE_CPU and waits until /healthz answers. Sets SERVICE_PID.
start_service() {
    local log=/dev/null
    [ -n "${BENCH_LOGS:-}" ] && log="$OUT/service.log"
    env $(service_env) PORT=$SERVICE_PORT taskset -c "$SERVICE_CPU" "$SERVICE_BIN" serve >>"$log" 2>&1 &
    SERVICE_PID=$!
    wait_healthy "$SERVICE_PORT" "$SERVICE_PID"
}

start_service
# The second instance (staleness reads) and the C reference, both on the service's core; each idles while the
# others run.
OTHER_PORT=$(free_port)
env $(service_env) PORT=$OTHER_PORT taskset -c "$SERVICE_CPU" "$SERVICE_BIN" serve >/dev/null 2>&1 &
OTHER_PIDS+=($!)
wait_healthy "$OTHER_PORT" $!
REFERENCE_PORT=$(free_port)
PORT=$REFERENCE_PORT LISTEN_ADDR=127.0.0.1 taskset -c "$SERVICE_CPU" "$WORK/reference" >/dev/null 2>&1 &
OTHER_PIDS+=($!)
wait_healthy "$REFERENCE_PORT" $!
# The mean length of the answers the hot runs read, over 200 random users; the sized reference answers as long.
ANSWER_BYTES=$(python3 - "$SERVICE_PORT" "$API_KEY" "$USERS" <<'PY'
import http.client, random, sys
port, key, users = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
connection = http.client.HTTPConnection("127.0.0.1", port)
sizes = []
for _ in range(200):
    connection.request("GET", f"/v1/users/{random.randint(1, users)}/entitlements", headers={"Authorization": f"Bearer {key}"})
    sizes.append(len(connection.getresponse().read()))
print(round(sum(sizes) / len(sizes)))
PY
)
SIZED_PORT=$(free_port)
PORT=$SIZED_PORT LISTEN_ADDR=127.0.0.1 REFERENCE_BODY_BYTES=$ANSWER_BYTES taskset -c "$SERVICE_CPU" "$WORK/reference" >/dev/null 2>&1 &
OTHER_PIDS+=($!)
wait_healthy "$SIZED_PORT" $!
# A sample answer (a user with every kind of source), kept for a look at what the benchmark reads.
curl -fsS -H "Authorization: Bearer $API_KEY" "http://127.0.0.1:$SERVICE_PORT/v1/users/1050/entitlements" \
    >"$OUT/sample-1050.json" || { echo "the entitlements route failed for user 1050" >&2; exit 1; }

# read_counts: the measured instance's entitlement reads answered so far and those of them that joined a batch
# already on its way to PostgreSQL, on one line.
read_counts() {
    curl -fsS "http://127.0.0.1:$SERVICE_PORT/metrics" | awk '
        /^http_requests_total\{route="\/v1\/users\/\{user_id\}\/entitlements",method="GET",status="200"\}/ { reads += $2 }
        /^entitlement_reads_batched_total / { batched = $2 }
        END { print reads + 0, batched + 0 }'
}

# cpu_snapshot: clock ticks used so far by all CPUs together, the service, and PostgreSQL, on one line.
cpu_snapshot() {
    local all service
    all=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat)
    service=$(awk '{ print $14 + $15 }' "/proc/$SERVICE_PID/stat")
    echo "$all $service $(pg_cpu_ticks "$PGDIR")"
}

# children_cpu FILE: user + system CPU seconds of finished children from the output of bash's `times`, which
# must run in the shell that waited for them (a subshell, as in a pipe or $(...), has no children of its own).
children_cpu() {
    tail -n 1 "$1" | python3 -c 'import re, sys; print(sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", sys.stdin.read())))'
}

# run_wrk SECONDS MODE: wrk against the service (MODE hot: present-time reads; cold: `?at=`), or against the
# reference's /healthz (MODE reference); prints "req/s p99_ms errors client_cpu_seconds".
run_wrk() {
    local cpu
    case "$2" in
    hot) BENCH_USERS=$USERS BENCH_API_KEY=$API_KEY taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNECTIONS" -d"$1s" --latency -s "$HERE/entitlements.lua" "http://127.0.0.1:$SERVICE_PORT" >"$WORK/wrk.out" ;;
    cold) BENCH_AT=$AT BENCH_USERS=$USERS BENCH_API_KEY=$API_KEY taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNECTIONS" -d"$1s" --latency -s "$HERE/entitlements.lua" "http://127.0.0.1:$SERVICE_PORT" >"$WORK/wrk.out" ;;
    reference) taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNECTIONS" -d"$1s" --latency "http://127.0.0.1:$REFERENCE_PORT/healthz" >"$WORK/wrk.out" ;;
    reference-sized) taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNECTIONS" -d"$1s" --latency "http://127.0.0.1:$SIZED_PORT/healthz" >"$WORK/wrk.out" ;;
    esac
    times >"$WORK/times.out"
    cpu=$(children_cpu "$WORK/times.out")
    python3 - "$WORK/wrk.out" "$cpu" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
value, unit = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", text, re.M).groups()
p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
errors += int(non2xx.group(1)) if non2xx else 0
print(f"{rps:.0f} {p99:.3f} {errors} {sys.argv[2]}")
PY
}

# run_pgbench MODE CLIENTS SECONDS [SCRIPT READS]: pgbench -M MODE -c CLIENTS with SCRIPT (queries.sql); prints
# "rate p99_ms failures client_cpu_seconds", the rate in transactions/s times READS (1), the p99 computed from pgbench's
# per-transaction log (one line per script run: one pipeline).
run_pgbench() {
    local logdir cpu
    logdir=$(mktemp -d "$WORK/pgbench.XXXXXX")
    (cd "$logdir" && taskset -c "$CLIENT_CPU" "$PGBENCH" -n -M "$1" -c "$2" -j 1 -T "$3" \
        -D users="$USERS" -f "$HERE/${4:-queries.sql}" -l --log-prefix="$logdir/log" "$DATABASE_URL" \
        >"$WORK/pgbench.out" 2>&1) || { cat "$WORK/pgbench.out" >&2; return 1; }
    times >"$WORK/times.out"
    cpu=$(children_cpu "$WORK/times.out")
    python3 - "$WORK/pgbench.out" "$logdir" "$cpu" "${5:-1}" <<'PY'
import glob, re, sys
text, logdir = open(sys.argv[1]).read(), sys.argv[2]
tps = float(re.search(r"^tps = ([\d.]+)", text, re.M).group(1)) * int(sys.argv[4])
failed = re.search(r"number of failed transactions: (\d+)", text)
latencies = []
for path in glob.glob(f"{logdir}/log*"):
    with open(path) as log:
        for line in log:
            fields = line.split()
            if len(fields) >= 3 and fields[2].isdigit():
                latencies.append(int(fields[2]))
latencies.sort()
p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000.0
print(f"{tps:.0f} {p99:.3f} {int(failed.group(1)) if failed else 0} {sys.argv[3]}")
PY
    rm -rf "$logdir"
}

# run_staleness: STALE_SAMPLES writes on the first instance read on the second; prints "p50_ms p99_ms max_ms samples".
run_staleness() {
    taskset -c "$CLIENT_CPU" python3 "$HERE/staleness.py" "$SERVICE_PORT" "$OTHER_PORT" "$ADMIN_KEY" "$API_KEY" "$1" >"$WORK/staleness.out"
    cat "$WORK/staleness.out"
}

# run NAME SECONDS: one run of hot, reference, cold, pgbench-MODE-cCLIENTS or pgbatch-cCLIENTS.
run() {
    local mode clients
    case "$1" in
    pgbatch-c*)
        run_pgbench prepared "${1#pgbatch-c}" "$2" queries-batched.sql "$PGBATCH_READS" ;;
    pgbench-*)
        mode=${1#pgbench-} clients=${1##*-c}
        run_pgbench "${mode%-c*}" "$clients" "$2" ;;
    *) run_wrk "$2" "$1" ;;
    esac
}

NAMES=(hot reference reference-sized cold)
for mode in "${MODES[@]}"; do
    for clients in "${PGBENCH_COUNTS[@]}"; do NAMES+=("pgbench-$mode-c$clients"); done
done
for clients in "${PGBATCH_COUNTS[@]}"; do NAMES+=("pgbatch-c$clients"); done

echo "warming up (${WARMUP}s each)" >&2
for name in "${NAMES[@]}"; do run "$name" "$WARMUP" >/dev/null; done
run_staleness 20 >/dev/null

cat <<EOF
entitlements benchmark: $USERS users, $CONNECTIONS connections, ${DURATION}s per run, $ROUNDS rounds (${NAMES[*]} in turn)
  hot:       wrk -t1 -c$CONNECTIONS → entitlement-service, answers from its cache (ENTITLEMENT_CACHE_SIZE=$CACHE_SIZE)
  reference: wrk -t1 -c$CONNECTIONS → bench/http/reference.c, GET /healthz, on the service's CPU
  reference-sized: the same, its body padded to $ANSWER_BYTES bytes (the mean length of the service's answers)
  cold:      wrk -t1 -c$CONNECTIONS → entitlement-service ?at=$AT (read pool $READ_POOL_SIZE) → PostgreSQL
  staleness: $STALE_SAMPLES writes per round on one instance, polled on a second instance until visible
  pgbench:   pgbench -M {${MODES[*]}} -c{${PGBENCH_COUNTS[*]}} -j1, the same 4 statements in one pipeline per transaction
  pgbatch:   pgbench -M prepared -c{${PGBATCH_COUNTS[*]}} -j1, the service's batched statements for $PGBATCH_READS users per
             transaction (queries-batched.sql), counted in reads
  pinning:   client (wrk or pgbench) on CPU $CLIENT_CPU, service on CPU $SERVICE_CPU, PostgreSQL on CPUs $PG_CPUS,
             the same for every run (during pgbench runs the service idles: its CPU is PostgreSQL's alone)
  PostgreSQL $("$PSQL" "$DATABASE_URL" -XAtc 'SHOW server_version'), fsync=off, throwaway cluster
  machine:   $(nproc) CPUs, load average before the runs $(cut -d' ' -f1-3 /proc/loadavg)
  memory:    before each round, ns per dependent read over 1, 4, 16 and 64 MB at random on CPU $SERVICE_CPU
             (memory-latency.c; the hot runs read about 15 MB of held answers at random)
CPU columns: cores used during the run x 100 by the service, PostgreSQL, the client, and everything else
EOF
RESULTS="$OUT/results.txt"
: >"$RESULTS"
: >"$OUT/staleness.txt"
: >"$OUT/memory.txt"
: >"$OUT/batches.txt"
TICKS=$(getconf CLK_TCK)
printf "%-5s %-21s %9s %9s %6s %7s %8s %7s %7s\n" round run "req|tx/s" "p99 ms" errors service postgres client other
for round in $(seq 1 "$ROUNDS"); do
    read -r -a latency < <(taskset -c "$SERVICE_CPU" "$WORK/memory-latency" 1 4 16 64)
    printf "%-5s %-21s %s ns at 1, 4, 16, 64 MB\n" "$round" memory "${latency[*]}"
    echo "${latency[*]}" >>"$OUT/memory.txt"
    for name in "${NAMES[@]}"; do
        [ "$name" = cold ] && read -r reads0 batched0 < <(read_counts)
        read -r all0 service0 pg0 < <(cpu_snapshot)
        start=$(date +%s.%N)
        read -r rate p99 errors client < <(run "$name" "$DURATION")
        cp "$WORK/$(case "$name" in pgb*) echo pgbench ;; *) echo wrk ;; esac).out" "$OUT/round$round-$name.txt"
        end=$(date +%s.%N)
        read -r all1 service1 pg1 < <(cpu_snapshot)
        read -r service_pct pg_pct client_pct other_pct < <(python3 - <<PY
t, elapsed = $TICKS, $end - $start
service, pg, client = ($service1 - $service0) / t, ($pg1 - $pg0) / t, $client
other = max(0.0, ($all1 - $all0) / t - service - pg - client)
print(" ".join(f"{100 * x / elapsed:.0f}" for x in (service, pg, client, other)))
PY
)
        printf "%-5s %-21s %9s %9s %6s %6s%% %7s%% %6s%% %6s%%\n" "$round" "$name" "$rate" "$p99" "$errors" \
            "$service_pct" "$pg_pct" "$client_pct" "$other_pct"
        echo "$name $rate $p99 $errors $service_pct $pg_pct $client_pct $other_pct" >>"$RESULTS"
        if [ "$name" = cold ]; then
            read -r reads1 batched1 < <(read_counts)
            batches=$((reads1 - reads0 - (batched1 - batched0)))
            printf "%-5s %-21s %s reads per batch of statements sent to PostgreSQL\n" "$round" "cold batches" \
                "$(python3 -c "print(f'{($reads1 - $reads0) / max(1, $batches):.1f}')")"
            echo "$(( reads1 - reads0 )) $batches" >>"$OUT/batches.txt"
        fi
    done
    read -r p50 p99 worst samples < <(run_staleness "$STALE_SAMPLES")
    printf "%-5s %-21s p50 %s ms, p99 %s ms, max %s ms over %s writes\n" "$round" staleness "$p50" "$p99" "$worst" "$samples"
    echo "$p50 $p99 $worst $samples" >>"$OUT/staleness.txt"
done

python3 - "$RESULTS" "$OUT/staleness.txt" "$OUT/memory.txt" "$OUT/batches.txt" "${NAMES[@]}" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
stale = [[float(x) for x in line.split()] for line in open(sys.argv[2])]
memory = [[float(x) for x in line.split()] for line in open(sys.argv[3])]
batches = [[int(x) for x in line.split()] for line in open(sys.argv[4])]
names = sys.argv[5:]
def median(name, column):
    return statistics.median(float(row[column]) for row in rows if row[0] == name)
print("medians:")
for name in names:
    rate = median(name, 1)
    cpu = ", ".join(f"{label} {median(name, column) / 100 / rate * 1e6:.0f}"
                    for label, column in (("service", 4), ("postgres", 5), ("client", 6)))
    print(f"  {name:21} {rate:7.0f}/s  p99 {median(name, 2):8.3f} ms  CPU us per request: {cpu}; "
          f"other work on the machine {median(name, 7):.0f}%")
def verdict(met):
    return "met" if met else "NOT met"
hot = median("hot", 1) / median("reference", 1)
print(f"hot:       ratio hot req/s / reference req/s: {hot:.3f} (goal >= 0.7: {verdict(hot >= 0.7)})")
print(f"hot:       ratio hot req/s / reference-sized req/s: {median('hot', 1) / median('reference-sized', 1):.3f} "
      "(the C server answering as many bytes; for information)")
pgbench = [name for name in names if name.startswith("pgbench-")]
headline = [name for name in pgbench if name.rsplit("-c", 1)[0] == pgbench[0].rsplit("-c", 1)[0]]
best = max(headline, key=lambda name: median(name, 1))
for name in pgbench:
    ratio = median("cold", 1) / median(name, 1)
    goal = f" (goal >= 0.9 against pgbench's best, {best}: {verdict(ratio >= 0.9)})" if name == best else ""
    print(f"cold:      ratio cold req/s / {name} tx/s: {ratio:.3f}{goal}")
for name in (name for name in names if name.startswith("pgbatch-")):
    print(f"cold:      ratio cold reads/s / {name} reads/s: {median('cold', 1) / median(name, 1):.3f} "
          "(the batched statements the service sends; for information)")
service_cpu, pg_cpu = (median("cold", column) / 100 / median("cold", 1) * 1e6 for column in (4, 5))
print(f"cold CPU:  per read, service {service_cpu:.0f} us, PostgreSQL {pg_cpu:.0f} us: ratio {service_cpu / pg_cpu:.2f} "
      f"(goal <= 0.5: {verdict(service_cpu / pg_cpu <= 0.5)})")
reference_pg = median(best, 5) / 100 / median(best, 1) * 1e6
print(f"cold CPU:  per read, service {service_cpu:.0f} us, PostgreSQL {reference_pg:.0f} us for the read as {best} sends it "
      f"(one user's four statements): ratio {service_cpu / reference_pg:.2f} (for information: the service sends PostgreSQL less work)")
p50, p99, worst = (statistics.median(row[i] for row in stale) for i in range(3))
print(f"staleness: median over rounds of p50 {p50:.1f} ms, p99 {p99:.1f} ms (goal < 1000: {verdict(p99 < 1000)}), "
      f"max {max(row[2] for row in stale):.1f} ms; {int(sum(row[3] for row in stale))} writes")
print("memory:    median over rounds of ns per dependent read at 1, 4, 16 and 64 MB: "
      + ", ".join(f"{statistics.median(row[i] for row in memory):.1f}" for i in range(4))
      + " (for information: how fast this machine's caches and memory answered as the rounds began)")
print("batches:   median over rounds of cold reads per batch of statements: "
      f"{statistics.median(reads / max(1, count) for reads, count in batches):.1f} (for information)")
errors = sum(int(row[3]) for row in rows)
if errors:
    print(f"warning: {errors} socket errors, non-2xx responses or failed transactions across the runs")
PY
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cache of the measured instance: $(curl -fsS "http://127.0.0.1:$SERVICE_PORT/metrics" | grep -E '^entitlement_cache_(hits|misses)_total' | tr '\n' ' ')"

if [ -n "${PROFILE:-}" ]; then
    MODE=cold
    [ "$PROFILE" = hot ] && MODE=hot
    echo "profiling: perf record attached to the warm service for one ${DURATION}s $MODE wrk run" >&2
    perf record -q -e cpu-clock -F 999 -g -p "$SERVICE_PID" -o "$OUT/perf.data" 2>/dev/null &
    PERF_PID=$!
    run_wrk "$DURATION" "$MODE" >/dev/null
    kill -INT "$PERF_PID"
    wait "$PERF_PID" 2>/dev/null || true
    perf script -i "$OUT/perf.data" -F comm,tid,ip,sym 2>/dev/null | python3 "$HERE/perf_categories.py"
fi
