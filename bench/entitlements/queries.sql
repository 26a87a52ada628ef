-- pgbench script for bench/entitlements/run.sh: the four statements UserSnapshotStore sends for
-- GET /v1/users/{user_id}/entitlements, for one random user, in one read-only REPEATABLE READ transaction sent as one
-- pipeline (one Sync, one round trip), as the service sends them. :users is set with `pgbench -D users=N`.
\set uid random(1, :users)
\startpipeline
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT t.transaction_id, t.original_transaction_id, t.product_id, t.environment, t.purchase_date,
       t.original_purchase_date, t.expires_date, t.cancellation_date, t.cancellation_reason, t.is_upgraded,
       t.is_trial_period, t.is_in_intro_offer_period, t.ownership, t.quantity, t.web_order_line_item_id,
       t.subscription_group_identifier, t.app_account_token, t.promotional_offer_id
  FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
 WHERE o.user_id = :uid;
SELECT s.original_transaction_id, s.product_id, s.auto_renew_product_id, s.will_renew, s.expiration_intent,
       s.in_billing_retry, s.grace_period_expires_date, s.price_consent_status
  FROM purchase_owners o JOIN subscriptions s USING (original_transaction_id)
 WHERE o.user_id = :uid;
SELECT grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason FROM grants WHERE user_id = :uid;
SELECT currency, balance FROM consumable_balances WHERE user_id = :uid;
COMMIT;
\endpipeline
