-- The share of a transaction's price Apple refunded (a signed transaction's revocationPercentage, in thousandths of a
-- percent; for a quantity above 1, of the whole quantity): a consumable's refund takes back that share of its credit,
-- rounded to the nearest unit, and its reversal gives back what the refund took. NULL: the whole (receipts, and
-- every refund recorded before).
ALTER TABLE app_store_transactions
    ADD COLUMN revocation_percentage integer CHECK (revocation_percentage BETWEEN 0 AND 100000);
