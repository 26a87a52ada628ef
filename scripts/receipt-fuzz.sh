#!/usr/bin/env bash
# zzuf's mutations of the shared Apple receipts against a running service's local receipt reader.
#
# Usage: scripts/receipt-fuzz.sh BASE_URL ADMIN_KEY [MUTATIONS]
#
# For every receipt of the shared samples (receipt_*.b64: PKCS#7 app receipts, Xcode's indefinite-length ones,
# iOS 6 transaction receipts), MUTATIONS copies (default 100) made by zzuf (seeds 1..MUTATIONS, 0.002 to 0.05 % of
# the bits flipped) are each posted to POST /v1/admin/receipts/inspect. Every answer must be 200 (the copy still
# reads) or a 422 problem naming `receipt_data` (it does not); a 5xx, a dropped connection or anything else fails
# the run, as does /readyz not answering afterwards. Prints one summary line. APPLE_FIXTURES names the samples'
# directory (default <repo>/../shared/fixtures/apple).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 BASE_URL ADMIN_KEY [MUTATIONS]" >&2; exit 2; }
BASE=$1 ADMIN_KEY=$2 MUTATIONS=${3:-100}
FIXTURES=${APPLE_FIXTURES:-$ROOT/../shared/fixtures/apple}
ensure_packages zzuf curl

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The key goes to curl in a file of headers, never on a command line.
printf 'Authorization: Bearer %s\nContent-Type: application/json\n' "$ADMIN_KEY" >"$WORK/headers"

read_ok=0 unreadable=0 failures=0 samples=0
for sample in "$FIXTURES"/receipt_*.b64; do
    samples=$((samples + 1))
    base64 -d <"$sample" >"$WORK/receipt" 2>/dev/null || { echo "receipt-fuzz: $sample is not base64" >&2; exit 1; }
    for seed in $(seq 1 "$MUTATIONS"); do
        zzuf -s "$seed" -r 0.00002:0.0005 <"$WORK/receipt" >"$WORK/mutated"
        printf '{"receipt_data":"%s"}' "$(base64 -w0 <"$WORK/mutated")" >"$WORK/body"
        code=$(curl -sS --max-time 10 -o "$WORK/answer" -w '%{http_code}' -H @"$WORK/headers" \
            --data-binary @"$WORK/body" "$BASE/v1/admin/receipts/inspect" 2>"$WORK/curl.err") || code="curl: $(cat "$WORK/curl.err")"
        case "$code" in
            200) read_ok=$((read_ok + 1)) ;;
            422) if grep -q '"field":"receipt_data"' "$WORK/answer"; then unreadable=$((unreadable + 1)); else
                     failures=$((failures + 1)); echo "receipt-fuzz: $(basename "$sample") seed $seed: 422 without the field: $(head -c 300 "$WORK/answer")" >&2
                 fi ;;
            *) failures=$((failures + 1))
               echo "receipt-fuzz: $(basename "$sample") seed $seed answered $code: $(head -c 300 "$WORK/answer" 2>/dev/null)" >&2 ;;
        esac
    done
done
if ! curl -fsS --max-time 5 -o /dev/null "$BASE/readyz"; then
    echo "receipt-fuzz: the service no longer answers /readyz" >&2
    failures=$((failures + 1))
fi
echo "receipt-fuzz: $((read_ok + unreadable + failures)) zzuf copies of $samples receipts: $unreadable unreadable (422), $read_ok still read (200), $failures failures"
[ "$samples" -gt 0 ] && [ "$failures" -eq 0 ]
