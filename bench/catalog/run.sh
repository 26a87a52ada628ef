#!/usr/bin/env bash
# A catalog change's events: how fast the service writes the `catalog_change` events of a product's owners after an
# admin changes what the product unlocks, against a reference measured in the same run: PostgreSQL alone doing the
# same reads and writes for the same owners, set-based, in one transaction.
#
# A round: A = `PUT /v1/admin/products/com.example.lifetime`, alternately unlocking ["pro", "extras"] and ["pro"],
# so that each round changes every owner's entitlements; the change marks the OWNERS owners' heads, and the service's
# expiration worker (one instance, on core CORE) evaluates them in batches of 100 and writes their events. Its rate:
# OWNERS over the time from the PUT to the last mark cleared (checked: OWNERS events written). B = the reference, on
# the database alone: the four snapshot statements of UserSnapshotStore for all owners at once, then an INSERT of
# OWNERS events (each the size of a real one) and an UPDATE of their heads, rolled back. `ratio` = A's rate ÷ B's:
# the share of the database's own speed at this work that the worker reaches; what is missing is the batching (100
# users a transaction, four round trips each), the evaluation and the JSON, and the claims. A B A B for ROUNDS
# rounds. Also printed: the PUT's own time (what writers wait for).
#
# Environment (all optional): ROUNDS=4 OWNERS=50000 CORE=0 SERVICE_BIN (a prebuilt release binary; else built).
# Output: bench/out/catalog/.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"
ensure_packages curl python3

ROUNDS=${ROUNDS:-4}
OWNERS=${OWNERS:-50000}
CORE=${CORE:-0}
OUT="$ROOT/bench/out/catalog"
mkdir -p "$OUT"
if [ -z "${SERVICE_BIN:-}" ]; then
    echo "building entitlement-service (release)" >&2
    (cd "$ROOT" && swift build -c release --product entitlement-service >&2)
fi
SERVICE_BIN=${SERVICE_BIN:-$ROOT/.build/release/entitlement-service}

bench_workspace catalog-bench
echo "starting a throwaway PostgreSQL" >&2
PGDIR=$(mktemp -d /tmp/catalog-bench-pg.XXXXXX)
pg_start "$PGDIR" "$(free_port)"
DATABASE_URL="$PG_DATABASE_URL"
PSQL="$(pg_bindir)/psql"
sql() { "$PSQL" "$DATABASE_URL" -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }
DATABASE_URL="$DATABASE_URL" MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn "$SERVICE_BIN" migrate >&2

# OWNERS users, each owning one lifetime purchase, with a written state (so each change is an event).
sql "BEGIN;
     INSERT INTO products (product_id, type, entitlements) VALUES ('com.example.lifetime', 'non_consumable', ARRAY['pro']);
     INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date)
     SELECT (7000000000 + n)::text, (7000000000 + n)::text, 'com.example.lifetime', 'Production', now() - interval '10 days'
       FROM generate_series(1, $OWNERS) AS n;
     INSERT INTO purchase_owners (original_transaction_id, user_id)
     SELECT (7000000000 + n)::text, 'catalog-bench-' || n FROM generate_series(1, $OWNERS) AS n;
     INSERT INTO user_event_heads (user_id, last_sequence, state)
     SELECT 'catalog-bench-' || n, 0, '{\"entitlements\": {}, \"consumables\": {}}' FROM generate_series(1, $OWNERS) AS n;
     COMMIT; ANALYZE;" >/dev/null

ADMIN_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
printf 'Authorization: Bearer %s\nContent-Type: application/json\n' "$ADMIN_KEY" >"$WORK/headers"
PORT=$(free_port)
: >"$OUT/service.log"
env DATABASE_URL="$DATABASE_URL" PORT="$PORT" LISTEN_ADDR=127.0.0.1 ADMIN_API_KEYS="$ADMIN_KEY" \
    MIGRATIONS_DIR="$ROOT/migrations" LOG_LEVEL=warn taskset -c "$CORE" "$SERVICE_BIN" serve >>"$OUT/service.log" 2>&1 &
PIDS+=($!)
deadline=$((SECONDS + 60))
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { echo "the service did not come up (see $OUT/service.log)" >&2; exit 1; }
    sleep 0.1
