-- The admin reports read transactions by purchase date (purchases per bucket) and by expiry (subscriptions live
-- at a bucket's end); without these, each report scans every transaction.
CREATE INDEX app_store_transactions_purchased ON app_store_transactions (purchase_date);
CREATE INDEX app_store_transactions_expiring ON app_store_transactions (expires_date) WHERE expires_date IS NOT NULL;
