-- 100 000 customers for the console's browser check (scripts/console/run.sh), so that its timings mean
-- something: each user `load-N` owns one expired Production subscription purchase (original transaction
-- 5000000000 + N, bought more than a year before the Revenue page's default window), holds a grant, and has a
-- webhook event, an audit event and an App Store notification; all of it older than anything the check makes.
BEGIN;
INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                    original_purchase_date, expires_date, subscription_group_identifier)
SELECT (5000000000 + n)::text, (5000000000 + n)::text, 'com.example.premium.monthly', 'Production',
       now() - interval '500 days', now() - interval '500 days', now() - interval '470 days', 'group.premium'
  FROM generate_series(1, 100000) AS n;
INSERT INTO purchase_owners (original_transaction_id, user_id, acquired_at)
SELECT (5000000000 + n)::text, 'load-' || n, now() - interval '500 days' FROM generate_series(1, 100000) AS n;
INSERT INTO grants (user_id, entitlement, expires_at, reason, created_by, created_at)
SELECT 'load-' || n, 'premium', now() - interval '400 days', 'seeded', 'admin#1', now() - interval '401 days'
  FROM generate_series(1, 100000) AS n;
INSERT INTO user_event_heads (user_id, last_sequence) SELECT 'load-' || n, 1 FROM generate_series(1, 100000) AS n;
INSERT INTO webhook_events (event_id, user_id, sequence, type, created_at, payload, delivery_status)
SELECT id, 'load-' || n, 1, 'grant', now() - interval '401 days' + n * interval '1 second',
       json_build_object('id', id, 'type', 'grant', 'created_at', to_char((now() - interval '401 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                         'user_id', 'load-' || n, 'sequence', 1, 'entitlements', '{}'::json, 'consumables', '{}'::json)::text,
       'none'
  FROM (SELECT n, gen_random_uuid() AS id FROM generate_series(1, 100000) AS n) AS e;
INSERT INTO audit_events (occurred_at, actor, action, subject, user_id, after)
SELECT now() - interval '401 days' + n * interval '1 second', 'admin#1', 'grant.create', 'seeded-' || n, 'load-' || n, '{"reason": "seeded"}'
  FROM generate_series(1, 100000) AS n;
INSERT INTO app_store_notifications (notification_uuid, version, notification_type, signed_date, received_at, environment,
                                     original_transaction_id, transaction_id, user_id, state, signed_payload)
SELECT 'seed-' || n, 2, 'DID_RENEW', now() - interval '470 days', now() - interval '470 days' + n * interval '1 second',
       'Production', (5000000000 + n)::text, (5000000000 + n)::text, 'load-' || n, 'applied', 'seeded'
  FROM generate_series(1, 100000) AS n;
COMMIT;
ANALYZE;
