#!/usr/bin/env bash
# Builds the libFuzzer target over the request-parsing path and runs it for a bounded time.
#
#   bench/fuzz/run.sh [seconds]      (default 60)
#
# The target compiles the service's HTTP parser sources together with bench/fuzz/FuzzRequestParsing.swift,
# with libFuzzer and AddressSanitizer, against the system http-parser (CUV module map). It starts from the
# committed seeds in bench/fuzz/corpus and grows a working corpus in bench/out/fuzz/corpus (git-ignored);
# crashes and other findings land in bench/out/fuzz/. Prints the executions run and the findings. Not
# part of CI. FUZZ_JOBS (default 1) runs that many fuzzing processes in parallel.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages
cd "$ROOT"

SECONDS_TO_RUN="${1:-60}"
OUT="$ROOT/bench/out/fuzz"
mkdir -p "$OUT/corpus" "$OUT/findings"
HTTP=Sources/EntitlementService/HTTP
SOURCES=(
    bench/fuzz/FuzzRequestParsing.swift
    "$HTTP/HTTPRequestParser.swift" "$HTTP/HTTPRequestHead.swift" "$HTTP/HTTPRequest.swift" "$HTTP/HTTPHeaders.swift"
    "$HTTP/RequestID.swift" "$HTTP/PercentDecoding.swift" "$HTTP/ProblemError.swift" "$HTTP/JSONValue.swift"
    "$HTTP/HTTPResponse.swift" Sources/EntitlementService/Runtime/Log.swift
)
echo "building the fuzz target" >&2
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g \
    -module-name FuzzHTTP -I Sources/CUV "${SOURCES[@]}" -o "$OUT/fuzz-request-parsing" 2>&1 |
    { grep -v "Cannot export local symbol" || true; } >&2

LOG="$OUT/fuzz.log"
status=0
(cd "$OUT/findings" && SWIFT_BACKTRACE=enable=no "$OUT/fuzz-request-parsing" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -jobs="${FUZZ_JOBS:-1}" -workers="${FUZZ_JOBS:-1}" \
    "$OUT/corpus" "$ROOT/bench/fuzz/corpus") >"$LOG" 2>&1 || status=$?
[ "${FUZZ_JOBS:-1}" -gt 1 ] && cat "$OUT"/findings/fuzz-*.log >>"$LOG" 2>/dev/null || true

executions=$(awk '/stat::number_of_executed_units:/ { total += $2 } END { print total + 0 }' "$LOG")
findings=$(find "$OUT/findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
echo "fuzz: $executions executions in ${SECONDS_TO_RUN} s, corpus $(find "$OUT/corpus" -type f | wc -l) inputs, $findings findings (exit $status)"
if [ "$findings" -gt 0 ] || [ "$status" -ne 0 ]; then
    grep -m 5 -E 'ERROR|==[0-9]+==|Fatal error|deadly signal' "$LOG" >&2 || true
    find "$OUT/findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) >&2
    exit 1
fi
