#!/usr/bin/env bash
# The test command: installs what is missing, starts a throwaway PostgreSQL on a free port, runs `swift test`.
# Extra arguments go to `swift test` (e.g. `scripts/test.sh --filter HTTP`).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
cd "$ROOT"

PGDIR=$(mktemp -d /tmp/entitlement-test-pg.XXXXXX)
cleanup() { pg_stop "$PGDIR"; rm -rf "$PGDIR"; }
trap cleanup EXIT
PG_FSYNC=off pg_start "$PGDIR" "$(free_port)"
export TEST_DATABASE_URL="$PG_DATABASE_URL"
export TEST_PG_DATA="$PGDIR" TEST_PG_BIN="$(pg_bindir)"
echo "test database: $TEST_DATABASE_URL" >&2

swift build --build-tests
# Serially: several suites measure latency and timeouts, which two cores shared by parallel suites would skew.
swift test --skip-build --no-parallel "$@"
