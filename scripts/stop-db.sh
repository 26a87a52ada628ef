#!/usr/bin/env bash
# Stops the project-local PostgreSQL that scripts/run.sh started.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pg_stop "$(local_pgdata)"
