-- A consumable refunded, reversed and refunded again is debited again. Refund debits and their reversals are
-- numbered per transaction: the n-th refund debit and the n-th reversal carry `cycle` n, each once (a unique key),
-- and the n-th refund is debited only after the (n-1)-th reversal, the n-th reversal only after the n-th refund,
-- so the ledger always holds as many refunds as reversals, or one more while the transaction is refunded. A
-- notification delivered twice finds its cycle written and writes nothing. A credit is cycle 1, a consume has none.
ALTER TABLE consumable_ledger ADD COLUMN cycle integer;
UPDATE consumable_ledger SET cycle = 1 WHERE transaction_id IS NOT NULL;
ALTER TABLE consumable_ledger ADD CONSTRAINT consumable_ledger_cycle_check
    CHECK ((transaction_id IS NULL) = (cycle IS NULL) AND cycle >= 1 AND (kind <> 'credit' OR cycle = 1));
DROP INDEX consumable_ledger_once_per_transaction;
CREATE UNIQUE INDEX consumable_ledger_once_per_cycle ON consumable_ledger (transaction_id, kind, cycle) WHERE transaction_id IS NOT NULL;
