-- The share of a transaction's price Apple refunded (a signed transaction's revocationPercentage, in thousandths of a
-- percent; for a quantity above 1, of the whole quantity): a consumable's refund takes back that share of its credit,
-- rounded to the nearest unit, and its reversal gives back what the refund took. NULL: the whole (receipts, and
-- every refund recorded before). When the share of a refund in force changes (a prorated refund, then the rest; a
-- receipt's whole refund, then Apple's statement of the share), the ledger follows with a `refund_adjustment` of the
-- difference, numbered per transaction (`cycle`) so that each is written once.
ALTER TABLE app_store_transactions
    ADD COLUMN revocation_percentage integer CHECK (revocation_percentage BETWEEN 0 AND 100000);

ALTER TABLE consumable_ledger DROP CONSTRAINT consumable_ledger_kind_check;
ALTER TABLE consumable_ledger ADD CONSTRAINT consumable_ledger_kind_check
    CHECK (kind IN ('credit', 'consume', 'refund', 'refund_reversal', 'refund_adjustment'));
