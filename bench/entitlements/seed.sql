-- Bench data for bench/entitlements/run.sh: :users users (psql variable, e.g. 100000) named '1' … ':users',
-- written through the service's real tables, with a mix that resembles an app's user base. Products match
-- bench/entitlements/products.json. Times are relative to now(), so most subscriptions are active when the
-- benchmark runs. Run once on a freshly migrated, empty database.
--
-- Per user n:
--   every user       one non-consumable (three products in turn; every 20th family-shared; every 97th refunded)
--   n % 2 = 0        an auto-renewable chain: 3–12 monthly renewals (every 10th of them a yearly chain of 1–3)
--                    plus its subscriptions row; the latest expiry lies between 3 days ago and 26 days ahead,
--                    so about one chain in ten has lapsed (some in grace, some in billing retry)
--   n % 3 = 0        1–4 coin packs (consumables, each its own original transaction) and a coins balance;
--                    every 7th also a gems balance
--   n % 17 = 0       a non-renewing season pass
--   n % 10 = 0       a lifetime grant; every 25th also a revoked one and an expired one
\set ON_ERROR_STOP on
BEGIN;

CREATE TEMPORARY TABLE bench_users ON COMMIT DROP AS
    SELECT n, n::text AS user_id FROM generate_series(1, :users) AS n;

-- Non-consumables.
INSERT INTO purchase_owners (original_transaction_id, user_id, acquired_at)
SELECT (100000000000 + n)::text, user_id, now() - make_interval(days => 400 - n % 365) FROM bench_users;

INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                    original_purchase_date, cancellation_date, cancellation_reason, ownership,
                                    web_order_line_item_id)
SELECT (100000000000 + n)::text, (100000000000 + n)::text,
       (ARRAY['com.bench.removeads', 'com.bench.pro.lifetime', 'com.bench.levels.pack1'])[1 + n % 3],
       CASE WHEN n % 50 = 0 THEN 'Sandbox' ELSE 'Production' END,
       now() - make_interval(days => 400 - n % 365), now() - make_interval(days => 400 - n % 365),
       CASE WHEN n % 97 = 0 THEN now() - interval '5 days' END,
       CASE WHEN n % 97 = 0 THEN '0' END,
       CASE WHEN n % 20 = 0 THEN 'family_shared' ELSE 'purchased' END,
       NULL
  FROM bench_users;

-- Auto-renewable subscription chains: transaction k = 0 … length-1, the last one expiring at `last_expiry`.
CREATE TEMPORARY TABLE bench_chains ON COMMIT DROP AS
    SELECT n, user_id,
           (200000000000 + n)::text AS original_id,
           n % 10 = 0 AS yearly,
           CASE WHEN n % 10 = 0 THEN 1 + n % 3 ELSE 3 + n % 10 END AS length,
           now() + make_interval(days => n % 30 - 3, hours => n % 24) AS last_expiry
      FROM bench_users WHERE n % 2 = 0;

INSERT INTO purchase_owners (original_transaction_id, user_id, acquired_at)
SELECT original_id, user_id, last_expiry - (CASE WHEN yearly THEN interval '1 year' ELSE interval '1 month' END) * length
  FROM bench_chains;

INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                    original_purchase_date, expires_date, is_trial_period, ownership,
                                    web_order_line_item_id, subscription_group_identifier)
SELECT CASE WHEN k = 0 THEN c.original_id ELSE (300000000000 + c.n * 100 + k)::text END,
       c.original_id,
       CASE WHEN c.yearly THEN 'com.bench.premium.yearly' ELSE 'com.bench.premium.monthly' END,
       CASE WHEN c.n % 50 = 0 THEN 'Sandbox' ELSE 'Production' END,
       c.last_expiry - period * (c.length - k),
       c.last_expiry - period * c.length,
       c.last_expiry - period * (c.length - k - 1),
       k = 0 AND c.n % 4 = 0,
       CASE WHEN c.n % 20 = 0 THEN 'family_shared' ELSE 'purchased' END,
       (600000000000 + c.n * 100 + k)::text,
       '20000001'
  FROM bench_chains c
 CROSS JOIN LATERAL (SELECT CASE WHEN c.yearly THEN interval '1 year' ELSE interval '1 month' END AS period) p
 CROSS JOIN LATERAL generate_series(0, c.length - 1) AS k;

