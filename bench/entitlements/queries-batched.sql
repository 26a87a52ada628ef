-- pgbench script for bench/entitlements/run.sh (`pgbatch` runs): what UserSnapshotLoader sends PostgreSQL for a
-- batch of entitlement reads, 10 random users (about what its batches hold with run.sh's 64 clients): the four statements of
-- UserSnapshotStore once each for all of them (`user_id = ANY(...)`), with generic plans, in one read-only
-- REPEATABLE READ transaction sent as one pipeline (one Sync, one round trip). A transaction is 10 reads.
-- :users is set with `pgbench -D users=N`.
\set u0 random(1, :users)
\set u1 random(1, :users)
\set u2 random(1, :users)
\set u3 random(1, :users)
\set u4 random(1, :users)
\set u5 random(1, :users)
\set u6 random(1, :users)
\set u7 random(1, :users)
\set u8 random(1, :users)
\set u9 random(1, :users)
\startpipeline
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SET LOCAL plan_cache_mode = force_generic_plan;
SELECT o.user_id, t.transaction_id, t.original_transaction_id, t.product_id, t.environment, t.purchase_date,
       t.original_purchase_date, t.expires_date, t.cancellation_date, t.cancellation_reason, t.is_upgraded,
       t.is_trial_period, t.is_in_intro_offer_period, t.ownership, t.quantity, t.web_order_line_item_id,
       t.subscription_group_identifier, t.app_account_token, t.promotional_offer_id
  FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
 WHERE o.user_id = ANY(ARRAY[:u0, :u1, :u2, :u3, :u4, :u5, :u6, :u7, :u8, :u9]::text[]);
SELECT o.user_id, s.original_transaction_id, s.product_id, s.auto_renew_product_id, s.will_renew, s.expiration_intent,
       s.in_billing_retry, s.grace_period_expires_date, s.price_consent_status
  FROM purchase_owners o JOIN subscriptions s USING (original_transaction_id)
 WHERE o.user_id = ANY(ARRAY[:u0, :u1, :u2, :u3, :u4, :u5, :u6, :u7, :u8, :u9]::text[]);
SELECT grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason FROM grants
 WHERE user_id = ANY(ARRAY[:u0, :u1, :u2, :u3, :u4, :u5, :u6, :u7, :u8, :u9]::text[]);
SELECT user_id, currency, balance FROM consumable_balances WHERE user_id = ANY(ARRAY[:u0, :u1, :u2, :u3, :u4, :u5, :u6, :u7, :u8, :u9]::text[]);
COMMIT;
\endpipeline