done

# B's statements: the snapshot reads of every owner, then the writes, rolled back. The payload is a real event's.
reference() {
    local payload
    payload=$(sql "SELECT payload FROM webhook_events ORDER BY position DESC LIMIT 1")
    cat >"$WORK/reference.sql" <<SQL
BEGIN;
CREATE TEMP TABLE owners ON COMMIT DROP AS SELECT user_id FROM user_event_heads WHERE user_id LIKE 'catalog-bench-%';
SELECT count(*) FROM (SELECT o.user_id, t.* FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
                       WHERE o.user_id = ANY(ARRAY(SELECT user_id FROM owners))) AS r;
SELECT count(*) FROM (SELECT o.user_id, s.* FROM purchase_owners o JOIN subscriptions s USING (original_transaction_id)
                       WHERE o.user_id = ANY(ARRAY(SELECT user_id FROM owners))) AS r;
SELECT count(*) FROM grants WHERE user_id = ANY(ARRAY(SELECT user_id FROM owners));
SELECT count(*) FROM consumable_balances WHERE user_id = ANY(ARRAY(SELECT user_id FROM owners));
INSERT INTO webhook_events (event_id, user_id, sequence, type, created_at, payload, delivery_status)
SELECT gen_random_uuid(), h.user_id, h.last_sequence + 1, 'catalog_change', now(), \$payload\$$payload\$payload\$, 'none'
  FROM user_event_heads h JOIN owners USING (user_id);
UPDATE user_event_heads h SET last_sequence = h.last_sequence + 1, state = h.state, next_change_at = NULL,
       pending_catalog_change = NULL, updated_at = now()
  FROM owners WHERE h.user_id = owners.user_id;
ROLLBACK;
SQL
    local start end
    start=$(date +%s.%N)
    "$PSQL" "$DATABASE_URL" -X -qAt -v ON_ERROR_STOP=1 -f "$WORK/reference.sql" >/dev/null
    end=$(date +%s.%N)
    python3 -c "print(f'{$OWNERS / ($end - $start):.0f}')"
}

echo "round events/s reference/s ratio put_ms (owners $OWNERS; load average: $(cut -d' ' -f1-3 /proc/loadavg))" | tee "$OUT/rounds.txt"
for round in $(seq 0 $((ROUNDS - 1))); do
    if [ $((round % 2)) -eq 0 ]; then unlocks='["pro", "extras"]'; else unlocks='["pro"]'; fi
    events_before=$(sql "SELECT count(*) FROM webhook_events")
    start=$(date +%s.%N)
    put_s=$(curl -sS -o "$WORK/put.json" -w '%{time_total}' -X PUT -H @"$WORK/headers" \
        --data "{\"type\": \"non_consumable\", \"entitlements\": $unlocks}" "http://127.0.0.1:$PORT/v1/admin/products/com.example.lifetime")
    deadline=$((SECONDS + 600))
    until [ "$(sql "SELECT count(*) FROM user_event_heads WHERE pending_catalog_change IS NOT NULL")" = 0 ]; do
        [ $SECONDS -lt $deadline ] || { echo "round $round: marks not cleared in 600 s (see $OUT/service.log)" >&2; exit 1; }
        sleep 0.05
    done
    end=$(date +%s.%N)
    events=$(( $(sql "SELECT count(*) FROM webhook_events") - events_before ))
    [ "$events" = "$OWNERS" ] || { echo "round $round: $events events for $OWNERS owners" >&2; exit 1; }
    rate=$(python3 -c "print(f'{$OWNERS / ($end - $start):.0f}')")
    ref=$(reference)
    python3 -c "import sys; a, b, p = map(float, sys.argv[2:]); print(f'{sys.argv[1]} {a:.0f} {b:.0f} {a / b:.3f} {p * 1000:.0f}')" \
        "$round" "$rate" "$ref" "$put_s" | tee -a "$OUT/rounds.txt"
done
python3 - "$OUT/rounds.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]).read().splitlines()[1:]]
column = lambda i: statistics.median(float(r[i]) for r in rows)
print(f"median events/s {column(1):.0f}  reference/s {column(2):.0f}  ratio {column(3):.3f}  PUT {column(4):.0f} ms")
PY
