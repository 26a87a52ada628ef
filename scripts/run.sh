#!/usr/bin/env bash
# The run command: installs what is missing, builds a release binary, starts a project-local PostgreSQL in
# .pgdata/ when DATABASE_URL is unset, then `entitlement-service serve` (which applies pending migrations).
# `scripts/run.sh --build-only` stops after the build.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
cd "$ROOT"
swift build -c release --product entitlement-service
[ "${1:-}" = --build-only ] && exit 0

if [ -z "${DATABASE_URL:-}" ]; then
    pg_start "$(local_pgdata)" "${LOCAL_PG_PORT:-54329}"
    export DATABASE_URL="$PG_DATABASE_URL"
    echo "local database: $DATABASE_URL (data in $(local_pgdata); stop it with scripts/stop-db.sh)" >&2
fi
exec "$ROOT/.build/release/entitlement-service" serve "$@"
