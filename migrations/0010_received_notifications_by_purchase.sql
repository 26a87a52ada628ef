-- The notifications of one purchase still waiting to be applied, oldest signed first: applying one applies those
-- signed before it first (in the same transaction, under the purchase's lock), so that a notification whose first
-- taker died before applying it is not overtaken by a later one of the same purchase.
CREATE INDEX app_store_notifications_received_by_purchase
    ON app_store_notifications (original_transaction_id, signed_date, notification_id) WHERE state = 'received';
