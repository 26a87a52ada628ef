#!/usr/bin/env bash
# slowhttptest's three slow-client attacks, at once, against a running service.
#
# Usage: scripts/slow-clients.sh BASE_URL APP_KEY
#
# Slow headers (slowloris: heads trickled forever), slow bodies (a POST's body trickled at a few bytes a second)
# and slow reads (pipelined answers read 8 bytes at a time through a tiny window), SLOW_CLIENTS connections each
# (default 300). Meanwhile a well-behaved client reads /healthz and a user's entitlements every half second: each
# must be answered 200 within 2 s. Then the service must have closed every attacking connection itself, each
# kind by its own limit: heads by the header timeout (10 s), bodies by the minimum body rate (240 bytes/s after
# 5 s), slow readers by the idle timeout (60 s); its `http_connections_open` gauge shows it. Prints one summary
# line; any failure fails the run.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ $# -eq 2 ] || { echo "usage: $0 BASE_URL APP_KEY" >&2; exit 2; }
BASE=$1 APP_KEY=$2 COUNT=${SLOW_CLIENTS:-300}
ensure_packages slowhttptest curl

WORK=$(mktemp -d)
ATTACKERS=()
trap 'kill "${ATTACKERS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT
# The key goes to curl in a file of headers, never on a command line.
printf 'Authorization: Bearer %s\n' "$APP_KEY" >"$WORK/headers"

open_connections() {
    curl -sS --max-time 5 "$BASE/metrics" | awk '$1 == "http_connections_open" { print $2 + 0 }'
}

before=$(open_connections)
# -H: heads, a header line every 3 s; -B: a body declared 8 KiB, a few bytes every 2 s; -X: 3 pipelined
# /openapi.json answers per connection, read 8 bytes every 5 s through a 1-2 byte window.
slowhttptest -H -c "$COUNT" -r "$COUNT" -i 3 -l 40 -u "$BASE/healthz" -p 3 >"$WORK/headers.out" 2>&1 &
ATTACKERS+=($!)
slowhttptest -B -c "$COUNT" -r "$COUNT" -i 2 -s 8192 -t POST -l 40 -u "$BASE/v1/receipts" -p 3 >"$WORK/bodies.out" 2>&1 &
ATTACKERS+=($!)
slowhttptest -X -c "$COUNT" -r "$COUNT" -k 3 -n 5 -z 8 -w 1 -y 2 -l 90 -u "$BASE/openapi.json" -p 3 >"$WORK/reads.out" 2>&1 &
ATTACKERS+=($!)

failures=0 probes=0 peak=0
deadline=$((SECONDS + 80))
while [ "$SECONDS" -lt "$deadline" ]; do
    for target in /healthz /v1/users/slow-clients-probe/entitlements; do
        probes=$((probes + 1))
        code=$(curl -sS --max-time 2 -o /dev/null -w '%{http_code}' -H @"$WORK/headers" "$BASE$target" 2>/dev/null) || code="no answer"
        [ "$code" = 200 ] || { failures=$((failures + 1)); echo "slow-clients: $target answered $code during the attacks" >&2; }
    done
    open=$(open_connections)
    [ "${open:-0}" -gt "$peak" ] && peak=$open
    # Done once the attackers have been let in and every one of their connections is closed again.
    [ "$peak" -ge "$COUNT" ] && [ "${open:-$peak}" -le "$((before + 1))" ] && break
    sleep 0.5
done
open=$(open_connections)

status=0
if [ "$failures" -gt 0 ]; then
    status=1
fi
if [ "$peak" -lt "$COUNT" ]; then
    echo "slow-clients: the attackers never held $COUNT connections at once (peak $peak): the check checked nothing" >&2
    status=1
fi
if [ "${open:-999999}" -gt "$((before + 1))" ]; then
    echo "slow-clients: $open connections still open 80 s after the attacks began (before: $before)" >&2
    status=1
fi
# The slowloris and slow-body clients write, so they see the service close them before their time is up.
for kind in headers bodies; do
    if ! grep -aq "No open connections left" "$WORK/$kind.out"; then
        echo "slow-clients: slowhttptest's slow $kind connections outlived its 40 s:" >&2
        sed 's/\x1b\[[0-9;]*[a-zA-Z]//g' "$WORK/$kind.out" | tail -n 12 >&2
        status=1
    fi
done
echo "slow-clients: 3 x $COUNT slow connections (peak $peak open), $open open after $SECONDS s (before: $before);" \
     "$probes probes meanwhile, $failures not answered 200 within 2 s"
exit "$status"
