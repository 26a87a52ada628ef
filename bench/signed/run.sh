#!/usr/bin/env bash
# bench/signed/run.sh: App Store-signed transactions verified per second on one core by SignedDataVerifier,
# with its verified-chain cache (a known leaf: the steady state) and without it (every payload validates its
# chain), against the reference of the same run: swift-crypto's bare ES256 verification of the same
# signatures (key, signature and signed bytes prepared beforehand). The three alternate in 50 ms slices,
# A B C A B C, for ROUNDS rounds of SECONDS each (defaults 5 and 2); the driver is pinned to one core.
#
# The payloads are the real App Store transactions of the shared fixtures (FIXTURES, default
# <repo>/../shared/fixtures/apple), verified at their own signedDate. Prints one line per round and the
# medians; the figure is cached_ratio = cached / bare (goal: at least 0.8). Builds release unless SKIP_BUILD=1.
#
# Usage: bench/signed/run.sh            (env: ROUNDS, SECONDS_PER_ROUND, FIXTURES, CORE, SKIP_BUILD=1)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
ROUNDS="${ROUNDS:-5}"
SECONDS_PER_ROUND="${SECONDS_PER_ROUND:-2}"
FIXTURES="${FIXTURES:-$REPO/../shared/fixtures/apple}"
CORE="${CORE:-0}"

log() { printf '%s\n' "bench: $*" >&2; }

[ -f "$FIXTURES/jws_transaction_autorenew_intro_offer_sandbox_gopay.jws" ] || { log "fixtures not found in $FIXTURES"; exit 2; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building release"
    (cd "$REPO" && swift build -c release --product signed-bench >/dev/null)
fi
log "pinned to core $CORE (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
exec taskset -c "$CORE" "$REPO/.build/release/signed-bench" --fixtures "$FIXTURES" --rounds "$ROUNDS" --seconds "$SECONDS_PER_ROUND"
