# Shared set-up for scripts/run.sh, scripts/test.sh and the benchmarks. Source it; do not run it.
# Installs what the service needs on a fresh Debian machine and manages project-local PostgreSQL clusters.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGES=(libuv1-dev libpq-dev libcurl4-openssl-dev libhttp-parser-dev libjemalloc-dev postgresql postgresql-contrib pkg-config ca-certificates)

# Installs the Debian packages the build and the local database need, when any is missing.
ensure_packages() {
    local missing=()
    for p in "${PACKAGES[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Sets PROMTOOL to a promtool: the one on PATH, else the one in .build/promtool/, which is unpacked from
# Debian's prometheus package the first time. Only that binary is taken: installing the package would add a
# dozen web-UI packages and, where systemd runs, start a Prometheus server on port 9090.
ensure_promtool() {
    PROMTOOL=$(command -v promtool || true)
    [ -n "$PROMTOOL" ] && return 0
    PROMTOOL="$ROOT/.build/promtool/promtool"
    [ -x "$PROMTOOL" ] && return 0
    echo "unpacking promtool from Debian's prometheus package into .build/promtool" >&2
    local work sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    work=$(mktemp -d)
    chmod 755 "$work"  # apt's download user writes there
    if ! (cd "$work" && apt-get download -qq prometheus 2>/dev/null); then
        $sudo apt-get update -qq
        (cd "$work" && apt-get download -qq prometheus)
    fi
    dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
    mkdir -p "$(dirname "$PROMTOOL")"
    mv "$work/usr/bin/promtool" "$PROMTOOL"
    rm -rf "$work"
}

# The newest PostgreSQL server binaries Debian installed.
pg_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] || { echo "PostgreSQL server binaries not found" >&2; return 1; }
    echo "$dir"
}

# Runs a command as the cluster's owner: `postgres` when we are root (PostgreSQL refuses root), else ourselves.
as_pg_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A TCP port nothing listens on right now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# pg_start DIR PORT: initialises DIR when empty, starts a server on 127.0.0.1:PORT with its socket in DIR,
# and creates the `entitlements` database. Prints nothing; sets PG_DATABASE_URL.
pg_start() {
    local dir="$1" port="$2" bin
    bin=$(pg_bindir)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir" && chmod 700 "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
        as_pg_owner "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    fi
    as_pg_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=${PG_FSYNC:-on}" start >/dev/null
    as_pg_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAtc \
        "SELECT 1 FROM pg_database WHERE datname='entitlements'" | grep -q 1 ||
        as_pg_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres entitlements
    PG_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/entitlements"
}

# pg_stop DIR: fast shutdown of the cluster in DIR, if it runs.
pg_stop() {
    local bin
    bin=$(pg_bindir)
    [ -f "$1/postmaster.pid" ] && as_pg_owner "$bin/pg_ctl" -D "$1" -m fast -w stop >/dev/null 2>&1 || true
}

# Where the run command keeps its database: .pgdata/ in the checkout (git-ignored), or, when the cluster
# owner cannot reach the checkout (a home directory closed to `postgres`), a folder under /var/tmp.
local_pgdata() {
    if [ "$(id -u)" -ne 0 ] || runuser -u postgres -- test -x "$ROOT" 2>/dev/null; then
        echo "$ROOT/.pgdata"
    else
        echo "/var/tmp/entitlement-service-pgdata"
    fi
}

# bench_service_bin: SERVICE_BIN, the entitlement-service a benchmark measures: as given, else this checkout's
# release build (built now).
bench_service_bin() {
    if [ -z "${SERVICE_BIN:-}" ]; then
        echo "building entitlement-service (release)" >&2
        (cd "$ROOT" && swift build -c release --product entitlement-service >&2)
        SERVICE_BIN="$ROOT/.build/release/entitlement-service"
    fi
}

# pg_cpu_ticks DIR: clock ticks of CPU used so far by the PostgreSQL cluster in DIR: the postmaster, its live
# children and the children it has reaped.
pg_cpu_ticks() {
    local postmaster pid ticks
    postmaster=$(head -n 1 "$1/postmaster.pid")
    ticks=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat")
    for pid in $(ps -o pid= --ppid "$postmaster"); do
        ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$ticks"
}

# wait_healthy PORT PID [WHAT]: waits until /healthz answers on 127.0.0.1:PORT; exits the script with a message
# naming WHAT (default: the server) when PID exits first or after 60 s.
wait_healthy() {
    local deadline=$((SECONDS + 60))
    until curl -fsS -o /dev/null "http://127.0.0.1:$1/healthz" 2>/dev/null; do
        if ! kill -0 "$2" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            echo "${3:-the server} did not come up on port $1 (rerun with BENCH_LOGS=1 for its output)" >&2
            exit 1
        fi
        sleep 0.1
    done
}

# bench_workspace NAME: for a benchmark script, WORK (a new directory under /tmp), PIDS (the background processes it
# starts) and PGDIR (its throwaway cluster, once started); at exit the processes are stopped, the cluster stopped and
# removed, and WORK removed.
bench_workspace() {
    PIDS=()
    PGDIR=""
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$PGDIR" ]; then pg_stop "$PGDIR"; rm -rf "$PGDIR"; fi
    rm -rf "$WORK"
}