INSERT INTO subscriptions (original_transaction_id, product_id, auto_renew_product_id, will_renew, expiration_intent,
                           in_billing_retry, grace_period_expires_date, latest_expires_date, environment,
                           next_refresh_at)
SELECT original_id,
       CASE WHEN yearly THEN 'com.bench.premium.yearly' ELSE 'com.bench.premium.monthly' END,
       CASE WHEN yearly THEN 'com.bench.premium.yearly' ELSE 'com.bench.premium.monthly' END,
       n % 8 <> 0,
       CASE WHEN n % 8 = 0 THEN 1 + n % 2 END,
       last_expiry < now() AND n % 4 = 2,
       CASE WHEN last_expiry < now() AND n % 4 = 2 THEN last_expiry + interval '6 days' END,
       last_expiry,
       CASE WHEN n % 50 = 0 THEN 'Sandbox' ELSE 'Production' END,
       last_expiry
  FROM bench_chains;

-- Coin packs: consumables, one original transaction each.
INSERT INTO purchase_owners (original_transaction_id, user_id, acquired_at)
SELECT (400000000000 + n * 10 + k)::text, user_id, now() - make_interval(days => 30 * k + n % 30)
  FROM bench_users CROSS JOIN LATERAL generate_series(1, 1 + n % 4) AS k
 WHERE n % 3 = 0;

INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                    original_purchase_date, quantity)
SELECT (400000000000 + n * 10 + k)::text, (400000000000 + n * 10 + k)::text,
       CASE WHEN k % 2 = 0 THEN 'com.bench.coins.500' ELSE 'com.bench.coins.100' END,
       'Production', now() - make_interval(days => 30 * k + n % 30), now() - make_interval(days => 30 * k + n % 30), 1
  FROM bench_users CROSS JOIN LATERAL generate_series(1, 1 + n % 4) AS k
 WHERE n % 3 = 0;

INSERT INTO consumable_balances (user_id, currency, balance)
SELECT user_id, 'coins', 100 * (1 + n % 4) + 250 - n % 300 FROM bench_users WHERE n % 3 = 0
UNION ALL
SELECT user_id, 'gems', n % 40 FROM bench_users WHERE n % 21 = 0;

-- Non-renewing season passes.
INSERT INTO purchase_owners (original_transaction_id, user_id, acquired_at)
SELECT (500000000000 + n)::text, user_id, now() - make_interval(days => n % 120) FROM bench_users WHERE n % 17 = 0;

INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                    original_purchase_date)
SELECT (500000000000 + n)::text, (500000000000 + n)::text, 'com.bench.season.pass', 'Production',
       now() - make_interval(days => n % 120), now() - make_interval(days => n % 120)
  FROM bench_users WHERE n % 17 = 0;

-- Grants by hand.
INSERT INTO grants (user_id, entitlement, expires_at, reason, created_by, created_at, revoked_at, revoked_by)
SELECT user_id, 'beta_access', NULL, 'beta tester', 'admin-key-1', now() - interval '60 days', NULL, NULL
  FROM bench_users WHERE n % 10 = 0
UNION ALL
SELECT user_id, 'premium', now() + interval '30 days', 'support goodwill', 'admin-key-1', now() - interval '20 days',
       now() - interval '2 days', 'admin-key-1'
  FROM bench_users WHERE n % 25 = 0
UNION ALL
SELECT user_id, 'pro', now() - interval '10 days', 'trial extension', 'admin-key-1', now() - interval '40 days', NULL, NULL
  FROM bench_users WHERE n % 25 = 0;

COMMIT;

VACUUM ANALYZE;

SELECT 'users' AS what, count(DISTINCT user_id) AS count FROM purchase_owners
UNION ALL SELECT 'purchase_owners', count(*) FROM purchase_owners
UNION ALL SELECT 'app_store_transactions', count(*) FROM app_store_transactions
UNION ALL SELECT 'subscriptions', count(*) FROM subscriptions
UNION ALL SELECT 'consumable_balances', count(*) FROM consumable_balances
UNION ALL SELECT 'grants', count(*) FROM grants;
