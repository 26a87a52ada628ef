"""Where the service's CPU time went, from `perf script -F comm,tid,ip,sym` on standard input.

Used by run.sh with PROFILE=cold or PROFILE=hot. Each sample goes to the first category whose test matches its call stack
(symbols demangled with `swift demangle`), so the shares add up to 100%. The tests look for our own functions
and the few library functions that matter on the entitlements route; what none of them claims is "other",
and the heaviest frames among those are listed so new hot spots show up.
"""
import collections
import subprocess
import sys


def read_samples(lines):
    samples, current = [], None
    for line in lines:
        if not line.strip():
            if current:
                samples.append(current)
            current = None
        elif not line[0].isspace():
            fields = line.split()
            current = {"thread": fields[1] if len(fields) > 1 else fields[0], "stack": []}
        elif current is not None:
            parts = line.split(None, 1)
            current["stack"].append(parts[1].strip() if len(parts) > 1 else "?")
    if current:
        samples.append(current)
    return samples


def demangled(samples):
    symbols = sorted({frame for sample in samples for frame in sample["stack"]})
    try:
        text = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(symbols),
                              capture_output=True, text=True, check=True).stdout
        names = dict(zip(symbols, text.split("\n")))
    except (OSError, subprocess.CalledProcessError):
        names = {}
    for sample in samples:
        sample["stack"] = [names.get(frame, frame) for frame in sample["stack"]]


LOOP_THREAD = None


def has(stack, *needles):
    return any(needle in frame for frame in stack for needle in needles)


CATEGORIES = [
    ("threads other than the loop (Dispatch workers resuming continuations)",
     lambda thread, stack: thread != LOOP_THREAD),
    ("continuation resume: task enqueued on the global executor, then hops back to the loop",
     lambda thread, stack: has(stack, "swift_task_enqueueGlobal", "flagAsAndEnqueueOnExecutor")),
    ("JSON encoding of the response (JSONEncoder, or by hand: EntitlementsDocument.jsonBytes)",
     lambda thread, stack: has(stack, "JSONEncoder", "jsonBytes", "JSONBytes")),
    ("EntitlementEvaluator",
     lambda thread, stack: has(stack, "EntitlementEvaluator", "SubscriptionRules")),
    ("rows to model values (TransactionStore.owned, PostgresRow, timestamps)",
     lambda thread, stack: has(stack, "TransactionStore.owned", "PostgresRow", "RFC3339", "RenewalInfo", "Grant.init")),
    ("libpq results copied into PostgresResult",
     lambda thread, stack: has(stack, "PostgresLibpq.result", "PostgresColumnIndex")),
    ("libpq send and receive",
     lambda thread, stack: any(frame.startswith("PQ") for frame in stack) or has(stack, "sendQueryParams", "__send", "__libc_recv")),
    ("HTTP request: parse, route, authorize",
     lambda thread, stack: has(stack, "http_parser", "HTTPRequestParser", "Router", "APIKeys", "InputRules")),
    ("HTTP response: serialize and write",
     lambda thread, stack: has(stack, "HTTPResponseSerializer", "HTTPConnection.write", "__GI___libc_write")),
    ("waiting in epoll_wait",
     lambda thread, stack: has(stack, "epoll_wait")),
    ("reference counting and malloc, callers unknown",
     lambda thread, stack: bool(stack) and any(name in stack[0] for name in (
         "swift_retain", "swift_release", "malloc", "free", "swift_alloc", "swift_dealloc", "_int_", "swift_bridgeObject",
         "doDecrementSlow", "swift_arrayDestroy"))),
]


def main():
    samples = read_samples(sys.stdin)
    if not samples:
        print("perf recorded no samples")
        return
    demangled(samples)
    # The loop thread is the busiest one.
    global LOOP_THREAD
    LOOP_THREAD = collections.Counter(sample["thread"] for sample in samples).most_common(1)[0][0]
    totals = collections.Counter()
    unclaimed = collections.Counter()
    for sample in samples:
        for name, test in CATEGORIES:
            if test(sample["thread"], sample["stack"]):
                totals[name] += 1
                break
        else:
            totals["other"] += 1
            for frame in set(sample["stack"]):
                unclaimed[frame[:100]] += 1
    count = len(samples)
    print(f"service CPU profile: {count} samples")
    for name, _ in CATEGORIES + [("other", None)]:
        print(f"  {100 * totals[name] / count:5.1f}%  {name}")
    print("  heaviest frames in 'other' (inclusive):")
    for frame, hits in unclaimed.most_common(12):
        print(f"    {100 * hits / count:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
